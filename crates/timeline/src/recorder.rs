//! Folds a pod's statuses and events into its [`Timeline`], keeping only what changed.
//!
//! # Expected flow
//! [`Recorder::new`] when the pod is first seen, then [`Recorder::status`] with every status
//! published for it and [`Recorder::event`] with every event recorded about it, each as it
//! comes; [`Recorder::timeline`] whenever a picture is wanted.
//!
//! # Guarantees
//! - Each lane's changes are in time order and no later than the status that showed them: a
//!   change takes the time the status gives it (`startedAt`, `finishedAt`,
//!   `lastTransitionTime`) when that lies between the lane's previous change and the moment
//!   the status was seen, else the moment it was seen (see `within`).
//! - A run that ended between two statuses (running, then waiting for its back-off or running
//!   again) still shows its end, from the status's `lastState`.
//! - Memory is bounded per lane: past [`MAX_PER_LANE`] states or markers the oldest quarter is
//!   dropped and counted in [`Lane::dropped`], so a probe failing every second for days costs
//!   no more than one failing for a quarter of an hour.
//!
//! # Caveats
//! - The kubelet records no event for a hook that succeeds, so a hook's run is inferred: a
//!   `postStart` hook runs right after the container's `Started` event, a `preStop` hook at the
//!   `Killing` of a container that was running.
//! - Each call to [`Recorder::event`] is one occurrence at the event's `lastTimestamp`: feed a
//!   folded event again each time its count goes up, not once with the final count.

use crate::model::{
    Change, ConditionLane, ConditionValue, Hook, Lane, Marker, MarkerKind, Probe, Role, State, Timeline,
};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod, PodStatus};
use podwright_api::container_kind::{ContainerKind, pod_containers};

/// The most states or markers a lane keeps.
pub const MAX_PER_LANE: usize = 1000;

/// The condition types of a pod on a node (the scheduler's, then the kubelet's), in the order a
/// pod passes them.
const CONDITION_ORDER: [&str; 5] =
    ["PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"];

/// Records one pod's timeline. Plain owned data: `Send`, and each call only compares the new
/// status with the last change of each lane.
#[derive(Debug, Clone)]
pub struct Recorder {
    timeline: Timeline,
    /// What the recorder remembers of each lane, by the lane's index.
    memory: Vec<LaneMemory>,
}

#[derive(Debug, Clone)]
struct LaneMemory {
    /// The events' `involvedObject.fieldPath` for this container.
    field_path: String,
    restart_count: i32,
    /// `startedAt` of the running state last recorded: a different one is a new run.
    started_at: Option<Timestamp>,
    post_start: bool,
    pre_stop: bool,
}

impl Recorder {
    /// A recorder for `pod` (its spec gives the lanes), first seen at `seen`. The axis starts at
    /// the pod's `creationTimestamp` if it has one.
    pub fn new(pod: &Pod, seen: Timestamp) -> Recorder {
        let m = &pod.metadata;
        let start = m.creation_timestamp.as_ref().map_or(seen, |t| t.0.min(seen));
        let mut lanes = vec![];
        let mut memory = vec![];
        for c in pod_containers(pod) {
            let role = match c.kind {
                ContainerKind::Init if c.is_sidecar() => Role::Sidecar(c.index),
                ContainerKind::Init => Role::Init(c.index),
                _ => Role::App,
            };
            lanes.push(Lane { name: c.name().to_string(), role, states: vec![], markers: vec![], dropped: 0 });
            let lifecycle = c.container.lifecycle.as_ref();
            memory.push(LaneMemory {
                field_path: c.field_path(),
                restart_count: 0,
                started_at: None,
                post_start: lifecycle.is_some_and(|l| l.post_start.is_some()),
                pre_stop: lifecycle.is_some_and(|l| l.pre_stop.is_some()),
            });
        }
        let timeline = Timeline {
            name: m.name.clone().unwrap_or_default(),
            namespace: m.namespace.clone().unwrap_or_else(|| "default".into()),
            uid: m.uid.clone().unwrap_or_default(),
            start,
            end: seen,
            lanes,
            conditions: vec![],
            phases: vec![],
            pod_events: vec![],
        };
        Recorder { timeline, memory }
    }

    /// The timeline so far.
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// Folds in a status of the pod, seen at `seen`.
    pub fn status(&mut self, status: &PodStatus, seen: Timestamp) {
        let t = &mut self.timeline;
        t.extend_to(seen);
        if let Some(phase) = &status.phase
            && t.phases.last().is_none_or(|c| &c.value != phase)
        {
            let at = within(seen, t.phases.last().map(|c| c.at), t.start, seen);
            t.phases.push(Change { at, value: phase.clone() });
        }
        for c in status.conditions.iter().flatten() {
            let lane = condition_lane(&mut t.conditions, &c.type_);
            let value = ConditionValue { status: c.status.clone(), reason: c.reason.clone() };
            let last = lane.changes.last();
            if last.is_some_and(|l| l.value == value) {
                continue;
            }
            // lastTransitionTime moves only with the status, not with the reason.
            let given = if last.is_none_or(|l| l.value.status != value.status) {
                c.last_transition_time.as_ref().map_or(seen, |t| t.0)
            } else {
                seen
            };
            let at = within(given, last.map(|l| l.at), t.start, seen);
            lane.changes.push(Change { at, value });
        }
        for cs in podwright_api::container_statuses(status) {
            if let Some(i) = t.lanes.iter().position(|l| l.name == cs.name) {
                fold_container(&mut t.lanes[i], &mut self.memory[i], cs, t.start, seen);
            }
        }
    }

    /// Folds in one occurrence of an event about the pod (events about another pod, by
    /// `involvedObject.uid`, and events without a time are ignored).
    pub fn event(&mut self, event: &Event) {
        let t = &mut self.timeline;
        let object = &event.involved_object;
        if object.uid.as_deref().is_some_and(|uid| !t.uid.is_empty() && uid != t.uid) {
            return;
        }
        let at = event
            .last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or(event.event_time.as_ref().map(|t| t.0))
            .or(event.first_timestamp.as_ref().map(|t| t.0));
        let Some(at) = at else { return };
        t.extend_to(at);
        let reason = event.reason.as_deref().unwrap_or_default();
        let text = event.message.clone().unwrap_or_default();
        let lane = object.field_path.as_deref().and_then(|fp| self.memory.iter().position(|m| m.field_path == fp));
        let Some(i) = lane else {
            let kind = MarkerKind::Event { reason: reason.to_string(), warning: is_warning(event) };
            t.pod_events.push(Marker { at, kind, text: format!("{reason}: {text}") });
            return;
        };
        let (lane, memory) = (&mut t.lanes[i], &self.memory[i]);
        let inferred_hook = match reason {
            "Started" if memory.post_start => Some((Hook::PostStart, "postStart hook runs after the start")),
            "Killing"
                if memory.pre_stop
                    && matches!(lane.states.last(), Some(c) if matches!(c.value, State::Running { .. })) =>
            {
                Some((Hook::PreStop, "preStop hook runs before the stop"))
            }
            _ => None,
        };
        let kind = match reason {
            "Unhealthy" => probe_of(&text).map_or_else(
                || MarkerKind::Event { reason: reason.to_string(), warning: is_warning(event) },
                MarkerKind::ProbeFailed,
            ),
            "FailedPostStartHook" => MarkerKind::Hook { hook: Hook::PostStart, failed: true },
            "FailedPreStopHook" => MarkerKind::Hook { hook: Hook::PreStop, failed: true },
            "Killing" => MarkerKind::Killing,
            _ => MarkerKind::Event { reason: reason.to_string(), warning: is_warning(event) },
        };
        push_bounded(&mut lane.markers, &mut lane.dropped, Marker { at, kind, text: format!("{reason}: {text}") });
        if let Some((hook, text)) = inferred_hook {
            let marker = Marker { at, kind: MarkerKind::Hook { hook, failed: false }, text: text.to_string() };
            push_bounded(&mut lane.markers, &mut lane.dropped, marker);
        }
    }
}

/// Records what changed in one container's status.
fn fold_container(lane: &mut Lane, memory: &mut LaneMemory, cs: &ContainerStatus, start: Timestamp, seen: Timestamp) {
    let first_sight = lane.states.is_empty();
    let restarted = !first_sight && cs.restart_count > memory.restart_count;
    // A run that ended between two statuses (the next one shows the container waiting for its
    // back-off, or already running again): its end is only in lastState.
    let last_run = lane.states.iter().rev().find(|c| !matches!(c.value, State::Waiting { .. }));
    let another_run = cs.state.as_ref().is_some_and(|s| {
        s.waiting.is_some()
            || s.running.as_ref().is_some_and(|r| r.started_at.as_ref().map(|t| t.0) != memory.started_at)
    });
    if another_run
        && last_run.is_some_and(|c| matches!(c.value, State::Running { .. }))
        && let Some(ended) = cs.last_state.as_ref().and_then(|s| s.terminated.as_ref())
    {
        // It ended after the last change we saw, whatever its second-cut finishedAt says.
        let finished = ended.finished_at.as_ref().map_or(seen, |t| t.0);
        let at = clamp(finished, lane.states.last().map_or(start, |c| c.at), seen);
        let value = State::Terminated { exit_code: ended.exit_code, reason: ended.reason.clone() };
        push_bounded(&mut lane.states, &mut lane.dropped, Change { at, value });
    }
    memory.restart_count = cs.restart_count;
    let Some(state) = &cs.state else { return };
    let (value, given, new_run) = if let Some(r) = &state.running {
        let started_at = r.started_at.as_ref().map(|t| t.0);
        let new_run = started_at != memory.started_at;
        memory.started_at = started_at;
        // A runtime that does not say whether the startup probe passed has none to pass.
        let value = State::Running { started: cs.started.unwrap_or(true), ready: cs.ready };
        (value, if new_run { started_at.unwrap_or(seen) } else { seen }, new_run)
    } else if let Some(t) = &state.terminated {
        let value = State::Terminated { exit_code: t.exit_code, reason: t.reason.clone() };
        (value, t.finished_at.as_ref().map_or(seen, |t| t.0), false)
    } else if let Some(w) = &state.waiting {
        (State::Waiting { reason: w.reason.clone(), message: w.message.clone() }, seen, false)
    } else {
        return;
    };
    if !new_run && lane.states.last().is_some_and(|c| c.value == value) {
        return;
    }
    let at = within(given, lane.states.last().map(|c| c.at), start, seen);
    push_bounded(&mut lane.states, &mut lane.dropped, Change { at, value });
    if restarted {
        let text = format!("restart count {}", cs.restart_count);
        push_bounded(
            &mut lane.markers,
            &mut lane.dropped,
            Marker { at, kind: MarkerKind::Restart(cs.restart_count), text },
        );
    }
}

/// When a change happened: the time the status gives it, kept between the lane's previous
/// change (or the axis start) and the moment it was seen. A given time before the previous
/// change belongs to something already drawn (a terminated state shown again once its back-off
/// is over) or was cut to the second: such a change is new when it is seen.
fn within(given: Timestamp, previous: Option<Timestamp>, start: Timestamp, seen: Timestamp) -> Timestamp {
    match previous {
        Some(p) if given < p => seen.max(p),
        Some(p) => clamp(given, p, seen),
        None => clamp(given, start, seen),
    }
}

fn clamp(t: Timestamp, floor: Timestamp, ceiling: Timestamp) -> Timestamp {
    t.min(ceiling).max(floor)
}

/// The lane of a condition type, made in its place if it is new.
fn condition_lane<'a>(lanes: &'a mut Vec<ConditionLane>, type_: &str) -> &'a mut ConditionLane {
    let rank = |t: &str| CONDITION_ORDER.iter().position(|k| *k == t).unwrap_or(CONDITION_ORDER.len());
    let i = match lanes.iter().position(|l| l.type_ == type_) {
        Some(i) => i,
        None => {
            let i = lanes.iter().position(|l| rank(&l.type_) > rank(type_)).unwrap_or(lanes.len());
            lanes.insert(i, ConditionLane { type_: type_.to_string(), changes: vec![] });
            i
        }
    };
    &mut lanes[i]
}

/// The probe an `Unhealthy` message is about (`Liveness probe failed: ...`).
fn probe_of(message: &str) -> Option<Probe> {
    [Probe::Startup, Probe::Liveness, Probe::Readiness].into_iter().find(|p| {
        let word = p.as_str();
        message.get(..word.len()).is_some_and(|w| w.eq_ignore_ascii_case(word))
            && message[word.len()..].starts_with(" probe")
    })
}

fn is_warning(event: &Event) -> bool {
    event.type_.as_deref() == Some("Warning")
}

fn push_bounded<T>(items: &mut Vec<T>, dropped: &mut usize, item: T) {
    if items.len() >= MAX_PER_LANE {
        let n = MAX_PER_LANE / 4;
        items.drain(..n);
        *dropped += n;
    }
    items.push(item);
}
