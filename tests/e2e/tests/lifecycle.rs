//! Lifecycle beyond init containers, for real: termination messages, a Job-like pod with a
//! sidecar, the active deadline during init, `--grace-period 0`, and the image's STOPSIGNAL.
// Tests of the real binary: real timeouts and timings.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;
use std::time::{Duration, Instant};

#[test]
fn termination_messages_from_the_file_and_from_the_log() {
    let pod = pod_name("tm");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  containers:
  - name: writes
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'printf "all done" > /dev/termination-log; exit 1']
  - name: custom-path
    image: localhost/busybox:1.36
    terminationMessagePath: /tmp/why
    command: ['sh', '-c', 'printf "custom" > /tmp/why']
  - name: logs
    image: localhost/busybox:1.36
    terminationMessagePolicy: FallbackToLogsOnError
    command: ['sh', '-c', 'echo first; echo last words; exit 2']
"#
        ),
        &[],
    );
    o.assert_code(1);
    let p = o.single_pod();
    let msg = |c: &str| container_status(&p, c)["state"]["terminated"]["message"].clone();
    assert_eq!(msg("writes"), "all done", "{}", o.context());
    assert_eq!(msg("custom-path"), "custom", "{}", o.context());
    assert_eq!(msg("logs"), "first\nlast words", "{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn job_like_pod_with_a_sidecar_completes_and_the_sidecar_is_stopped() {
    let pod = pod_name("sidecar-job");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 5
  initContainers:
  - name: logshipper
    image: localhost/busybox:1.36
    restartPolicy: Always
    command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 0.2; done']
  containers:
  - name: job
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'sleep 1; echo job done']
"#
        ),
        &[],
    );
    o.assert_code(0);
    let p = o.single_pod();
    assert_eq!(phase(&p), "Succeeded", "{}", o.context());
    let side = container_status(&p, "logshipper");
    let job = container_status(&p, "job");
    // The sidecar started before the job and was stopped after the job finished.
    assert!(terminated_time(side, "startedAt") <= terminated_time(job, "startedAt"), "{}", o.context());
    assert!(terminated_time(side, "finishedAt") >= terminated_time(job, "finishedAt"), "{}", o.context());
    assert_eq!(o.events_with_reason(&pod, "spec.initContainers{logshipper}", "Killing").len(), 1, "{}", o.context());
    assert!(o.statuses(&pod).iter().any(|s| s == "Completed"), "{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn active_deadline_fails_a_pod_stuck_in_init() {
    let pod = pod_name("deadline");
    let started = Instant::now();
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Always
  activeDeadlineSeconds: 3
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: stuck
    image: localhost/busybox:1.36
    command: ['sleep', '600']
  containers:
  - name: app
    image: localhost/busybox:1.36
    command: ['true']
"#
        ),
        &[],
    );
    o.assert_code(1);
    assert!(started.elapsed() < Duration::from_secs(20), "{}", o.context());
    let p = o.single_pod();
    assert_eq!(phase(&p), "Failed", "{}", o.context());
    assert_eq!(p["status"]["reason"], "DeadlineExceeded", "{}", o.context());
    assert_eq!(p["status"]["message"], "Pod was active on the node longer than the specified deadline");
    assert_eq!(deadline_events_without_path(&o, &pod), 1, "{}", o.context());
    assert!(container_status(&p, "app")["containerID"].is_null(), "the app never started: {}", o.context());
    assert_nothing_left(&p);
}

/// Pod-level events have no fieldPath.
fn deadline_events_without_path(o: &Outcome, pod: &str) -> usize {
    o.events()
        .iter()
        .filter(|e| {
            e["involvedObject"]["name"] == pod
                && e["involvedObject"]["fieldPath"].is_null()
                && e["reason"] == "DeadlineExceeded"
        })
        .count()
}

#[test]
fn grace_period_zero_stops_at_once() {
    let pod = pod_name("grace0");
    let o = interrupt_when(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 60
  containers:
  - name: stubborn
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'trap "" TERM; echo up; while true; do sleep 1; done']
"#
        ),
        &["--grace-period", "0"],
        "[stubborn] up",
        Duration::from_secs(15),
    );
    o.assert_code(1);
    let p = o.single_pod();
    assert_eq!(phase(&p), "Failed", "{}", o.context());
    assert_eq!(container_status(&p, "stubborn")["state"]["terminated"]["exitCode"], 137, "{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn a_graceful_stop_sends_the_images_stop_signal() {
    let pod = pod_name("stopsignal");
    let o = interrupt_when(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  terminationGracePeriodSeconds: 20
  containers:
  - name: app
    image: localhost/busybox-stopsignal:1.36
    command: ['sh', '-c', 'trap "echo got USR1; exit 0" USR1; trap "echo got TERM; exit 1" TERM; echo up; while true; do sleep 0.2; done']
"#
        ),
        &[],
        "[app] up",
        Duration::from_secs(15),
    );
    o.assert_code(0);
    assert_eq!(o.output_of("app"), vec!["up", "got USR1"], "{}", o.context());
    let p = o.single_pod();
    assert_eq!(container_status(&p, "app")["state"]["terminated"]["exitCode"], 0, "{}", o.context());
    assert_nothing_left(&p);
}
