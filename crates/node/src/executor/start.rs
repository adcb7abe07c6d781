//! Making a sandbox, and starting containers: pull per the planner's policy, create, start, run
//! the `postStart` hook.

use super::{PodSync, SyncResult};
use crate::credentials;
use crate::cri::config as cri_config;
use crate::cri::env::EnvSources;
use crate::cri::{dns, hosts};
use crate::events::{EventType, wording};
use crate::image_gc::Hold;
use crate::layout;
use crate::node::Engine;
use crate::probes::hooks::{self, Hook, HookTarget};
use crate::runtime_class;
use crate::termination_message;
use crate::volumes;
use crate::worker::deletion_asked;
use k8s_openapi::api::core::v1::{Container, Pod, Secret};
use podwright_planner::pod::SpecContainer;
use podwright_planner::{Eviction, ObservedSandbox, PullPolicy, StartFailure, StartFailureReason};
use podwright_runtime::cri_api::{AuthConfig, ImageSpec, PodSandboxConfig};

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

impl Engine {
    pub(super) async fn create_sandbox(&self, sync: &PodSync<'_>, attempt: u32, result: &mut SyncResult) {
        match self.make_sandbox(sync.pod, attempt).await {
            Ok(()) => result.sandbox_created = true,
            Err(NotMade::ForGood(message)) => {
                // The worker ends the pod, recording the event once with the pod's status.
                let reason = "FailedCreatePodSandBox".to_string();
                result.sandbox_failed = Some(self.clock.now());
                result.pod_failed = Some(Eviction { reason, message });
            }
            Err(NotMade::Retry(warnings)) => {
                for (reason, message) in warnings {
                    self.event(sync.pod, None, EventType::Warning, reason, message);
                }
                result.sandbox_failed = Some(self.clock.now());
            }
        }
    }

    /// The sandbox's volumes, directories and the sandbox itself.
    async fn make_sandbox(&self, pod: &Pod, attempt: u32) -> Result<(), NotMade> {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let failed = |e: String| NotMade::Retry(vec![("FailedCreatePodSandBox", sandbox_failure(e))]);
        let dns = dns::pod_dns(pod, &self.dns);
        for e in dns.events {
            self.event(pod, None, EventType::Warning, e.reason, e.message);
        }
        let hostname = hosts::kernel_hostname(pod, &self.dns.domain).map_err(|e| failed(e.to_string()))?;
        let mut config = cri_config::sandbox_config(pod, &self.root, attempt, hostname, dns.config);
        if let Some(cgroups) = &self.cgroups {
            // The kubelet's pod container manager: the pod's cgroup exists before its sandbox.
            let parent = cgroups.ensure(pod).map_err(|e| {
                NotMade::Retry(vec![(
                    "FailedCreatePodContainer",
                    format!("unable to ensure pod container exists: {e}"),
                )])
            })?;
            config.linux.get_or_insert_default().cgroup_parent = parent;
        }
        volumes::prepare(&self.root, pod).map_err(|errors| {
            NotMade::Retry(errors.into_iter().map(|e| ("FailedMount", e.to_string())).collect::<Vec<_>>())
        })?;
        std::fs::create_dir_all(layout::log_directory(&self.root, uid))
            .and_then(|_| std::fs::create_dir_all(layout::termination_dir(&self.root, uid)))
            .map_err(|e| NotMade::Retry(vec![("FailedMount", format!("Unable to attach or mount volumes: {e}"))]))?;
        // Volumes are ready before the sandbox, and so before the first init container.
        if !self.project_volumes(pod) {
            return Err(NotMade::Retry(Vec::new()));
        }
        // An unknown class, or a handler the runtime lacks, would fail every attempt alike: the
        // pod fails instead of retrying forever.
        let handler = runtime_class::runtime_handler(self.objects.as_ref(), pod)
            .map_err(|e| NotMade::ForGood(sandbox_failure(e.to_string())))?;
        self.runtime.run_pod_sandbox(&config, &handler).await.map_err(|e| {
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
        let src = volumes::projection::Sources { pod, node: &self.facts, objects: self.objects.as_ref() };
        let errors = volumes::project(&self.root, &src, self.clock.now());
        for e in &errors {
            self.event(pod, None, EventType::Warning, "FailedMount", e.to_string());
        }
        errors.is_empty()
    }

    /// Pull per policy, create, start, run the `postStart` hook.
    pub(super) async fn start_container(
        &self,
        sync: &PodSync<'_>,
        sc: SpecContainer<'_>,
        restart_count: i32,
        pull: PullPolicy,
        sandbox: &ObservedSandbox,
    ) -> Result<(), StartFailure> {
        let pod = sync.pod;
        let name = sc.name().to_string();
        // The sandbox exists, so its host name was made once already: the same pod and domain
        // make the same one. The DNS events were recorded when the sandbox was made.
        let hostname = hosts::kernel_hostname(pod, &self.dns.domain).map_err(|msg| self.config_error(pod, &sc, msg))?;
        let dns = dns::pod_dns(pod, &self.dns).config;
        let mut sandbox_config = cri_config::sandbox_config(pod, &self.root, sandbox.attempt, hostname, dns);
        if let Some(cgroups) = &self.cgroups {
            sandbox_config.linux.get_or_insert_default().cgroup_parent = cgroups.parent(pod);
        }
        // As the sandbox, the pull goes to the pod's RuntimeClass handler.
        let handler = runtime_class::runtime_handler(self.objects.as_ref(), pod)
            .map_err(|e| self.config_error(pod, &sc, e.to_string()))?;
        // Until the container exists and uses the image, the image collector must keep it.
        let _hold = self.ensure_image(sync, &sc, pull, &sandbox_config, handler).await?;
        let ip = sandbox.ip.clone().unwrap_or_default();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let message_file = layout::termination_message(&self.root, uid, &name, restart_count);
        if let Err(e) = termination_message::prepare(&message_file) {
            let msg = format!("cannot create the termination message file {}: {e}", message_file.display());
            return Err(self.config_error(pod, &sc, msg));
        }
        if hosts::wants_hosts_file(sc.container, &ip) {
            hosts::write_hosts_file(&self.root, pod, &ip, &self.dns.domain)
                .map_err(|msg| self.config_error(pod, &sc, msg))?;
        }
        let pod_ips: Vec<String> = sandbox.ip.iter().cloned().collect();
        let src = EnvSources { pod, pod_ips: &pod_ips, node: &self.facts, objects: self.objects.as_ref() };
        let image_user =
            self.runtime.image_user(sc.image()).await.map_err(|e| self.config_error(pod, &sc, e.to_string()))?;
        let (config, skipped) =
            cri_config::container_config(&src, &sc, &image_user, restart_count, &sandbox.id, &self.root)
                .map_err(|msg| self.config_error(pod, &sc, msg))?;
        for message in skipped {
            self.event(pod, None, EventType::Warning, "InvalidEnvironmentVariableNames", message);
        }
        let id = match self.runtime.create_container(&sandbox.id, &config, &sandbox_config).await {
            Ok(id) => id,
            Err(e) => {
                self.event(pod, Some(&sc), EventType::Warning, "Failed", format!("Error: {e}"));
                return Err(self.failure(StartFailureReason::CreateContainerError, e.to_string()));
            }
        };
        self.event(pod, Some(&sc), EventType::Normal, "Created", wording::created(&name));
        self.start_created(sync, sc, &id, &config.log_path, &ip).await
    }

    /// A container whose config cannot be made: the kubelet's `Failed` event and
    /// `CreateContainerConfigError`.
    fn config_error(&self, pod: &Pod, sc: &SpecContainer<'_>, msg: String) -> StartFailure {
        self.event(pod, Some(sc), EventType::Warning, "Failed", format!("Error: {msg}"));
        self.failure(StartFailureReason::CreateContainerConfigError, msg)
    }

    /// Starts an instance that was created and never started (a podwright that created it
    /// died before starting it), as the tail of [`Self::start_container`].
    pub(super) async fn start_existing(
        &self,
        sync: &PodSync<'_>,
        sc: SpecContainer<'_>,
        id: &str,
        restart_count: i32,
        sandbox: &ObservedSandbox,
    ) -> Result<(), StartFailure> {
        let ip = sandbox.ip.clone().unwrap_or_default();
        let log_path = layout::container_log_relative(sc.name(), restart_count);
        self.start_created(sync, sc, id, &log_path, &ip).await
    }

    /// Follows the created instance's events and output, starts it and runs its `postStart`
    /// hook.
    async fn start_created(
        &self,
        sync: &PodSync<'_>,
        sc: SpecContainer<'_>,
        id: &str,
        log_path: &str,
        ip: &str,
    ) -> Result<(), StartFailure> {
        let pod = sync.pod;
        let name = sc.name().to_string();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        self.dispatcher.register(id, sync.bell);
        if let Some(sink) = &self.log_sink {
            let path = layout::log_directory(&self.root, uid).join(log_path);
            let _ = sink.send(crate::logs::LogTarget { container: name.clone(), path }.into());
        }
        if let Err(e) = self.runtime.start_container(id).await {
            self.event(pod, Some(&sc), EventType::Warning, "Failed", format!("Error: {e}"));
            return Err(self.failure(StartFailureReason::RunContainerError, e.to_string()));
        }
        self.event(pod, Some(&sc), EventType::Normal, "Started", wording::started(&name));
        if let Some(hook) = sc.container.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) {
            let target = self.hook_target(pod, sc.container, id, ip);
            let outcome = tokio::select! {
                // A seeded simulation replays the same choice.
                biased;
                r = Box::pin(hooks::run(&target, Hook::PostStart, hook)) => r,
                // Deletion stops everything anyway; the next pass kills the container.
                _ = deletion_asked(sync.desired.clone()) => Ok(()),
            };
            if let Err(msg) = outcome {
                tracing::warn!(container = %name, "{msg}");
                // The hook's output stays out of the event: it may hold secrets.
                self.event(pod, Some(&sc), EventType::Warning, "FailedPostStartHook", "PostStartHook failed".into());
                let victim = super::kill::Victim { id, spec: Some(sc), name: &name, started: true };
                let grace = podwright_planner::plan::pod_grace(pod);
                Box::pin(self.kill_container(pod, &victim, "FailedPostStartHook".into(), grace, ip, vec![])).await;
                return Err(self.failure(StartFailureReason::PostStartHookError, msg));
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
            runtime: self.runtime.as_ref(),
            events: self.events.as_ref(),
            clock: self.clock,
            pod,
            container,
            container_id: id,
            pod_ip: ip,
            output: self.log_sink.as_ref(),
        }
    }

    /// Makes sure the image is there as the planner's pull policy says, and keeps the image
    /// collector from removing it while the hold returned lives. A successful pull rings the
    /// collector.
    async fn ensure_image(
        &self,
        sync: &PodSync<'_>,
        sc: &SpecContainer<'_>,
        pull: PullPolicy,
        sandbox_config: &PodSandboxConfig,
        runtime_handler: String,
    ) -> Result<Option<Hold>, StartFailure> {
        let pod = sync.pod;
        let image = sc.image();
        let mut hold = self.image_gc.as_ref().map(|gc| gc.hold(image));
        let repository = match podwright_api::image_ref::parse_image_ref(image) {
            Ok(parsed) => {
                // The runtime lists the image by its full name (`docker.io/library/x:latest`).
                if let Some(hold) = &mut hold {
                    hold.add(&parsed.to_string());
                }
                parsed.name()
            }
            Err(e) => {
                let msg = format!("Failed to apply default image tag \"{image}\": {e}");
                self.event(pod, Some(sc), EventType::Warning, "InspectFailed", msg.clone());
                self.event(pod, Some(sc), EventType::Warning, "Failed", "Error: InvalidImageName".into());
                return Err(self.failure(StartFailureReason::InvalidImageName, msg));
            }
        };
        if pull != PullPolicy::Always {
            match self.runtime.image_status(image).await {
                Ok(Some(image_ref)) => {
                    if let Some(hold) = &mut hold {
                        hold.add(&image_ref);
                    }
                    self.event(pod, Some(sc), EventType::Normal, "Pulled", wording::already_present(image));
                    return Ok(hold);
                }
                Ok(None) if pull == PullPolicy::Never => {
                    let msg = format!("Container image \"{image}\" is not present with pull policy of Never");
                    self.event(pod, Some(sc), EventType::Warning, "ErrImageNeverPull", msg.clone());
                    self.event(pod, Some(sc), EventType::Warning, "Failed", "Error: ErrImageNeverPull".into());
                    return Err(self.failure(StartFailureReason::ErrImageNeverPull, msg));
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
                    return Err(self.failure(StartFailureReason::ImageInspectError, e.to_string()));
                }
            }
        }
        let secrets = self.pull_secrets(pod);
        // As the kubelet, credentials (plugins' included) are looked up before `Pulling`, and
        // neither pull time counts the lookup.
        let tries = tokio::select! {
            biased;
            tries = self.credentials_for(&repository, &secrets) => tries,
            _ = deletion_asked(sync.desired.clone()) => Err(CANCELED.to_string()),
        }
        .map_err(|e| self.pull_failed(pod, sc, &e))?;
        self.event(pod, Some(sc), EventType::Normal, "Pulling", wording::pulling(image));
        let asked = self.clock.now();
        let turn = tokio::select! {
            biased;
            turn = self.pulls.turn() => turn,
            // As the kubelet, which cancels a pod's sync when the pod is to stop: a pull still
            // waiting for its turn fails as a cancelled call, without reaching the runtime.
            _ = deletion_asked(sync.desired.clone()) => {
                return Err(self.pull_failed(pod, sc, CANCELED));
            }
        };
        let started = self.clock.now();
        // The kubelet's `ImageSpec`: the pod's annotations and runtime handler.
        let spec = ImageSpec {
            image: image.to_string(),
            annotations: pod.metadata.annotations.clone().unwrap_or_default().into_iter().collect(),
            runtime_handler,
            ..Default::default()
        };
        let pulled = tokio::select! {
            biased;
            pulled = self.pull_trying(&spec, tries, sandbox_config) => pulled,
            // A pull under way is cancelled too: dropping the call resets its stream, which
            // cancels the runtime's pull.
            _ = deletion_asked(sync.desired.clone()) => Err(CANCELED.to_string()),
        };
        let finished = self.clock.now();
        drop(turn);
        match pulled {
            Ok(image_ref) => {
                if let (Some(hold), Some(gc)) = (&mut hold, &self.image_gc) {
                    hold.add(&image_ref);
                    gc.pulled();
                }
                let took = finished.duration_since(started).unsigned_abs();
                let including_waiting = finished.duration_since(asked).unsigned_abs();
                // As the kubelet's puller, which asks for the size after the pull.
                let size = self.runtime.image_size(image).await.unwrap_or_default();
                let message = wording::pulled(image, took, including_waiting, size);
                self.event(pod, Some(sc), EventType::Normal, "Pulled", message);
                Ok(hold)
            }
            Err(e) => Err(self.pull_failed(pod, sc, &e)),
        }
    }

    /// The pod's `imagePullSecrets` that exist in its namespace; those that do not are named in
    /// the kubelet's `FailedToRetrieveImagePullSecret` warning, and the pull goes on without.
    fn pull_secrets(&self, pod: &Pod) -> Vec<Secret> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let refs = pod.spec.iter().flat_map(|s| s.image_pull_secrets.iter().flatten());
        let (mut found, mut missing) = (Vec::new(), Vec::new());
        // Empty names pass validation and are ignored, without a warning.
        for name in refs.map(|r| r.name.as_str()).filter(|n| !n.is_empty()) {
            match self.objects.secret(namespace, name) {
                Some(secret) => found.push(secret),
                None => missing.push(name),
            }
        }
        if !missing.is_empty() {
            let message = format!(
                "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
                missing.join(", ")
            );
            self.event(pod, None, EventType::Warning, "FailedToRetrieveImagePullSecret", message);
        }
        found
    }

    /// The credentials to try for `repository`, in turn: the pod's pull secrets', the node's
    /// files' and the credential plugins' that match. Err: why the secrets could not be read.
    async fn credentials_for(
        &self,
        repository: &str,
        secrets: &[Secret],
    ) -> Result<Vec<credentials::Credential>, String> {
        let pod_keyring = credentials::secrets_keyring(secrets).map_err(|e| e.to_string())?;
        let node_keyring = self.node_credentials.read();
        let plugin_keyring = match &self.credential_plugins {
            Some(plugins) => plugins.keyring(repository).await,
            None => credentials::Keyring::default(),
        };
        Ok(credentials::lookup_all(&pod_keyring, &node_keyring, &plugin_keyring, repository))
    }

    /// Pulls with each credential in turn until one succeeds, or anonymously when there are
    /// none (the kubelet's `PullImage`). Ok: the image's reference. Err: the runtime's errors,
    /// as Go's aggregate error words them.
    async fn pull_trying(
        &self,
        image: &ImageSpec,
        tries: Vec<credentials::Credential>,
        sandbox_config: &PodSandboxConfig,
    ) -> Result<String, String> {
        if tries.is_empty() {
            return self.runtime.pull_image(image, None, sandbox_config).await.map_err(|e| e.to_string());
        }
        let mut errors = Vec::new();
        for credential in tries {
            let auth =
                AuthConfig { username: credential.username, password: credential.password, ..Default::default() };
            match self.runtime.pull_image(image, Some(&auth), sandbox_config).await {
                Ok(image_ref) => return Ok(image_ref),
                Err(e) => errors.push(e.to_string()),
            }
        }
        Err(podwright_api::go::aggregate(errors))
    }

    /// A pull that failed with `error`: the kubelet's events and `ErrImagePull`.
    fn pull_failed(&self, pod: &Pod, sc: &SpecContainer<'_>, error: &str) -> StartFailure {
        let message = format!("Failed to pull image \"{}\": {error}", sc.image());
        self.event(pod, Some(sc), EventType::Warning, "Failed", message);
        self.event(pod, Some(sc), EventType::Warning, "Failed", "Error: ErrImagePull".into());
        self.failure(StartFailureReason::ErrImagePull, error.to_string())
    }
}

/// How a call cancelled by the pod's deletion fails, as gRPC words a cancelled context.
const CANCELED: &str = "rpc error: code = Canceled desc = context canceled";
