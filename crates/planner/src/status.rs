//! `pod_status()`: the v1 `PodStatus` the kubelet would report for what was observed: phase,
//! conditions and every container status with Kubernetes' states and reasons.

use crate::decide::{self, Decision, PodContext};
use crate::observed::{ContainerKind, ObservedContainer, RunState};
use crate::pod::{self, SpecContainer};
use crate::resize;
use crate::words::{Phase, RestartPolicy, WaitingReason};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
    ContainerUser, PodCondition, PodIP, PodStatus, VolumeMount, VolumeMountStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub const DEADLINE_MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

fn time(t: Timestamp) -> Time {
    Time(t)
}

/// How an instance that exited ended, as `state.terminated` or `lastState.terminated` shows it.
pub fn terminated(c: &ObservedContainer) -> ContainerStateTerminated {
    ContainerStateTerminated {
        container_id: Some(format!("containerd://{}", c.id)),
        exit_code: c.exit_code,
        reason: (!c.reason.is_empty()).then(|| c.reason.clone()),
        message: (!c.message.is_empty()).then(|| c.message.clone()),
        started_at: c.started_at.map(time),
        finished_at: c.finished_at.map(time),
        signal: None,
    }
}

fn state_of(c: &ObservedContainer) -> ContainerState {
    match c.state {
        RunState::Running => ContainerState {
            running: Some(ContainerStateRunning { started_at: c.started_at.map(time) }),
            ..Default::default()
        },
        RunState::Exited => ContainerState { terminated: Some(terminated(c)), ..Default::default() },
        // A created but never started container is waiting with no reason.
        RunState::Created => ContainerState { waiting: Some(ContainerStateWaiting::default()), ..Default::default() },
        RunState::Unknown => ContainerState {
            terminated: Some(ContainerStateTerminated {
                container_id: Some(format!("containerd://{}", c.id)),
                ..status_unknown()
            }),
            ..Default::default()
        },
    }
}

/// The state of a container the kubelet could not locate when the pod was terminated.
fn status_unknown() -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: 137,
        reason: Some("ContainerStatusUnknown".into()),
        message: Some("The container could not be located when the pod was terminated".into()),
        ..Default::default()
    }
}

fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting { reason: Some(reason.to_string()), message }),
        ..Default::default()
    }
}

/// The status of one spec container.
pub fn container_status(ctx: &PodContext, sc: &SpecContainer) -> ContainerStatus {
    let mut st = container_state_status(ctx, sc);
    resize::report_resources(ctx, sc, &mut st);
    let newest = ctx.observed.newest(sc.name());
    st.volume_mounts = volume_mount_statuses(ctx, sc, newest);
    st.user = newest.and_then(|c| c.user.clone()).map(|linux| ContainerUser { linux: Some(linux) });
    st
}

/// The kubelet's `status.volumeMounts`: every mount of the spec, the read-only ones with their
/// recursive read-only mode resolved, as the runtime made it for an instance that exists.
fn volume_mount_statuses(
    ctx: &PodContext,
    sc: &SpecContainer,
    newest: Option<&ObservedContainer>,
) -> Option<Vec<VolumeMountStatus>> {
    let mounts = sc.container.volume_mounts.as_ref().filter(|m| !m.is_empty())?;
    let status = |m: &VolumeMount| {
        let read_only = m.read_only.unwrap_or(false);
        let recursive = match newest {
            Some(c) => c.recursive_read_only.contains(&m.mount_path),
            None => {
                matches!(m.recursive_read_only.as_deref(), Some("Enabled" | "IfPossible"))
                    && ctx.observed.recursive_read_only_supported
            }
        };
        VolumeMountStatus {
            name: m.name.clone(),
            mount_path: m.mount_path.clone(),
            read_only: read_only.then_some(true),
            recursive_read_only: read_only.then(|| if recursive { "Enabled" } else { "Disabled" }.to_string()),
            // An image volume's digest here is alpha (ImageVolumeWithDigest, 1.36): off.
            volume_status: None,
        }
    };
    Some(mounts.iter().map(status).collect())
}

/// [`container_status`] but for the resources.
fn container_state_status(ctx: &PodContext, sc: &SpecContainer) -> ContainerStatus {
    // An instance created ahead of its turn is not there yet, as far as the status goes, until
    // it starts.
    let early = decide::created_behind(ctx, sc).map(|(c, _)| c.id.as_str());
    let mut instances = ctx.observed.instances(sc.name());
    instances.retain(|c| Some(c.id.as_str()) != early);
    let newest = instances.first().copied();
    let default_reason = if pod::has_init_containers(ctx.pod) { "PodInitializing" } else { "ContainerCreating" };

    let mut st = ContainerStatus {
        name: sc.name().to_string(),
        image: sc.image().to_string(),
        restart_count: ctx.observed.restart_count_beside(sc.name(), early).unwrap_or(0),
        started: Some(false),
        ready: false,
        ..Default::default()
    };
    let Some(c) = newest else {
        st.state = Some(match ctx.observed.pending_failure(sc.name()) {
            Some(_) => held_back(ctx, sc).unwrap_or_else(|| waiting(default_reason, None)),
            None => waiting(default_reason, None),
        });
        return st;
    };

    st.container_id = Some(format!("containerd://{}", c.id));
    if !c.image.is_empty() {
        st.image = c.image.clone();
    }
    st.image_id = c.image_ref.clone();
    st.state = Some(state_of(c));
    st.last_state = instances
        .get(1)
        .filter(|p| p.state == RunState::Exited)
        .map(|p| ContainerState { terminated: Some(terminated(p)), ..Default::default() })
        .or_else(|| reset_last_state(ctx, sc, c));

    // A container that will be restarted but is held back shows why it waits, with the
    // instance that ended as its last state. Completed init containers never wait, nor does
    // anything of a pod that is stopping (a sidecar after its app containers have finished).
    // A pod the node ends (deadline, eviction) is no exception: the kubelet's reason cache
    // still applies to it (`ShouldContainerBeRestarted` looks at a deletion only), so a
    // container caught in its back-off keeps waiting, and `terminate_pod` then reports it lost.
    let restarting = c.state != RunState::Running
        && !(sc.kind == ContainerKind::Init && c.succeeded())
        && decide::should_restart(ctx.pod, sc, Some(c))
        && (!pod_stopping(ctx) || decide::ended_by_node(ctx) && !ctx.deleting);
    if let Some(w) = held_back(ctx, sc).filter(|_| restarting) {
        if c.state == RunState::Exited {
            st.last_state = Some(ContainerState { terminated: Some(terminated(c)), ..Default::default() });
        }
        st.state = Some(w);
    }

    let running = c.state == RunState::Running;
    let probe = |m: &std::collections::BTreeMap<String, bool>| m.get(&c.id).copied().unwrap_or(false);
    let started = running && (sc.container.startup_probe.is_none() || probe(&ctx.observed.probes.startup));
    st.started = Some(started);
    st.ready = match sc.kind {
        ContainerKind::Init => c.succeeded(),
        _ => started && (sc.container.readiness_probe.is_none() || probe(&ctx.observed.probes.readiness)),
    };
    st
}

/// The instance a reset (`RestartAllContainers`) removed, once the instance made after it has
/// started: a waiting container with a last state counts as stopped for the phase, which would
/// end a `Never` pod whose containers are yet to run again.
fn reset_last_state(ctx: &PodContext, sc: &SpecContainer, newest: &ObservedContainer) -> Option<ContainerState> {
    let t = ctx.observed.reset_terminations.get(sc.name())?;
    let before = t.finished_at.as_ref().is_none_or(|f| f.0 <= newest.created_at);
    let started = matches!(newest.state, RunState::Running | RunState::Exited);
    (before && started).then(|| ContainerState { terminated: Some(t.clone()), ..Default::default() })
}

/// Deleted, evicted, past its deadline, or with every app container done for good: nothing of
/// the pod starts again.
fn pod_stopping(ctx: &PodContext) -> bool {
    ctx.deleting || decide::ended_by_node(ctx) || decide::apps_finished(ctx)
}

/// The waiting state of a container the planner is holding back, if it is.
fn held_back(ctx: &PodContext, sc: &SpecContainer) -> Option<ContainerState> {
    match decide::start_or_wait(ctx, sc) {
        Decision::Wait { reason: WaitingReason::ImagePullBackOff, message, .. } => {
            // Right after a failed pull the kubelet shows ErrImagePull; afterwards the back-off.
            let f = ctx.observed.pending_failure(sc.name())?;
            if ctx.now < f.at + SignedDuration::from_secs(1) {
                Some(waiting(f.reason.as_str(), Some(f.message.clone())))
            } else {
                // Since 1.32 the message keeps the last pull's error (the image manager's
                // `prevPullErrMsg`), so that the status does not lose why it backs off.
                let message = format!("{message}: {}: {}", f.reason.as_str(), f.message);
                Some(waiting(WaitingReason::ImagePullBackOff.as_str(), Some(message)))
            }
        }
        Decision::Wait { reason, message, .. } => Some(waiting(reason.as_str(), Some(message))),
        _ => {
            let f = ctx.observed.pending_failure(sc.name())?;
            Some(waiting(f.reason.as_str(), Some(f.message.clone())))
        }
    }
}

fn init_statuses<'a>(ctx: &PodContext<'a>) -> Vec<(SpecContainer<'a>, ContainerStatus)> {
    pod::init_containers(ctx.pod).map(|sc| (sc, container_status(ctx, &sc))).collect()
}

fn app_statuses<'a>(ctx: &PodContext<'a>) -> Vec<(SpecContainer<'a>, ContainerStatus)> {
    let mut v: Vec<_> = pod::app_containers(ctx.pod).map(|sc| (sc, container_status(ctx, &sc))).collect();
    v.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    v
}

fn is_running(s: &ContainerStatus) -> bool {
    s.state.as_ref().is_some_and(|st| st.running.is_some())
}
fn term(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.state.as_ref()?.terminated.as_ref()
}
fn last_term(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.last_state.as_ref()?.terminated.as_ref()
}
fn is_waiting(s: &ContainerStatus) -> bool {
    s.state.as_ref().is_some_and(|st| st.waiting.is_some())
}

/// The kubelet's `getPhase`, over the statuses this module generates.
fn phase_of(
    ctx: &PodContext,
    inits: &[(SpecContainer, ContainerStatus)],
    apps: &[(SpecContainer, ContainerStatus)],
) -> Phase {
    if decide::ended_by_node(ctx) {
        return Phase::Failed;
    }
    let (mut pending_init, mut failed_init, mut running, mut waiting, mut stopped, mut succeeded, mut unknown) =
        (0, 0, 0, 0, 0, 0, 0);
    for (sc, s) in inits {
        if sc.kind == ContainerKind::Sidecar {
            if is_running(s) {
                running += 1;
                if s.started != Some(true) {
                    pending_init += 1;
                }
            } else if term(s).is_some() || (is_waiting(s) && last_term(s).is_some()) {
            } else if is_waiting(s) {
                pending_init += 1;
                waiting += 1;
            } else {
                pending_init += 1;
                unknown += 1;
            }
            continue;
        }
        // A failure counts when nothing will run the container again: its own policy, or the
        // pod's, is `Never` and no rule restarts it.
        let failed = |t: &ContainerStateTerminated| t.exit_code != 0 && !restarts(ctx, sc);
        if is_running(s) {
            pending_init += 1;
        } else if let Some(t) = term(s) {
            if failed(t) {
                failed_init += 1;
            }
        } else if is_waiting(s) {
            match last_term(s) {
                Some(t) if failed(t) => failed_init += 1,
                Some(_) => {}
                None => pending_init += 1,
            }
        } else {
            pending_init += 1;
        }
    }
    let mut app_started = false;
    for (_, s) in apps {
        if is_running(s) {
            running += 1;
            app_started = true;
        } else if let Some(t) = term(s) {
            stopped += 1;
            app_started = true;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if is_waiting(s) {
            if last_term(s).is_some() {
                stopped += 1;
            } else {
                waiting += 1;
            }
        } else {
            unknown += 1;
        }
    }
    if failed_init > 0 {
        return Phase::Failed;
    }
    if pending_init > 0 && !app_started {
        return Phase::Pending;
    }
    if waiting > 0 {
        return Phase::Pending;
    }
    if running > 0 && unknown == 0 {
        return Phase::Running;
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        let pod_is_terminal = ctx.deleting || decide::apps_finished(ctx);
        if pod_is_terminal {
            return if stopped == succeeded { Phase::Succeeded } else { Phase::Failed };
        }
        // A container whose own policy or rule restarts it keeps the pod running, whatever
        // the pod's policy.
        if apps.iter().any(|(sc, _)| restarts(ctx, sc)) {
            return Phase::Running;
        }
        return match RestartPolicy::of(ctx.pod) {
            RestartPolicy::Always => Phase::Running,
            _ if stopped == succeeded => Phase::Succeeded,
            RestartPolicy::Never => Phase::Failed,
            RestartPolicy::OnFailure => Phase::Running,
        };
    }
    Phase::Pending
}

/// Whether the container's newest instance, exited, will be followed by another.
fn restarts(ctx: &PodContext, sc: &SpecContainer) -> bool {
    let newest = ctx.observed.newest(sc.name());
    newest.is_some_and(|c| c.state == RunState::Exited) && decide::should_restart(ctx.pod, sc, newest)
}

/// The kubelet's `TerminatePod`, for a pod that has ended and of which nothing runs any more:
/// a container status that is not terminated now never will be, so it is reported as lost
/// (`ContainerStatusUnknown`, 137) rather than left waiting or running. App containers only
/// once the pod has initialized (else they keep `PodInitializing`); init containers up to the
/// last one with evidence of a start.
fn terminate_pod(inits: &mut [(SpecContainer, ContainerStatus)], apps: &mut [(SpecContainer, ContainerStatus)]) {
    let lost = |s: &mut ContainerStatus| {
        if term(s).is_none() {
            s.state = Some(ContainerState { terminated: Some(status_unknown()), ..Default::default() });
        }
    };
    if has_initialized(inits, apps) {
        apps.iter_mut().for_each(|(_, s)| lost(s));
    }
    // All but the trailing init containers that never started (the first one at least).
    let started = inits.iter().rposition(|(_, s)| !is_waiting(s) || last_term(s).is_some()).unwrap_or(0);
    inits.iter_mut().take(started + 1).for_each(|(_, s)| lost(s));
}

/// In a terminal pod nothing runs again, so how a container ended, once reported, is final:
/// whatever records of it the runtime still has (some are removed with the pod, and podwright
/// may die halfway), it keeps the terminated status last reported, as the kubelet keeps an old
/// terminated status for a container the runtime no longer knows.
fn keep_ended(now: &mut [(SpecContainer, ContainerStatus)], reported: Option<&[ContainerStatus]>) {
    for (sc, st) in now.iter_mut() {
        let ended = reported.into_iter().flatten().find(|r| r.name == sc.name() && term(r).is_some());
        if let Some(ended) = ended {
            *st = ended.clone();
        }
    }
}

/// The status manager's `hasPodInitialized`: no init containers, an app container that ever
/// left `waiting`, or a last init container that completed (a sidecar: started).
fn has_initialized(inits: &[(SpecContainer, ContainerStatus)], apps: &[(SpecContainer, ContainerStatus)]) -> bool {
    let Some((last, s)) = inits.last() else { return true };
    if apps.iter().any(|(_, s)| !is_waiting(s) || last_term(s).is_some()) {
        return true;
    }
    match last.kind {
        ContainerKind::Sidecar => is_running(s) && s.started == Some(true),
        _ => [term(s), last_term(s)].into_iter().flatten().any(|t| t.exit_code == 0),
    }
}

/// The pod's phase now.
pub fn phase(ctx: &PodContext) -> Phase {
    deleted_phase(ctx, phase_of(ctx, &init_statuses(ctx), &app_statuses(ctx)))
}

/// A deleted pod whose containers have all stopped is terminal: if its containers do not say
/// `Succeeded`, it `Failed` (the kubelet never leaves a terminated pod `Pending` or `Running`).
fn deleted_phase(ctx: &PodContext, phase: Phase) -> Phase {
    if ctx.deleting && !ctx.observed.any_running() && phase != Phase::Succeeded { Phase::Failed } else { phase }
}

fn condition(kind: &str, ok: bool, reason: Option<&str>, message: Option<String>) -> PodCondition {
    PodCondition {
        type_: kind.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        reason: reason.map(str::to_string),
        message,
        ..Default::default()
    }
}

/// `[a b]`, Go's formatting of a string slice.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

fn conditions(
    ctx: &PodContext,
    phase: Phase,
    inits: &[(SpecContainer, ContainerStatus)],
    apps: &[(SpecContainer, ContainerStatus)],
    previous: Option<&PodStatus>,
) -> Vec<PodCondition> {
    let sandbox_ready = decide::sandbox_ready(ctx);
    let mut out = vec![condition("PodReadyToStartContainers", sandbox_ready, None, None)];

    let app_started = apps.iter().any(|(_, s)| is_running(s) || term(s).is_some());
    let incomplete: Vec<&str> = inits
        .iter()
        .filter(|(sc, s)| if sc.kind == ContainerKind::Sidecar { s.started != Some(true) } else { !s.ready })
        .map(|(_, s)| s.name.as_str())
        .collect();
    out.push(if phase == Phase::Succeeded {
        condition("Initialized", true, Some("PodCompleted"), None)
    } else if app_started
        || incomplete.is_empty()
        || decide::initialized_before(ctx)
        || stays_initialized(ctx, previous)
    {
        condition("Initialized", true, None, None)
    } else {
        condition(
            "Initialized",
            false,
            Some("ContainersNotInitialized"),
            Some(format!("containers with incomplete status: {}", go_list(&incomplete))),
        )
    });

    let unready: Vec<&str> = inits
        .iter()
        .filter(|(sc, _)| sc.kind == ContainerKind::Sidecar)
        .chain(apps.iter())
        .filter(|(_, s)| !s.ready)
        .map(|(_, s)| s.name.as_str())
        .collect();
    let containers_ready = if phase == Phase::Succeeded {
        condition("ContainersReady", false, Some("PodCompleted"), None)
    } else if unready.is_empty() {
        condition("ContainersReady", true, None, None)
    } else {
        condition(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(format!("containers with unready status: {}", go_list(&unready))),
        )
    };
    let ready = if containers_ready.status != "True" {
        PodCondition { type_: "Ready".into(), ..containers_ready.clone() }
    } else {
        readiness_gates(ctx)
    };
    out.push(ready);
    out.push(containers_ready);
    if decide::could_restart_all(ctx.pod) {
        out.push(all_containers_restarting(ctx, phase));
    }
    out.push(condition("PodScheduled", true, None, None));
    out
}

/// A pod that restarts all its containers in place stays initialized while its init containers
/// run again: once initialized, a pod is never uninitialized (the kubelet keeps a true
/// `Initialized` condition of such a pod).
fn stays_initialized(ctx: &PodContext, previous: Option<&PodStatus>) -> bool {
    let conditions = previous.and_then(|p| p.conditions.as_deref()).unwrap_or_default();
    decide::could_restart_all(ctx.pod) && conditions.iter().any(|c| c.type_ == "Initialized" && c.status == "True")
}

/// The kubelet's `AllContainersRestarting` condition: true while a container's exit is
/// restarting every container of the pod.
fn all_containers_restarting(ctx: &PodContext, phase: Phase) -> PodCondition {
    const KIND: &str = "AllContainersRestarting";
    match phase {
        Phase::Succeeded => condition(KIND, false, Some("PodCompleted"), None),
        Phase::Failed => condition(KIND, false, Some("PodFailed"), None),
        _ if decide::restart_all_source(ctx).is_some() => condition(
            KIND,
            true,
            Some("RestartAllContainersStarted"),
            Some("container exited with restart policy rule".to_string()),
        ),
        _ => condition(KIND, false, None, None),
    }
}

fn readiness_gates(ctx: &PodContext) -> PodCondition {
    let existing = ctx.pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    let mut parts = vec![];
    for gate in pod::spec(ctx.pod).readiness_gates.iter().flatten() {
        let kind = &gate.condition_type;
        match existing.and_then(|cs| cs.iter().find(|c| &c.type_ == kind)) {
            None => parts.push(format!("corresponding condition of pod readiness gate \"{kind}\" does not exist.")),
            Some(c) if c.status != "True" => {
                parts.push(format!("the status of pod readiness gate \"{kind}\" is not \"True\", but {}", c.status))
            }
            Some(_) => {}
        }
    }
    if parts.is_empty() {
        condition("Ready", true, None, None)
    } else {
        condition("Ready", false, Some("ReadinessGatesNotReady"), Some(parts.join(", ")))
    }
}

/// The whole `PodStatus`. `previous` keeps condition transition times and terminal phases.
pub fn pod_status(ctx: &PodContext, previous: Option<&PodStatus>) -> PodStatus {
    pod_status_and_phase(ctx, previous).0
}

/// `pod_status()` and its phase, typed, for a caller that plans next (`plan_in_phase`).
pub fn pod_status_and_phase(ctx: &PodContext, previous: Option<&PodStatus>) -> (PodStatus, Phase) {
    let mut inits = init_statuses(ctx);
    let mut apps = app_statuses(ctx);
    let mut phase = deleted_phase(ctx, phase_of(ctx, &inits, &apps));
    let prev_phase = previous.and_then(|p| Phase::parse(p.phase.as_deref()?));
    // Phases never leave Succeeded or Failed.
    if let Some(pp) = prev_phase.filter(|p| p.is_terminal()) {
        phase = pp;
    }
    if let Some(previous) = previous.filter(|_| prev_phase.is_some_and(Phase::is_terminal)) {
        keep_ended(&mut inits, previous.init_container_statuses.as_deref());
        keep_ended(&mut apps, previous.container_statuses.as_deref());
    }
    if phase.is_terminal() && !ctx.observed.any_running() {
        terminate_pod(&mut inits, &mut apps);
    }
    let generation = observed_generation(ctx);
    let mut conds = conditions(ctx, phase, &inits, &apps, previous);
    if !phase.is_terminal() {
        conds.extend(resize::conditions(ctx));
    }
    let prev_conds = previous.and_then(|p| p.conditions.as_ref());
    for c in &mut conds {
        c.observed_generation = generation;
        let prev = prev_conds.and_then(|pc| pc.iter().find(|p| p.type_ == c.type_));
        c.last_transition_time = Some(match prev {
            Some(p) if p.status == c.status => p.last_transition_time.clone().unwrap_or(time(ctx.now)),
            _ => time(ctx.now),
        });
    }
    let pod_ips = pod_ips(ctx, previous);
    // The eviction is the earlier of the two: once evicted, the pod is not measured against its
    // deadline.
    let (reason, message) = if let Some(e) = &ctx.observed.eviction {
        (Some(e.reason.clone()), Some(e.message.clone()))
    } else if decide::deadline_exceeded(ctx) {
        (Some("DeadlineExceeded".to_string()), Some(DEADLINE_MESSAGE.to_string()))
    } else if prev_phase == Some(phase) {
        (previous.and_then(|p| p.reason.clone()), previous.and_then(|p| p.message.clone()))
    } else {
        (None, None)
    };
    let status = PodStatus {
        observed_generation: generation,
        phase: Some(phase.as_str().to_string()),
        reason,
        message,
        conditions: Some(conds),
        pod_ip: pod_ips.as_ref().and_then(|ips| ips.first()).map(|ip| ip.ip.clone()),
        pod_ips,
        start_time: ctx.start_time.map(time),
        qos_class: Some(crate::qos::qos_class(ctx.pod).to_string()),
        init_container_statuses: (!inits.is_empty()).then(|| inits.into_iter().map(|(_, s)| s).collect()),
        container_statuses: Some(apps.into_iter().map(|(_, s)| s).collect()),
        ..Default::default()
    };
    (status, phase)
}

/// The generation of the spec this status was made from (`metadata.generation`, which the API
/// server sets): the kubelet writes it as `status.observedGeneration` and on each condition it
/// owns (`CalculatePodStatusObservedGeneration`; KEP-5067, GA in 1.35). A pod without one (a
/// manifest, a static pod) reports none.
fn observed_generation(ctx: &PodContext) -> Option<i64> {
    ctx.pod.metadata.generation.filter(|g| *g != 0)
}

/// The pod's IPs: the newest sandbox's, or, once no sandbox is ready (a finished pod, its
/// network torn down), the last ones reported, as the kubelet's PLEG keeps a dead pod's IPs
/// (`getPodIPs`): a finished pod keeps its IP.
fn pod_ips(ctx: &PodContext, previous: Option<&PodStatus>) -> Option<Vec<PodIP>> {
    let sandbox = ctx.observed.sandbox.as_ref();
    if let Some(ip) = sandbox.and_then(|s| s.ip.clone()) {
        return Some(vec![PodIP { ip }]);
    }
    if sandbox.is_some_and(|s| s.ready) {
        return None;
    }
    previous.and_then(|p| p.pod_ips.clone()).filter(|ips| !ips.is_empty())
}
