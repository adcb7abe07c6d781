//! Applies a plan's actions through the runtime, records the kubelet's events for them, and
//! reports what happened as one [`SyncResult`] per pass (the kubelet's `PodSyncResult`), which
//! the pod worker folds into what it remembers. Failures become results, never lost pods.
//!
//! `start`: sandboxes, image pulls, container starts and `postStart` hooks; `kill`: stopping
//! containers and pods, `preStop` hooks, and removing a finished pod.

mod kill;
mod start;

use crate::events::EventType;
use crate::node::Engine;
use crate::worker::Desired;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use podwright_planner::pod::{self, SpecContainer};
use podwright_planner::{Action, Eviction, Observed, StartFailure, StartFailureReason};
use std::sync::Arc;
use tokio::sync::{Notify, watch};

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
    /// A kill failed, so the rest of the pass was not done, as the kubelet's sync ends there:
    /// nothing is started beside an instance that may still run, and no new sandbox beside an
    /// old one.
    pub kill_failed: bool,
}

/// The pod a pass acts on, and what it acts with.
pub(crate) struct PodSync<'a> {
    pub pod: &'a Pod,
    pub observed: &'a Observed,
    pub bell: &'a Arc<Notify>,
    /// A deletion on it ends the wait for a `postStart` hook.
    pub desired: &'a watch::Receiver<Desired>,
}

impl PodSync<'_> {
    fn pod_ip(&self) -> &str {
        self.observed.sandbox.as_ref().and_then(|s| s.ip.as_deref()).unwrap_or_default()
    }
}

impl Engine {
    fn event(&self, pod: &Pod, sc: Option<&SpecContainer>, kind: EventType, reason: &str, message: String) {
        self.events.record(pod, sc.map(|s| s.field_path()), kind, reason, message, self.clock.now());
    }

    /// A start failure now, for the reason cache.
    fn failure(&self, reason: StartFailureReason, message: String) -> StartFailure {
        StartFailure { reason, message, at: self.clock.now() }
    }

    /// Runs the actions in order, each to its end: container starts one after another, as
    /// the kubelet's `SyncPod` does (the next is pulled, created and started only once the one
    /// before has started and its `postStart` hook has completed; a proxy's hook may hold its
    /// app back). A failed start does not stop the ones after it; a failed kill stops the pass.
    pub(crate) async fn execute(
        &self,
        pod: &Pod,
        observed: &Observed,
        actions: Vec<Action>,
        bell: &Arc<Notify>,
        desired: &watch::Receiver<Desired>,
    ) -> SyncResult {
        let sync = PodSync { pod, observed, bell, desired };
        let mut result = SyncResult::default();
        for action in actions {
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
                Action::RemoveContainer { id, .. } => {
                    if let Err(e) = self.runtime.remove_container(&id).await {
                        tracing::debug!(%e, "remove failed");
                    }
                    self.dispatcher.unregister(&id);
                }
                Action::StartContainer { kind, index, restart_count, pull, created } => {
                    // The planner starts containers only in a ready sandbox.
                    let (Some(sc), Some(sandbox)) = (pod::find(pod, kind, index), observed.sandbox.as_ref()) else {
                        continue;
                    };
                    let name = sc.name().to_string();
                    self.metrics.container_starting(kind);
                    let started = match created {
                        Some(id) => Box::pin(self.start_existing(&sync, sc, &id, restart_count, sandbox)).await,
                        None => Box::pin(self.start_container(&sync, sc, restart_count, pull, sandbox)).await,
                    };
                    match started {
                        Ok(()) => {
                            result.first_start.get_or_insert_with(|| self.clock.now());
                            result.started.push(name);
                        }
                        Err(f) => {
                            self.metrics.container_start_failed(kind, f.reason);
                            result.start_failures.push((name, f));
                        }
                    }
                }
            }
        }
        result
    }
}
