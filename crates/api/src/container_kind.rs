//! Which list a container belongs to (init, regular, ephemeral), sidecar
//! detection, and the field paths Kubernetes uses to refer to containers
//! (`spec.initContainers{name}` in events, `spec.initContainers[0]` in
//! validation errors).

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodSpec, PodStatus};

/// The `restartPolicy` value that makes an init container a sidecar.
pub const CONTAINER_RESTART_POLICY_ALWAYS: &str = "Always";

/// The pod spec list a container comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContainerKind {
    /// `spec.initContainers` (regular init containers and sidecars).
    Init,
    /// `spec.containers`.
    Regular,
    /// `spec.ephemeralContainers`.
    Ephemeral,
}

impl ContainerKind {
    /// The PodSpec field name: `initContainers`, `containers`, `ephemeralContainers`.
    pub fn spec_field(self) -> &'static str {
        match self {
            ContainerKind::Init => "initContainers",
            ContainerKind::Regular => "containers",
            ContainerKind::Ephemeral => "ephemeralContainers",
        }
    }
}

/// The object-reference field path of a container, as used in events'
/// `involvedObject.fieldPath`: `spec.initContainers{init-mydb}`,
/// `spec.containers{myapp}`.
pub fn field_path(kind: ContainerKind, name: &str) -> String {
    format!("spec.{}{{{}}}", kind.spec_field(), name)
}

/// The validation path of a container: `spec.initContainers[0]`.
pub fn index_path(kind: ContainerKind, index: usize) -> String {
    format!("spec.{}[{}]", kind.spec_field(), index)
}

/// True if the container's `restartPolicy` is `Always`. Only init containers
/// may set it, so for a container from `spec.initContainers` this means it is
/// a sidecar (a "restartable init container"); see [`PodContainer::is_sidecar`]
/// when the list is not known to be the init list.
pub fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some(CONTAINER_RESTART_POLICY_ALWAYS)
}

/// A container of a pod together with where it sits in the spec.
#[derive(Clone, Copy, Debug)]
pub struct PodContainer<'a> {
    pub kind: ContainerKind,
    /// Position in its list.
    pub index: usize,
    pub container: &'a Container,
}

impl PodContainer<'_> {
    pub fn name(&self) -> &str {
        &self.container.name
    }

    /// An init container with `restartPolicy: Always`.
    pub fn is_sidecar(&self) -> bool {
        self.kind == ContainerKind::Init && is_sidecar(self.container)
    }

    /// An init container that must run to completion (not a sidecar).
    pub fn is_regular_init(&self) -> bool {
        self.kind == ContainerKind::Init && !is_sidecar(self.container)
    }

    /// `spec.initContainers{name}` / `spec.containers{name}`.
    pub fn field_path(&self) -> String {
        field_path(self.kind, &self.container.name)
    }

    /// `spec.initContainers[i]` / `spec.containers[i]`.
    pub fn index_path(&self) -> String {
        index_path(self.kind, self.index)
    }
}

/// All init containers (in order) followed by all regular containers.
/// Ephemeral containers have a different type and are not included.
pub fn pod_containers(pod: &Pod) -> impl Iterator<Item = PodContainer<'_>> {
    spec_containers(pod.spec.as_ref())
}

/// [`pod_containers`] of a pod spec (none without one).
pub fn spec_containers(spec: Option<&PodSpec>) -> impl Iterator<Item = PodContainer<'_>> {
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(index, container)| PodContainer { kind: ContainerKind::Init, index, container });
    let regular = spec
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(index, container)| PodContainer { kind: ContainerKind::Regular, index, container });
    init.chain(regular)
}

/// The init or regular container named `name`.
pub fn find_container<'a>(pod: &'a Pod, name: &str) -> Option<PodContainer<'a>> {
    pod_containers(pod).find(|c| c.container.name == name)
}

/// Every init container's and app container's status of a pod status, init containers first.
pub fn container_statuses(status: &PodStatus) -> impl Iterator<Item = &ContainerStatus> {
    status.init_container_statuses.iter().flatten().chain(status.container_statuses.iter().flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(name: &str, restart: Option<&str>) -> Container {
        Container { name: name.into(), restart_policy: restart.map(str::to_string), ..Default::default() }
    }

    #[test]
    fn paths() {
        assert_eq!(field_path(ContainerKind::Init, "init-mydb"), "spec.initContainers{init-mydb}");
        assert_eq!(field_path(ContainerKind::Regular, "myapp"), "spec.containers{myapp}");
        assert_eq!(field_path(ContainerKind::Ephemeral, "debug"), "spec.ephemeralContainers{debug}");
        assert_eq!(index_path(ContainerKind::Init, 1), "spec.initContainers[1]");
    }

    #[test]
    fn sidecars_and_iteration() {
        let pod = Pod {
            spec: Some(PodSpec {
                init_containers: Some(vec![container("init", None), container("side", Some("Always"))]),
                containers: vec![container("app", None), container("odd", Some("Always"))],
                ..Default::default()
            }),
            ..Default::default()
        };
        let all: Vec<(ContainerKind, usize, &str, bool)> =
            pod_containers(&pod).map(|c| (c.kind, c.index, c.container.name.as_str(), c.is_sidecar())).collect();
        assert_eq!(
            all,
            vec![
                (ContainerKind::Init, 0, "init", false),
                (ContainerKind::Init, 1, "side", true),
                (ContainerKind::Regular, 0, "app", false),
                // restartPolicy on a regular container is invalid, never a sidecar
                (ContainerKind::Regular, 1, "odd", false),
            ]
        );
        assert!(is_sidecar(&container("x", Some("Always"))));
        assert!(!is_sidecar(&container("x", Some("Never"))));
        let side = find_container(&pod, "side").expect("found");
        assert_eq!(side.field_path(), "spec.initContainers{side}");
        assert_eq!(side.index_path(), "spec.initContainers[1]");
        assert!(find_container(&pod, "init").is_some_and(|c| c.is_regular_init()));
        assert!(find_container(&pod, "nope").is_none());
        assert_eq!(pod_containers(&Pod::default()).count(), 0);
    }
}
