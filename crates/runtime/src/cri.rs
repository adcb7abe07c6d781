//! CRI v1 client over a unix socket: `RuntimeService` and `ImageService` for containerd (or any
//! CRI v1 runtime), plus the container event stream from `cri_events`.

use crate::cri_api::{
    self, AttachRequest, AuthConfig, ContainerConfig, ContainerFilter, ContainerStatus, ExecRequest, ImageSpec,
    PodSandboxConfig, PodSandboxFilter, PodSandboxStatus, image_service_client::ImageServiceClient,
    runtime_service_client::RuntimeServiceClient,
};
use crate::cri_events::{self, EventStreamState};
use crate::keeper::RuntimeSocket;
use crate::{
    ContainerInfo, ExecResult, ImageFs, ImageService, Listed, ListedImage, RuntimeError, RuntimeEvent, RuntimeResult,
    RuntimeService, SandboxInfo,
};
use async_trait::async_trait;
use hyper_util::rt::TokioIo;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UnixStream;
use tokio::sync::{Semaphore, broadcast, watch};
use tokio::task::JoinSet;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::{Code, Request, Status};

/// Deadline of an ordinary runtime call: the kubelet's default `--runtime-request-timeout`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// How long `connect` waits for the runtime to answer `Version`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Extra gRPC deadline on top of an ExecSync's own timeout, so that the runtime, which kills the
/// command when the CRI timeout fires, reports that itself (as DeadlineExceeded with its message)
/// before our side gives up.
const EXEC_DEADLINE_SLACK: Duration = Duration::from_secs(5);
/// Container and sandbox statuses can be large (labels, annotations, mounts of many containers).
const MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;
/// Status calls in flight at once while listing: enough to hide the per-call latency without
/// opening a thousand streams on the runtime's connection.
const LIST_CONCURRENCY: usize = 16;
/// Events buffered per subscriber before a slow one starts missing them (it then sees `Lagged`
/// and relists).
const EVENT_BUFFER: usize = 4096;

/// A CRI v1 runtime reached over a unix socket. Build it with [`connect`]; share it behind an
/// `Arc`. Dropping it stops its event task.
pub struct CriRuntime {
    endpoint: String,
    runtime: RuntimeServiceClient<Channel>,
    images: ImageServiceClient<Channel>,
    events: broadcast::Sender<RuntimeEvent>,
    event_state: watch::Receiver<EventStreamState>,
    event_task: tokio::task::JoinHandle<()>,
}

/// What becomes of the runtime calls in flight when podwright dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InFlight {
    /// containerd cancels them: enough for a command that ends with its calls.
    Cancelled,
    /// containerd finishes them ([`crate::keeper`]): what a daemon that resumes its pods after
    /// a crash needs.
    Finished,
}

/// Connects to the CRI runtime at `endpoint` (`unix:///path/to.sock` or a bare path), checks that
/// it answers `Version`, and starts the background task that feeds [`RuntimeService::subscribe`].
/// Must be called inside a tokio runtime.
pub async fn connect(endpoint: &str) -> RuntimeResult<CriRuntime> {
    connect_with(endpoint, InFlight::Cancelled).await
}

/// [`connect`], choosing what becomes of the calls in flight if podwright dies.
pub async fn connect_with(endpoint: &str, in_flight: InFlight) -> RuntimeResult<CriRuntime> {
    let path = socket_path(endpoint)?;
    let unreachable = |message: String| RuntimeError::Unreachable { endpoint: endpoint.to_string(), message };

    // The URI is a placeholder required by tonic: the connector below ignores it and dials the
    // socket. The channel redials by itself after the runtime restarts.
    let endpoint_config = Endpoint::from_static("http://[::]").connect_timeout(CONNECT_TIMEOUT);
    let connector_path = path.clone();
    let channel = endpoint_config
        .clone()
        .connect_with_connector(tower::service_fn(move |_: Uri| dial(connector_path.clone(), in_flight)))
        .await
        .map_err(|e| unreachable(error_chain(&e)))?;

    let runtime = RuntimeServiceClient::new(channel.clone())
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE);
    let images = ImageServiceClient::new(channel.clone())
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE);

    // A socket that accepts connections is not yet a CRI v1 runtime: the first call decides.
    let mut probe = runtime.clone();
    let version = probe
        .version(timed(cri_api::VersionRequest { version: "v1".into() }, CONNECT_TIMEOUT))
        .await
        .map_err(|status| {
            let why = match status.code() {
                Code::Unimplemented => format!("the socket does not serve CRI v1: {}", status_message(&status)),
                _ => status_message(&status),
            };
            unreachable(why)
        })?
        .into_inner();
    tracing::debug!(
        endpoint,
        runtime = %version.runtime_name,
        version = %version.runtime_version,
        api = %version.runtime_api_version,
        "connected to the container runtime"
    );

    let (events, _) = broadcast::channel(EVENT_BUFFER);
    let (state_tx, event_state) = watch::channel(EventStreamState::Connecting);
    // The event subscription never ends: on a kept connection, containerd would go on writing
    // to it, unread, after podwright's death. It has a connection of its own.
    let event_channel = match in_flight {
        InFlight::Cancelled => channel,
        InFlight::Finished => endpoint_config
            .connect_with_connector_lazy(tower::service_fn(move |_: Uri| dial(path.clone(), InFlight::Cancelled))),
    };
    let event_task = cri_events::spawn(event_channel, endpoint.to_string(), events.clone(), state_tx);

    Ok(CriRuntime { endpoint: endpoint.to_string(), runtime, images, events, event_state, event_task })
}

/// Opens one connection to the runtime's socket, with a keeper when its calls must outlive us.
async fn dial(path: String, in_flight: InFlight) -> std::io::Result<TokioIo<RuntimeSocket>> {
    let stream = UnixStream::connect(path).await?;
    Ok(TokioIo::new(match in_flight {
        InFlight::Cancelled => RuntimeSocket::plain(stream),
        InFlight::Finished => RuntimeSocket::kept(stream)?,
    }))
}

impl CriRuntime {
    /// One `ListPodSandbox` call: the sandboxes with these labels, without their statuses.
    async fn pod_sandbox_list(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<cri_api::PodSandbox>> {
        let req = cri_api::ListPodSandboxRequest {
            filter: Some(PodSandboxFilter { label_selector: label_selector(labels), ..Default::default() }),
        };
        let resp = self.rt().list_pod_sandbox(request(req)).await.map_err(|s| self.err("ListPodSandbox", s))?;
        Ok(resp.into_inner().items)
    }

    /// One `ListContainers` call: the containers with these labels, without their statuses.
    async fn container_list(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<cri_api::Container>> {
        let req = cri_api::ListContainersRequest {
            filter: Some(ContainerFilter { label_selector: label_selector(labels), ..Default::default() }),
        };
        let resp = self.rt().list_containers(request(req)).await.map_err(|s| self.err("ListContainers", s))?;
        Ok(resp.into_inner().containers)
    }

    /// One `ImageStatus` call: the image as the runtime knows it, `None` when it has no such image.
    async fn image(&self, image: &str) -> RuntimeResult<Option<cri_api::Image>> {
        let req = cri_api::ImageStatusRequest {
            image: Some(ImageSpec { image: image.to_string(), ..Default::default() }),
            verbose: false,
        };
        let resp =
            self.images.clone().image_status(request(req)).await.map_err(|s| self.err("ImageStatus", s))?.into_inner();
        Ok(resp.image)
    }

    /// The image the runtime makes sandboxes from, from the config its verbose `Status` shows
    /// (`sandboxImage`, containerd's CRI plugin); `None` when it does not say.
    async fn sandbox_image(&self) -> Option<String> {
        let req = cri_api::StatusRequest { verbose: true };
        let resp = self.rt().status(request(req)).await.ok()?.into_inner();
        // Only the one field is decoded: the config is large, and this runs at every collection.
        #[derive(serde::Deserialize)]
        struct CriConfig {
            #[serde(rename = "sandboxImage", default)]
            sandbox_image: String,
        }
        let config: CriConfig = serde_json::from_str(resp.info.get("config")?).ok()?;
        Some(config.sandbox_image).filter(|s| !s.is_empty())
    }

    /// Forgets what the host's neighbour table holds for a new sandbox's addresses (see
    /// [`crate::neighbours`]). A failure costs only reachability for some seconds, so it is
    /// logged, not returned: the sandbox is made.
    async fn forget_stale_neighbours(&self, sandbox_id: &str) {
        let ips: Vec<IpAddr> = match sandbox_status(&self.runtime, &self.endpoint, sandbox_id.to_string()).await {
            Ok(status) => status
                .network
                .iter()
                .flat_map(|n| std::iter::once(&n.ip).chain(n.additional_ips.iter().map(|a| &a.ip)))
                .filter_map(|ip| ip.parse().ok())
                .collect(),
            Err(e) => {
                tracing::debug!(sandbox = sandbox_id, error = %e, "no addresses to forget stale neighbours of");
                return;
            }
        };
        if ips.is_empty() {
            return;
        }
        match crate::neighbours::forget(&ips).await {
            Ok(0) => {}
            Ok(removed) => tracing::debug!(sandbox = sandbox_id, ?ips, removed, "forgot stale neighbour entries"),
            Err(e) => {
                tracing::warn!(sandbox = sandbox_id, ?ips, error = %e, "could not forget stale neighbour entries")
            }
        }
    }

    /// The endpoint this runtime was reached at, as given to [`connect`].
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Whether container events are flowing. `Unsupported` means the runtime has no containerd
    /// event service: callers must rely on relisting alone.
    pub fn event_stream_state(&self) -> EventStreamState {
        *self.event_state.borrow()
    }

    fn rt(&self) -> RuntimeServiceClient<Channel> {
        self.runtime.clone()
    }

    fn err(&self, op: &'static str, status: Status) -> RuntimeError {
        map_status(&self.endpoint, op, status)
    }
}

impl Drop for CriRuntime {
    fn drop(&mut self) {
        self.event_task.abort();
    }
}

impl std::fmt::Debug for CriRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CriRuntime")
            .field("endpoint", &self.endpoint)
            .field("events", &*self.event_state.borrow())
            .finish_non_exhaustive()
    }
}

/// The socket path of `unix:///path` or a bare path. Other schemes (tcp, npipe) are refused: CRI
/// runtimes on Linux listen on unix sockets and we do no TLS.
pub fn socket_path(endpoint: &str) -> RuntimeResult<String> {
    let path = match endpoint.split_once("://") {
        Some(("unix", rest)) => rest,
        Some((scheme, _)) => {
            return Err(RuntimeError::Unreachable {
                endpoint: endpoint.to_string(),
                message: format!("unsupported endpoint scheme {scheme:?}: only unix sockets are supported"),
            });
        }
        None => endpoint,
    };
    if path.is_empty() {
        return Err(RuntimeError::Unreachable {
            endpoint: endpoint.to_string(),
            message: "empty socket path".to_string(),
        });
    }
    Ok(path.to_string())
}

/// The size and the space available to unprivileged users of the filesystem holding `path`, in
/// bytes (`statvfs`: blocks and available blocks times the fragment size).
pub fn fs_space(path: &str) -> std::io::Result<(u64, u64)> {
    let c_path = std::ffi::CString::new(path).map_err(std::io::Error::other)?;
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c_path` is a valid NUL-terminated string and `stats` points to writable memory
    // of the right size, which statvfs fills on success.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stats.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled the struct.
    let stats = unsafe { stats.assume_init() };
    let fragment = stats.f_frsize;
    Ok((stats.f_blocks.saturating_mul(fragment), stats.f_bavail.saturating_mul(fragment)))
}

/// A request carrying a gRPC deadline (sent as `grpc-timeout`, and enforced by the channel too).
fn timed<T>(message: T, timeout: Duration) -> Request<T> {
    let mut request = Request::new(message);
    request.set_timeout(timeout);
    request
}

fn request<T>(message: T) -> Request<T> {
    timed(message, DEFAULT_REQUEST_TIMEOUT)
}

/// Whole seconds for CRI timeouts, rounded up so that a sub-second timeout does not become 0
/// (which CRI reads as "no timeout").
fn ceil_secs(d: Duration) -> i64 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i64::try_from(secs).unwrap_or(i64::MAX)
}

/// The message of a status plus whatever transport error caused it (tonic's own text for those
/// is just "transport error").
fn status_message(status: &Status) -> String {
    let mut message = status.message().to_string();
    let mut source = std::error::Error::source(status);
    while let Some(err) = source {
        let text = err.to_string();
        // tonic's wrapper says nothing its cause does not say better.
        if text != "transport error" && !message.contains(&text) {
            if !message.is_empty() {
                message.push_str(": ");
            }
            message.push_str(&text);
        }
        source = err.source();
    }
    message
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        message.push_str(": ");
        message.push_str(&e.to_string());
        source = e.source();
    }
    message
}

/// tonic's client-side deadline surfaces as `Cancelled` with this text, not `DeadlineExceeded`.
fn is_local_timeout(status: &Status) -> bool {
    status.code() == Code::Cancelled && status.message().contains("Timeout expired")
}

/// True when the call never reached the runtime or the connection broke underneath it. tonic
/// attaches the local error (connect, h2, hyper) as the status's source; a status the runtime
/// sent has none.
fn is_transport_failure(status: &Status) -> bool {
    std::error::Error::source(status).is_some()
}

pub(crate) fn map_status(endpoint: &str, op: &'static str, status: Status) -> RuntimeError {
    tracing::debug!(op, code = ?status.code(), grpc_message = status.message(), "runtime call failed");
    if is_local_timeout(&status) {
        return RuntimeError::DeadlineExceeded(format!("{op}: no answer from the runtime in time"));
    }
    match status.code() {
        Code::NotFound => RuntimeError::NotFound(status.message().to_string()),
        Code::DeadlineExceeded => RuntimeError::DeadlineExceeded(status.message().to_string()),
        Code::Unimplemented => RuntimeError::Unimplemented(format!("{op}: {}", status.message())),
        Code::Unavailable => {
            RuntimeError::Unreachable { endpoint: endpoint.to_string(), message: status_message(&status) }
        }
        _ if is_transport_failure(&status) => {
            RuntimeError::Unreachable { endpoint: endpoint.to_string(), message: status_message(&status) }
        }
        _ => RuntimeError::Failed(status.message().to_string()),
    }
}

fn label_selector(labels: &BTreeMap<String, String>) -> HashMap<String, String> {
    labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Runs `fetch` for every id, at most `LIST_CONCURRENCY` at a time, keeping the order of `ids`.
/// `Ok(None)` drops an item (it vanished between the list and its status call).
async fn fetch_each<T, F, Fut>(ids: Vec<String>, fetch: F) -> RuntimeResult<Vec<T>>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = RuntimeResult<Option<T>>> + Send + 'static,
    T: Send + 'static,
{
    let limit = Arc::new(Semaphore::new(LIST_CONCURRENCY));
    let mut set = JoinSet::new();
    for (i, id) in ids.into_iter().enumerate() {
        let limit = limit.clone();
        let fut = fetch(id);
        set.spawn(async move {
            // The semaphore is never closed, so acquiring only fails if that changes.
            let _permit = limit.acquire_owned().await;
            (i, fut.await)
        });
    }
    let mut found = Vec::with_capacity(set.len());
    while let Some(joined) = set.join_next().await {
        let (i, result) = joined.map_err(|e| RuntimeError::Failed(format!("status task failed: {e}")))?;
        if let Some(item) = result? {
            found.push((i, item));
        }
    }
    found.sort_unstable_by_key(|(i, _)| *i);
    Ok(found.into_iter().map(|(_, item)| item).collect())
}

#[async_trait]
impl RuntimeService for CriRuntime {
    async fn version(&self) -> RuntimeResult<String> {
        let resp = self
            .rt()
            .version(request(cri_api::VersionRequest { version: "v1".into() }))
            .await
            .map_err(|s| self.err("Version", s))?
            .into_inner();
        Ok(format!("{} {}", resp.runtime_name, resp.runtime_version))
    }

    async fn runtime_handlers(&self) -> RuntimeResult<Vec<cri_api::RuntimeHandler>> {
        let req = cri_api::StatusRequest { verbose: false };
        let resp = self.rt().status(request(req)).await.map_err(|s| self.err("Status", s))?.into_inner();
        Ok(resp.runtime_handlers)
    }

    async fn run_pod_sandbox(&self, config: &PodSandboxConfig, runtime_handler: &str) -> RuntimeResult<String> {
        let req = cri_api::RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: runtime_handler.to_string(),
        };
        let resp = self.rt().run_pod_sandbox(request(req)).await.map_err(|s| self.err("RunPodSandbox", s))?;
        let id = resp.into_inner().pod_sandbox_id;
        self.forget_stale_neighbours(&id).await;
        Ok(id)
    }

    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        let req = cri_api::StopPodSandboxRequest { pod_sandbox_id: sandbox_id.to_string() };
        self.rt().stop_pod_sandbox(request(req)).await.map_err(|s| self.err("StopPodSandbox", s))?;
        Ok(())
    }

    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        let req = cri_api::RemovePodSandboxRequest { pod_sandbox_id: sandbox_id.to_string() };
        self.rt().remove_pod_sandbox(request(req)).await.map_err(|s| self.err("RemovePodSandbox", s))?;
        Ok(())
    }

    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<PodSandboxStatus> {
        sandbox_status(&self.runtime, &self.endpoint, sandbox_id.to_string()).await
    }

    async fn list_pod_sandboxes(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<SandboxInfo>> {
        let items = self.pod_sandbox_list(labels).await?;
        // ListPodSandbox lacks the network status, so every sandbox costs one status call.
        let ids = items.into_iter().map(|s| s.id).collect();
        fetch_each(ids, |id| {
            let client = self.runtime.clone();
            let endpoint = self.endpoint.clone();
            async move {
                match sandbox_status(&client, &endpoint, id).await {
                    Ok(status) => Ok(Some(status)),
                    Err(RuntimeError::NotFound(_)) => Ok(None),
                    Err(e) => Err(e),
                }
            }
        })
        .await
    }

    async fn list_pod_sandbox_states(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<Listed>> {
        let items = self.pod_sandbox_list(labels).await?;
        Ok(items
            .into_iter()
            .map(|s| Listed { id: s.id, state: s.state, labels: s.labels, created_at: s.created_at })
            .collect())
    }

    async fn list_container_states(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<Listed>> {
        let containers = self.container_list(labels).await?;
        Ok(containers
            .into_iter()
            .map(|c| Listed { id: c.id, state: c.state, labels: c.labels, created_at: c.created_at })
            .collect())
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox_config: &PodSandboxConfig,
    ) -> RuntimeResult<String> {
        let req = cri_api::CreateContainerRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            config: Some(config.clone()),
            sandbox_config: Some(sandbox_config.clone()),
        };
        let resp = self.rt().create_container(request(req)).await.map_err(|s| self.err("CreateContainer", s))?;
        Ok(resp.into_inner().container_id)
    }

    async fn start_container(&self, container_id: &str) -> RuntimeResult<()> {
        let req = cri_api::StartContainerRequest { container_id: container_id.to_string() };
        self.rt().start_container(request(req)).await.map_err(|s| self.err("StartContainer", s))?;
        Ok(())
    }

    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()> {
        let req = cri_api::StopContainerRequest { container_id: container_id.to_string(), timeout: ceil_secs(timeout) };
        // The call blocks for up to `timeout` while the container handles SIGTERM.
        let deadline = timeout.saturating_add(DEFAULT_REQUEST_TIMEOUT);
        self.rt().stop_container(timed(req, deadline)).await.map_err(|s| self.err("StopContainer", s))?;
        Ok(())
    }

    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()> {
        let req = cri_api::RemoveContainerRequest { container_id: container_id.to_string() };
        self.rt().remove_container(request(req)).await.map_err(|s| self.err("RemoveContainer", s))?;
        Ok(())
    }

    async fn container_status(&self, container_id: &str) -> RuntimeResult<ContainerStatus> {
        container_status(&self.runtime, &self.endpoint, container_id.to_string()).await
    }

    async fn list_containers(&self, labels: &BTreeMap<String, String>) -> RuntimeResult<Vec<ContainerInfo>> {
        let containers = self.container_list(labels).await?;
        // ListContainers has no exit code, reason or timestamps beyond creation.
        let ids = containers.into_iter().map(|c| c.id).collect();
        fetch_each(ids, |id| {
            let client = self.runtime.clone();
            let endpoint = self.endpoint.clone();
            async move {
                match container_status(&client, &endpoint, id).await {
                    Ok(status) => Ok(Some(status)),
                    Err(RuntimeError::NotFound(_)) => Ok(None),
                    Err(e) => Err(e),
                }
            }
        })
        .await
    }

    async fn exec_sync(&self, container_id: &str, cmd: &[String], timeout: Duration) -> RuntimeResult<ExecResult> {
        let req = cri_api::ExecSyncRequest {
            container_id: container_id.to_string(),
            cmd: cmd.to_vec(),
            timeout: ceil_secs(timeout),
        };
        // CRI's timeout 0 means "no timeout": then only the ordinary request deadline applies.
        let deadline = if timeout.is_zero() {
            DEFAULT_REQUEST_TIMEOUT
        } else {
            Duration::from_secs(ceil_secs(timeout).unsigned_abs()).saturating_add(EXEC_DEADLINE_SLACK)
        };
        let resp = self.rt().exec_sync(timed(req, deadline)).await.map_err(|s| self.err("ExecSync", s))?;
        let resp = resp.into_inner();
        Ok(ExecResult { exit_code: resp.exit_code, stdout: resp.stdout, stderr: resp.stderr })
    }

    async fn list_container_stats(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> RuntimeResult<Vec<cri_api::ContainerStats>> {
        let req = cri_api::ListContainerStatsRequest {
            filter: Some(cri_api::ContainerStatsFilter {
                label_selector: label_selector(labels),
                ..Default::default()
            }),
        };
        let resp = self.rt().list_container_stats(request(req)).await.map_err(|s| self.err("ListContainerStats", s))?;
        Ok(resp.into_inner().stats)
    }

    async fn reopen_container_log(&self, container_id: &str) -> RuntimeResult<()> {
        let req = cri_api::ReopenContainerLogRequest { container_id: container_id.to_string() };
        self.rt()
            .reopen_container_log(timed(req, DEFAULT_REQUEST_TIMEOUT))
            .await
            .map_err(|s| self.err("ReopenContainerLog", s))?;
        Ok(())
    }

    async fn update_container_resources(
        &self,
        container_id: &str,
        resources: &cri_api::LinuxContainerResources,
    ) -> RuntimeResult<()> {
        let req = cri_api::UpdateContainerResourcesRequest {
            container_id: container_id.to_string(),
            linux: Some(resources.clone()),
            ..Default::default()
        };
        self.rt()
            .update_container_resources(timed(req, DEFAULT_REQUEST_TIMEOUT))
            .await
            .map_err(|s| self.err("UpdateContainerResources", s))?;
        Ok(())
    }

    async fn update_runtime_config(&self, pod_cidr: &str) -> RuntimeResult<()> {
        let network = cri_api::NetworkConfig { pod_cidr: pod_cidr.to_string() };
        let req = cri_api::UpdateRuntimeConfigRequest {
            runtime_config: Some(cri_api::RuntimeConfig { network_config: Some(network) }),
        };
        self.rt()
            .update_runtime_config(timed(req, DEFAULT_REQUEST_TIMEOUT))
            .await
            .map_err(|s| self.err("UpdateRuntimeConfig", s))?;
        Ok(())
    }

    async fn exec(&self, req: &ExecRequest) -> RuntimeResult<String> {
        let resp = self.rt().exec(request(req.clone())).await.map_err(|s| self.err("Exec", s))?;
        Ok(resp.into_inner().url)
    }

    async fn attach(&self, req: &AttachRequest) -> RuntimeResult<String> {
        let resp = self.rt().attach(request(req.clone())).await.map_err(|s| self.err("Attach", s))?;
        Ok(resp.into_inner().url)
    }

    async fn port_forward(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<String> {
        let req = cri_api::PortForwardRequest { pod_sandbox_id: sandbox_id.to_string(), port: ports.to_vec() };
        let resp = self.rt().port_forward(request(req)).await.map_err(|s| self.err("PortForward", s))?;
        Ok(resp.into_inner().url)
    }

    fn subscribe(&self) -> broadcast::Receiver<RuntimeEvent> {
        self.events.subscribe()
    }
}

async fn container_status(
    client: &RuntimeServiceClient<Channel>,
    endpoint: &str,
    id: String,
) -> RuntimeResult<ContainerStatus> {
    let req = cri_api::ContainerStatusRequest { container_id: id, verbose: false };
    let resp =
        client.clone().container_status(request(req)).await.map_err(|s| map_status(endpoint, "ContainerStatus", s))?;
    resp.into_inner()
        .status
        .ok_or_else(|| RuntimeError::Failed("ContainerStatus: the runtime returned no status".into()))
}

async fn sandbox_status(
    client: &RuntimeServiceClient<Channel>,
    endpoint: &str,
    id: String,
) -> RuntimeResult<PodSandboxStatus> {
    let req = cri_api::PodSandboxStatusRequest { pod_sandbox_id: id, verbose: false };
    let resp = client
        .clone()
        .pod_sandbox_status(request(req))
        .await
        .map_err(|s| map_status(endpoint, "PodSandboxStatus", s))?;
    resp.into_inner()
        .status
        .ok_or_else(|| RuntimeError::Failed("PodSandboxStatus: the runtime returned no status".into()))
}

#[async_trait]
impl ImageService for CriRuntime {
    /// Answers the image's `id` (`sha256:` of its config), not a repo digest: that is what the
    /// kubelet's `GetImageRef` returns and what containerd's `PullImage` answers as `image_ref`,
    /// so both calls give the same form. (The API `imageID` of a container comes from
    /// `ContainerStatus.image_ref`, where containerd puts the repo digest when it knows one.)
    /// Falls back to the first repo digest for a runtime that leaves `id` empty.
    async fn image_status(&self, image: &str) -> RuntimeResult<Option<String>> {
        Ok(self
            .image(image)
            .await?
            .and_then(|img| if img.id.is_empty() { img.repo_digests.into_iter().next() } else { Some(img.id) }))
    }

    async fn image_size(&self, image: &str) -> RuntimeResult<u64> {
        Ok(self.image(image).await?.map_or(0, |img| img.size))
    }

    async fn image_user(&self, image: &str) -> RuntimeResult<crate::ImageUser> {
        let image = self.image(image).await?.unwrap_or_default();
        Ok(match (image.uid, image.username) {
            (Some(uid), _) => crate::ImageUser::Uid(uid.value),
            (None, name) if !name.is_empty() => crate::ImageUser::Name(name),
            (None, _) => crate::ImageUser::Uid(0),
        })
    }

    async fn pull_image(
        &self,
        image: &ImageSpec,
        auth: Option<&AuthConfig>,
        sandbox_config: &PodSandboxConfig,
    ) -> RuntimeResult<String> {
        let req = cri_api::PullImageRequest {
            image: Some(image.clone()),
            auth: auth.cloned(),
            sandbox_config: Some(sandbox_config.clone()),
        };
        // No deadline: a large image on a slow registry legitimately takes minutes, and the
        // kubelet does not bound pulls either. The caller can drop the future to give up.
        let resp = self.images.clone().pull_image(Request::new(req)).await.map_err(|s| self.err("PullImage", s))?;
        Ok(resp.into_inner().image_ref)
    }

    /// Pins the runtime's sandbox image too when the runtime leaves it unpinned (containerd
    /// before 1.7): every new sandbox needs it, and without a network it cannot come back.
    async fn list_images(&self) -> RuntimeResult<Vec<ListedImage>> {
        let req = cri_api::ListImagesRequest { filter: None };
        let resp = self.images.clone().list_images(request(req)).await.map_err(|s| self.err("ListImages", s))?;
        let sandbox_image = match self.sandbox_image().await {
            Some(name) => self.image_status(&name).await.ok().flatten(),
            None => None,
        };
        Ok(resp
            .into_inner()
            .images
            .into_iter()
            .map(|img| ListedImage {
                pinned: img.pinned || sandbox_image.as_deref() == Some(img.id.as_str()),
                id: img.id,
                repo_tags: img.repo_tags,
                repo_digests: img.repo_digests,
                size: img.size,
            })
            .collect())
    }

    /// The runtime names the filesystem and what its images use there; its size and free
    /// space come from the filesystem itself, as cadvisor reads them for the kubelet.
    async fn image_fs_info(&self) -> RuntimeResult<ImageFs> {
        let req = cri_api::ImageFsInfoRequest {};
        let resp = self.images.clone().image_fs_info(request(req)).await.map_err(|s| self.err("ImageFsInfo", s))?;
        let Some(usage) = resp.into_inner().image_filesystems.into_iter().next() else {
            return Err(RuntimeError::Failed("the runtime reports no image filesystem".to_string()));
        };
        let mountpoint = usage.fs_id.map(|f| f.mountpoint).unwrap_or_default();
        // statvfs can block (a stale network mount): off the async threads.
        let path = mountpoint.clone();
        let (capacity_bytes, available_bytes) = tokio::task::spawn_blocking(move || fs_space(&path))
            .await
            .map_err(std::io::Error::other)
            .and_then(|r| r)
            .map_err(|e| RuntimeError::Failed(format!("cannot read the image filesystem at {mountpoint:?}: {e}")))?;
        Ok(ImageFs { used_bytes: usage.used_bytes.map_or(0, |u| u.value), mountpoint, capacity_bytes, available_bytes })
    }

    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        let req =
            cri_api::RemoveImageRequest { image: Some(ImageSpec { image: image.to_string(), ..Default::default() }) };
        self.images.clone().remove_image(request(req)).await.map_err(|s| self.err("RemoveImage", s))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(socket_path("unix:///run/containerd/containerd.sock").unwrap(), "/run/containerd/containerd.sock");
        assert_eq!(socket_path("/run/x.sock").unwrap(), "/run/x.sock");
        assert!(matches!(socket_path("tcp://127.0.0.1:1234"), Err(RuntimeError::Unreachable { .. })));
        assert!(matches!(socket_path("unix://"), Err(RuntimeError::Unreachable { .. })));
    }

    #[test]
    fn filesystem_space_is_read_and_a_missing_path_is_an_error() {
        let (capacity, available) = fs_space("/").unwrap();
        assert!(capacity > 0 && available <= capacity, "{capacity} {available}");
        assert!(fs_space("/no/such/dir/here").is_err());
    }

    #[test]
    fn timeouts_round_up() {
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(2)), 2);
        assert_eq!(ceil_secs(Duration::from_millis(2500)), 3);
    }

    #[test]
    fn status_codes() {
        let map = |s| map_status("unix:///x", "Op", s);
        assert_eq!(map(Status::not_found("gone")), RuntimeError::NotFound("gone".into()));
        assert_eq!(
            map(Status::deadline_exceeded("timeout 1s exceeded")),
            RuntimeError::DeadlineExceeded("timeout 1s exceeded".into())
        );
        assert!(matches!(map(Status::unimplemented("x")), RuntimeError::Unimplemented(_)));
        assert!(matches!(map(Status::unavailable("down")), RuntimeError::Unreachable { .. }));
        assert!(matches!(map(Status::cancelled("Timeout expired")), RuntimeError::DeadlineExceeded(_)));
        assert_eq!(map(Status::unknown("boom")), RuntimeError::Failed("boom".into()));
    }

    #[tokio::test]
    async fn missing_socket_is_unreachable() {
        let err = connect("unix:///nonexistent/podwright-test.sock").await.unwrap_err();
        match err {
            RuntimeError::Unreachable { endpoint, message } => {
                assert_eq!(endpoint, "unix:///nonexistent/podwright-test.sock");
                assert!(message.contains("No such file"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
