//! ConfigMaps and Secrets through the local API, validated as the API server validates them:
//! kubectl's requests with bad keys, oversize data and changes to immutable objects get the
//! API server's 422 bodies, byte for byte.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use podwright_runtime::{Clock, FakeRuntime};
use podwright_server::{ApiServer, ServerConfig};
use serde_json::{Value, json};
use tower::ServiceExt;

const KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
const IMMUTABLE: &str = "field is immutable when `immutable` is set";

fn api() -> ApiServer {
    let clock = Clock::new();
    let config = ServerConfig { node_name: "n".into(), root: "/nonexistent".into(), host_ip: None };
    ApiServer::new(config, clock, FakeRuntime::new(clock)).0
}

/// Sends one request as kubectl does and returns the status and the JSON body.
async fn send(api: &ApiServer, method: Method, uri: &str, content_type: &str, body: &Value) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let response = api.router().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or_else(|_| json!(String::from_utf8_lossy(&bytes))))
}

async fn create(api: &ApiServer, resource: &str, body: &Value) -> (StatusCode, Value) {
    let uri = format!("/api/v1/namespaces/default/{resource}?fieldManager=kubectl-create&fieldValidation=Strict");
    send(api, Method::POST, &uri, "application/json", body).await
}

/// The `Status` of a 422 Invalid with one cause per `(field, reason, message)`.
fn invalid(kind: &str, name: &str, causes: &[(&str, &str, &str)]) -> Value {
    let rendered: Vec<String> = causes.iter().map(|(field, _, message)| format!("{field}: {message}")).collect();
    let message = match rendered.as_slice() {
        [one] => format!("{kind} \"{name}\" is invalid: {one}"),
        many => format!("{kind} \"{name}\" is invalid: [{}]", many.join(", ")),
    };
    let causes: Vec<Value> = causes
        .iter()
        .map(|(field, reason, message)| json!({"reason": reason, "message": message, "field": field}))
        .collect();
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "Invalid",
        "details": {"name": name, "kind": kind, "causes": causes}, "code": 422,
    })
}

/// `kubectl create configmap NAME --from-literal=...` as 1.27 sends it.
fn config_map(name: &str, data: Value) -> Value {
    json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": name, "creationTimestamp": null}, "data": data})
}

#[tokio::test]
async fn config_map_keys_are_checked_as_the_api_server_checks_them() {
    let api = api();
    let (status, body) =
        create(&api, "configmaps", &config_map("bad", json!({"a b": "x", "..x": "y", "ok": "z"}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body,
        invalid(
            "ConfigMap",
            "bad",
            &[
                ("data[..x]", "FieldValueInvalid", "Invalid value: \"..x\": must not start with '..'"),
                ("data[a b]", "FieldValueInvalid", &format!("Invalid value: \"a b\": {KEY_MSG}")),
            ]
        )
    );
    // Nothing was stored.
    let (status, _) = send(&api, Method::GET, "/api/v1/namespaces/default/configmaps/bad", "", &json!(null)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let both = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "both"},
        "data": {"k": "x"}, "binaryData": {"k": "eA=="}});
    let (status, body) = create(&api, "configmaps", &both).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body,
        invalid(
            "ConfigMap",
            "both",
            &[("data[k]", "FieldValueInvalid", "Invalid value: \"k\": duplicate of key present in binaryData")]
        )
    );
}

#[tokio::test]
async fn data_over_a_mebibyte_is_too_long() {
    let api = api();
    // Past axum's own 2 MB limit on a body, still under the API server's 3 MiB.
    let half = "x".repeat(1_300_000);
    let (status, body) = create(&api, "configmaps", &config_map("big", json!({"a": half, "b": half}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body,
        invalid("ConfigMap", "big", &[("[]", "FieldValueTooLong", "Too long: must have at most 1048576 bytes")])
    );

    let secret = json!({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "big"},
        "stringData": {"a": "x".repeat(1024 * 1024 + 1)}});
    let (status, body) = create(&api, "secrets", &secret).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body,
        invalid("Secret", "big", &[("data", "FieldValueTooLong", "Too long: must have at most 1048576 bytes")])
    );

    let exactly = json!({"a": "x".repeat(1024 * 1024)});
    assert_eq!(create(&api, "configmaps", &config_map("at-the-limit", exactly)).await.0, StatusCode::CREATED);
}

#[tokio::test]
async fn secrets_are_stored_as_data_and_checked_by_type() {
    let api = api();
    let secret = json!({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s"},
        "data": {"user": "YWRtaW4="}, "stringData": {"password": "hunter2"}});
    let (status, stored) = create(&api, "secrets", &secret).await;
    assert_eq!(status, StatusCode::CREATED, "{stored}");
    assert_eq!(stored["data"], json!({"password": "aHVudGVyMg==", "user": "YWRtaW4="}));
    assert_eq!(stored["type"], "Opaque");
    assert!(stored.get("stringData").is_none(), "{stored}");

    let tls = json!({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "Tls"},
        "type": "kubernetes.io/tls", "stringData": {"tls.key": "k", "bad key": "v"}});
    let (status, body) = create(&api, "secrets", &tls).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let name_msg = "Invalid value: \"Tls\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    assert_eq!(
        body,
        invalid(
            "Secret",
            "Tls",
            &[
                ("metadata.name", "FieldValueInvalid", name_msg),
                ("data[bad key]", "FieldValueInvalid", &format!("Invalid value: \"bad key\": {KEY_MSG}")),
                ("data[tls.crt]", "FieldValueRequired", "Required value"),
            ]
        )
    );

    let docker = json!({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "pull"},
        "type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": "{\"auths\": "}});
    let (status, body) = create(&api, "secrets", &docker).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body,
        invalid(
            "Secret",
            "pull",
            &[(
                "data[.dockerconfigjson]",
                "FieldValueInvalid",
                "Invalid value: \"<secret contents redacted>\": unexpected end of JSON input"
            )]
        )
    );

    // The type of a secret may not change.
    let changed = json!({"type": "kubernetes.io/basic-auth"});
    let uri = "/api/v1/namespaces/default/secrets/s";
    let (status, body) = send(&api, Method::PATCH, uri, "application/merge-patch+json", &changed).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body,
        invalid(
            "Secret",
            "s",
            &[("type", "FieldValueInvalid", "Invalid value: \"kubernetes.io/basic-auth\": field is immutable")]
        )
    );
}

#[tokio::test]
async fn an_immutable_config_map_keeps_its_data() {
    let api = api();
    let mut cm = config_map("frozen", json!({"k": "v"}));
    cm["immutable"] = json!(true);
    assert_eq!(create(&api, "configmaps", &cm).await.0, StatusCode::CREATED);
    let uri = "/api/v1/namespaces/default/configmaps/frozen";

    let (status, body) =
        send(&api, Method::PATCH, uri, "application/strategic-merge-patch+json", &json!({"data": {"k": "new"}})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body,
        invalid("ConfigMap", "frozen", &[("data", "FieldValueForbidden", &format!("Forbidden: {IMMUTABLE}"))])
    );

    let mut replaced = config_map("frozen", json!({"k": "v", "more": "x"}));
    replaced["immutable"] = json!(false);
    let (status, body) = send(&api, Method::PUT, uri, "application/json", &replaced).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body,
        invalid(
            "ConfigMap",
            "frozen",
            &[
                ("immutable", "FieldValueForbidden", &format!("Forbidden: {IMMUTABLE}")),
                ("data", "FieldValueForbidden", &format!("Forbidden: {IMMUTABLE}")),
            ]
        )
    );

    // Its metadata may change.
    let labels = json!({"metadata": {"labels": {"app": "web"}}});
    let (status, stored) = send(&api, Method::PATCH, uri, "application/merge-patch+json", &labels).await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    assert_eq!(stored["metadata"]["labels"]["app"], "web");
    assert_eq!(stored["data"], json!({"k": "v"}));

    // A bad key added by a patch to a mutable one is refused like one on create.
    assert_eq!(create(&api, "configmaps", &config_map("open", json!({}))).await.0, StatusCode::CREATED);
    let uri = "/api/v1/namespaces/default/configmaps/open";
    let (status, body) =
        send(&api, Method::PATCH, uri, "application/merge-patch+json", &json!({"data": {"a/b": "x"}})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body,
        invalid(
            "ConfigMap",
            "open",
            &[("data[a/b]", "FieldValueInvalid", &format!("Invalid value: \"a/b\": {KEY_MSG}"))]
        )
    );
}
