//! A cluster node's certificates against a real control plane (v1.20.2, `scripts/control-plane`),
//! as client-go's certificate manager keeps a kubelet's:
//! - `rotateCertificates`: a client certificate past 70 to 90 % of its life is renewed by a CSR
//!   the node makes with its own identity (auto-approved as `selfnodeclient`), the new one is
//!   used at once (the heartbeats go on after the old one expires), and a restart uses it;
//! - `serverTLSBootstrap`: the kubelet port serves no certificate until the cluster issues one
//!   (a `kubernetes.io/kubelet-serving` CSR an admin approves), then the cluster CA's, for the
//!   node's name and address.

// Real waits against a real control plane.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::cluster::{ClusterNode, ControlPlane};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn is_ready(node: &Value) -> bool {
    node["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The node's certificate signing requests of `signer`.
fn requests(plane: &ControlPlane, node: &str, signer: &str) -> Vec<Value> {
    let all = plane.json(&["get", "csr"]);
    let user = format!("system:node:{node}");
    all["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["spec"]["username"] == user.as_str() && c["spec"]["signerName"] == signer)
        .cloned()
        .collect()
}

/// Whether the PEM certificate in `path` is still valid `seconds` from now (`openssl x509
/// -checkend`).
fn valid_for(path: &Path, seconds: u64) -> bool {
    Command::new("openssl")
        .args(["x509", "-noout", "-checkend", &seconds.to_string(), "-in"])
        .arg(path)
        .output()
        .expect("openssl runs")
        .status
        .success()
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// A client certificate for node `name` from the control plane's CA, valid from `from` to
/// `until` (Unix seconds), with its key after it.
fn node_client_pair(plane: &ControlPlane, name: &str, from: i64, until: i64) -> String {
    let ca_cert = std::fs::read_to_string(plane.path("ca")).unwrap();
    let ca_key = std::fs::read_to_string(Path::new(plane.path("ca")).with_extension("key")).unwrap();
    let ca = rcgen::Issuer::from_ca_cert_pem(&ca_cert, rcgen::KeyPair::from_pem(&ca_key).unwrap()).unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "system:nodes");
    params.distinguished_name.push(rcgen::DnType::CommonName, format!("system:node:{name}"));
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let time = |t: i64| rcgen::date_time_ymd(1970, 1, 1) + Duration::from_secs(t as u64);
    params.not_before = time(from);
    params.not_after = time(until);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    format!("{}{}", cert.pem(), key.serialize_pem())
}

#[test]
fn the_client_certificate_is_renewed_before_it_expires_and_used_at_once() {
    let plane = ControlPlane::up();
    let mut node = ClusterNode::prepare(&plane, "pw-rot", &["--config", plane.path("kubelet-config")]);
    // As TLS bootstrap leaves a node, but with a certificate 100 s long of which 60 s have
    // passed: its renewal falls 10 to 30 s from now (70 to 90 % of its life).
    let now = unix_now();
    let expires = now + 40;
    let pki = node.root.join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    let current = pki.join("kubelet-client-current.pem");
    std::fs::write(&current, node_client_pair(&plane, &node.name, now - 60, expires)).unwrap();
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority: {ca}\n    server: {server}\n  name: c\ncontexts:\n- context: {{cluster: c, user: u}}\n  name: x\ncurrent-context: x\nusers:\n- name: u\n  user:\n    client-certificate: {cert}\n    client-key: {cert}\n",
        ca = plane.path("ca"),
        server = plane.path("api-server"),
        cert = current.display(),
    );
    std::fs::write(node.root.join("kubeconfig"), kubeconfig).unwrap();
    node.start();
    plane.wait_json(&["get", "node", &node.name], Duration::from_secs(60), "the node is Ready", is_ready);
    assert!(!valid_for(&current, 3600), "the node starts on the short certificate");

    // Renewed: a new key and a certificate of the signer's usual life (a year), by a request
    // named as client-go names a renewal's.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !valid_for(&current, 86_400) {
        assert!(Instant::now() < deadline, "the client certificate was not renewed:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(std::fs::read_link(&current).is_ok(), "the current certificate is a link to the newest");
    let asked = requests(&plane, &node.name, "kubernetes.io/kube-apiserver-client-kubelet");
    assert_eq!(asked.len(), 1, "{asked:#?}");
    let csr = &asked[0];
    assert!(csr["metadata"]["name"].as_str().unwrap().starts_with("csr-"), "{csr:#}");
    assert_eq!(csr["spec"]["usages"], serde_json::json!(["digital signature", "key encipherment", "client auth"]));
    assert!(csr["status"]["conditions"][0]["type"] == "Approved", "{csr:#}");

    // Past the old certificate's end, the heartbeats go on: every connection presents the new one.
    let past = expires + 5;
    while unix_now() < past {
        std::thread::sleep(Duration::from_millis(500));
    }
    let lease = ["get", "lease", "-n", "kube-node-lease", &node.name];
    let before = plane.json(&lease)["spec"]["renewTime"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    while plane.json(&lease)["spec"]["renewTime"].as_str().is_none_or(|t| t <= before.as_str()) {
        assert!(
            Instant::now() < deadline,
            "the lease was not renewed after the old certificate expired:\n{}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let n = plane.json(&["get", "node", &node.name]);
    assert!(is_ready(&n), "{n:#}");
    assert!(!node.log().contains("Unauthorized"), "{}", node.log());

    // A restart uses the renewed certificate: no new request.
    node.restart();
    plane.wait_json(&["get", "node", &node.name], Duration::from_secs(60), "the restarted node is Ready", is_ready);
    assert_eq!(requests(&plane, &node.name, "kubernetes.io/kube-apiserver-client-kubelet").len(), 1);
    plane.ok(&["delete", "node", &node.name]);
}

/// `curl` to the kubelet port: the HTTP status, or None when TLS fails.
fn kubelet_port_status(node: &ClusterNode, ca: Option<&str>) -> Option<String> {
    let mut curl = Command::new("curl");
    curl.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5"]);
    let url = match ca {
        Some(ca) => {
            // By name, so that the certificate's DNS name is what is checked.
            curl.args(["--cacert", ca, "--resolve", &format!("{}:{}:127.0.0.1", node.name, node.port)]);
            format!("https://{}:{}/healthz", node.name, node.port)
        }
        None => {
            curl.arg("-k");
            format!("https://127.0.0.1:{}/healthz", node.port)
        }
    };
    let out = curl.arg(url).output().expect("curl runs");
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).to_string())
}

#[test]
fn server_tls_bootstrap_serves_the_certificate_the_cluster_issues() {
    let plane = ControlPlane::up();
    let dir = std::env::temp_dir().join(format!("podwright-serving-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("kubelet-config.yaml");
    let base = std::fs::read_to_string(plane.path("kubelet-config")).unwrap();
    std::fs::write(&config, format!("{base}serverTLSBootstrap: true\n")).unwrap();
    let node = ClusterNode::join(&plane, "pw-srv", &["--config", config.to_str().unwrap()]);
    plane.wait_json(&["get", "node", &node.name], Duration::from_secs(60), "the node is Ready", is_ready);

    // The request: the node's names and addresses, waiting for an admin (1.20 approves none
    // of this signer's by itself). Until then no TLS handshake succeeds.
    let deadline = Instant::now() + Duration::from_secs(30);
    let csr = loop {
        if let Some(csr) = requests(&plane, &node.name, "kubernetes.io/kubelet-serving").pop() {
            break csr;
        }
        assert!(Instant::now() < deadline, "no serving certificate was asked for:\n{}", node.log());
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(csr["spec"]["usages"], serde_json::json!(["digital signature", "key encipherment", "server auth"]));
    assert!(csr["status"]["conditions"].is_null(), "{csr:#}");
    assert_eq!(kubelet_port_status(&node, None), None, "a handshake succeeded with no certificate issued");

    let name = csr["metadata"]["name"].as_str().unwrap();
    plane.ok(&["certificate", "approve", name]);
    // Then the port presents the CA's certificate for the node's name: anonymous gets 401.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match kubelet_port_status(&node, Some(plane.path("ca"))) {
            Some(code) => {
                assert_eq!(code, "401");
                break;
            }
            None => assert!(Instant::now() < deadline, "the issued certificate is not served:\n{}", node.log()),
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let served = node.root.join("pki/kubelet-server-current.pem");
    assert!(valid_for(&served, 86_400), "{}", served.display());
    plane.ok(&["delete", "node", &node.name]);
    std::fs::remove_dir_all(&dir).unwrap();
}
