//! The pod's effective requests and limits (component-helpers' `PodRequests` / `PodLimits`), for
//! every resource name: the larger of what the app containers and sidecars use together and what
//! the busiest init container uses beside the sidecars started before it, plus `spec.overhead`.
//! Quantities are compared and added by value.

use crate::observed::ContainerKind;
use crate::pod::{self, SpecContainer};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use podwright_api::quantity::{Format, Quantity};
use std::collections::BTreeMap;
use std::fmt;

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
}

/// Amounts by resource name (`v1.ResourceList`).
pub type ResourceList = BTreeMap<String, Amount>;

pub(crate) fn list(m: Option<&BTreeMap<String, ApiQuantity>>) -> ResourceList {
    // Validation has refused malformed quantities; one that still does not parse is left out.
    m.into_iter().flatten().filter_map(|(k, q)| Some((k.clone(), Amount::parse(&q.0)?))).collect()
}

/// `addResourceList`: a sum keeps the format of its first non-zero term.
pub(crate) fn add(into: &mut ResourceList, more: &ResourceList) {
    for (name, q) in more {
        match into.get_mut(name) {
            None => {
                into.insert(name.clone(), *q);
            }
            Some(total) => {
                if total.value == Quantity::default() {
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

/// The sum over app containers and sidecars, or the most any init container needs while it runs
/// beside the sidecars before it, whichever is larger, resource by resource. `each` sees what
/// each container counts with (`PodResourcesOptions.ContainerFn`): an app container its own, a
/// sidecar all sidecars so far, an init container its own and the sidecars before it.
fn aggregate(
    p: &Pod,
    of: impl Fn(&SpecContainer) -> ResourceList,
    mut each: impl FnMut(&ResourceList),
) -> ResourceList {
    let mut total = ResourceList::new();
    let (mut sidecars, mut busiest_init) = (ResourceList::new(), ResourceList::new());
    for sc in pod::all_containers(p) {
        let own = of(&sc);
        let in_use = match sc.kind {
            ContainerKind::App => {
                each(&own);
                add(&mut total, &own);
                continue;
            }
            ContainerKind::Sidecar => {
                add(&mut total, &own);
                add(&mut sidecars, &own);
                sidecars.clone()
            }
            ContainerKind::Init => {
                let mut running = own;
                add(&mut running, &sidecars);
                running
            }
        };
        each(&in_use);
        max(&mut busiest_init, &in_use);
    }
    max(&mut total, &busiest_init);
    total
}

fn overhead(p: &Pod) -> ResourceList {
    list(p.spec.as_ref().and_then(|s| s.overhead.as_ref()))
}

/// The pod's effective requests (`PodRequests`), `spec.overhead` added.
pub fn pod_requests(p: &Pod) -> ResourceList {
    let mut requests =
        aggregate(p, |sc| list(sc.container.resources.as_ref().and_then(|r| r.requests.as_ref())), |_| {});
    add(&mut requests, &overhead(p));
    requests
}

/// The pod's effective limits (`PodLimits`); `spec.overhead` is added only to the resources
/// that have a limit, since an unlimited resource stays unlimited.
pub fn pod_limits(p: &Pod) -> ResourceList {
    pod_limits_declared(p).0
}

/// Whether every container counts with a non-zero limit of each resource, as the kubelet decides
/// whether the pod-level cgroup gets a CPU quota and a memory limit (`ResourceConfigForPod`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitsDeclared {
    pub cpu: bool,
    pub memory: bool,
}

/// [`pod_limits`], and which limits every container declares.
pub fn pod_limits_declared(p: &Pod) -> (ResourceList, LimitsDeclared) {
    let mut declared = LimitsDeclared { cpu: true, memory: true };
    let limited = |l: &ResourceList, name: &str| l.get(name).is_some_and(|q| q.value != Quantity::default());
    let mut limits = aggregate(
        p,
        |sc| list(sc.container.resources.as_ref().and_then(|r| r.limits.as_ref())),
        |l| {
            declared.cpu &= limited(l, "cpu");
            declared.memory &= limited(l, "memory");
        },
    );
    for (name, q) in overhead(p) {
        if let Some(limit) = limits.get_mut(&name) {
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
