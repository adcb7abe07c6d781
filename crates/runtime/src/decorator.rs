//! [`Decorated`]: a runtime that makes every call on another through one [`Hook`], told which
//! [`RuntimeOperation`] the call is, so that what is done around the calls (metrics, counts,
//! timelines) is written once and not once per trait method (the kubelet's
//! `instrumentedRuntimeService` and `instrumentedImageManagerService`,
//! `pkg/kubelet/kuberuntime/instrumented_services.go`).

use crate::cri_api::{
    AttachRequest, AuthConfig, ContainerConfig, ContainerStats, ContainerStatus, ExecRequest, ImageSpec,
    LinuxContainerResources, PodSandboxConfig, PodSandboxStatus, RuntimeHandler,
};
use crate::{
    ContainerInfo, ExecResult, ImageFs, ImageService, ImageUser, Listed, ListedImage, Runtime, RuntimeEvent,
    RuntimeResult, RuntimeService, SandboxInfo,
};
use RuntimeOperation as Op;
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// One call of the runtime's, by the kubelet's `operation_type` name (its instrumented CRI
/// services). Declared in the order of those names, which is the order metrics write them in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeOperation {
    Attach,
    ContainerStatus,
    CreateContainer,
    Exec,
    ExecSync,
    ImageFsInfo,
    ImageStatus,
    ListContainerStats,
    ListContainers,
    ListImages,
    ListPodSandbox,
    PodSandboxStatus,
    PortForward,
    PullImage,
    RemoveContainer,
    RemoveImage,
    RemovePodSandbox,
    ReopenContainerLog,
    RunPodSandbox,
    StartContainer,
    Status,
    StopContainer,
    StopPodSandbox,
    UpdateContainerResources,
    UpdateRuntimeConfig,
    Version,
}

impl RuntimeOperation {
    pub const ALL: [RuntimeOperation; 26] = [
        RuntimeOperation::Attach,
        RuntimeOperation::ContainerStatus,
        RuntimeOperation::CreateContainer,
        RuntimeOperation::Exec,
        RuntimeOperation::ExecSync,
        RuntimeOperation::ImageFsInfo,
        RuntimeOperation::ImageStatus,
        RuntimeOperation::ListContainerStats,
        RuntimeOperation::ListContainers,
        RuntimeOperation::ListImages,
        RuntimeOperation::ListPodSandbox,
        RuntimeOperation::PodSandboxStatus,
        RuntimeOperation::PortForward,
        RuntimeOperation::PullImage,
        RuntimeOperation::RemoveContainer,
        RuntimeOperation::RemoveImage,
        RuntimeOperation::RemovePodSandbox,
        RuntimeOperation::ReopenContainerLog,
        RuntimeOperation::RunPodSandbox,
        RuntimeOperation::StartContainer,
        RuntimeOperation::Status,
        RuntimeOperation::StopContainer,
        RuntimeOperation::StopPodSandbox,
        RuntimeOperation::UpdateContainerResources,
        RuntimeOperation::UpdateRuntimeConfig,
        RuntimeOperation::Version,
    ];

    /// The kubelet's `operation_type` label: `run_podsandbox`.
    pub fn label(self) -> &'static str {
        self.names().0
    }

    /// The CRI method: `RunPodSandbox`.
    pub fn method(self) -> &'static str {
        self.names().1
    }

    fn names(self) -> (&'static str, &'static str) {
        match self {
            RuntimeOperation::Attach => ("attach", "Attach"),
            RuntimeOperation::ContainerStatus => ("container_status", "ContainerStatus"),
            RuntimeOperation::CreateContainer => ("create_container", "CreateContainer"),
            RuntimeOperation::Exec => ("exec", "Exec"),
            RuntimeOperation::ExecSync => ("exec_sync", "ExecSync"),
            RuntimeOperation::ImageFsInfo => ("image_fs_info", "ImageFsInfo"),
            RuntimeOperation::ImageStatus => ("image_status", "ImageStatus"),
            RuntimeOperation::ListContainerStats => ("list_container_stats", "ListContainerStats"),
            RuntimeOperation::ListContainers => ("list_containers", "ListContainers"),
            RuntimeOperation::ListImages => ("list_images", "ListImages"),
            RuntimeOperation::ListPodSandbox => ("list_podsandbox", "ListPodSandbox"),
            RuntimeOperation::PodSandboxStatus => ("podsandbox_status", "PodSandboxStatus"),
            RuntimeOperation::PortForward => ("port_forward", "PortForward"),
            RuntimeOperation::PullImage => ("pull_image", "PullImage"),
            RuntimeOperation::RemoveContainer => ("remove_container", "RemoveContainer"),
            RuntimeOperation::RemoveImage => ("remove_image", "RemoveImage"),
            RuntimeOperation::RemovePodSandbox => ("remove_podsandbox", "RemovePodSandbox"),
            RuntimeOperation::ReopenContainerLog => ("reopen_container_log", "ReopenContainerLog"),
            RuntimeOperation::RunPodSandbox => ("run_podsandbox", "RunPodSandbox"),
            RuntimeOperation::StartContainer => ("start_container", "StartContainer"),
            RuntimeOperation::Status => ("status", "Status"),
            RuntimeOperation::StopContainer => ("stop_container", "StopContainer"),
            RuntimeOperation::StopPodSandbox => ("stop_podsandbox", "StopPodSandbox"),
            RuntimeOperation::UpdateContainerResources => ("update_container", "UpdateContainerResources"),
            RuntimeOperation::UpdateRuntimeConfig => ("update_runtime_config", "UpdateRuntimeConfig"),
            RuntimeOperation::Version => ("version", "Version"),
        }
    }
}

/// What a [`Decorated`] runtime does around each call.
pub trait Hook: Send + Sync {
    /// Runs `call`, the operation `op` (on `image`, for the calls that name one), and gives its
    /// result.
    fn around<T: Send>(
        &self,
        op: RuntimeOperation,
        image: Option<&str>,
        call: impl Future<Output = RuntimeResult<T>> + Send,
    ) -> impl Future<Output = RuntimeResult<T>> + Send;
}

/// A runtime that makes each call on `inner` through its hook. One trait call is one operation,
/// named as the kubelet names it: `list_containers`, which reads every container's full status,
/// is one `list_containers`; `list_pod_sandbox_states` is a `list_podsandbox`; `image_size` and
/// `image_user` are each an `image_status` (as the kubelet's `GetImageSize`). Event
/// subscriptions are no call and go to `inner` as they are.
pub struct Decorated<H> {
    inner: Arc<dyn Runtime>,
    hook: H,
}

impl<H: Hook> Decorated<H> {
    pub fn new(inner: Arc<dyn Runtime>, hook: H) -> Self {
        Decorated { inner, hook }
    }

    pub fn hook(&self) -> &H {
        &self.hook
    }
}

#[async_trait]
impl<H: Hook> RuntimeService for Decorated<H> {
    async fn version(&self) -> RuntimeResult<String> {
        self.hook.around(Op::Version, None, self.inner.version()).await
    }

    async fn runtime_handlers(&self) -> RuntimeResult<Vec<RuntimeHandler>> {
        self.hook.around(Op::Status, None, self.inner.runtime_handlers()).await
    }

    async fn run_pod_sandbox(&self, config: &PodSandboxConfig, runtime_handler: &str) -> RuntimeResult<String> {
        self.hook.around(Op::RunPodSandbox, None, self.inner.run_pod_sandbox(config, runtime_handler)).await
    }

    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.hook.around(Op::StopPodSandbox, None, self.inner.stop_pod_sandbox(sandbox_id)).await
    }

    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.hook.around(Op::RemovePodSandbox, None, self.inner.remove_pod_sandbox(sandbox_id)).await
    }

    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<PodSandboxStatus> {
        self.hook.around(Op::PodSandboxStatus, None, self.inner.pod_sandbox_status(sandbox_id)).await
    }

    async fn list_pod_sandboxes(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<SandboxInfo>> {
        self.hook.around(Op::ListPodSandbox, None, self.inner.list_pod_sandboxes(labels)).await
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox_config: &PodSandboxConfig,
    ) -> RuntimeResult<String> {
        let call = self.inner.create_container(sandbox_id, config, sandbox_config);
        self.hook.around(Op::CreateContainer, None, call).await
    }

    async fn start_container(&self, container_id: &str) -> RuntimeResult<()> {
        self.hook.around(Op::StartContainer, None, self.inner.start_container(container_id)).await
    }

    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()> {
        self.hook.around(Op::StopContainer, None, self.inner.stop_container(container_id, timeout)).await
    }

    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()> {
        self.hook.around(Op::RemoveContainer, None, self.inner.remove_container(container_id)).await
    }

    async fn container_status(&self, container_id: &str) -> RuntimeResult<ContainerStatus> {
        self.hook.around(Op::ContainerStatus, None, self.inner.container_status(container_id)).await
    }

    async fn list_containers(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<ContainerInfo>> {
        self.hook.around(Op::ListContainers, None, self.inner.list_containers(labels)).await
    }

    async fn list_pod_sandbox_states(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<Listed>> {
        self.hook.around(Op::ListPodSandbox, None, self.inner.list_pod_sandbox_states(labels)).await
    }

    async fn list_container_states(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<Listed>> {
        self.hook.around(Op::ListContainers, None, self.inner.list_container_states(labels)).await
    }

    async fn exec_sync(&self, container_id: &str, cmd: &[String], timeout: Duration) -> RuntimeResult<ExecResult> {
        self.hook.around(Op::ExecSync, None, self.inner.exec_sync(container_id, cmd, timeout)).await
    }

    async fn list_container_stats(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<ContainerStats>> {
        self.hook.around(Op::ListContainerStats, None, self.inner.list_container_stats(labels)).await
    }

    async fn reopen_container_log(&self, container_id: &str) -> RuntimeResult<()> {
        self.hook.around(Op::ReopenContainerLog, None, self.inner.reopen_container_log(container_id)).await
    }

    async fn update_container_resources(
        &self,
        container_id: &str,
        resources: &LinuxContainerResources,
    ) -> RuntimeResult<()> {
        let call = self.inner.update_container_resources(container_id, resources);
        self.hook.around(Op::UpdateContainerResources, None, call).await
    }

    async fn update_runtime_config(&self, pod_cidr: &str) -> RuntimeResult<()> {
        self.hook.around(Op::UpdateRuntimeConfig, None, self.inner.update_runtime_config(pod_cidr)).await
    }

    async fn exec(&self, request: &ExecRequest) -> RuntimeResult<String> {
        self.hook.around(Op::Exec, None, self.inner.exec(request)).await
    }

    async fn attach(&self, request: &AttachRequest) -> RuntimeResult<String> {
        self.hook.around(Op::Attach, None, self.inner.attach(request)).await
    }

    async fn port_forward(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<String> {
        self.hook.around(Op::PortForward, None, self.inner.port_forward(sandbox_id, ports)).await
    }

    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<RuntimeEvent> {
        self.inner.subscribe()
    }
}

#[async_trait]
impl<H: Hook> ImageService for Decorated<H> {
    async fn image_status(&self, image: &str) -> RuntimeResult<Option<String>> {
        self.hook.around(Op::ImageStatus, Some(image), self.inner.image_status(image)).await
    }

    async fn image_size(&self, image: &str) -> RuntimeResult<u64> {
        self.hook.around(Op::ImageStatus, Some(image), self.inner.image_size(image)).await
    }

    async fn image_user(&self, image: &str) -> RuntimeResult<ImageUser> {
        self.hook.around(Op::ImageStatus, Some(image), self.inner.image_user(image)).await
    }

    async fn pull_image(
        &self,
        image: &ImageSpec,
        auth: Option<&AuthConfig>,
        sandbox_config: &PodSandboxConfig,
    ) -> RuntimeResult<String> {
        let call = self.inner.pull_image(image, auth, sandbox_config);
        self.hook.around(Op::PullImage, Some(&image.image), call).await
    }

    async fn list_images(&self) -> RuntimeResult<Vec<ListedImage>> {
        self.hook.around(Op::ListImages, None, self.inner.list_images()).await
    }

    async fn image_fs_info(&self) -> RuntimeResult<ImageFs> {
        self.hook.around(Op::ImageFsInfo, None, self.inner.image_fs_info()).await
    }

    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        self.hook.around(Op::RemoveImage, Some(image), self.inner.remove_image(image)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Clock, FakeRuntime};
    use std::sync::Mutex;

    /// Notes each call's operation and image.
    #[derive(Default)]
    struct Notes(Mutex<Vec<(RuntimeOperation, Option<String>)>>);

    impl Hook for Notes {
        async fn around<T: Send>(
            &self,
            op: RuntimeOperation,
            image: Option<&str>,
            call: impl Future<Output = RuntimeResult<T>> + Send,
        ) -> RuntimeResult<T> {
            self.0.lock().unwrap().push((op, image.map(str::to_string)));
            call.await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_call_is_one_operation_of_the_kubelets_and_image_calls_name_their_image() {
        let rt = Decorated::new(FakeRuntime::new(Clock::new()), Notes::default());
        let none = BTreeMap::new();
        rt.version().await.unwrap();
        rt.list_pod_sandbox_states(&none).await.unwrap();
        rt.list_container_states(&none).await.unwrap();
        let _ = rt.image_size("busybox").await;
        let _ = rt.image_user("busybox").await;
        let _ = rt.reopen_container_log("c").await;
        let pull = ImageSpec { image: "busybox".into(), ..Default::default() };
        let _ = rt.pull_image(&pull, None, &PodSandboxConfig::default()).await;
        let image = |op| (op, Some("busybox".to_string()));
        assert_eq!(
            *rt.hook().0.lock().unwrap(),
            [
                (Op::Version, None),
                (Op::ListPodSandbox, None),
                (Op::ListContainers, None),
                image(Op::ImageStatus),
                image(Op::ImageStatus),
                (Op::ReopenContainerLog, None),
                image(Op::PullImage),
            ]
        );
    }
}
