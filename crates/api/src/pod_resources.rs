//! A pod's resource lists as component-helpers' `resource` package computes them: amounts by
//! name added and compared by value, the containers' aggregate requests or limits (the larger of
//! what the app containers and sidecars use together and what the busiest init container uses
//! beside the sidecars started before it), and the pod-level resources of KEP-2837
//! (`spec.resources`: cpu, memory and hugepages), which stand in for the aggregate of what they
//! name.

use crate::container_kind::spec_containers;
use crate::quantity::{Format, Quantity};
use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use std::collections::BTreeMap;
use std::fmt;

/// The prefix of the hugepages resources (`hugepages-2Mi`).
pub const HUGEPAGES_PREFIX: &str = "hugepages-";

/// `IsNativeResource`: a resource name with no domain, or a `kubernetes.io` one.
fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// A resource name outside Kubernetes' own (`v1helper.IsExtendedResourceName`), which a device
/// plugin or an administrator advertises in a Node's capacity: not native, and not a quota's
/// `requests.` name.
pub fn is_extended_resource(name: &str) -> bool {
    !is_native_resource(name) && !name.starts_with("requests.")
}

/// A resource amount: its value, and the format a sum of it keeps when written back.
#[derive(Debug, Clone, Copy, Default)]
pub struct Amount {
    pub value: Quantity,
    pub format: Format,
}

impl PartialEq for Amount {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl Eq for Amount {}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.value.written(self.format))
    }
}

impl Amount {
    /// `2` of `format` `DecimalSi`, `1Gi` of `BinarySi`; `None` when it is not a quantity.
    pub fn parse(s: &str) -> Option<Amount> {
        Some(Amount { value: Quantity::parse(s).ok()?, format: Format::of(s).ok()? })
    }

    /// Whether it is zero (`Quantity.IsZero`).
    pub fn is_zero(&self) -> bool {
        self.value == Quantity::default()
    }
}

/// Amounts by resource name (`v1.ResourceList`).
pub type ResourceList = BTreeMap<String, Amount>;

/// The amounts of a requests or limits map; one that is not a quantity is left out (validation
/// refuses it).
pub fn list(m: Option<&BTreeMap<String, ApiQuantity>>) -> ResourceList {
    m.into_iter().flatten().filter_map(|(k, q)| Some((k.clone(), Amount::parse(&q.0)?))).collect()
}

/// `addResourceList`: a sum keeps the format of its first non-zero term.
pub fn add(into: &mut ResourceList, more: &ResourceList) {
    for (name, q) in more {
        match into.get_mut(name) {
            None => {
                into.insert(name.clone(), *q);
            }
            Some(total) => {
                if total.is_zero() {
                    total.format = q.format;
                }
                total.value = total.value + q.value;
            }
        }
    }
}

/// `maxResourceList`: the larger of each amount.
fn max(into: &mut ResourceList, other: &ResourceList) {
    for (name, q) in other {
        match into.get_mut(name) {
            Some(kept) if kept.value >= q.value => {}
            _ => {
                into.insert(name.clone(), *q);
            }
        }
    }
}

/// A container's requests.
pub fn container_requests(c: &Container) -> ResourceList {
    list(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
}

/// A container's limits.
pub fn container_limits(c: &Container) -> ResourceList {
    list(c.resources.as_ref().and_then(|r| r.limits.as_ref()))
}

/// The sum over app containers and sidecars, or the most any init container needs while it runs
/// beside the sidecars before it, whichever is larger, resource by resource. `each` sees what
/// each container counts with (`PodResourcesOptions.ContainerFn`): an app container its own, a
/// sidecar all sidecars so far, an init container its own and the sidecars before it.
pub fn aggregate(
    spec: Option<&PodSpec>,
    of: impl Fn(&Container) -> ResourceList,
    mut each: impl FnMut(&ResourceList),
) -> ResourceList {
    let mut total = ResourceList::new();
    let (mut sidecars, mut busiest_init) = (ResourceList::new(), ResourceList::new());
    for c in spec_containers(spec) {
        let own = of(c.container);
        let in_use = if c.is_sidecar() {
            add(&mut total, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else if c.is_regular_init() {
            let mut running = own;
            add(&mut running, &sidecars);
            running
        } else {
            each(&own);
            add(&mut total, &own);
            continue;
        };
        each(&in_use);
        max(&mut busiest_init, &in_use);
    }
    max(&mut total, &busiest_init);
    total
}

/// `AggregateContainerRequests`.
pub fn aggregate_container_requests(spec: Option<&PodSpec>) -> ResourceList {
    aggregate(spec, container_requests, |_| {})
}

/// `AggregateContainerLimits`.
pub fn aggregate_container_limits(spec: Option<&PodSpec>) -> ResourceList {
    aggregate(spec, container_limits, |_| {})
}

/// `IsSupportedPodLevelResource`: cpu, memory and the hugepages.
pub fn is_supported_pod_level_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory") || name.starts_with(HUGEPAGES_PREFIX)
}

/// `IsOvercommitAllowed`: a native resource (no domain, or a `kubernetes.io` one) other than
/// the hugepages may be requested below its limit.
pub fn is_overcommit_allowed(name: &str) -> bool {
    is_native_resource(name) && !name.starts_with(HUGEPAGES_PREFIX)
}

/// Whether every container, init containers included, has a limit of `name`.
pub fn all_containers_limit(spec: &PodSpec, name: &str) -> bool {
    spec_containers(Some(spec)).all(|c| container_limits(c.container).contains_key(name))
}

/// The pod-level resources (`spec.resources`), when the spec has them.
pub fn pod_level(spec: Option<&PodSpec>) -> Option<&ResourceRequirements> {
    spec?.resources.as_ref()
}

fn names_supported(m: Option<&BTreeMap<String, ApiQuantity>>) -> bool {
    m.into_iter().flatten().any(|(name, _)| is_supported_pod_level_resource(name))
}

/// `IsPodLevelRequestsSet`: a supported resource among the pod-level requests.
pub fn is_pod_level_requests_set(spec: Option<&PodSpec>) -> bool {
    names_supported(pod_level(spec).and_then(|r| r.requests.as_ref()))
}

/// `IsPodLevelLimitsSet`: a supported resource among the pod-level limits.
pub fn is_pod_level_limits_set(spec: Option<&PodSpec>) -> bool {
    names_supported(pod_level(spec).and_then(|r| r.limits.as_ref()))
}

/// `IsPodLevelResourcesSet`: a supported resource among the pod-level requests or limits.
pub fn is_pod_level_resources_set(spec: Option<&PodSpec>) -> bool {
    supported_set(pod_level(spec))
}

/// A supported resource among the requests or limits of `r`.
fn supported_set(r: Option<&ResourceRequirements>) -> bool {
    names_supported(r.and_then(|r| r.requests.as_ref())) || names_supported(r.and_then(|r| r.limits.as_ref()))
}

/// A container's limit of `name` as the kubelet gives it to the runtime (`getCPULimit`,
/// `getMemoryLimit`): its own, or, without a non-zero one, the pod-level limit of a pod with
/// pod-level resources.
pub fn container_limit(spec: Option<&PodSpec>, c: &Container, name: &str) -> Option<Amount> {
    limit_within(c.resources.as_ref(), pod_level(spec), name)
}

/// [`container_limit`] for a container's resources `own` under the pod-level resources
/// `pod_level`.
pub fn limit_within(
    own: Option<&ResourceRequirements>,
    pod_level: Option<&ResourceRequirements>,
    name: &str,
) -> Option<Amount> {
    let own = list(own.and_then(|r| r.limits.as_ref())).remove(name).filter(|q| !q.is_zero());
    own.or_else(|| supported_set(pod_level).then(|| list(pod_level?.limits.as_ref()).remove(name)).flatten())
}

/// `applyPodLevelResources`: the supported pod-level amounts of `side` replace the aggregate's.
pub fn apply_pod_level(into: &mut ResourceList, side: Option<&BTreeMap<String, ApiQuantity>>) {
    for (name, amount) in list(side) {
        if is_supported_pod_level_resource(&name) {
            into.insert(name, amount);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> PodSpec {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn pod_level_resources_count_only_when_a_supported_name_is_set() {
        let cases = [
            (serde_json::json!({"containers": []}), false, false),
            (serde_json::json!({"containers": [], "resources": {}}), false, false),
            (
                serde_json::json!({"containers": [], "resources": {"requests": {"ephemeral-storage": "1Gi"}}}),
                false,
                false,
            ),
            (serde_json::json!({"containers": [], "resources": {"requests": {"cpu": "1"}}}), true, false),
            (serde_json::json!({"containers": [], "resources": {"limits": {"hugepages-2Mi": "2Mi"}}}), false, true),
        ];
        for (s, requests, limits) in cases {
            let s = spec(s);
            assert_eq!(is_pod_level_requests_set(Some(&s)), requests, "{s:?}");
            assert_eq!(is_pod_level_limits_set(Some(&s)), limits, "{s:?}");
            assert_eq!(is_pod_level_resources_set(Some(&s)), requests || limits, "{s:?}");
        }
    }

    #[test]
    fn the_pod_level_amounts_replace_the_aggregate_for_supported_names_only() {
        let mut l = list(Some(&BTreeMap::from([
            ("cpu".to_string(), ApiQuantity("100m".into())),
            ("ephemeral-storage".to_string(), ApiQuantity("1Gi".into())),
        ])));
        let pod_level = BTreeMap::from([
            ("cpu".to_string(), ApiQuantity("0.5".into())),
            ("ephemeral-storage".to_string(), ApiQuantity("2Gi".into())),
        ]);
        apply_pod_level(&mut l, Some(&pod_level));
        assert_eq!(l["cpu"].to_string(), "500m");
        assert_eq!(l["ephemeral-storage"].to_string(), "1Gi");
    }

    #[test]
    fn extended_resources_are_those_outside_kubernetes_names() {
        assert!(is_extended_resource("example.com/gpu"));
        assert!(is_extended_resource("scheduling.k8s.io/foo"));
        assert!(!is_extended_resource("cpu"));
        assert!(!is_extended_resource("hugepages-2Mi"));
        assert!(!is_extended_resource("kubernetes.io/something"));
        assert!(!is_extended_resource("requests.example.com/gpu"));
    }
}
