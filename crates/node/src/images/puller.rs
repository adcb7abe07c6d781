//! The kubelet's image manager (`EnsureImageExists`): whether to pull by the planner's policy
//! and, for a present image, by whether the pod may use it (the records of the credentials
//! that pulled it), the credentials to pull with (the pod's pull secrets, the node's files, the credential
//! plugins, in that order), the node-wide pull queue, the collector's hold on the image until
//! its container exists, and giving up when the pod is deleted.

use super::credentials::{self, CredentialPlugins, DockerConfigPaths};
use super::gc::{Hold, ImageGc};
use super::pull_records::PullRecords;
use super::queue::PullQueue;
use super::verification::{PullCredentials, PullSecret, Verdict};
use crate::context::NodeContext;
use crate::events::{EventType, wording};
use crate::objects::Objects;
use crate::pod_update::Cancel;
use k8s_openapi::api::core::v1::{Pod, Secret};
use podwright_planner::pod::SpecContainer;
use podwright_planner::{PullPolicy, StartFailure, StartFailureReason};
use podwright_runtime::cri_api::{AuthConfig, ImageSpec, PodSandboxConfig};
use std::sync::Arc;

/// Pulls the images of every pod of the node; only [`crate::builder::Node::build`] makes one.
pub(crate) struct ImagePuller {
    pub ctx: NodeContext,
    /// Where pull secrets are looked up.
    pub objects: Arc<dyn Objects>,
    /// Where the node's own registry credentials are read from, at each pull.
    pub node_credentials: DockerConfigPaths,
    /// The credential provider exec plugins, when the node has some.
    pub plugins: Option<CredentialPlugins>,
    /// Whose pull may go next, node-wide.
    pub queue: PullQueue,
    /// The image garbage collector, when the node collects images.
    pub gc: Option<Arc<ImageGc>>,
    /// Which credentials pulled each image, and the policy on present images.
    pub records: PullRecords,
}

impl ImagePuller {
    /// Makes sure `image` (the container's, or an image volume's it mounts) is there as `pull`
    /// says, and keeps the image collector from removing it while the hold returned lives. A
    /// successful pull rings the collector. Events and failures are the container's. Ok: the
    /// hold, and the reference the runtime knows the image by.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn ensure_image(
        &self,
        pod: &Pod,
        sc: &SpecContainer<'_>,
        image: &str,
        pull: PullPolicy,
        sandbox_config: &PodSandboxConfig,
        runtime_handler: String,
        cancel: &Cancel,
    ) -> Result<(Option<Hold>, String), StartFailure> {
        let mut hold = self.gc.as_ref().map(|gc| gc.hold(image));
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
                self.ctx.event(pod, Some(sc), EventType::Warning, "InspectFailed", msg.clone());
                self.ctx.event(pod, Some(sc), EventType::Warning, "Failed", "Error: InvalidImageName".into());
                return Err(self.ctx.failure(StartFailureReason::InvalidImageName, msg));
            }
        };
        // Read once: their warnings are given once, and both the check and the pull use them.
        let secrets = self.pull_secrets(pod);
        if pull != PullPolicy::Always {
            match self.ctx.runtime.image_status(image).await {
                Ok(Some(image_ref)) => match self.may_use(image, &repository, &image_ref, &secrets) {
                    Ok(message) => {
                        if let Some(hold) = &mut hold {
                            hold.add(&image_ref);
                        }
                        self.ctx.event(pod, Some(sc), EventType::Normal, "Pulled", message);
                        return Ok((hold, image_ref));
                    }
                    // Present, but not this pod's to use: as if absent.
                    Err(()) if pull == PullPolicy::Never => return Err(self.never_pull(pod, sc, image)),
                    Err(()) => {}
                },
                Ok(None) if pull == PullPolicy::Never => return Err(self.never_pull(pod, sc, image)),
                Ok(None) => {}
                Err(e) => {
                    self.ctx.event(
                        pod,
                        Some(sc),
                        EventType::Warning,
                        "InspectFailed",
                        format!("Failed to inspect image \"{image}\": {e}"),
                    );
                    return Err(self.ctx.failure(StartFailureReason::ImageInspectError, e.to_string()));
                }
            }
        }
        // As the kubelet, credentials (plugins' included) are looked up before `Pulling`, and
        // neither pull time counts the lookup.
        let tries = tokio::select! {
            biased;
            tries = self.credentials_for(&repository, &secrets) => tries,
            _ = cancel.requested() => Err(CANCELED.to_string()),
        }
        .map_err(|e| self.pull_failed(pod, sc, &e))?;
        // Before the pull, so that an image whose pull a crash interrupted is still the node's.
        if let Err(e) = self.records.pull_begins(image) {
            let msg = format!("Failed to record image pull intent for container image \"{image}\": {e}");
            return Err(self.pull_failed(pod, sc, &msg));
        }
        self.ctx.event(pod, Some(sc), EventType::Normal, "Pulling", wording::pulling(image));
        let asked = self.ctx.clock.now();
        let turn = tokio::select! {
            biased;
            turn = self.queue.turn() => turn,
            // As the kubelet, which cancels a pod's sync when the pod is to stop: a pull still
            // waiting for its turn fails as a cancelled call, without reaching the runtime.
            _ = cancel.requested() => {
                self.records.pull_failed(image);
                return Err(self.pull_failed(pod, sc, CANCELED));
            }
        };
        let started = self.ctx.clock.now();
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
            _ = cancel.requested() => Err(CANCELED.to_string()),
        };
        let finished = self.ctx.clock.now();
        drop(turn);
        match &pulled {
            Ok((image_ref, used)) => {
                let secret = used.as_ref().and_then(|c| Some(PullSecret::new(c.source.as_ref()?, c)));
                self.records.pulled(image, &repository, image_ref, &PullCredentials::of_pull(secret));
            }
            Err(_) => self.records.pull_failed(image),
        }
        match pulled {
            Ok((image_ref, _)) => {
                if let (Some(hold), Some(gc)) = (&mut hold, &self.gc) {
                    hold.add(&image_ref);
                    gc.pulled();
                }
                let took = finished.duration_since(started).unsigned_abs();
                let including_waiting = finished.duration_since(asked).unsigned_abs();
                // As the kubelet's puller, which asks for the size after the pull.
                let size = self.ctx.runtime.image_size(image).await.unwrap_or_default();
                let message = wording::pulled(image, took, including_waiting, size);
                self.ctx.event(pod, Some(sc), EventType::Normal, "Pulled", message);
                Ok((hold, image_ref))
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
            self.ctx.event(pod, None, EventType::Warning, "FailedToRetrieveImagePullSecret", message);
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
        let plugin_keyring = match &self.plugins {
            Some(plugins) => plugins.keyring(repository).await,
            None => credentials::Keyring::default(),
        };
        Ok(credentials::lookup_all(&pod_keyring, &node_keyring, &plugin_keyring, repository))
    }

    /// Pulls with each credential in turn until one succeeds, or anonymously when there are
    /// none (the kubelet's `PullImage`). Ok: the image's reference, and the credential that
    /// pulled it (none: anonymously). Err: the runtime's errors, as Go's aggregate error words
    /// them.
    async fn pull_trying(
        &self,
        image: &ImageSpec,
        tries: Vec<credentials::Credential>,
        sandbox_config: &PodSandboxConfig,
    ) -> Result<(String, Option<credentials::Credential>), String> {
        if tries.is_empty() {
            let pulled = self.ctx.runtime.pull_image(image, None, sandbox_config).await;
            return pulled.map(|image_ref| (image_ref, None)).map_err(|e| e.to_string());
        }
        let mut errors = Vec::new();
        for credential in tries {
            let auth = AuthConfig {
                username: credential.username.clone(),
                password: credential.password.clone(),
                ..Default::default()
            };
            match self.ctx.runtime.pull_image(image, Some(&auth), sandbox_config).await {
                Ok(image_ref) => return Ok((image_ref, Some(credential))),
                Err(e) => errors.push(e.to_string()),
            }
        }
        Err(podwright_api::go::aggregate(errors))
    }

    /// Whether the pod holding `secrets` may use `image` (repository `repository`), present
    /// as `image_ref`, without pulling it (the kubelet's `MustAttemptImagePull`). Ok: the
    /// `Pulled` event's message.
    fn may_use(&self, image: &str, repository: &str, image_ref: &str, secrets: &[Secret]) -> Result<String, ()> {
        // Only the pod's own secrets' credentials can prove anything: the node's are every pod's.
        let presented: Vec<PullSecret> = match credentials::secrets_keyring(secrets) {
            Ok(keyring) => {
                keyring.lookup(repository).iter().filter_map(|c| Some(PullSecret::new(c.source.as_ref()?, c))).collect()
            }
            // The pull that follows words the error.
            Err(_) => Vec::new(),
        };
        match self.records.check(image, repository, image_ref, &presented) {
            Verdict::MustPull => Err(()),
            Verdict::PodCredentials { .. } | Verdict::Exempt | Verdict::NodeWide => Ok(wording::accessible(image)),
        }
    }

    /// A pod with pull policy `Never` cannot have `image`: absent, or not its to use (the
    /// kubelet words both alike, so as not to tell a pod what another pulled).
    fn never_pull(&self, pod: &Pod, sc: &SpecContainer<'_>, image: &str) -> StartFailure {
        let msg = format!("Container image \"{image}\" is not present with pull policy of Never");
        self.ctx.event(pod, Some(sc), EventType::Warning, "ErrImageNeverPull", msg.clone());
        self.ctx.event(pod, Some(sc), EventType::Warning, "Failed", "Error: ErrImageNeverPull".into());
        self.ctx.failure(StartFailureReason::ErrImageNeverPull, msg)
    }

    /// A pull that failed with `error`: the kubelet's events and `ErrImagePull`.
    fn pull_failed(&self, pod: &Pod, sc: &SpecContainer<'_>, error: &str) -> StartFailure {
        let message = format!("Failed to pull image \"{}\": {error}", sc.image());
        self.ctx.event(pod, Some(sc), EventType::Warning, "Failed", message);
        self.ctx.event(pod, Some(sc), EventType::Warning, "Failed", "Error: ErrImagePull".into());
        self.ctx.failure(StartFailureReason::ErrImagePull, error.to_string())
    }
}

/// How a call cancelled by the pod's deletion fails, as gRPC words a cancelled context.
const CANCELED: &str = "rpc error: code = Canceled desc = context canceled";
