//! Cluster mode against a real control plane (kube-apiserver, kube-controller-manager and
//! kube-scheduler v1.20.2, `scripts/control-plane`): two podwright nodes join by TLS bootstrap,
//! report their Node and Lease, run a Deployment the scheduler spreads over them, survive a
//! SIGKILL with their containers, and leave nothing behind when it is deleted.

use podwright_e2e::cluster::{ClusterNode, ControlPlane};
use podwright_e2e::containers_with_label_at;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME}
spec:
  replicas: 4
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 2
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: NAME}}}
      nodeSelector: {podwright-test: NAME}
      initContainers:
      - name: init
        image: localhost/busybox:1.36
        imagePullPolicy: Never
        command: [sh, -c, "echo ready > /work/ready"]
        volumeMounts: [{name: work, mountPath: /work}]
      containers:
      - name: app
        image: localhost/busybox:1.36
        imagePullPolicy: Never
        command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
        readinessProbe: {exec: {command: [cat, /work/ready]}, periodSeconds: 1}
        volumeMounts: [{name: work, mountPath: /work}]
      volumes: [{name: work, emptyDir: {}}]
"#;

/// Whether IPv4 address `ip` is in `cidr` (`10.244.1.0/24`).
fn in_cidr(ip: &str, cidr: &str) -> bool {
    let (net, bits) = cidr.split_once('/').unwrap();
    let (Ok(ip), Ok(net), Ok(bits)) = (ip.parse::<Ipv4Addr>(), net.parse::<Ipv4Addr>(), bits.parse::<u32>()) else {
        return false;
    };
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    u32::from(ip) & mask == u32::from(net) & mask
}

fn condition<'a>(node: &'a Value, ty: &str) -> &'a Value {
    node["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == ty).unwrap_or(&Value::Null)
}

fn is_ready(node: &Value) -> bool {
    condition(node, "Ready")["status"] == "True"
}

/// Each pod's name → (node, the containers' IDs, the init container's ID).
fn pods_by_name(pods: &Value) -> BTreeMap<String, (String, String, String)> {
    pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let id = |list: &str| p["status"][list][0]["containerID"].as_str().unwrap_or_default().to_string();
            (
                p["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                (
                    p["spec"]["nodeName"].as_str().unwrap_or_default().to_string(),
                    id("containerStatuses"),
                    id("initContainerStatuses"),
                ),
            )
        })
        .collect()
}

#[test]
fn two_nodes_join_run_a_deployment_survive_a_crash_and_clean_up() {
    let plane = ControlPlane::up();
    // Each on a containerd of its own: its pods' addresses come from its own pod CIDR.
    let mut a = ClusterNode::join_embedded(&plane, "pw-a", &[]);
    let b = ClusterNode::join_embedded(&plane, "pw-b", &[]);
    let app = format!("web-{}", std::process::id());
    for node in [&a, &b] {
        let ready =
            plane.wait_json(&["get", "node", &node.name], Duration::from_secs(60), "the node is Ready", is_ready);
        // What the kubelet says of its node.
        let labels = &ready["metadata"]["labels"];
        assert_eq!(labels["kubernetes.io/hostname"], node.name.as_str());
        assert_eq!(labels["kubernetes.io/os"], "linux");
        assert!(labels["kubernetes.io/arch"].is_string());
        let status = &ready["status"];
        assert!(status["capacity"]["cpu"].as_str().is_some_and(|c| c.parse::<u32>().unwrap_or(0) >= 1), "{status:#}");
        assert!(status["capacity"]["memory"].as_str().is_some_and(|m| m.ends_with("Ki")), "{status:#}");
        assert_eq!(status["capacity"]["pods"], "110");
        assert!(status["allocatable"]["ephemeral-storage"].is_string(), "{status:#}");
        assert_eq!(status["daemonEndpoints"]["kubeletEndpoint"]["Port"], node.port);
        assert!(status["nodeInfo"]["containerRuntimeVersion"].as_str().is_some_and(|v| v.starts_with("containerd://")));
        assert!(status["nodeInfo"]["bootID"].as_str().is_some_and(|v| !v.is_empty()));
        assert!(status["nodeInfo"]["kernelVersion"].as_str().is_some_and(|v| !v.is_empty()));
        for (ty, reason) in [
            ("MemoryPressure", "KubeletHasSufficientMemory"),
            ("DiskPressure", "KubeletHasNoDiskPressure"),
            ("PIDPressure", "KubeletHasSufficientPID"),
            ("Ready", "KubeletReady"),
        ] {
            assert_eq!(condition(&ready, ty)["reason"], reason, "{status:#}");
        }
        assert_eq!(status["addresses"][0], serde_json::json!({"type": "InternalIP", "address": "127.0.0.1"}));
        // Its client certificate came by TLS bootstrap.
        assert!(node.root.join("pki/kubelet-client-current.pem").exists());
        // The controller-manager gave it a pod CIDR of its own.
        assert!(ready["spec"]["podCIDR"].is_string(), "{ready:#}");
        plane.ok(&["label", "node", &node.name, &format!("podwright-test={app}")]);
    }
    // The Lease: held by the node, 40 s, renewed every 10 s.
    let lease = plane.json(&["get", "lease", "-n", "kube-node-lease", &a.name]);
    assert_eq!(lease["spec"]["holderIdentity"], a.name.as_str());
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
    assert_eq!(lease["metadata"]["ownerReferences"][0]["kind"], "Node");
    let renewed = lease["spec"]["renewTime"].as_str().unwrap().to_string();
    plane.wait_json(
        &["get", "lease", "-n", "kube-node-lease", &a.name],
        Duration::from_secs(25),
        "the lease is renewed",
        |l| l["spec"]["renewTime"].as_str().is_some_and(|t| t != renewed),
    );

    // A Deployment with an init container and a readiness probe, over both nodes.
    let manifest = podwright_e2e::Manifest::new(&DEPLOYMENT.replace("NAME", &app));
    plane.ok(&["apply", "-f", manifest.path_str()]);
    plane.wait_json(&["get", "deployment", &app], Duration::from_secs(120), "the Deployment is available", |d| {
        d["status"]["availableReplicas"] == 4
    });
    let selector = format!("app={app}");
    let before = pods_by_name(&plane.json(&["get", "pods", "-l", &selector]));
    let on = |node: &str| before.values().filter(|(n, _, _)| n == node).count();
    assert_eq!((on(&a.name), on(&b.name)), (2, 2), "{before:?}");
    for (name, (_, app_id, init_id)) in &before {
        assert!(app_id.starts_with("containerd://") && init_id.starts_with("containerd://"), "{name}: {before:?}");
    }
    // Two nodes never give out the same address: each pod's is in its node's pod CIDR.
    let cidrs: BTreeMap<String, String> = [&a, &b]
        .iter()
        .map(|n| {
            (n.name.clone(), plane.json(&["get", "node", &n.name])["spec"]["podCIDR"].as_str().unwrap().to_string())
        })
        .collect();
    assert_ne!(cidrs[&a.name], cidrs[&b.name]);
    for p in plane.json(&["get", "pods", "-l", &selector])["items"].as_array().unwrap() {
        let (node, ip) = (p["spec"]["nodeName"].as_str().unwrap(), p["status"]["podIP"].as_str().unwrap_or_default());
        assert!(in_cidr(ip, &cidrs[node]), "pod {} on {node} has {ip}, outside {}", p["metadata"]["name"], cidrs[node]);
    }

    // SIGKILL: the control plane marks the node NotReady (its grace is 20 s here); started again,
    // the node is Ready and its pods keep their containers (no init container runs again).
    a.kill();
    plane
        .wait_json(&["get", "node", &a.name], Duration::from_secs(90), "the killed node is NotReady", |n| !is_ready(n));
    a.restart();
    plane.wait_json(&["get", "node", &a.name], Duration::from_secs(60), "the restarted node is Ready", is_ready);
    plane.wait_json(&["get", "deployment", &app], Duration::from_secs(60), "the Deployment is available again", |d| {
        d["status"]["availableReplicas"] == 4
    });
    let after = pods_by_name(&plane.json(&["get", "pods", "-l", &selector]));
    assert_eq!(before, after, "the pods, their nodes and containers are the same after the restart");

    // Deleted, the pods leave both nodes and the runtime.
    let uids: Vec<String> = plane.json(&["get", "pods", "-l", &selector])["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
        .collect();
    plane.ok(&["delete", "deployment", &app]);
    plane.wait_json(&["get", "pods", "-l", &selector], Duration::from_secs(60), "the pods are deleted", |p| {
        p["items"].as_array().is_some_and(Vec::is_empty)
    });
    for uid in &uids {
        for node in [&a, &b] {
            let left = containers_with_label_at(&node.containerd_socket(), "io.kubernetes.pod.uid", uid);
            assert!(left.is_empty(), "pod {uid} left containers on {}: {left:?}\n{}", node.name, node.log());
        }
    }
    for node in [&a, &b] {
        plane.ok(&["delete", "node", &node.name]);
    }
}

/// The token volume the API server adds to every pod (`kube-api-access-*`: a projected
/// service account token, the cluster's CA, the namespace) is filled by the node with a token
/// bound to the pod, which the API server accepts as the pod's service account.
#[test]
fn a_pods_service_account_token_comes_from_the_api_server() {
    let plane = ControlPlane::up();
    let node = ClusterNode::join(&plane, "pw-tok", &[]);
    plane.wait_json(&["get", "node", &node.name], Duration::from_secs(60), "the node is Ready", is_ready);
    let pod = format!("tok-{}", std::process::id());
    let manifest = podwright_e2e::Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {pod}}}\nspec:\n  nodeName: {}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - {{name: c, image: localhost/busybox:1.36, imagePullPolicy: Never, command: [sleep, '3600']}}\n",
        node.name
    ));
    plane.ok(&["apply", "-f", manifest.path_str()]);
    let running = plane.wait_json(&["get", "pod", &pod], Duration::from_secs(60), "the pod runs", |p| {
        p["status"]["phase"] == "Running"
    });
    let volumes = running["spec"]["volumes"].to_string();
    assert!(volumes.contains("kube-api-access-") && volumes.contains("serviceAccountToken"), "{volumes}");
    let uid = running["metadata"]["uid"].as_str().unwrap().to_string();
    let read = |file: &str| {
        podwright_e2e::exec_in_container(
            &uid,
            "c",
            &["cat", &format!("/var/run/secrets/kubernetes.io/serviceaccount/{file}")],
        )
    };
    assert_eq!(read("namespace"), "default");
    assert!(read("ca.crt").starts_with("-----BEGIN CERTIFICATE-----"));
    let token = read("token");
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let review = podwright_e2e::Manifest::new(&format!(
        "{{\"apiVersion\": \"authentication.k8s.io/v1\", \"kind\": \"TokenReview\", \"spec\": {{\"token\": \"{token}\"}}}}"
    ));
    let reviewed: Value = serde_json::from_str(&plane.ok(&["create", "-f", review.path_str(), "-o", "json"])).unwrap();
    let status = &reviewed["status"];
    assert_eq!(status["authenticated"], true, "{reviewed:#}");
    assert_eq!(status["user"]["username"], "system:serviceaccount:default:default");
    assert_eq!(status["user"]["extra"]["authentication.kubernetes.io/pod-name"][0], pod.as_str(), "bound to the pod");
    plane.ok(&["delete", "pod", &pod, "--wait=false"]);
    plane.wait_json(&["get", "pods"], Duration::from_secs(60), "the pod is deleted", |p| {
        !p["items"].as_array().into_iter().flatten().any(|i| i["metadata"]["name"] == pod.as_str())
    });
    plane.ok(&["delete", "node", &node.name]);
}

/// A pod bound straight to the node (no scheduler) is admitted as the kubelet admits it: one
/// asking for more CPU than the node has, or for labels it lacks, fails at once with the
/// kubelet's reason.
#[test]
fn the_node_admits_pods_as_the_kubelet_does() {
    let plane = ControlPlane::up();
    let node = ClusterNode::join(&plane, "pw-adm", &[]);
    plane.wait_json(&["get", "node", &node.name], Duration::from_secs(60), "the node is Ready", is_ready);
    let id = std::process::id();
    let manifest = podwright_e2e::Manifest::new(&format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: greedy-{id}}}
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  containers:
  - {{name: c, image: localhost/busybox:1.36, imagePullPolicy: Never, command: [sleep, '3600'], resources: {{requests: {{cpu: '1000'}}}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: picky-{id}}}
spec:
  nodeName: {node}
  automountServiceAccountToken: false
  nodeSelector: {{disktype: nvme}}
  containers:
  - {{name: c, image: localhost/busybox:1.36, imagePullPolicy: Never, command: [sleep, '3600']}}
"#,
        node = node.name
    ));
    plane.ok(&["apply", "-f", manifest.path_str()]);
    for (pod, reason, message) in [
        (
            format!("greedy-{id}"),
            "OutOfcpu",
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 1000000, used: 0, capacity: ",
        ),
        (format!("picky-{id}"), "NodeAffinity", "Pod was rejected: Predicate NodeAffinity failed"),
    ] {
        let failed = plane.wait_json(&["get", "pod", &pod], Duration::from_secs(30), "the pod is refused", |p| {
            p["status"]["phase"] == "Failed"
        });
        assert_eq!(failed["status"]["reason"], reason, "{failed:#}");
        assert!(failed["status"]["message"].as_str().unwrap().starts_with(message), "{failed:#}");
        assert!(failed["status"]["containerStatuses"].is_null(), "nothing ran: {failed:#}");
        plane.ok(&["delete", "pod", &pod, "--wait=false"]);
    }
    plane.wait_json(&["get", "pods"], Duration::from_secs(30), "the refused pods are deleted", |p| {
        !p["items"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|i| i["metadata"]["name"].as_str().is_some_and(|n| n.ends_with(&format!("-{id}"))))
    });
    plane.ok(&["delete", "node", &node.name]);
}

/// A Lease deleted under a running node is made again at its next renewal (every 10 s), with
/// the node as its holder and owner.
#[test]
fn a_deleted_lease_is_made_again() {
    let plane = ControlPlane::up();
    let node = ClusterNode::join(&plane, "pw-lease", &[]);
    plane.wait_json(&["get", "node", &node.name], Duration::from_secs(60), "the node is Ready", is_ready);
    let lease = ["get", "lease", "-n", "kube-node-lease", &node.name];
    let first =
        plane.wait_json(&lease, Duration::from_secs(30), "the lease exists", |l| l["metadata"]["uid"].is_string());
    plane.ok(&["delete", "lease", "-n", "kube-node-lease", &node.name]);
    let again = plane.wait_json(&lease, Duration::from_secs(30), "the lease is made again", |l| {
        l["metadata"]["uid"].is_string() && l["metadata"]["uid"] != first["metadata"]["uid"]
    });
    assert_eq!(again["spec"]["holderIdentity"], node.name.as_str(), "{again:#}");
    assert_eq!(again["metadata"]["ownerReferences"][0]["kind"], "Node", "{again:#}");
    assert_eq!(again["metadata"]["ownerReferences"][0]["name"], node.name.as_str(), "{again:#}");
    plane.ok(&["delete", "node", &node.name]);
}
