//! RuntimeClasses through the local API (`node.k8s.io/v1`, cluster-scoped), and pods naming
//! them admitted as the API server's RuntimeClass admission plugin admits them: an unknown class
//! refused, a class's overhead set on the pod.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use podwright_runtime::{Clock, FakeRuntime};
use podwright_server::{ApiServer, ServerConfig};
use serde_json::{Value, json};
use tower::ServiceExt;

fn api() -> ApiServer {
    let clock = Clock::new();
    let config = ServerConfig { node_name: "n".into(), root: "/nonexistent".into(), host_ip: None };
    ApiServer::new(config, clock, FakeRuntime::new(clock)).0
}

async fn call(api: &ApiServer, method: Method, uri: &str, body: Option<&Value>) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(body.map_or_else(Body::empty, |b| Body::from(serde_json::to_vec(b).unwrap())))
        .unwrap();
    let response = api.router().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

const PODS: &str = "/api/v1/namespaces/default/pods?fieldManager=kubectl-create&fieldValidation=Strict";
const CLASSES: &str = "/apis/node.k8s.io/v1/runtimeclasses";

async fn create_pod(pod: &Value) -> (StatusCode, Value) {
    call(&api(), Method::POST, PODS, Some(pod)).await
}

#[tokio::test]
async fn runtime_classes_are_served_and_pods_get_their_overhead() {
    let api = api();
    let class = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "vm"},
        "handler": "runc-alt", "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}}});
    let (status, body) = call(&api, Method::POST, CLASSES, Some(&class)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["apiVersion"], "node.k8s.io/v1");
    let (status, body) = call(&api, Method::GET, &format!("{CLASSES}/vm"), None).await;
    assert_eq!((status, &body["handler"]), (StatusCode::OK, &json!("runc-alt")));
    let (_, list) = call(&api, Method::GET, CLASSES, None).await;
    assert_eq!((&list["kind"], list["items"].as_array().unwrap().len()), (&json!("RuntimeClassList"), 1));
    // Not in the core group.
    let (status, _) = call(&api, Method::GET, "/api/v1/runtimeclasses", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"runtimeClassName": "vm", "containers": [{"name": "c", "image": "busybox"}]}});
    let (status, body) = call(&api, Method::POST, PODS, Some(&pod)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["spec"]["overhead"], json!({"cpu": "250m", "memory": "64Mi"}));

    let mut other = pod.clone();
    other["metadata"]["name"] = json!("q");
    other["spec"]["overhead"] = json!({"cpu": "1"});
    let (status, body) = call(&api, Method::POST, PODS, Some(&other)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "pods \"q\" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
    );

    let (status, body) = call(&api, Method::GET, &format!("{CLASSES}/nope"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["message"], "runtimeclasses.node.k8s.io \"nope\" not found");
    let mut changed = class.clone();
    changed["handler"] = json!("kata");
    let (status, body) = call(&api, Method::PUT, &format!("{CLASSES}/vm"), Some(&changed)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, _) = call(&api, Method::DELETE, &format!("{CLASSES}/vm"), None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_pod_of_an_unknown_class_is_forbidden() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"runtimeClassName": "gvisor", "containers": [{"name": "c", "image": "busybox"}]},
    });
    let (status, body) = create_pod(&pod).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "pods \"p\" is forbidden: pod rejected: RuntimeClass \"gvisor\" not found",
            "reason": "Forbidden", "details": {"name": "p", "kind": "pods"}, "code": 403,
        })
    );
}

#[tokio::test]
async fn a_pod_for_another_os_is_created_for_the_node_to_reject() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w"},
        "spec": {"os": {"name": "windows"}, "containers": [{"name": "c", "image": "busybox"}]},
    });
    let (status, body) = create_pod(&pod).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}
