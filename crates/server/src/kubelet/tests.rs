use super::*;
use crate::kubelet::auth::tests::FakeReviews;
use axum::body::Body;
use axum::http::HeaderValue;
use jiff::Timestamp;
use podwright_runtime::{Clock, FakeRuntime, Runtime};
use serde_json::Value;
use std::path::{Path, PathBuf};
use tower::ServiceExt;

const NODE: &str = "kl-node";

struct Host {
    pods: Vec<Arc<Value>>,
    runtime: Arc<FakeRuntime>,
    root: PathBuf,
    clock: Clock,
}

impl PodHost for Host {
    fn pod(&self, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.pods.iter().find(|p| p["metadata"]["namespace"] == ns && p["metadata"]["name"] == name).cloned()
    }
    fn pods(&self) -> Vec<Arc<Value>> {
        self.pods.clone()
    }
    fn runtime(&self) -> &dyn Runtime {
        &*self.runtime
    }
    fn root(&self) -> &Path {
        &self.root
    }
    fn now(&self) -> Timestamp {
        self.clock.now()
    }
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default", "uid": "u-1"},
    "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "busybox"}, {"name": "second", "image": "busybox"}]},
    "status": {"phase": "Running", "containerStatuses": [
        {"name": "app", "state": {"waiting": {"reason": "ContainerCreating"}}},
    ]}})
}

fn server(reviews: Arc<FakeReviews>, settings: AuthSettings) -> KubeletServer {
    let clock = Clock::new();
    let runtime = FakeRuntime::new(clock);
    let root = PathBuf::from("/nonexistent");
    let usage = Arc::new(UsageCollector::new(runtime.clone(), clock, NODE, &root));
    let host = Arc::new(Host { pods: vec![Arc::new(pod())], runtime, root, clock });
    let auth = Auth::new(NODE, settings, reviews, clock);
    KubeletServer::new(host, usage, Arc::new(Metrics::default()), auth)
}

async fn ask(k: &KubeletServer, method: Method, path: &str, token: Option<&str>) -> (StatusCode, String) {
    let mut req = Request::builder().method(method).uri(path).body(Body::empty()).unwrap();
    if let Some(t) = token {
        req.headers_mut().insert(header::AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {t}")).unwrap());
    }
    let resp = k.router().oneshot(req).await.unwrap();
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn paths_name_the_kubelets_endpoints() {
    let get = &Method::GET;
    let parse = |m: &Method, p: &str| Endpoint::parse(m, p);
    assert_eq!(
        parse(get, "/containerLogs/default/web/app"),
        Ok(Endpoint::ContainerLogs { ns: "default".into(), name: "web".into(), container: "app".into() })
    );
    let exec = |uid: Option<&str>| Endpoint::Stream {
        kind: Kind::Exec,
        ns: "ns".into(),
        name: "p".into(),
        uid: uid.map(str::to_string),
        container: Some("c".into()),
    };
    assert_eq!(parse(&Method::POST, "/exec/ns/p/c"), Ok(exec(None)));
    assert_eq!(parse(get, "/exec/ns/p/u-1/c"), Ok(exec(Some("u-1"))));
    assert!(matches!(parse(get, "/attach/ns/p/c"), Ok(Endpoint::Stream { kind: Kind::Attach, .. })));
    assert_eq!(
        parse(&Method::POST, "/portForward/ns/p"),
        Ok(Endpoint::Stream { kind: Kind::PortForward, ns: "ns".into(), name: "p".into(), uid: None, container: None })
    );
    assert!(matches!(parse(get, "/portForward/ns/p/u-1"), Ok(Endpoint::Stream { uid: Some(_), .. })));
    for (path, endpoint) in [
        ("/pods", Endpoint::Pods),
        ("/stats/summary", Endpoint::Summary),
        ("/metrics", Endpoint::Metrics),
        ("/metrics/resource", Endpoint::ResourceMetrics),
        ("/healthz", Endpoint::Healthz),
    ] {
        assert_eq!(parse(get, path), Ok(endpoint), "{path}");
    }
    for path in
        ["/", "/exec/ns/p", "/exec/ns/p/u/c/x", "/containerLogs/ns/p", "/portForward/ns/p/u/x", "/exec/ns//c", "/stats"]
    {
        assert_eq!(parse(get, path).unwrap_err().code, StatusCode::NOT_FOUND, "{path}");
    }
    assert_eq!(parse(&Method::POST, "/pods").unwrap_err().code, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(parse(&Method::DELETE, "/exec/ns/p/c").unwrap_err().code, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn an_anonymous_request_gets_401_on_every_path() {
    let reviews = FakeReviews::new();
    let k = server(reviews.clone(), AuthSettings::default());
    for path in ["/pods", "/healthz", "/containerLogs/default/web/app", "/nowhere"] {
        assert_eq!(ask(&k, Method::GET, path, None).await, (StatusCode::UNAUTHORIZED, "Unauthorized".into()), "{path}");
    }
    assert_eq!(reviews.asked(), (0, 0));
}

#[tokio::test]
async fn a_token_is_reviewed_and_its_user_authorized_for_the_paths_subresource() {
    let reviews = FakeReviews::new();
    reviews.user("good-token", "system:serviceaccount:default:nobody", &["system:serviceaccounts"]);
    let k = server(reviews.clone(), AuthSettings::default());
    assert_eq!(
        ask(&k, Method::GET, "/pods", Some("bad-token")).await,
        (StatusCode::UNAUTHORIZED, "Unauthorized".into())
    );
    let (code, body) = ask(&k, Method::GET, "/pods", Some("good-token")).await;
    assert_eq!(
        (code, body.as_str()),
        (
            StatusCode::FORBIDDEN,
            "Forbidden (user=system:serviceaccount:default:nobody, verb=get, resource=nodes, subresource(s)=[pods proxy])"
        )
    );
    let spec = reviews.last_access().unwrap();
    let attrs = spec.resource_attributes.clone().unwrap();
    assert_eq!(
        (attrs.verb.as_deref(), attrs.resource.as_deref(), attrs.subresource.as_deref(), attrs.name.as_deref()),
        (Some("get"), Some("nodes"), Some("proxy"), Some(NODE))
    );
    assert_eq!(attrs.version.as_deref(), Some("v1"));
    assert_eq!(spec.groups, Some(vec!["system:serviceaccounts".to_string(), "system:authenticated".to_string()]));
    let (code, body) = ask(&k, Method::POST, "/stats/summary", Some("good-token")).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert!(body.ends_with("verb=create, resource=nodes, subresource(s)=[stats])"), "{body}");
    // Allowed: the endpoints answer.
    reviews.allow("system:serviceaccount:default:nobody");
    let k = server(reviews.clone(), AuthSettings::default());
    let (code, body) = ask(&k, Method::GET, "/pods", Some("good-token")).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((list["kind"].as_str(), list["items"][0]["metadata"]["name"].as_str()), (Some("PodList"), Some("web")));
    assert_eq!(ask(&k, Method::GET, "/healthz", Some("good-token")).await, (StatusCode::OK, "ok".into()));
    let (code, body) = ask(&k, Method::GET, "/metrics", Some("good-token")).await;
    assert!(code == StatusCode::OK && body.contains("kubelet_running_pods"), "{code} {body}");
}

#[tokio::test]
async fn endpoints_refuse_in_the_kubelets_words() {
    let reviews = FakeReviews::new();
    reviews.user("t", "admin", &["system:masters"]);
    let k = server(reviews, AuthSettings { authorization: Authorization::AlwaysAllow, ..Default::default() });
    let t = Some("t");
    for (method, path, code, text) in [
        (Method::GET, "/containerLogs/default/nope/app", 404, "pod \"nope\" does not exist"),
        (Method::GET, "/containerLogs/default/web/nope", 404, "container \"nope\" not found in pod \"web\""),
        (
            Method::GET,
            "/containerLogs/default/web/app",
            400,
            "container \"app\" in pod \"web\" is waiting to start: ContainerCreating",
        ),
        (
            Method::GET,
            "/containerLogs/default/web/app?tailLines=-1",
            400,
            "tailLines: Invalid value: must be greater than or equal to 0",
        ),
        (Method::POST, "/exec/default/nope/app?command=ls&output=1", 404, "pod does not exist"),
        (Method::POST, "/exec/default/web/app?command=ls", 400, "you must specify at least 1 of stdin, stdout, stderr"),
        (Method::POST, "/exec/default/web/app?command=ls&output=1", 400, "Upgrade request required"),
        (Method::POST, "/portForward/default/web/other-uid", 404, "pod not found"),
        (Method::GET, "/nowhere", 404, "404 page not found"),
    ] {
        let (got, body) = ask(&k, method, path, t).await;
        assert_eq!((got.as_u16(), body.as_str()), (code, text), "{path}");
    }
}

#[tokio::test]
async fn a_verified_client_certificate_is_the_user_of_its_subject() {
    let reviews = FakeReviews::new();
    reviews.allow("kube-apiserver-kubelet-client");
    let k = server(reviews.clone(), AuthSettings::default());
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, "kube-apiserver-kubelet-client");
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "system:masters");
    let der = params.self_signed(&key).unwrap().der().to_vec();
    let mut req = Request::builder().uri("/pods").body(Body::empty()).unwrap();
    let peer = Peer { addr: "127.0.0.1:5000".parse().unwrap(), certificate: Some(Arc::from(&der[..])) };
    req.extensions_mut().insert(ConnectInfo(peer));
    let resp = k.router().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let spec = reviews.last_access().unwrap();
    assert_eq!(spec.user.as_deref(), Some("kube-apiserver-kubelet-client"));
    assert_eq!(spec.groups, Some(vec!["system:masters".to_string(), "system:authenticated".to_string()]));
    assert_eq!(reviews.asked(), (0, 1));
}
