//! The Node object: registration (`registerWithAPIServer`) and the status the kubelet reports
//! (`pkg/kubelet/nodestatus/setters.go`): capacity and allocatable of this machine, the pressure
//! conditions from the kubelet's default eviction thresholds, Ready from the runtime, addresses,
//! nodeInfo, the daemon endpoint and the images. Built every 10 s, sent when it changed or
//! every 5 minutes (`nodeStatusUpdateFrequency`, `nodeStatusReportFrequency`).

use crate::ClusterError;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams, PostParams};
use podwright_api::pod_resources::is_extended_resource;
use podwright_containerd::EmbeddedRuntime;
use podwright_node::downward::{EVICTION_HARD_NODEFS_PERCENT, NodeFacts, NodeStorage};
pub use podwright_node::node_info::{MachineInfo, runtime_version};
use podwright_node::node_info::{Readiness, readiness};
use podwright_runtime::{Clock, Runtime};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often the status is built (`nodeStatusUpdateFrequency`).
pub const UPDATE_EVERY: Duration = Duration::from_secs(10);
/// How often it is sent when nothing changed (`nodeStatusReportFrequency`).
pub const REPORT_EVERY: Duration = Duration::from_secs(300);
/// The most images a status lists (`nodeStatusMaxImages`), and names per image.
const MAX_IMAGES: usize = 50;
const MAX_NAMES_PER_IMAGE: usize = 5;
/// Pods per node (`maxPods`).
pub const MAX_PODS: u32 = 110;
/// The kubelet's default hard eviction thresholds (`evictionHard`): what allocatable leaves
/// out, and when the node reports pressure.
const EVICTION_MEMORY_BYTES: u64 = 100 << 20;

/// What the node says of itself and does not change while it runs.
#[derive(Debug, Clone)]
pub struct NodeIdentity {
    pub name: String,
    /// `--node-ip`, or the host's address.
    pub ip: Option<String>,
    /// The kubelet port the API server reaches the node on.
    pub port: u16,
    /// Where ephemeral storage is (the root directory).
    pub root: PathBuf,
    /// `kubeletVersion`.
    pub version: String,
}

fn os_arch() -> (&'static str, &'static str) {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    (std::env::consts::OS, arch)
}

/// The labels the kubelet sets on its Node (`initialNode`), all in the set NodeRestriction
/// lets a node set.
pub fn labels(name: &str) -> BTreeMap<String, String> {
    let (os, arch) = os_arch();
    [
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", os),
        ("kubernetes.io/arch", arch),
        ("beta.kubernetes.io/os", os),
        ("beta.kubernetes.io/arch", arch),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

const ATTACH_DETACH: &str = "volumes.kubernetes.io/controller-managed-attach-detach";

/// The Node to create: labels, annotation and status.
pub fn initial_node(identity: &NodeIdentity, status: &Value) -> Result<Node, ClusterError> {
    let node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": identity.name,
            "labels": labels(&identity.name),
            "annotations": {ATTACH_DETACH: "true"},
        },
        "spec": {},
        "status": status,
    });
    serde_json::from_value(node).map_err(|e| ClusterError::Invalid(e.to_string()))
}

/// What the machine measures at one moment, for the status.
#[derive(Debug, Clone, PartialEq)]
pub struct Signals {
    pub cpus: u64,
    pub memory_total: u64,
    pub memory_available: u64,
    pub disk_total: u64,
    pub disk_available: u64,
    /// The runtime's `<name>://<version>`, or why it is not reachable.
    pub runtime: Result<String, String>,
    pub images: Vec<Value>,
}

impl Signals {
    /// Reads the machine and asks the runtime.
    pub async fn read(identity: &NodeIdentity, runtime: &dyn Runtime) -> Signals {
        let facts = NodeFacts::of_this_machine(identity.name.clone(), identity.ip.clone());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let field = |name: &str| {
            meminfo
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                .map_or(0, |kib| kib * 1024)
        };
        let (disk_total, disk_available) = statvfs(&identity.root);
        let runtime_version = runtime.version().await.map(|v| runtime_version(&v)).map_err(|e| e.to_string());
        let mut images = runtime.list_images().await.unwrap_or_default();
        images.sort_by_key(|i| std::cmp::Reverse(i.size));
        let images = images
            .into_iter()
            .take(MAX_IMAGES)
            .map(|i| {
                let names: Vec<&String> = i.repo_digests.iter().chain(&i.repo_tags).take(MAX_NAMES_PER_IMAGE).collect();
                json!({"names": names, "sizeBytes": i.size})
            })
            .collect();
        Signals {
            cpus: u64::try_from(facts.cpu_millis / 1000).unwrap_or(1),
            memory_total: field("MemTotal:"),
            memory_available: field("MemAvailable:"),
            disk_total,
            disk_available,
            runtime: runtime_version,
            images,
        }
    }
}

/// Total and available bytes of the file system holding `path`.
fn statvfs(path: &std::path::Path) -> (u64, u64) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return (0, 0);
    };
    // SAFETY: statvfs writes into the zeroed struct it is given; the path is NUL-terminated.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return (0, 0);
    }
    let block = s.f_frsize;
    (s.f_blocks * block, s.f_bavail * block)
}

fn ki(bytes: u64) -> String {
    format!("{}Ki", bytes / 1024)
}

/// One condition as the kubelet sets it: status, reason and message, for its type.
struct Judged {
    type_: &'static str,
    status: bool,
    reason: &'static str,
    message: String,
}

/// The four conditions the kubelet owns, judged from the signals.
fn judge(s: &Signals) -> [Judged; 4] {
    let memory = s.memory_total > 0 && s.memory_available < EVICTION_MEMORY_BYTES;
    let disk = s.disk_total > 0 && s.disk_available * 100 < s.disk_total * EVICTION_HARD_NODEFS_PERCENT;
    let Readiness { ready, reason, message } = readiness(s.runtime.as_ref().map(|_| ()).map_err(String::as_str));
    let ready = Judged { type_: "Ready", status: ready, reason, message };
    [
        if memory {
            Judged {
                type_: "MemoryPressure",
                status: true,
                reason: "KubeletHasInsufficientMemory",
                message: "kubelet has insufficient memory available".into(),
            }
        } else {
            Judged {
                type_: "MemoryPressure",
                status: false,
                reason: "KubeletHasSufficientMemory",
                message: "kubelet has sufficient memory available".into(),
            }
        },
        if disk {
            Judged {
                type_: "DiskPressure",
                status: true,
                reason: "KubeletHasDiskPressure",
                message: "kubelet has disk pressure".into(),
            }
        } else {
            Judged {
                type_: "DiskPressure",
                status: false,
                reason: "KubeletHasNoDiskPressure",
                message: "kubelet has no disk pressure".into(),
            }
        },
        // The kubelet has no default `pid.available` threshold: no pressure unless configured.
        Judged {
            type_: "PIDPressure",
            status: false,
            reason: "KubeletHasSufficientPID",
            message: "kubelet has sufficient PID available".into(),
        },
        ready,
    ]
}

/// The conditions at `now`: each heartbeat is now; a transition time moves only when the
/// condition's status changes from `before`.
pub fn conditions(s: &Signals, before: &[NodeCondition], now: Timestamp) -> Vec<NodeCondition> {
    judge(s)
        .into_iter()
        .map(|j| {
            let status = if j.status { "True" } else { "False" };
            let transition = before
                .iter()
                .find(|c| c.type_ == j.type_ && c.status == status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or(Time(now));
            NodeCondition {
                type_: j.type_.to_string(),
                status: status.to_string(),
                reason: Some(j.reason.to_string()),
                message: Some(j.message),
                last_heartbeat_time: Some(Time(now)),
                last_transition_time: Some(transition),
            }
        })
        .collect()
}

/// The whole status the node reports, as JSON.
pub fn status(identity: &NodeIdentity, machine: &MachineInfo, s: &Signals, conditions: &[NodeCondition]) -> Value {
    let (os, arch) = os_arch();
    let cpu = s.cpus.to_string();
    let pods = MAX_PODS.to_string();
    let (storage_capacity, storage_allocatable) = NodeStorage::of_capacity(s.disk_total).quantities();
    let mut addresses = Vec::new();
    if let Some(ip) = &identity.ip {
        addresses.push(json!({"type": "InternalIP", "address": ip}));
    }
    addresses.push(json!({"type": "Hostname", "address": identity.name}));
    json!({
        "capacity": {
            "cpu": cpu,
            "memory": ki(s.memory_total),
            "ephemeral-storage": storage_capacity,
            "pods": pods,
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
        },
        "allocatable": {
            "cpu": cpu,
            "memory": ki(s.memory_total.saturating_sub(EVICTION_MEMORY_BYTES)),
            "ephemeral-storage": storage_allocatable,
            "pods": pods,
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
        },
        "conditions": conditions,
        "addresses": addresses,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": identity.port}},
        "nodeInfo": {
            "machineID": machine.machine_id,
            "systemUUID": machine.system_uuid,
            "bootID": machine.boot_id,
            "kernelVersion": machine.kernel_version,
            "osImage": machine.os_image,
            "containerRuntimeVersion": s.runtime.as_deref().unwrap_or_default(),
            "kubeletVersion": identity.version,
            "kubeProxyVersion": "",
            "operatingSystem": os,
            "architecture": arch,
        },
        "images": s.images,
    })
}

/// `status` with the kubelet's allocatable for what others put in the Node's capacity as the
/// API server has it (`seen`): an extended resource that a device plugin or an administrator
/// advertises (`nodestatus.MachineInfo`). Each capacity the node does not count itself is
/// allocatable whole, and an extended resource gone from the capacity goes from the allocatable
/// (a `null` in the merge patch).
pub fn with_others_resources(mut status: Value, seen: Option<&Node>) -> Value {
    let Some(seen) = seen.and_then(|n| n.status.as_ref()) else { return status };
    let ours = |status: &Value, name: &str| status["capacity"].get(name).is_some();
    let mut extra = serde_json::Map::new();
    for (name, quantity) in seen.capacity.iter().flatten() {
        if !ours(&status, name) {
            extra.insert(name.clone(), json!(quantity.0));
        }
    }
    for name in seen.allocatable.iter().flatten().map(|(name, _)| name) {
        let in_capacity = seen.capacity.as_ref().is_some_and(|c| c.contains_key(name));
        if !in_capacity && !ours(&status, name) && is_extended_resource(name) {
            extra.insert(name.clone(), Value::Null);
        }
    }
    if let Some(allocatable) = status.get_mut("allocatable").and_then(Value::as_object_mut) {
        allocatable.extend(extra);
    }
    status
}

/// The status as a strategic merge patch of `nodes/<name>/status`: addresses replaced whole
/// (their merge key, `type`, is not unique: `fixupPatchForNodeStatusAddresses`).
pub fn status_patch(status: &Value) -> Value {
    let mut status = status.clone();
    if let Some(addresses) = status.get_mut("addresses").and_then(Value::as_array_mut) {
        addresses.insert(0, json!({"$patch": "replace"}));
    }
    json!({"status": status})
}

/// What the node has reported: its conditions (for their transition times) and its status.
#[derive(Debug, Clone)]
pub struct Reported {
    pub conditions: Vec<NodeCondition>,
    pub status: Value,
}

/// Creates the Node; when it exists (a restart), takes it over: its labels and annotation
/// asserted again, its status patched, its conditions' transition times kept (never deleted
/// and created again).
pub async fn register(
    client: &kube::Client,
    identity: &NodeIdentity,
    runtime: &dyn Runtime,
    now: Timestamp,
) -> Result<(Node, Reported), ClusterError> {
    let api: Api<Node> = Api::all(client.clone());
    let machine = MachineInfo::read();
    let signals = Signals::read(identity, runtime).await;
    let report = |before: &[NodeCondition]| {
        let conditions = conditions(&signals, before, now);
        let status = status(identity, &machine, &signals, &conditions);
        Reported { conditions, status }
    };
    let first = report(&[]);
    let node = initial_node(identity, &first.status)?;
    match api.create(&PostParams::default(), &node).await {
        Ok(created) => {
            tracing::info!(node = identity.name, "node registered");
            Ok((created, first))
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = api.get(&identity.name).await?;
            let before = existing.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
            let reported = report(&before);
            let mut patch = json!({});
            let have = existing.metadata.labels.clone().unwrap_or_default();
            let missing: BTreeMap<String, String> =
                labels(&identity.name).into_iter().filter(|(k, v)| have.get(k) != Some(v)).collect();
            if !missing.is_empty() {
                patch["metadata"]["labels"] = json!(missing);
            }
            if existing.metadata.annotations.as_ref().and_then(|a| a.get(ATTACH_DETACH)).map(String::as_str)
                != Some("true")
            {
                patch["metadata"]["annotations"] = json!({ATTACH_DETACH: "true"});
            }
            if patch != json!({}) {
                api.patch(&identity.name, &PatchParams::default(), &Patch::Strategic(patch)).await?;
            }
            let node = api
                .patch_status(
                    &identity.name,
                    &PatchParams::default(),
                    &Patch::Strategic(status_patch(&reported.status)),
                )
                .await?;
            tracing::info!(node = identity.name, "node exists: taken over");
            Ok((node, reported))
        }
        Err(e) => Err(e.into()),
    }
}

/// Follows the node's own Node (the only one a node may read, by `metadata.name=`): `node`
/// holds it as last seen (its labels and allocatable, for admission), and its `spec.podCIDR`
/// goes to the runtime whenever the control plane gives or changes it, as the kubelet's
/// `updatePodCIDR` does (CRI `UpdateRuntimeConfig`; podwright's embedded containerd gets it in
/// its network configuration, which podwright writes); `cidr` holds the one handed over.
pub async fn follow_node(
    client: kube::Client,
    name: String,
    runtime: Arc<dyn Runtime>,
    embedded: Option<EmbeddedRuntime>,
    cidr: tokio::sync::watch::Sender<Option<String>>,
    node: tokio::sync::watch::Sender<Option<Node>>,
) {
    use crate::watch_backoff::ReflectorBackoff;
    use futures_util::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let api: Api<Node> = Api::all(client);
    let mut nodes = watcher(api, watcher::Config::default().fields(&format!("metadata.name={name}")))
        .backoff(ReflectorBackoff::default())
        .boxed();
    while let Some(event) = nodes.next().await {
        let seen = match event {
            Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => n,
            Ok(_) => continue,
            Err(e) => {
                tracing::debug!(%e, "watch of the node's own Node failed");
                continue;
            }
        };
        let given = seen.spec.as_ref().and_then(|s| s.pod_cidr.clone()).filter(|c| !c.is_empty());
        node.send_replace(Some(seen));
        let Some(given) = given else { continue };
        if cidr.borrow().as_deref() == Some(given.as_str()) {
            continue;
        }
        let handed = match &embedded {
            Some(e) => e.set_pod_cidr(&given).await.map_err(|e| e.to_string()),
            None => runtime.update_runtime_config(&given).await.map_err(|e| e.to_string()),
        };
        match handed {
            Ok(()) => {
                tracing::info!(pod_cidr = given, "the node's pod CIDR handed to the runtime");
                cidr.send_replace(Some(given));
            }
            Err(e) => tracing::warn!(%e, pod_cidr = given, "the runtime did not take the node's pod CIDR"),
        }
    }
}

/// The status without its heartbeats: what decides whether it changed.
fn without_heartbeats(status: &Value) -> Value {
    let mut s = status.clone();
    for c in s.get_mut("conditions").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(c) = c.as_object_mut() {
            c.remove("lastHeartbeatTime");
        }
    }
    s
}

/// Reports the node's status for as long as the node runs: every 10 s when it changed, at least
/// every 5 minutes. Failures are retried on the next tick (never fatal).
pub async fn report_status(
    client: kube::Client,
    identity: NodeIdentity,
    runtime: Arc<dyn Runtime>,
    clock: Clock,
    reported: Reported,
    seen: tokio::sync::watch::Receiver<Option<Node>>,
) {
    let Reported { conditions: mut conditions_before, status: mut last_sent } = reported;
    let machine = MachineInfo::read();
    let api: Api<Node> = Api::all(client);
    let mut sent_at = clock.now();
    loop {
        clock.sleep_until(clock.now() + UPDATE_EVERY).await;
        let now = clock.now();
        let signals = Signals::read(&identity, runtime.as_ref()).await;
        let conds = conditions(&signals, &conditions_before, now);
        let status = with_others_resources(status(&identity, &machine, &signals, &conds), seen.borrow().as_ref());
        let due = now.duration_since(sent_at) >= jiff::SignedDuration::try_from(REPORT_EVERY).unwrap_or_default();
        if !due && without_heartbeats(&status) == without_heartbeats(&last_sent) {
            continue;
        }
        match api.patch_status(&identity.name, &PatchParams::default(), &Patch::Strategic(status_patch(&status))).await
        {
            Ok(_) => {
                conditions_before = conds;
                last_sent = status;
                sent_at = now;
            }
            Err(e) => tracing::warn!(%e, "node status not updated; trying again in 10 s"),
        }
    }
}

#[cfg(test)]
mod tests;
