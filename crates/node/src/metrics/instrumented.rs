//! [`Instrumented`]: a runtime that counts and times every call into the node's [`Metrics`]
//! (the kubelet's instrumented CRI services); made by [`Metrics::instrument`].

use crate::metrics::{Metrics, RuntimeOperation as Op};
use async_trait::async_trait;
use podwright_runtime::cri_api::{
    AttachRequest, AuthConfig, ContainerConfig, ContainerStats, ContainerStatus, ExecRequest, ImageSpec,
    PodSandboxConfig, PodSandboxStatus,
};
use podwright_runtime::{
    Clock, ContainerInfo, ExecResult, ImageFs, ImageService, Listed, ListedImage, Runtime, RuntimeEvent, RuntimeResult,
    RuntimeService, SandboxInfo,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// A runtime whose calls are recorded as `kubelet_runtime_operations_*`, timed on the engine's
/// clock. One trait call is one operation: `list_containers`, which reads every container's
/// full status, counts as one `list_containers`; `image_size` is an `image_status` (as the
/// kubelet's `GetImageSize`).
pub(crate) struct Instrumented {
    inner: Arc<dyn Runtime>,
    metrics: Arc<Metrics>,
    clock: Clock,
}

impl Instrumented {
    pub(crate) fn new(inner: Arc<dyn Runtime>, metrics: Arc<Metrics>, clock: Clock) -> Self {
        Instrumented { inner, metrics, clock }
    }

    async fn timed<T>(&self, op: Op, call: impl Future<Output = RuntimeResult<T>>) -> RuntimeResult<T> {
        let start = self.clock.now();
        let result = call.await;
        let took = self.clock.now().duration_since(start).unsigned_abs();
        self.metrics.runtime_operation(op, took, result.is_err());
        result
    }
}

#[async_trait]
impl RuntimeService for Instrumented {
    async fn version(&self) -> RuntimeResult<String> {
        self.timed(Op::Version, self.inner.version()).await
    }

    async fn run_pod_sandbox(&self, config: &PodSandboxConfig, runtime_handler: &str) -> RuntimeResult<String> {
        self.timed(Op::RunPodSandbox, self.inner.run_pod_sandbox(config, runtime_handler)).await
    }

    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.timed(Op::StopPodSandbox, self.inner.stop_pod_sandbox(sandbox_id)).await
    }

    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.timed(Op::RemovePodSandbox, self.inner.remove_pod_sandbox(sandbox_id)).await
    }

    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<PodSandboxStatus> {
        self.timed(Op::PodSandboxStatus, self.inner.pod_sandbox_status(sandbox_id)).await
    }

    async fn list_pod_sandboxes(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<SandboxInfo>> {
        self.timed(Op::ListPodSandbox, self.inner.list_pod_sandboxes(labels)).await
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox_config: &PodSandboxConfig,
    ) -> RuntimeResult<String> {
        self.timed(Op::CreateContainer, self.inner.create_container(sandbox_id, config, sandbox_config)).await
    }

    async fn exec(&self, request: &ExecRequest) -> RuntimeResult<String> {
        self.timed(Op::Exec, self.inner.exec(request)).await
    }

    async fn attach(&self, request: &AttachRequest) -> RuntimeResult<String> {
        self.timed(Op::Attach, self.inner.attach(request)).await
    }

    async fn port_forward(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<String> {
        self.timed(Op::PortForward, self.inner.port_forward(sandbox_id, ports)).await
    }

    async fn start_container(&self, container_id: &str) -> RuntimeResult<()> {
        self.timed(Op::StartContainer, self.inner.start_container(container_id)).await
    }

    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()> {
        self.timed(Op::StopContainer, self.inner.stop_container(container_id, timeout)).await
    }

    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()> {
        self.timed(Op::RemoveContainer, self.inner.remove_container(container_id)).await
    }

    async fn container_status(&self, container_id: &str) -> RuntimeResult<ContainerStatus> {
        self.timed(Op::ContainerStatus, self.inner.container_status(container_id)).await
    }

    async fn list_containers(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<ContainerInfo>> {
        self.timed(Op::ListContainers, self.inner.list_containers(labels)).await
    }

    async fn list_pod_sandbox_states(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<Listed>> {
        self.timed(Op::ListPodSandbox, self.inner.list_pod_sandbox_states(labels)).await
    }

    async fn list_container_states(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<Listed>> {
        self.timed(Op::ListContainers, self.inner.list_container_states(labels)).await
    }

    async fn exec_sync(&self, container_id: &str, cmd: &[String], timeout: Duration) -> RuntimeResult<ExecResult> {
        self.timed(Op::ExecSync, self.inner.exec_sync(container_id, cmd, timeout)).await
    }

    async fn list_container_stats(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<ContainerStats>> {
        self.timed(Op::ListContainerStats, self.inner.list_container_stats(labels)).await
    }

    async fn reopen_container_log(&self, container_id: &str) -> RuntimeResult<()> {
        self.timed(Op::ReopenContainerLog, self.inner.reopen_container_log(container_id)).await
    }

    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<RuntimeEvent> {
        self.inner.subscribe()
    }
}

#[async_trait]
impl ImageService for Instrumented {
    async fn image_status(&self, image: &str) -> RuntimeResult<Option<String>> {
        self.timed(Op::ImageStatus, self.inner.image_status(image)).await
    }

    async fn image_size(&self, image: &str) -> RuntimeResult<u64> {
        self.timed(Op::ImageStatus, self.inner.image_size(image)).await
    }

    async fn image_user(&self, image: &str) -> RuntimeResult<podwright_runtime::ImageUser> {
        self.timed(Op::ImageStatus, self.inner.image_user(image)).await
    }

    async fn pull_image(
        &self,
        image: &ImageSpec,
        auth: Option<&AuthConfig>,
        sandbox_config: &PodSandboxConfig,
    ) -> RuntimeResult<String> {
        self.timed(Op::PullImage, self.inner.pull_image(image, auth, sandbox_config)).await
    }

    async fn list_images(&self) -> RuntimeResult<Vec<ListedImage>> {
        self.timed(Op::ListImages, self.inner.list_images()).await
    }

    async fn image_fs_info(&self) -> RuntimeResult<ImageFs> {
        self.timed(Op::ImageFsInfo, self.inner.image_fs_info()).await
    }

    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        self.timed(Op::RemoveImage, self.inner.remove_image(image)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podwright_runtime::FakeRuntime;

    #[tokio::test(start_paused = true)]
    async fn every_call_is_counted_and_timed_and_failures_are_errors() {
        let clock = Clock::new();
        let fake = FakeRuntime::new(clock);
        fake.set_latency(Duration::from_millis(20));
        let metrics = Arc::new(Metrics::default());
        let rt = metrics.instrument(fake, clock);
        rt.version().await.unwrap();
        assert!(rt.start_container("no-such-container").await.is_err());
        assert!(rt.image_status("localhost/busybox:1.36").await.unwrap().is_none());
        // Forwarded, not left to the trait's default (the fake cannot reopen logs).
        assert!(rt.reopen_container_log("c").await.is_err());
        let text = metrics.render();
        let has = |line: &str| text.lines().any(|l| l == line);
        assert!(has("kubelet_runtime_operations_total{operation_type=\"version\"} 1"), "{text}");
        assert!(has("kubelet_runtime_operations_total{operation_type=\"start_container\"} 1"), "{text}");
        assert!(has("kubelet_runtime_operations_errors_total{operation_type=\"start_container\"} 1"), "{text}");
        assert!(!text.contains("kubelet_runtime_operations_errors_total{operation_type=\"version\"}"), "{text}");
        assert!(has("kubelet_runtime_operations_total{operation_type=\"reopen_container_log\"} 1"), "{text}");
        // 20 ms of virtual latency: above the 0.0125 bound, within 0.03125.
        assert!(has("kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"version\",le=\"0.0125\"} 0"));
        assert!(has("kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"version\",le=\"0.03125\"} 1"));
        assert!(has("kubelet_runtime_operations_duration_seconds_sum{operation_type=\"image_status\"} 0.02"), "{text}");
    }
}
