//! Reads a pod's sandboxes and containers from the runtime into the planner's `Observed`.

use crate::cri::labels;
use crate::termination_message;

/// Termination messages already read, by container ID.
pub type MessageCache = std::collections::HashMap<String, Option<String>>;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::LinuxContainerUser;
use podwright_planner::{ContainerKind, ObservedContainer, ObservedSandbox, RunState};
use podwright_runtime::cri_api::{ContainerState, ContainerStatus, PodSandboxState, PodSandboxStatus};
use podwright_runtime::{RuntimeResult, RuntimeService};
use std::path::Path;

fn ts(nanos: i64) -> Option<Timestamp> {
    (nanos > 0).then(|| Timestamp::from_nanosecond(nanos as i128).ok()).flatten()
}

pub fn sandbox(s: &PodSandboxStatus) -> ObservedSandbox {
    let ip = s.network.as_ref().map(|n| n.ip.clone()).filter(|ip| !ip.is_empty());
    ObservedSandbox {
        id: s.id.clone(),
        attempt: s.metadata.as_ref().map_or(0, |m| m.attempt),
        ready: s.state == PodSandboxState::SandboxReady as i32,
        ip,
        created_at: ts(s.created_at).unwrap_or(Timestamp::UNIX_EPOCH),
    }
}

/// A CRI container status as the planner sees it; `None` for containers podwright did not
/// label (not ours to manage). An exited container's message is its termination message when
/// it left one (the kubelet 1.29-1.31 replaces the runtime's message with it).
pub fn container(s: &ContainerStatus, root: &Path, messages: &mut MessageCache) -> Option<ObservedContainer> {
    let kind = ContainerKind::from_label(s.labels.get(labels::CONTAINER_KIND)?)?;
    let name = s.labels.get(labels::CONTAINER_NAME).cloned().or_else(|| s.metadata.as_ref().map(|m| m.name.clone()))?;
    let restart_count = s
        .annotations
        .get(labels::RESTART_COUNT)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| s.metadata.as_ref().map_or(0, |m| m.attempt as i32));
    let state = match ContainerState::try_from(s.state) {
        Ok(ContainerState::ContainerCreated) => RunState::Created,
        Ok(ContainerState::ContainerRunning) => RunState::Running,
        Ok(ContainerState::ContainerExited) => RunState::Exited,
        _ => RunState::Unknown,
    };
    let mut message = s.message.clone();
    if state == RunState::Exited {
        let uid = s.labels.get(labels::POD_UID).map(String::as_str).unwrap_or_default();
        let policy = s.annotations.get(labels::TERMINATION_MESSAGE_POLICY).map(String::as_str).unwrap_or("File");
        // An exited instance's file no longer changes: read it once.
        let read = messages
            .entry(s.id.clone())
            .or_insert_with(|| termination_message::read(root, uid, &name, restart_count, policy, s.exit_code));
        if let Some(m) = read {
            message = m.clone();
        }
    }
    Some(ObservedContainer {
        id: s.id.clone(),
        name,
        kind,
        restart_count,
        state,
        exit_code: s.exit_code,
        reason: s.reason.clone(),
        message,
        created_at: ts(s.created_at).unwrap_or(Timestamp::UNIX_EPOCH),
        started_at: ts(s.started_at),
        finished_at: ts(s.finished_at),
        image: s.image.as_ref().map(|i| i.image.clone()).unwrap_or_default(),
        image_ref: s.image_ref.clone(),
        hash: s.annotations.get(labels::CONTAINER_HASH).cloned().unwrap_or_default(),
        sandbox_id: s.labels.get(labels::SANDBOX_ID).cloned().unwrap_or_default(),
        user: s.user.as_ref().and_then(|u| u.linux.as_ref()).map(|l| LinuxContainerUser {
            uid: l.uid,
            gid: l.gid,
            supplemental_groups: (!l.supplemental_groups.is_empty()).then(|| l.supplemental_groups.clone()),
        }),
        recursive_read_only: s
            .mounts
            .iter()
            .filter(|m| m.recursive_read_only)
            .map(|m| m.container_path.clone())
            .collect(),
    })
}

/// The pod's sandboxes (newest last) and container instances, straight from the runtime.
pub async fn observe(
    rt: &dyn RuntimeService,
    uid: &str,
    root: &Path,
    messages: &mut MessageCache,
) -> RuntimeResult<(Vec<ObservedSandbox>, Vec<ObservedContainer>)> {
    let sel = labels::pod_selector(uid);
    let (sandboxes, containers) = tokio::join!(rt.list_pod_sandboxes(&sel), rt.list_containers(&sel));
    let mut sandboxes: Vec<ObservedSandbox> = sandboxes?.iter().map(sandbox).collect();
    sandboxes.sort_by_key(|s| (s.attempt, s.created_at));
    let containers = containers?.iter().filter_map(|c| container(c, root, messages)).collect::<Vec<_>>();
    // Forget removed instances.
    messages.retain(|id, _| containers.iter().any(|c| &c.id == id));
    Ok((sandboxes, containers))
}
