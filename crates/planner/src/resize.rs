//! In-place resize of a pod's containers (KEP-1287, as in 1.35) and of its pod-level resources
//! (KEP-5419, beta in 1.36): what the node has allocated to each container and to the pod (the
//! allocation manager's checkpoint), whether the spec's new resources can be allocated
//! (`handlePodResourcesResize`, `canResizePod`), and what a running container and the pod cgroup
//! need to get what was allocated to them (the runtime manager's `computePodResizeAction`).
//!
//! The spec holds what the user asks for; the allocation what the node admitted; the actuated
//! resources what each running container was given. The node runs the pod with its allocation
//! in place of the spec's resources ([`allocated_pod`]).

use crate::decide::PodContext;
use crate::observed::{ContainerKind, RunState};
use crate::pod::{self, SpecContainer};
use crate::resources;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition, ResourceRequirements};
use podwright_api::pod_resources;
use podwright_api::quantity::Quantity;
use std::collections::BTreeMap;

/// Resources by container name, and the pod's own under [`POD_LEVEL`]: an allocation, or what
/// the running containers and the pod cgroup were given (the kubelet's `PodResourceInfo`).
pub type Allocation = BTreeMap<String, ResourceRequirements>;

/// The key of the pod-level resources (`spec.resources`) in an [`Allocation`]: a field path, so
/// never a container's name (a DNS label). Checkpoints written before pod-level resizes lack it.
pub const POD_LEVEL: &str = "spec.resources";

/// The pod-level resources as the spec has them; none is the default.
pub fn pod_level_of(pod: &Pod) -> ResourceRequirements {
    pod_resources::pod_level(pod.spec.as_ref()).cloned().unwrap_or_default()
}

/// Whether a container's resources may change in place (`IsResizableContainer`): app containers
/// and sidecars; an init container runs to completion with what it started with.
pub fn resizable(kind: ContainerKind) -> bool {
    kind != ContainerKind::Init
}

/// The resources of the pod's resizable containers, and its pod-level ones where it has them,
/// as its spec has them (`allocationFromPod`).
pub fn allocation_of(pod: &Pod) -> Allocation {
    pod::all_containers(pod)
        .filter(|sc| resizable(sc.kind))
        .map(|sc| (sc.name().to_string(), sc.container.resources.clone().unwrap_or_default()))
        .chain(pod_resources::pod_level(pod.spec.as_ref()).map(|r| (POD_LEVEL.to_string(), r.clone())))
        .collect()
}

/// The pod as the node runs it (`UpdatePodFromAllocation`): each allocated container's
/// resources, and the allocated pod-level ones, in place of the spec's. The one place effective
/// resources come from: the pod cgroup, the containers' CRI resources and the downward API all
/// read this pod.
pub fn allocated_pod(pod: &Pod, allocated: &Allocation) -> Pod {
    // An empty allocation leaves a field the spec does not have unset.
    let take = |r: &ResourceRequirements, had: bool| (r != &ResourceRequirements::default() || had).then(|| r.clone());
    let mut out = pod.clone();
    if let Some(spec) = out.spec.as_mut() {
        if let Some(r) = allocated.get(POD_LEVEL) {
            spec.resources = take(r, spec.resources.is_some());
        }
        let containers = spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten());
        for c in containers {
            if let Some(r) = allocated.get(&c.name) {
                c.resources = take(r, c.resources.is_some());
            }
        }
    }
    out
}

/// Why a resize waits: the reason and message of the `PodResizePending` condition.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pending {
    /// `Infeasible` (the node could never hold it) or `Deferred` (not now).
    pub reason: String,
    pub message: String,
}

/// `v1.PodReasonInfeasible`.
pub const INFEASIBLE: &str = "Infeasible";
/// `v1.PodReasonDeferred`.
pub const DEFERRED: &str = "Deferred";
/// `v1.PodReasonError`: the reason of a `PodResizeInProgress` whose last attempt failed.
pub const ERROR: &str = "Error";

/// The node's room for the pod's requests: its allocatable, and what the node's other pods have
/// allocated (their requests), CPU in millicores and memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeRoom {
    pub cpu_millis: i128,
    pub memory_bytes: i128,
    pub others_cpu_millis: i128,
    pub others_memory_bytes: i128,
}

/// What the node makes of the spec's resources.
#[derive(Debug, Clone, PartialEq)]
pub enum Allocate {
    /// The spec asks for what is allocated.
    Unchanged,
    /// The new allocation, to be written down before anything acts on it.
    Resize(Allocation),
    /// Not allocated now.
    Pending(Pending),
}

/// The pod's CPU (millicores) and memory (bytes) requests (`GetResourceRequest`).
pub fn requests(pod: &Pod) -> (i128, i128) {
    let r = resources::pod_requests(pod);
    let get = |name: &str| r.get(name).map_or(Quantity::default(), |q| q.value);
    (get("cpu").milli_value(), get("memory").value())
}

/// The allocation manager's decision on the spec `pod` (its desired resources) given the
/// allocation in force: allocate it, or say why not. Only the resizable containers and the
/// pod-level resources count.
pub fn allocate(pod: &Pod, allocated: &Allocation, room: &NodeRoom) -> Allocate {
    let wanted = allocation_of(pod);
    // Pod-level resources not allocated are none (a pod without them).
    let pod_level = allocated.get(POD_LEVEL).cloned().unwrap_or_default();
    let differs = wanted.iter().any(|(name, r)| allocated.get(name).is_some_and(|a| !same(a, r)))
        || !same(&pod_level, &pod_level_of(pod));
    if !differs {
        return Allocate::Unchanged;
    }
    let (cpu, memory) = requests(pod);
    // `canResizePod`: more than the node has at all can never fit.
    if cpu > room.cpu_millis || memory > room.memory_bytes {
        let what = if memory > room.memory_bytes {
            format!("memory, requested: {memory}, capacity: {}", room.memory_bytes)
        } else {
            format!("cpu, requested: {cpu}, capacity: {}", room.cpu_millis)
        };
        let message = format!("Node didn't have enough capacity: {what}");
        return Allocate::Pending(Pending { reason: INFEASIBLE.into(), message });
    }
    // The admission's resource fit (`fitsRequest`), CPU first, against the other pods'
    // allocations.
    let checks = [
        ("cpu", cpu, room.others_cpu_millis, room.cpu_millis),
        ("memory", memory, room.others_memory_bytes, room.memory_bytes),
    ];
    for (name, requested, used, capacity) in checks {
        if requested > 0 && requested > capacity - used {
            let message = format!(
                "Node didn't have enough resource: {name}, requested: {requested}, used: {used}, capacity: {capacity}"
            );
            return Allocate::Pending(Pending { reason: DEFERRED.into(), message });
        }
    }
    let mut next = allocated.clone();
    next.extend(wanted);
    Allocate::Resize(next)
}

/// Two resource requirements asking for the same amounts (quantities compared by value).
pub fn same(a: &ResourceRequirements, b: &ResourceRequirements) -> bool {
    let lists =
        |r: &ResourceRequirements| (pod_resources::list(r.requests.as_ref()), pod_resources::list(r.limits.as_ref()));
    lists(a) == lists(b)
}

/// The CPU and memory settings a resize compares (`containerResources`): CPU in millicores,
/// memory in bytes; the memory request is not one, since no cgroup holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Settings {
    cpu_request: i128,
    cpu_limit: i128,
    memory_limit: i128,
}

/// The least CPU request (`MinShares`, as millicores) and limit (`MinMilliCPULimit`) that make a
/// difference: below them two values are the same to the kernel.
const MIN_CPU_REQUEST: i128 = 2;
const MIN_CPU_LIMIT: i128 = 10;

/// The settings of a container with resources `r` in a pod whose pod-level resources are
/// `pod_level`: a limit it lacks is the pod's (`getCPULimit`, `getMemoryLimit`).
fn settings(r: Option<&ResourceRequirements>, pod_level: Option<&ResourceRequirements>) -> Settings {
    let limit = |name: &str| pod_resources::limit_within(r, pod_level, name).unwrap_or_default().value;
    let requests = pod_resources::list(r.and_then(|r| r.requests.as_ref()));
    let cpu_request = requests.get("cpu").map_or(Quantity::default(), |q| q.value);
    Settings {
        cpu_request: cpu_request.milli_value(),
        cpu_limit: limit("cpu").milli_value(),
        memory_limit: limit("memory").value(),
    }
}

/// What a running container needs to have what is allocated to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// It has it.
    Nothing,
    /// `UpdateContainerResources` (every changed resource's policy is `NotRequired`).
    Update,
    /// A new instance (a changed resource's policy is `RestartContainer`).
    Restart,
}

/// `computePodResizeAction` for the container `sc` of the allocated pod `pod`, given what the
/// running containers and the pod cgroup were given (`actuated`; a container not known there:
/// nothing, as the kubelet proceeds from zero values). A container without a limit of its own
/// changes with the pod-level one.
pub fn need(pod: &Pod, sc: &SpecContainer, actuated: &Allocation) -> Need {
    let allocated_pod_level = pod_resources::pod_level(pod.spec.as_ref());
    let mut desired = settings(sc.container.resources.as_ref(), allocated_pod_level);
    let actuated_pod_level = actuated.get(POD_LEVEL).or(allocated_pod_level);
    let current = settings(actuated.get(sc.name()), actuated_pod_level);
    if desired.cpu_request <= MIN_CPU_REQUEST && current.cpu_request <= MIN_CPU_REQUEST {
        desired.cpu_request = current.cpu_request;
    }
    if desired.cpu_limit <= MIN_CPU_LIMIT && current.cpu_limit <= MIN_CPU_LIMIT {
        desired.cpu_limit = current.cpu_limit;
    }
    if desired == current {
        return Need::Nothing;
    }
    let restart = |resource: &str| {
        sc.container
            .resize_policy
            .iter()
            .flatten()
            .any(|p| p.resource_name == resource && p.restart_policy == "RestartContainer")
    };
    let memory = desired.memory_limit != current.memory_limit && restart("memory");
    let cpu = (desired.cpu_limit != current.cpu_limit || desired.cpu_request != current.cpu_request) && restart("cpu");
    if memory || cpu { Need::Restart } else { Need::Update }
}

/// The node's view of the pod's resize, beside what the runtime shows: what each running
/// container and the pod cgroup were given, why the spec's resources wait, and why the last
/// attempt to apply them failed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResizeState {
    /// By container name, the resources its running instance was given, and under
    /// [`POD_LEVEL`] what the pod cgroup was sized from (the kubelet's actuated resources).
    pub actuated: Allocation,
    pub pending: Option<Pending>,
    /// The last attempt's error: `PodResizeInProgress` with reason `Error`.
    pub error: Option<ResizeError>,
}

/// Why the last attempt to apply the allocation failed, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResizeError {
    pub message: String,
    pub at: jiff::Timestamp,
}

/// The kill message of a container restarted for its resize.
pub fn restart_message(name: &str) -> String {
    format!("Container {name} resize requires restart")
}

/// The running instance of each resizable container that does not yet have what is allocated
/// to it.
fn unactuated<'a>(ctx: &'a PodContext) -> impl Iterator<Item = SpecContainer<'a>> + 'a {
    let sandbox = ctx.observed.sandbox.as_ref().map(|s| s.id.as_str());
    pod::all_containers(ctx.pod).filter(move |sc| {
        let running = ctx.observed.newest(sc.name()).filter(|c| c.state == RunState::Running);
        resizable(sc.kind)
            && running.is_some_and(|c| Some(c.sandbox_id.as_str()) == sandbox)
            && need(ctx.pod, sc, &ctx.observed.resize.actuated) != Need::Nothing
    })
}

/// Whether the running pod's cgroup lacks the allocated pod-level resources (a pod-level
/// resize not yet applied); an actuation not known is taken as the allocation's.
pub fn pod_level_unactuated(ctx: &PodContext) -> bool {
    let sandbox_ready = ctx.observed.sandbox.as_ref().is_some_and(|s| s.ready);
    let allocated = pod_level_of(ctx.pod);
    sandbox_ready && ctx.observed.resize.actuated.get(POD_LEVEL).is_some_and(|a| !same(a, &allocated))
}

fn condition(kind: &str, reason: Option<&str>, message: Option<&str>) -> PodCondition {
    PodCondition {
        type_: kind.to_string(),
        status: "True".to_string(),
        reason: reason.map(str::to_string),
        message: message.map(str::to_string),
        ..Default::default()
    }
}

/// The kubelet's resize conditions of a pod that has not ended (`GetPodResizeConditions`):
/// `PodResizePending` while the spec's resources wait, `PodResizeInProgress` while a running
/// container lacks what is allocated to it or the last attempt failed (reason `Error`).
pub fn conditions(ctx: &PodContext) -> Vec<PodCondition> {
    let r = &ctx.observed.resize;
    let mut out = vec![];
    if let Some(p) = &r.pending {
        out.push(condition("PodResizePending", Some(&p.reason), Some(&p.message)));
    }
    if let Some(e) = &r.error {
        out.push(condition("PodResizeInProgress", Some(ERROR), Some(&e.message)));
    } else if unactuated(ctx).next().is_some() || pod_level_unactuated(ctx) {
        out.push(condition("PodResizeInProgress", None, None));
    }
    out
}

/// A resizable container's `allocatedResources` (its allocated requests) and `resources` (what
/// its running instance was given, else what is allocated), for a container that declares any
/// (`convertContainerStatusResources`).
pub fn report_resources(ctx: &PodContext, sc: &SpecContainer, st: &mut ContainerStatus) {
    let Some(allocated) = sc.container.resources.as_ref().filter(|_| resizable(sc.kind)) else { return };
    if allocated.requests.as_ref().is_none_or(BTreeMap::is_empty)
        && allocated.limits.as_ref().is_none_or(BTreeMap::is_empty)
    {
        return;
    }
    st.allocated_resources = allocated.requests.clone().filter(|r| !r.is_empty());
    let running = st.state.as_ref().is_some_and(|s| s.running.is_some());
    let actuated = ctx.observed.resize.actuated.get(sc.name()).filter(|_| running);
    let shown = actuated.unwrap_or(allocated);
    st.resources = Some(ResourceRequirements {
        requests: shown.requests.clone().filter(|r| !r.is_empty()),
        limits: shown.limits.clone().filter(|r| !r.is_empty()),
        claims: None,
    });
}
