//! Per-container decisions shared by the planner and the status function, so that what the
//! status says ("CrashLoopBackOff", "PodInitializing") is exactly what the planner does.

use crate::backoff::Backoff;
use crate::observed::{ContainerKind, Observed, ObservedContainer, RunState};
use crate::pod::{self, SpecContainer};
use crate::words::{RestartPolicy, RuleAction, StartFailureReason, WaitingReason};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use podwright_api::go;

/// Retry delay after a start failure that has no back-off of its own (the kubelet re-syncs a
/// pod whose sync failed after 10 s).
pub const START_RETRY: SignedDuration = SignedDuration::from_secs(10);

/// Everything a decision reads.
#[derive(Debug, Clone, Copy)]
pub struct PodContext<'a> {
    pub pod: &'a Pod,
    pub observed: &'a Observed,
    pub backoff: &'a Backoff,
    pub now: Timestamp,
    /// When the pod worker first accepted the pod (`status.startTime`).
    pub start_time: Option<Timestamp>,
    /// Deletion requested (Ctrl-C in `run`): stop everything, start nothing.
    pub deleting: bool,
    /// The grace period the deleter asked for (`--grace-period`), instead of the pod's
    /// `terminationGracePeriodSeconds`; 0 means at once.
    pub grace_override: Option<i64>,
}

/// What should happen to one container of the spec now.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Running (or a completed init container): leave it.
    Keep,
    /// Exited and not to be restarted.
    Done,
    /// Start a new instance.
    Start { restart_count: i32 },
    /// Must not start before `until`; `reason` is the waiting reason the status shows.
    Wait { until: Timestamp, reason: WaitingReason, message: String },
}

/// Whether the newest sandbox can hold containers: ready, with an IP unless the pod is on the
/// host's network, which has none of its own (the kubelet's `PodSandboxChanged`, whose other
/// cases the observation already settles: the newest sandbox is the one looked at).
pub fn sandbox_ready(ctx: &PodContext) -> bool {
    let on_host = pod::host_network(ctx.pod);
    ctx.observed.sandbox.as_ref().is_some_and(|s| s.ready && (on_host || s.ip.is_some()))
}

/// What an exited instance of a container calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterExit {
    /// Nothing: it has done its part, or its policy does not restart it.
    Stay,
    /// A new instance of the container.
    Restart,
    /// Every container of the pod stopped and removed, then the pod run again from its first
    /// init container in the same sandbox (the rule action `RestartAllContainers`).
    RestartAll,
}

/// The kubelet's `ContainerShouldRestart` with the action of the matching rule: the first of the
/// container's `restartPolicyRules` that matches the exit code, else the container's own
/// `restartPolicy`, else the pod's. A sidecar restarts whatever it exits with (its rules may
/// only restart every container); a regular init container that succeeded has done its part.
pub fn after_exit(pod: &Pod, sc: &SpecContainer, c: &ObservedContainer) -> AfterExit {
    let rule = RuleAction::matching(sc.container, c.exit_code);
    if rule == Some(RuleAction::RestartAllContainers) {
        return AfterExit::RestartAll;
    }
    let restart = match sc.kind {
        ContainerKind::Sidecar => true,
        ContainerKind::Init if !c.failed() => false,
        _ if rule == Some(RuleAction::Restart) => true,
        ContainerKind::Init => sc.restart_policy(pod) != RestartPolicy::Never,
        ContainerKind::App => sc.restart_policy(pod).restarts(c.exit_code),
    };
    if restart { AfterExit::Restart } else { AfterExit::Stay }
}

/// Whether the newest instance should be replaced by a new one (the kubelet's
/// `ShouldContainerBeRestarted`): also when its exit restarts every container, which makes a
/// new instance of each.
pub fn should_restart(pod: &Pod, sc: &SpecContainer, newest: Option<&ObservedContainer>) -> bool {
    let Some(c) = newest else { return true };
    match c.state {
        RunState::Running => false,
        RunState::Created | RunState::Unknown => true,
        RunState::Exited => after_exit(pod, sc, c) != AfterExit::Stay,
    }
}

/// The container whose exit restarts every container of the pod now: its newest instance, in
/// the current sandbox, exited with a code its `RestartAllContainers` rule matches, and the
/// crash back-off (measured from that exit, as for a restart of the container alone) does not
/// hold it. The pod's `AllContainersRestarting` condition is true while one is found.
pub fn restart_all_source<'a>(ctx: &PodContext<'a>) -> Option<SpecContainer<'a>> {
    // A pod that is stopping for good restarts nothing.
    if ctx.deleting || ended_by_node(ctx) || apps_finished(ctx) {
        return None;
    }
    let sandbox = ctx.observed.sandbox.as_ref()?;
    pod::all_containers(ctx.pod).find(|sc| {
        ctx.observed.newest(sc.name()).is_some_and(|c| {
            c.state == RunState::Exited
                && c.sandbox_id == sandbox.id
                && after_exit(ctx.pod, sc, c) == AfterExit::RestartAll
                && crash_backoff(ctx, sc).is_none()
        })
    })
}

/// Whether any container of the pod has a `RestartAllContainers` rule: such a pod reports the
/// `AllContainersRestarting` condition (the kubelet's `AllContainersCouldRestart`).
pub fn could_restart_all(pod: &Pod) -> bool {
    pod::all_containers(pod)
        .flat_map(|sc| sc.container.restart_policy_rules.iter().flatten())
        .any(|r| r.action == "RestartAllContainers")
}

/// Given that `sc` should run a new instance, whether it may start now.
pub fn start_or_wait(ctx: &PodContext, sc: &SpecContainer) -> Decision {
    let restart_count = ctx.observed.restart_count(sc.name()).map_or(0, |n| n + 1);
    if let Some(f) = ctx.observed.failure_before_running(sc.name()) {
        if f.reason == StartFailureReason::ErrImagePull {
            if let Some(until) = ctx.backoff.blocked_since_update(&pull_key(sc.image()), ctx.now) {
                return Decision::Wait {
                    until,
                    reason: WaitingReason::ImagePullBackOff,
                    message: format!("Back-off pulling image \"{}\"", sc.image()),
                };
            }
        } else if ctx.now < f.at + START_RETRY {
            return Decision::Wait {
                until: f.at + START_RETRY,
                reason: WaitingReason::StartFailed(f.reason),
                message: f.message.clone(),
            };
        }
        return Decision::Start { restart_count };
    }
    crash_backoff(ctx, sc).unwrap_or(Decision::Start { restart_count })
}

/// When the newest exited instance of `sc` ended (its finish time, or its creation for an
/// instance the runtime gave no finish time).
pub fn finished_at(c: &ObservedContainer) -> Timestamp {
    c.finished_at.unwrap_or(c.created_at)
}

/// The crash back-off's wait before `sc` may start again, if it must wait: measured from the
/// newest exited instance, as the kubelet's `doBackOff` does.
pub fn crash_backoff(ctx: &PodContext, sc: &SpecContainer) -> Option<Decision> {
    let c = ctx.observed.newest_exited(sc.name())?;
    let key = sc.backoff_key();
    let until = ctx.backoff.blocked_until(&key, finished_at(c), ctx.now)?;
    Some(Decision::Wait {
        until,
        reason: WaitingReason::CrashLoopBackOff,
        message: format!(
            "back-off {} restarting failed container={} pod={}",
            go::format_duration(ctx.backoff.window(&key)),
            sc.name(),
            pod::display_name(ctx.pod)
        ),
    })
}

pub fn decide(ctx: &PodContext, sc: &SpecContainer) -> Decision {
    let newest = ctx.observed.newest(sc.name());
    if ctx.deleting {
        return if newest.is_some_and(|c| c.state == RunState::Running) { Decision::Keep } else { Decision::Done };
    }
    if should_restart(ctx.pod, sc, newest) {
        start_or_wait(ctx, sc)
    } else if newest.is_some_and(|c| c.state == RunState::Running)
        || newest.is_some_and(|c| c.succeeded()) && sc.kind == ContainerKind::Init
    {
        Decision::Keep
    } else {
        Decision::Done
    }
}

/// The image back-off key (the kubelet keys pulls by pod and image).
pub fn pull_key(image: &str) -> String {
    format!("pull:{image}")
}

/// Whether a sidecar counts as started: running, and its startup probe (if any) succeeded.
pub fn sidecar_started(ctx: &PodContext, sc: &SpecContainer, c: &ObservedContainer) -> bool {
    c.state == RunState::Running
        && (sc.container.startup_probe.is_none() || ctx.observed.probes.startup.get(&c.id).copied().unwrap_or(false))
}

/// What the init containers call for now (the kubelet's `computeInitContainerActions`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InitActions {
    /// Init containers (indices in `spec.initContainers`, spec order) to start, restart or
    /// look after: each is then decided on like any container.
    pub to_act: Vec<usize>,
    /// Every init container has done its part: the app containers may run.
    pub initialized: bool,
}

/// Whether initialization is known to have happened in this sandbox although the init
/// containers' records may say nothing (pruned): an app container has run here, or the worker
/// wrote down that initialization completed here (the init-containers proposal's "record
/// whether all init containers have succeeded"; kubernetes#90271).
pub fn initialized_before(ctx: &PodContext) -> bool {
    let Some(sandbox) = ctx.observed.sandbox.as_ref().map(|s| s.id.as_str()) else { return false };
    if ctx.observed.initialized_in.as_deref() == Some(sandbox) {
        return true;
    }
    // An app container created ahead of its turn is no evidence: it waits for that very end.
    let early: Vec<&str> = early_instances(ctx).map(|c| c.id.as_str()).collect();
    ctx.observed.containers.iter().any(|c| {
        c.kind == ContainerKind::App && c.sandbox_id == sandbox && c.state.is_live() && !early.contains(&c.id.as_str())
    })
}

/// Scans the init containers from the last one back, as the kubelet does: records before the
/// newest one that ran may have been pruned, so the last init container with a record says
/// where the sequence stands. An init container after a sidecar that has run (or is running)
/// means that sidecar has done its part: its crash then only queues its own restart, and the
/// sequence goes on without it. So does the last sidecar's once the pod has initialized in
/// this sandbox.
pub fn init_actions(ctx: &PodContext) -> InitActions {
    let inits: Vec<SpecContainer> = pod::init_containers(ctx.pod).collect();
    let mut out = InitActions { initialized: inits.is_empty() || initialized_before(ctx), ..Default::default() };
    // Whether an init container after this one has a record (or the pod has initialized).
    let mut later_ran = out.initialized;
    let last = inits.len().saturating_sub(1);
    for (i, sc) in inits.iter().enumerate().rev() {
        let sidecar = sc.kind == ContainerKind::Sidecar;
        let Some(c) = ctx.observed.newest(sc.name()).filter(|_| early(ctx, sc).is_none()) else {
            // A sidecar whose record is gone, in a pod past it: run it again.
            if later_ran && sidecar {
                out.to_act.push(i);
            }
            continue;
        };
        if later_ran && !sidecar {
            continue;
        }
        match c.state {
            RunState::Running if sidecar => {
                // Its probes are looked after either way; once started, the next one may go.
                out.to_act.push(i);
                if sidecar_started(ctx, sc, c) {
                    if i == last {
                        out.initialized = true;
                    } else if !later_ran {
                        out.to_act.push(i + 1);
                    }
                }
            }
            RunState::Running => {}
            RunState::Exited if !sidecar && c.succeeded() => {
                if i == last {
                    out.initialized = true;
                } else {
                    out.to_act.push(i + 1);
                }
            }
            // The pod has failed (its phase says so): nothing more to start.
            _ if !sidecar && c.failed() && !should_restart(ctx.pod, sc, Some(c)) => {
                return InitActions::default();
            }
            // Created, exited (a sidecar, or failed), unknown: restart it.
            _ => out.to_act.push(i),
        }
        later_ran = true;
    }
    if !later_ran {
        out.to_act.push(0);
    }
    // Found from the last one back; started in spec order.
    out.to_act.sort_unstable();
    out
}

/// The newest instance of `sc`, if it was created ahead of its turn (the pipelined start,
/// `Action::PrepareContainer`): created and never started while the regular init container
/// before it has not exited 0. For an app container that is the last init container, and its
/// turn has come too once the pod is written down as initialized in the current sandbox (its
/// records may be pruned since). Until its turn, it is nothing: no evidence of how far
/// initialization got (kubernetes#140309 took a created container for one), never started,
/// removed when the pod will not go on; should a podwright die meanwhile, the next one finds it
/// the same way. Once its turn has come, it is an instance that never started, and is started
/// as it is.
pub fn early<'a>(ctx: &PodContext<'a>, sc: &SpecContainer) -> Option<&'a ObservedContainer> {
    created_behind(ctx, sc).filter(|&(_, turn)| !turn).map(|(c, _)| c)
}

/// The newest instance of `sc` if it is created and never started behind a regular init
/// container (the one before it, for an app container the last one), as the pipelined start
/// makes them, and whether its turn has come. Such an instance is not in the status until it
/// starts, its turn come or not: a container waits `PodInitializing` until it runs.
pub fn created_behind<'a>(ctx: &PodContext<'a>, sc: &SpecContainer) -> Option<(&'a ObservedContainer, bool)> {
    let before = match sc.kind {
        ContainerKind::App => pod::init_containers(ctx.pod).last(),
        _ => sc.index.checked_sub(1).and_then(|i| pod::init_containers(ctx.pod).nth(i)),
    }?;
    if before.kind != ContainerKind::Init {
        return None;
    }
    let c = ctx.observed.newest(sc.name()).filter(|c| c.state == RunState::Created)?;
    let sandbox = ctx.observed.sandbox.as_ref().map(|s| s.id.as_str());
    let turn = ctx.observed.newest(before.name()).is_some_and(ObservedContainer::succeeded)
        || (sc.kind == ContainerKind::App && sandbox.is_some() && ctx.observed.initialized_in.as_deref() == sandbox);
    Some((c, turn))
}

/// The instances created ahead of their turn ([`early`]), of every container of the pod.
pub fn early_instances<'a>(ctx: &PodContext<'a>) -> impl Iterator<Item = &'a ObservedContainer> {
    pod::all_containers(ctx.pod).filter_map(|sc| early(ctx, &sc))
}

/// All app containers have exited in this sandbox and none will restart: the pod is finished
/// (sidecars are then stopped and do not count). Instances from an earlier sandbox do not
/// count: a new sandbox runs its init containers and app containers again.
pub fn apps_finished(ctx: &PodContext) -> bool {
    let Some(sandbox) = ctx.observed.sandbox.as_ref() else { return false };
    pod::app_containers(ctx.pod).all(|sc| {
        let newest = ctx.observed.newest(sc.name());
        newest.is_some_and(|c| c.state == RunState::Exited && c.sandbox_id == sandbox.id)
            && !should_restart(ctx.pod, &sc, newest)
    })
}

/// The node has ended the pod for good: it was evicted, or its active deadline passed. It fails
/// whatever its containers say, and nothing of it starts again.
pub fn ended_by_node(ctx: &PodContext) -> bool {
    ctx.observed.eviction.is_some() || deadline_exceeded(ctx)
}

/// `activeDeadlineSeconds` has passed since the pod started.
pub fn deadline_exceeded(ctx: &PodContext) -> bool {
    match (pod::spec(ctx.pod).active_deadline_seconds, ctx.start_time) {
        (Some(secs), Some(start)) => ctx.now >= start + SignedDuration::from_secs(secs),
        _ => false,
    }
}

/// When the active deadline passes, if the pod has one and it is still ahead.
pub fn deadline_at(ctx: &PodContext) -> Option<Timestamp> {
    let secs = pod::spec(ctx.pod).active_deadline_seconds?;
    ctx.start_time.map(|s| s + SignedDuration::from_secs(secs))
}
