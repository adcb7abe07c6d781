//! The node's requests held to the rules of API servers newer than the v1.20.2 one the
//! end-to-end tests run against (the project's notes, `cluster-node.md` §1.12), answered with
//! responses recorded from that v1.20.2 server (`tests/fixtures/v1.20.2-node.json`, cut from
//! its audit log and `kubectl get`):
//! - `certificates.k8s.io/v1beta1` is gone from 1.22: certificates are asked of `v1` only;
//! - the Node authorizer's selector rules (`AuthorizeNodeWithSelectors`, on by default from
//!   1.32): a node may list or watch pods only with `spec.nodeName=<itself>` and Nodes only with
//!   `metadata.name=<itself>`; anything else gets the 403 those servers give.

use http::{Method, Request, Response};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::client::Body;
use podwright_cluster::csr::{self, CertificateRequest, RequestName};
use podwright_cluster::{node_status, pods};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// The node the recorded exchanges are of.
const NODE: &str = "pw-srv-30806-0";

fn fixtures() -> Value {
    serde_json::from_str(include_str!("fixtures/v1.20.2-node.json")).unwrap()
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    path: String,
    query: String,
    body: Option<Value>,
    code: u16,
}

/// An API server with the newest rules, answering from the recorded exchanges.
#[derive(Clone)]
struct NewestApiServer {
    fixtures: Arc<Value>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code})
}

/// The value of `fieldSelector` in a query, decoded.
fn field_selector(query: &str) -> Option<String> {
    query.split('&').find_map(|kv| kv.strip_prefix("fieldSelector=")).map(|v| v.replace("%3D", "=").replace("%2C", ","))
}

impl NewestApiServer {
    fn new() -> NewestApiServer {
        NewestApiServer { fixtures: Arc::new(fixtures()), seen: Arc::default() }
    }

    fn recorded(&self, exchange: &str) -> Value {
        self.fixtures["exchanges"][exchange]["responseObject"].clone()
    }

    fn answer(&self, method: &Method, path: &str, query: &str, body: Option<&Value>) -> (u16, Value) {
        let watch = query.split('&').any(|kv| kv == "watch=true");
        let selector = field_selector(query);
        let user = format!("system:node:{NODE}");
        if path.starts_with("/apis/certificates.k8s.io/v1beta1") {
            return (404, status(404, "NotFound", "the server could not find the requested resource"));
        }
        match (method.as_str(), path) {
            ("GET", "/api/v1/pods") if selector.as_deref() != Some(&format!("spec.nodeName={NODE}")) => (
                403,
                status(
                    403,
                    "Forbidden",
                    &format!(
                        "pods is forbidden: User \"{user}\" cannot list resource \"pods\" in API group \"\" at the cluster scope: can only list/watch pods with spec.nodeName field selector"
                    ),
                ),
            ),
            ("GET", "/api/v1/nodes") if selector.as_deref() != Some(&format!("metadata.name={NODE}")) => (
                403,
                status(
                    403,
                    "Forbidden",
                    &format!(
                        "nodes is forbidden: User \"{user}\" cannot list resource \"nodes\" in API group \"\" at the cluster scope: node '{NODE}' cannot read all nodes, only its own Node object"
                    ),
                ),
            ),
            // A watch that ends at once: the caller's watcher resumes it.
            ("GET", _) if watch => (200, Value::Null),
            ("GET", "/api/v1/pods") => (200, self.recorded("pods-list")),
            ("GET", "/api/v1/nodes") => {
                let node = self.recorded("node-create");
                (
                    200,
                    json!({"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": [node]}),
                )
            }
            ("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests") => {
                let mut created = self.recorded("csr-create");
                created["metadata"]["name"] = body.map(|b| b["metadata"]["name"].clone()).unwrap_or_default();
                (201, created)
            }
            ("GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests") => {
                let mut issued = self.recorded("csr-issued");
                let name = selector.as_deref().and_then(|s| s.strip_prefix("metadata.name=")).unwrap_or_default();
                issued["metadata"]["name"] = json!(name);
                (
                    200,
                    json!({"kind": "CertificateSigningRequestList", "apiVersion": "certificates.k8s.io/v1", "metadata": {"resourceVersion": "1"}, "items": [issued]}),
                )
            }
            _ => (404, status(404, "NotFound", "the server could not find the requested resource")),
        }
    }

    fn client(&self) -> kube::Client {
        let server = self.clone();
        let service = tower::service_fn(move |req: Request<Body>| {
            let server = server.clone();
            async move {
                let (parts, body) = req.into_parts();
                let bytes = body.collect().await?.to_bytes();
                let body: Option<Value> = serde_json::from_slice(&bytes).ok();
                let (path, query) = (parts.uri.path().to_string(), parts.uri.query().unwrap_or_default().to_string());
                let (code, answer) = server.answer(&parts.method, &path, &query, body.as_ref());
                server.seen.lock().unwrap().push(Seen { method: parts.method, path, query, body, code });
                let bytes = if answer.is_null() { Vec::new() } else { serde_json::to_vec(&answer)? };
                let response = Response::builder().status(code).header("content-type", "application/json");
                Ok::<_, tower::BoxError>(response.body(Body::from(bytes))?)
            }
        });
        kube::Client::new(service, "default")
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// What it refused (a 403 or 404): nothing, for a node that follows the newest rules.
    fn refused(&self) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.code >= 400).collect()
    }
}

#[tokio::test]
async fn tls_bootstrap_asks_certificates_v1_only_and_waits_by_name() {
    let server = NewestApiServer::new();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert =
        csr::request_certificate(&server.client(), &key, &CertificateRequest::client(NODE), RequestName::Digested)
            .await
            .unwrap();
    let recorded = server.recorded("csr-issued")["status"]["certificate"].as_str().unwrap().to_string();
    use base64::Engine;
    let recorded = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(recorded).unwrap()).unwrap();
    assert_eq!(cert, recorded);
    assert!(server.refused().is_empty(), "{:#?}", server.refused());
    let seen = server.seen();
    assert!(seen.iter().all(|s| s.path.starts_with("/apis/certificates.k8s.io/v1/")), "{seen:#?}");
    let created = seen.iter().find(|s| s.method == Method::POST).expect("the request was created");
    let body = created.body.as_ref().unwrap();
    let name = body["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("node-csr-"), "{body:#}");
    assert_eq!(body["spec"]["signerName"], "kubernetes.io/kube-apiserver-client-kubelet");
    assert_eq!(body["spec"]["usages"], json!(["digital signature", "key encipherment", "client auth"]));
    // Waited for by its name, as a node may read only its own requests.
    let waited = seen.iter().find(|s| s.method == Method::GET).expect("the request was waited for");
    assert_eq!(field_selector(&waited.query), Some(format!("metadata.name={name}")));
}

#[tokio::test]
async fn the_node_reads_pods_and_nodes_only_through_its_own_selectors() {
    let server = NewestApiServer::new();
    let client = server.client();
    // The server's rule bites: a list without the selector is refused with the 1.32 text.
    let unscoped = Api::<Pod>::all(client.clone()).list(&ListParams::default()).await.unwrap_err();
    assert!(unscoped.to_string().contains("can only list/watch pods with spec.nodeName field selector"), "{unscoped}");
    server.seen.lock().unwrap().clear();

    pods::list_bound(&client, NODE).await.unwrap();
    let runtime = podwright_runtime::fake::FakeRuntime::new(podwright_runtime::Clock::new());
    let (cidr, _) = tokio::sync::watch::channel(None);
    let (node, mut followed) = tokio::sync::watch::channel(None);
    let following = tokio::spawn(node_status::follow_node(client, NODE.to_string(), runtime, None, cidr, node));
    tokio::time::timeout(std::time::Duration::from_secs(10), followed.wait_for(Option::is_some))
        .await
        .expect("the node's own Node is read")
        .unwrap();
    following.abort();

    assert!(server.refused().is_empty(), "{:#?}", server.refused());
    let seen = server.seen();
    let reads =
        |path: &str| seen.iter().filter(|s| s.path == path).map(|s| field_selector(&s.query)).collect::<Vec<_>>();
    let pods = reads("/api/v1/pods");
    assert!(!pods.is_empty() && pods.iter().all(|s| s.as_deref() == Some(&format!("spec.nodeName={NODE}"))));
    let nodes = reads("/api/v1/nodes");
    assert!(!nodes.is_empty() && nodes.iter().all(|s| s.as_deref() == Some(&format!("metadata.name={NODE}"))));
}
