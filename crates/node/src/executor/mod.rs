//! Applies a plan's actions through the runtime, records the kubelet's events for them, and
//! reports what happened as one [`SyncResult`] per pass (the kubelet's `PodSyncResult`), which
//! the pod worker folds into what it remembers. Failures become results, never lost pods.
//!
//! `start`: sandboxes, container starts (their images through the [`ImagePuller`]) and
//! `postStart` hooks; `kill`: stopping containers and pods, `preStop` hooks; `remove`: taking a
//! finished pod, or every pod the node no longer knows, out of the runtime.

mod kill;
pub(crate) mod remove;
mod resize;
mod start;

use start::Next;

use crate::context::NodeContext;
use crate::cri::pod_configs::PodConfigs;
use crate::events::Deferring;
use crate::images::ImagePuller;
use crate::logs::Output;
use crate::pleg::Dispatcher;
use crate::pod_update::Cancel;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use podwright_planner::pod;
use podwright_planner::{Action, Eviction, Observed, StartFailure};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedSender;

/// What one pass of actions did that the runtime will not show on the next observation.
#[derive(Debug, Default, PartialEq)]
pub struct SyncResult {
    pub sandbox_created: bool,
    /// Creating the sandbox failed at this time.
    pub sandbox_failed: Option<Timestamp>,
    /// The sandbox can never be made (its RuntimeClass or runtime handler is missing): the pod
    /// fails with this reason and message.
    pub pod_failed: Option<Eviction>,
    /// Containers (by name) whose new instance started: earlier start failures are over.
    pub started: Vec<String>,
    /// Containers (by name) whose start failed, and why.
    pub start_failures: Vec<(String, StartFailure)>,
    /// When the first container this pass started had started (its start, `postStart` hook
    /// included, returned).
    pub first_start: Option<Timestamp>,
    /// A kill (or a reset) failed, so the rest of the pass was not done, as the kubelet's sync
    /// ends there: nothing is started beside an instance that may still run, no new sandbox
    /// beside an old one, and a reset's source is not removed before the rest.
    pub kill_failed: bool,
    /// A removal failed; the rest of the pass was done, and the next pass's plan asks for it
    /// again.
    pub removal_failed: bool,
    /// An in-place resize was attempted: the containers (by name) it resized, or why not.
    pub resized: Option<Result<Vec<String>, String>>,
    /// Instances a reset (`RestartAllContainers`) removed, by container name, and how they
    /// ended.
    pub reset: Vec<(String, ContainerStateTerminated)>,
    /// Containers (by name) whose preparation failed.
    pub prepare_failed: Vec<String>,
}

/// The doing half of the kubelet's `SyncPod`, for every pod of the node; only
/// [`crate::builder::Node::build`] makes one.
pub(crate) struct Executor {
    pub ctx: NodeContext,
    pub configs: PodConfigs,
    pub images: ImagePuller,
    /// Where a container's events are routed to its pod's worker.
    pub dispatcher: Arc<Dispatcher>,
    /// Where to announce containers whose output should be followed, and hooks' output.
    pub log_sink: Option<UnboundedSender<Output>>,
    /// The node's event sink, which holds back a prepared container's events until it starts.
    pub deferred: Arc<Deferring>,
    /// Instances prepared ahead of their turn and not yet started, with their pod's UID and
    /// their field path: their events (their `Created` one included) wait for their start.
    /// `None` once the removal of one failed: still there, never to start, its events gone.
    pub prepared: Mutex<HashMap<String, Option<(String, String)>>>,
}

/// The pod a pass acts on, and what it acts with.
pub(crate) struct PodSync<'a> {
    pub pod: &'a Pod,
    pub observed: &'a Observed,
    /// A deletion ends the wait for a `postStart` hook, a credential lookup or a pull.
    pub cancel: &'a Cancel,
}

impl PodSync<'_> {
    fn pod_ip(&self) -> &str {
        self.observed.sandbox.as_ref().and_then(|s| s.ip.as_deref()).unwrap_or_default()
    }
}

impl Executor {
    /// A container removed: its events go nowhere, and it is no longer prepared.
    fn forget(&self, id: &str) {
        self.dispatcher.unregister(id);
        if let Some((uid, path)) = self.unprepare(id) {
            self.deferred.discard(&uid, path);
        }
    }

    /// Whether `id` is an instance this executor prepared ahead of its turn and has not started.
    fn is_prepared(&self, id: &str) -> bool {
        self.prepared.lock().unwrap_or_else(|e| e.into_inner()).contains_key(id)
    }

    /// Takes `id` out of the prepared instances: whose pod and field path its held-back events
    /// have, if it was one and they are still held.
    fn unprepare(&self, id: &str) -> Option<(String, String)> {
        self.prepared.lock().unwrap_or_else(|e| e.into_inner()).remove(id).flatten()
    }

    /// A removal the plan asked for failed: the instance is still there, and the next pass's
    /// plan removes it again, so it is not forgotten (one prepared ahead of its turn is still
    /// no container to stop). It will never start: its held-back events go now, so that they
    /// do not hold back those of a later instance of its container, which a later forgetting
    /// of this one does not touch.
    fn removal_failed(&self, id: &str) {
        let held = self.prepared.lock().unwrap_or_else(|e| e.into_inner()).get_mut(id).and_then(Option::take);
        if let Some((uid, path)) = held {
            self.deferred.discard(&uid, path);
        }
    }

    /// Runs the actions in order, each to its end: container starts one after another, as
    /// the kubelet's `SyncPod` does (the next is pulled, created and started only once the one
    /// before has started and its `postStart` hook has completed; a proxy's hook may hold its
    /// app back). A failed start does not stop the ones after it; a failed kill stops the pass.
    /// One overlap: a preparation right after a start is done while that one starts (after its
    /// pull), never started before it.
    pub(crate) async fn execute(
        &self,
        pod: &Pod,
        observed: &Observed,
        actions: Vec<Action>,
        cancel: &Cancel,
    ) -> SyncResult {
        let sync = PodSync { pod, observed, cancel };
        let mut result = SyncResult::default();
        let mut actions = actions.into_iter().peekable();
        while let Some(action) = actions.next() {
            match action {
                Action::KillPod { grace } => {
                    if !self.kill_pod(&sync, grace).await {
                        result.kill_failed = true;
                        break;
                    }
                }
                Action::CreateSandbox { attempt } => self.create_sandbox(&sync, attempt, &mut result).await,
                Action::KillContainer { id, message, grace, .. } => {
                    if !self.kill_observed(&sync, &id, message, grace).await {
                        result.kill_failed = true;
                        break;
                    }
                }
                Action::ResetContainer { id, name, live } => {
                    let Some(ended) = self.reset_container(&sync, &id, &name, live).await else {
                        result.kill_failed = true;
                        break;
                    };
                    result.reset.extend(ended.map(|t| (name, t)));
                }
                Action::RemoveContainer { id, .. } => match self.ctx.runtime.remove_container(&id).await {
                    Ok(()) | Err(podwright_runtime::RuntimeError::NotFound(_)) => self.forget(&id),
                    Err(e) => {
                        tracing::debug!(%e, "remove failed");
                        self.removal_failed(&id);
                        result.removal_failed = true;
                    }
                },
                Action::PrepareContainer { kind, index, restart_count, pull } => {
                    // After a start of this pass, which went with it unless it failed.
                    let (Some(sc), Some(sandbox)) = (pod::find(pod, kind, index), observed.sandbox.as_ref()) else {
                        continue;
                    };
                    if !result.start_failures.is_empty() {
                        continue;
                    }
                    if !Box::pin(self.prepare(&sync, Next { sc, restart_count, pull }, sandbox)).await {
                        result.prepare_failed.push(sc.name().to_string());
                    }
                }
                Action::ResizeContainers { containers } => {
                    let names = containers
                        .iter()
                        .filter_map(|t| pod::find(pod, t.kind, t.index))
                        .map(|sc| sc.name().to_string());
                    let names = names.collect();
                    result.resized = Some(self.resize(&sync, &containers).await.map(|()| names));
                }
                Action::StartContainer { kind, index, restart_count, pull, created } => {
                    // The planner starts containers only in a ready sandbox.
                    let (Some(sc), Some(sandbox)) = (pod::find(pod, kind, index), observed.sandbox.as_ref()) else {
                        continue;
                    };
                    let name = sc.name().to_string();
                    self.ctx.metrics.container_starting(kind);
                    // The next init container, prepared while this one starts.
                    let next =
                        actions.next_if(|a| matches!(a, Action::PrepareContainer { .. })).and_then(|a| match a {
                            Action::PrepareContainer { kind, index, restart_count, pull } => {
                                pod::find(pod, kind, index).map(|sc| Next { sc, restart_count, pull })
                            }
                            _ => None,
                        });
                    let next_name = next.as_ref().map(|n| n.sc.name().to_string());
                    let (started, prepare_failed) =
                        Box::pin(self.start(&sync, sc, (restart_count, pull, created), sandbox, next)).await;
                    result.prepare_failed.extend(next_name.filter(|_| prepare_failed));
                    match started {
                        Ok(()) => {
                            result.first_start.get_or_insert_with(|| self.ctx.clock.now());
                            result.started.push(name);
                        }
                        Err(f) => {
                            self.ctx.metrics.container_start_failed(kind, f.reason);
                            result.start_failures.push((name, f));
                        }
                    }
                }
            }
        }
        result
    }
}
