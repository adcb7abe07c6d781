//! The local Node is Ready while the runtime answers, and not Ready, in the kubelet's words,
//! while it does not.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use podwright_runtime::{Clock, Decorated, FakeRuntime, Hook, RuntimeError, RuntimeOperation, RuntimeResult};
use podwright_server::{ApiServer, ServerConfig};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tower::ServiceExt;

/// Fails every call while `down`, as a runtime whose socket is gone.
struct Outage {
    down: Arc<AtomicBool>,
}

impl Hook for Outage {
    async fn around<T: Send>(
        &self,
        _op: RuntimeOperation,
        _image: Option<&str>,
        call: impl Future<Output = RuntimeResult<T>> + Send,
    ) -> RuntimeResult<T> {
        if self.down.load(Ordering::SeqCst) {
            return Err(RuntimeError::Unreachable {
                endpoint: "unix:///run/containerd/containerd.sock".into(),
                message: "connection refused".into(),
            });
        }
        call.await
    }
}

async fn ready_condition(api: &ApiServer) -> Value {
    let request = Request::get("/api/v1/nodes/n").body(Body::empty()).unwrap();
    let response = api.router().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    let node: Value = serde_json::from_slice(&bytes).unwrap();
    let conditions = node["status"]["conditions"].as_array().unwrap().clone();
    conditions.into_iter().find(|c| c["type"] == "Ready").expect("a Ready condition")
}

#[tokio::test]
async fn the_node_is_not_ready_while_its_runtime_does_not_answer() {
    let clock = Clock::new();
    let down = Arc::new(AtomicBool::new(false));
    let runtime = Decorated::new(FakeRuntime::new(clock), Outage { down: down.clone() });
    let config = ServerConfig { node_name: "n".into(), root: "/nonexistent".into(), host_ip: None };
    let api = ApiServer::new(config, clock, Arc::new(runtime)).0;

    let ready = ready_condition(&api).await;
    assert_eq!((&ready["status"], &ready["reason"]), (&"True".into(), &"KubeletReady".into()), "{ready}");

    down.store(true, Ordering::SeqCst);
    let ready = ready_condition(&api).await;
    assert_eq!((&ready["status"], &ready["reason"]), (&"False".into(), &"KubeletNotReady".into()), "{ready}");
    let message = ready["message"].as_str().unwrap();
    assert!(message.starts_with("container runtime is down: "), "{message}");
    assert!(message.contains("connection refused"), "{message}");

    down.store(false, Ordering::SeqCst);
    assert_eq!(ready_condition(&api).await["status"], "True");
}
