//! The pod's QoS class (`ComputePodQOS`): only cpu and memory count, init containers included,
//! and quantities are compared by value (`0.1` CPU is `100m`).

use crate::pod;
use crate::resources::{self, ResourceList};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use std::collections::BTreeMap;

const RESOURCES: [&str; 2] = ["cpu", "memory"];

/// The positive cpu and memory quantities of a requests or limits map.
fn positive(m: Option<&BTreeMap<String, ApiQuantity>>) -> ResourceList {
    let mut l = resources::list(m);
    l.retain(|name, q| RESOURCES.contains(&name.as_str()) && q.value.is_positive());
    l
}

/// `Guaranteed`, `Burstable` or `BestEffort`, as `status.qosClass` says it.
pub fn qos_class(p: &Pod) -> &'static str {
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
        resources::add(&mut requests, &container_requests);
        resources::add(&mut limits, &container_limits);
    }
    if requests.is_empty() && limits.is_empty() {
        "BestEffort"
    } else if guaranteed && requests == limits {
        "Guaranteed"
    } else {
        "Burstable"
    }
}
