//! Probes (`exec`, `httpGet`, `tcpSocket`, `grpc`) and lifecycle hooks, and the prober that runs
//! a pod's probes on their schedules.

pub mod grpc_health;
pub mod hooks;
pub mod http_get;
pub mod probe;
pub mod prober;
pub mod tls;
