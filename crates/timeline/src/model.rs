//! What a timeline holds: for each container the changes of its state and the moments worth a
//! mark, and for the pod the changes of its conditions and phase. Only changes are kept: a
//! state lasts from its change until the next one (or the end of the timeline).

use jiff::Timestamp;

/// One pod's life, as recorded by [`crate::Recorder`] and drawn by [`crate::render_html`].
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    /// Where the time axis starts: the pod's creation, else the first thing seen.
    pub start: Timestamp,
    /// Where it ends: the last thing seen, or later with [`Timeline::extend_to`].
    pub end: Timestamp,
    /// One lane per container, in spec order: init containers (sidecars among them), then app
    /// containers.
    pub lanes: Vec<Lane>,
    /// One lane per pod condition type: `PodScheduled` and the four the kubelet sets, in the
    /// order a pod passes them, then any others (readiness gates) as they appear.
    pub conditions: Vec<ConditionLane>,
    /// The pod's phase.
    pub phases: Vec<Change<String>>,
    /// Events about the pod rather than one container (sandbox changes, hook warnings, ...).
    pub pod_events: Vec<Marker>,
}

impl Timeline {
    /// Moves the end of the axis to `t` if that is later (a running pod drawn now).
    pub fn extend_to(&mut self, t: Timestamp) {
        self.end = self.end.max(t);
    }
}

/// A change to a new value at a moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Change<T> {
    pub at: Timestamp,
    pub value: T,
}

/// What a container is in its pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// An init container that runs to completion; its position in `spec.initContainers`.
    Init(usize),
    /// An init container with `restartPolicy: Always`; its position in `spec.initContainers`.
    Sidecar(usize),
    /// An entry of `spec.containers`.
    App,
}

impl Role {
    /// The word for it in the picture and in class names.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Init(_) => "init",
            Role::Sidecar(_) => "sidecar",
            Role::App => "app",
        }
    }

    /// Its description under the lane's name, worded as `podwright check` words it.
    pub fn describe(self) -> String {
        match self {
            Role::Init(i) => format!("init container {}", i + 1),
            Role::Sidecar(i) => format!("sidecar (init container {})", i + 1),
            Role::App => "app container".to_string(),
        }
    }
}

/// One container's lane.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    pub name: String,
    pub role: Role,
    pub states: Vec<Change<State>>,
    pub markers: Vec<Marker>,
    /// How many of the oldest states and markers were dropped to bound the memory of a
    /// long-lived pod (see [`crate::Recorder`]).
    pub dropped: usize,
}

/// A container's state as its status tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Waiting {
        reason: Option<String>,
        message: Option<String>,
    },
    Running {
        /// The startup probe passed (or there is none).
        started: bool,
        ready: bool,
    },
    Terminated {
        exit_code: i32,
        reason: Option<String>,
    },
}

/// Something that happened at a moment, drawn as a mark on a lane.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    pub at: Timestamp,
    pub kind: MarkerKind,
    /// What it says in its tooltip: the event's message, or what the recorder saw.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkerKind {
    /// The restart count went up to this.
    Restart(i32),
    /// An `Unhealthy` event: a probe of this kind failed (or errored).
    ProbeFailed(Probe),
    /// A lifecycle hook ran (inferred: `postStart` right after `Started`, `preStop` at `Killing`
    /// of a running container; the kubelet records no event for a hook that succeeds), or
    /// failed (`FailedPostStartHook`, `FailedPreStopHook`).
    Hook { hook: Hook, failed: bool },
    /// A `Killing` event.
    Killing,
    /// Any other event, by reason (`Pulling`, `Pulled`, `Created`, `Started`, `BackOff`, ...).
    Event { reason: String, warning: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    Startup,
    Liveness,
    Readiness,
}

impl Probe {
    pub fn as_str(self) -> &'static str {
        match self {
            Probe::Startup => "startup",
            Probe::Liveness => "liveness",
            Probe::Readiness => "readiness",
        }
    }
}

pub use podwright_api::Hook;

/// One pod condition type's lane.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionLane {
    pub type_: String,
    pub changes: Vec<Change<ConditionValue>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionValue {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: Option<String>,
}
