//! The pod's effective requests and limits (component-helpers' `PodRequests` / `PodLimits`), for
//! every resource name: the containers' aggregate ([`podwright_api::pod_resources`]), each
//! resource the pod-level resources (`spec.resources`, KEP-2837) name taken from them instead,
//! plus `spec.overhead`. Quantities are compared and added by value.

use k8s_openapi::api::core::v1::Pod;
pub use podwright_api::pod_resources::{Amount, ResourceList};
use podwright_api::pod_resources::{
    add, aggregate, aggregate_container_requests, apply_pod_level, container_limits, is_pod_level_requests_set,
    is_pod_level_resources_set, list, pod_level,
};

fn overhead(p: &Pod) -> ResourceList {
    list(p.spec.as_ref().and_then(|s| s.overhead.as_ref()))
}

/// The pod's effective requests (`PodRequests`), `spec.overhead` added.
pub fn pod_requests(p: &Pod) -> ResourceList {
    let spec = p.spec.as_ref();
    let mut requests = aggregate_container_requests(spec);
    if is_pod_level_requests_set(spec) {
        apply_pod_level(&mut requests, pod_level(spec).and_then(|r| r.requests.as_ref()));
    }
    add(&mut requests, &overhead(p));
    requests
}

/// The pod's effective limits (`PodLimits`); `spec.overhead` is added only to the resources
/// that have a limit, since an unlimited resource stays unlimited.
pub fn pod_limits(p: &Pod) -> ResourceList {
    pod_limits_declared(p).0
}

/// Whether the pod's cgroup gets a CPU quota and a memory limit when it is Burstable
/// (`ResourceConfigForPod`): when every container counts with a non-zero limit of that resource,
/// or the pod-level resources limit it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitsDeclared {
    pub cpu: bool,
    pub memory: bool,
}

/// [`pod_limits`], and which limits are declared.
pub fn pod_limits_declared(p: &Pod) -> (ResourceList, LimitsDeclared) {
    let spec = p.spec.as_ref();
    let mut declared = LimitsDeclared { cpu: true, memory: true };
    let limited = |l: &ResourceList, name: &str| l.get(name).is_some_and(|q| !q.is_zero());
    let mut limits = aggregate(spec, container_limits, |l| {
        declared.cpu &= limited(l, "cpu");
        declared.memory &= limited(l, "memory");
    });
    if is_pod_level_resources_set(spec) {
        let pod_limits = pod_level(spec).and_then(|r| r.limits.as_ref());
        apply_pod_level(&mut limits, pod_limits);
        let pod_limits = list(pod_limits);
        declared.cpu |= limited(&pod_limits, "cpu");
        declared.memory |= limited(&pod_limits, "memory");
    }
    for (name, q) in overhead(p) {
        if let Some(limit) = limits.get_mut(&name).filter(|l| !l.is_zero()) {
            limit.value = limit.value + q.value;
        }
    }
    (limits, declared)
}

/// `cpu: 100m, memory: 2200Mi`, or `none`.
pub fn describe(l: &ResourceList) -> String {
    if l.is_empty() {
        return "none".to_string();
    }
    l.iter().map(|(name, q)| format!("{name}: {q}")).collect::<Vec<_>>().join(", ")
}
