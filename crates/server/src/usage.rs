//! Resource usage as a node and its metrics server serve it: the kubelet's `/stats/summary`
//! and `/metrics/resource` (also under the node proxy path, `/api/v1/nodes/N/proxy/...`), the
//! `metrics.k8s.io/v1beta1` API that `kubectl top` reads (as metrics-server answers it), and
//! the Node object whose allocatable `kubectl top node` divides by. Every request is one
//! round of the node's [`UsageCollector`]; rates come from the round before.

use crate::errors::{ApiError, ApiResult};
use crate::host::PodHost;
use crate::mirror::{node_ref, node_uid};
use crate::request::Params;
use crate::resources::Resource;
use crate::selectors::Filter;
use crate::server::ApiServer;
use crate::store::meta_str;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use jiff::{SignedDuration, Timestamp};
use podwright_api::go;
use podwright_api::quantity::{Format, Quantity};
use podwright_node::downward::{NodeFacts, NodeStorage};
use podwright_node::node_info::{MachineInfo, Readiness, readiness, runtime_version};
use podwright_node::usage::summary::{CpuStats, MemoryStats};
use podwright_node::usage::{Usage, UsageCollector, host, prometheus};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::LazyLock;

pub const GROUP: &str = "metrics.k8s.io";
pub const GROUP_VERSION: &str = "metrics.k8s.io/v1beta1";

/// The group as `/apis` lists it.
pub fn api_group() -> Value {
    let version = json!({"groupVersion": GROUP_VERSION, "version": "v1beta1"});
    json!({"name": GROUP, "versions": [version], "preferredVersion": version})
}

/// The metrics resources: (plural, kind, namespaced).
const RESOURCES: [(&str, &str, bool); 2] = [("nodes", "NodeMetrics", false), ("pods", "PodMetrics", true)];

/// The group as aggregated discovery lists it.
pub fn aggregated_group() -> Value {
    let resources: Vec<Value> = RESOURCES
        .iter()
        .map(|(plural, kind, namespaced)| {
            json!({
                "resource": plural,
                "responseKind": {"group": GROUP, "version": "v1beta1", "kind": kind},
                "scope": if *namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": "",
                "verbs": ["get", "list"],
            })
        })
        .collect();
    json!({
        "metadata": {"name": GROUP, "creationTimestamp": null},
        "versions": [{"version": "v1beta1", "resources": resources, "freshness": "Current"}],
    })
}

/// `GET /apis/metrics.k8s.io`.
pub async fn group(State(s): State<ApiServer>) -> ApiResult<Response> {
    s.usage()?;
    let mut g = api_group();
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Ok(axum::Json(g).into_response())
}

/// `GET /apis/metrics.k8s.io/v1beta1`.
pub async fn resource_list(State(s): State<ApiServer>) -> ApiResult<Response> {
    s.usage()?;
    let resources: Vec<Value> = RESOURCES
        .iter()
        .map(|(plural, kind, namespaced)| {
            json!({"name": plural, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": ["get", "list"]})
        })
        .collect();
    Ok(axum::Json(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION, "resources": resources}),
    )
    .into_response())
}

async fn collect(s: &ApiServer) -> ApiResult<Usage> {
    collect_from(s.usage()?).await
}

async fn collect_from(collector: &UsageCollector) -> ApiResult<Usage> {
    collector.collect().await.map_err(|e| ApiError::internal(format!("unable to read resource usage: {e}")))
}

/// `GET /stats/summary`.
pub async fn summary(State(s): State<ApiServer>) -> ApiResult<Response> {
    summary_of(s.usage()?).await
}

/// The Summary API's answer from `collector`: the local API's and the kubelet port's.
pub(crate) async fn summary_of(collector: &UsageCollector) -> ApiResult<Response> {
    Ok(axum::Json(collect_from(collector).await?.summary).into_response())
}

/// `GET /metrics/resource`.
pub async fn resource_metrics(State(s): State<ApiServer>) -> ApiResult<Response> {
    Ok(resource_metrics_of(s.usage()?).await)
}

/// `/metrics/resource` from `collector`: a failed read is still a page, with
/// `resource_scrape_error 1`.
pub(crate) async fn resource_metrics_of(collector: &UsageCollector) -> Response {
    let text = match collector.collect().await {
        Ok(u) => prometheus::render(Some(&u.summary)),
        Err(e) => {
            tracing::warn!(%e, "Error getting summary for resourceMetric prometheus endpoint");
            prometheus::render(None)
        }
    };
    ([(header::CONTENT_TYPE, podwright_node::metrics::CONTENT_TYPE)], text).into_response()
}

/// `GET /api/v1/nodes/{node}/proxy/{path}`: the kubelet's endpoints, as the API server proxies
/// them.
pub async fn node_proxy(State(s): State<ApiServer>, Path((node, path)): Path<(String, String)>) -> ApiResult<Response> {
    if node != s.node_name() {
        return Err(ApiError::not_found_named("nodes", &node));
    }
    match path.as_str() {
        "stats/summary" => summary(State(s)).await,
        "metrics/resource" => resource_metrics(State(s)).await,
        _ => Err(ApiError::no_such_path()),
    }
}

/// CPU in nanocores as metrics-server writes it (`NewScaledQuantity(n, Nano)`): `1500m`, `12345n`.
fn cpu_quantity(nano_cores: u64) -> String {
    Quantity::parse(&format!("{nano_cores}n")).map(|q| q.written(Format::DecimalSi)).unwrap_or_default()
}

/// Memory in bytes as metrics-server writes it (`NewQuantity(b, BinarySI)`): `3Mi`, `1500`.
fn memory_quantity(bytes: u64) -> String {
    Quantity::parse(&bytes.to_string()).map(|q| q.written(Format::BinarySi)).unwrap_or_default()
}

/// `{"cpu", "memory"}` when both are known (metrics-server leaves out what is incomplete).
fn usage_of(cpu: Option<&CpuStats>, memory: Option<&MemoryStats>) -> Option<(Value, Timestamp)> {
    let cpu = cpu?;
    let nano_cores = cpu.usage_nano_cores?;
    let bytes = memory?.working_set_bytes?;
    Some((json!({"cpu": cpu_quantity(nano_cores), "memory": memory_quantity(bytes)}), cpu.time.0))
}

fn window(w: SignedDuration) -> String {
    go::format_duration(w.unsigned_abs())
}

/// The PodMetrics of the stored `pods` that have usage, sorted by namespace and name.
pub fn pod_metrics(usage: &Usage, pods: &[&Value], now: Timestamp) -> Vec<Value> {
    let by_uid: HashMap<&str, _> = usage.summary.pods.iter().map(|p| (p.pod_ref.uid.as_str(), p)).collect();
    let mut items: Vec<(String, String, Value)> = Vec::new();
    for pod in pods {
        let Some(stats) = by_uid.get(node_uid(pod)) else { continue };
        let mut containers = Vec::new();
        let mut at = None;
        for c in &stats.containers {
            let Some((usage, t)) = usage_of(c.cpu.as_ref(), c.memory.as_ref()) else { continue };
            at = at.max(Some(t));
            containers.push(json!({"name": c.name, "usage": usage}));
        }
        let Some(at) = at else { continue };
        let (name, ns) = (meta_str(pod, "name").unwrap_or_default(), meta_str(pod, "namespace").unwrap_or_default());
        let mut metadata = json!({"name": name, "namespace": ns, "creationTimestamp": go::format_time(now)});
        if let Some(labels) = pod.pointer("/metadata/labels") {
            metadata["labels"] = labels.clone();
        }
        let w = usage.pod_windows.get(&stats.pod_ref.uid).copied().unwrap_or_default();
        items.push((
            ns.to_string(),
            name.to_string(),
            json!({
                "kind": "PodMetrics",
                "apiVersion": GROUP_VERSION,
                "metadata": metadata,
                "timestamp": go::format_time(at),
                "window": window(w),
                "containers": containers,
            }),
        ));
    }
    items.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    items.into_iter().map(|(_, _, v)| v).collect()
}

fn list(kind: &str, items: Vec<Value>) -> Response {
    axum::Json(json!({"kind": kind, "apiVersion": GROUP_VERSION, "metadata": {}, "items": items})).into_response()
}

async fn pods_in(s: &ApiServer, ns: Option<&str>, p: &Params) -> ApiResult<Vec<Value>> {
    s.usage()?;
    let filter = Filter::new(p.label_selector.as_deref(), p.field_selector.as_deref())?;
    let stored = s.store().list(Resource::Pods, ns).0;
    let pods: Vec<&Value> = stored.iter().map(|p| &**p).filter(|p| filter.matches(p)).collect();
    let usage = collect(s).await?;
    Ok(pod_metrics(&usage, &pods, s.now()))
}

/// `GET /apis/metrics.k8s.io/v1beta1/pods`.
pub async fn list_all_pods(State(s): State<ApiServer>, Query(p): Query<Params>) -> ApiResult<Response> {
    Ok(list("PodMetricsList", pods_in(&s, None, &p).await?))
}

/// `GET /apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods`.
pub async fn list_pods(
    State(s): State<ApiServer>,
    Path(ns): Path<String>,
    Query(p): Query<Params>,
) -> ApiResult<Response> {
    Ok(list("PodMetricsList", pods_in(&s, Some(&ns), &p).await?))
}

/// `GET /apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/{name}`.
pub async fn get_pod(State(s): State<ApiServer>, Path((ns, name)): Path<(String, String)>) -> ApiResult<Response> {
    s.usage()?;
    let pod = s
        .store()
        .get(Resource::Pods, &ns, &name)
        .map_err(|_| ApiError::not_found_named("pods", &format!("{ns}/{name}")))?;
    let usage = collect(&s).await?;
    let found = pod_metrics(&usage, &[&*pod], s.now()).pop();
    let found = found.ok_or_else(|| ApiError::not_found_named("podmetrics.metrics.k8s.io", &format!("{ns}/{name}")))?;
    Ok(axum::Json(found).into_response())
}

/// The node's NodeMetrics.
pub fn node_metrics(usage: &Usage, node: &Value, now: Timestamp) -> Option<Value> {
    let n = &usage.summary.node;
    let (usage_value, at) = usage_of(n.cpu.as_ref(), n.memory.as_ref())?;
    let mut metadata = json!({"name": n.node_name, "creationTimestamp": go::format_time(now)});
    if let Some(labels) = node.pointer("/metadata/labels") {
        metadata["labels"] = labels.clone();
    }
    Some(json!({
        "kind": "NodeMetrics",
        "apiVersion": GROUP_VERSION,
        "metadata": metadata,
        "timestamp": go::format_time(at),
        "window": window(usage.node_window),
        "usage": usage_value,
    }))
}

/// `GET /apis/metrics.k8s.io/v1beta1/nodes`.
pub async fn list_node_metrics(State(s): State<ApiServer>, Query(p): Query<Params>) -> ApiResult<Response> {
    s.usage()?;
    let filter = Filter::new(p.label_selector.as_deref(), p.field_selector.as_deref())?;
    let node = node_object(&s);
    let mut items = Vec::new();
    if filter.matches(&node) {
        let usage = collect(&s).await?;
        items.extend(node_metrics(&usage, &node, s.now()));
    }
    Ok(list("NodeMetricsList", items))
}

/// `GET /apis/metrics.k8s.io/v1beta1/nodes/{name}`.
pub async fn get_node_metrics(State(s): State<ApiServer>, Path(name): Path<String>) -> ApiResult<Response> {
    s.usage()?;
    if name != s.node_name() {
        return Err(ApiError::not_found_named("nodes", &name));
    }
    let usage = collect(&s).await?;
    let found = node_metrics(&usage, &node_object(&s), s.now());
    Ok(axum::Json(found.ok_or_else(|| ApiError::not_found_named("nodemetrics.metrics.k8s.io", &name))?).into_response())
}

/// The machine's facts, which do not change while it runs: read once.
static MACHINE: LazyLock<MachineInfo> = LazyLock::new(MachineInfo::read);

/// [`node_object`] with what the runtime says of itself: its version in `nodeInfo`, and its
/// handlers with their features when it reports them (CRI `Status`), for `kubectl get nodes`
/// and `kubectl describe node`; not Ready while it does not answer, as the kubelet. The runtime is asked on each read, as its version and handlers
/// can change under a running node.
pub async fn node_with_runtime(s: &ApiServer) -> Value {
    let mut node = node_object(s);
    let runtime = s.runtime();
    match runtime.version().await {
        Ok(version) => node["status"]["nodeInfo"]["containerRuntimeVersion"] = json!(runtime_version(&version)),
        Err(e) => {
            // Not ready since when it is asked: serve keeps no history of its runtime's answers.
            let Readiness { reason, message, .. } = readiness(Err(&e.to_string()));
            let now = go::format_time(s.now());
            node["status"]["conditions"][0] = json!({
                "type": "Ready",
                "status": "False",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
                "reason": reason,
                "message": message,
            });
        }
    }
    let handlers: Vec<Value> = runtime
        .runtime_handlers()
        .await
        .unwrap_or_default()
        .iter()
        .map(|h| {
            let features = h.features.unwrap_or_default();
            json!({"name": h.name, "features": {
                "recursiveReadOnlyMounts": features.recursive_read_only_mounts,
                "userNamespaces": features.user_namespaces,
            }})
        })
        .collect();
    if !handlers.is_empty() {
        node["status"]["runtimeHandlers"] = Value::Array(handlers);
    }
    node
}

/// This node as a v1 Node: its name, labels, address, capacity and allocatable (the node
/// layer's: CPU, memory, and the root directory's filesystem as ephemeral storage), Ready and
/// the machine's facts, for clients that read it (`kubectl top node`, the metrics' labels);
/// [`node_with_runtime`] adds the runtime's.
pub fn node_object(s: &ApiServer) -> Value {
    let machine = &*MACHINE;
    let name = s.node_name();
    let facts = NodeFacts::of_this_machine(name.to_string(), s.config().host_ip.clone());
    let sample = host::sample().ok();
    let boot = sample.and_then(|h| Timestamp::from_second(h.boot_time).ok()).unwrap_or(Timestamp::UNIX_EPOCH);
    let total = sample.map_or(facts.memory_bytes, |h| i128::from(h.memory.total));
    let cpus = (facts.cpu_millis / 1000).to_string();
    let ki = |bytes: i128| format!("{}Ki", bytes / 1024);
    let mut addresses = vec![];
    if let Some(ip) = &facts.host_ip {
        addresses.push(json!({"type": "InternalIP", "address": ip}));
    }
    addresses.push(json!({"type": "Hostname", "address": name}));
    let os = std::env::consts::OS;
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let mut capacity = json!({"cpu": cpus, "memory": ki(total), "pods": "110"});
    let mut allocatable = json!({"cpu": cpus, "memory": ki(facts.memory_bytes), "pods": "110"});
    if let Some(storage) = NodeStorage::of(&s.config().root) {
        let (total, left) = storage.quantities();
        capacity["ephemeral-storage"] = json!(total);
        allocatable["ephemeral-storage"] = json!(left);
    }
    let ready_since = go::format_time(s.now());
    let ready = readiness(Ok(()));
    json!({
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": node_ref(name).uid,
            "creationTimestamp": go::format_time(boot),
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": os,
                "kubernetes.io/arch": arch,
                "beta.kubernetes.io/os": os,
                "beta.kubernetes.io/arch": arch,
            },
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "lastHeartbeatTime": ready_since,
                "lastTransitionTime": go::format_time(boot),
                "reason": ready.reason,
                "message": ready.message,
            }],
            "addresses": addresses,
            "nodeInfo": {
                "kubeletVersion": podwright_api::KUBERNETES_VERSION,
                "operatingSystem": os,
                "architecture": arch,
                "containerRuntimeVersion": "",
                "kernelVersion": machine.kernel_version,
                "osImage": machine.os_image,
                "machineID": machine.machine_id,
                "systemUUID": machine.system_uuid,
                "bootID": machine.boot_id,
                "kubeProxyVersion": "",
            },
        },
    })
}

/// `GET /api/v1/nodes`.
pub async fn list_nodes(State(s): State<ApiServer>, Query(p): Query<Params>) -> ApiResult<Response> {
    let filter = Filter::new(p.label_selector.as_deref(), p.field_selector.as_deref())?;
    let node = node_with_runtime(&s).await;
    let items: Vec<Value> = [node].into_iter().filter(|n| filter.matches(n)).collect();
    let rv = s.store().list(Resource::Namespaces, None).1;
    Ok(axum::Json(json!({"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": rv.to_string()}, "items": items}))
        .into_response())
}

/// `GET /api/v1/nodes/{name}`.
pub async fn get_node(State(s): State<ApiServer>, Path(name): Path<String>) -> ApiResult<Response> {
    if name != s.node_name() {
        return Err(ApiError::not_found_named("nodes", &name));
    }
    Ok(axum::Json(node_with_runtime(&s).await).into_response())
}

#[cfg(test)]
mod tests;
