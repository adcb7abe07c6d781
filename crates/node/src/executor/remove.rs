//! Taking pods out of the runtime: every container and sandbox of a pod, its files and its
//! cgroup. The executor removes a finished pod this way; a node starting removes the pods it
//! made that its source no longer has ([`crate::Node::remove_orphans`]), and `podwright runtime
//! clean` every pod podwright left in its runtime.

use super::Executor;
use crate::cri::labels;
use crate::pleg::relist;
use crate::pod_cgroup::PodCgroups;
use crate::volumes;
use k8s_openapi::api::core::v1::Pod;
use podwright_runtime::{Runtime, RuntimeResult};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

impl Executor {
    /// Removes every container and sandbox of a finished pod, its files and its cgroup.
    pub(crate) async fn remove_pod(&self, pod: &Pod) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let ctx = &self.ctx;
        for id in remove_pod(ctx.runtime.as_ref(), &ctx.root, self.configs.cgroups.as_deref(), uid).await {
            self.forget(&id);
        }
    }
}

/// Stops and removes the containers and sandboxes of pod `uid` and removes its directory under
/// `root` and its cgroup; returns the IDs of the containers removed. Best effort: a failure to
/// remove one object does not keep the others.
pub async fn remove_pod(runtime: &dyn Runtime, root: &Path, cgroups: Option<&PodCgroups>, uid: &str) -> Vec<String> {
    let sel = labels::pod_selector(uid);
    let mut removed = Vec::new();
    if let Ok(cs) = runtime.list_container_states(&sel).await {
        for c in cs {
            let _ = runtime.stop_container(&c.id, Duration::ZERO).await;
            let _ = runtime.remove_container(&c.id).await;
            removed.push(c.id);
        }
    }
    if let Ok(ss) = runtime.list_pod_sandbox_states(&sel).await {
        for s in ss {
            let _ = runtime.stop_pod_sandbox(&s.id).await;
            let _ = runtime.remove_pod_sandbox(&s.id).await;
        }
    }
    if let Err(e) = volumes::cleanup(root, uid) {
        tracing::warn!(%e, uid, "could not remove the pod's directory");
    }
    if let Some(cgroups) = cgroups {
        cgroups.remove(uid);
    }
    removed
}

/// Stops and removes every pod podwright made (the podwright with root directory `owner`, when
/// given) that `keep` does not name, with its files under `root`; returns their UIDs. The files
/// of pods the runtime no longer has (a podwright that died between removing a pod's sandbox and
/// its directory) go too, their mounts first, and so do the cgroups of pods `keep` does not name.
pub async fn remove_managed(
    runtime: &dyn Runtime,
    root: &Path,
    cgroups: Option<&PodCgroups>,
    owner: Option<&Path>,
    keep: &BTreeSet<String>,
) -> RuntimeResult<Vec<String>> {
    let gone: Vec<String> = managed_pods(runtime, owner).await?.difference(keep).cloned().collect();
    for uid in &gone {
        tracing::info!(uid, "removing a pod");
        remove_pod(runtime, root, cgroups, uid).await;
    }
    match volumes::pods_with_files(root) {
        Ok(uids) => {
            for uid in uids.iter().filter(|u| !keep.contains(*u)) {
                if let Err(e) = volumes::cleanup(root, uid) {
                    tracing::warn!(%e, uid, "could not remove the directory of a pod that is gone");
                }
            }
        }
        Err(e) => tracing::warn!(%e, "could not list the pods' directories"),
    }
    if let Some(cgroups) = cgroups {
        cgroups.remove_all_but(keep);
    }
    Ok(gone)
}

/// The UIDs of every pod podwright has a sandbox or container of in the runtime; only those
/// made by a podwright with root directory `root` when it is given.
pub async fn managed_pods(runtime: &dyn Runtime, root: Option<&Path>) -> RuntimeResult<BTreeSet<String>> {
    let mut sel = labels::managed_selector();
    if let Some(root) = root {
        sel.insert(labels::ROOT_DIR.to_string(), root.display().to_string());
    }
    Ok(relist::snapshot(runtime, &sel).await?.into_keys().collect())
}
