//! exec, attach and port-forward through the API against the fake runtime and a stand-in
//! streaming server on loopback: what reaches the runtime, what reaches the streaming server,
//! and the bytes spliced both ways after the `101`.

use podwright_runtime::cri_api::{ContainerConfig, ContainerMetadata, ImageSpec, PodSandboxConfig, PodSandboxMetadata};
use podwright_runtime::{Call, Clock, FakeRuntime, RuntimeService};
use podwright_server::resources::Resource;
use podwright_server::{ApiServer, ServerConfig};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const IMAGE: &str = "localhost/busybox:1.36";
const UID: &str = "0b6c7a4e-1111-4c3b-9d1e-3f3c1f0c2a11";

/// The request heads the stand-in streaming server received.
type Seen = Arc<Mutex<Vec<String>>>;

struct Setup {
    fake: Arc<FakeRuntime>,
    addr: std::net::SocketAddr,
    seen: Seen,
}

/// Reads an HTTP head (up to the blank line), one byte at a time so nothing past it is taken.
async fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        if s.read(&mut b).await.unwrap() == 0 {
            break;
        }
        head.push(b[0]);
    }
    String::from_utf8(head).unwrap()
}

/// A streaming server that accepts every upgrade with a `101` naming the first protocol
/// offered, then echoes what it reads until the client half-closes.
async fn stand_in_streaming_server(seen: Seen) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            let seen = seen.clone();
            tokio::spawn(async move {
                let head = read_head(&mut s).await;
                let protocol = head
                    .lines()
                    .find_map(|l| l.strip_prefix("x-stream-protocol-version: "))
                    .unwrap_or("portforward.k8s.io")
                    .to_string();
                seen.lock().unwrap().push(head);
                let answer = format!(
                    "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: {protocol}\r\n\r\n"
                );
                s.write_all(answer.as_bytes()).await.unwrap();
                let (mut r, mut w) = s.split();
                // A client that goes away without closing resets the connection: that ends it too.
                if tokio::io::copy(&mut r, &mut w).await.is_ok() {
                    let _ = w.shutdown().await;
                }
            });
        }
    });
    url
}

async fn setup(container_state: Value) -> Setup {
    let fake = FakeRuntime::new(Clock::new());
    fake.add_image(IMAGE);
    let sandbox_config = PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: "p".into(),
            uid: UID.into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        labels: [("io.kubernetes.pod.uid".to_string(), UID.to_string())].into(),
        ..Default::default()
    };
    let sandbox_id = fake.run_pod_sandbox(&sandbox_config, "").await.unwrap();
    let config = ContainerConfig {
        metadata: Some(ContainerMetadata { name: "c".into(), attempt: 0 }),
        image: Some(ImageSpec { image: IMAGE.into(), ..Default::default() }),
        ..Default::default()
    };
    let container_id = fake.create_container(&sandbox_id, &config, &sandbox_config).await.unwrap();
    fake.start_container(&container_id).await.unwrap();
    let seen = Seen::default();
    fake.serve_streaming(&stand_in_streaming_server(seen.clone()).await);

    let root = std::env::temp_dir().join(format!("podwright-streaming-test-{}", std::process::id()));
    let (api, _feed) =
        ApiServer::new(ServerConfig { node_name: "n".into(), root, host_ip: None }, Clock::new(), fake.clone());
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": UID},
        "spec": {"containers": [{"name": "c", "image": IMAGE}, {"name": "d", "image": IMAGE}]},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "c", "containerID": format!("containerd://{container_id}"), "state": container_state,
        }]},
    });
    api.store().create(Resource::Pods, pod).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = api.router();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    Setup { fake, addr, seen }
}

/// Sends `head` to the API and returns the connection with the response head read.
async fn request(addr: std::net::SocketAddr, head: &str) -> (TcpStream, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let answer = read_head(&mut s).await;
    (s, answer)
}

fn streaming_calls(fake: &FakeRuntime) -> Vec<Call> {
    fake.calls()
        .into_iter()
        .map(|(_, c)| c)
        .filter(|c| matches!(c, Call::Exec { .. } | Call::Attach { .. } | Call::PortForward { .. }))
        .collect()
}

const SPDY: &str = "Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nX-Stream-Protocol-Version: v3.channel.k8s.io\r\nAuthorization: Bearer secret\r\nContent-Length: 0\r\n\r\n";

#[tokio::test]
async fn spdy_exec_reaches_the_runtime_url_and_is_spliced_both_ways() {
    let t = setup(json!({"running": {"startedAt": "2024-01-01T00:00:00Z"}})).await;
    let head = format!(
        "POST /api/v1/namespaces/default/pods/p/exec?command=sh&command=-c&command=echo%20hi&container=c&stderr=true&stdout=true HTTP/1.1\r\nHost: {}\r\n{SPDY}",
        t.addr
    );
    let (mut s, answer) = request(t.addr, &head).await;
    assert!(answer.starts_with("HTTP/1.1 101"), "{answer}");
    assert!(answer.to_lowercase().contains("x-stream-protocol-version: v4.channel.k8s.io"), "{answer}");

    s.write_all(b"spliced bytes").await.unwrap();
    let mut echoed = [0u8; 13];
    s.read_exact(&mut echoed).await.unwrap();
    assert_eq!(&echoed, b"spliced bytes");
    // The client's half-close reaches the streaming server, whose close comes back.
    s.shutdown().await.unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());

    assert_eq!(
        streaming_calls(&t.fake),
        [Call::Exec {
            name: "c".into(),
            cmd: vec!["sh".into(), "-c".into(), "echo hi".into()],
            stdin: false,
            stdout: true,
            stderr: true,
            tty: false,
        }]
    );
    let seen = t.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let upstream = &seen[0];
    assert!(upstream.starts_with("POST /exec/"), "{upstream}");
    assert!(upstream.contains("upgrade: SPDY/3.1\r\n"), "{upstream}");
    assert!(upstream.contains("x-stream-protocol-version: v3.channel.k8s.io\r\n"), "{upstream}");
    assert!(!upstream.contains("authorization"), "{upstream}");
    assert!(!upstream.contains(&format!("host: {}", t.addr)), "{upstream}");
}

#[tokio::test]
async fn a_tty_exec_drops_stderr_and_attach_takes_the_tty_from_the_spec() {
    let t = setup(json!({"running": {}})).await;
    let exec = format!(
        "POST /api/v1/namespaces/default/pods/p/exec?command=sh&container=c&stdin=true&stdout=true&stderr=true&tty=true HTTP/1.1\r\nHost: x\r\n{SPDY}"
    );
    assert!(request(t.addr, &exec).await.1.starts_with("HTTP/1.1 101"));
    let attach = format!(
        "POST /api/v1/namespaces/default/pods/p/attach?container=c&stdin=true&stdout=true&tty=true HTTP/1.1\r\nHost: x\r\n{SPDY}"
    );
    assert!(request(t.addr, &attach).await.1.starts_with("HTTP/1.1 101"));
    assert_eq!(
        streaming_calls(&t.fake),
        [
            Call::Exec {
                name: "c".into(),
                cmd: vec!["sh".into()],
                stdin: true,
                stdout: true,
                stderr: false,
                tty: true
            },
            Call::Attach { name: "c".into(), stdin: true, stdout: true, stderr: false, tty: false },
        ]
    );
    assert!(t.seen.lock().unwrap()[1].starts_with("POST /attach/"));
}

#[tokio::test]
async fn port_forward_uses_the_pods_ready_sandbox() {
    let t = setup(json!({"running": {}})).await;
    let head = "POST /api/v1/namespaces/default/pods/p/portforward HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n";
    let (_s, answer) = request(t.addr, head).await;
    assert!(answer.to_lowercase().contains("x-stream-protocol-version: portforward.k8s.io"), "{answer}");
    assert_eq!(streaming_calls(&t.fake), [Call::PortForward { name: "p".into(), ports: vec![] }]);
    assert!(t.seen.lock().unwrap()[0].starts_with("POST /portforward/"));
}

/// The body of a response whose head has been read (all of it: these are not kept alive).
async fn body(mut s: TcpStream) -> String {
    let mut rest = String::new();
    s.read_to_string(&mut rest).await.unwrap();
    rest
}

/// A WebSocket handshake for `sub` offering `protocol`.
fn websocket(sub: &str, protocol: &str) -> String {
    format!(
        "GET /api/v1/namespaces/default/pods/p/{sub}?command=date&container=c&stdout=true HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: {protocol}\r\n\r\n"
    )
}

#[tokio::test]
async fn websocket_offers_podwright_cannot_serve_are_refused_without_a_runtime_call() {
    let t = setup(json!({"running": {}})).await;
    let close = |head: String| head.replace("Host: x\r\n", "Host: x\r\nConnection: close\r\n");
    for (sub, protocol) in [("exec", "v6.channel.k8s.io"), ("portforward", "v5.channel.k8s.io")] {
        let (s, answer) = request(t.addr, &close(websocket(sub, protocol))).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        let status: Value = serde_json::from_str(&body(s).await).unwrap();
        assert_eq!(status["reason"], "BadRequest");
        assert!(status["message"].as_str().unwrap().contains(protocol), "{status}");
    }
    let keyless =
        close(websocket("exec", "v5.channel.k8s.io")).replace("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", "");
    let (_s, answer) = request(t.addr, &keyless).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert_eq!(streaming_calls(&t.fake), []);
    assert!(t.seen.lock().unwrap().is_empty());

    // An offer containerd speaks goes to it as it is.
    let (_s, answer) = request(t.addr, &websocket("exec", "v4.channel.k8s.io, v5.channel.k8s.io")).await;
    assert!(answer.starts_with("HTTP/1.1 101"), "{answer}");
    assert_eq!(streaming_calls(&t.fake).len(), 1);
    assert!(t.seen.lock().unwrap()[0].contains("sec-websocket-protocol: v4.channel.k8s.io, v5.channel.k8s.io\r\n"));
}

/// The answer's headers, lowercase.
fn answer_has(answer: &str, header: &str) -> bool {
    answer.to_lowercase().contains(&format!("{}\r\n", header.to_lowercase()))
}

#[tokio::test]
async fn v5_is_served_on_a_spdy_v4_upgrade_of_the_runtime_url() {
    let t = setup(json!({"running": {}})).await;
    let (mut s, answer) = request(t.addr, &websocket("exec", "v5.channel.k8s.io")).await;
    assert!(answer.starts_with("HTTP/1.1 101"), "{answer}");
    assert!(answer_has(&answer, "upgrade: websocket"), "{answer}");
    assert!(answer_has(&answer, "sec-websocket-protocol: v5.channel.k8s.io"), "{answer}");
    // RFC 6455's example key and answer.
    assert!(answer_has(&answer, "sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{answer}");
    // The first message: an empty one on stdout, the lowest channel the client reads.
    let mut ready = [0u8; 3];
    s.read_exact(&mut ready).await.unwrap();
    assert_eq!(ready, [0x82, 0x01, 0x01]);

    assert_eq!(streaming_calls(&t.fake).len(), 1);
    let upstream = t.seen.lock().unwrap()[0].clone();
    assert!(upstream.starts_with("POST /exec/"), "{upstream}");
    assert!(upstream.contains("upgrade: SPDY/3.1\r\n"), "{upstream}");
    assert!(upstream.contains("x-stream-protocol-version: v4.channel.k8s.io\r\n"), "{upstream}");
}

#[tokio::test]
async fn the_port_forward_tunnel_carries_message_payloads_as_raw_spdy_bytes() {
    let t = setup(json!({"running": {}})).await;
    let (mut s, answer) = request(t.addr, &websocket("portforward", "SPDY/3.1+portforward.k8s.io")).await;
    assert!(answer.starts_with("HTTP/1.1 101"), "{answer}");
    assert!(answer_has(&answer, "sec-websocket-protocol: SPDY/3.1+portforward.k8s.io"), "{answer}");
    let upstream = t.seen.lock().unwrap()[0].clone();
    assert!(upstream.starts_with("POST /portforward/"), "{upstream}");
    assert!(upstream.contains("x-stream-protocol-version: portforward.k8s.io\r\n"), "{upstream}");

    // A masked binary message (key 1 2 3 4); the stand-in echoes its payload, which comes back
    // as an unmasked binary message.
    let payload = b"\x80\x03\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01";
    let mut message = vec![0x82, 0x80 | payload.len() as u8, 1, 2, 3, 4];
    message.extend(payload.iter().enumerate().map(|(i, b)| b ^ [1, 2, 3, 4][i % 4]));
    s.write_all(&message).await.unwrap();
    let mut echoed = vec![0u8; 2 + payload.len()];
    s.read_exact(&mut echoed).await.unwrap();
    assert_eq!(echoed[..2], [0x82, payload.len() as u8]);
    assert_eq!(&echoed[2..], payload);

    // The client's close reaches the runtime as the end of its stream; the close comes back.
    s.write_all(&[0x88, 0x82, 0, 0, 0, 0, 0x03, 0xE8]).await.unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).await.unwrap();
    assert_eq!(rest, [0x88, 0x02, 0x03, 0xE8]);
    assert_eq!(streaming_calls(&t.fake), [Call::PortForward { name: "p".into(), ports: vec![] }]);
}

#[tokio::test]
async fn refusals_in_the_api_servers_and_the_kubelets_words() {
    let t = setup(json!({"terminated": {"exitCode": 0}})).await;
    let exec = |query: &str| {
        format!(
            "POST /api/v1/namespaces/default/pods/p/exec?{query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{SPDY}"
        )
    };
    let cases = [
        // The API server: a Status, which kubectl prints as `Error from server (...)`.
        (exec("command=date&container=x&stdout=true"), "400", "container x is not valid for pod p"),
        (
            exec("command=date&stdout=true"),
            "400",
            "a container name must be specified for pod p, choose one of: [c d]",
        ),
        // The kubelet: plain text, which kubectl prints as `unable to upgrade connection: ...`.
        (exec("command=date&container=c&stdout=true"), "500", "container not found (\"c\")"),
        (exec("command=date&container=d&stdout=true"), "500", "container not found (\"d\")"),
        (exec("command=date&container=c"), "400", "you must specify at least 1 of stdin, stdout, stderr"),
        (
            format!("POST /api/v1/namespaces/default/pods/p/attach?container=c&stdout=true HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{SPDY}"),
            "500",
            "container c not found in pod p_default",
        ),
        (
            "GET /api/v1/namespaces/default/pods/p/exec?command=date&container=c&stdout=true HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_string(),
            "400",
            "Upgrade request required",
        ),
        (
            format!("POST /api/v1/namespaces/default/pods/nope/exec?command=date&stdout=true HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{SPDY}"),
            "404",
            "pods \\\"nope\\\" not found",
        ),
    ];
    for (head, code, message) in cases {
        let (s, answer) = request(t.addr, &head).await;
        assert!(answer.starts_with(&format!("HTTP/1.1 {code}")), "{head}: {answer}");
        let text = body(s).await;
        assert!(text.contains(message), "{head}: {text}");
    }
    assert_eq!(streaming_calls(&t.fake), []);

    // A pod without a ready sandbox has nothing to forward to.
    t.fake.stop_pod_sandbox(&sandbox_of(&t).await).await.unwrap();
    let (s, answer) = request(
        t.addr,
        &format!(
            "POST /api/v1/namespaces/default/pods/p/portforward HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{SPDY}"
        ),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 500"), "{answer}");
    assert_eq!(body(s).await, "pod not found (\"p_default\")");
}

async fn sandbox_of(t: &Setup) -> String {
    t.fake.list_pod_sandboxes(&Default::default()).await.unwrap().remove(0).id
}
