//! [`PodWorkers`]: one pod worker per pod UID, the only place workers are started.

use crate::admission;
use crate::metrics::Metrics;
use crate::pod_update::{Deletion, Desired, PodUpdate};
use crate::sinks::StatusSink;
use crate::sources::{PodChange, PodSource};
use crate::worker::{PodWorker, WorkerDeps};
use k8s_openapi::api::core::v1::Pod;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tracing::Instrument;

/// Why an update was not taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UpdateError {
    #[error("pod {name:?} has no metadata.uid")]
    MissingUid { name: String },
    /// A pod's UID is never run twice: a pod that finished stays finished (a new pod with the
    /// same name comes with a new UID).
    #[error("pod {uid} has finished and cannot be started again")]
    Finished { uid: String },
}

/// One pod's worker, as its owner holds it.
struct Handle {
    desired: watch::Sender<Desired>,
    latest: watch::Receiver<PodUpdate>,
    /// When it was first given, among all pods: the order of [`PodWorkers::latest`].
    seq: u64,
    /// The worker's task, for [`PodWorkers::abort`].
    task: AbortHandle,
}

impl Handle {
    /// A later deletion may shorten the grace period of an earlier one, never lengthen it.
    fn delete(&self, grace: Option<i64>) {
        let asked = Deletion { grace };
        self.desired.send_modify(|d| d.deletion = Some(d.deletion.map_or(asked, |earlier| earlier.and(asked))));
    }
}

/// Runs every pod of a node: one worker task per pod UID, each planning and acting for its pod
/// alone, publishing statuses to the node's [`StatusSink`]. Every mode drives it the same way;
/// only where pods come from ([`PodSource`]) and where statuses go differ.
///
/// # Expected flow
/// 1. [`update`](Self::update) (or a source through [`follow`](Self::follow)) with a new pod
///    starts its worker; with a new version of a pod (same UID) hands the worker the new spec,
///    which it plans with from its next pass: a changed app container image restarts that
///    container, a changed init container image restarts the pod (new sandbox, every init
///    container again), a new `activeDeadlineSeconds` applies at once.
/// 2. [`delete`](Self::delete) starts graceful termination, with the grace period of that call.
/// 3. A worker ends when its pod is finished: terminal phase and nothing of it running, whether
///    the pod ran to completion or was deleted. [`wait_finished`](Self::wait_finished) waits for
///    every worker.
/// 4. [`remove`](Self::remove) then takes the finished pod's containers, sandbox and files away
///    and forgets it.
///
/// # Guarantees
/// - At most one worker per UID, so a pod's actions never race each other.
/// - Updates and deletions are level-triggered: a worker always acts on the newest version it
///   was given; several updates between two passes fold into the last.
/// - A later deletion can shorten the grace period of an earlier one, never lengthen it.
/// - Dropping the `PodWorkers` stops no pod: workers go on with what they were last given
///   ([`abort`](Self::abort) stops the workers, as a crash of the agent would).
///
/// # Caveats
/// - Validation is the caller's: an update is applied as given. The daemon refuses updates that
///   change more than images and the deadline, as the API server does.
/// - A finished UID is never started again ([`UpdateError::Finished`]).
pub struct PodWorkers {
    deps: WorkerDeps,
    status: Arc<dyn StatusSink>,
    pods: Mutex<Pods>,
    /// How many workers are running.
    running: watch::Sender<usize>,
}

#[derive(Default)]
struct Pods {
    by_uid: HashMap<String, Handle>,
    /// The `seq` of the next pod given.
    next_seq: u64,
}

impl Pods {
    /// Takes a finished pod out: its last update, with its place in the order pods were given.
    fn take_finished(&mut self, uid: &str) -> Option<(u64, PodUpdate)> {
        if !self.by_uid.get(uid)?.latest.borrow().finished {
            return None;
        }
        self.by_uid.remove(uid).map(|h| (h.seq, h.latest.borrow().clone()))
    }
}

impl PodWorkers {
    pub(crate) fn new(deps: WorkerDeps, status: Arc<dyn StatusSink>) -> Self {
        PodWorkers { deps, status, pods: Mutex::default(), running: watch::Sender::new(0) }
    }

    fn pods(&self) -> std::sync::MutexGuard<'_, Pods> {
        self.pods.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a worker for a new pod, or gives the pod's worker its new version.
    pub fn update(&self, pod: Pod) -> Result<(), UpdateError> {
        let Some(uid) = pod.metadata.uid.clone() else {
            return Err(UpdateError::MissingUid { name: pod.metadata.name.unwrap_or_default() });
        };
        let mut pods = self.pods();
        if let Some(h) = pods.by_uid.get(&uid) {
            if h.latest.borrow().finished {
                return Err(UpdateError::Finished { uid });
            }
            h.desired.send_modify(|d| d.pod = Arc::new(pod));
            return Ok(());
        }
        let pod = Arc::new(pod);
        // Every log line of the worker names its pod. At warn, the least podwright logs at, so
        // that warnings carry it too.
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let span = tracing::warn_span!("pod", pod = %format_args!("{namespace}/{name}"), uid = %uid);
        let (desired_tx, desired_rx) = watch::channel(Desired { pod: pod.clone(), deletion: None });
        let (published, latest) = watch::channel(PodUpdate::new(pod));
        let others = pods.by_uid.values().map(|h| h.latest.borrow().clone()).filter(|u| !u.finished);
        let storage_in_use = others.map(|u| admission::storage_request(&u.spec)).sum();
        let worker = PodWorker::new(self.deps.clone(), self.status.clone(), desired_rx, published, storage_in_use);
        self.running.send_modify(|n| *n += 1);
        let running = self.running.clone();
        let task = tokio::spawn(
            async move {
                worker.run().await;
                running.send_modify(|n| *n -= 1);
            }
            .instrument(span),
        );
        let seq = pods.next_seq;
        pods.next_seq += 1;
        pods.by_uid.insert(uid, Handle { desired: desired_tx, latest, seq, task: task.abort_handle() });
        Ok(())
    }

    /// Stops every worker where it stands, as a SIGKILL of the agent would: mid-pass, without
    /// publishing or stopping anything (their probes stop with them). The pods' containers stay
    /// in the runtime and their checkpoints under the root, for the next node to take over. For
    /// simulations of agent crashes; a mode that stops keeps its workers running instead.
    pub fn abort(&self) {
        self.pods().by_uid.values().for_each(|h| h.task.abort());
    }

    /// Stops the pod gracefully: `grace` seconds instead of its `terminationGracePeriodSeconds`
    /// when given (0: at once). Returns whether the pod is known.
    pub fn delete(&self, uid: &str, grace: Option<i64>) -> bool {
        self.pods().by_uid.get(uid).map(|h| h.delete(grace)).is_some()
    }

    /// Deletes every pod, with the same grace.
    pub fn delete_all(&self, grace: Option<i64>) {
        self.pods().by_uid.values().for_each(|h| h.delete(grace));
    }

    /// Applies a source's changes until it has no more.
    pub async fn follow(&self, mut source: impl PodSource) {
        while let Some(change) = source.next().await {
            match change {
                PodChange::Upsert(pod) => {
                    if let Err(e) = self.update(pod) {
                        tracing::warn!(%e, "pod update not applied");
                    }
                }
                PodChange::Delete { uid, grace } => {
                    if !self.delete(&uid, grace) {
                        tracing::debug!(uid, "deletion of an unknown pod");
                    }
                }
            }
        }
    }

    /// The newest update of every pod, in the order the pods were first given.
    pub fn latest(&self) -> Vec<PodUpdate> {
        let mut v: Vec<(u64, PodUpdate)> =
            self.pods().by_uid.values().map(|h| (h.seq, h.latest.borrow().clone())).collect();
        v.sort_by_key(|(seq, _)| *seq);
        v.into_iter().map(|(_, u)| u).collect()
    }

    /// A ConfigMap or Secret was created, changed or deleted: every pod that refers to any
    /// writes its volumes' files again and retries what was missing one.
    pub fn objects_changed(&self) {
        self.deps.object_changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The node's metrics: its pod workers', their containers' and its runtime calls'.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.deps.ctx.metrics.clone()
    }

    /// Resolves once every worker has finished.
    pub async fn wait_finished(&self) {
        let mut running = self.running.subscribe();
        // The sender lives in `self`: the channel cannot close while this borrows it.
        let _ = running.wait_for(|n| *n == 0).await;
    }

    /// Removes a finished pod's containers, sandboxes and files, and forgets it. A pod that has
    /// not finished is left alone (returns false).
    pub async fn remove(&self, uid: &str) -> bool {
        let taken = self.pods().take_finished(uid);
        match taken {
            Some((_, last)) => {
                self.deps.executor.remove_pod(&last.spec).await;
                true
            }
            None => false,
        }
    }

    /// Removes every finished pod, each in a task of its own, and returns their last updates
    /// (statuses as they were before the removal), in the order the pods were first given.
    pub async fn remove_finished(&self) -> Vec<PodUpdate> {
        let mut finished: Vec<(u64, PodUpdate)> = {
            let mut pods = self.pods();
            let uids: Vec<String> = pods.by_uid.keys().cloned().collect();
            // Moved out, not copied: the caller keeps them while the pods go.
            uids.iter().filter_map(|uid| pods.take_finished(uid)).collect()
        };
        finished.sort_by_key(|(seq, _)| *seq);
        let removals: Vec<_> = finished
            .iter()
            .map(|(_, u)| {
                let (executor, pod) = (self.deps.executor.clone(), u.spec.clone());
                tokio::spawn(async move { executor.remove_pod(&pod).await })
            })
            .collect();
        for r in removals {
            if let Err(e) = r.await {
                tracing::warn!(%e, "removing a pod failed");
            }
        }
        finished.into_iter().map(|(_, u)| u).collect()
    }
}
