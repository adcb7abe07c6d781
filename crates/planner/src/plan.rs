//! `plan()`: given the spec, what was observed, the back-off state and `now`, what to do next.
//! The kubelet's `computePodActions`, made explicit and pure.

use crate::backoff::Backoff;
use crate::decide::{self, Decision, InitProgress, PodContext};
use crate::observed::{ContainerKind, ObservedContainer, RunState};
use crate::pod::{self, SpecContainer};
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
    /// Pull (per `pull`), create and start a new instance of a spec container.
    StartContainer {
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
}

impl Plan {
    fn wake(&mut self, t: Timestamp) {
        self.wake_at = Some(self.wake_at.map_or(t, |w| w.min(t)));
    }
}

/// Is anything of the pod still alive in the runtime?
fn anything_live(ctx: &PodContext) -> bool {
    ctx.observed.sandbox.as_ref().is_some_and(|s| s.ready)
        || ctx.observed.containers.iter().any(|c| matches!(c.state, RunState::Running | RunState::Created))
}

/// How long to wait before creating a sandbox again after it failed.
pub const SANDBOX_RETRY: SignedDuration = SignedDuration::from_secs(10);

pub fn plan(ctx: &PodContext) -> Plan {
    plan_in_phase(ctx, status::phase(ctx))
}

/// `plan()` for a caller that has just computed the pod's status, and with it the phase (the
/// pod worker): the container statuses are not worked out twice.
pub fn plan_in_phase(ctx: &PodContext, phase: Phase) -> Plan {
    let mut p = Plan { actions: vec![], wake_at: None, backoff: ctx.backoff.clone(), events: vec![] };
    let grace = kill_grace(ctx);

    // Terminal: deletion, the deadline, a failed init under Never, or every app container
    // done for good. Kill what lives, start nothing.
    if ctx.deleting || phase.is_terminal() || decide::apps_finished(ctx) {
        if anything_live(ctx) {
            if decide::deadline_exceeded(ctx) {
                p.events.push(PlanEvent {
                    warning: false,
                    reason: "DeadlineExceeded",
                    message: status::DEADLINE_MESSAGE.to_string(),
                    field_path: None,
                });
            }
            p.actions.push(Action::KillPod { grace });
        }
        return p;
    }
    if let Some(at) = decide::deadline_at(ctx) {
        p.wake(at);
    }

    let sandbox_ok = ctx.observed.sandbox.as_ref().is_some_and(|s| s.ready && s.ip.is_some());
    if !sandbox_ok {
        plan_new_sandbox(ctx, &mut p, grace);
        return p;
    }
    // The init-containers proposal: changing an init container's image is equivalent to
    // restarting the pod. Everything stops, and every init container runs again in a new sandbox.
    if pod::init_containers(ctx.pod)
        .any(|sc| ctx.observed.newest(sc.name()).is_some_and(|c| definition_changed(&sc, c)))
    {
        restart_pod(ctx, &mut p, grace);
        return p;
    }

    prune_dead(ctx, &mut p);

    match decide::init_progress(ctx) {
        InitProgress::Failed(_) => {} // phase() already said Failed; unreachable in practice
        InitProgress::At(i) => {
            // Sidecars before `i` are restarted if they died; the one at `i` is started or
            // waited on.
            for sc in pod::init_containers(ctx.pod).take(i + 1) {
                apply(ctx, &sc, &mut p);
            }
        }
        InitProgress::Done => {
            for sc in pod::init_containers(ctx.pod).filter(|s| s.kind == ContainerKind::Sidecar) {
                apply(ctx, &sc, &mut p);
            }
            for sc in pod::app_containers(ctx.pod) {
                apply(ctx, &sc, &mut p);
            }
        }
    }
    p
}

/// The grace period for stopping the pod: the deleter's override when deleting, else the
/// pod's `terminationGracePeriodSeconds`.
pub fn kill_grace(ctx: &PodContext) -> Duration {
    let secs = ctx.grace_override.filter(|_| ctx.deleting).unwrap_or_else(|| pod::grace_period_secs(ctx.pod));
    Duration::from_secs(secs.max(0) as u64)
}

/// Whether the instance was made from another definition of the container (another image).
/// An instance without a hash predates hashing and is taken as current.
fn definition_changed(sc: &SpecContainer, c: &ObservedContainer) -> bool {
    !c.hash.is_empty() && !sc.has_hash(&c.hash)
}

/// The start of a new instance of `sc`.
fn start(sc: &SpecContainer, restart_count: i32) -> Action {
    Action::StartContainer { kind: sc.kind, index: sc.index, restart_count, pull: PullPolicy::of(sc.container) }
}

/// Acts on one container's decision.
fn apply(ctx: &PodContext, sc: &SpecContainer, p: &mut Plan) {
    if restart_changed(ctx, sc, p) || restart_unhealthy(ctx, sc, p) {
        return;
    }
    match decide::decide(ctx, sc) {
        Decision::Keep | Decision::Done => {}
        Decision::Start { restart_count } => {
            let newest = ctx.observed.newest(sc.name());
            if let Some(c) = newest {
                if c.state == RunState::Unknown || c.state == RunState::Created {
                    p.actions.push(Action::KillContainer {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        message: unknown_state_message(sc),
                        grace: Duration::from_secs(pod::grace_period_secs(ctx.pod) as u64),
                    });
                }
                if c.state == RunState::Exited && ctx.observed.failure_before_running(sc.name()).is_none() {
                    let finished = c.finished_at.unwrap_or(c.created_at);
                    p.backoff.next(&sc.backoff_key(), finished, ctx.now);
                }
            }
            p.actions.push(start(sc, restart_count));
        }
        Decision::Wait { until, reason, .. } => {
            p.wake(until);
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
                WaitingReason::ImagePullBackOff => p.events.push(PlanEvent {
                    warning: false,
                    reason: "BackOff",
                    message: format!("Back-off pulling image \"{}\"", sc.image()),
                    field_path: Some(sc.field_path()),
                }),
                WaitingReason::StartFailed(_) => {}
            }
        }
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
        grace: Duration::from_secs(pod::grace_period_secs(ctx.pod) as u64),
    });
    p.actions.push(start(sc, c.restart_count + 1));
    true
}

/// A running instance whose liveness or startup probe failed is killed and, unless the pod
/// never restarts containers, replaced in the same pass (the kubelet checks back-off against
/// the instance as it was before the kill, which was running: no back-off).
fn restart_unhealthy(ctx: &PodContext, sc: &SpecContainer, p: &mut Plan) -> bool {
    let Some(c) = ctx.observed.newest(sc.name()).filter(|c| c.state == RunState::Running) else { return false };
    let Some(probe) = ctx.observed.probes.failed(&c.id) else { return false };
    let restart = sc.kind == ContainerKind::Sidecar || RestartPolicy::of(ctx.pod) != RestartPolicy::Never;
    let message = if sc.kind.is_init_list() {
        format!("Init container {} failed {probe} probe", sc.name())
    } else if restart {
        format!("Container {} failed {probe} probe, will be restarted", sc.name())
    } else {
        format!("Container {} failed {probe} probe", sc.name())
    };
    let probe_grace = probe.spec(sc.container).and_then(|p| p.termination_grace_period_seconds);
    let secs = probe_grace.unwrap_or(pod::grace_period_secs(ctx.pod));
    p.actions.push(Action::KillContainer {
        id: c.id.clone(),
        name: c.name.clone(),
        message,
        grace: Duration::from_secs(secs.max(0) as u64),
    });
    if restart {
        p.actions.push(start(sc, c.restart_count + 1));
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

/// Keeps the newest instance of each init container (for its logs and status) and the two
/// newest of each app container (`state` and `lastState`); older dead ones are removed.
fn prune_dead(ctx: &PodContext, p: &mut Plan) {
    for sc in pod::all_containers(ctx.pod) {
        let keep = if sc.kind.is_init_list() { 1 } else { 2 };
        for c in ctx.observed.instances(sc.name()).into_iter().skip(keep) {
            if c.state == RunState::Exited {
                p.actions.push(Action::RemoveContainer { id: c.id.clone(), name: c.name.clone() });
            }
        }
    }
}
