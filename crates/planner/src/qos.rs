//! The pod's QoS class (`ComputePodQOS`): only cpu and memory count, init containers included,
//! and quantities are compared by value (`0.1` CPU is `100m`). A pod with pod-level resources
//! (`spec.resources`) takes its class from them alone.

use crate::pod;
use crate::resources::ResourceList;
use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use podwright_api::pod_resources::{self, add, list};
use std::collections::BTreeMap;

const RESOURCES: [&str; 2] = ["cpu", "memory"];

/// The positive cpu and memory quantities of a requests or limits map.
fn positive(m: Option<&BTreeMap<String, ApiQuantity>>) -> ResourceList {
    let mut l = list(m);
    l.retain(|name, q| RESOURCES.contains(&name.as_str()) && q.value.is_positive());
    l
}

/// `Guaranteed`, `Burstable` or `BestEffort`, as `status.qosClass` says it.
pub fn qos_class(p: &Pod) -> &'static str {
    if let Some(pod_level) = pod_resources::pod_level(p.spec.as_ref()) {
        return requirements_qos(pod_level);
    }
    let (mut requests, mut limits) = (ResourceList::new(), ResourceList::new());
    let mut guaranteed = true;
    for sc in pod::all_containers(p) {
        let res = sc.container.resources.as_ref();
        let container_limits = positive(res.and_then(|r| r.limits.as_ref()));
        let mut container_requests = positive(res.and_then(|r| r.requests.as_ref()));
        // The API server defaults a missing request to the limit.
        for (r, q) in &container_limits {
            container_requests.entry(r.clone()).or_insert(*q);
        }
        // Every container needs both limits; requests and limits are compared as pod sums.
        guaranteed &= container_limits.len() == RESOURCES.len();
        add(&mut requests, &container_requests);
        add(&mut limits, &container_limits);
    }
    if requests.is_empty() && limits.is_empty() {
        "BestEffort"
    } else if guaranteed && requests == limits {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The class of one set of requirements (`resourceQOS`): nothing set is BestEffort; cpu and
/// memory each with a request equal to its limit, both set or both unset, is Guaranteed or
/// BestEffort; anything else Burstable.
fn requirements_qos(r: &ResourceRequirements) -> &'static str {
    let empty = |m: &Option<BTreeMap<String, ApiQuantity>>| m.as_ref().is_none_or(BTreeMap::is_empty);
    if empty(&r.requests) && empty(&r.limits) {
        return "BestEffort";
    }
    let (requests, limits) = (list(r.requests.as_ref()), list(r.limits.as_ref()));
    let mut class = None;
    for name in RESOURCES {
        let request = requests.get(name).copied().unwrap_or_default();
        if limits.get(name).copied().unwrap_or_default() != request {
            return "Burstable";
        }
        let best_effort = request.is_zero();
        match class {
            None => class = Some(if best_effort { "BestEffort" } else { "Guaranteed" }),
            Some(c) if (c == "BestEffort") != best_effort => return "Burstable",
            Some(_) => {}
        }
    }
    class.unwrap_or("BestEffort")
}
