//! Ephemeral storage on real containerd: a container writing into its writable layer past its
//! `ephemeral-storage` limit gets the pod evicted with the kubelet's message (the pod's when it
//! is the only limited container, the container's own when the pod has room left), a pod that
//! only requests storage runs, and `serve`'s Node shows the root directory's filesystem as its
//! ephemeral storage and refuses a pod asking for more.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::serve::Daemon;
use podwright_e2e::*;
use serde_json::Value;
use std::time::Duration;

const BUSYBOX: &str = "localhost/busybox:1.36";

/// Writes 16Mi into the container's own filesystem (its writable layer), then waits.
const FILL: &str = "dd if=/dev/zero of=/tmp/fill bs=1048576 count=16 2>/dev/null && echo filled && sleep 3600";

/// Runs `fill` (limited to 8Mi) beside `beside`; the pod must end evicted with `message`.
fn assert_fill_evicted(name: &str, beside: &str, message: &str) {
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 30
  containers:
  - name: fill
    image: {BUSYBOX}
    command: [sh, -c, '{FILL}']
    resources: {{limits: {{ephemeral-storage: 8Mi}}}}
{beside}"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(1);
    assert_eq!(o.output_of("fill"), ["filled"]);
    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Failed", "{}", o.context());
    assert_eq!((pod["status"]["reason"].as_str(), pod["status"]["message"].as_str()), (Some("Evicted"), Some(message)));
    // Like every local-storage eviction, no DisruptionTarget condition.
    let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
    assert!(conditions.iter().all(|c| c["type"] != "DisruptionTarget"), "{conditions:?}");
    let evicted: Vec<Value> = o.events().into_iter().filter(|e| e["reason"] == "Evicted").collect();
    assert_eq!(evicted.len(), 1, "{}", o.context());
    assert_eq!((evicted[0]["type"].as_str(), evicted[0]["message"].as_str()), (Some("Warning"), Some(message)));
    // Stopped, and not restarted under Always.
    assert_eq!(container_status(&pod, "fill")["restartCount"], 0);
    assert_nothing_left(&pod);
}

#[test]
fn a_lone_container_writing_past_its_limit_gets_the_pod_evicted() {
    // The pod's limit is its one container's: the kubelet checks the pod's total first.
    let message = "Pod ephemeral local storage usage exceeds the total limit of containers 8Mi. ";
    assert_fill_evicted(&pod_name("storage-pod-limit"), "", message);
}

#[test]
fn a_container_writing_past_its_own_limit_gets_the_pod_evicted() {
    let roomy = format!(
        "  - {{name: roomy, image: {BUSYBOX}, command: [sleep, '3600'], resources: {{limits: {{ephemeral-storage: 64Mi}}}}}}\n"
    );
    let message = "Container fill exceeded its local ephemeral storage limit \"8Mi\". ";
    assert_fill_evicted(&pod_name("storage-container-limit"), &roomy, message);
}

#[test]
fn a_pod_requesting_ephemeral_storage_runs() {
    let name = pod_name("storage-request");
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'echo ran']
    resources: {{requests: {{ephemeral-storage: 64Mi}}}}
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    assert_eq!(o.output_of("app"), ["ran"]);
    assert_eq!(phase(&o.single_pod()), "Succeeded", "{}", o.context());
}

/// Bytes of a Node's quantity (`94580335255`, `102626232Ki`).
fn bytes(q: &str) -> u128 {
    let units = [("Ki", 1u128 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30), ("Ti", 1 << 40)];
    match units.iter().find_map(|(s, m)| Some((q.strip_suffix(s)?, *m))) {
        Some((n, m)) => n.parse::<u128>().unwrap() * m,
        None => q.parse().unwrap(),
    }
}

#[test]
fn serves_node_shows_its_ephemeral_storage_and_admits_pods_against_it() {
    let d = Daemon::start();
    let node: Value = serde_json::from_str(&d.ok(&["get", "nodes", "-o", "json"])).unwrap();
    let status = &node["items"][0]["status"];
    let capacity = bytes(status["capacity"]["ephemeral-storage"].as_str().unwrap());
    let allocatable = bytes(status["allocatable"]["ephemeral-storage"].as_str().unwrap());
    // The root directory's filesystem, less the kubelet's nodefs.available<10% threshold.
    assert!(capacity > 0 && allocatable == capacity - capacity / 10, "{status}");
    let described = d.ok(&["describe", "node"]);
    let storage_lines = described.lines().filter(|l| l.trim_start().starts_with("ephemeral-storage:")).count();
    assert!(storage_lines >= 2, "capacity and allocatable: {described}");

    let too_much = allocatable + 1;
    let m = Manifest::new(&format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: hoarder}}
spec:
  containers:
  - {{name: app, image: {BUSYBOX}, command: [sleep, '3600'], resources: {{requests: {{ephemeral-storage: "{too_much}"}}}}}}
"#
    ));
    d.ok(&["apply", "-f", m.path_str()]);
    let out =
        d.wait_for(&["get", "pod", "hoarder", "-o", "json"], Duration::from_secs(30), |o| o.contains("\"Failed\""));
    let pod: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(pod["status"]["reason"], "OutOfephemeral-storage", "{}", pod["status"]);
    let message = format!(
        "Pod was rejected: Node didn't have enough resource: ephemeral-storage, requested: {too_much}, used: 0, capacity: {allocatable}"
    );
    assert_eq!(pod["status"]["message"], message.as_str());
}
