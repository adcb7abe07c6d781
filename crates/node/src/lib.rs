//! The node agent: pod workers that run the planner's decisions against a runtime, the
//! executor, events, volumes, checkpoints and log following.

pub mod checkpoint;
pub mod cri_config;
pub mod dispatch;
pub mod events;
pub mod executor;
pub mod grpc_health;
pub mod hooks;
pub mod http_get;
pub mod labels;
pub mod logs;
pub mod observe;
pub mod probe;
pub mod prober;
pub mod termination_message;
pub mod tls;
pub mod volumes;
pub mod worker;

pub use executor::Engine;
pub use worker::{PodUpdate, PodWorker};
