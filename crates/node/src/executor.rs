//! Applies a plan's actions through the runtime, records the kubelet's events for them, and
//! turns failures into observed state (start failures, back-off), never into lost pods.

use crate::cri_config;
use crate::dispatch::Dispatcher;
use crate::events::{EventLog, EventType};
use crate::hooks::{self, HookTarget};
use crate::volumes;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod};
use podwright_planner::decide::pull_key;
use podwright_planner::observed::{ObservedContainer, POST_START_HOOK_ERROR, RunState};
use podwright_planner::pod::{self, SpecContainer};
use podwright_planner::{Action, Backoff, ContainerKind, ObservedSandbox, StartFailure};
use podwright_runtime::{Clock, Runtime};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// Shared by every pod worker of one podwright process.
#[derive(Clone)]
pub struct Engine {
    pub runtime: Arc<dyn Runtime>,
    pub clock: Clock,
    pub root: PathBuf,
    pub dispatcher: Arc<Dispatcher>,
    pub events: Arc<EventLog>,
    /// Where to announce containers whose output should be followed.
    pub log_sink: Option<tokio::sync::mpsc::UnboundedSender<crate::logs::LogTarget>>,
}

/// The per-pod state the executor updates.
pub struct PodState<'a> {
    pub pod: &'a Pod,
    pub backoff: &'a mut Backoff,
    pub start_failures: &'a mut BTreeMap<String, StartFailure>,
    pub sandbox: Option<ObservedSandbox>,
    pub containers: &'a [ObservedContainer],
    pub bell: &'a Arc<Notify>,
    /// When creating a sandbox last failed (retry after a pause).
    pub sandbox_failure: &'a mut Option<Timestamp>,
    /// Turns true when the pod is deleted: a `postStart` hook is no longer waited for.
    pub deleted: watch::Receiver<bool>,
}

/// A running instance to stop, with what the kill path needs to know about it.
struct Victim<'a> {
    id: &'a str,
    spec: Option<SpecContainer<'a>>,
    name: &'a str,
    /// A container that never started gets no `preStop` hook.
    started: bool,
}

impl<'a> Victim<'a> {
    /// An instance the runtime reported, with its spec container.
    fn observed(pod: &'a Pod, c: &'a ObservedContainer) -> Self {
        let spec = pod::all_containers(pod).find(|s| s.name() == c.name);
        Victim { id: &c.id, spec, name: &c.name, started: c.state == RunState::Running }
    }
}

impl PodState<'_> {
    fn pod_ip(&self) -> &str {
        self.sandbox.as_ref().and_then(|s| s.ip.as_deref()).unwrap_or_default()
    }
}

/// The kubelet never gives a container less than this between TERM and KILL, except when the
/// caller asked for an immediate stop.
const MINIMUM_GRACE_SECS: u64 = 2;

impl Engine {
    fn event(&self, pod: &Pod, sc: Option<&SpecContainer>, kind: EventType, reason: &str, message: String) {
        self.events.record(pod, sc.map(|s| s.field_path()), kind, reason, message, self.clock.now());
    }

    /// A start failure now, for the reason cache.
    fn failure(&self, reason: &str, message: String) -> StartFailure {
        StartFailure { reason: reason.to_string(), message, at: self.clock.now() }
    }

    /// Runs the actions in order; consecutive container starts go together.
    pub async fn execute(&self, st: &mut PodState<'_>, actions: Vec<Action>) {
        let mut i = 0;
        while i < actions.len() {
            if let Action::StartContainer { .. } = actions[i] {
                let mut j = i;
                while j < actions.len() && matches!(actions[j], Action::StartContainer { .. }) {
                    j += 1;
                }
                self.start_all(st, &actions[i..j]).await;
                i = j;
                continue;
            }
            match &actions[i] {
                Action::KillPod { grace } => self.kill_pod(st, *grace).await,
                Action::CreateSandbox { attempt } => self.create_sandbox(st, *attempt).await,
                Action::KillContainer { id, message, grace, .. } => {
                    // The planner only kills instances it observed.
                    if let Some(c) = st.containers.iter().find(|c| c.id == *id) {
                        let victim = Victim::observed(st.pod, c);
                        // Boxed, like every hook-running future: the worker's future stays small.
                        let kill = self.kill_container(st.pod, &victim, message.clone(), *grace, st.pod_ip(), vec![]);
                        Box::pin(kill).await;
                    }
                }
                Action::RemoveContainer { id, .. } => {
                    if let Err(e) = self.runtime.remove_container(id).await {
                        tracing::debug!(%e, "remove failed");
                    }
                    self.dispatcher.unregister(id);
                }
                Action::StartContainer { .. } => unreachable!("handled above"),
            }
            i += 1;
        }
    }

    async fn create_sandbox(&self, st: &mut PodState<'_>, attempt: u32) {
        let pod = st.pod;
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let config = cri_config::sandbox_config(pod, &self.root, attempt);
        let prepared = volumes::prepare(&self.root, pod)
            .and_then(|_| std::fs::create_dir_all(cri_config::log_directory(&self.root, uid)))
            .and_then(|_| std::fs::create_dir_all(crate::termination_message::dir(&self.root, uid)));
        if let Err(e) = prepared {
            self.event(pod, None, EventType::Warning, "FailedMount", format!("Unable to attach or mount volumes: {e}"));
            *st.sandbox_failure = Some(self.clock.now());
            return;
        }
        let handler = pod.spec.as_ref().and_then(|s| s.runtime_class_name.clone()).unwrap_or_default();
        match self.runtime.run_pod_sandbox(&config, &handler).await {
            Ok(id) => {
                *st.sandbox_failure = None;
                if let Ok(s) = self.runtime.pod_sandbox_status(&id).await {
                    st.sandbox = Some(crate::observe::sandbox(&s));
                }
            }
            Err(e) => {
                self.event(
                    pod,
                    None,
                    EventType::Warning,
                    "FailedCreatePodSandBox",
                    format!("Failed to create pod sandbox: {e}"),
                );
                *st.sandbox_failure = Some(self.clock.now());
            }
        }
    }

    async fn start_all(&self, st: &mut PodState<'_>, starts: &[Action]) {
        let Some(sandbox) = st.sandbox.clone() else { return };
        let mut jobs = vec![];
        for a in starts {
            let Action::StartContainer { kind, index, restart_count } = a else { continue };
            let Some(sc) = pod::find(st.pod, *kind, *index) else { continue };
            jobs.push(self.start_one(st.pod, sc, *restart_count, &sandbox, st.bell, st.deleted.clone()));
        }
        for (name, result) in futures_util::future::join_all(jobs).await {
            match result {
                Ok(()) => {
                    st.start_failures.remove(&name);
                }
                Err(f) => {
                    if f.reason == "ErrImagePull" {
                        let image = pod::all_containers(st.pod)
                            .find(|s| s.name() == name)
                            .map(|s| s.image().to_string())
                            .unwrap_or_default();
                        st.backoff.next(&pull_key(&image), f.at, f.at);
                    }
                    st.start_failures.insert(name, f);
                }
            }
        }
    }

    /// Pull per policy, create, start. Returns the container's name and the failure, if any.
    async fn start_one(
        &self,
        pod: &Pod,
        sc: SpecContainer<'_>,
        restart_count: i32,
        sandbox: &ObservedSandbox,
        bell: &Arc<Notify>,
        mut deleted: watch::Receiver<bool>,
    ) -> (String, Result<(), StartFailure>) {
        let name = sc.name().to_string();
        let sandbox_config = cri_config::sandbox_config(pod, &self.root, sandbox.attempt);
        if let Err(f) = self.ensure_image(pod, &sc, &sandbox_config).await {
            return (name, Err(f));
        }
        let ip = sandbox.ip.clone().unwrap_or_default();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let message_file = crate::termination_message::host_path(&self.root, uid, &name, restart_count);
        if let Err(e) = crate::termination_message::prepare(&message_file) {
            let msg = format!("cannot create the termination message file {}: {e}", message_file.display());
            self.event(pod, Some(&sc), EventType::Warning, "Failed", format!("Error: {msg}"));
            return (name, Err(self.failure("CreateContainerConfigError", msg)));
        }
        let config = cri_config::container_config(pod, &sc, restart_count, &sandbox.id, &ip, &self.root);
        let id = match self.runtime.create_container(&sandbox.id, &config, &sandbox_config).await {
            Ok(id) => id,
            Err(e) => {
                self.event(pod, Some(&sc), EventType::Warning, "Failed", format!("Error: {e}"));
                return (name, Err(self.failure("CreateContainerError", e.to_string())));
            }
        };
        self.dispatcher.register(&id, bell);
        self.event(pod, Some(&sc), EventType::Normal, "Created", format!("Created container {name}"));
        if let Some(sink) = &self.log_sink {
            let path = cri_config::log_directory(&self.root, uid).join(&config.log_path);
            let _ = sink.send(crate::logs::LogTarget { container: name.clone(), path });
        }
        if let Err(e) = self.runtime.start_container(&id).await {
            self.event(pod, Some(&sc), EventType::Warning, "Failed", format!("Error: {e}"));
            return (name, Err(self.failure("RunContainerError", e.to_string())));
        }
        self.event(pod, Some(&sc), EventType::Normal, "Started", format!("Started container {name}"));
        if let Some(hook) = sc.container.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) {
            let target = self.hook_target(pod, sc.container, &id, &ip);
            let result = tokio::select! {
                r = Box::pin(hooks::run(&target, hook)) => r,
                // Deletion stops everything anyway; the next pass kills the container.
                _ = deleted.wait_for(|d| *d) => Ok(()),
            };
            if let Err(msg) = result {
                tracing::warn!(container = %name, "{msg}");
                // The hook's output stays out of the event: it may hold secrets.
                self.event(pod, Some(&sc), EventType::Warning, "FailedPostStartHook", "PostStartHook failed".into());
                let victim = Victim { id: &id, spec: Some(sc), name: &name, started: true };
                let grace = Duration::from_secs(pod::grace_period_secs(pod) as u64);
                Box::pin(self.kill_container(pod, &victim, "FailedPostStartHook".into(), grace, &ip, vec![])).await;
                return (name, Err(self.failure(POST_START_HOOK_ERROR, msg)));
            }
        }
        (name, Ok(()))
    }

    fn hook_target<'a>(&'a self, pod: &'a Pod, container: &'a Container, id: &'a str, ip: &'a str) -> HookTarget<'a> {
        HookTarget {
            runtime: self.runtime.as_ref(),
            events: &self.events,
            clock: self.clock,
            pod,
            container,
            container_id: id,
            pod_ip: ip,
        }
    }

    /// The kubelet's `killContainer`: the `Killing` event, the `preStop` hook bounded by the
    /// grace period, then (for a sidecar) its turn, bounded by what is left of it, then
    /// StopContainer with the rest, never less than 2 s unless the stop is to be immediate.
    async fn kill_container(
        &self,
        pod: &Pod,
        v: &Victim<'_>,
        message: String,
        grace: Duration,
        ip: &str,
        turn: Vec<watch::Receiver<bool>>,
    ) {
        self.event(pod, v.spec.as_ref(), EventType::Normal, "Killing", message);
        let started = self.clock.now();
        let spent = || self.clock.now().duration_since(started).as_secs().max(0) as u64;
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
                if let Ok(Err(msg)) = tokio::time::timeout(grace, Box::pin(hooks::run(&target, hook))).await {
                    tracing::warn!(container = %v.name, "{msg}");
                    self.event(pod, Some(sc), EventType::Warning, "FailedPreStopHook", "PreStopHook failed".into());
                }
            }
            let left = grace.as_secs().saturating_sub(spent());
            if !turn.is_empty() && left > 0 {
                let all_done = futures_util::future::join_all(turn.into_iter().map(|mut rx| async move {
                    let _ = rx.wait_for(|done| *done).await;
                }));
                let _ = tokio::time::timeout(Duration::from_secs(left), all_done).await;
            }
            stop_after = Duration::from_secs(grace.as_secs().saturating_sub(spent()).max(MINIMUM_GRACE_SECS));
        }
        match self.runtime.stop_container(v.id, stop_after).await {
            Ok(()) | Err(podwright_runtime::RuntimeError::NotFound(_)) => {}
            Err(e) => tracing::warn!(%e, container = %v.name, "stop failed"),
        }
    }

    async fn ensure_image(
        &self,
        pod: &Pod,
        sc: &SpecContainer<'_>,
        sandbox_config: &podwright_runtime::cri_api::PodSandboxConfig,
    ) -> Result<(), StartFailure> {
        let image = sc.image();
        let policy = sc.container.image_pull_policy.as_deref().unwrap_or("IfNotPresent");
        if policy != "Always" {
            match self.runtime.image_status(image).await {
                Ok(Some(_)) => {
                    self.event(
                        pod,
                        Some(sc),
                        EventType::Normal,
                        "Pulled",
                        format!("Container image \"{image}\" already present on machine"),
                    );
                    return Ok(());
                }
                Ok(None) if policy == "Never" => {
                    let msg = format!("Container image \"{image}\" is not present with pull policy of Never");
                    self.event(pod, Some(sc), EventType::Warning, "ErrImageNeverPull", msg.clone());
                    self.event(pod, Some(sc), EventType::Warning, "Failed", "Error: ErrImageNeverPull".into());
                    return Err(self.failure("ErrImageNeverPull", msg));
                }
                Ok(None) => {}
                Err(e) => {
                    self.event(
                        pod,
                        Some(sc),
                        EventType::Warning,
                        "InspectFailed",
                        format!("Failed to inspect image \"{image}\": {e}"),
                    );
                    return Err(self.failure("ImageInspectError", e.to_string()));
                }
            }
        }
        self.event(pod, Some(sc), EventType::Normal, "Pulling", format!("Pulling image \"{image}\""));
        let started = self.clock.now();
        match self.runtime.pull_image(image, None, sandbox_config).await {
            Ok(_) => {
                let took = self.clock.now().duration_since(started).as_secs_f64();
                self.event(
                    pod,
                    Some(sc),
                    EventType::Normal,
                    "Pulled",
                    format!("Successfully pulled image \"{image}\" in {took:.3}s ({took:.3}s including waiting)"),
                );
                Ok(())
            }
            Err(e) => {
                self.event(
                    pod,
                    Some(sc),
                    EventType::Warning,
                    "Failed",
                    format!("Failed to pull image \"{image}\": {e}"),
                );
                self.event(pod, Some(sc), EventType::Warning, "Failed", "Error: ErrImagePull".into());
                Err(self.failure("ErrImagePull", e.to_string()))
            }
        }
    }

    /// Stops every running container at once, except that each sidecar, after its `preStop`
    /// hook, waits until the other containers and the sidecars after it in the spec have
    /// stopped (reverse spec order); then stops the sandboxes.
    async fn kill_pod(&self, st: &mut PodState<'_>, grace: Duration) {
        let running: Vec<&ObservedContainer> =
            st.containers.iter().filter(|c| matches!(c.state, RunState::Running | RunState::Created)).collect();
        let ip = st.pod_ip();
        let position = |c: &ObservedContainer| pod::init_containers(st.pod).position(|s| s.name() == c.name);
        let (done_tx, done_rx): (Vec<_>, Vec<_>) = running.iter().map(|_| watch::channel(false)).unzip();
        let kills = running.iter().zip(done_tx).map(|(c, done)| {
            let turn: Vec<watch::Receiver<bool>> = if c.kind == ContainerKind::Sidecar {
                let mine = position(c);
                running
                    .iter()
                    .zip(&done_rx)
                    .filter(|(o, _)| o.kind != ContainerKind::Sidecar || position(o) > mine)
                    .map(|(_, rx)| rx.clone())
                    .collect()
            } else {
                vec![]
            };
            let pod = st.pod;
            async move {
                let victim = Victim::observed(pod, c);
                self.kill_container(pod, &victim, format!("Stopping container {}", c.name), grace, ip, turn).await;
                let _ = done.send(true);
            }
        });
        futures_util::future::join_all(kills).await;
        let uid = st.pod.metadata.uid.as_deref().unwrap_or_default();
        if let Ok(sandboxes) = self.runtime.list_pod_sandboxes(&cri_config::pod_selector(uid)).await {
            for s in sandboxes {
                if let Err(e) = self.runtime.stop_pod_sandbox(&s.id).await {
                    self.event(st.pod, None, EventType::Warning, "FailedKillPod", format!("error killing pod: {e}"));
                }
            }
        }
    }

    /// Removes every container and sandbox of the pod and its files (end of `run`).
    pub async fn remove_pod(&self, pod: &Pod) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let sel = cri_config::pod_selector(uid);
        if let Ok(cs) = self.runtime.list_containers(&sel).await {
            for c in cs {
                let _ = self.runtime.stop_container(&c.id, Duration::ZERO).await;
                let _ = self.runtime.remove_container(&c.id).await;
                self.dispatcher.unregister(&c.id);
            }
        }
        if let Ok(ss) = self.runtime.list_pod_sandboxes(&sel).await {
            for s in ss {
                let _ = self.runtime.stop_pod_sandbox(&s.id).await;
                let _ = self.runtime.remove_pod_sandbox(&s.id).await;
            }
        }
        if let Err(e) = volumes::cleanup(&self.root, uid) {
            tracing::warn!(%e, "could not remove the pod's directory");
        }
    }
}
