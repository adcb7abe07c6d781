//! A runtime wrapper that counts the calls podwright makes and, on request, records when each
//! one started and ended (the timeline of a run).
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use async_trait::async_trait;
use podwright_runtime::cri_api::{
    AttachRequest, AuthConfig, ContainerConfig, ContainerStats, ContainerStatus, ExecRequest, ImageSpec,
    PodSandboxConfig, PodSandboxStatus,
};
use podwright_runtime::{
    ContainerInfo, ExecResult, ImageService, Runtime, RuntimeEvent, RuntimeResult, RuntimeService, SandboxInfo,
};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One runtime call: what, when it was issued and when it returned.
#[derive(Debug, Clone)]
pub struct Span {
    pub op: &'static str,
    /// The image it asked about or pulled (image calls only).
    pub image: Option<String>,
    pub start: Instant,
    pub end: Instant,
}

/// Whether a call changes the runtime's state (an "action") or only reads it.
#[derive(Clone, Copy)]
enum Kind {
    Action,
    Read,
}

pub struct Counted {
    inner: Arc<dyn Runtime>,
    actions: AtomicU64,
    reads: AtomicU64,
    timeline: Option<Mutex<Vec<Span>>>,
}

impl Counted {
    /// Counts only (cheap), or counts and records every call's span.
    pub fn new(inner: Arc<dyn Runtime>, record: bool) -> Counted {
        Counted { inner, actions: AtomicU64::new(0), reads: AtomicU64::new(0), timeline: record.then(Default::default) }
    }

    /// State-changing calls so far: sandbox run/stop/remove, container create/start/stop/remove,
    /// pulls (and execs).
    pub fn actions(&self) -> u64 {
        self.actions.load(Ordering::Relaxed)
    }

    /// Read-only calls so far: statuses, lists, image status, version.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The recorded spans since the last call, oldest first.
    pub fn take_timeline(&self) -> Vec<Span> {
        self.timeline
            .as_ref()
            .map(|t| std::mem::take(&mut *t.lock().unwrap_or_else(|e| e.into_inner())))
            .unwrap_or_default()
    }

    async fn call<T>(&self, op: &'static str, kind: Kind, fut: impl Future<Output = T>) -> T {
        self.call_on(op, kind, None, fut).await
    }

    /// [`Self::call`] that records the image it is about.
    async fn call_on<T>(&self, op: &'static str, kind: Kind, image: Option<&str>, fut: impl Future<Output = T>) -> T {
        match kind {
            Kind::Action => self.actions.fetch_add(1, Ordering::Relaxed),
            Kind::Read => self.reads.fetch_add(1, Ordering::Relaxed),
        };
        let Some(timeline) = &self.timeline else { return fut.await };
        let start = Instant::now();
        let out = fut.await;
        let span = Span { op, image: image.map(str::to_string), start, end: Instant::now() };
        timeline.lock().unwrap_or_else(|e| e.into_inner()).push(span);
        out
    }
}

#[async_trait]
impl RuntimeService for Counted {
    async fn version(&self) -> RuntimeResult<String> {
        self.call("Version", Kind::Read, self.inner.version()).await
    }
    async fn run_pod_sandbox(&self, config: &PodSandboxConfig, runtime_handler: &str) -> RuntimeResult<String> {
        self.call("RunPodSandbox", Kind::Action, self.inner.run_pod_sandbox(config, runtime_handler)).await
    }
    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.call("StopPodSandbox", Kind::Action, self.inner.stop_pod_sandbox(sandbox_id)).await
    }
    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.call("RemovePodSandbox", Kind::Action, self.inner.remove_pod_sandbox(sandbox_id)).await
    }
    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<PodSandboxStatus> {
        self.call("PodSandboxStatus", Kind::Read, self.inner.pod_sandbox_status(sandbox_id)).await
    }
    async fn list_pod_sandboxes(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<SandboxInfo>> {
        self.call("ListPodSandbox", Kind::Read, self.inner.list_pod_sandboxes(labels)).await
    }
    async fn list_container_stats(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<ContainerStats>> {
        self.call("ListContainerStats", Kind::Read, self.inner.list_container_stats(labels)).await
    }
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox_config: &PodSandboxConfig,
    ) -> RuntimeResult<String> {
        self.call("CreateContainer", Kind::Action, self.inner.create_container(sandbox_id, config, sandbox_config))
            .await
    }
    async fn start_container(&self, container_id: &str) -> RuntimeResult<()> {
        self.call("StartContainer", Kind::Action, self.inner.start_container(container_id)).await
    }
    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()> {
        self.call("StopContainer", Kind::Action, self.inner.stop_container(container_id, timeout)).await
    }
    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()> {
        self.call("RemoveContainer", Kind::Action, self.inner.remove_container(container_id)).await
    }
    async fn container_status(&self, container_id: &str) -> RuntimeResult<ContainerStatus> {
        self.call("ContainerStatus", Kind::Read, self.inner.container_status(container_id)).await
    }
    async fn list_containers(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<ContainerInfo>> {
        self.call("ListContainers", Kind::Read, self.inner.list_containers(labels)).await
    }
    async fn exec_sync(&self, container_id: &str, cmd: &[String], timeout: Duration) -> RuntimeResult<ExecResult> {
        self.call("ExecSync", Kind::Action, self.inner.exec_sync(container_id, cmd, timeout)).await
    }
    async fn exec(&self, request: &ExecRequest) -> RuntimeResult<String> {
        self.call("Exec", Kind::Action, self.inner.exec(request)).await
    }
    async fn attach(&self, request: &AttachRequest) -> RuntimeResult<String> {
        self.call("Attach", Kind::Action, self.inner.attach(request)).await
    }
    async fn port_forward(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<String> {
        self.call("PortForward", Kind::Action, self.inner.port_forward(sandbox_id, ports)).await
    }
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<RuntimeEvent> {
        self.inner.subscribe()
    }
}

#[async_trait]
impl ImageService for Counted {
    async fn image_status(&self, image: &str) -> RuntimeResult<Option<String>> {
        self.call_on("ImageStatus", Kind::Read, Some(image), self.inner.image_status(image)).await
    }
    async fn image_size(&self, image: &str) -> RuntimeResult<u64> {
        self.call_on("ImageStatus", Kind::Read, Some(image), self.inner.image_size(image)).await
    }
    async fn image_user(&self, image: &str) -> RuntimeResult<podwright_runtime::ImageUser> {
        self.call_on("ImageStatus", Kind::Read, Some(image), self.inner.image_user(image)).await
    }
    async fn pull_image(
        &self,
        image: &ImageSpec,
        auth: Option<&AuthConfig>,
        sandbox_config: &PodSandboxConfig,
    ) -> RuntimeResult<String> {
        self.call_on("PullImage", Kind::Action, Some(&image.image), self.inner.pull_image(image, auth, sandbox_config))
            .await
    }
    async fn list_images(&self) -> RuntimeResult<Vec<podwright_runtime::ListedImage>> {
        self.call("ListImages", Kind::Read, self.inner.list_images()).await
    }
    async fn image_fs_info(&self) -> RuntimeResult<podwright_runtime::ImageFs> {
        self.call("ImageFsInfo", Kind::Read, self.inner.image_fs_info()).await
    }
    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        self.call("RemoveImage", Kind::Action, self.inner.remove_image(image)).await
    }
}
