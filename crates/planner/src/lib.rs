//! The pure core of podwright: `plan()` decides what to do next for a pod and `pod_status()`
//! says what the pod's status is, both from the spec, what was observed in the runtime, the
//! back-off state and the current time. No I/O, no clock, no async.

pub mod backoff;
pub mod decide;
pub mod observed;
pub mod plan;
pub mod pod;
pub mod qos;
pub mod resize;
pub mod resources;
pub mod status;
pub mod termination;
pub mod words;

pub use backoff::{Backoff, Curve};
pub use decide::PodContext;
pub use observed::{
    ContainerKind, Eviction, Observed, ObservedContainer, ObservedSandbox, ProbeResults, RunState, StartFailure,
};
pub use plan::{Action, MINIMUM_GRACE, Plan, PlanEvent, ResizeTarget, plan, plan_in_phase};
pub use status::{pod_status, pod_status_and_phase};
pub use words::{Phase, ProbeKind, PullPolicy, RestartPolicy, StartFailureReason, WaitingReason};
