//! Fields of the 1.37 API on pods sent with each `fieldValidation` (and none, as client-go
//! programs send): a field podwright does not honour is refused by name whatever the client asks,
//! a field it does is kept, and only a field unknown to 1.37 follows the API server's
//! Strict/Warn/Ignore rules.

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

/// The status, the `Warning` headers and the body.
async fn create(api: &ApiServer, validation: Option<&str>, pod: &Value) -> (StatusCode, Vec<String>, Value) {
    let uri = match validation {
        Some(v) => format!("/api/v1/namespaces/default/pods?fieldValidation={v}"),
        None => "/api/v1/namespaces/default/pods".to_string(),
    };
    let request = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(pod).unwrap()))
        .unwrap();
    let response = api.router().oneshot(request).await.unwrap();
    let status = response.status();
    let warnings = response.headers().get_all("warning").iter().map(|v| v.to_str().unwrap().to_string()).collect();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, warnings, serde_json::from_slice(&bytes).unwrap())
}

fn pod(name: &str, container: Value, spec_extra: Value) -> Value {
    let mut spec = json!({"volumes": [{"name": "d", "emptyDir": {}}], "containers": [container]});
    spec.as_object_mut().unwrap().extend(spec_extra.as_object().unwrap().clone());
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

const VALIDATIONS: [Option<&str>; 4] = [None, Some("Ignore"), Some("Warn"), Some("Strict")];

#[tokio::test]
async fn a_1_37_field_podwright_does_not_honour_is_refused_whatever_the_field_validation() {
    let api = api();
    for (i, validation) in VALIDATIONS.into_iter().enumerate() {
        let container = json!({"name": "c", "image": "busybox",
            "volumeMounts": [{"name": "d", "mountPath": "/d", "bindMountOptions": ["noexec"]}]});
        let (status, _, body) = create(&api, validation, &pod(&format!("p{i}"), container, json!({}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{validation:?}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains(
                "spec.containers[0].volumeMounts[0].bindMountOptions: Unsupported value: not supported by podwright yet"
            ),
            "{validation:?}: {message}"
        );
    }
}

#[tokio::test]
async fn a_1_37_field_podwright_honours_or_finds_inert_is_kept() {
    let api = api();
    for (i, validation) in VALIDATIONS.into_iter().enumerate() {
        let group = json!({"schedulingGroup": {"podGroupName": "g"}, "restartPolicy": "Never"});
        let rules = json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]);
        let container = json!({"name": "c", "image": "busybox", "restartPolicy": "Never", "restartPolicyRules": rules});
        let (status, warnings, body) = create(&api, validation, &pod(&format!("k{i}"), container, group)).await;
        assert_eq!(status, StatusCode::CREATED, "{validation:?}: {body}");
        assert_eq!(body["spec"]["schedulingGroup"], json!({"podGroupName": "g"}), "{validation:?}");
        assert_eq!(body["spec"]["containers"][0]["restartPolicyRules"], rules, "{validation:?}");
        assert!(warnings.is_empty(), "{validation:?}: {warnings:?}");
    }
}

#[tokio::test]
async fn a_field_unknown_to_1_37_follows_the_api_servers_rules() {
    let api = api();
    let container = || json!({"name": "c", "image": "busybox", "restartPolicyRulez": []});
    let (status, warnings, body) = create(&api, None, &pod("u0", container(), json!({}))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(warnings, [r#"299 - "unknown field \"spec.containers[0].restartPolicyRulez\"""#]);
    let (status, warnings, _) = create(&api, Some("Ignore"), &pod("u1", container(), json!({}))).await;
    assert_eq!((status, warnings.len()), (StatusCode::CREATED, 0));
    let (status, _, body) = create(&api, Some("Strict"), &pod("u2", container(), json!({}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains(r#"unknown field "spec.containers[0].restartPolicyRulez""#),
        "{body}"
    );
}
