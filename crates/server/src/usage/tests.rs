use super::*;
use crate::node_link::NodeFeed;
use crate::server::ServerConfig;
use axum::http::HeaderMap;
use podwright_node::usage::UsageCollector;
use podwright_runtime::cri_api::{
    ContainerConfig, ContainerMetadata, ImageSpec, PodSandboxConfig, PodSandboxMetadata, RuntimeHandlerFeatures,
};
use podwright_runtime::{Clock, FakeRuntime, FakeUsage, RuntimeService};
use std::sync::Arc;

const ROOT: &str = "/nonexistent";
const IMAGE: &str = "localhost/busybox:1.36";

fn api(clock: Clock, rt: Arc<FakeRuntime>, with_usage: bool) -> (ApiServer, NodeFeed) {
    let config = ServerConfig { node_name: "n".into(), root: ROOT.into(), host_ip: Some("10.1.2.3".into()) };
    let (api, feed) = ApiServer::new(config, clock, rt.clone());
    if with_usage {
        api.serve_usage(Arc::new(UsageCollector::new(rt, clock, "n", std::path::Path::new(ROOT))));
    }
    (api, feed)
}

/// A pod in the store and its sandbox and containers in the runtime, labelled as the node
/// labels them.
async fn running_pod(api: &ApiServer, rt: &FakeRuntime, name: &str, app: &str, containers: &[&str]) {
    let stored = api
        .store()
        .create(
            Resource::Pods,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
                "spec": {"containers": containers.iter().map(|c| json!({"name": c, "image": IMAGE})).collect::<Vec<_>>()}}),
        )
        .unwrap();
    let uid = meta_str(&stored, "uid").unwrap().to_string();
    let labels = |container: Option<&str>| {
        let mut l: std::collections::HashMap<String, String> = [
            ("io.kubernetes.pod.name", name),
            ("io.kubernetes.pod.namespace", "default"),
            ("io.kubernetes.pod.uid", uid.as_str()),
            ("podwright.io/managed", "true"),
            ("podwright.io/root-dir", ROOT),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        if let Some(c) = container {
            l.insert("io.kubernetes.container.name".into(), c.into());
        }
        l
    };
    let sandbox = PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: name.into(),
            uid: uid.clone(),
            namespace: "default".into(),
            attempt: 0,
        }),
        labels: labels(None),
        ..Default::default()
    };
    let sb = rt.run_pod_sandbox(&sandbox, "").await.unwrap();
    for c in containers {
        let config = ContainerConfig {
            metadata: Some(ContainerMetadata { name: c.to_string(), attempt: 0 }),
            image: Some(ImageSpec { image: IMAGE.into(), ..Default::default() }),
            labels: labels(Some(c)),
            ..Default::default()
        };
        let id = rt.create_container(&sb, &config, &sandbox).await.unwrap();
        rt.start_container(&id).await.unwrap();
    }
}

async fn body(resp: ApiResult<Response>) -> (u16, Value) {
    let resp = match resp {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    let code = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    (code, serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into())))
}

fn params(selector: Option<&str>) -> Query<Params> {
    Query(Params { label_selector: selector.map(str::to_string), ..Default::default() })
}

#[tokio::test(start_paused = true)]
async fn pod_metrics_are_what_kubectl_top_pod_reads() {
    let clock = Clock::new();
    let rt = FakeRuntime::new(clock);
    rt.add_image(IMAGE);
    rt.set_usage("busy", FakeUsage { millicores: 900, working_set_bytes: 3 << 20 });
    rt.set_usage("idle", FakeUsage { millicores: 0, working_set_bytes: 1_500_000 });
    let (api, _feed) = api(clock, rt.clone(), true);
    running_pod(&api, &rt, "top", "web", &["busy", "idle"]).await;
    running_pod(&api, &rt, "other", "db", &["idle"]).await;
    tokio::time::sleep(std::time::Duration::from_secs(10)).await;

    let (code, list) = body(list_pods(State(api.clone()), Path("default".into()), params(Some("app=web"))).await).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!((&list["kind"], &list["apiVersion"]), (&json!("PodMetricsList"), &json!(GROUP_VERSION)));
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "the selector leaves out the other pod: {list}");
    let top = &items[0];
    assert_eq!(top["kind"], "PodMetrics");
    assert_eq!(top["metadata"]["name"], "top");
    assert_eq!(top["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(top["window"], "10s");
    assert_eq!(
        top["containers"],
        json!([
            {"name": "busy", "usage": {"cpu": "900m", "memory": "3Mi"}},
            {"name": "idle", "usage": {"cpu": "0", "memory": "1500000"}},
        ])
    );

    let (_, all) = body(list_all_pods(State(api.clone()), params(None)).await).await;
    let names: Vec<_> = all["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].clone()).collect();
    assert_eq!(names, [json!("other"), json!("top")]);

    let (code, one) = body(get_pod(State(api.clone()), Path(("default".into(), "top".into()))).await).await;
    assert_eq!((code, &one["metadata"]["name"]), (200, &json!("top")));
    let (code, missing) = body(get_pod(State(api.clone()), Path(("default".into(), "nope".into()))).await).await;
    assert_eq!((code, &missing["message"]), (404, &json!("pods \"default/nope\" not found")));
}

#[tokio::test(start_paused = true)]
async fn node_metrics_node_object_and_discovery() {
    let clock = Clock::new();
    let rt = FakeRuntime::new(clock);
    let (api, _feed) = api(clock, rt.clone(), true);

    let (_, groups) = body(Ok(crate::discovery::apis(State(api.clone()), HeaderMap::new()).await)).await;
    let metrics = groups["groups"].as_array().unwrap().iter().find(|g| g["name"] == GROUP).expect("the metrics group");
    assert_eq!(metrics["preferredVersion"]["groupVersion"], GROUP_VERSION);
    let (_, resources) = body(resource_list(State(api.clone())).await).await;
    let kinds: Vec<_> = resources["resources"].as_array().unwrap().iter().map(|r| r["kind"].clone()).collect();
    assert_eq!(kinds, [json!("NodeMetrics"), json!("PodMetrics")]);

    let (_, nodes) = body(list_node_metrics(State(api.clone()), params(None)).await).await;
    let node = &nodes["items"][0];
    assert_eq!((&node["kind"], &node["metadata"]["name"]), (&json!("NodeMetrics"), &json!("n")));
    assert!(node["usage"]["cpu"].is_string() && node["usage"]["memory"].is_string(), "{node}");
    let (_, none) = body(list_node_metrics(State(api.clone()), params(Some("kubernetes.io/hostname=x"))).await).await;
    assert_eq!(none["items"], json!([]));

    let (_, list) = body(list_nodes(State(api.clone()), params(None)).await).await;
    let n = &list["items"][0];
    assert_eq!(n["metadata"]["name"], "n");
    assert!(n["status"]["allocatable"]["cpu"].is_string() && n["status"]["allocatable"]["memory"].is_string());
    assert_eq!(n["status"]["addresses"][0], json!({"type": "InternalIP", "address": "10.1.2.3"}));
    let (code, _) = body(get_node(State(api.clone()), Path("other".into())).await).await;
    assert_eq!(code, 404);
    let (code, summary) = body(node_proxy(State(api.clone()), Path(("n".into(), "stats/summary".into()))).await).await;
    assert_eq!((code, &summary["node"]["nodeName"]), (200, &json!("n")));
}

/// The runtime's version in `nodeInfo`, and its handlers with their features once it reports
/// them (containerd 2 does; 1.6 reports none, and the Node then lists none).
#[tokio::test(start_paused = true)]
async fn the_node_shows_the_runtime_and_its_handlers() {
    let clock = Clock::new();
    let rt = FakeRuntime::new(clock);
    let (api, _feed) = api(clock, rt.clone(), false);
    let node = node_with_runtime(&api).await;
    let version = format!("podwright-fake://{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(node["status"]["nodeInfo"]["containerRuntimeVersion"], version.as_str());
    assert!(node["status"]["nodeInfo"]["kernelVersion"].as_str().is_some_and(|k| !k.is_empty()), "{node}");
    assert!(node["status"].get("runtimeHandlers").is_none(), "{node}");

    let rro = RuntimeHandlerFeatures { recursive_read_only_mounts: true, user_namespaces: false };
    rt.report_handler_features("runc", rro);
    let node = node_with_runtime(&api).await;
    assert_eq!(
        node["status"]["runtimeHandlers"],
        json!([{"name": "runc", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": false}}])
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_collector_there_is_no_metrics_group() {
    let clock = Clock::new();
    let (api, _feed) = api(clock, FakeRuntime::new(clock), false);
    let (_, groups) = body(Ok(crate::discovery::apis(State(api.clone()), HeaderMap::new()).await)).await;
    let names: Vec<&Value> = groups["groups"].as_array().unwrap().iter().map(|g| &g["name"]).collect();
    assert_eq!(names, [&json!("node.k8s.io")]);
    let (code, _) = body(summary(State(api.clone())).await).await;
    assert_eq!(code, 404);
}

#[test]
fn quantities_are_written_as_metrics_server_writes_them() {
    assert_eq!(cpu_quantity(1_500_000_000), "1500m");
    assert_eq!(cpu_quantity(2_000_000_000), "2");
    assert_eq!(cpu_quantity(12_345), "12345n");
    assert_eq!(cpu_quantity(0), "0");
    assert_eq!(memory_quantity(3 << 20), "3Mi");
    assert_eq!(memory_quantity(1000), "1k");
    assert_eq!(memory_quantity(1_500_000), "1500000");
}
