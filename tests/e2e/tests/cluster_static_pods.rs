//! Static pods of a cluster node against a real control plane (v1.20.2, `scripts/control-plane`),
//! as the kubelet runs them: a podwright node with `--pod-manifest-path` shows each static pod
//! as a mirror pod on the API server (the config hash, the Node as its controller, the static
//! pod's status). Deleting the mirror makes it again and stops nothing; a SIGKILLed node keeps
//! the mirror and the containers; a changed file replaces the pod and its mirror; removing the
//! file stops the pod and deletes the mirror, also while the node is down. A
//! static pod that references a Secret is refused by the node itself, as since 1.37: no pod,
//! no mirror, and the node says why.

// Real waits against a real control plane.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::cluster::{ClusterNode, ControlPlane};
use podwright_e2e::{ManifestDir, containers_with_label};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const WEB: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: static-web}}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: localhost/busybox:1.36
    imagePullPolicy: Never
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
    readinessProbe: {exec: {command: ["true"]}, periodSeconds: 1}
  - name: sidecar
    image: localhost/busybox:1.36
    imagePullPolicy: Never
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
"#;

/// References a Secret (to pull its image with): no mirror may show it.
const WITH_SECRET: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: pull}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 2
  imagePullSecrets: [{name: registry-login}]
  containers:
  - name: app
    image: localhost/busybox:1.36
    imagePullPolicy: Never
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
"#;

fn condition<'a>(obj: &'a Value, ty: &str) -> &'a Value {
    obj["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == ty).unwrap_or(&Value::Null)
}

fn is_running_and_ready(pod: &Value) -> bool {
    pod["status"]["phase"] == "Running"
        && condition(pod, "Ready")["status"] == "True"
        && pod["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|c| c.len() == 2 && c.iter().all(|c| c["ready"] == true))
}

/// Each container's name → (its ID, its restarts).
fn containers(pod: &Value) -> Vec<(String, String, i64)> {
    let mut v: Vec<(String, String, i64)> = pod["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (s("name"), s("containerID"), c["restartCount"].as_i64().unwrap_or(-1))
        })
        .collect();
    v.sort();
    v
}

fn uid(obj: &Value) -> String {
    obj["metadata"]["uid"].as_str().unwrap_or_default().to_string()
}

/// Waits until `done` holds of what `check` gives, at most `limit`.
fn wait_until(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// On a failure, before the node stops: its static pods leave the runtime (their files removed)
/// and its Node the API server.
struct Cleanup<'a> {
    plane: &'a ControlPlane,
    dir: &'a ManifestDir,
    node: String,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        self.dir.empty();
        let start = Instant::now();
        let left = || {
            ["web", "pull"]
                .iter()
                .any(|p| !containers_with_label("io.kubernetes.pod.name", &format!("{p}-{}", self.node)).is_empty())
        };
        while left() && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(500));
        }
        let _ = self.plane.kubectl(&["delete", "node", &self.node]);
    }
}

fn pod_gone(plane: &ControlPlane, name: &str) -> bool {
    let out = plane.kubectl(&["get", "pod", name, "-o", "name"]);
    !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound")
}

#[test]
fn static_pods_of_a_cluster_node_have_mirror_pods_on_the_api_server() {
    let plane = ControlPlane::up();
    let dir = ManifestDir::new("cluster-static");
    dir.write("web.yaml", WEB);
    let mut node = ClusterNode::join(&plane, "sp", &["--pod-manifest-path", dir.arg()]);
    let _cleanup = Cleanup { plane: &plane, dir: &dir, node: node.name.clone() };
    let node_obj =
        plane.wait_json(&["get", "node", &node.name], Duration::from_secs(60), "the node is registered", |n| {
            condition(n, "Ready")["status"] == "True"
        });
    let mirror = format!("web-{}", node.name);

    // The mirror: the config hash, the Node (its real UID) as its one controller, bound to the
    // node, and the static pod's status, Running and ready.
    let first = plane.wait_json(
        &["get", "pod", &mirror],
        Duration::from_secs(90),
        "the mirror pod is Running and ready",
        is_running_and_ready,
    );
    let annotations = &first["metadata"]["annotations"];
    let hash = annotations["kubernetes.io/config.mirror"].as_str().expect("the mirror annotation").to_string();
    assert_eq!(annotations["kubernetes.io/config.hash"], hash.as_str(), "{first:#}");
    assert_eq!(annotations["kubernetes.io/config.source"], "file");
    assert_ne!(uid(&first), hash, "the mirror has a UID of its own");
    assert_eq!(
        first["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": uid(&node_obj), "controller": true}])
    );
    assert_eq!(first["spec"]["nodeName"], node.name.as_str());
    assert_eq!(first["metadata"]["labels"]["app"], "static-web");
    assert_eq!(first["status"]["hostIP"], "127.0.0.1");
    assert!(first["status"]["podIP"].is_string(), "{first:#}");
    let running = containers(&first);
    assert_eq!(running.len(), 2);
    assert!(running.iter().all(|(_, id, restarts)| id.starts_with("containerd://") && *restarts == 0), "{running:?}");
    // The node runs the static pod's UID, not the mirror's.
    assert!(!containers_with_label("io.kubernetes.pod.uid", &hash).is_empty());

    // Deleted by a user, the mirror is made again (a new object), and nothing restarts.
    plane.ok(&["delete", "pod", &mirror, "--wait=false"]);
    let again =
        plane.wait_json(&["get", "pod", &mirror], Duration::from_secs(30), "the mirror pod is made again", |p| {
            !uid(p).is_empty() && uid(p) != uid(&first) && is_running_and_ready(p)
        });
    assert_eq!(containers(&again), running, "the containers are the same");

    // SIGKILLed and started again, the node keeps the mirror and the containers.
    node.kill();
    node.restart();
    plane.wait_json(&["get", "node", &node.name], Duration::from_secs(60), "the restarted node is Ready", |n| {
        condition(n, "Ready")["status"] == "True"
    });
    std::thread::sleep(Duration::from_secs(5));
    let after = plane.wait_json(
        &["get", "pod", &mirror],
        Duration::from_secs(60),
        "the mirror pod is ready after the restart",
        is_running_and_ready,
    );
    assert_eq!(uid(&after), uid(&again), "the same mirror:\n{}", node.log());
    assert_eq!(containers(&after), running, "the same containers:\n{}", node.log());

    // A static pod that references a Secret is refused by the node (PreventStaticPodAPIReferences,
    // always on since 1.37): it never runs, so no mirror is asked for.
    dir.write("pull.yaml", WITH_SECRET);
    let pull = format!("pull-{}", node.name);
    let start = Instant::now();
    while !node.log().contains("pull.yaml: static pods may not reference secrets") {
        assert!(start.elapsed() < Duration::from_secs(60), "the node says why:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(pod_gone(&plane, &pull), "no mirror for it");
    assert!(containers_with_label("io.kubernetes.pod.name", &pull).is_empty(), "it does not run on the node");

    // A changed file is a new version of the pod (a new config hash): the old one stops and
    // leaves the node, and the new one runs with a mirror of its own.
    dir.write("web.yaml", &WEB.replace("app: static-web", "app: static-web-2"));
    let v2 =
        plane.wait_json(&["get", "pod", &mirror], Duration::from_secs(60), "the new version's mirror is ready", |p| {
            p["metadata"]["annotations"]["kubernetes.io/config.mirror"].as_str().is_some_and(|h| h != hash)
                && p["metadata"]["labels"]["app"] == "static-web-2"
                && is_running_and_ready(p)
        });
    let hash2 = v2["metadata"]["annotations"]["kubernetes.io/config.mirror"].as_str().unwrap().to_string();
    assert!(containers_with_label("io.kubernetes.pod.uid", &hash).is_empty(), "the old version left the node");
    assert_ne!(containers(&v2), running);

    // The files removed, the pods stop and leave the node, and the mirror goes.
    dir.remove("web.yaml");
    dir.remove("pull.yaml");
    wait_until(Duration::from_secs(60), "the mirror pod is deleted", || pod_gone(&plane, &mirror));
    wait_until(Duration::from_secs(60), "the static pods' containers are removed", || {
        containers_with_label("io.kubernetes.pod.uid", &hash2).is_empty()
            && containers_with_label("io.kubernetes.pod.name", &pull).is_empty()
    });

    // A file removed while the node is down: at its start the node removes the pod's
    // containers, and deletes the mirror no static pod stands behind.
    dir.write("web.yaml", WEB);
    let back =
        plane.wait_json(&["get", "pod", &mirror], Duration::from_secs(60), "the mirror is back", is_running_and_ready);
    assert_eq!(
        back["metadata"]["annotations"]["kubernetes.io/config.mirror"],
        hash.as_str(),
        "the same file, the same hash"
    );
    node.kill();
    dir.remove("web.yaml");
    node.restart();
    wait_until(Duration::from_secs(60), "the orphaned mirror pod is deleted", || pod_gone(&plane, &mirror));
    assert!(containers_with_label("io.kubernetes.pod.uid", &hash).is_empty(), "its containers went at the start");
    plane.ok(&["delete", "node", &node.name]);
}
