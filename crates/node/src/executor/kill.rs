//! Stopping containers and pods as the kubelet's `killContainer` and `killPodWithSyncResult` do
//! (`preStop` hooks, sidecars in reverse order, the grace period).

use super::{Executor, PodSync};
use crate::cri::{labels, observe};
use crate::events::EventType;
use crate::probes::hooks::{self, Hook};
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use podwright_planner::MINIMUM_GRACE;
use podwright_planner::observed::{ObservedContainer, RunState};
use podwright_planner::pod::{self, SpecContainer};
use podwright_planner::status;
use podwright_planner::termination::termination_waits;
use std::time::Duration;
use tokio::sync::watch;

/// A running instance to stop, with what the kill path needs to know about it.
pub(super) struct Victim<'a> {
    pub id: &'a str,
    pub spec: Option<SpecContainer<'a>>,
    pub name: &'a str,
    /// A container that never started gets no `preStop` hook.
    pub started: bool,
}

impl<'a> Victim<'a> {
    /// An instance the runtime reported, with its spec container.
    fn observed(pod: &'a Pod, c: &'a ObservedContainer) -> Self {
        let spec = pod::all_containers(pod).find(|s| s.name() == c.name);
        Victim { id: &c.id, spec, name: &c.name, started: c.state == RunState::Running }
    }
}

impl Executor {
    /// Kills an instance the planner observed; returns whether it is stopped.
    pub(super) async fn kill_observed(&self, sync: &PodSync<'_>, id: &str, message: String, grace: Duration) -> bool {
        let Some(c) = sync.observed.containers.iter().find(|c| c.id == id) else { return true };
        let victim = Victim::observed(sync.pod, c);
        // Boxed, like every hook-running future: the worker's future stays small.
        Box::pin(self.kill_container(sync.pod, &victim, message, grace, sync.pod_ip(), vec![])).await
    }

    /// Resets an instance for `RestartAllContainers`: stopped at once if `live` (no `preStop`
    /// hook, no grace), then removed. Returns how it ended (its `lastState` from now on), or
    /// `None` if it is not gone.
    pub(super) async fn reset_container(
        &self,
        sync: &PodSync<'_>,
        id: &str,
        name: &str,
        live: bool,
    ) -> Option<Option<ContainerStateTerminated>> {
        let message = format!("Container {name} will be restarted with every container of the pod");
        if live && !self.kill_observed(sync, id, message, Duration::ZERO).await {
            return None;
        }
        // Read before the removal takes it: a live one's end is known only once it is stopped.
        let ended = if live {
            match self.ctx.runtime.container_status(id).await {
                Ok(s) => observe::container(&s, &self.ctx.root, &mut observe::MessageCache::new()),
                Err(e) => {
                    tracing::debug!(%e, container = %name, "no status of the stopped container");
                    None
                }
            }
        } else {
            sync.observed.containers.iter().find(|c| c.id == id).cloned()
        };
        match self.ctx.runtime.remove_container(id).await {
            Ok(()) | Err(podwright_runtime::RuntimeError::NotFound(_)) => {
                self.forget(id);
                Some(ended.filter(|c| c.state == RunState::Exited).map(|c| status::terminated(&c)))
            }
            Err(e) => {
                tracing::warn!(%e, container = %name, "could not remove the container to restart every container");
                None
            }
        }
    }

    /// The kubelet's `killContainer`: the `Killing` event, the `preStop` hook bounded by the
    /// grace period, then (for a sidecar) its turn, bounded by what is left of it, then
    /// StopContainer with the rest, never less than 2 s unless the stop is to be immediate.
    /// Returns whether the container is stopped (StopContainer succeeded, or it is gone).
    pub(super) async fn kill_container(
        &self,
        pod: &Pod,
        v: &Victim<'_>,
        message: String,
        grace: Duration,
        ip: &str,
        turn: Vec<watch::Receiver<bool>>,
    ) -> bool {
        self.ctx.event(pod, v.spec.as_ref(), EventType::Normal, "Killing", message);
        let started = self.ctx.clock.now();
        let spent = || self.ctx.clock.now().duration_since(started).as_secs().max(0) as u64;
        let mut stop_after = grace;
        if !grace.is_zero() {
            let pre_stop = v
                .spec
                .as_ref()
                .filter(|_| v.started)
                .and_then(|s| s.container.lifecycle.as_ref()?.pre_stop.as_ref().map(|h| (s, h)));
            if let Some((sc, hook)) = pre_stop {
                let target = self.hook_target(pod, sc.container, v.id, ip);
                // An overrunning hook is abandoned when the grace period ends.
                if let Ok(Err(msg)) =
                    tokio::time::timeout(grace, Box::pin(hooks::run(&target, Hook::PreStop, hook))).await
                {
                    tracing::warn!(container = %v.name, "{msg}");
                    self.ctx.event(pod, Some(sc), EventType::Warning, "FailedPreStopHook", "PreStopHook failed".into());
                }
            }
            let left = grace.as_secs().saturating_sub(spent());
            if !turn.is_empty() && left > 0 {
                let all_done = futures_util::future::join_all(turn.into_iter().map(|mut rx| async move {
                    let _ = rx.wait_for(|done| *done).await;
                }));
                let _ = tokio::time::timeout(Duration::from_secs(left), all_done).await;
            }
            stop_after = Duration::from_secs(grace.as_secs().saturating_sub(spent())).max(MINIMUM_GRACE);
        }
        match self.ctx.runtime.stop_container(v.id, stop_after).await {
            Ok(()) | Err(podwright_runtime::RuntimeError::NotFound(_)) => true,
            Err(e) => {
                tracing::warn!(%e, container = %v.name, "stop failed");
                false
            }
        }
    }

    /// Stops every running container at once, in the planner's termination order (a sidecar,
    /// after its `preStop` hook, waits for the app containers and the sidecars after it); then
    /// stops the sandboxes. Returns whether every stop succeeded.
    pub(super) async fn kill_pod(&self, sync: &PodSync<'_>, grace: Duration) -> bool {
        let pod = sync.pod;
        // One prepared ahead of its turn, or stranded in an older sandbox, never ran: nothing to
        // stop (the plan removes it), as the kubelet stops only the containers that run.
        let never_ran = |c: &ObservedContainer| self.is_prepared(&c.id) || sync.observed.stranded(c);
        let running: Vec<&ObservedContainer> =
            sync.observed.containers.iter().filter(|c| c.state.is_live() && !never_ran(c)).collect();
        let ip = sync.pod_ip();
        let waits = termination_waits(pod, &running);
        let (done_tx, done_rx): (Vec<_>, Vec<_>) = running.iter().map(|_| watch::channel(false)).unzip();
        let kills = running.iter().zip(done_tx).zip(waits).map(|((c, done), wait_for)| {
            let turn: Vec<watch::Receiver<bool>> = wait_for.into_iter().map(|i| done_rx[i].clone()).collect();
            async move {
                let victim = Victim::observed(pod, c);
                let stopped =
                    self.kill_container(pod, &victim, format!("Stopping container {}", c.name), grace, ip, turn).await;
                let _ = done.send(true);
                stopped
            }
        });
        let mut stopped = futures_util::future::join_all(kills).await.into_iter().all(|s| s);
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        match self.ctx.runtime.list_pod_sandbox_states(&labels::pod_selector(uid)).await {
            Ok(sandboxes) => {
                for s in sandboxes {
                    if let Err(e) = self.ctx.runtime.stop_pod_sandbox(&s.id).await {
                        self.ctx.event(
                            pod,
                            None,
                            EventType::Warning,
                            "FailedKillPod",
                            format!("error killing pod: {e}"),
                        );
                        stopped = false;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(%e, "could not list the pod's sandboxes to stop them");
                stopped = false;
            }
        }
        stopped
    }
}
