//! Container start/exit events from containerd's own event service.
//!
//! containerd 1.6 answers CRI `GetContainerEvents` with `Unimplemented`, but its event service
//! (`containerd.services.events.v1.Events/Subscribe`, served on the same socket as CRI) streams
//! `TaskStart` / `TaskExit` as they happen. The CRI container ID is the containerd container ID
//! the events carry. One task per `CriRuntime` holds the subscription and fans the events out on
//! a broadcast channel; it resubscribes with back-off when the stream breaks.
//!
//! containerd publishes `TaskExit` before its CRI plugin has recorded the exit: a ContainerStatus
//! right after the event can still say RUNNING. So an exit is broadcast only once CRI shows it
//! (the state containerd's own CRI `GetContainerEvents` reports in later versions), and a caller
//! that relists on `Exited` sees the container exited; an exit 0 is also broadcast at once, as
//! `Completed`, for a caller that acts on it before the record, unless the container had an OOM
//! kill (`TaskOOM`: CRI will say `OOMKilled`). The CRI plugin records an exit once it has
//! deleted the container's task (`handleContainerExit`), which publishes `TaskDelete`: that
//! event, not a tight poll from the exit on, says when to ask. `Started` is passed on at once:
//! it can arrive before StartContainer returns, while CRI still says CREATED.

use crate::cri_api::runtime_service_client::RuntimeServiceClient;
use crate::cri_api::{ContainerState, ContainerStatusRequest, PodSandboxState, PodSandboxStatusRequest};
use crate::{RuntimeEvent, RuntimeEventKind};
use containerd_client::events::{TaskDelete, TaskExit, TaskOom, TaskStart};
use containerd_client::services::v1::SubscribeRequest;
use containerd_client::services::v1::events_client::EventsClient;
use prost::Message;
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::{broadcast, oneshot, watch};
use tonic::transport::Channel;
use tonic::{Code, Request};

/// The namespace the CRI plugin keeps its containers in.
const CRI_NAMESPACE: &str = "k8s.io";
const TOPIC_EXIT: &str = "/tasks/exit";
const TOPIC_START: &str = "/tasks/start";
const TOPIC_OOM: &str = "/tasks/oom";
const TOPIC_DELETE: &str = "/tasks/delete";
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long an exit may take to show in CRI before it is broadcast anyway. A loaded machine
/// was seen to take over 2 s; an event broadcast too early wakes a worker that still sees the
/// container running and then sleeps until its relist.
const SETTLE_LIMIT: Duration = Duration::from_secs(30);
/// How long an exit waits for its task's `TaskDelete` before CRI is asked anyway: the event may
/// never come (a shim that died, a task someone else deleted).
const DELETE_WAIT: Duration = Duration::from_millis(500);
/// After the delete, CRI records the exit within a file write (10-20 ms seen): asked this often
/// meanwhile, then less and less often for the rare slow case.
const AFTER_DELETE_POLL: Duration = Duration::from_millis(1);
const AFTER_DELETE_TIGHT: Duration = Duration::from_millis(50);
const SLOW_POLL: Duration = Duration::from_millis(50);

/// Where the event subscription stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventStreamState {
    /// Subscribing, or resubscribing after the stream broke. containerd sends the response
    /// headers only with the first event, so a fresh subscription stays here until something
    /// starts or exits.
    Connecting,
    /// Events are arriving.
    Live,
    /// The runtime has no containerd event service (not containerd): no events will come.
    Unsupported,
}

pub(crate) fn spawn(
    channel: Channel,
    endpoint: String,
    events: broadcast::Sender<RuntimeEvent>,
    state: watch::Sender<EventStreamState>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run(channel, endpoint, events, state))
}

async fn run(
    channel: Channel,
    endpoint: String,
    events: broadcast::Sender<RuntimeEvent>,
    state: watch::Sender<EventStreamState>,
) {
    let mut backoff = MIN_BACKOFF;
    let mut warned = false;
    loop {
        let _ = state.send(EventStreamState::Connecting);
        let result = stream_once(&channel, &events, &state).await;
        // A stream that got going was a success however it ended: retry soon, warn again.
        if *state.borrow() == EventStreamState::Live {
            backoff = MIN_BACKOFF;
            warned = false;
        }
        match result {
            Ok(received) => {
                tracing::debug!(%endpoint, received, "containerd event stream ended, resubscribing");
            }
            Err(status) if status.code() == Code::Unimplemented => {
                // Another CRI runtime (CRI-O, ...): callers fall back on relisting.
                tracing::debug!(%endpoint, grpc_message = status.message(), "no containerd event service: container events disabled");
                let _ = state.send(EventStreamState::Unsupported);
                return;
            }
            Err(status) => {
                if warned {
                    tracing::debug!(%endpoint, code = ?status.code(), grpc_message = status.message(), "containerd event stream failed");
                } else {
                    // Once per outage: a runtime that is down for long would otherwise flood the log.
                    tracing::warn!(%endpoint, code = ?status.code(), grpc_message = status.message(), "containerd event stream failed, resubscribing");
                    warned = true;
                }
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Holds one subscription until it ends; returns how many events it delivered.
async fn stream_once(
    channel: &Channel,
    events: &broadcast::Sender<RuntimeEvent>,
    state: &watch::Sender<EventStreamState>,
) -> Result<u64, tonic::Status> {
    let filters = [TOPIC_EXIT, TOPIC_START, TOPIC_OOM, TOPIC_DELETE]
        .iter()
        .map(|topic| format!("namespace==\"{CRI_NAMESPACE}\",topic==\"{topic}\""))
        .collect();
    let mut request = Request::new(SubscribeRequest { filters });
    request.metadata_mut().insert("containerd-namespace", tonic::metadata::MetadataValue::from_static(CRI_NAMESPACE));
    // Resolves only when the first event arrives (containerd sends headers with it).
    let mut stream = EventsClient::new(channel.clone()).subscribe(request).await?.into_inner();
    let _ = state.send(EventStreamState::Live);
    let mut received = 0;
    // Containers that had an OOM kill: CRI records their exit as `OOMKilled`, even an exit 0.
    let mut oom_killed = std::collections::HashSet::new();
    // Exits settling, told of their task's delete. Dropped with the stream: a settling exit
    // whose delete can no longer come asks CRI at once.
    let mut deleted: HashMap<String, oneshot::Sender<()>> = HashMap::new();
    while let Some(envelope) = stream.message().await? {
        let Some(any) = envelope.event else { continue };
        let event = match envelope.topic.as_str() {
            TOPIC_EXIT => match TaskExit::decode(any.value.as_slice()) {
                // An exec'd process (probe, hook) exiting carries its exec ID in `id`; only the
                // init process ending means the container exited.
                Ok(exit) if exit.id == exit.container_id || exit.id.is_empty() => {
                    let finished_at = exit.exited_at.and_then(|at| jiff::Timestamp::new(at.seconds, at.nanos).ok());
                    if let Some(at) = finished_at {
                        log_delay(&exit.container_id, at);
                        // Now, not once CRI shows it: a successor waiting for this exit 0
                        // (a pipelined init or app container), or the pod's end, comes that
                        // much earlier.
                        let oom = oom_killed.remove(&exit.container_id);
                        if exit.exit_status == 0 && !oom {
                            let kind = RuntimeEventKind::Completed { finished_at: at };
                            let _ = events.send(RuntimeEvent { container_id: exit.container_id.clone(), kind });
                        }
                    }
                    RuntimeEvent { container_id: exit.container_id, kind: RuntimeEventKind::Exited }
                }
                Ok(_) => continue,
                Err(e) => {
                    tracing::debug!(error = %e, "undecodable TaskExit");
                    continue;
                }
            },
            TOPIC_OOM => {
                match TaskOom::decode(any.value.as_slice()) {
                    Ok(oom) => {
                        oom_killed.insert(oom.container_id);
                    }
                    Err(e) => tracing::debug!(error = %e, "undecodable TaskOOM"),
                }
                continue;
            }
            TOPIC_START => match TaskStart::decode(any.value.as_slice()) {
                Ok(start) => RuntimeEvent { container_id: start.container_id, kind: RuntimeEventKind::Started },
                Err(e) => {
                    tracing::debug!(error = %e, "undecodable TaskStart");
                    continue;
                }
            },
            TOPIC_DELETE => {
                match TaskDelete::decode(any.value.as_slice()) {
                    Ok(d) if d.id == d.container_id || d.id.is_empty() => {
                        if let Some(settling) = deleted.remove(&d.container_id) {
                            // The settling exit may have stopped waiting: nothing to tell then.
                            let _ = settling.send(());
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::debug!(error = %e, "undecodable TaskDelete"),
                }
                continue;
            }
            _ => continue,
        };
        received += 1;
        match event.kind {
            // No receivers is fine: nobody is waiting right now.
            RuntimeEventKind::Started | RuntimeEventKind::Completed { .. } => {
                let _ = events.send(event);
            }
            RuntimeEventKind::Exited => {
                // Exits whose delete never came: their settling has ended.
                deleted.retain(|_, tx| !tx.is_closed());
                let (tx, rx) = oneshot::channel();
                deleted.insert(event.container_id.clone(), tx);
                // Settling takes a few ms; other events must not wait behind it.
                let client = RuntimeServiceClient::new(channel.clone());
                let events = events.clone();
                tokio::spawn(async move {
                    // No Clock in the CRI adapter: this times a real containerd, on tokio's clock like the sleeps.
                    #[allow(clippy::disallowed_methods)]
                    let started = tokio::time::Instant::now();
                    let polls = settle_exit(client, &event.container_id, rx).await;
                    tracing::trace!(id = %event.container_id, settle_us = started.elapsed().as_micros(), polls, "exit visible in CRI");
                    let _ = events.send(event);
                });
            }
        }
    }
    Ok(received)
}

/// Waits until CRI reports `id` exited (a container) or not ready (a sandbox: a pause
/// container's exit), or `SETTLE_LIMIT` passes: asked once at once, then once its task is
/// deleted (`deleted` resolves) or `DELETE_WAIT` has passed, then tightly for a while and less
/// and less often. Returns how many times CRI was asked.
async fn settle_exit(mut client: RuntimeServiceClient<Channel>, id: &str, deleted: oneshot::Receiver<()>) -> u32 {
    // No Clock in the CRI adapter: this times a real containerd, on tokio's clock like the sleeps.
    #[allow(clippy::disallowed_methods)]
    let started = tokio::time::Instant::now();
    let mut polls = 1;
    if !still_up(&mut client, id).await {
        return polls;
    }
    // Ends early when the stream broke (the sender is gone) or the delete has come already.
    let _ = tokio::time::timeout(DELETE_WAIT, deleted).await;
    #[allow(clippy::disallowed_methods)]
    let deleted_at = tokio::time::Instant::now();
    let mut pause = AFTER_DELETE_POLL;
    loop {
        polls += 1;
        if !still_up(&mut client, id).await {
            return polls;
        }
        if started.elapsed() >= SETTLE_LIMIT {
            tracing::debug!(id, "exit not yet visible in CRI, reporting it anyway");
            return polls;
        }
        tokio::time::sleep(pause).await;
        if deleted_at.elapsed() >= AFTER_DELETE_TIGHT {
            pause = (pause * 2).min(SLOW_POLL);
        }
    }
}

/// Whether CRI still shows `id` up: a container not yet EXITED, or a ready sandbox.
async fn still_up(client: &mut RuntimeServiceClient<Channel>, id: &str) -> bool {
    match client.container_status(ContainerStatusRequest { container_id: id.to_string(), verbose: false }).await {
        Ok(resp) => resp
            .into_inner()
            .status
            // A container whose task exits while StartContainer is still under way is
            // CREATED until CRI records the exit: only EXITED means the exit is visible.
            .is_some_and(|s| s.state != ContainerState::ContainerExited as i32),
        Err(status) if status.code() == Code::NotFound => client
            .pod_sandbox_status(PodSandboxStatusRequest { pod_sandbox_id: id.to_string(), verbose: false })
            .await
            .is_ok_and(|resp| {
                resp.into_inner().status.is_some_and(|s| s.state == PodSandboxState::SandboxReady as i32)
            }),
        // Gone or unreachable: nothing to wait for.
        Err(_) => false,
    }
}

fn log_delay(container_id: &str, exited: jiff::Timestamp) {
    if !tracing::enabled!(tracing::Level::TRACE) {
        return;
    }
    // containerd's exited_at is real wall time: only the real wall clock compares with it.
    #[allow(clippy::disallowed_methods)]
    let delay = jiff::Timestamp::now().duration_since(exited);
    tracing::trace!(container_id, delay_us = delay.as_micros(), "TaskExit received");
}
