//! The pod worker: observe, compute status, plan, execute, then sleep until a container of the
//! pod changes, a planned time comes, or deletion is asked for. Level-triggered: every pass
//! starts again from what the runtime says.

use crate::checkpoint::{self, CheckpointRef};
use crate::events::EventType;
use crate::executor::{Engine, PodState};
use crate::observe;
use crate::prober::Prober;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use podwright_planner::{Backoff, Observed, PodContext, StartFailure, plan_in_phase, pod_status};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long to wait before creating a sandbox again after it failed.
const SANDBOX_RETRY: SignedDuration = SignedDuration::from_secs(10);
/// The safety-net relist when the runtime streams events, and when it does not.
const RELIST_WITH_EVENTS: SignedDuration = SignedDuration::from_secs(5);
const RELIST_WITHOUT_EVENTS: SignedDuration = SignedDuration::from_secs(1);
/// How long to wait before trying again when the runtime could not be read.
const OBSERVE_RETRY: Duration = Duration::from_secs(1);

pub struct PodWorker {
    engine: Engine,
    pod: Arc<Pod>,
    backoff: Backoff,
    start_failures: BTreeMap<String, StartFailure>,
    start_time: Timestamp,
    sandbox_failure: Option<Timestamp>,
    events_streamed: bool,
    grace_override: Option<i64>,
}

/// What the worker publishes on every status change: the pod as given and its status, shared
/// rather than copied (a pod's status changes a dozen times in its life).
#[derive(Debug, Clone)]
pub struct PodUpdate {
    pub spec: Arc<Pod>,
    pub status: Option<Arc<PodStatus>>,
    /// The pod reached a terminal phase and nothing of it runs any more.
    pub finished: bool,
}

impl PodUpdate {
    /// The update before the first status.
    pub fn new(pod: &Pod) -> Self {
        PodUpdate { spec: Arc::new(pod.clone()), status: None, finished: false }
    }

    /// The whole pod, status included.
    pub fn pod(&self) -> Pod {
        let mut p = (*self.spec).clone();
        p.status = self.status.as_deref().cloned();
        p
    }

    pub fn phase(&self) -> Option<&str> {
        self.status.as_ref()?.phase.as_deref()
    }
}

impl PodWorker {
    /// Takes the pod shared (`Arc`) or not: a caller that publishes `PodUpdate`s can hand the
    /// worker the update's spec rather than a second copy.
    pub fn new(engine: Engine, pod: impl Into<Arc<Pod>>, events_streamed: bool) -> Self {
        let start_time = engine.clock.now();
        PodWorker {
            engine,
            pod: pod.into(),
            backoff: Backoff::default(),
            start_failures: BTreeMap::new(),
            start_time,
            sandbox_failure: None,
            events_streamed,
            grace_override: None,
        }
    }

    /// Stop with this grace period (seconds, 0 = at once) when deleted, instead of the pod's.
    pub fn with_grace_override(mut self, secs: Option<i64>) -> Self {
        self.grace_override = secs;
        self
    }

    fn checkpoint(&self) {
        let cp = CheckpointRef { pod: &self.pod, start_time: Some(self.start_time), backoff: &self.backoff };
        if let Err(e) = checkpoint::save(&self.engine.root, &cp) {
            tracing::warn!(%e, "could not write the pod's checkpoint");
        }
    }

    /// Runs the pod until it has finished (terminal phase, nothing running), publishing every
    /// new status on `updates`. `delete` turning true starts graceful termination.
    pub async fn run(mut self, updates: watch::Sender<PodUpdate>, mut delete: watch::Receiver<bool>) {
        let uid = self.pod.metadata.uid.clone().unwrap_or_default();
        let bell = self.engine.dispatcher.bell();
        self.checkpoint();
        let spec = self.pod.clone();
        let mut previous: Option<Arc<PodStatus>> = None;
        let mut messages = observe::MessageCache::new();
        let mut prober = Prober::new(&self.engine, self.pod.clone(), bell.clone());
        loop {
            let deleting = *delete.borrow();
            let (sandboxes, containers) =
                match observe::observe(self.engine.runtime.as_ref(), &uid, &self.engine.root, &mut messages).await {
                    Ok(o) => o,
                    Err(e) => {
                        tracing::warn!(%e, "could not read the pod's state from the runtime");
                        tokio::select! {
                            _ = tokio::time::sleep(OBSERVE_RETRY) => {}
                            _ = delete.changed() => {}
                        }
                        continue;
                    }
                };
            for c in &containers {
                self.engine.dispatcher.register(&c.id, &bell);
            }
            let now = self.engine.clock.now();
            let mut observed = Observed {
                sandbox: sandboxes.last().cloned(),
                containers,
                start_failures: self.start_failures.clone(),
                probes: Default::default(),
            };
            observed.probes = prober.sync(&observed, deleting);
            let ctx = PodContext {
                pod: &self.pod,
                observed: &observed,
                backoff: &self.backoff,
                now,
                start_time: Some(self.start_time),
                deleting,
                grace_override: self.grace_override,
            };
            let status = pod_status(&ctx, previous.as_deref());
            let p = plan_in_phase(&ctx, status.phase.as_deref().unwrap_or("Pending"));
            let terminal = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
            let finished = terminal && p.actions.is_empty();
            if previous.as_deref() != Some(&status) || finished {
                let status = Arc::new(status);
                updates.send_replace(PodUpdate { spec: spec.clone(), status: Some(status.clone()), finished });
                previous = Some(status);
            }
            if finished {
                return;
            }
            for e in &p.events {
                let kind = if e.warning { EventType::Warning } else { EventType::Normal };
                self.engine.events.record(&self.pod, e.field_path.clone(), kind, e.reason, e.message.clone(), now);
            }
            let backoff_changed = p.backoff != self.backoff;
            self.backoff = p.backoff;
            if backoff_changed {
                self.checkpoint();
            }

            let mut actions = p.actions;
            let mut wake_at = p.wake_at;
            // A sandbox that failed to be created is retried after a pause, not in a loop.
            if let Some(retry) = self.sandbox_failure.map(|f| f + SANDBOX_RETRY).filter(|r| now < *r)
                && actions.iter().any(|a| matches!(a, podwright_planner::Action::CreateSandbox { .. }))
            {
                actions.clear();
                wake_at = Some(wake_at.map_or(retry, |w| w.min(retry)));
            }
            if !actions.is_empty() {
                let mut st = PodState {
                    pod: &self.pod,
                    backoff: &mut self.backoff,
                    start_failures: &mut self.start_failures,
                    sandbox: observed.sandbox.clone(),
                    containers: &observed.containers,
                    bell: &bell,
                    sandbox_failure: &mut self.sandbox_failure,
                    deleted: delete.clone(),
                };
                self.engine.execute(&mut st, actions).await;
                continue;
            }
            let relist = if self.events_streamed { RELIST_WITH_EVENTS } else { RELIST_WITHOUT_EVENTS };
            let until = wake_at.map_or(now + relist, |w| w.min(now + relist));
            tokio::select! {
                _ = bell.notified() => {}
                _ = self.engine.clock.sleep_until(until) => {}
                _ = delete.changed() => {}
            }
        }
    }
}
