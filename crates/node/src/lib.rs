//! The node layer every mode shares: [`PodWorkers`] (one pod worker per pod, built by
//! [`Node`]), the seams the modes plug into ([`PodSource`], [`StatusSink`], [`EventSink`]), the
//! executor that applies the planner's decisions through the runtime, probes and hooks, the CRI
//! configs, the node's metrics, and every path under the root directory.

pub mod admission;
pub mod checkpoint;
pub mod credentials;
pub mod cri;
pub mod dispatch;
pub mod downward;
pub mod events;
pub mod eviction;
pub mod executor;
pub mod image_gc;
pub mod image_pulls;
mod instrumented;
pub mod layout;
pub mod log_rotation;
pub mod logs;
pub mod metrics;
pub mod node;
pub mod objects;
pub mod pod_cgroup;
pub mod pod_workers;
pub mod probes;
mod relist;
pub mod removal;
pub mod runtime_class;
pub mod sinks;
pub mod source;
pub mod static_pods;
pub mod termination_message;
pub mod timeline;
pub mod usage;
pub mod volumes;
pub mod worker;

pub use events::{EventLog, EventSink, EventType};
pub use image_gc::ImageGcPolicy;
pub use image_pulls::ImagePulls;
pub use metrics::Metrics;
pub use node::Node;
pub use pod_cgroup::PodCgroups;
pub use pod_workers::PodWorkers;
pub use sinks::{StatusSink, StatusStream};
pub use source::{PodChange, PodSource};
pub use worker::PodUpdate;
