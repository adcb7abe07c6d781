//! The kubelet port of a cluster node against a real control plane (kube-apiserver v1.20.2,
//! `scripts/control-plane`): `kubectl logs -c`, `exec` (exit codes, stdin) and `port-forward`
//! through the API server, which reaches the node with its kubelet client certificate; and the
//! port's own authentication and authorization: 401 without credentials, a PodList for the
//! cluster's admin certificate, 403 for a ServiceAccount token without RBAC; interactive
//! containers (`kubectl run -i --rm`, `kubectl attach -it`) with kubectl 1.20 and 1.32.

use base64::Engine;
use podwright_e2e::cluster::{ClusterNode, ControlPlane};
use podwright_e2e::serve::{KUBECTL_1_20, text};
use podwright_e2e::terminal::typed_on_terminal;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  nodeName: NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: localhost/busybox:1.36
    imagePullPolicy: Never
    command: [sh, -c, "mkdir -p /www && echo hi-from-httpd > /www/index.html && exec httpd -f -p 8080 -h /www"]
    ports: [{containerPort: 8080}]
  - name: second
    image: localhost/busybox:1.36
    imagePullPolicy: Never
    command: [sh, -c, "echo from-second; echo line-two; trap 'exit 0' TERM; while true; do sleep 1; done"]
"#;

/// Deletes what the test made, even when it fails half-way (the node still runs then: this is
/// dropped before it).
struct Cleanup<'a> {
    plane: &'a ControlPlane,
    pod: String,
    account: Option<String>,
    node: String,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let _ = self.plane.kubectl(&["delete", "pod", &self.pod, "--ignore-not-found", "--wait=true", "--timeout=60s"]);
        if let Some(account) = &self.account {
            let _ = self.plane.kubectl(&["delete", "serviceaccount", account, "--ignore-not-found"]);
        }
        let _ = self.plane.kubectl(&["delete", "node", &self.node, "--ignore-not-found"]);
    }
}

fn all_ready(pod: &Value) -> bool {
    let statuses = pod["status"]["containerStatuses"].as_array();
    pod["status"]["phase"] == "Running"
        && statuses.is_some_and(|s| s.len() == 2 && s.iter().all(|c| c["ready"] == true))
}

/// kubectl 1.20 as the admin, with `stdin` written to it.
fn kubectl_with_stdin(plane: &ControlPlane, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(KUBECTL_1_20)
        .arg("--kubeconfig")
        .arg(plane.path("admin-kubeconfig"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// `curl -sk` to the kubelet port: (status code, body).
fn curl(port: u16, path: &str, extra: &[&str]) -> (String, String) {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "20", "-w", "\n%{http_code}"])
        .args(extra)
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl runs");
    let all = text(&out.stdout);
    let (body, code) = all.rsplit_once('\n').unwrap_or(("", &all));
    (code.to_string(), body.to_string())
}

/// GET / over a plain TCP connection: the whole answer.
fn http_get(port: u16) -> String {
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).expect("the forwarded port accepts");
    conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    conn.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = conn.read_to_string(&mut answer);
    answer
}

#[test]
fn logs_exec_and_port_forward_go_through_the_api_server_to_the_kubelet_port() {
    let plane = ControlPlane::up();
    let node = ClusterNode::join(&plane, "kl", &["--config", plane.path("kubelet-config")]);
    let pod = format!("kl-pod-{}", std::process::id());
    let account = format!("kl-nobody-{}", std::process::id());
    let _cleanup = Cleanup { plane: &plane, pod: pod.clone(), account: Some(account.clone()), node: node.name.clone() };
    let manifest = podwright_e2e::Manifest::new(&POD.replace("NAME", &pod).replace("NODE", &node.name));
    plane.ok(&["apply", "-f", manifest.path_str()]);
    plane.wait_json(&["get", "pod", &pod], Duration::from_secs(90), "the pod runs", all_ready);

    // kubectl logs -c, through the API server.
    let logs = plane.ok(&["logs", &pod, "-c", "second"]);
    assert_eq!(logs, "from-second\nline-two\n", "{}", node.log());
    assert_eq!(plane.ok(&["logs", &pod, "-c", "second", "--tail=1"]), "line-two\n");
    let out = plane.kubectl(&["logs", &pod, "-c", "nope"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("container nope is not valid for pod"), "{}", text(&out.stderr));

    // kubectl exec: the exit code, stdout, stdin.
    let out = plane.kubectl(&["exec", &pod, "-c", "c", "--", "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}{}\n{}", text(&out.stdout), text(&out.stderr), node.log());
    assert_eq!(
        plane.ok(&["exec", &pod, "-c", "second", "--", "cat", "/proc/1/cmdline"]).split('\0').next(),
        Some("sh")
    );
    let out =
        kubectl_with_stdin(&plane, &["exec", "-i", &pod, "-c", "c", "--", "sh", "-c", "cat; exit 5"], "echo me\n");
    assert_eq!((out.status.code(), text(&out.stdout)), (Some(5), "echo me\n".to_string()), "{}", text(&out.stderr));
    // kubectl 1.32 offers WebSocket first; the v1.20 API server passes it on to the node.
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(plane.path("admin-kubeconfig"))
        .args(["exec", &pod, "-c", "c", "--", "sh", "-c", "echo new; exit 4"])
        .output()
        .expect("kubectl runs");
    assert_eq!((out.status.code(), text(&out.stdout)), (Some(4), "new\n".to_string()), "{}", text(&out.stderr));

    // kubectl port-forward to the container's port.
    let mut forward = Command::new(KUBECTL_1_20)
        .arg("--kubeconfig")
        .arg(plane.path("admin-kubeconfig"))
        .args(["port-forward", &format!("pod/{pod}"), ":8080"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut lines = BufReader::new(forward.stdout.take().unwrap()).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    // "Forwarding from 127.0.0.1:41234 -> 8080"
    let local: u16 = first
        .strip_prefix("Forwarding from 127.0.0.1:")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("kubectl port-forward printed {first:?}"));
    for _ in 0..2 {
        let answer = http_get(local);
        assert!(answer.starts_with("HTTP/1.") && answer.ends_with("hi-from-httpd\n"), "{answer:?}\n{}", node.log());
    }
    let _ = forward.kill();
    let _ = forward.wait();

    // The port itself: anonymous is 401.
    assert_eq!(curl(node.port, "/pods", &[]), ("401".to_string(), "Unauthorized".to_string()));
    assert_eq!(curl(node.port, "/healthz", &[]).0, "401");
    // The cluster's admin (CN kubernetes-admin, O system:masters) by client certificate.
    let pki = PathBuf::from(plane.path("ca")).parent().unwrap().to_path_buf();
    let (cert, key) = (pki.join("admin.crt"), pki.join("admin.key"));
    let admin = ["--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()];
    let (code, body) = curl(node.port, "/pods", &admin);
    assert_eq!(code, "200", "{body}");
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["kind"], "PodList");
    let listed: Vec<&str> =
        list["items"].as_array().unwrap().iter().filter_map(|p| p["metadata"]["name"].as_str()).collect();
    assert_eq!(listed, [pod.as_str()]);
    assert_eq!(list["items"][0]["status"]["phase"], "Running");
    assert_eq!(curl(node.port, "/healthz", &admin), ("200".to_string(), "ok".to_string()));
    let (code, body) = curl(node.port, &format!("/containerLogs/default/{pod}/second"), &admin);
    assert_eq!((code.as_str(), body.as_str()), ("200", "from-second\nline-two\n"));
    let (code, body) = curl(node.port, "/stats/summary", &admin);
    assert!(code == "200" && body.contains(&pod), "{code} {body}");

    // A ServiceAccount's token, without any RBAC: authenticated, then forbidden.
    plane.ok(&["create", "serviceaccount", &account]);
    let sa = plane.wait_json(&["get", "serviceaccount", &account], Duration::from_secs(30), "the token secret", |sa| {
        sa["secrets"][0]["name"].is_string()
    });
    let secret = plane.json(&["get", "secret", sa["secrets"][0]["name"].as_str().unwrap()]);
    let token = base64::engine::general_purpose::STANDARD.decode(secret["data"]["token"].as_str().unwrap()).unwrap();
    let token = String::from_utf8(token).unwrap();
    let bearer = format!("Authorization: Bearer {token}");
    let (code, body) = curl(node.port, "/pods", &["-H", &bearer]);
    assert_eq!(
        (code.as_str(), body.as_str()),
        (
            "403",
            format!(
                "Forbidden (user=system:serviceaccount:default:{account}, verb=get, resource=nodes, subresource(s)=[pods proxy])"
            )
            .as_str()
        )
    );
    assert_eq!(curl(node.port, "/pods", &["-H", "Authorization: Bearer not-a-token"]).0, "401");

    // The pod goes when deleted, through the node, and leaves nothing in the runtime.
    let uid = plane.json(&["get", "pod", &pod])["metadata"]["uid"].as_str().unwrap().to_string();
    plane.ok(&["delete", "pod", &pod, "--timeout=60s"]);
    // The node removes them once the API server has the pod gone.
    let mut left = vec![];
    for _ in 0..60 {
        left = podwright_e2e::containers_with_label("io.kubernetes.pod.uid", &uid);
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(left.is_empty(), "the pod left containers: {left:?}\n{}", node.log());
}

/// Waiting to attach: one container per kubectl, each reading a line from its terminal.
const INTERACTIVE_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  nodeName: NODE
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - {name: c0, image: localhost/busybox:1.36, stdin: true, tty: true, command: [sh, -c, 'read x; echo got $x; test -t 0 && echo stdin-is-a-tty']}
  - {name: c1, image: localhost/busybox:1.36, stdin: true, tty: true, command: [sh, -c, 'read x; echo got $x; test -t 0 && echo stdin-is-a-tty']}
"#;

/// Interactive containers through the API server to the kubelet port: `kubectl run -i --rm`
/// (piped and on a terminal) and `kubectl attach -it`, with kubectl 1.20 (SPDY) and 1.32
/// (WebSocket first, which the v1.20 API server passes on to the node).
#[test]
fn run_it_and_attach_it_reach_interactive_containers() {
    let plane = ControlPlane::up();
    let node = ClusterNode::join(&plane, "kli", &["--config", plane.path("kubelet-config")]);
    let pod = format!("kli-pod-{}", std::process::id());
    let _cleanup = Cleanup { plane: &plane, pod: pod.clone(), account: None, node: node.name.clone() };
    let manifest = podwright_e2e::Manifest::new(&INTERACTIVE_POD.replace("NAME", &pod).replace("NODE", &node.name));
    plane.ok(&["apply", "-f", manifest.path_str()]);
    plane.wait_json(&["get", "pod", &pod], Duration::from_secs(90), "the pod runs", |p| {
        p["status"]["phase"] == "Running"
    });
    let overrides = format!(r#"{{"spec": {{"nodeName": "{}", "automountServiceAccountToken": false}}}}"#, node.name);
    let limit = Duration::from_secs(90);
    for (i, program) in [KUBECTL_1_20, "kubectl"].into_iter().enumerate() {
        let kubectl = |args: &[&str]| {
            let mut cmd = Command::new(program);
            cmd.arg("--kubeconfig").arg(plane.path("admin-kubeconfig")).args(args);
            cmd
        };
        let run = |name: &str, flags: &str, script: &str| {
            let args = ["run", name, "--image=localhost/busybox:1.36", "--restart=Never", flags, "--rm"];
            let overrides = format!("--overrides={overrides}");
            let mut cmd = kubectl(&args);
            cmd.args([overrides.as_str(), "--command", "--", "sh", "-c", script]);
            cmd
        };

        // Piped: the input's end closes the container's stdin (stdinOnce).
        let name = format!("kli-run-i-{i}-{}", std::process::id());
        let mut cmd = run(&name, "-i", "read x; echo got $x; read y || echo stdin-closed");
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
        let out = child.wait_with_output().unwrap();
        let printed = format!("{}{}\n{}", text(&out.stdout), text(&out.stderr), node.log());
        assert!(out.status.success(), "{program} run -i: {printed}");
        assert!(text(&out.stdout).starts_with("got hello\nstdin-closed\n"), "{program} run -i: {printed}");

        // On a terminal.
        let name = format!("kli-run-it-{i}-{}", std::process::id());
        let script = "read x; echo got $x; test -t 0 && echo stdin-is-a-tty";
        let (status, printed) = typed_on_terminal(&run(&name, "-it", script), "hello\r", limit);
        assert!(status.success(), "{program} run -it: {status}\n{printed}\n{}", node.log());
        for line in ["got hello\r\n", "stdin-is-a-tty\r\n", &format!("pod \"{name}\" deleted")] {
            assert!(printed.contains(line), "{program} run -it: no {line:?} in\n{printed}\n{}", node.log());
        }

        // attach -it to a container of the running pod: it ends with the container.
        let container = format!("c{i}");
        let (status, printed) = typed_on_terminal(&kubectl(&["attach", "-it", &pod, "-c", &container]), "hi\r", limit);
        assert!(status.success(), "{program} attach -it: {status}\n{printed}\n{}", node.log());
        for line in ["got hi\r\n", "stdin-is-a-tty\r\n"] {
            assert!(printed.contains(line), "{program} attach -it: no {line:?} in\n{printed}\n{}", node.log());
        }
    }
}
