//! [`NodeContext`]: what nearly every part of the node uses (the runtime, the clock, the root
//! directory, where events go and the node's metrics), and nothing else.

use crate::events::{EventSink, EventType};
use crate::metrics::Metrics;
use k8s_openapi::api::core::v1::Pod;
use podwright_planner::pod::SpecContainer;
use podwright_planner::{StartFailure, StartFailureReason};
use podwright_runtime::{Clock, Runtime};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Clone)]
pub(crate) struct NodeContext {
    /// Instrumented: every call is in `metrics`.
    pub runtime: Arc<dyn Runtime>,
    pub clock: Clock,
    /// podwright's root directory (see [`crate::layout`]).
    pub root: PathBuf,
    pub events: Arc<dyn EventSink>,
    pub metrics: Arc<Metrics>,
}

impl NodeContext {
    /// Records an event of the pod (of one of its containers, when given) now.
    pub fn event(&self, pod: &Pod, sc: Option<&SpecContainer>, kind: EventType, reason: &str, message: String) {
        self.events.record(pod, sc.map(|s| s.field_path()), kind, reason, message, self.clock.now());
    }

    /// A start failure now, for the reason cache.
    pub fn failure(&self, reason: StartFailureReason, message: String) -> StartFailure {
        StartFailure { reason, message, at: self.clock.now() }
    }
}
