//! Container restart policies and rules (KEP-5307) and `RestartAllContainers` (KEP-5532) on
//! containerd: a rule's exit code restarts a container the pod's policy would not, a
//! container's own policy overrides the pod's, an init container with `Never` fails the pod,
//! and a reset runs the init containers again in the same sandbox.
// Tests of the real binary: real timeouts and timings.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::serve::{Daemon, text};
use podwright_e2e::*;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn a_rule_restarts_on_exit_code_42_and_not_on_0_in_a_never_pod() {
    let pod = pod_name("rule-42");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  volumes: [{{name: data, emptyDir: {{}}}}]
  containers:
  - name: flaky
    image: localhost/busybox:1.36
    restartPolicy: Never
    restartPolicyRules:
    - action: Restart
      exitCodes: {{operator: In, values: [42]}}
    volumeMounts: [{{name: data, mountPath: /data}}]
    command: ['sh', '-c', 'if [ -e /data/once ]; then echo second; exit 0; fi; touch /data/once; echo first; exit 42']
"#
        ),
        &[],
    );
    o.assert_code(0);
    let p = o.single_pod();
    assert_eq!(phase(&p), "Succeeded", "{}", o.context());
    let st = container_status(&p, "flaky");
    assert_eq!(st["restartCount"], 1, "{}", o.context());
    assert_eq!(st["state"]["terminated"]["exitCode"], 0, "{}", o.context());
    assert_eq!(st["lastState"]["terminated"]["exitCode"], 42, "{}", o.context());
    assert_eq!(o.output_of("flaky"), ["first", "second"], "{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn an_app_container_with_never_in_an_on_failure_pod_is_not_restarted() {
    let pod = pod_name("never-in-onfailure");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: OnFailure
  volumes: [{{name: data, emptyDir: {{}}}}]
  containers:
  - name: once
    image: localhost/busybox:1.36
    restartPolicy: Never
    command: ['sh', '-c', 'exit 3']
  - name: retried
    image: localhost/busybox:1.36
    volumeMounts: [{{name: data, mountPath: /data}}]
    command: ['sh', '-c', 'if [ -e /data/failed ]; then exit 0; fi; touch /data/failed; exit 1']
"#
        ),
        &[],
    );
    o.assert_code(1);
    let p = o.single_pod();
    assert_eq!(phase(&p), "Failed", "{}", o.context());
    let once = container_status(&p, "once");
    assert_eq!(once["restartCount"], 0, "{}", o.context());
    assert_eq!(once["state"]["terminated"]["exitCode"], 3, "{}", o.context());
    let retried = container_status(&p, "retried");
    assert_eq!(retried["restartCount"], 1, "the pod's OnFailure still holds for it: {}", o.context());
    assert_eq!(retried["state"]["terminated"]["exitCode"], 0, "{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn an_init_container_with_never_that_fails_fails_an_always_pod() {
    let pod = pod_name("init-never");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Always
  initContainers:
  - name: setup
    image: localhost/busybox:1.36
    restartPolicy: Never
    command: ['sh', '-c', 'exit 5']
  containers:
  - name: app
    image: localhost/busybox:1.36
    command: ['sleep', '3600']
"#
        ),
        &[],
    );
    o.assert_code(1);
    let p = o.single_pod();
    assert_eq!(phase(&p), "Failed", "{}", o.context());
    let setup = container_status(&p, "setup");
    assert_eq!(setup["restartCount"], 0, "{}", o.context());
    assert_eq!(setup["state"]["terminated"]["exitCode"], 5, "{}", o.context());
    assert!(container_status(&p, "app")["state"]["running"].is_null(), "{}", o.context());
    assert!(o.events_with_reason(&pod, "spec.containers{app}", "Started").is_empty(), "{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn restart_all_containers_runs_the_init_containers_again_in_the_same_sandbox() {
    let d = Daemon::start();
    let pod = pod_name("restart-all");
    // Every change of the pod: the condition, the pod's IP, the restart counts.
    let template = r#"{.status.conditions[?(@.type=="AllContainersRestarting")].status} ip={.status.podIP} restarts={.status.initContainerStatuses[*].restartCount},{.status.containerStatuses[*].restartCount}{"\n"}"#;
    let mut watch = d
        // Every pod of this fresh daemon (a watch of one pod by name would end before it exists).
        .kubectl_cmd(None, &["get", "pods", "-w", "-o", &format!("jsonpath={template}")])
        .stdout(Stdio::piped())
        .spawn()
        .expect("kubectl -w");
    let (tx, rx) = mpsc::channel();
    let stdout = watch.stdout.take().expect("piped");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let m = Manifest::new(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 30
  volumes: [{{name: data, emptyDir: {{}}}}]
  initContainers:
  - name: setup
    image: localhost/busybox:1.36
    volumeMounts: [{{name: data, mountPath: /data}}]
    command: ['sh', '-c', 'echo ran >> /data/setup']
  containers:
  - name: main
    image: localhost/busybox:1.36
    # A preStop hook the reset must not run (it would hold the kill for 20 s).
    lifecycle: {{preStop: {{exec: {{command: ['sleep', '20']}}}}}}
    command: ['sleep', '3600']
  - name: worker
    image: localhost/busybox:1.36
    restartPolicy: Never
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes: {{operator: In, values: [88]}}
    volumeMounts: [{{name: data, mountPath: /data}}]
    command: ['sh', '-c', 'if [ -e /data/round ]; then exec sleep 3600; fi; touch /data/round; sleep 2; exit 88']
"#
    ));
    let start = Instant::now();
    d.ok(&["create", "-f", m.path_str()]);
    let done = |o: &str| o.trim() == "1,1 1";
    let counts = d.wait_for(
        &[
            "get",
            "pod",
            &pod,
            "-o",
            "jsonpath={.status.initContainerStatuses[*].restartCount},{.status.containerStatuses[*].restartCount}",
        ],
        Duration::from_secs(60),
        done,
    );
    assert!(done(&counts), "{counts}\n{}", d.log());
    let took = start.elapsed();
    d.wait_for(&["get", "pod", &pod, "--no-headers"], Duration::from_secs(30), |o| o.contains("2/2"));
    let mut seen: Vec<String> = vec![];
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            seen.push(l);
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(seen.iter().any(|l| l.starts_with("True ")), "the condition was never seen true: {seen:?}");
    assert!(seen.last().is_some_and(|l| l.starts_with("False ")), "{seen:?}");
    // One pod IP all along, and one sandbox.
    let ips: std::collections::BTreeSet<&str> = seen
        .iter()
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("ip=")))
        .filter(|ip| !ip.is_empty())
        .collect();
    assert_eq!(ips.len(), 1, "{seen:?}");
    assert_eq!(sandbox_runtime_handlers(&pod).len(), 1, "a single sandbox");
    // The init container ran twice in the volume that stayed.
    assert_eq!(d.ok(&["exec", &pod, "-c", "worker", "--", "cat", "/data/setup"]), "ran\nran\n");
    let json: serde_json::Value = serde_json::from_str(&d.ok(&["get", "pod", &pod, "-o", "json"])).expect("JSON");
    assert_eq!(condition(&json, "Initialized")["status"], "True");
    assert_eq!(condition(&json, "AllContainersRestarting")["status"], "False");
    assert_eq!(phase(&json), "Running");
    // Each container's last state is the instance the reset removed (kubernetes #136964):
    // worker's exit 88 that asked for it, main killed at once, setup's first run.
    let last = |list: &str, name: &str| {
        let all = json["status"][list].as_array().expect("statuses");
        let st = all.iter().find(|s| s["name"] == name).expect("status");
        st["lastState"]["terminated"].clone()
    };
    assert_eq!(last("containerStatuses", "worker")["exitCode"], 88, "{json}");
    assert_eq!(last("containerStatuses", "main")["exitCode"], 137, "{json}");
    assert_eq!(last("initContainerStatuses", "setup")["exitCode"], 0, "{json}");
    assert_eq!(last("initContainerStatuses", "setup")["reason"], "Completed", "{json}");
    // Killed without its preStop hook or a grace period.
    assert!(took < Duration::from_secs(20), "the reset waited for main's preStop hook: {took:?}");
    let events =
        text(&d.kubectl(None, &["get", "events", "--field-selector", &format!("involvedObject.name={pod}")]).stdout);
    assert!(!events.contains("FailedPreStopHook"), "{events}");
}
