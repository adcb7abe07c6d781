//! The local API as the node layer's pod source: a [`PodSource`] of the pods created, changed
//! and deleted through the API, and what the API learns back of their end (the sinks that
//! write the workers' reports into the store are in `sinks`).

use crate::store::lock;
use k8s_openapi::api::core::v1::Pod;
use podwright_node::{PodChange, PodSource};
use std::collections::HashSet;
use std::sync::Mutex;
use tokio::sync::mpsc;

/// The pods the API hands the node, and what it learns back about their end.
pub struct NodeLink {
    changes: mpsc::UnboundedSender<PodChange>,
    removals: mpsc::UnboundedSender<String>,
    /// UIDs whose workers have finished.
    finished: Mutex<HashSet<String>>,
    /// UIDs deleted through the API: once finished, removed from the node and the store.
    deleting: Mutex<HashSet<String>>,
}

/// The receiving ends `serve` drives: pod changes for `PodWorkers::follow`, and the UIDs of
/// finished, deleted pods for `PodWorkers::remove`.
pub struct NodeFeed {
    pub source: ApiSource,
    pub removals: mpsc::UnboundedReceiver<String>,
}

/// The pods of the local API as a [`PodSource`].
pub struct ApiSource(mpsc::UnboundedReceiver<PodChange>);

impl PodSource for ApiSource {
    async fn next(&mut self) -> Option<PodChange> {
        self.0.recv().await
    }
}

impl NodeLink {
    pub fn new() -> (NodeLink, NodeFeed) {
        let (changes, rx) = mpsc::unbounded_channel();
        let (removals, removals_rx) = mpsc::unbounded_channel();
        let link = NodeLink { changes, removals, finished: Mutex::default(), deleting: Mutex::default() };
        (link, NodeFeed { source: ApiSource(rx), removals: removals_rx })
    }

    /// A pod created or changed through the API.
    pub fn upsert(&self, pod: Pod) {
        // The receiver lives as long as `serve`.
        let _ = self.changes.send(PodChange::Upsert(pod));
    }

    /// Whether the pod's worker has finished (terminal phase, nothing running).
    pub fn is_finished(&self, uid: &str) -> bool {
        lock(&self.finished).contains(uid)
    }

    /// A pod deleted through the API: stop it with `grace` seconds, and remove it once
    /// stopped. Returns whether it has already finished.
    pub fn delete(&self, uid: &str, grace: i64) -> bool {
        if self.is_finished(uid) {
            let _ = self.removals.send(uid.to_string());
            return true;
        }
        lock(&self.deleting).insert(uid.to_string());
        let _ = self.changes.send(PodChange::Delete { uid: uid.to_string(), grace: Some(grace) });
        false
    }

    /// Called for every status a worker publishes; returns whether the pod is deleted and now
    /// gone from the node, so that its object is to be removed.
    pub(crate) fn on_status(&self, uid: &str, finished: bool) -> bool {
        if !finished {
            return false;
        }
        lock(&self.finished).insert(uid.to_string());
        if lock(&self.deleting).remove(uid) {
            let _ = self.removals.send(uid.to_string());
            return true;
        }
        false
    }

    /// The node has removed a pod: forget it.
    pub fn forget(&self, uid: &str) {
        lock(&self.finished).remove(uid);
        lock(&self.deleting).remove(uid);
    }
}
