//! The downward API: a pod's own fields and its containers' resources as environment values
//! and file contents, as the kubelet's `podFieldSelectorRuntimeValue`,
//! `fieldpath.ExtractFieldPathAsString` and `ExtractContainerResourceValue` give them.

use k8s_openapi::api::core::v1::{Container, Pod, ResourceFieldSelector};
use podwright_api::go;
use podwright_api::quantity::Quantity;
use std::collections::BTreeMap;

/// What the node tells its pods about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// The node's name: `spec.nodeName` of a pod that has none.
    pub name: String,
    pub host_ip: Option<String>,
    /// Allocatable CPU in millicores and memory in bytes: a container's limits where it sets
    /// none (the kubelet's `defaultPodLimitsForDownwardAPI`).
    pub cpu_millis: i128,
    pub memory_bytes: i128,
}

/// The kubelet's default hard eviction threshold, `memory.available<100Mi`: what allocatable
/// memory leaves out of the machine's with no reservations configured.
const EVICTION_HARD_MEMORY: i128 = 100 << 20;

impl NodeFacts {
    /// A node that says nothing of itself.
    pub const UNKNOWN: NodeFacts = NodeFacts { name: String::new(), host_ip: None, cpu_millis: 0, memory_bytes: 0 };

    /// This machine: its CPUs and memory, named `name`.
    pub fn of_this_machine(name: String, host_ip: Option<String>) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let memory = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
                line.split_whitespace().nth(1)?.parse::<i128>().ok()
            })
            .map_or(0, |kib| kib * 1024);
        NodeFacts {
            name,
            host_ip,
            cpu_millis: cpus as i128 * 1000,
            memory_bytes: (memory - EVICTION_HARD_MEMORY).max(0),
        }
    }
}

/// The kubelet's default hard eviction threshold for the node's filesystem,
/// `nodefs.available<10%`: what allocatable ephemeral storage leaves out of its capacity, and
/// below which free space the node reports disk pressure.
pub const EVICTION_HARD_NODEFS_PERCENT: u64 = 10;

/// The node's ephemeral storage: the filesystem of the root directory, as cadvisor reports the
/// kubelet's root directory's (`ephemeral-storage` in the Node's capacity and allocatable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeStorage {
    pub capacity: u64,
    pub allocatable: u64,
}

impl NodeStorage {
    /// The filesystem holding `root`; `None` when it cannot be read.
    pub fn of(root: &std::path::Path) -> Option<NodeStorage> {
        let (capacity, _) = podwright_runtime::cri::fs_space(root.to_str()?).ok()?;
        Some(NodeStorage::of_capacity(capacity))
    }

    pub fn of_capacity(capacity: u64) -> NodeStorage {
        NodeStorage { capacity, allocatable: capacity - capacity * EVICTION_HARD_NODEFS_PERCENT / 100 }
    }

    /// Capacity and allocatable as the Node writes them (`Quantity.String()` of binary amounts).
    pub fn quantities(&self) -> (String, String) {
        let written = |bytes: u64| {
            let q = Quantity::parse(&bytes.to_string()).unwrap_or_default();
            q.written(podwright_api::quantity::Format::BinarySi)
        };
        (written(self.capacity), written(self.allocatable))
    }
}

/// The machine's host name, lower-cased as a node name is (the kubelet's default node name).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// The address the host reaches the network from (the kubelet's node InternalIP, every pod's
/// `status.hostIP`): the source address of the default route, found without sending anything.
pub fn host_ip() -> Option<String> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("8.8.8.8:53").ok()?;
    Some(socket.local_addr().ok()?.ip().to_string()).filter(|ip| ip != "0.0.0.0")
}

/// A label or annotation map as a downward API file holds it: `key="value"` lines, sorted by
/// key, values quoted as Go's `%q` does (`fieldpath.FormatMap`).
pub fn format_map(m: Option<&BTreeMap<String, String>>) -> String {
    m.into_iter().flatten().map(|(k, v)| format!("{k}={}", go::quote(v))).collect::<Vec<_>>().join("\n")
}

/// `metadata.labels['key']` → ("labels", "key").
fn subscript(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("metadata.")?;
    let (field, rest) = rest.split_once("['")?;
    let key = rest.strip_suffix("']")?;
    Some((field, key))
}

/// The value of a `fieldRef` for `pod`, with the pod's IPs as the runtime gave them.
pub fn field_value(pod: &Pod, path: &str, pod_ips: &[String], node: &NodeFacts) -> Result<String, String> {
    let m = &pod.metadata;
    let spec = pod.spec.as_ref();
    Ok(match path {
        "metadata.name" => m.name.clone().unwrap_or_default(),
        "metadata.namespace" => m.namespace.clone().unwrap_or_else(|| "default".into()),
        "metadata.uid" => m.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(m.labels.as_ref()),
        "metadata.annotations" => format_map(m.annotations.as_ref()),
        "spec.nodeName" => {
            spec.and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()).unwrap_or(node.name.clone())
        }
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()).unwrap_or_default(),
        "status.hostIP" => node.host_ip.clone().unwrap_or_default(),
        "status.hostIPs" => node.host_ip.clone().unwrap_or_default(),
        "status.podIP" => pod_ips.first().cloned().unwrap_or_default(),
        "status.podIPs" => pod_ips.join(","),
        _ => match subscript(path) {
            Some(("labels", key)) => m.labels.as_ref().and_then(|l| l.get(key)).cloned().unwrap_or_default(),
            Some(("annotations", key)) => m.annotations.as_ref().and_then(|a| a.get(key)).cloned().unwrap_or_default(),
            _ => return Err(format!("unsupported fieldPath: {path}")),
        },
    })
}

/// The value of a `resourceFieldRef`: the container's limit or request divided by the divisor,
/// rounded up, a limit it does not set being the node's allocatable. `container` is the one
/// asking; the selector may name another of the pod's.
pub fn resource_value(
    pod: &Pod,
    container: &Container,
    sel: &ResourceFieldSelector,
    node: &NodeFacts,
) -> Result<String, String> {
    let named = sel.container_name.as_deref().filter(|n| !n.is_empty());
    let c = match named {
        Some(n) => podwright_planner::pod::all_containers(pod)
            .map(|sc| sc.container)
            .find(|c| c.name == n)
            .ok_or_else(|| format!("container {n} not found"))?,
        None => container,
    };
    let divisor = sel.divisor.as_ref().and_then(|d| Quantity::parse(&d.0).ok()).filter(|d| d.is_positive());
    let resources = c.resources.as_ref();
    let get = |list: &str, name: &str| {
        let map = match list {
            "limits" => resources.and_then(|r| r.limits.as_ref()),
            _ => resources.and_then(|r| r.requests.as_ref()),
        };
        map.and_then(|m| m.get(name)).and_then(|q| Quantity::parse(&q.0).ok())
    };
    let (list, name) = sel.resource.split_once('.').ok_or_else(|| unsupported(&sel.resource))?;
    if !matches!(list, "limits" | "requests") {
        return Err(unsupported(&sel.resource));
    }
    let ceil_div = |a: i128, b: i128| if b == 0 { 0 } else { (a + b - 1).div_euclid(b) };
    match name {
        "cpu" => {
            let millis = match get(list, "cpu") {
                Some(q) => q.milli_value(),
                None if list == "limits" => node.cpu_millis,
                None => 0,
            };
            Ok(ceil_div(millis, divisor.map_or(1000, |d| d.milli_value())).to_string())
        }
        "memory" | "ephemeral-storage" => {
            let bytes = match get(list, name) {
                Some(q) => q.value(),
                None if list == "limits" && name == "memory" => node.memory_bytes,
                None => 0,
            };
            Ok(ceil_div(bytes, divisor.map_or(1, |d| d.value())).to_string())
        }
        _ => Err(unsupported(&sel.resource)),
    }
}

fn unsupported(resource: &str) -> String {
    format!("unsupported container resource : {resource}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u",
                "labels": {"b": "2", "a": "x\"y"}, "annotations": {"note": "line\nbreak"}},
            "spec": {"serviceAccountName": "sa", "containers": [
                {"name": "c", "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}, "requests": {"cpu": "100m"}}},
                {"name": "bare"},
            ]},
        }))
        .unwrap()
    }

    fn node() -> NodeFacts {
        NodeFacts { name: "n1".into(), host_ip: Some("192.0.2.1".into()), cpu_millis: 2000, memory_bytes: 1 << 30 }
    }

    #[test]
    fn pod_fields_as_the_kubelet_gives_them() {
        let p = pod();
        let ips = ["10.0.0.5".to_string(), "fd00::5".to_string()];
        let f = |path: &str| field_value(&p, path, &ips, &node());
        assert_eq!(f("metadata.name").unwrap(), "p");
        assert_eq!(f("metadata.namespace").unwrap(), "ns");
        assert_eq!(f("metadata.labels").unwrap(), "a=\"x\\\"y\"\nb=\"2\"");
        assert_eq!(f("metadata.annotations").unwrap(), "note=\"line\\nbreak\"");
        assert_eq!(f("metadata.labels['b']").unwrap(), "2");
        assert_eq!(f("metadata.labels['missing']").unwrap(), "");
        assert_eq!(f("metadata.annotations['note']").unwrap(), "line\nbreak");
        assert_eq!(f("spec.nodeName").unwrap(), "n1");
        assert_eq!(f("spec.serviceAccountName").unwrap(), "sa");
        assert_eq!(f("status.hostIP").unwrap(), "192.0.2.1");
        assert_eq!(f("status.podIP").unwrap(), "10.0.0.5");
        assert_eq!(f("status.podIPs").unwrap(), "10.0.0.5,fd00::5");
        assert!(f("spec.bogus").is_err());
    }

    #[test]
    fn resources_divided_and_rounded_up_with_the_nodes_allocatable_for_missing_limits() {
        let p = pod();
        let c = &p.spec.as_ref().unwrap().containers[0];
        let sel = |resource: &str, divisor: Option<&str>, container: Option<&str>| ResourceFieldSelector {
            resource: resource.into(),
            divisor: divisor.map(|d| k8s_openapi::apimachinery::pkg::api::resource::Quantity(d.into())),
            container_name: container.map(Into::into),
        };
        let v = |s: ResourceFieldSelector| resource_value(&p, c, &s, &node()).unwrap();
        // 250m of CPU is 1 core rounded up; in millicores 250.
        assert_eq!(v(sel("limits.cpu", None, None)), "1");
        assert_eq!(v(sel("limits.cpu", Some("1m"), None)), "250");
        assert_eq!(v(sel("requests.cpu", Some("1m"), None)), "100");
        assert_eq!(v(sel("limits.memory", None, None)), (64 << 20).to_string());
        assert_eq!(v(sel("limits.memory", Some("1Mi"), None)), "64");
        // Another container's, which sets no limits: the node's allocatable.
        assert_eq!(v(sel("limits.cpu", None, Some("bare"))), "2");
        assert_eq!(v(sel("limits.memory", Some("1Mi"), Some("bare"))), "1024");
        assert_eq!(v(sel("requests.memory", None, Some("bare"))), "0");
        assert!(resource_value(&p, c, &sel("limits.gpu", None, None), &node()).is_err());
    }
}
