//! Discovery: what kubectl reads before every command to map `pods`, `po` or `pod/x` to a
//! resource (`/api`, `/api/v1`, `/apis`, `/version`), in the legacy JSON every kubectl reads and
//! in the aggregated form newer ones ask for first (client-go `discovery/discovery_client.go`).

use crate::resources::{NODE_GROUP, Resource};
use crate::server::ApiServer;
use crate::usage;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The aggregated discovery media types, newest first; kubectl takes what the response's
/// Content-Type says it got.
const AGGREGATED: [&str; 2] = ["v=v2;", "v=v2beta1;"];

/// The aggregated version kubectl asked for and we serve, if any.
fn aggregated_version(headers: &HeaderMap) -> Option<&'static str> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?.replace(' ', "");
    if !accept.contains("as=APIGroupDiscoveryList") {
        return None;
    }
    AGGREGATED.into_iter().find(|v| accept.contains(v)).map(|v| if v == "v=v2;" { "v2" } else { "v2beta1" })
}

fn aggregated(version: &str, groups: Vec<Value>) -> Response {
    let body = json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": groups,
    });
    let ct = format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    ([(header::CONTENT_TYPE, ct)], body.to_string()).into_response()
}

fn aggregated_core() -> Value {
    let mut resources = aggregated_resources("");
    resources.push(json!({
        "resource": "nodes",
        "responseKind": {"group": "", "version": "v1", "kind": "Node"},
        "scope": "Cluster",
        "singularResource": "node",
        "verbs": NODE_VERBS,
        "shortNames": ["no"],
    }));
    json!({"metadata": {"creationTimestamp": null}, "versions": [{"version": "v1", "resources": resources, "freshness": "Current"}]})
}

/// The `node.k8s.io` group, aggregated.
fn aggregated_node_group() -> Value {
    json!({"metadata": {"name": NODE_GROUP, "creationTimestamp": null},
        "versions": [{"version": "v1", "resources": aggregated_resources(NODE_GROUP), "freshness": "Current"}]})
}

fn aggregated_resources(group: &str) -> Vec<Value> {
    Resource::of_group(group)
        .map(|r| {
            let subs: Vec<Value> = r
                .subresources()
                .iter()
                .map(|(sub, kind, verbs)| {
                    json!({"subresource": sub, "responseKind": {"group": group, "version": "v1", "kind": kind}, "verbs": verbs})
                })
                .collect();
            json!({
                "resource": r.plural(),
                "responseKind": {"group": group, "version": "v1", "kind": r.kind()},
                "scope": if r.namespaced() { "Namespaced" } else { "Cluster" },
                "singularResource": r.singular(),
                "verbs": r.verbs(),
                "shortNames": r.short_names(),
                "categories": r.categories(),
                "subresources": subs,
            })
        })
        .collect()
}

/// The Node of this node is read-only: it is made from the machine on each read
/// ([`crate::usage::node_object`]).
const NODE_VERBS: [&str; 2] = ["get", "list"];

pub async fn api(headers: HeaderMap) -> Response {
    if let Some(v) = aggregated_version(&headers) {
        return aggregated(v, vec![aggregated_core()]);
    }
    axum::Json(json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    }))
    .into_response()
}

/// `/apis`: the `metrics.k8s.io` group once the node's usage is served, else none.
pub async fn apis(State(s): State<ApiServer>, headers: HeaderMap) -> Response {
    let metrics = s.serves_usage();
    if let Some(v) = aggregated_version(&headers) {
        let mut groups = vec![aggregated_node_group()];
        if metrics {
            groups.push(usage::aggregated_group());
        }
        return aggregated(v, groups);
    }
    let mut groups = vec![node_group()];
    if metrics {
        groups.push(usage::api_group());
    }
    axum::Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})).into_response()
}

/// The `node.k8s.io` group as `/apis` lists it.
fn node_group() -> Value {
    let version = json!({"groupVersion": "node.k8s.io/v1", "version": "v1"});
    json!({"name": NODE_GROUP, "versions": [version.clone()], "preferredVersion": version})
}

/// `/apis/node.k8s.io`.
pub async fn node_group_versions() -> Response {
    let mut group = node_group();
    group["kind"] = json!("APIGroup");
    group["apiVersion"] = json!("v1");
    axum::Json(group).into_response()
}

/// `/apis/node.k8s.io/v1`.
pub async fn node_v1() -> Response {
    axum::Json(resource_list("node.k8s.io/v1", NODE_GROUP)).into_response()
}

pub async fn api_v1() -> Response {
    let mut list = resource_list("v1", "");
    list["resources"].as_array_mut().expect("a list").push(json!({
        "name": "nodes", "singularName": "node", "namespaced": false, "kind": "Node", "verbs": NODE_VERBS, "shortNames": ["no"],
    }));
    axum::Json(list).into_response()
}

/// The legacy `APIResourceList` of a group version.
fn resource_list(group_version: &str, group: &str) -> Value {
    let mut resources = vec![];
    for r in Resource::of_group(group) {
        resources.push(json!({
            "name": r.plural(),
            "singularName": r.singular(),
            "namespaced": r.namespaced(),
            "kind": r.kind(),
            "verbs": r.verbs(),
            "shortNames": r.short_names(),
            "categories": r.categories(),
        }));
        for (sub, kind, verbs) in r.subresources() {
            resources.push(json!({
                "name": format!("{}/{sub}", r.plural()),
                "singularName": "",
                "namespaced": true,
                "kind": kind,
                "verbs": verbs,
            }));
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
}

/// `/version`: kubectl compares it with its own for its version-skew warning, so it claims
/// the Kubernetes version whose kubelet rules podwright follows.
pub async fn version() -> Response {
    axum::Json(json!({
        "major": "1",
        "minor": "33",
        "gitVersion": podwright_api::KUBERNETES_VERSION,
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
        "podwrightVersion": env!("CARGO_PKG_VERSION"),
    }))
    .into_response()
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn takes_the_newest_aggregated_version_offered() {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"));
        assert_eq!(aggregated_version(&h), Some("v2"));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
            ),
        );
        assert_eq!(aggregated_version(&h), Some("v2beta1"));
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json, */*"));
        assert_eq!(aggregated_version(&h), None);
    }
}
