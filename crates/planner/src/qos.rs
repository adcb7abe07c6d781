//! The pod's QoS class (`ComputePodQOS`): only cpu and memory count, init containers included,
//! and quantities are compared by value (`0.1` CPU is `100m`).

use crate::pod;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use podwright_api::quantity::Quantity;
use std::collections::BTreeMap;

const RESOURCES: [&str; 2] = ["cpu", "memory"];

/// The positive cpu and memory quantities of a requests or limits map. Validation has refused
/// malformed quantities; one that still does not parse counts as unset.
fn positive(m: Option<&BTreeMap<String, ApiQuantity>>) -> BTreeMap<&'static str, Quantity> {
    RESOURCES
        .iter()
        .filter_map(|r| Some((*r, Quantity::parse(&m?.get(*r)?.0).ok().filter(|q| q.is_positive())?)))
        .collect()
}

fn add_into(sum: &mut BTreeMap<&'static str, Quantity>, more: &BTreeMap<&'static str, Quantity>) {
    for (r, q) in more {
        let total = sum.entry(r).or_default();
        *total = *total + *q;
    }
}

/// `Guaranteed`, `Burstable` or `BestEffort`, as `status.qosClass` says it.
pub fn qos_class(p: &Pod) -> &'static str {
    let (mut requests, mut limits) = (BTreeMap::new(), BTreeMap::new());
    let mut guaranteed = true;
    for sc in pod::all_containers(p) {
        let res = sc.container.resources.as_ref();
        let container_limits = positive(res.and_then(|r| r.limits.as_ref()));
        let mut container_requests = positive(res.and_then(|r| r.requests.as_ref()));
        // The API server defaults a missing request to the limit.
        for (r, q) in &container_limits {
            container_requests.entry(r).or_insert(*q);
        }
        // Every container needs both limits; requests and limits are compared as pod sums.
        guaranteed &= container_limits.len() == RESOURCES.len();
        add_into(&mut requests, &container_requests);
        add_into(&mut limits, &container_limits);
    }
    if requests.is_empty() && limits.is_empty() {
        "BestEffort"
    } else if guaranteed && requests == limits {
        "Guaranteed"
    } else {
        "Burstable"
    }
}
