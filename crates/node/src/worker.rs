//! The pod worker: observe, compute status, plan, execute, then sleep until a container of the
//! pod changes, a planned time comes, or the pod is updated or deleted. Level-triggered: every
//! pass starts again from what the runtime says and from the newest pod it was given.

use crate::admission;
use crate::checkpoint::{self, CheckpointRef};
use crate::context::NodeContext;
use crate::cri::observe;
use crate::downward::NodeStorage;
use crate::events::EventType;
use crate::eviction;
use crate::executor::{Executor, SyncResult};
use crate::metrics::{PassKind, PodGauges};
use crate::pleg::Dispatcher;
use crate::pod_update::{Cancel, Desired, PodUpdate};
use crate::probes::prober::Prober;
use crate::sinks::StatusSink;
use crate::termination_message;
use crate::volumes;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, HostIP, Pod, PodStatus};
use podwright_planner::Curve;
use podwright_planner::decide::{self, pull_key};
use podwright_planner::pod;
use podwright_planner::resize::{self, Allocate, Allocation, NodeRoom, POD_LEVEL, ResizeError, ResizeState};
use podwright_planner::{
    Action, Backoff, ContainerKind, Eviction, Observed, ObservedContainer, Phase, PodContext, RunState, StartFailure,
    StartFailureReason, plan_in_phase, pod_status_and_phase,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// How long to wait before trying again when the runtime could not be read, or failed a kill.
const RETRY: Duration = Duration::from_secs(1);

/// What a pod worker uses of the node; only [`crate::builder::Node::build`] makes one.
#[derive(Clone)]
pub(crate) struct WorkerDeps {
    pub ctx: NodeContext,
    pub executor: Arc<Executor>,
    /// The pod's bell, and the routing of its containers' events to it.
    pub dispatcher: Arc<Dispatcher>,
    /// Bumped whenever a ConfigMap or Secret changes.
    pub object_changes: Arc<watch::Sender<u64>>,
    /// The node's address: every pod's `hostIP`, and a host-network pod's own.
    pub host_ip: Option<String>,
    /// The container restart back-off (`crashLoopBackOff` of the node's configuration).
    pub restart_curve: Curve,
    /// The node's ephemeral storage, which pods are admitted against.
    pub storage: Option<NodeStorage>,
    /// What every pod of the node has been allocated, for a resize's admission.
    pub allocations: Arc<NodeAllocations>,
}

/// The CPU (millicores) and memory (bytes) each active pod of the node requests as allocated:
/// what the other pods use, when a resize asks for more (`getAllocatedPods`).
#[derive(Debug, Default)]
pub(crate) struct NodeAllocations(Mutex<BTreeMap<String, (i128, i128)>>);

impl NodeAllocations {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (i128, i128)>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn set(&self, uid: &str, pod: &Pod) {
        self.lock().insert(uid.to_string(), resize::requests(pod));
    }

    fn remove(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// What the pods other than `uid` request.
    fn others(&self, uid: &str) -> (i128, i128) {
        let all = self.lock();
        all.iter().filter(|(u, _)| *u != uid).fold((0, 0), |(c, m), (_, (pc, pm))| (c + pc, m + pm))
    }
}

/// What the worker remembers between passes that the runtime cannot tell it.
struct Memory {
    backoff: Backoff,
    start_failures: BTreeMap<String, StartFailure>,
    start_time: Timestamp,
    sandbox_failure: Option<Timestamp>,
    /// See `Observed::restart_counts`.
    restart_counts: BTreeMap<String, i32>,
    /// `restart_counts` has grown since the checkpoint was written.
    restart_counts_unsaved: bool,
    /// The sandbox in which initialization completed (checkpointed).
    initialized_in: Option<String>,
    /// The volumes' files are to be written again: an object or the pod changed.
    volumes_due: bool,
    /// The pod's eviction, once decided (checkpointed).
    eviction: Option<Eviction>,
    /// What the node admitted of the containers' resources (checkpointed before it is acted on).
    allocated: Allocation,
    /// The resize's state beside the allocation (its actuated resources checkpointed).
    resize: ResizeState,
    /// See `Observed::reset_terminations` (checkpointed).
    reset_terminations: BTreeMap<String, ContainerStateTerminated>,
    /// See `Observed::recursive_read_only_supported`, once asked.
    recursive_read_only_supported: Option<bool>,
    /// See `Observed::prepare_failed`.
    prepare_failed: BTreeSet<String>,
}

impl Memory {
    /// Takes in the restart counts of the instances observed.
    fn count_restarts<'a>(&mut self, containers: impl Iterator<Item = &'a ObservedContainer>) {
        for c in containers {
            match self.restart_counts.get_mut(&c.name) {
                Some(n) if *n >= c.restart_count => continue,
                Some(n) => *n = c.restart_count,
                None => {
                    self.restart_counts.insert(c.name.clone(), c.restart_count);
                }
            }
            self.restart_counts_unsaved = true;
        }
    }
}

/// Records that what is allocated under `name` (a container, or [`POD_LEVEL`]) was given;
/// whether that changed what was recorded.
fn actuate(m: &mut Memory, name: &str) -> bool {
    let Some(r) = m.allocated.get(name) else { return false };
    m.resize.actuated.insert(name.to_string(), r.clone()).as_ref() != Some(r)
}

/// From an init container seen completed to the pod's next container started, for
/// `podwright_container_transition_seconds`.
#[derive(Default)]
struct Transition {
    /// Init containers of the current sandbox seen completed.
    completed: usize,
    /// When the newest of them was first seen completed, until the next container starts.
    seen: Option<Timestamp>,
}

impl Transition {
    fn observe(&mut self, observed: &Observed, now: Timestamp) {
        let sandbox = observed.sandbox.as_ref().map(|s| s.id.as_str());
        // A completed init container is not run again in its sandbox: counting is enough.
        let completed = observed
            .containers
            .iter()
            .filter(|c| c.kind == ContainerKind::Init && c.state == RunState::Exited && c.exit_code == 0)
            .filter(|c| Some(c.sandbox_id.as_str()) == sandbox)
            .count();
        if completed != self.completed {
            // Fewer: a new sandbox, where nothing has completed yet.
            self.seen = (completed > self.completed).then_some(now);
            self.completed = completed;
        }
    }

    /// A container started at `at`: how long after the completion, once per completion.
    fn started(&mut self, at: Timestamp) -> Option<Duration> {
        self.seen.take().map(|seen| at.duration_since(seen).unsigned_abs())
    }
}

pub(crate) struct PodWorker {
    deps: WorkerDeps,
    status_sink: Arc<dyn StatusSink>,
    desired: watch::Receiver<Desired>,
    published: watch::Sender<PodUpdate>,
    pod: Arc<Pod>,
    /// The pod as the node runs it: `pod` with what is allocated to its containers.
    running: Arc<Pod>,
    memory: Memory,
    /// The pod's part in the node's gauges; given back when the worker ends.
    gauges: PodGauges,
    transition: Transition,
    /// The ephemeral storage the node's other pods requested when this one was given: its
    /// admission's `used`.
    storage_in_use: i128,
}

impl PodWorker {
    pub(crate) fn new(
        deps: WorkerDeps,
        status_sink: Arc<dyn StatusSink>,
        desired: watch::Receiver<Desired>,
        published: watch::Sender<PodUpdate>,
        storage_in_use: i128,
    ) -> Self {
        let pod = desired.borrow().pod.clone();
        // A pod podwright ran before it restarted: its checkpoint and its last status (the
        // API's copy) say what the runtime cannot.
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let saved = checkpoint::load(&deps.ctx.root, uid).unwrap_or_else(|e| {
            tracing::warn!(%e, uid, "could not read the pod's checkpoint");
            None
        });
        let reported_start = pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0);
        let saved_start = saved.as_ref().and_then(|c| c.start_time);
        let (mut backoff, mut restart_counts, initialized_in, eviction, allocation, reset_terminations) = saved
            .map(|c| {
                let allocation = c.allocated.map(|a| (a, c.actuated));
                (c.backoff, c.restart_counts, c.initialized_in, c.eviction, allocation, c.reset_terminations)
            })
            .unwrap_or_default();
        // A pod first seen, or one that ran before resizes were kept: its containers run with
        // its spec's resources.
        let (mut allocated, mut actuated) = allocation.unwrap_or_else(|| {
            let spec = resize::allocation_of(&pod);
            (spec.clone(), spec)
        });
        // One that ran before pod-level resizes were kept: its pod cgroup has its spec's.
        for a in [&mut allocated, &mut actuated] {
            a.entry(POD_LEVEL.to_string()).or_insert_with(|| resize::pod_level_of(&pod));
        }
        backoff.restart_curve = deps.restart_curve;
        // The last status reported says as much, should the checkpoint be older: a count above
        // 0 is that of an instance the container had (0 may be of one that never ran).
        let reported = pod.status.iter().flat_map(podwright_api::container_statuses);
        for st in reported.filter(|st| st.restart_count > 0) {
            let n = restart_counts.entry(st.name.clone()).or_default();
            *n = st.restart_count.max(*n);
        }
        let memory = Memory {
            backoff,
            start_failures: BTreeMap::new(),
            start_time: reported_start.or(saved_start).unwrap_or_else(|| deps.ctx.clock.now()),
            sandbox_failure: None,
            restart_counts,
            restart_counts_unsaved: false,
            initialized_in,
            volumes_due: true,
            eviction,
            allocated,
            resize: ResizeState { actuated, ..Default::default() },
            reset_terminations,
            recursive_read_only_supported: None,
            prepare_failed: BTreeSet::new(),
        };
        let gauges = PodGauges::new(deps.ctx.metrics.clone());
        let running = pod.clone();
        PodWorker {
            deps,
            status_sink,
            desired,
            published,
            pod,
            running,
            memory,
            gauges,
            transition: Transition::default(),
            storage_in_use,
        }
    }

    /// Asked of the runtime once, and only for a pod with a mount that wants it (its mounts
    /// cannot change): the status of a container yet to be made says what it will get.
    async fn recursive_read_only_supported(&mut self) -> bool {
        if let Some(known) = self.memory.recursive_read_only_supported {
            return known;
        }
        let wanted = pod::all_containers(&self.pod).any(|sc| volumes::mounts::wants_recursive_read_only(sc.container));
        let supported = wanted && self.deps.executor.pod_supports_recursive_read_only(&self.pod).await;
        self.memory.recursive_read_only_supported = Some(supported);
        supported
    }

    fn checkpoint(&mut self) {
        let m = &self.memory;
        let cp = CheckpointRef {
            pod: &self.pod,
            start_time: Some(m.start_time),
            backoff: &m.backoff,
            restart_counts: &m.restart_counts,
            initialized_in: m.initialized_in.as_deref(),
            eviction: m.eviction.as_ref(),
            allocated: &m.allocated,
            actuated: &m.resize.actuated,
            reset_terminations: &m.reset_terminations,
        };
        match checkpoint::save(&self.deps.ctx.root, &cp) {
            Ok(()) => self.memory.restart_counts_unsaved = false,
            Err(e) => tracing::warn!(%e, "could not write the pod's checkpoint"),
        }
    }

    /// One pass done, started at `start`.
    fn pass_done(&self, kind: PassKind, start: Timestamp) {
        self.deps.ctx.metrics.pass(kind, self.deps.ctx.clock.now().duration_since(start).unsigned_abs());
    }

    /// Ends the pod by the node's verdict (an eviction, or a refusal at admission) as the kubelet
    /// does: its Warning event, then the pod fails with it, checkpointed before anything is
    /// stopped, so that a podwright restarted meanwhile still fails the pod and does not say so
    /// again.
    fn end_by_node(&mut self, verdict: Eviction, event_message: String, now: Timestamp) {
        tracing::info!(reason = %verdict.reason, status_message = %verdict.message, "the node ends the pod");
        self.deps.ctx.events.record(&self.pod, None, EventType::Warning, &verdict.reason, event_message, now);
        self.memory.eviction = Some(verdict);
        self.checkpoint();
    }

    /// Folds what a pass did into what the worker remembers.
    fn fold(&mut self, result: SyncResult) {
        if let (Some(verdict), Some(at)) = (result.pod_failed.clone(), result.sandbox_failed) {
            let message = verdict.message.clone();
            self.end_by_node(verdict, message, at);
        }
        let m = &mut self.memory;
        let mut actuated = false;
        if result.sandbox_created {
            m.sandbox_failure = None;
            // The new sandbox's pod cgroup was made with what is allocated to the pod.
            actuated |= actuate(m, POD_LEVEL);
        }
        if let Some(at) = result.sandbox_failed {
            m.sandbox_failure = Some(at);
        }
        for name in result.started {
            // A new instance starts with what is allocated to it.
            actuated |= actuate(m, &name);
            m.start_failures.remove(&name);
            m.prepare_failed.remove(&name);
        }
        m.prepare_failed.extend(result.prepare_failed);
        match result.resized {
            Some(Ok(names)) => {
                // The pod cgroup was given the allocated pod's size too.
                for name in names.iter().map(String::as_str).chain([POD_LEVEL]) {
                    actuated |= actuate(m, name);
                }
                m.resize.error = None;
            }
            Some(Err(message)) => {
                tracing::warn!(%message, "the pod's resize failed");
                m.resize.error = Some(ResizeError { message, at: self.deps.ctx.clock.now() });
            }
            None => {}
        }
        let mut backoff_changed = false;
        for (name, f) in result.start_failures {
            if f.reason == StartFailureReason::ErrImagePull
                && let Some(sc) = pod::all_containers(&self.pod).find(|s| s.name() == name)
            {
                m.backoff.next(&pull_key(sc.image()), f.at, f.at);
                backoff_changed = true;
            }
            m.start_failures.insert(name, f);
        }
        let reset = !result.reset.is_empty();
        for (name, ended) in result.reset {
            let later = |t: &ContainerStateTerminated| t.finished_at.as_ref().map(|f| f.0);
            if m.reset_terminations.get(&name).is_none_or(|t| later(t) <= later(&ended)) {
                m.reset_terminations.insert(name, ended);
            }
        }
        if backoff_changed || actuated || reset {
            self.checkpoint();
        }
    }

    /// The node's decision on the newest spec's resources (the allocation manager's), written
    /// down before anything acts on it, and the pod the node runs: the spec with what is
    /// allocated.
    fn allocate(&mut self, uid: &str) {
        let facts = &self.deps.executor.configs.facts;
        let (others_cpu_millis, others_memory_bytes) = self.deps.allocations.others(uid);
        // A node that says nothing of itself sets no bound.
        let known = |v: i128| if v > 0 { v } else { i128::MAX };
        let room = NodeRoom {
            cpu_millis: known(facts.cpu_millis),
            memory_bytes: known(facts.memory_bytes),
            others_cpu_millis,
            others_memory_bytes,
        };
        let r = &mut self.memory.resize;
        self.running = match resize::allocate(&self.pod, &self.memory.allocated, &room) {
            Allocate::Unchanged => {
                r.pending = None;
                self.pod.clone()
            }
            Allocate::Pending(p) => {
                if r.pending.as_ref() != Some(&p) {
                    tracing::info!(reason = %p.reason, message = %p.message, "the pod's resize waits");
                }
                r.pending = Some(p);
                Arc::new(resize::allocated_pod(&self.pod, &self.memory.allocated))
            }
            Allocate::Resize(next) => {
                tracing::info!("the pod's resize is allocated");
                (r.pending, r.error) = (None, None);
                self.memory.allocated = next;
                self.checkpoint();
                self.pod.clone()
            }
        };
        self.deps.allocations.set(uid, &self.running);
    }

    /// Runs the pod until it has finished (terminal phase, nothing running), publishing every
    /// new status. A new pod on `desired` is planned with from the next pass on; a deletion
    /// starts graceful termination.
    pub(crate) async fn run(mut self) {
        let uid = self.pod.metadata.uid.clone().unwrap_or_default();
        let bell = self.deps.dispatcher.bell(&uid);
        self.checkpoint();
        if self.memory.eviction.is_none()
            && let Err(r) = admission::admit(&self.pod)
                .and_then(|()| admission::fits_storage(&self.pod, self.deps.storage, self.storage_in_use))
        {
            let verdict = Eviction { reason: r.reason.to_string(), message: r.status_message() };
            self.end_by_node(verdict, r.message.to_string(), self.deps.ctx.clock.now());
        }
        // The last status reported before a restart: conditions keep their transition times,
        // and the phase stays terminal.
        let mut previous: Option<Arc<PodStatus>> = self.pod.status.clone().map(Arc::new);
        let mut messages = observe::MessageCache::new();
        // Updates may change images and the deadline only, which probes do not depend on, nor
        // do volumes.
        let mut prober = Prober::new(&self.deps.ctx, self.pod.clone(), bell.clone(), previous.as_deref());
        let usage = eviction::Watch::start(&self.deps.ctx, &self.pod, bell.clone());
        // The owner may drop its sender without deleting: the worker then goes on alone.
        let mut desired_open = true;
        let cancel = Cancel::new(self.desired.clone());
        let mut objects = self.deps.object_changes.subscribe();
        let watches_objects = refers_to_objects(&self.pod);
        // What the next pass is, when not a plain sync (or a kill once deleting).
        let mut pass_kind = Some(PassKind::Create);
        let mut allocated_once = false;
        loop {
            let pass_start = self.deps.ctx.clock.now();
            let desired = self.desired.borrow_and_update().clone();
            let changed = !Arc::ptr_eq(&desired.pod, &self.pod);
            if changed {
                self.pod = desired.pod;
                self.memory.volumes_due = true;
                self.checkpoint();
                pass_kind.get_or_insert(PassKind::Update);
            }
            let deletion = desired.deletion;
            // Once more while a resize waits: room may have been made. A pod being deleted
            // keeps what it has.
            if changed || self.memory.resize.pending.is_some() || !allocated_once {
                if deletion.is_none() {
                    self.allocate(&uid);
                } else {
                    self.running = Arc::new(resize::allocated_pod(&self.pod, &self.memory.allocated));
                }
                allocated_once = true;
            }
            let observed =
                observe::observe(self.deps.ctx.runtime.as_ref(), &uid, &self.deps.ctx.root, &mut messages).await;
            let (sandboxes, containers) = match observed {
                Ok(o) => o,
                Err(e) => {
                    tracing::warn!(%e, "could not read the pod's state from the runtime");
                    // Biased, here and below: a seeded simulation replays the same choices.
                    tokio::select! {
                        biased;
                        _ = tokio::time::sleep(RETRY) => {}
                        r = self.desired.changed(), if desired_open => desired_open = r.is_ok(),
                    }
                    continue;
                }
            };
            for c in &containers {
                self.deps.dispatcher.register(&c.id, &bell);
            }
            let containers = self.take_completions(&uid, containers);
            let now = self.deps.ctx.clock.now();
            // The eviction manager acts on active pods only: not on one being deleted or ended.
            let ended =
                previous.as_ref().and_then(|s| Phase::parse(s.phase.as_deref()?)).is_some_and(Phase::is_terminal);
            let active = deletion.is_none() && !ended;
            if let Some(e) = usage.as_ref().and_then(eviction::Watch::take).filter(|_| active) {
                let message = e.message.clone();
                self.end_by_node(e, message, now);
            }
            let kind = pass_kind.take().unwrap_or(if deletion.is_some() { PassKind::Kill } else { PassKind::Sync });
            let (interrupted, containers): (Vec<_>, Vec<_>) =
                containers.into_iter().partition(|c| c.start_interrupted());
            let mut observed = Observed {
                sandbox: sandboxes.last().cloned(),
                containers,
                interrupted,
                start_failures: self.memory.start_failures.clone(),
                probes: Default::default(),
                sandbox_failure: self.memory.sandbox_failure,
                restart_counts: self.memory.restart_counts.clone(),
                initialized_in: self.memory.initialized_in.clone(),
                eviction: self.memory.eviction.clone(),
                resize: self.memory.resize.clone(),
                reset_terminations: self.memory.reset_terminations.clone(),
                recursive_read_only_supported: self.recursive_read_only_supported().await,
                prepare_failed: self.memory.prepare_failed.clone(),
            };
            // The kubelet's generateAPIPodStatus and SyncPod: a pod on the host's network has
            // the node's IP for its own, in its status and for its containers, probes and hooks.
            if pod::host_network(&self.pod)
                && let Some(s) = observed.sandbox.as_mut().filter(|s| s.ip.is_none())
            {
                s.ip = self.deps.host_ip.clone();
            }
            let sandbox_running = observed.sandbox.as_ref().is_some_and(|s| s.ready);
            // Files of a running pod's volumes follow their objects (before the sandbox, the
            // executor writes them when it makes one).
            if sandbox_running && deletion.is_none() && std::mem::take(&mut self.memory.volumes_due) {
                self.deps.executor.project_volumes(&self.running);
            }
            self.gauges.set(sandbox_running, observed.containers.iter().map(|c| c.state));
            self.transition.observe(&observed, now);
            observed.probes = prober.sync(&observed, deletion.is_some());
            let ctx = PodContext {
                pod: &self.running,
                observed: &observed,
                backoff: &self.memory.backoff,
                now,
                start_time: Some(self.memory.start_time),
                deleting: deletion.is_some(),
                grace_override: deletion.and_then(|d| d.grace),
            };
            let (mut status, phase) = pod_status_and_phase(&ctx, previous.as_deref());
            // Every pod's, as the kubelet reports the node's address.
            if let Some(ip) = &self.deps.host_ip {
                status.host_ip = Some(ip.clone());
                status.host_ips = Some(vec![HostIP { ip: ip.clone() }]);
            }
            let p = plan_in_phase(&ctx, phase);
            // Counted once the planner has said which instances were created ahead of their
            // turn: those say nothing yet, not even their count, and a stranded one never will.
            // An interrupted instance never ran either: its replacement takes its restart count.
            let early: Vec<String> = decide::early_instances(&ctx).map(|c| c.id.clone()).collect();
            let said = |c: &&ObservedContainer| !early.contains(&c.id) && !observed.stranded(c);
            self.memory.count_restarts(observed.containers.iter().filter(said));
            let finished = phase.is_terminal() && p.actions.is_empty();
            if previous.as_deref() != Some(&status) || finished {
                // The kubelet's pod start: its first status in phase Running after Pending.
                let was_pending = previous.as_ref().and_then(|s| s.phase.as_deref()) == Some(Phase::Pending.as_str());
                if was_pending && phase == Phase::Running {
                    self.deps.ctx.metrics.pod_started(now.duration_since(self.memory.start_time).unsigned_abs());
                }
                let status = Arc::new(status);
                let update = PodUpdate { spec: self.pod.clone(), status: Some(status.clone()), finished };
                // Published to the owner first: a sink that reacts to `finished` by removing
                // the pod finds it finished.
                self.published.send_replace(update.clone());
                self.status_sink.publish(&update);
                previous = Some(status);
            }
            if finished {
                self.deps.allocations.remove(&uid);
                // Nothing runs any more: what the pod's volumes hold in memory (secrets) goes now,
                // as the kubelet tears down a terminated pod's volumes; its logs stay.
                if let Err(e) = volumes::tear_down(&self.deps.ctx.root, &uid) {
                    tracing::warn!(%e, uid, "could not unmount the finished pod's volumes");
                }
                self.pass_done(kind, pass_start);
                return;
            }
            for e in &p.events {
                let kind = if e.warning { EventType::Warning } else { EventType::Normal };
                self.deps.ctx.events.record(&self.pod, e.field_path.clone(), kind, e.reason, e.message.clone(), now);
            }
            // Written down before the plan starts an app container on the strength of it.
            let sandbox = observed.sandbox.as_ref().map(|s| &s.id);
            let newly_initialized = p.initialized && self.memory.initialized_in.as_ref() != sandbox;
            if newly_initialized {
                self.memory.initialized_in = sandbox.cloned();
            }
            // Every container is reset: the init containers run again in this sandbox, and a
            // restarted podwright must not take the pod for initialized meanwhile.
            let uninitialized = p.reset && self.memory.initialized_in.take().is_some();
            // Instances about to be removed take their restart counts with them: written down
            // first, so that a restart of podwright still counts on from them.
            let removes =
                p.actions.iter().any(|a| matches!(a, Action::RemoveContainer { .. } | Action::ResetContainer { .. }));
            let counts_due = removes && self.memory.restart_counts_unsaved;
            if p.backoff != self.memory.backoff || newly_initialized || uninitialized || counts_due {
                self.memory.backoff = p.backoff;
                self.checkpoint();
            }
            if !p.actions.is_empty() {
                let result = self.deps.executor.execute(&self.running, &observed, p.actions, &cancel).await;
                if let Some(took) = result.first_start.and_then(|at| self.transition.started(at)) {
                    self.deps.ctx.metrics.transition(took);
                }
                let failed = result.kill_failed || result.removal_failed;
                self.fold(result);
                self.pass_done(kind, pass_start);
                if failed {
                    // Not at once: a runtime that fails every stop or removal would be asked in
                    // a loop.
                    tokio::select! {
                        biased;
                        _ = bell.notified() => {}
                        _ = tokio::time::sleep(RETRY) => {}
                        r = self.desired.changed(), if desired_open => desired_open = r.is_ok(),
                    }
                }
                continue;
            }
            self.pass_done(kind, pass_start);
            // Changes ring the bell: runtime events, and the node-wide relist for what they miss.
            let planned = async {
                match p.wake_at {
                    Some(at) => self.deps.ctx.clock.sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = bell.notified() => {}
                _ = planned => {}
                r = self.desired.changed(), if desired_open => desired_open = r.is_ok(),
                _ = objects.changed(), if watches_objects => self.objects_changed(),
            }
        }
    }

    /// Containers (init and app, not sidecars) that exited 0 by the runtime's event while its
    /// record still shows them running (or starting): exited, as the record will say tens of ms
    /// later, with the termination message it will carry, so that the next init container
    /// (prepared ahead, or not), the app containers, or the pod's end come now. Other exits wait
    /// for the record, which alone says `OOMKilled`, and for which nothing waits as much.
    fn take_completions(&self, uid: &str, mut containers: Vec<ObservedContainer>) -> Vec<ObservedContainer> {
        let dispatcher = &self.deps.dispatcher;
        for c in containers.iter_mut().filter(|c| c.kind != ContainerKind::Sidecar && c.state.is_live()) {
            dispatcher.await_completion(&c.id);
            if let Some(at) = dispatcher.completed(&c.id) {
                (c.state, c.exit_code, c.reason, c.finished_at) = (RunState::Exited, 0, "Completed".into(), Some(at));
                c.started_at.get_or_insert(at);
                // Exit 0: the file alone, whatever the policy.
                let message = termination_message::read(&self.deps.ctx.root, uid, &c.name, c.restart_count, "File", 0);
                if let Some(m) = message {
                    c.message = m;
                }
            }
        }
        containers
    }

    /// A ConfigMap or Secret changed: what failed for want of one is tried again at once, and
    /// the volumes' files are written again.
    fn objects_changed(&mut self) {
        let m = &mut self.memory;
        m.volumes_due = true;
        m.sandbox_failure = None;
        m.start_failures.retain(|_, f| f.reason != StartFailureReason::CreateContainerConfigError);
    }
}

/// Whether the pod refers to any ConfigMap or Secret, in its volumes or its containers'
/// environment.
fn refers_to_objects(pod: &Pod) -> bool {
    let mut volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    let in_volumes = volumes.any(|v| v.config_map.is_some() || v.secret.is_some() || v.projected.is_some());
    let in_env = pod::all_containers(pod).any(|sc| {
        let c = sc.container;
        c.env_from.as_ref().is_some_and(|e| !e.is_empty())
            || c.env
                .iter()
                .flatten()
                .filter_map(|e| e.value_from.as_ref())
                .any(|f| f.config_map_key_ref.is_some() || f.secret_key_ref.is_some())
    });
    in_volumes || in_env
}
