//! Issue 8's kubelet rules on real containerd, one test per rule, each failing without its fix:
//! what a user sees (restart counts, reasons, start order, exit codes, probes, hooks' and
//! sidecars' output, long pod names, empty env values, what `--timeout` reports) is what a 1.33
//! kubelet shows. The planner's table tests hold the exact rules; these show them happen for
//! real.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;
use std::time::Duration;

const BUSYBOX: &str = "localhost/busybox:1.36";

#[test]
fn rule_1_a_start_failure_backs_off_like_a_crash() {
    let pod = pod_name("rule1-start-error");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["/no/such/binary"]
"#
        ),
        &["--timeout", "16"],
    );
    o.assert_code(124);
    // Fails at once, is retried at once, then waits 10 s: three attempts in 16 s, with the
    // crash loop's wait in between (every 10 s without back-off would be two, never waiting).
    let statuses = o.statuses(&pod);
    assert!(statuses.iter().any(|s| s == "CrashLoopBackOff"), "{statuses:?}\n{}", o.context());
    let backoff = o.events_with_reason(&pod, "spec.containers{app}", "BackOff");
    assert!(!backoff.is_empty(), "{}", o.context());
    assert_eq!(backoff[0]["type"], "Warning");
    let failed = o.events_with_reason(&pod, "spec.containers{app}", "Failed");
    assert!(failed.iter().any(|e| e["message"].as_str().unwrap_or("").starts_with("Error: ")), "{}", o.context());
    let p = o.pod(&pod);
    let app = container_status(&p, "app");
    assert_eq!(app["restartCount"], 2, "{app}\n{}", o.context());
    let end = last_termination(app);
    assert_eq!((end["reason"].as_str(), end["exitCode"].as_i64()), (Some("StartError"), Some(128)), "{app}");
    assert_nothing_left(&p);
}

#[test]
fn rule_2_restarts_after_liveness_kills_back_off() {
    let pod = pod_name("rule2-liveness");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    livenessProbe:
      exec: {{command: ["false"]}}
      periodSeconds: 1
      failureThreshold: 1
"#
        ),
        &["--timeout", "20"],
    );
    o.assert_code(124);
    // Killed about every 1-2 s; the first two restarts are immediate, then the back-off holds
    // the third for 10 s: the container is seen waiting in CrashLoopBackOff, and it starts at
    // most four times in 20 s (a restart on every kill would be about ten).
    let statuses = o.statuses(&pod);
    assert!(statuses.iter().any(|s| s == "CrashLoopBackOff"), "{statuses:?}\n{}", o.context());
    let started = o.events_with_reason(&pod, "spec.containers{app}", "Started");
    let starts: i64 = started.iter().map(|e| e["count"].as_i64().unwrap_or(1)).sum();
    assert!((3..=4).contains(&starts), "started {starts} times\n{}", o.context());
    let killing = o.events_with_reason(&pod, "spec.containers{app}", "Killing");
    assert!(
        killing.iter().any(|e| e["message"] == "Container app failed liveness probe, will be restarted"),
        "{}",
        o.context()
    );
    assert!(!o.events_with_reason(&pod, "spec.containers{app}", "BackOff").is_empty(), "{}", o.context());
}

#[test]
fn rule_3_the_next_app_container_waits_for_the_one_before_and_its_post_start_hook() {
    let pod = pod_name("rule3-order");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  volumes: [{{name: shared, emptyDir: {{}}}}]
  containers:
  - name: proxy
    image: {BUSYBOX}
    command: ["sh", "-c", "sleep 4"]
    volumeMounts: [{{name: shared, mountPath: /shared}}]
    lifecycle:
      postStart:
        exec: {{command: ["sh", "-c", "sleep 2; touch /shared/proxy-ready"]}}
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c", "if [ -f /shared/proxy-ready ]; then echo proxy was ready; else echo proxy was not ready; fi"]
    volumeMounts: [{{name: shared, mountPath: /shared}}]
"#
        ),
        &[],
    );
    o.assert_code(0);
    assert_eq!(o.output_of("app"), vec!["proxy was ready"], "{}", o.context());
    let p = o.pod(&pod);
    assert_eq!(phase(&p), "Succeeded", "{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn rule_4_a_crashing_sidecar_holds_back_nothing_after_it() {
    let pod = pod_name("rule4-sidecar");
    // The sidecar runs 2 s, then crashes every time: restarted at once, then held for 10 s.
    // The init container after it completes at 6 s and the app runs at once, in the sidecar's
    // back-off: the pod completes before the sidecar's third start.
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: side
    image: {BUSYBOX}
    restartPolicy: Always
    command: ["sh", "-c", "sleep 2; exit 1"]
  - name: init
    image: {BUSYBOX}
    command: ["sh", "-c", "sleep 6; echo init done"]
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c", "echo app ran"]
"#
        ),
        &[],
    );
    o.assert_code(0);
    assert_eq!(o.output_of("app"), vec!["app ran"], "{}", o.context());
    let p = o.pod(&pod);
    assert_eq!(phase(&p), "Succeeded", "{}", o.context());
    let side = container_status(&p, "side");
    assert_eq!(side["restartCount"], 1, "the app did not wait for a third start: {side}\n{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn rule_5_last_state_survives_restarts_of_init_containers_and_sidecars() {
    let pod = pod_name("rule5-last-state");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: OnFailure
  terminationGracePeriodSeconds: 2
  volumes: [{{name: shared, emptyDir: {{}}}}]
  initContainers:
  - name: init
    image: {BUSYBOX}
    command: ["sh", "-c", "[ -f /shared/init-once ] && exit 0; touch /shared/init-once; exit 1"]
    volumeMounts: [{{name: shared, mountPath: /shared}}]
  - name: side
    image: {BUSYBOX}
    restartPolicy: Always
    command: ["sh", "-c", "trap 'exit 0' TERM; [ -f /shared/side-once ] || {{ touch /shared/side-once; exit 3; }}; while true; do sleep 0.2; done"]
    volumeMounts: [{{name: shared, mountPath: /shared}}]
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c", "sleep 3"]
"#
        ),
        &[],
    );
    o.assert_code(0);
    let p = o.pod(&pod);
    assert_eq!(phase(&p), "Succeeded", "{}", o.context());
    let init = container_status(&p, "init");
    assert_eq!(init["restartCount"], 1, "{init}");
    assert_eq!(init["lastState"]["terminated"]["exitCode"], 1, "{init}");
    assert_eq!(init["state"]["terminated"]["exitCode"], 0, "{init}");
    let side = container_status(&p, "side");
    assert_eq!(side["restartCount"], 1, "{side}");
    assert_eq!(side["lastState"]["terminated"]["exitCode"], 3, "{side}");
    assert_nothing_left(&p);
}

#[test]
fn rule_7_a_deleted_pod_reports_containers_that_never_ran_as_lost() {
    let pod = pod_name("rule7-unknown");
    let o = interrupt_when(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: a
    image: {BUSYBOX}
    command: ["sh", "-c", "trap 'exit 0' TERM; echo up; while true; do sleep 0.2; done"]
  - name: b
    image: localhost/not-on-this-machine:1
    imagePullPolicy: Never
"#
        ),
        &[],
        "[a] up",
        Duration::from_secs(20),
    );
    // Rule 12 on the way: the image error keeps the pod Pending while `a` runs.
    let statuses = o.statuses(&pod);
    assert!(statuses.iter().any(|s| s == "ErrImageNeverPull"), "{statuses:?}\n{}", o.context());
    let p = o.pod(&pod);
    assert_eq!(phase(&p), "Failed", "{}", o.context());
    let b = &container_status(&p, "b")["state"]["terminated"];
    assert_eq!(b["reason"], "ContainerStatusUnknown", "{}", o.context());
    assert_eq!(b["exitCode"], 137);
    assert_eq!(b["message"], "The container could not be located when the pod was terminated");
    assert_eq!(container_status(&p, "a")["state"]["terminated"]["exitCode"], 0, "{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn rule_8_a_zero_grace_period_still_runs_pre_stop_and_sends_term() {
    let pod = pod_name("rule8-grace0");
    let o = interrupt_when(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c", "trap 'cat /tmp/pre-stop; echo got TERM; exit 0' TERM; echo up; while true; do sleep 0.2; done"]
    lifecycle:
      preStop:
        exec: {{command: ["sh", "-c", "echo pre-stop ran > /tmp/pre-stop"]}}
"#
        ),
        &[],
        "[app] up",
        Duration::from_secs(20),
    );
    assert_eq!(o.output_of("app"), vec!["up", "pre-stop ran", "got TERM"], "{}", o.context());
    let p = o.pod(&pod);
    assert_eq!(container_status(&p, "app")["state"]["terminated"]["exitCode"], 0, "{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn rule_6_readiness_is_probed_once_the_startup_probe_succeeds() {
    let pod = pod_name("ready-after-startup");
    // Readiness has a 30 s period: only the probe at the startup probe's success makes the
    // container ready before the 8 s timeout. The timeout reports the pod as it was then.
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: server
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'sleep 1; touch /tmp/started; trap "exit 0" TERM; while true; do sleep 0.1; done']
    startupProbe:
      exec: {{command: ['test', '-f', '/tmp/started']}}
      periodSeconds: 1
      failureThreshold: 30
    readinessProbe:
      exec: {{command: ['true']}}
      periodSeconds: 30
"#
        ),
        &["--timeout", "8"],
    );
    o.assert_code(124);
    let p = o.single_pod();
    assert_eq!(phase(&p), "Running", "{}", o.context());
    assert_eq!(condition(&p, "Ready")["status"], "True", "{}", o.context());
    let s = container_status(&p, "server");
    assert_eq!((s["started"].as_bool(), s["ready"].as_bool()), (Some(true), Some(true)), "{s}");
    assert!(s["state"]["running"].is_object(), "{s}");
    assert!(o.progress(&pod).iter().any(|l| l.status == "Running" && l.ready == "1/1"), "{}", o.context());
    // The teardown's events follow.
    assert!(!o.events_with_reason(&pod, "spec.containers{server}", "Killing").is_empty(), "{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn run_timeout_reports_a_pod_in_init_crash_loop_back_off_where_it_was() {
    let pod = pod_name("timeout-init-loop");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: init-crash
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'exit 3']
  containers:
  - name: app
    image: localhost/busybox:1.36
    command: ['true']
"#
        ),
        &["--timeout", "6"],
    );
    o.assert_code(124);
    let p = o.single_pod();
    assert_eq!(phase(&p), "Pending", "{}", o.context());
    let init = container_status(&p, "init-crash");
    assert_eq!(init["state"]["waiting"]["reason"], "CrashLoopBackOff", "{init}");
    assert_eq!(init["lastState"]["terminated"]["exitCode"], 3, "{init}");
    assert!(init["restartCount"].as_i64() >= Some(1), "{init}");
    assert_nothing_left(&p);
}

#[test]
fn rule_13_every_containers_output_is_streamed_sidecars_and_hooks_included() {
    let pod = pod_name("output");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: proxy
    image: localhost/busybox:1.36
    restartPolicy: Always
    command: ['sh', '-c', 'echo proxy up; trap "echo proxy down; exit 0" TERM; while true; do sleep 0.1; done']
    lifecycle:
      postStart:
        exec: {{command: ['sh', '-c', 'echo waiting for config; echo config late >&2']}}
      preStop:
        exec: {{command: ['sh', '-c', 'echo draining']}}
  containers:
  - name: app
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'echo app done']
"#
        ),
        &[],
    );
    o.assert_code(0);
    assert_eq!(o.output_of("proxy"), ["proxy up", "proxy down"], "{}", o.context());
    assert_eq!(o.output_of("proxy postStart"), ["waiting for config", "config late"], "{}", o.context());
    assert_eq!(o.output_of("proxy preStop"), ["draining"], "{}", o.context());
    assert_eq!(o.output_of("app"), ["app done"], "{}", o.context());
    // Hooks' output stays out of the events.
    let printed = ["waiting for config", "config late", "draining"];
    assert!(
        !o.events().iter().any(|e| printed.iter().any(|p| e["message"].as_str().unwrap_or_default().contains(p))),
        "{}",
        o.context()
    );
}

#[test]
fn rule_14_a_long_pod_name_and_an_env_entry_without_a_value_run() {
    let pod = format!("{}-{}", pod_name("long"), "n".repeat(70));
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: localhost/busybox:1.36
    command: ['sh', '-c', 'hostname; env | grep ^EMPTY=; echo "set=${{EMPTY+yes}}"']
    env:
    - name: EMPTY
"#
        ),
        &[],
    );
    o.assert_code(0);
    let truncated = pod[..63].trim_end_matches(['-', '.']);
    assert_eq!(o.output_of("app"), [truncated, "EMPTY=", "set=yes"], "{}", o.context());
    assert_nothing_left(&o.single_pod());
}
