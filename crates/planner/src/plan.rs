//! `plan()`: given the spec, what was observed, the back-off state and `now`, what to do next.
//! The kubelet's `computePodActions`, made explicit and pure.

use crate::backoff::Backoff;
use crate::decide::{self, Decision, PodContext};
use crate::observed::{ContainerKind, ObservedContainer, RunState};
use crate::pod::{self, SpecContainer};
use crate::resize;
use crate::status;
use crate::words::{Phase, PullPolicy, RestartPolicy, WaitingReason};
use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Stop every running container (app containers first, then sidecars in reverse order)
    /// and the sandbox.
    KillPod {
        grace: Duration,
    },
    CreateSandbox {
        attempt: u32,
    },
    /// Pull (per `pull`), create and start a new instance of a spec container; or, with
    /// `created`, start that instance, which was created and never started.
    StartContainer {
        kind: ContainerKind,
        index: usize,
        restart_count: i32,
        pull: PullPolicy,
        created: Option<String>,
    },
    /// The pipelined start: pull (per `pull`) and create, never start, a new instance of the
    /// init container after the regular one that runs (or starts earlier in this pass), or of
    /// an app container when that one is the last init container, so that
    /// once that one has exited 0 a later pass only has to start it (`StartContainer` with
    /// `created`). Right after that one's start, it is done during it (the executor overlaps
    /// them once that one is pulled and created, and skips it if that fails); should that start
    /// fail later, the prepared instance is simply early. A failure is no start failure (the
    /// start itself pulls and creates again and says why).
    PrepareContainer {
        kind: ContainerKind,
        index: usize,
        restart_count: i32,
        pull: PullPolicy,
    },
    KillContainer {
        id: String,
        name: String,
        message: String,
        grace: Duration,
    },
    RemoveContainer {
        id: String,
        name: String,
    },
    /// Stop an instance at once if it is `live` (no `preStop` hook, no grace), then remove it:
    /// a part of `RestartAllContainers`. A reset that fails ends the pass, so that the resets
    /// after it (the source's last) are not done.
    ResetContainer {
        id: String,
        name: String,
        live: bool,
    },
    /// Give running containers what is now allocated to them, through `UpdateContainerResources`,
    /// and the pod cgroup its new size: grown before the containers, shrunk after. With no
    /// containers, the pod cgroup only (a pod-level resize that no container follows).
    ResizeContainers {
        containers: Vec<ResizeTarget>,
    },
}

/// A running container to resize in place: its spec container and its instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResizeTarget {
    pub kind: ContainerKind,
    pub index: usize,
    pub id: String,
}

/// An event the planner's decisions call for (the executor records the ones of its own
/// actions: Pulling, Created, Started, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
    /// The event's `involvedObject.fieldPath`, when about one container.
    pub field_path: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub actions: Vec<Action>,
    /// Re-plan no later than this, even if nothing happens in the runtime.
    pub wake_at: Option<Timestamp>,
    /// Back-off state after this plan's restart decisions; the caller stores it.
    pub backoff: Backoff,
    pub events: Vec<PlanEvent>,
    /// Every init container has done its part in the current sandbox: the caller writes this
    /// down before acting on the plan, which may start the app containers.
    pub initialized: bool,
    /// Every container is being reset (`RestartAllContainers`): the pod initializes again in
    /// its sandbox, so the caller forgets where initialization completed before acting.
    pub reset: bool,
}

impl Plan {
    fn wake(&mut self, t: Timestamp) {
        self.wake_at = Some(self.wake_at.map_or(t, |w| w.min(t)));
    }
}

/// Is anything of the pod still alive in the runtime (a ready sandbox, a running container)?
fn anything_live(ctx: &PodContext) -> bool {
    ctx.observed.sandbox.as_ref().is_some_and(|s| s.ready) || ctx.observed.any_running()
}

/// How long to wait before creating a sandbox again after it failed.
pub const SANDBOX_RETRY: SignedDuration = SignedDuration::from_secs(10);

pub fn plan(ctx: &PodContext) -> Plan {
    plan_in_phase(ctx, status::phase(ctx))
}

/// `plan()` for a caller that has just computed the pod's status, and with it the phase (the
/// pod worker): the container statuses are not worked out twice.
pub fn plan_in_phase(ctx: &PodContext, phase: Phase) -> Plan {
    let mut p = Plan {
        actions: vec![],
        wake_at: None,
        backoff: ctx.backoff.clone(),
        events: vec![],
        initialized: false,
        reset: false,
    };
    // First, so that a new instance may take an interrupted one's name (its attempt).
    for c in &ctx.observed.interrupted {
        p.actions.push(Action::RemoveContainer { id: c.id.clone(), name: c.name.clone() });
    }
    let grace = kill_grace(ctx);
    let sandbox_ok = decide::sandbox_ready(ctx);
    // Worked out while stopping too: a pod that completed its initialization just before its
    // deletion stays initialized while its containers stop.
    let init = sandbox_ok.then(|| decide::init_actions(ctx));
    p.initialized = init.as_ref().is_some_and(|i| i.initialized);

    // Terminal: deletion, an eviction, the deadline, a failed init under Never, or every app
    // container done for good. Kill what lives, start nothing.
    if ctx.deleting || phase.is_terminal() || decide::apps_finished(ctx) {
        if anything_live(ctx) {
            if ctx.observed.eviction.is_none() && decide::deadline_exceeded(ctx) {
                p.events.push(PlanEvent {
                    warning: false,
                    reason: "DeadlineExceeded",
                    message: status::DEADLINE_MESSAGE.to_string(),
                    field_path: None,
                });
            }
            p.actions.push(Action::KillPod { grace });
        }
        // What was created ahead of its turn will never have one, and what is stranded in an
        // older sandbox never runs.
        let stranded = ctx.observed.containers.iter().filter(|c| ctx.observed.stranded(c));
        for c in decide::early_instances(ctx).chain(stranded) {
            p.actions.push(Action::RemoveContainer { id: c.id.clone(), name: c.name.clone() });
        }
        return p;
    }
    if let Some(at) = decide::deadline_at(ctx) {
        p.wake(at);
    }

    let Some(init) = init else {
        plan_new_sandbox(ctx, &mut p, grace);
        return p;
    };
    // The init-containers proposal: changing an init container's image is equivalent to
    // restarting the pod. Everything stops, and every init container runs again in a new sandbox.
    // An instance created ahead of its turn never ran: it changes nothing, and goes if stale.
    if pod::init_containers(ctx.pod).any(|sc| {
        ctx.observed.newest(sc.name()).is_some_and(|c| definition_changed(&sc, c) && decide::early(ctx, &sc).is_none())
    }) {
        restart_pod(ctx, &mut p, grace);
        return p;
    }
    if let Some(source) = decide::restart_all_source(ctx) {
        restart_all(ctx, &source, &mut p);
        return p;
    }

    prune_dead(ctx, &mut p);

    // Init containers first (sidecars are looked after for the pod's whole life), then, once
    // initialized, the app containers.
    let inits: Vec<SpecContainer> = pod::init_containers(ctx.pod).collect();
    for sc in init.to_act.iter().filter_map(|&i| inits.get(i)) {
        apply(ctx, sc, &mut p);
    }
    prepare_next(ctx, &inits, init.initialized, &mut p);
    if init.initialized {
        for sc in pod::app_containers(ctx.pod) {
            apply(ctx, &sc, &mut p);
        }
    }
    resize_running(ctx, &mut p);
    p
}

/// In-place resize (`computePodResizeAction`): each running container whose allocation
/// changed, and that no other action of the pass touches, is updated, or restarted where a
/// changed resource's policy says `RestartContainer`; a pod-level change resizes the pod cgroup
/// even when no container changes with it. After a failed attempt the next waits for the pod
/// worker's retry.
fn resize_running(ctx: &PodContext, p: &mut Plan) {
    let sandbox = ctx.observed.sandbox.as_ref().map(|s| s.id.as_str());
    let touched = |id: &str| {
        p.actions.iter().any(
            |a| matches!(a, Action::KillContainer { id: k, .. } | Action::RemoveContainer { id: k, .. } if k == id),
        )
    };
    let mut updates = vec![];
    let mut restarts = vec![];
    for sc in pod::all_containers(ctx.pod).filter(|sc| resize::resizable(sc.kind)) {
        let Some(c) = ctx.observed.newest(sc.name()) else { continue };
        if c.state != RunState::Running || Some(c.sandbox_id.as_str()) != sandbox || touched(&c.id) {
            continue;
        }
        match resize::need(ctx.pod, &sc, &ctx.observed.resize.actuated) {
            resize::Need::Nothing => {}
            resize::Need::Update => updates.push(ResizeTarget { kind: sc.kind, index: sc.index, id: c.id.clone() }),
            resize::Need::Restart => restarts.push((sc, c)),
        }
    }
    for (sc, c) in restarts {
        p.actions.push(Action::KillContainer {
            id: c.id.clone(),
            name: c.name.clone(),
            message: resize::restart_message(sc.name()),
            grace: pod_grace(ctx.pod),
        });
        p.actions.push(start(&sc, c.restart_count + 1, None));
    }
    if updates.is_empty() && !resize::pod_level_unactuated(ctx) {
        return;
    }
    match ctx.observed.resize.error.as_ref().map(|e| e.at + decide::START_RETRY).filter(|at| *at > ctx.now) {
        Some(retry) => p.wake(retry),
        None => p.actions.push(Action::ResizeContainers { containers: updates }),
    }
}

/// The kubelet never gives a container less than this between the stop signal and KILL
/// (`minimumGracePeriodInSeconds`), whatever `terminationGracePeriodSeconds` says: a spec 0
/// still gets its stop signal and `preStop` hook.
pub const MINIMUM_GRACE: Duration = Duration::from_secs(2);

/// A grace period from the spec, with the kubelet's floor.
pub fn spec_grace(secs: i64) -> Duration {
    Duration::from_secs(secs.max(0) as u64).max(MINIMUM_GRACE)
}

/// The pod's own grace period (`terminationGracePeriodSeconds`), with the floor.
pub fn pod_grace(pod: &k8s_openapi::api::core::v1::Pod) -> Duration {
    spec_grace(pod::grace_period_secs(pod))
}

/// The grace period an eviction gives the pod's containers: the eviction manager's
/// `immediateEvictionGracePeriodSeconds` (kubernetes#124063; before it, a 0 that the pod worker
/// read as "the pod's own"), with the kubelet's floor.
pub const EVICTION_GRACE_SECONDS: i64 = 1;

/// The grace period for stopping the pod: the deleter's override when deleting (an explicit 0
/// stops at once, the only way to get no grace at all), else the pod's own; an eviction's when
/// that is shorter.
pub fn kill_grace(ctx: &PodContext) -> Duration {
    let asked = match ctx.grace_override.filter(|_| ctx.deleting) {
        Some(0) => Duration::ZERO,
        Some(secs) => spec_grace(secs),
        None => pod_grace(ctx.pod),
    };
    match ctx.observed.eviction {
        Some(_) => asked.min(spec_grace(EVICTION_GRACE_SECONDS)),
        None => asked,
    }
}

/// Whether the instance was made from another definition of the container (another image).
/// An instance without a hash predates hashing and is taken as current.
fn definition_changed(sc: &SpecContainer, c: &ObservedContainer) -> bool {
    !c.hash.is_empty() && !sc.has_hash(&c.hash)
}

/// The start of a new instance of `sc`, or of `created`, an instance never started.
fn start(sc: &SpecContainer, restart_count: i32, created: Option<String>) -> Action {
    Action::StartContainer {
        kind: sc.kind,
        index: sc.index,
        restart_count,
        pull: PullPolicy::of(sc.container),
        created,
    }
}

/// Acts on one container's decision.
fn apply(ctx: &PodContext, sc: &SpecContainer, p: &mut Plan) {
    if restart_changed(ctx, sc, p) || restart_unhealthy(ctx, sc, p) {
        return;
    }
    match decide::decide(ctx, sc) {
        Decision::Keep | Decision::Done => {}
        Decision::Start { restart_count } => {
            if let Some(c) = never_started(ctx, sc) {
                // Created by a podwright that died before starting it (kubelets replace it,
                // counting a restart it never had): started as it is, so that the pod's life
                // reads as if nothing had happened.
                p.actions.push(start(sc, c.restart_count, Some(c.id.clone())));
                return;
            }
            if let Some(c) =
                ctx.observed.newest(sc.name()).filter(|c| matches!(c.state, RunState::Unknown | RunState::Created))
            {
                p.actions.push(Action::KillContainer {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    message: unknown_state_message(sc),
                    grace: pod_grace(ctx.pod),
                });
            }
            if ctx.observed.failure_before_running(sc.name()).is_none() {
                record_restart(ctx, sc, p);
            }
            p.actions.push(start(sc, restart_count, None));
        }
        Decision::Wait { until, reason, .. } => {
            p.wake(until);
            if let Some(again) = pull_resync(ctx, sc, reason) {
                p.wake(again);
            }
            match reason {
                WaitingReason::CrashLoopBackOff => p.events.push(PlanEvent {
                    warning: true,
                    reason: "BackOff",
                    message: format!(
                        "Back-off restarting failed container {} in pod {}",
                        sc.name(),
                        pod::display_name(ctx.pod)
                    ),
                    field_path: Some(sc.field_path()),
                }),
                // The kubelet's image puller says it backs off, then `startContainer` says
                // why the container did not start.
                WaitingReason::ImagePullBackOff => p.events.extend([
                    PlanEvent {
                        warning: false,
                        reason: "BackOff",
                        message: format!("Back-off pulling image \"{}\"", sc.image()),
                        field_path: Some(sc.field_path()),
                    },
                    PlanEvent {
                        warning: true,
                        reason: "Failed",
                        message: "Error: ImagePullBackOff".into(),
                        field_path: Some(sc.field_path()),
                    },
                ]),
                WaitingReason::StartFailed(_) => {}
            }
        }
    }
}

/// When the pod worker syncs again after a failed pull: the kubelet's pod worker re-queues a
/// pod whose sync failed after 10 s (`backOffPeriod`), so within a longer image back-off the
/// container's reason turns from `ErrImagePull` to `ImagePullBackOff`.
fn pull_resync(ctx: &PodContext, sc: &SpecContainer, reason: WaitingReason) -> Option<Timestamp> {
    if reason != WaitingReason::ImagePullBackOff {
        return None;
    }
    let again = ctx.observed.failure_before_running(sc.name())?.at + decide::START_RETRY;
    (again > ctx.now).then_some(again)
}

/// The newest instance of `sc`, if it is one podwright created in the current sandbox from the
/// current definition and never started. A failed call since does not disqualify it: a killed
/// podwright's CreateContainer or StartContainer, finished by its keeper process after the next
/// podwright made its own, fails that one ("name is reserved", "already in
/// starting state") and leaves this instance to be started, once the failure's retry delay
/// has passed.
fn never_started<'a>(ctx: &'a PodContext, sc: &SpecContainer) -> Option<&'a ObservedContainer> {
    let sandbox = ctx.observed.sandbox.as_ref()?;
    let c = ctx.observed.newest(sc.name())?;
    (c.state == RunState::Created && c.sandbox_id == sandbox.id && !definition_changed(sc, c)).then_some(c)
}

/// The pipelined start (after the pass's own actions, which it never delays): while a regular
/// init container runs, or once it has started in this pass, the init container after it is
/// pulled and created, so that the moment the running one exits 0 only its start remains. With
/// the start of the last init container, when that is a regular one, the app containers are
/// (the kubelet starts them all, in order, once it has exited 0), in that pass only: a pod whose
/// last init container runs has nothing else to do, and one found so by a restarted podwright
/// creates its app containers after that exit, as the kubelet does. After a sidecar, nothing
/// (its turn comes with the sidecar's start, which is no exit). Nothing is prepared for a container already
/// created, with an instance in this sandbox, held back (a start failure's wait, an image
/// back-off), or whose preparation failed since it last started. An instance created ahead of
/// its turn from a definition since changed goes.
fn prepare_next(ctx: &PodContext, inits: &[SpecContainer], initialized: bool, p: &mut Plan) {
    for sc in pod::all_containers(ctx.pod) {
        if let Some(c) = decide::early(ctx, &sc).filter(|c| definition_changed(&sc, c)) {
            p.actions.push(Action::RemoveContainer { id: c.id.clone(), name: c.name.clone() });
        }
    }
    let starting = |sc: &SpecContainer| {
        p.actions
            .iter()
            .any(|a| matches!(a, Action::StartContainer { kind: ContainerKind::Init, index, .. } if *index == sc.index))
    };
    let runs = |sc: &SpecContainer| ctx.observed.newest(sc.name()).is_some_and(|c| c.state == RunState::Running);
    let Some(current) = inits.iter().position(|sc| sc.kind == ContainerKind::Init && (runs(sc) || starting(sc))) else {
        return;
    };
    let next: Vec<SpecContainer> = match inits.get(current + 1) {
        Some(next) => vec![*next],
        None if !initialized && starting(&inits[current]) => pod::app_containers(ctx.pod).collect(),
        None => vec![],
    };
    for next in next {
        if ctx.observed.newest(next.name()).is_some() || ctx.observed.prepare_failed.contains(next.name()) {
            continue;
        }
        if let Decision::Start { restart_count } = decide::start_or_wait(ctx, &next) {
            p.actions.push(Action::PrepareContainer {
                kind: next.kind,
                index: next.index,
                restart_count,
                pull: PullPolicy::of(next.container),
            });
        }
    }
}

/// A restart after an exited instance moves the crash back-off on (the kubelet's
/// `backOff.Next` in `doBackOff`); a first start, with nothing exited, does not.
fn record_restart(ctx: &PodContext, sc: &SpecContainer, p: &mut Plan) {
    if let Some(c) = ctx.observed.newest_exited(sc.name()) {
        p.backoff.next_restart(&sc.backoff_key(), decide::finished_at(c), ctx.now);
    }
}

/// A running app container whose definition changed (a new image) is killed and started again
/// from the new definition in the same pass, whatever the restart policy, as the kubelet does.
fn restart_changed(ctx: &PodContext, sc: &SpecContainer, p: &mut Plan) -> bool {
    if sc.kind != ContainerKind::App {
        return false;
    }
    let Some(c) = ctx.observed.newest(sc.name()).filter(|c| c.state == RunState::Running) else { return false };
    if !definition_changed(sc, c) {
        return false;
    }
    p.actions.push(Action::KillContainer {
        id: c.id.clone(),
        name: c.name.clone(),
        message: format!("Container {} definition changed, will be restarted", sc.name()),
        grace: pod_grace(ctx.pod),
    });
    p.actions.push(start(sc, c.restart_count + 1, None));
    true
}

/// A running instance whose liveness or startup probe failed is killed and, unless the pod
/// never restarts containers, replaced in the same pass, unless the crash back-off holds it:
/// the kubelet measures the back-off from the newest instance that had exited before this
/// kill, so the first restart is immediate and the following ones wait (the next pass sees
/// the killed instance exited and waits out the rest).
fn restart_unhealthy(ctx: &PodContext, sc: &SpecContainer, p: &mut Plan) -> bool {
    let Some(c) = ctx.observed.newest(sc.name()).filter(|c| c.state == RunState::Running) else { return false };
    let Some(probe) = ctx.observed.probes.failed(&c.id) else { return false };
    // The container's own policy decides, not its rules (they judge exits, not probe kills).
    let restart = sc.restart_policy(ctx.pod) != RestartPolicy::Never;
    let message = if sc.kind.is_init_list() {
        format!("Init container {} failed {probe} probe", sc.name())
    } else if restart {
        format!("Container {} failed {probe} probe, will be restarted", sc.name())
    } else {
        format!("Container {} failed {probe} probe", sc.name())
    };
    let probe_grace = probe.spec(sc.container).and_then(|p| p.termination_grace_period_seconds);
    let grace = probe_grace.map_or_else(|| pod_grace(ctx.pod), spec_grace);
    p.actions.push(Action::KillContainer { id: c.id.clone(), name: c.name.clone(), message, grace });
    if restart && decide::crash_backoff(ctx, sc).is_none() {
        record_restart(ctx, sc, p);
        p.actions.push(start(sc, c.restart_count + 1, None));
    }
    true
}

fn unknown_state_message(sc: &SpecContainer) -> String {
    if sc.kind.is_init_list() {
        "Init container is in \"unknown\" state, try killing it before restart".to_string()
    } else {
        format!("Container {} is in \"unknown\" state, try killing it before restart", sc.name())
    }
}

/// No usable sandbox: make one, unless a `Never` pod already ran in a sandbox that is gone, or
/// the last attempt failed less than [`SANDBOX_RETRY`] ago.
fn plan_new_sandbox(ctx: &PodContext, p: &mut Plan, grace: Duration) {
    let ran_under_never = ctx.observed.sandbox.is_some()
        && RestartPolicy::of(ctx.pod) == RestartPolicy::Never
        && !ctx.observed.containers.is_empty();
    let retry = ctx.observed.sandbox_failure.map(|f| f + SANDBOX_RETRY).filter(|r| ctx.now < *r);
    match retry {
        _ if ran_under_never => {}
        Some(retry) => p.wake(retry),
        None => return restart_pod(ctx, p, grace),
    }
    if anything_live(ctx) {
        p.actions.push(Action::KillPod { grace });
    }
}

/// Stops whatever lives, forgets the init containers' records (a new sandbox re-runs every one
/// of them) and makes a new sandbox.
fn restart_pod(ctx: &PodContext, p: &mut Plan, grace: Duration) {
    if anything_live(ctx) {
        p.actions.push(Action::KillPod { grace });
    }
    for c in ctx.observed.containers.iter().filter(|c| c.kind.is_init_list()) {
        p.actions.push(Action::RemoveContainer { id: c.id.clone(), name: c.name.clone() });
    }
    p.actions.push(Action::CreateSandbox { attempt: ctx.observed.sandbox.as_ref().map_or(0, |s| s.attempt + 1) });
}

/// `RestartAllContainers`: every instance of every container is stopped at once and removed;
/// the sandbox, its IP and the volumes stay, and the next pass, finding no container, runs the
/// pod again from its first init container. The source's exit goes last: should podwright die
/// halfway, it is still there to finish the reset. The reset counts as the source's restart for
/// the crash back-off, so a source that keeps exiting waits it out before the next reset.
fn restart_all(ctx: &PodContext, source: &SpecContainer, p: &mut Plan) {
    record_restart(ctx, source, p);
    p.reset = true;
    let evidence = ctx.observed.newest(source.name()).map(|c| c.id.as_str());
    let (last, first): (Vec<&ObservedContainer>, Vec<&ObservedContainer>) =
        ctx.observed.containers.iter().partition(|c| Some(c.id.as_str()) == evidence);
    for c in first.into_iter().chain(last) {
        p.actions.push(Action::ResetContainer { id: c.id.clone(), name: c.name.clone(), live: c.state.is_live() });
    }
}

/// Keeps, for every container (init containers and sidecars included), the newest instance
/// and the newest exited one before it (`state` and `lastState`, for kubectl's `RESTARTS 1 (5s
/// ago)` and `logs --previous`); older dead ones are removed, as the kubelet's pruning and
/// container GC do, and so are init containers and sidecars of an older sandbox, not running,
/// that a new sandbox's removal left behind, and instances of any container stranded there
/// (`Observed::stranded`), created and never started.
fn prune_dead(ctx: &PodContext, p: &mut Plan) {
    let stale = ctx.observed.containers.iter().filter(|c| !ctx.observed.counts(c) && c.state != RunState::Running);
    for c in stale {
        p.actions.push(Action::RemoveContainer { id: c.id.clone(), name: c.name.clone() });
    }
    for sc in pod::all_containers(ctx.pod) {
        let older_exited =
            ctx.observed.instances(sc.name()).into_iter().skip(1).filter(|c| c.state == RunState::Exited);
        for c in older_exited.skip(1) {
            p.actions.push(Action::RemoveContainer { id: c.id.clone(), name: c.name.clone() });
        }
    }
}
