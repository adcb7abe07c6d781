//! Issue 8's rules on real containerd: probes, hooks' and sidecars' output, long pod names,
//! empty env values, and what `--timeout` reports.

use podwright_e2e::*;

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
    assert!(
        !o.events().iter().any(|e| e["message"].as_str().unwrap_or_default().contains("config")),
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
