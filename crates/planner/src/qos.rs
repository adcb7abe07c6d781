//! The pod's QoS class (`ComputePodQOS`): only cpu and memory count, init containers included.

use crate::pod;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

const RESOURCES: [&str; 2] = ["cpu", "memory"];

fn nonzero(q: &Quantity) -> bool {
    q.0.trim_start_matches(['0', '.']).chars().next().is_some_and(|c| c.is_ascii_digit())
}

pub fn qos_class(p: &Pod) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    for sc in pod::all_containers(p) {
        let res = sc.container.resources.as_ref();
        fn pick(m: Option<&BTreeMap<String, Quantity>>) -> BTreeMap<&'static str, &Quantity> {
            RESOURCES.iter().filter_map(|r| m.and_then(|m| m.get(*r)).filter(|q| nonzero(q)).map(|q| (*r, q))).collect()
        }
        let limits = pick(res.and_then(|r| r.limits.as_ref()));
        let mut requests = pick(res.and_then(|r| r.requests.as_ref()));
        // A limit without a request defaults the request to the limit.
        for (k, v) in &limits {
            requests.entry(k).or_insert(v);
        }
        any |= !limits.is_empty() || !requests.is_empty();
        if limits.len() != RESOURCES.len()
            || requests.iter().any(|(k, v)| limits.get(k).map(|l| l.0 != v.0).unwrap_or(true))
        {
            guaranteed = false;
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        _ => "Burstable",
    }
}
