//! The container runtime as podwright sees it: the CRI proposal's imperative, container-level
//! interface (`RuntimeService` + `ImageService`), a CRI v1 client over a unix socket, the
//! exit-event stream, the line format of the container log files, a clock, a decorator that
//! makes every call through one hook, and a scriptable `FakeRuntime` for tests.
//!
//! Configs and statuses are CRI v1's own message types (`k8s_cri::v1`), so the fake and the real
//! runtime are driven by exactly what containerd would receive.

pub mod clock;
pub mod cri;
pub mod cri_events;
pub mod cri_log;
pub mod decorator;
pub mod error;
pub mod events;
pub mod fake;
pub mod keeper;
mod neighbours;

pub use clock::Clock;
pub use cri::{CriRuntime, InFlight, connect, connect_with};
pub use cri_events::EventStreamState;
pub use decorator::{Decorated, Hook, RuntimeOperation};
pub use error::{RuntimeError, RuntimeResult};
pub use events::{RuntimeEvent, RuntimeEventKind};
pub use fake::{Behaviour, Call, ExecBehaviour, FakeRuntime, FakeStats, FakeUsage};
pub use k8s_cri::v1 as cri_api;

use async_trait::async_trait;
use cri_api::{
    AttachRequest, AuthConfig, ContainerConfig, ContainerStats, ContainerStatus, ExecRequest, ImageSpec,
    LinuxContainerResources, PodSandboxConfig, PodSandboxStatus, RuntimeHandler,
};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// One sandbox as listed: its status plus the labels podwright put on it.
pub type SandboxInfo = PodSandboxStatus;
/// One container as listed, with full status (exit code, reason, timestamps, labels).
pub type ContainerInfo = ContainerStatus;

/// A sandbox or container as a cheap listing shows it: no exit code, reason or timestamps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub id: String,
    /// The CRI state (`PodSandboxState` or `ContainerState`).
    pub state: i32,
    pub labels: HashMap<String, String>,
    /// When it was made, in nanoseconds since the epoch.
    pub created_at: i64,
}

impl From<&PodSandboxStatus> for Listed {
    fn from(s: &PodSandboxStatus) -> Self {
        Listed { id: s.id.clone(), state: s.state, labels: s.labels.clone(), created_at: s.created_at }
    }
}

impl From<&ContainerStatus> for Listed {
    fn from(c: &ContainerStatus) -> Self {
        Listed { id: c.id.clone(), state: c.state, labels: c.labels.clone(), created_at: c.created_at }
    }
}

/// Result of running a command in a container (probes and exec hooks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecResult {
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

#[async_trait]
pub trait RuntimeService: Send + Sync {
    /// Runtime name and version, e.g. "containerd 1.6.20"; also the reachability check.
    async fn version(&self) -> RuntimeResult<String>;
    /// The runtime's handlers and the features of each (CRI `Status`): empty when the runtime
    /// does not report them, as containerd before 2.0 does not.
    async fn runtime_handlers(&self) -> RuntimeResult<Vec<RuntimeHandler>>;
    async fn run_pod_sandbox(&self, config: &PodSandboxConfig, runtime_handler: &str) -> RuntimeResult<String>;
    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()>;
    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()>;
    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<PodSandboxStatus>;
    /// Sandboxes whose labels include every pair of `labels`.
    async fn list_pod_sandboxes(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<SandboxInfo>>;
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox_config: &PodSandboxConfig,
    ) -> RuntimeResult<String>;
    async fn start_container(&self, container_id: &str) -> RuntimeResult<()>;
    /// SIGTERM (or the image's STOPSIGNAL), then SIGKILL after `timeout`.
    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()>;
    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()>;
    async fn container_status(&self, container_id: &str) -> RuntimeResult<ContainerStatus>;
    /// Full statuses of the containers whose labels include every pair of `labels`.
    async fn list_containers(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<ContainerInfo>>;
    /// The sandboxes whose labels include every pair of `labels`, from one listing call where
    /// [`RuntimeService::list_pod_sandboxes`] asks for each one's status too.
    async fn list_pod_sandbox_states(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<Listed>> {
        Ok(self.list_pod_sandboxes(labels).await?.iter().map(Listed::from).collect())
    }
    /// The containers whose labels include every pair of `labels`, from one listing call where
    /// [`RuntimeService::list_containers`] asks for each one's status too.
    async fn list_container_states(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<Listed>> {
        Ok(self.list_containers(labels).await?.iter().map(Listed::from).collect())
    }
    async fn exec_sync(&self, container_id: &str, cmd: &[String], timeout: Duration) -> RuntimeResult<ExecResult>;
    /// CPU and memory usage of the running containers whose labels include every pair of
    /// `labels` (CRI `ListContainerStats`): cumulative CPU time and the memory working set, each
    /// with the time it was read.
    async fn list_container_stats(&self, _labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<ContainerStats>> {
        Err(RuntimeError::Unimplemented("ListContainerStats".to_string()))
    }
    /// Hands the node's pod CIDR to the runtime (CRI `UpdateRuntimeConfig`), as the kubelet does
    /// once the control plane has given the node one; a runtime with a CNI configuration
    /// template then gives its pods addresses from it.
    async fn update_runtime_config(&self, pod_cidr: &str) -> RuntimeResult<()> {
        Err(RuntimeError::Unimplemented(format!("UpdateRuntimeConfig {pod_cidr}")))
    }
    /// Gives a running container new CPU and memory settings (CRI `UpdateContainerResources`),
    /// an in-place resize.
    async fn update_container_resources(
        &self,
        container_id: &str,
        _resources: &LinuxContainerResources,
    ) -> RuntimeResult<()> {
        Err(RuntimeError::Unimplemented(format!("UpdateContainerResources {container_id}")))
    }
    /// Makes the runtime write a running container's output to a new file at its log path,
    /// after the old file was moved away (log rotation).
    async fn reopen_container_log(&self, container_id: &str) -> RuntimeResult<()> {
        Err(RuntimeError::Unimplemented(format!("ReopenContainerLog {container_id}")))
    }
    /// The URL on the runtime's streaming server where a client runs `request.cmd` in the
    /// container with the streams asked for (CRI `Exec`). The URL is single-use and short-lived.
    async fn exec(&self, request: &ExecRequest) -> RuntimeResult<String>;
    /// The URL on the runtime's streaming server where a client attaches to the container's
    /// main process (CRI `Attach`).
    async fn attach(&self, request: &AttachRequest) -> RuntimeResult<String>;
    /// The URL on the runtime's streaming server that forwards connections to ports in the
    /// sandbox's network namespace (CRI `PortForward`). `ports` may be empty: SPDY clients name
    /// the port per stream.
    async fn port_forward(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<String>;
    /// Container start/exit events as they happen. Events can be missed (reconnects): callers
    /// pair this with a status check after acting and a slow relist.
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<RuntimeEvent>;
}

#[async_trait]
pub trait ImageService: Send + Sync {
    /// The image's reference (`image_ref`, a digest form) when present on the node.
    async fn image_status(&self, image: &str) -> RuntimeResult<Option<String>>;
    /// The image's size in bytes, for the `Pulled` event (the kubelet's `GetImageSize`); 0 when
    /// the runtime does not know it.
    async fn image_size(&self, _image: &str) -> RuntimeResult<u64> {
        Ok(0)
    }
    /// The user the image's config runs as (CRI `ImageStatus` `uid` / `username`), for the
    /// kubelet's `getImageUser`: an image that names neither runs as root.
    async fn image_user(&self, _image: &str) -> RuntimeResult<ImageUser> {
        Ok(ImageUser::Uid(0))
    }
    /// Pulls and returns the image reference. `image` carries the pod's runtime handler and
    /// annotations, as the kubelet's `toRuntimeAPIImageSpec` fills them.
    async fn pull_image(
        &self,
        image: &ImageSpec,
        auth: Option<&AuthConfig>,
        sandbox_config: &PodSandboxConfig,
    ) -> RuntimeResult<String>;
    /// Every image the runtime holds (CRI `ListImages`).
    async fn list_images(&self) -> RuntimeResult<Vec<ListedImage>> {
        Err(RuntimeError::Unimplemented("ListImages".to_string()))
    }
    /// The filesystem the images are on, and how full it is (CRI `ImageFsInfo`, then `statvfs`).
    async fn image_fs_info(&self) -> RuntimeResult<ImageFs> {
        Err(RuntimeError::Unimplemented("ImageFsInfo".to_string()))
    }
    /// Removes the image with this id or name (CRI `RemoveImage`); removing one that is not
    /// there succeeds.
    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        Err(RuntimeError::Unimplemented(format!("RemoveImage {image}")))
    }
}

/// One image the runtime holds, as CRI `ListImages` gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListedImage {
    /// The image's id (`sha256:` of its config for containerd): what `PullImage` and
    /// `ImageStatus` answer, and what `RemoveImage` takes.
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    pub size: u64,
    /// The runtime asks that it never be removed (CRI `pinned`; containerd pins its sandbox
    /// image). [`CriRuntime`] also pins the sandbox image of a runtime that does not say so.
    pub pinned: bool,
}

/// The filesystem that holds the runtime's images: what CRI `ImageFsInfo` says (its mount
/// point and the bytes images use there) and what the filesystem itself says of its size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageFs {
    pub mountpoint: String,
    /// Bytes the runtime's images use.
    pub used_bytes: u64,
    /// The filesystem's size and free bytes (for unprivileged users), as `statvfs` gives them.
    pub capacity_bytes: u64,
    pub available_bytes: u64,
}

/// Who an image's processes run as unless the pod says otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageUser {
    /// A numeric user id.
    Uid(i64),
    /// A user name, resolved by the runtime inside the image.
    Name(String),
}

/// Everything a pod worker needs from a runtime.
pub trait Runtime: RuntimeService + ImageService {}
impl<T: RuntimeService + ImageService> Runtime for T {}
