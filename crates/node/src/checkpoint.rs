//! What the runtime cannot tell us about a pod, written down before it is acted on: the pod as
//! given, when it started, its back-off state, the restart counts of instances about to be
//! removed and how the instances a reset removed ended, the sandbox in which it completed its
//! initialization, its eviction, and the resources allocated to its containers and given to the
//! running ones (the kubelet's `allocated_pods_state` and `actuated_pods_state`).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use podwright_planner::resize::Allocation;
use podwright_planner::{Backoff, Eviction};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    pub pod: Pod,
    pub start_time: Option<Timestamp>,
    pub backoff: Backoff,
    /// The highest restart count of each container's instances (see
    /// `Observed::restart_counts`); absent from checkpoints written before it was kept.
    #[serde(default)]
    pub restart_counts: BTreeMap<String, i32>,
    /// The sandbox in which initialization completed (see `Observed::initialized_in`).
    #[serde(default)]
    pub initialized_in: Option<String>,
    /// The pod was evicted (see `Observed::eviction`).
    #[serde(default)]
    pub eviction: Option<Eviction>,
    /// What the node admitted of each resizable container's resources; absent from
    /// checkpoints written before resizes, whose pods run with their spec's.
    #[serde(default)]
    pub allocated: Option<Allocation>,
    /// What each running container was given (see `ResizeState::actuated`).
    #[serde(default)]
    pub actuated: Allocation,
    /// How the instances a reset removed ended (see `Observed::reset_terminations`).
    #[serde(default)]
    pub reset_terminations: BTreeMap<String, ContainerStateTerminated>,
}

/// The same fields, borrowed: a checkpoint is written without copying the pod.
#[derive(Serialize)]
pub struct CheckpointRef<'a> {
    pub pod: &'a Pod,
    pub start_time: Option<Timestamp>,
    pub backoff: &'a Backoff,
    pub restart_counts: &'a BTreeMap<String, i32>,
    pub initialized_in: Option<&'a str>,
    pub eviction: Option<&'a Eviction>,
    pub allocated: &'a Allocation,
    pub actuated: &'a Allocation,
    pub reset_terminations: &'a BTreeMap<String, ContainerStateTerminated>,
}

/// Written whole, so a crash never leaves half a checkpoint. Not synced: it is written at every
/// step of a pod, and what it guards against is the agent's own crash.
pub fn save(root: &Path, cp: &CheckpointRef) -> io::Result<()> {
    let uid = cp.pod.metadata.uid.as_deref().unwrap_or_default();
    let bytes = serde_json::to_vec(cp).map_err(io::Error::other)?;
    crate::whole_file::replace(&crate::layout::checkpoint(root, uid), &bytes, crate::whole_file::Durability::Process)
}

pub fn load(root: &Path, uid: &str) -> io::Result<Option<Checkpoint>> {
    match std::fs::read(crate::layout::checkpoint(root, uid)) {
        Ok(b) => serde_json::from_slice(&b).map(Some).map_err(io::Error::other),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let root = std::env::temp_dir().join(format!("pw-cp-{}", std::process::id()));
        let mut pod = Pod::default();
        pod.metadata.uid = Some("u1".into());
        let mut backoff = Backoff::default();
        backoff.next("c", Timestamp::UNIX_EPOCH, Timestamp::UNIX_EPOCH);
        let restart_counts = BTreeMap::from([("i1".to_string(), 3)]);
        let cp = CheckpointRef {
            pod: &pod,
            start_time: Some(Timestamp::UNIX_EPOCH),
            backoff: &backoff,
            restart_counts: &restart_counts,
            initialized_in: Some("sb1"),
            eviction: Some(&Eviction { reason: "Evicted".into(), message: "m".into() }),
            allocated: &podwright_planner::resize::allocation_of(&pod),
            actuated: &Allocation::new(),
            reset_terminations: &BTreeMap::from([(
                "app".to_string(),
                ContainerStateTerminated { exit_code: 137, ..Default::default() },
            )]),
        };
        save(&root, &cp).unwrap();
        let back = load(&root, "u1").unwrap().unwrap();
        assert_eq!(back.backoff, backoff);
        assert_eq!(back.start_time, Some(Timestamp::UNIX_EPOCH));
        assert_eq!(back.restart_counts, restart_counts);
        assert_eq!(back.initialized_in.as_deref(), Some("sb1"));
        assert_eq!(back.eviction.map(|e| e.message), Some("m".to_string()));
        assert_eq!(back.allocated, Some(Allocation::new()));
        assert_eq!(back.reset_terminations["app"].exit_code, 137);
        std::fs::remove_dir_all(root).unwrap();
    }
}
