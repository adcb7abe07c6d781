//! The kubelet's admission of a pod the scheduler bound to it (`GeneralPredicates` in
//! `pkg/kubelet/lifecycle/predicate.go`): the node checks again what the scheduler checked, since
//! the binding may rest on an older view (or not come from a scheduler at all). A pod that does not
//! fit fails at once, with the first failure's reason: `OutOf<resource>` ("Node didn't have enough
//! resource: ..."), `NodeAffinity` (its node selector or required node affinity does not match the
//! node's labels) or `NodePorts` (a host port another pod of the node holds).

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, Pod};
use podwright_api::quantity::Quantity;
use podwright_planner::resources::pod_requests;
use std::collections::{BTreeMap, BTreeSet};

/// Why the node does not admit a pod: the reason and message of its status and event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: String,
    pub message: String,
}

/// Whether `pod` fits `node` beside `others` (the node's pods that have not finished).
pub fn admit(pod: &Pod, node: &Node, others: &[&Pod]) -> Result<(), Refusal> {
    fits_resources(pod, node, others)?;
    if !matches_node(pod, node) {
        return Err(predicate("NodeAffinity"));
    }
    if !host_ports_free(pod, others) {
        return Err(predicate("NodePorts"));
    }
    Ok(())
}

fn predicate(name: &str) -> Refusal {
    Refusal { reason: name.to_string(), message: format!("Predicate {name} failed") }
}

/// The amount in the unit the kubelet counts it in: millicores for CPU, else whole units.
fn amount(resource: &str, q: Quantity) -> i128 {
    if resource == "cpu" { q.milli_value() } else { q.value() }
}

/// `noderesources.Fits`: the pod count, then every resource the pod requests, against the
/// node's allocatable less what the other pods request.
fn fits_resources(pod: &Pod, node: &Node, others: &[&Pod]) -> Result<(), Refusal> {
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.clone()).unwrap_or_default();
    let capacity_of = |name: &str| {
        allocatable.get(name).and_then(|q| Quantity::parse(&q.0).ok()).map(|q| amount(name, q)).unwrap_or(0)
    };
    let short = |name: &str, requested: i128, used: i128, capacity: i128| Refusal {
        reason: format!("OutOf{name}"),
        message: format!(
            "Node didn't have enough resource: {name}, requested: {requested}, used: {used}, capacity: {capacity}"
        ),
    };
    let pods = capacity_of("pods");
    if others.len() as i128 + 1 > pods {
        return Err(short("pods", 1, others.len() as i128, pods));
    }
    let requested = pod_requests(pod);
    let mut used: BTreeMap<String, i128> = BTreeMap::new();
    for other in others {
        for (name, a) in pod_requests(other) {
            *used.entry(name.clone()).or_default() += amount(&name, a.value);
        }
    }
    // CPU and memory first, as the kubelet checks them, then the rest in name order.
    let mut names: Vec<&String> = requested.keys().collect();
    names.sort_by_key(|n| (n.as_str() != "cpu", n.as_str() != "memory", n.as_str()));
    for name in names {
        let want = amount(name, requested[name].value);
        if want == 0 {
            continue;
        }
        let (have, in_use) = (capacity_of(name), used.get(name).copied().unwrap_or(0));
        if want > have - in_use {
            return Err(short(name, want, in_use, have));
        }
    }
    Ok(())
}

/// `PodMatchesNodeSelectorAndAffinityTerms`: every `nodeSelector` label, and one of the terms
/// of the required node affinity (if any).
fn matches_node(pod: &Pod, node: &Node) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let Some(spec) = &pod.spec else { return true };
    if let Some(selector) = &spec.node_selector
        && selector.iter().any(|(k, v)| labels.get(k) != Some(v))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    match required {
        None => true,
        Some(selector) => selector.node_selector_terms.iter().any(|t| term_matches(t, &labels, node)),
    }
}

/// A term matches when all its requirements do; a term with none matches nothing.
fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, node: &Node) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let name = node.metadata.name.clone().unwrap_or_default();
    let node_fields = BTreeMap::from([("metadata.name".to_string(), name)]);
    expressions.iter().all(|r| requirement_matches(r, labels))
        && fields.iter().all(|r| requirement_matches(r, &node_fields))
}

fn requirement_matches(r: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let value = labels.get(&r.key);
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => {
            matches!((value.and_then(|v| number(v)), values.first().and_then(|v| number(v))), (Some(a), Some(b)) if a > b)
        }
        "Lt" => {
            matches!((value.and_then(|v| number(v)), values.first().and_then(|v| number(v))), (Some(a), Some(b)) if a < b)
        }
        _ => false,
    }
}

/// (protocol, host IP, host port) of every host port a pod asks for.
fn host_ports(pod: &Pod) -> BTreeSet<(String, String, i32)> {
    let spec = pod.spec.iter();
    let containers = spec.flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers));
    containers
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.is_some_and(|h| h > 0))
        .map(|p| {
            let ip = p.host_ip.clone().filter(|i| !i.is_empty()).unwrap_or_else(|| "0.0.0.0".into());
            (p.protocol.clone().unwrap_or_else(|| "TCP".into()), ip, p.host_port.unwrap_or_default())
        })
        .collect()
}

/// `nodeports.Fits`: no host port (same protocol and port, on the same address or either on
/// every address) held by another pod.
fn host_ports_free(pod: &Pod, others: &[&Pod]) -> bool {
    let wanted = host_ports(pod);
    let held: BTreeSet<_> = others.iter().flat_map(|o| host_ports(o)).collect();
    !wanted.iter().any(|(proto, ip, port)| {
        held.iter().any(|(p, i, h)| p == proto && h == port && (i == ip || i == "0.0.0.0" || ip == "0.0.0.0"))
    })
}

#[cfg(test)]
mod tests;
