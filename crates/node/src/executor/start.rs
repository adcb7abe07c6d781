//! Making a sandbox, and starting containers: pull per the planner's policy, create, start, run
//! the `postStart` hook.

use super::{Executor, PodSync, SyncResult};
use crate::events::{EventType, wording};
use crate::layout;
use crate::probes::hooks::{self, Hook, HookTarget};
use crate::runtime_class;
use crate::termination_message;
use crate::volumes;
use k8s_openapi::api::core::v1::{Container, Pod};
use podwright_planner::pod::SpecContainer;
use podwright_planner::{ContainerKind, Eviction, ObservedSandbox, PullPolicy, StartFailure, StartFailureReason};

/// A container created and not yet started.
struct Made {
    id: String,
    /// Its log file, relative to the pod's log directory.
    log_path: String,
}

/// A container to prepare (`Action::PrepareContainer`).
pub(super) struct Next<'a> {
    pub sc: SpecContainer<'a>,
    pub restart_count: i32,
    pub pull: PullPolicy,
}

/// Why a sandbox was not made.
enum NotMade {
    /// Tried again after the back-off; the Warning events that say why (none when they are
    /// recorded already).
    Retry(Vec<(&'static str, String)>),
    /// No attempt can succeed: the pod fails with this message.
    ForGood(String),
}

/// The kubelet's `FailedCreatePodSandBox` message.
fn sandbox_failure(e: String) -> String {
    format!("Failed to create pod sandbox: {e}")
}

impl Executor {
    pub(super) async fn create_sandbox(&self, sync: &PodSync<'_>, attempt: u32, result: &mut SyncResult) {
        match self.make_sandbox(sync.pod, attempt).await {
            Ok(()) => result.sandbox_created = true,
            Err(NotMade::ForGood(message)) => {
                // The worker ends the pod, recording the event once with the pod's status.
                let reason = "FailedCreatePodSandBox".to_string();
                result.sandbox_failed = Some(self.ctx.clock.now());
                result.pod_failed = Some(Eviction { reason, message });
            }
            Err(NotMade::Retry(warnings)) => {
                for (reason, message) in warnings {
                    self.ctx.event(sync.pod, None, EventType::Warning, reason, message);
                }
                result.sandbox_failed = Some(self.ctx.clock.now());
            }
        }
    }

    /// The sandbox's volumes, directories and the sandbox itself.
    async fn make_sandbox(&self, pod: &Pod, attempt: u32) -> Result<(), NotMade> {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let root = &self.ctx.root;
        let failed = |e: String| NotMade::Retry(vec![("FailedCreatePodSandBox", sandbox_failure(e))]);
        let dns = self.configs.dns(pod);
        for e in dns.events {
            self.ctx.event(pod, None, EventType::Warning, e.reason, e.message);
        }
        let config = self.configs.sandbox(pod, attempt, dns.config).map_err(failed)?;
        if let Some(cgroups) = &self.configs.cgroups {
            // The kubelet's pod container manager: the pod's cgroup exists before its sandbox.
            cgroups.ensure(pod).map_err(|e| {
                NotMade::Retry(vec![(
                    "FailedCreatePodContainer",
                    format!("unable to ensure pod container exists: {e}"),
                )])
            })?;
        }
        let allocatable_memory = u64::try_from(self.configs.facts.memory_bytes).unwrap_or(0);
        volumes::prepare(root, pod, allocatable_memory).map_err(|errors| {
            NotMade::Retry(errors.into_iter().map(|e| ("FailedMount", e.to_string())).collect::<Vec<_>>())
        })?;
        std::fs::create_dir_all(layout::log_directory(root, uid))
            .and_then(|_| std::fs::create_dir_all(layout::termination_dir(root, uid)))
            .map_err(|e| NotMade::Retry(vec![("FailedMount", format!("Unable to attach or mount volumes: {e}"))]))?;
        // Volumes are ready before the sandbox, and so before the first init container.
        if !self.project_volumes(pod) {
            return Err(NotMade::Retry(Vec::new()));
        }
        if pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()).any(|v| v.image.is_some()) {
            // Asked here, not once, so a runtime's upgrade is seen without a restart.
            let version = self.ctx.runtime.version().await.map_err(|e| failed(e.to_string()))?;
            if !volumes::mounts::runtime_mounts_images(&version) {
                let e = format!(
                    "{version} cannot mount image volumes (containerd 2.1 or later and CRI-O 1.31 or later can)"
                );
                return Err(NotMade::ForGood(sandbox_failure(e)));
            }
        }
        // An unknown class, or a handler the runtime lacks, would fail every attempt alike: the
        // pod fails instead of retrying forever.
        let handler =
            self.configs.runtime_handler(pod).map_err(|e| NotMade::ForGood(sandbox_failure(e.to_string())))?;
        self.ctx.runtime.run_pod_sandbox(&config, &handler).await.map_err(|e| {
            if runtime_class::handler_missing(&e) {
                NotMade::ForGood(sandbox_failure(e.to_string()))
            } else {
                failed(e.to_string())
            }
        })?;
        Ok(())
    }

    /// Writes the pod's ConfigMap, Secret, downward API and projected volumes as their sources
    /// are now; each that cannot be written is a `FailedMount` event. Returns whether all were.
    pub(crate) fn project_volumes(&self, pod: &Pod) -> bool {
        let errors = self.configs.project_volumes(pod, self.ctx.clock.now());
        for e in &errors {
            self.ctx.event(pod, None, EventType::Warning, "FailedMount", e.to_string());
        }
        errors.is_empty()
    }

    /// Pulls per policy and creates `sc` (unless `created`: an instance never started), starts
    /// it and runs its `postStart` hook; prepares `next` meanwhile, once this one's pull is done
    /// (never two pulls of one pod at once), so that its `CreateContainer` is off the critical
    /// path. Returns whether the start succeeded, and whether the preparation failed.
    pub(super) async fn start(
        &self,
        sync: &PodSync<'_>,
        sc: SpecContainer<'_>,
        (restart_count, pull, created): (i32, PullPolicy, Option<String>),
        sandbox: &ObservedSandbox,
        next: Option<Next<'_>>,
    ) -> (Result<(), StartFailure>, bool) {
        let made = match created {
            Some(id) => {
                // Prepared ahead of its turn: its events were held back until now. One whose
                // creator died before starting it had its `Created` event then.
                if let Some((uid, path)) = self.unprepare(&id) {
                    self.deferred.release(&uid, path);
                    self.ctx.event(sync.pod, Some(&sc), EventType::Normal, "Created", wording::created(sc.name()));
                }
                Made { id, log_path: layout::container_log_relative(sc.name(), restart_count) }
            }
            None => match self.create_container(sync, sc, restart_count, pull, sandbox).await {
                Ok(made) => {
                    self.ctx.event(sync.pod, Some(&sc), EventType::Normal, "Created", wording::created(sc.name()));
                    made
                }
                Err(f) => return (Err(f), false),
            },
        };
        let start = self.start_created(sync, sc, &made.id, &made.log_path);
        match next {
            // Polled in a fixed order: a seeded simulation replays the same interleaving.
            Some(next) => {
                let (started, prepared) = futures_util::future::join(start, self.prepare(sync, next, sandbox)).await;
                (started, !prepared)
            }
            None => (start.await, false),
        }
    }

    /// The pipelined start's first half: pulls per policy and creates `next`, its events held
    /// back until it starts (it may never: the init container before may fail). Returns
    /// whether it was created.
    pub(super) async fn prepare(&self, sync: &PodSync<'_>, next: Next<'_>, sandbox: &ObservedSandbox) -> bool {
        let Next { sc, restart_count, pull } = next;
        let (uid, path) = (sync.pod.metadata.uid.clone().unwrap_or_default(), sc.field_path());
        self.deferred.hold(&uid, path.clone());
        match self.create_container(sync, sc, restart_count, pull, sandbox).await {
            Ok(made) => {
                self.prepared.lock().unwrap_or_else(|e| e.into_inner()).insert(made.id, Some((uid, path)));
                true
            }
            Err(f) => {
                self.deferred.discard(&uid, path);
                tracing::debug!(container = sc.name(), reason = f.reason.as_str(), message = %f.message, "preparation failed");
                false
            }
        }
    }

    /// Pull per policy and create: a start's first half, and the whole of a preparation.
    async fn create_container(
        &self,
        sync: &PodSync<'_>,
        sc: SpecContainer<'_>,
        restart_count: i32,
        pull: PullPolicy,
        sandbox: &ObservedSandbox,
    ) -> Result<Made, StartFailure> {
        let pod = sync.pod;
        let name = sc.name().to_string();
        // The sandbox exists, so its host name was made once already: the same pod and domain
        // make the same one. The DNS events were recorded when the sandbox was made.
        let sandbox_config = self
            .configs
            .sandbox(pod, sandbox.attempt, self.configs.dns(pod).config)
            .map_err(|msg| self.config_error(pod, &sc, msg))?;
        // As the sandbox, the pull goes to the pod's RuntimeClass handler.
        let handler = self.configs.runtime_handler(pod).map_err(|e| self.config_error(pod, &sc, e.to_string()))?;
        // Until the container exists and uses the image, the image collector must keep it.
        // What the pod's status says it gets: the worker asked the runtime once.
        let supports_rro =
            volumes::mounts::wants_recursive_read_only(sc.container) && sync.observed.recursive_read_only_supported;
        let _hold =
            self.images.ensure_image(pod, &sc, sc.image(), pull, &sandbox_config, handler.clone(), sync.cancel).await?;
        let mut from_runtime = volumes::mounts::FromRuntime { recursive_read_only: supports_rro, ..Default::default() };
        // The images of its image volumes too, each with its own policy, before the container
        // is created (the kubelet pulls them for the pod, before any container starts).
        let mut volume_holds = Vec::new();
        for (volume, source) in volumes::mounts::image_volumes(pod, sc.container) {
            let image = source.reference.as_deref().unwrap_or_default();
            let pull = PullPolicy::for_image(image, source.pull_policy.as_deref());
            let (hold, image_ref) =
                self.images.ensure_image(pod, &sc, image, pull, &sandbox_config, handler.clone(), sync.cancel).await?;
            volume_holds.push(hold);
            from_runtime.image_refs.insert(volume.to_string(), image_ref);
        }
        let ip = sandbox.ip.clone().unwrap_or_default();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let message_file = layout::termination_message(&self.ctx.root, uid, &name, restart_count);
        if let Err(e) = termination_message::prepare(&message_file) {
            let msg = format!("cannot create the termination message file {}: {e}", message_file.display());
            return Err(self.config_error(pod, &sc, msg));
        }
        self.configs.hosts_file(pod, &sc, &ip).map_err(|msg| self.config_error(pod, &sc, msg))?;
        let pod_ips: Vec<String> = sandbox.ip.iter().cloned().collect();
        let image_user =
            self.ctx.runtime.image_user(sc.image()).await.map_err(|e| self.config_error(pod, &sc, e.to_string()))?;
        let (config, skipped) = self
            .configs
            .container(pod, &sc, &pod_ips, &image_user, restart_count, &sandbox.id, &from_runtime)
            .map_err(|msg| self.config_error(pod, &sc, msg))?;
        for message in skipped {
            self.ctx.event(pod, None, EventType::Warning, "InvalidEnvironmentVariableNames", message);
        }
        match self.ctx.runtime.create_container(&sandbox.id, &config, &sandbox_config).await {
            Ok(id) => Ok(Made { id, log_path: config.log_path }),
            Err(e) => {
                self.ctx.event(pod, Some(&sc), EventType::Warning, "Failed", format!("Error: {e}"));
                Err(self.ctx.failure(StartFailureReason::CreateContainerError, e.to_string()))
            }
        }
    }

    /// Whether the runtime says the handler of `pod`'s RuntimeClass makes recursive read-only
    /// mounts; a runtime that does not say (containerd before 2.0) does not.
    pub(crate) async fn pod_supports_recursive_read_only(&self, pod: &Pod) -> bool {
        let Ok(handler) = self.configs.runtime_handler(pod) else { return false };
        match self.ctx.runtime.runtime_handlers().await {
            Ok(handlers) => handlers
                .iter()
                .any(|h| h.name == handler && h.features.as_ref().is_some_and(|f| f.recursive_read_only_mounts)),
            Err(e) => {
                tracing::warn!(%e, "the runtime's handlers are unknown; no recursive read-only mounts");
                false
            }
        }
    }

    /// A container whose config cannot be made: the kubelet's `Failed` event and
    /// `CreateContainerConfigError`.
    fn config_error(&self, pod: &Pod, sc: &SpecContainer<'_>, msg: String) -> StartFailure {
        self.ctx.event(pod, Some(sc), EventType::Warning, "Failed", format!("Error: {msg}"));
        self.ctx.failure(StartFailureReason::CreateContainerConfigError, msg)
    }

    /// Follows the created instance's events and output, starts it and runs its `postStart`
    /// hook.
    async fn start_created(
        &self,
        sync: &PodSync<'_>,
        sc: SpecContainer<'_>,
        id: &str,
        log_path: &str,
    ) -> Result<(), StartFailure> {
        let pod = sync.pod;
        let ip = sync.pod_ip();
        let name = sc.name().to_string();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        self.dispatcher.register_for_pod(id, uid);
        // Its exit 0 is acted on as soon as the runtime publishes it: a sidecar's starts
        // nothing.
        if sc.kind != ContainerKind::Sidecar {
            self.dispatcher.await_completion(id);
        }
        if let Some(sink) = &self.log_sink {
            let path = layout::log_directory(&self.ctx.root, uid).join(log_path);
            let _ = sink.send(crate::logs::LogTarget { container: name.clone(), path }.into());
        }
        if let Err(e) = self.ctx.runtime.start_container(id).await {
            self.ctx.event(pod, Some(&sc), EventType::Warning, "Failed", format!("Error: {e}"));
            return Err(self.ctx.failure(StartFailureReason::RunContainerError, e.to_string()));
        }
        self.ctx.event(pod, Some(&sc), EventType::Normal, "Started", wording::started(&name));
        if let Some(hook) = sc.container.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) {
            let target = self.hook_target(pod, sc.container, id, ip);
            let outcome = tokio::select! {
                // A seeded simulation replays the same choice.
                biased;
                r = Box::pin(hooks::run(&target, Hook::PostStart, hook)) => r,
                // Deletion stops everything anyway; the next pass kills the container.
                _ = sync.cancel.requested() => Ok(()),
            };
            if let Err(msg) = outcome {
                tracing::warn!(container = %name, "{msg}");
                // The hook's output stays out of the event: it may hold secrets.
                self.ctx.event(
                    pod,
                    Some(&sc),
                    EventType::Warning,
                    "FailedPostStartHook",
                    "PostStartHook failed".into(),
                );
                let victim = super::kill::Victim { id, spec: Some(sc), name: &name, started: true };
                let grace = podwright_planner::plan::pod_grace(pod);
                Box::pin(self.kill_container(pod, &victim, "FailedPostStartHook".into(), grace, ip, vec![])).await;
                return Err(self.ctx.failure(StartFailureReason::PostStartHookError, msg));
            }
        }
        Ok(())
    }

    pub(super) fn hook_target<'a>(
        &'a self,
        pod: &'a Pod,
        container: &'a Container,
        id: &'a str,
        ip: &'a str,
    ) -> HookTarget<'a> {
        HookTarget {
            runtime: self.ctx.runtime.as_ref(),
            events: self.ctx.events.as_ref(),
            clock: self.ctx.clock,
            pod,
            container,
            container_id: id,
            pod_ip: ip,
            output: self.log_sink.as_ref(),
        }
    }
}
