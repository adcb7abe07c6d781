//! The order in which a pod's running containers stop (the kubelet's `newTerminationOrdering`):
//! every kill starts at once, but a sidecar, after its `preStop` hook, waits until the app
//! containers and the sidecars after it in the spec have stopped, so that the services it
//! provides outlive their users. Nothing waits for a regular init container.

use crate::observed::{ContainerKind, ObservedContainer};
use crate::pod;
use k8s_openapi::api::core::v1::Pod;

/// For each of `running` (by position), the positions in `running` it waits for.
pub fn termination_waits(pod: &Pod, running: &[&ObservedContainer]) -> Vec<Vec<usize>> {
    let position = |c: &ObservedContainer| pod::init_containers(pod).position(|s| s.name() == c.name);
    running
        .iter()
        .map(|c| {
            if c.kind != ContainerKind::Sidecar {
                return vec![];
            }
            let mine = position(c);
            running
                .iter()
                .enumerate()
                .filter(|(_, o)| match o.kind {
                    ContainerKind::App => true,
                    ContainerKind::Sidecar => position(o) > mine,
                    ContainerKind::Init => false,
                })
                .map(|(i, _)| i)
                .collect()
        })
        .collect()
}
