//! ServiceAccounts through the local API: a stored kind like ConfigMaps (discovery, Tables,
//! strategic merge patches), a `default` one in every namespace as the serviceaccount controller
//! keeps it, and new pods admitted as the API server's ServiceAccount admission plugin admits
//! them.

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

async fn send(
    api: &ApiServer,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let mut request = Request::builder().method(method).uri(uri);
    if !headers.iter().any(|(k, _)| *k == "content-type") {
        request = request.header("content-type", "application/json");
    }
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let request = request.body(body.map_or_else(Body::empty, |b| Body::from(serde_json::to_vec(b).unwrap()))).unwrap();
    let response = api.router().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or_else(|_| json!(String::from_utf8_lossy(&bytes))))
}

async fn call(api: &ApiServer, method: Method, uri: &str, body: Option<&Value>) -> (StatusCode, Value) {
    send(api, method, uri, &[], body).await
}

fn pod(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "c", "image": "busybox"}]);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn pods_of(ns: &str) -> String {
    format!("/api/v1/namespaces/{ns}/pods?fieldManager=kubectl-create&fieldValidation=Strict")
}

const ACCOUNTS: &str = "/api/v1/namespaces/default/serviceaccounts";

#[tokio::test]
async fn every_namespace_has_a_default_service_account() {
    let api = api();
    let (_, list) = call(&api, Method::GET, "/api/v1/serviceaccounts", None).await;
    assert_eq!(list["kind"], "ServiceAccountList");
    let mut namespaces: Vec<&str> =
        list["items"].as_array().unwrap().iter().map(|sa| sa["metadata"]["namespace"].as_str().unwrap()).collect();
    namespaces.sort();
    assert_eq!(namespaces, ["default", "kube-node-lease", "kube-public", "kube-system"]);
    assert!(list["items"].as_array().unwrap().iter().all(|sa| sa["metadata"]["name"] == "default"));

    // A new namespace gets one before the answer, so that a pod may follow at once.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}});
    assert_eq!(call(&api, Method::POST, "/api/v1/namespaces", Some(&ns)).await.0, StatusCode::CREATED);
    let (status, sa) = call(&api, Method::GET, "/api/v1/namespaces/team/serviceaccounts/default", None).await;
    assert_eq!(status, StatusCode::OK, "{sa}");
    assert_eq!((&sa["kind"], &sa["apiVersion"]), (&json!("ServiceAccount"), &json!("v1")));
    let (status, body) = call(&api, Method::POST, &pods_of("team"), Some(&pod("p", json!({})))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // Deleted, it is made again (a new object); it goes with its namespace.
    let uid = sa["metadata"]["uid"].clone();
    let (status, _) = call(&api, Method::DELETE, "/api/v1/namespaces/team/serviceaccounts/default", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, again) = call(&api, Method::GET, "/api/v1/namespaces/team/serviceaccounts/default", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_ne!(again["metadata"]["uid"], uid);
    assert_eq!(call(&api, Method::DELETE, "/api/v1/namespaces/team", None).await.0, StatusCode::OK);
    let (_, list) = call(&api, Method::GET, "/api/v1/serviceaccounts", None).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn service_accounts_are_served_like_other_namespaced_kinds() {
    let api = api();
    let (_, resources) = call(&api, Method::GET, "/api/v1", None).await;
    let entry = resources["resources"].as_array().unwrap().iter().find(|r| r["name"] == "serviceaccounts").unwrap();
    assert_eq!(
        (&entry["kind"], &entry["namespaced"], &entry["shortNames"]),
        (&json!("ServiceAccount"), &json!(true), &json!(["sa"]))
    );

    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder"}});
    let (status, body) = call(&api, Method::POST, ACCOUNTS, Some(&sa)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let bad = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "Not_A_Name"}});
    let (status, body) = call(&api, Method::POST, ACCOUNTS, Some(&bad)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        body["message"],
        "ServiceAccount \"Not_A_Name\" is invalid: metadata.name: Invalid value: \"Not_A_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    );

    // `kubectl patch serviceaccount default -p '{"imagePullSecrets": [...]}'`: the list is
    // replaced, while `secrets` merge on their names.
    let strategic = [("content-type", "application/strategic-merge-patch+json")];
    let uri = format!("{ACCOUNTS}/default");
    for patch in [
        json!({"imagePullSecrets": [{"name": "old"}], "secrets": [{"name": "s1"}]}),
        json!({"imagePullSecrets": [{"name": "myregistrykey"}], "secrets": [{"name": "s2"}]}),
    ] {
        let (status, body) = send(&api, Method::PATCH, &uri, &strategic, Some(&patch)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (_, patched) = call(&api, Method::GET, &uri, None).await;
    assert_eq!(patched["imagePullSecrets"], json!([{"name": "myregistrykey"}]));
    assert_eq!(patched["secrets"], json!([{"name": "s2"}, {"name": "s1"}]));

    let table = [("accept", "application/json;as=Table;v=v1;g=meta.k8s.io, application/json")];
    let (_, t) = send(&api, Method::GET, ACCOUNTS, &table, None).await;
    assert_eq!(t["kind"], "Table");
    let names: Vec<&str> =
        t["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Name", "Secrets", "Age"]);
    let rows: Vec<(&Value, &Value)> =
        t["rows"].as_array().unwrap().iter().map(|r| (&r["cells"][0], &r["cells"][1])).collect();
    assert_eq!(rows, [(&json!("builder"), &json!(0)), (&json!("default"), &json!(2))]);
}

#[tokio::test]
async fn pods_run_as_default_and_take_its_pull_secrets() {
    let api = api();
    let patch = json!({"imagePullSecrets": [{"name": "myregistrykey"}]});
    let strategic = [("content-type", "application/strategic-merge-patch+json")];
    send(&api, Method::PATCH, &format!("{ACCOUNTS}/default"), &strategic, Some(&patch)).await;

    let (status, body) = call(&api, Method::POST, &pods_of("default"), Some(&pod("p", json!({})))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["spec"]["serviceAccountName"], "default");
    assert_eq!(body["spec"]["serviceAccount"], "default");
    assert_eq!(body["spec"]["imagePullSecrets"], json!([{"name": "myregistrykey"}]));

    // A pod's own pull secrets stay its only ones.
    let own = pod("q", json!({"imagePullSecrets": [{"name": "mine"}]}));
    let (_, body) = call(&api, Method::POST, &pods_of("default"), Some(&own)).await;
    assert_eq!(body["spec"]["imagePullSecrets"], json!([{"name": "mine"}]));

    // An account without pull secrets adds none; the deprecated field names it too.
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "plain"}});
    call(&api, Method::POST, ACCOUNTS, Some(&sa)).await;
    let (status, body) =
        call(&api, Method::POST, &pods_of("default"), Some(&pod("r", json!({"serviceAccount": "plain"})))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        (&body["spec"]["serviceAccountName"], &body["spec"]["serviceAccount"]),
        (&json!("plain"), &json!("plain"))
    );
    assert!(body["spec"].get("imagePullSecrets").is_none(), "{body}");

    // Later changes to the account do not reach existing pods, and the account may not change.
    let (_, stored) = call(&api, Method::GET, "/api/v1/namespaces/default/pods/r", None).await;
    assert!(stored["spec"].get("imagePullSecrets").is_none());
    let change = json!({"spec": {"serviceAccountName": "default"}});
    let (status, body) =
        send(&api, Method::PATCH, "/api/v1/namespaces/default/pods/r", &strategic, Some(&change)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    // Leaving out the deprecated alias on update changes nothing.
    let label = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"serviceAccount": null}});
    let (status, body) = send(&api, Method::PATCH, "/api/v1/namespaces/default/pods/r", &strategic, Some(&label)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["spec"]["serviceAccount"], "plain");
}

#[tokio::test]
async fn a_pod_naming_a_missing_service_account_is_forbidden() {
    let api = api();
    let (status, body) =
        call(&api, Method::POST, &pods_of("default"), Some(&pod("x", json!({"serviceAccountName": "foo"})))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "pods \"x\" is forbidden: error looking up service account default/foo: serviceaccount \"foo\" not found",
            "reason": "Forbidden", "details": {"name": "x", "kind": "pods"}, "code": 403,
        })
    );
    // A generated name is not made yet when admission refuses: the prefix is named.
    let mut generated = pod("", json!({"serviceAccountName": "foo"}));
    generated["metadata"] = json!({"generateName": "web-"});
    let (status, body) = call(&api, Method::POST, &pods_of("default"), Some(&generated)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "pods \"web-\" is forbidden: error looking up service account default/foo: serviceaccount \"foo\" not found"
    );
    let (_, list) = call(&api, Method::GET, "/api/v1/namespaces/default/pods", None).await;
    assert_eq!(list["items"], json!([]));
}
