//! The pod spec as the planner reads it: every container with its kind and index, the restart
//! policy, the keys that tie back-off and hashes to a container definition.

use crate::observed::ContainerKind;
use crate::words::RestartPolicy;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use podwright_api::container_kind::{ContainerKind as ApiKind, PodContainer, pod_containers};

/// A container of the spec with where it came from.
#[derive(Debug, Clone, Copy)]
pub struct SpecContainer<'a> {
    pub kind: ContainerKind,
    /// Index in `spec.initContainers` or `spec.containers`.
    pub index: usize,
    pub container: &'a Container,
}

impl SpecContainer<'_> {
    pub fn name(&self) -> &str {
        &self.container.name
    }

    /// The event `fieldPath`, e.g. `spec.initContainers{init-mydb}`.
    pub fn field_path(&self) -> String {
        let list = if self.kind.is_init_list() { ApiKind::Init } else { ApiKind::Regular };
        podwright_api::container_kind::field_path(list, &self.container.name)
    }

    /// FNV-1a of name and image: a changed image means a new container definition (the
    /// kubelet hashes the same two fields since 1.31).
    fn hash_value(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let image = self.container.image.as_deref().unwrap_or("");
        for b in self.container.name.bytes().chain([0u8]).chain(image.bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    }

    /// The hash as the container label carries it: 16 hex digits.
    pub fn hash(&self) -> String {
        format!("{:016x}", self.hash_value())
    }

    /// Whether a container label holds this definition's hash (every pass asks, for every
    /// container: no string is made for it).
    pub fn has_hash(&self, label: &str) -> bool {
        u64::from_str_radix(label, 16).is_ok_and(|h| h == self.hash_value())
    }

    /// The restart back-off key (the kubelet keys by pod, container name and hash; the pod part
    /// is implied because each pod has its own back-off state).
    pub fn backoff_key(&self) -> String {
        format!("{}_{}", self.container.name, self.hash())
    }

    /// The policy its exits are judged by when no rule matches: its own, else the pod's.
    pub fn restart_policy(&self, pod: &Pod) -> RestartPolicy {
        RestartPolicy::of_container(self.container).unwrap_or_else(|| RestartPolicy::of(pod))
    }

    pub fn image(&self) -> &str {
        self.container.image.as_deref().unwrap_or("")
    }
}

pub fn spec(pod: &Pod) -> &PodSpec {
    static EMPTY: std::sync::OnceLock<PodSpec> = std::sync::OnceLock::new();
    pod.spec.as_ref().unwrap_or_else(|| EMPTY.get_or_init(PodSpec::default))
}

impl<'a> From<PodContainer<'a>> for SpecContainer<'a> {
    fn from(c: PodContainer<'a>) -> Self {
        let kind = if c.is_sidecar() {
            ContainerKind::Sidecar
        } else if c.kind == ApiKind::Init {
            ContainerKind::Init
        } else {
            ContainerKind::App
        };
        SpecContainer { kind, index: c.index, container: c.container }
    }
}

/// Init containers in spec order, then app containers: `podwright_api`'s walker, with sidecars
/// told apart.
pub fn all_containers(pod: &Pod) -> impl Iterator<Item = SpecContainer<'_>> {
    pod_containers(pod).map(SpecContainer::from)
}

pub fn init_containers(pod: &Pod) -> impl Iterator<Item = SpecContainer<'_>> {
    all_containers(pod).filter(|c| c.kind.is_init_list())
}

pub fn app_containers(pod: &Pod) -> impl Iterator<Item = SpecContainer<'_>> {
    all_containers(pod).filter(|c| c.kind == ContainerKind::App)
}

pub fn find<'a>(pod: &'a Pod, kind: ContainerKind, index: usize) -> Option<SpecContainer<'a>> {
    all_containers(pod).find(|c| c.index == index && c.kind.is_init_list() == kind.is_init_list())
}

pub fn has_init_containers(pod: &Pod) -> bool {
    spec(pod).init_containers.as_ref().is_some_and(|v| !v.is_empty())
}

/// Whether the pod runs in the node's network namespace (the kubelet's `IsHostNetworkPod`).
pub fn host_network(pod: &Pod) -> bool {
    spec(pod).host_network == Some(true)
}

pub fn grace_period_secs(pod: &Pod) -> i64 {
    spec(pod).termination_grace_period_seconds.unwrap_or(30).max(0)
}

/// `<name>_<namespace>(<uid>)`, the kubelet's `format.Pod`.
pub fn display_name(pod: &Pod) -> String {
    let m = &pod.metadata;
    format!(
        "{}_{}({})",
        m.name.as_deref().unwrap_or(""),
        m.namespace.as_deref().unwrap_or("default"),
        m.uid.as_deref().unwrap_or("")
    )
}
