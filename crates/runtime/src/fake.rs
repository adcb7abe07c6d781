//! A scriptable in-memory runtime for tests and simulations, in virtual time.
//!
//! It follows containerd 1.6's CRI behaviour where tests can tell the difference: exit reasons
//! (`Completed` iff exit 0, `Error`, `OOMKilled`, `StartError` with exit 128), SIGTERM → 143 and
//! SIGKILL → 137, idempotent removes, forced stops on sandbox stop and remove, name reservation
//! per (sandbox, name, attempt), images resolved under docker's normalization, and a `NotFound`
//! for a container whose image is not on the node.
//!
//! Time comes from the [`Clock`] and tokio's timers only, so under
//! `#[tokio::test(start_paused = true)]` a container scripted to exit after an hour does so
//! instantly in wall time and at +1 h on the clock.

mod faults;
mod images;
mod index;
mod service;
#[cfg(test)]
mod tests;

use crate::cri_api::{
    AuthConfig, ContainerConfig, ContainerMetadata, ContainerState, ContainerStatus, PodSandboxConfig,
    PodSandboxNetworkStatus, PodSandboxState, PodSandboxStatus,
};
use crate::{
    Clock, ContainerInfo, ExecResult, ImageFs, ImageService, Listed, ListedImage, RuntimeError, RuntimeEvent,
    RuntimeEventKind, RuntimeResult, RuntimeService, SandboxInfo,
};
use async_trait::async_trait;
use index::LabelIndex;
use jiff::Timestamp;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;
use tokio::sync::broadcast;
use tokio::task::AbortHandle;

pub use faults::{CallFault, EventFault};

/// What the i-th container created under a name does once started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// Exits with `code` `after` its start (`Completed` for 0, else `Error`). With `after` zero it
    /// has exited by the time `start_container` returns.
    Exit { code: i32, after: Duration },
    /// Runs until stopped; SIGTERM ends it with 143.
    RunForever,
    /// Killed by the OOM killer `after` its start: exit 137, reason `OOMKilled`.
    Oom { after: Duration },
    /// `create_container` fails with this message; no container is created.
    FailCreate(String),
    /// `start_container` fails with this message; the container is left `EXITED` with exit code
    /// 128, reason `StartError` and the message, as containerd does.
    FailStart(String),
    /// Ignores SIGTERM: runs until SIGKILL at the end of the stop timeout (exit 137).
    IgnoreTerm,
}

/// One runtime call, as recorded by [`FakeRuntime::calls`]. Container calls carry the container's
/// name (the CRI `metadata.name`), sandbox calls the pod's name (the sandbox `metadata.name`).
/// A call naming an id the fake does not know records that id as the name.
/// Reads (statuses, lists, `image_status`, `version`) are not recorded; see [`FakeStats`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    RunPodSandbox {
        name: String,
        attempt: u32,
    },
    StopPodSandbox {
        name: String,
    },
    RemovePodSandbox {
        name: String,
    },
    CreateContainer {
        name: String,
        attempt: u32,
    },
    StartContainer {
        name: String,
    },
    StopContainer {
        name: String,
        timeout: Duration,
    },
    RemoveContainer {
        name: String,
    },
    ExecSync {
        name: String,
    },
    /// A streaming `Exec`: the command and the streams asked for.
    Exec {
        name: String,
        cmd: Vec<String>,
        stdin: bool,
        stdout: bool,
        stderr: bool,
        tty: bool,
    },
    Attach {
        name: String,
        stdin: bool,
        stdout: bool,
        stderr: bool,
        tty: bool,
    },
    PortForward {
        name: String,
        ports: Vec<i32>,
    },
    PullImage {
        image: String,
        /// The `ImageSpec`'s runtime handler: the pod's RuntimeClass handler, empty by default.
        runtime_handler: String,
    },
    /// A `RemoveImage`, with the id or name it was given.
    RemoveImage {
        image: String,
    },
    /// An `UpdateContainerResources`: the CFS quota, the CPU shares and the memory limit given.
    UpdateContainerResources {
        name: String,
        cpu_quota: i64,
        cpu_shares: i64,
        memory_limit: i64,
    },
}

/// A change of the fake's state, as [`FakeRuntime::changes`] records them once
/// [`record_changes`](FakeRuntime::record_changes) is on: what the runtime did, whatever made it
/// (a call, a scripted exit, a test's hand), in the order it happened. Unlike the call log, it
/// holds effects only: a call that failed changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A sandbox was made and is ready; `uid` is the pod UID of its CRI metadata.
    SandboxReady {
        id: String,
        uid: String,
        attempt: u32,
        ip: String,
    },
    /// A ready sandbox is not any more (stopped, or its pause process died).
    SandboxNotReady {
        id: String,
    },
    SandboxRemoved {
        id: String,
    },
    ContainerCreated {
        id: String,
        sandbox_id: String,
        name: String,
        attempt: u32,
    },
    ContainerStarted {
        id: String,
    },
    /// A running container ended, or a start failed (`StartError`, never started).
    ContainerExited {
        id: String,
        exit_code: i32,
        reason: String,
    },
    ContainerRemoved {
        id: String,
    },
}

/// What an `exec_sync` in a scripted container does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecBehaviour {
    /// Answers at once.
    Reply(ExecResult),
    /// The command runs this long (virtual time) and then answers; if that is longer than the
    /// call's timeout, the call fails with `DeadlineExceeded` when the timeout fires.
    Slow(Duration, ExecResult),
    /// The runtime fails the call.
    Fail(RuntimeError),
}

impl From<ExecResult> for ExecBehaviour {
    fn from(result: ExecResult) -> Self {
        ExecBehaviour::Reply(result)
    }
}

impl ExecBehaviour {
    /// A reply with this exit code and no output.
    pub fn exit(code: i32) -> Self {
        ExecBehaviour::Reply(ExecResult { exit_code: code, ..Default::default() })
    }
}

type ExecFn = Arc<dyn Fn(&[String]) -> ExecBehaviour + Send + Sync>;

/// Counters of the calls the call log leaves out, and what the fake holds right now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeStats {
    pub version: u64,
    pub pod_sandbox_status: u64,
    pub list_pod_sandboxes: u64,
    pub container_status: u64,
    pub list_containers: u64,
    /// Cheap listings of states only (sandboxes and containers each count).
    pub list_states: u64,
    pub image_status: u64,
    pub list_container_stats: u64,
    /// Sandboxes not yet removed.
    pub sandboxes: usize,
    /// Containers not yet removed.
    pub containers: usize,
}

/// The scriptable fake. [`FakeRuntime::new`] returns it in an `Arc` because the timers of running
/// containers hold a weak reference back to it.
pub struct FakeRuntime {
    clock: Clock,
    me: Weak<FakeRuntime>,
    /// Per-call latency in nanoseconds; 0 skips the sleep entirely.
    latency_nanos: AtomicU64,
    events: broadcast::Sender<RuntimeEvent>,
    reads: ReadCounters,
    /// Kept apart from `state`: the event hook is consulted while `state` is locked.
    faults: Mutex<faults::Hooks>,
    state: Mutex<State>,
}

#[derive(Default)]
struct ReadCounters {
    version: AtomicU64,
    pod_sandbox_status: AtomicU64,
    list_pod_sandboxes: AtomicU64,
    container_status: AtomicU64,
    list_containers: AtomicU64,
    list_states: AtomicU64,
    image_status: AtomicU64,
    list_container_stats: AtomicU64,
}

struct Script<T> {
    steps: Vec<T>,
    used: usize,
}

impl<T: Clone> Script<T> {
    /// The next step; the last one repeats. `None` only for an empty script.
    fn next(&mut self) -> Option<T> {
        let step = self.steps.get(self.used.min(self.steps.len().checked_sub(1)?))?.clone();
        self.used += 1;
        Some(step)
    }
}

enum ExecScript {
    Steps(Script<ExecBehaviour>),
    Func(ExecFn),
}

struct PullRule {
    takes: Duration,
    credentials: Option<(String, String)>,
}

struct Sandbox {
    status: PodSandboxStatus,
    seq: u64,
    /// The pod's name, shared with the call log entries.
    pod: Arc<str>,
    log_directory: String,
    containers: Vec<Arc<str>>,
}

struct Container {
    status: ContainerStatus,
    seq: u64,
    sandbox_id: Arc<str>,
    behaviour: Behaviour,
    /// The timer that ends a scripted exit; aborted when the container ends otherwise.
    exit_timer: Option<AbortHandle>,
}

impl Container {
    fn name(&self) -> &str {
        self.status.metadata.as_ref().map_or("", |m| m.name.as_str())
    }

    fn is_running(&self) -> bool {
        self.status.state == ContainerState::ContainerRunning as i32
    }
}

struct LoggedCall {
    at: Timestamp,
    /// The pod's name, for [`FakeRuntime::calls_for_pod`].
    pod: Option<Arc<str>>,
    call: Call,
}

struct State {
    seq: u64,
    /// Sandboxes created so far, for their IPs.
    ips: u32,
    sandboxes: HashMap<Arc<str>, Sandbox>,
    containers: HashMap<Arc<str>, Container>,
    sandbox_labels: LabelIndex,
    container_labels: LabelIndex,
    scripts: HashMap<String, Script<Behaviour>>,
    pod_scripts: HashMap<String, HashMap<String, Script<Behaviour>>>,
    exec_scripts: HashMap<String, ExecScript>,
    /// Normalized image name → image reference.
    images: HashMap<String, String>,
    /// Image reference → size in bytes, for images given one.
    image_sizes: HashMap<String, u64>,
    /// References of the images the runtime pins.
    pinned_images: HashSet<String>,
    /// The image filesystem's capacity and the bytes used there by anything but images.
    image_fs: Option<(u64, u64)>,
    pulls: HashMap<String, PullRule>,
    handlers: HashSet<String>,
    /// What `runtime_handlers` reports: nothing, as containerd 1.6, unless a test says.
    handler_features: Vec<crate::cri_api::RuntimeHandler>,
    /// Base URL of the streaming server that `exec`, `attach` and `port_forward` answer with.
    streaming: Option<String>,
    log_calls: bool,
    calls: Vec<LoggedCall>,
    /// `None` unless changes are recorded.
    changes: Option<Vec<(Timestamp, Change)>>,
    /// Container name → what containers of that name use, for `list_container_stats`.
    usage: HashMap<String, FakeUsage>,
    /// Container name → the bytes its writable layer holds, for `list_container_stats`.
    writable_layers: HashMap<String, u64>,
}

/// What the running containers of one name use, as [`FakeRuntime::set_usage`] scripts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FakeUsage {
    /// CPU used without pause, in thousandths of a core: the cumulative CPU time grows by
    /// this much of the time since the container started.
    pub millicores: u64,
    pub working_set_bytes: u64,
}

impl State {
    /// The sandboxes whose labels include `labels`, in creation order (reproducible simulations).
    fn select_sandboxes(&self, labels: &BTreeMap<String, String>) -> impl Iterator<Item = &Sandbox> {
        let mut found: Vec<&Sandbox> = match self.sandbox_labels.select(labels) {
            Some(ids) => ids.iter().filter_map(|id| self.sandboxes.get(id)).collect(),
            None => self.sandboxes.values().collect(),
        };
        found.sort_unstable_by_key(|s| s.seq);
        found.into_iter()
    }

    /// A container's name for the call log and the fault hook; its id when unknown.
    fn container_name(&self, id: &str) -> String {
        self.containers.get(id).map_or_else(|| id.to_string(), |c| c.name().to_string())
    }

    /// A sandbox's pod name for the call log and the fault hook; its id when unknown.
    fn sandbox_name(&self, id: &str) -> String {
        self.sandboxes.get(id).map_or_else(|| id.to_string(), |s| s.pod.to_string())
    }

    /// The containers whose labels include `labels`, in creation order.
    fn select_containers(&self, labels: &BTreeMap<String, String>) -> impl Iterator<Item = &Container> {
        let mut found: Vec<&Container> = match self.container_labels.select(labels) {
            Some(ids) => ids.iter().filter_map(|id| self.containers.get(id)).collect(),
            None => self.containers.values().collect(),
        };
        found.sort_unstable_by_key(|c| c.seq);
        found.into_iter()
    }
}

/// Events buffered per subscriber; a slower one sees `Lagged` and should relist.
const EVENT_BUFFER: usize = 4096;
const SANDBOX_SALT: u64 = 0x5a4d;
const CONTAINER_SALT: u64 = 0xc047;
/// containerd's exit code and reason for a container whose start failed.
const START_ERROR_CODE: i32 = 128;
const SIGKILL_CODE: i32 = 137;
const SIGTERM_CODE: i32 = 143;

fn nanos(t: Timestamp) -> i64 {
    i64::try_from(t.as_nanosecond()).unwrap_or(i64::MAX)
}

fn exit_reason(code: i32) -> &'static str {
    if code == 0 { "Completed" } else { "Error" }
}

fn container_not_found(id: &str) -> RuntimeError {
    RuntimeError::NotFound(format!("an error occurred when try to find container \"{id}\": not found"))
}

fn sandbox_not_found(id: &str) -> RuntimeError {
    RuntimeError::NotFound(format!("an error occurred when try to find sandbox \"{id}\": not found"))
}

fn state_name(state: i32) -> &'static str {
    ContainerState::try_from(state).map_or("CONTAINER_UNKNOWN", |s| s.as_str_name())
}

impl FakeRuntime {
    /// A fake with no images, no scripts (containers run forever), zero latency, the runtime
    /// handlers `""` and `"runc"`, and the call log on. Timestamps come from `clock`.
    pub fn new(clock: Clock) -> Arc<FakeRuntime> {
        Arc::new_cyclic(|me| FakeRuntime {
            clock,
            me: me.clone(),
            latency_nanos: AtomicU64::new(0),
            events: broadcast::channel(EVENT_BUFFER).0,
            reads: ReadCounters::default(),
            faults: Mutex::default(),
            state: Mutex::new(State {
                seq: 0,
                ips: 0,
                sandboxes: HashMap::new(),
                containers: HashMap::new(),
                sandbox_labels: LabelIndex::default(),
                container_labels: LabelIndex::default(),
                scripts: HashMap::new(),
                pod_scripts: HashMap::new(),
                exec_scripts: HashMap::new(),
                images: HashMap::new(),
                image_sizes: HashMap::new(),
                pinned_images: HashSet::new(),
                image_fs: None,
                pulls: HashMap::new(),
                handlers: ["", "runc"].into_iter().map(String::from).collect(),
                handler_features: Vec::new(),
                streaming: None,
                log_calls: true,
                calls: Vec::new(),
                changes: None,
                usage: HashMap::new(),
                writable_layers: HashMap::new(),
            }),
        })
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    // A panic in one test thread must not cascade into every later call.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the running containers named `name` (in every pod) use `usage` from now on; an
    /// unscripted container uses nothing.
    pub fn set_usage(&self, name: &str, usage: FakeUsage) {
        self.lock().usage.insert(name.to_string(), usage);
    }

    /// Makes the writable layer of the running containers named `name` (in every pod) hold
    /// `bytes` from now on; an unscripted container's reports none.
    pub fn set_writable_layer(&self, name: &str, bytes: u64) {
        self.lock().writable_layers.insert(name.to_string(), bytes);
    }

    /// Scripts the containers named `name` in every pod: entry i applies to the i-th
    /// `create_container` with that name from now on (failed creates count), the last entry
    /// repeats. Replaces an earlier script for the name and restarts its count. Containers of an
    /// unscripted name behave as [`Behaviour::RunForever`].
    pub fn script(&self, name: &str, behaviours: Vec<Behaviour>) {
        self.lock().scripts.insert(name.to_string(), Script { steps: behaviours, used: 0 });
    }

    /// Like [`script`](Self::script) but only for the pod named `pod` (the sandbox
    /// `metadata.name`); takes precedence over a script for the name in every pod.
    pub fn script_pod(&self, pod: &str, name: &str, behaviours: Vec<Behaviour>) {
        self.lock()
            .pod_scripts
            .entry(pod.to_string())
            .or_default()
            .insert(name.to_string(), Script { steps: behaviours, used: 0 });
    }

    /// Scripts `exec_sync` in containers named `name`: the i-th exec gets entry i, the last
    /// repeats. Accepts `ExecResult`s or `ExecBehaviour`s. Unscripted execs answer exit 0.
    pub fn script_exec<B: Into<ExecBehaviour>>(&self, name: &str, replies: impl IntoIterator<Item = B>) {
        let steps = replies.into_iter().map(Into::into).collect();
        self.lock().exec_scripts.insert(name.to_string(), ExecScript::Steps(Script { steps, used: 0 }));
    }

    /// Scripts `exec_sync` in containers named `name` with a function of the command. It runs
    /// outside the fake's lock, so it may call back into the fake.
    pub fn script_exec_fn(&self, name: &str, f: impl Fn(&[String]) -> ExecBehaviour + Send + Sync + 'static) {
        self.lock().exec_scripts.insert(name.to_string(), ExecScript::Func(Arc::new(f)));
    }

    /// Marks an image present on the node.
    pub fn add_image(&self, name: &str) {
        let name = images::normalize(name).into_owned();
        let image_ref = images::fake_digest(&name);
        self.lock().images.insert(name, image_ref);
    }

    /// The size `list_images` gives the image `name` (present or pulled later), and what it
    /// takes of the image filesystem; images are 0 bytes unless given.
    pub fn set_image_size(&self, name: &str, bytes: u64) {
        let image_ref = images::fake_digest(&images::normalize(name));
        self.lock().image_sizes.insert(image_ref, bytes);
    }

    /// Makes `list_images` show the image `name` as pinned by the runtime.
    pub fn pin_image(&self, name: &str) {
        let image_ref = images::fake_digest(&images::normalize(name));
        self.lock().pinned_images.insert(image_ref);
    }

    /// Gives the fake an image filesystem of `capacity` bytes, of which `other_used` are taken by
    /// something else than images: what is available shrinks and grows with the images present.
    /// Without it `image_fs_info` is unimplemented.
    pub fn set_image_fs(&self, capacity: u64, other_used: u64) {
        self.lock().image_fs = Some((capacity, other_used));
    }

    /// Lets `pull_image` fetch `name` (instantly).
    pub fn allow_pull(&self, name: &str) {
        self.allow_pull_rule(name, PullRule { takes: Duration::ZERO, credentials: None });
    }

    /// Lets `pull_image` fetch `name`, taking `takes` of virtual time.
    pub fn allow_pull_taking(&self, name: &str, takes: Duration) {
        self.allow_pull_rule(name, PullRule { takes, credentials: None });
    }

    /// Lets `pull_image` fetch `name` only with these credentials; otherwise it fails with
    /// "401 Unauthorized" in the message, as a private registry answers.
    pub fn allow_pull_with_auth(&self, name: &str, username: &str, password: &str) {
        let credentials = Some((username.to_string(), password.to_string()));
        self.allow_pull_rule(name, PullRule { takes: Duration::ZERO, credentials });
    }

    fn allow_pull_rule(&self, name: &str, rule: PullRule) {
        self.lock().pulls.insert(images::normalize(name).into_owned(), rule);
    }

    /// Adds a runtime handler (RuntimeClass); unknown handlers fail `run_pod_sandbox`.
    pub fn add_runtime_handler(&self, handler: &str) {
        self.lock().handlers.insert(handler.to_string());
    }

    /// Makes the runtime report `handler` with these features in its status, as containerd
    /// 2.0 and later do.
    pub fn report_handler_features(&self, handler: &str, features: crate::cri_api::RuntimeHandlerFeatures) {
        let mut state = self.lock();
        state.handler_features.retain(|h| h.name != handler);
        state
            .handler_features
            .push(crate::cri_api::RuntimeHandler { name: handler.to_string(), features: Some(features) });
    }

    /// Latency added to every call (a tokio sleep, so virtual under paused time).
    /// Makes `exec`, `attach` and `port_forward` answer `<base_url>/exec/<token>` (and
    /// `/attach/`, `/portforward/`) as containerd's streaming server does, with a fresh token per
    /// call. Without it they fail as `Unimplemented`: the fake serves no streams itself.
    pub fn serve_streaming(&self, base_url: &str) {
        self.lock().streaming = Some(base_url.trim_end_matches('/').to_string());
    }

    pub fn set_latency(&self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.latency_nanos.store(nanos, Ordering::Relaxed);
    }

    /// Turns the call log on or off (long simulations that never read it can save the memory).
    pub fn set_call_log(&self, enabled: bool) {
        self.lock().log_calls = enabled;
    }

    /// Every recorded call with the clock's time when it was made, oldest first.
    pub fn calls(&self) -> Vec<(Timestamp, Call)> {
        self.lock().calls.iter().map(|c| (c.at, c.call.clone())).collect()
    }

    /// The recorded calls made for the pod named `pod` (sandbox, container and pull calls).
    pub fn calls_for_pod(&self, pod: &str) -> Vec<(Timestamp, Call)> {
        let state = self.lock();
        state.calls.iter().filter(|c| c.pod.as_deref() == Some(pod)).map(|c| (c.at, c.call.clone())).collect()
    }

    pub fn clear_calls(&self) {
        self.lock().calls.clear();
    }

    /// Starts (or stops and forgets) recording every [`Change`] of state; off by default.
    pub fn record_changes(&self, enabled: bool) {
        self.lock().changes = enabled.then(Vec::new);
    }

    /// The changes recorded from the `from`-th on (0: all), with the clock's time of each:
    /// a checker that reads them as they come passes how many it has read.
    pub fn changes(&self, from: usize) -> Vec<(Timestamp, Change)> {
        let state = self.lock();
        state.changes.as_ref().map_or_else(Vec::new, |c| c.get(from..).unwrap_or_default().to_vec())
    }

    pub fn stats(&self) -> FakeStats {
        let read = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let state = self.lock();
        FakeStats {
            version: read(&self.reads.version),
            pod_sandbox_status: read(&self.reads.pod_sandbox_status),
            list_pod_sandboxes: read(&self.reads.list_pod_sandboxes),
            container_status: read(&self.reads.container_status),
            list_containers: read(&self.reads.list_containers),
            list_states: read(&self.reads.list_states),
            image_status: read(&self.reads.image_status),
            list_container_stats: read(&self.reads.list_container_stats),
            sandboxes: state.sandboxes.len(),
            containers: state.containers.len(),
        }
    }

    /// containerd's `TaskExit` with exit code 0 of the running container named `name`, ahead of
    /// its record, which still says running (until `exit_container`): a `Completed` event now.
    /// Returns the container's ID.
    pub fn publish_completion(&self, name: &str) -> Option<String> {
        let id = self
            .lock()
            .containers
            .iter()
            .find(|(_, c)| c.name() == name && c.is_running())
            .map(|(id, _)| id.to_string())?;
        self.emit(&id, RuntimeEventKind::Completed { finished_at: self.clock.now() });
        Some(id)
    }

    /// Ends a running container now with `code` (a crash from outside the script). Returns
    /// whether it was running.
    pub fn exit_container(&self, container_id: &str, code: i32) -> bool {
        let mut state = self.lock();
        self.finish(&mut state, container_id, code, exit_reason(code))
    }

    /// The sandbox's pause process dies: the sandbox turns `NOTREADY` (its containers keep
    /// running, as with containerd) and an `Exited` event names the sandbox id.
    pub fn kill_sandbox(&self, sandbox_id: &str) -> bool {
        let mut state = self.lock();
        let Some(sandbox) = state.sandboxes.get_mut(sandbox_id) else {
            return false;
        };
        let was_ready = sandbox.status.state == PodSandboxState::SandboxReady as i32;
        sandbox.status.state = PodSandboxState::SandboxNotready as i32;
        if was_ready {
            self.record(&mut state, || Change::SandboxNotReady { id: sandbox_id.to_string() });
            self.emit(sandbox_id, RuntimeEventKind::Exited);
        }
        was_ready
    }

    async fn delay(&self) {
        let nanos = self.latency_nanos.load(Ordering::Relaxed);
        if nanos != 0 {
            tokio::time::sleep(Duration::from_nanos(nanos)).await;
        }
    }

    fn emit(&self, id: &str, kind: RuntimeEventKind) {
        // No subscriber is fine; skip building the event then.
        if self.events.receiver_count() > 0 {
            self.deliver(RuntimeEvent { container_id: id.to_string(), kind });
        }
    }

    fn record(&self, state: &mut State, change: impl FnOnce() -> Change) {
        let now = self.clock.now();
        if let Some(changes) = &mut state.changes {
            changes.push((now, change()));
        }
    }

    fn log(&self, state: &mut State, pod: Option<Arc<str>>, call: Call) {
        if state.log_calls {
            state.calls.push(LoggedCall { at: self.clock.now(), pod, call });
        }
    }

    /// Pod name of a sandbox, for the call log.
    fn pod_of(state: &State, sandbox_id: &str) -> Option<Arc<str>> {
        state.sandboxes.get(sandbox_id).map(|s| s.pod.clone())
    }

    fn container_call(&self, state: &mut State, container_id: &str, make: impl FnOnce(String) -> Call) {
        if !state.log_calls {
            return;
        }
        let (name, pod) = match state.containers.get(container_id) {
            Some(c) => (c.name().to_string(), Self::pod_of(state, &c.sandbox_id)),
            None => (container_id.to_string(), None),
        };
        self.log(state, pod, make(name));
    }

    fn sandbox_call(&self, state: &mut State, sandbox_id: &str, make: impl FnOnce(String) -> Call) {
        if !state.log_calls {
            return;
        }
        let pod = Self::pod_of(state, sandbox_id);
        let name = pod.as_deref().unwrap_or(sandbox_id).to_string();
        self.log(state, pod, make(name));
    }

    /// Ends a running container: state, exit code, reason, time, event. No-op otherwise.
    fn finish(&self, state: &mut State, container_id: &str, code: i32, reason: &str) -> bool {
        let Some(c) = state.containers.get_mut(container_id) else {
            return false;
        };
        if !c.is_running() {
            return false;
        }
        if let Some(timer) = c.exit_timer.take() {
            timer.abort();
        }
        c.status.state = ContainerState::ContainerExited as i32;
        c.status.exit_code = code;
        c.status.reason.clear();
        c.status.reason.push_str(reason);
        c.status.finished_at = nanos(self.clock.now());
        let (exit_code, reason) = (code, reason.to_string());
        self.record(state, || Change::ContainerExited { id: container_id.to_string(), exit_code, reason });
        self.emit(container_id, RuntimeEventKind::Exited);
        true
    }

    /// The behaviour of the next container named `name` in `pod`.
    fn next_behaviour(state: &mut State, pod: &str, name: &str) -> Behaviour {
        if let Some(script) = state.pod_scripts.get_mut(pod).and_then(|s| s.get_mut(name))
            && let Some(b) = script.next()
        {
            return b;
        }
        state.scripts.get_mut(name).and_then(Script::next).unwrap_or(Behaviour::RunForever)
    }

    /// Arms the timer of a scripted exit, or exits at once when `after` is zero.
    fn schedule_exit(&self, state: &mut State, id: &Arc<str>, code: i32, reason: &'static str, after: Duration) {
        if after.is_zero() {
            self.finish(state, id, code, reason);
            return;
        }
        // The deadline is fixed now, not when the task first runs.
        let deadline = self.clock.instant_at(self.clock.now() + after);
        let me = self.me.clone();
        let timer_id = id.clone();
        let task = tokio::spawn(async move {
            tokio::time::sleep_until(deadline).await;
            if let Some(rt) = me.upgrade() {
                let mut state = rt.lock();
                rt.finish(&mut state, &timer_id, code, reason);
            }
        });
        if let Some(c) = state.containers.get_mut(&**id) {
            c.exit_timer = Some(task.abort_handle());
        }
    }

    /// Kills the running containers of a sandbox (SIGKILL, as StopPodSandbox does).
    fn kill_all(&self, state: &mut State, sandbox_id: &str) {
        let Some(ids) = state.sandboxes.get(sandbox_id).map(|s| s.containers.clone()) else {
            return;
        };
        for id in ids {
            self.finish(state, &id, SIGKILL_CODE, "Error");
        }
    }

    fn remove_container_locked(&self, state: &mut State, container_id: &str) {
        let Some(c) = state.containers.remove(container_id) else {
            return;
        };
        self.record(state, || Change::ContainerRemoved { id: container_id.to_string() });
        if let Some(timer) = c.exit_timer {
            timer.abort();
        }
        state.container_labels.remove(container_id, &c.status.labels);
        if let Some(sandbox) = state.sandboxes.get_mut(&*c.sandbox_id) {
            sandbox.containers.retain(|id| &**id != container_id);
        }
    }
}
