//! RuntimeClass and Pod OS for real, on the embedded containerd and its second runc-based
//! handler `runc-alt`. An unknown class is refused at admission (the API server's RuntimeClass
//! plugin); a handler the runtime lacks fails the pod with the kubelet's `FailedCreatePodSandBox`
//! event and message instead of retrying forever; a pod for another OS is rejected by the node's
//! admission and fails.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;
use serde_json::Value;
use std::time::Duration;

const BUSYBOX: &str = "localhost/busybox:1.36";

fn classes(prefix: &str) -> String {
    format!(
        r#"apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {{name: {prefix}-alt}}
handler: runc-alt
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {{name: {prefix}-kata}}
handler: kata
"#
    )
}

fn pod(name: &str, spec_line: &str, command: &str) -> String {
    format!(
        r#"---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  {spec_line}
  restartPolicy: Never
  containers:
  - {{name: app, image: {BUSYBOX}, command: [sh, -c, '{command}']}}
"#
    )
}

/// Pod-level events (no field path) of pod `name` with this reason.
fn pod_events(o: &Outcome, name: &str, reason: &str) -> Vec<Value> {
    let of_pod = |e: &Value| e["involvedObject"]["name"] == name && e["involvedObject"]["fieldPath"].is_null();
    o.events().into_iter().filter(|e| of_pod(e) && e["reason"] == reason).collect()
}

/// A pod whose class names `runc-alt` runs on that handler, and to completion.
#[test]
fn a_pod_of_a_class_runs_on_its_handler() {
    let name = pod_name("e2e-rtclass-alt");
    let manifest = classes(&name) + &pod(&name, &format!("runtimeClassName: {name}-alt"), "sleep 2; echo done");
    let file = Manifest::new(&manifest);
    let mut running = Running::spawn(&run_args(file.path_str(), &[]), None);
    assert!(running.wait_for_stderr("Running", Duration::from_secs(30)), "{}", running.stderr_so_far());
    let handlers = sandbox_runtime_handlers(&name);
    let o = running.wait();
    o.assert_code(0);
    assert_eq!(handlers, ["runc-alt"], "{}", o.context());
    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Succeeded", "{}", o.context());
    assert_eq!(o.output_of("app"), ["done"], "{}", o.context());
    assert_nothing_left(&pod);
}

/// A pod of a class that does not exist is refused at load, as the API server's RuntimeClass
/// admission refuses it, naming the field; nothing starts.
#[test]
fn an_unknown_class_is_refused() {
    let name = pod_name("e2e-rtclass-unknown");
    let o = run_manifest(&(classes(&name) + &pod(&name, &format!("runtimeClassName: {name}-gvisor"), "true")), &[]);
    o.assert_code(2);
    let want = format!(
        "The Pod \"{name}\" is invalid: spec.runtimeClassName: Forbidden: pod rejected: RuntimeClass \"{name}-gvisor\" not found"
    );
    assert!(o.stderr.contains(&want), "{}", o.context());
    assert!(o.all_progress().is_empty(), "{}", o.context());
}

/// A class whose handler containerd does not have: no sandbox, and instead of retrying forever
/// the pod fails with the kubelet's `FailedCreatePodSandBox` event, once, its message the pod's
/// status message.
#[test]
fn a_missing_handler_fails_the_pod() {
    let name = pod_name("e2e-rtclass-nohandler");
    let o = run_manifest(&(classes(&name) + &pod(&name, &format!("runtimeClassName: {name}-kata"), "true")), &[]);
    o.assert_code(1);
    let p = o.single_pod();
    assert_eq!(phase(&p), "Failed", "{}", o.context());
    assert_eq!(p["status"]["reason"], "FailedCreatePodSandBox", "{}", o.context());
    let message = p["status"]["message"].as_str().unwrap_or_default().to_string();
    assert!(
        message.starts_with("Failed to create pod sandbox: ")
            && message.contains("no runtime for \"kata\" is configured"),
        "{}",
        o.context()
    );
    let events = pod_events(&o, &name, "FailedCreatePodSandBox");
    assert_eq!(events.len(), 1, "{}", o.context());
    assert_eq!(events[0]["message"], message.as_str());
    assert_eq!(events[0]["type"], "Warning");
    assert!(o.events_with_reason(&name, "spec.containers{app}", "Created").is_empty(), "{}", o.context());
    assert_nothing_left(&p);
}

/// A pod for Windows is rejected by the node: it fails with the kubelet's reason and message,
/// and nothing of it is made.
#[test]
fn a_pod_for_another_os_is_rejected() {
    let name = pod_name("e2e-pod-os");
    let o = run_manifest(&pod(&name, "os: {name: windows}", "true"), &[]);
    o.assert_code(1);
    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Failed", "{}", o.context());
    assert_eq!(pod["status"]["reason"], "PodOSNotSupported", "{}", o.context());
    assert_eq!(
        pod["status"]["message"],
        "Pod was rejected: Failed to admit pod as the OS field doesn't match node OS",
        "{}",
        o.context()
    );
    let rejected = pod_events(&o, &name, "PodOSNotSupported");
    assert_eq!(rejected.len(), 1, "{}", o.context());
    assert_eq!(rejected[0]["message"], "Failed to admit pod as the OS field doesn't match node OS");
    assert_eq!(rejected[0]["type"], "Warning");
    assert!(o.events_with_reason(&name, "spec.containers{app}", "Created").is_empty(), "{}", o.context());
    assert_nothing_left(&pod);
}

/// Through `podwright serve` and kubectl: a RuntimeClass created and listed (`NAME HANDLER AGE`),
/// a pod of it running on its handler with the class's overhead set on it, and a pod of a class
/// that does not exist refused as the API server's RuntimeClass admission refuses it.
#[test]
fn runtime_classes_through_serve_and_kubectl() {
    let d = podwright_e2e::serve::Daemon::start();
    let name = pod_name("e2e-rtclass-serve");
    let class = Manifest::new(&format!(
        "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {{name: {name}}}\nhandler: runc-alt\noverhead: {{podFixed: {{cpu: 10m, memory: 16Mi}}}}\n"
    ));
    d.ok(&["create", "-f", class.path_str()]);
    let listed = d.ok(&["get", "runtimeclass"]);
    let lines: Vec<Vec<&str>> = listed.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["NAME", "HANDLER", "AGE"], "{listed}");
    assert!(lines.iter().any(|l| l[..2] == [name.as_str(), "runc-alt"]), "{listed}");

    let of_class = Manifest::new(&pod(&name, &format!("runtimeClassName: {name}"), "sleep 30").replace("---\n", ""));
    d.ok(&["create", "-f", of_class.path_str()]);
    d.wait_for(&["get", "pod", &name, "--no-headers"], Duration::from_secs(60), |o| o.contains("Running"));
    assert_eq!(d.ok(&["get", "pod", &name, "-o", "jsonpath={.spec.overhead.memory}"]), "16Mi");
    assert_eq!(sandbox_runtime_handlers(&name), ["runc-alt"]);

    let unknown = Manifest::new(
        &pod(&format!("{name}-x"), &format!("runtimeClassName: {name}-gvisor"), "true").replace("---\n", ""),
    );
    let err = d.fails(&["create", "-f", unknown.path_str()]);
    let want = format!("pods \"{name}-x\" is forbidden: pod rejected: RuntimeClass \"{name}-gvisor\" not found");
    assert!(err.contains("Error from server (Forbidden)") && err.contains(&want), "{err}");
    d.ok(&["delete", "pod", &name, "--grace-period=1"]);
    d.ok(&["delete", "runtimeclass", &name]);
}
