//! A pod naming a RuntimeClass through the local API, which serves none yet: refused as the API
//! server's RuntimeClass admission refuses a class it does not have.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use podwright_runtime::{Clock, FakeRuntime};
use podwright_server::{ApiServer, ServerConfig};
use serde_json::{Value, json};
use tower::ServiceExt;

async fn create_pod(pod: &Value) -> (StatusCode, Value) {
    let clock = Clock::new();
    let config = ServerConfig { node_name: "n".into(), root: "/nonexistent".into(), host_ip: None };
    let api = ApiServer::new(config, clock, FakeRuntime::new(clock)).0;
    let request = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/namespaces/default/pods?fieldManager=kubectl-create&fieldValidation=Strict")
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(pod).unwrap()))
        .unwrap();
    let response = api.router().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
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
