//! The node layer every mode shares: [`Node`] builds [`PodWorkers`] (one pod worker per pod),
//! and the modes plug in where pods come from ([`PodSource`]), where statuses go
//! ([`StatusSink`]) and where events go ([`EventSink`]). `docs/src/architecture.md` shows the
//! layers; `tests/layers.rs` keeps them.
//!
//! Where a kubelet engineer finds the kubelet's parts here:
//!
//! | kubelet package (`pkg/kubelet/...`)                   | podwright module                        |
//! |-------------------------------------------------------|-----------------------------------------|
//! | `kubelet.go` (`NewMainKubelet`: wiring)               | [`builder`] ([`Node`])                  |
//! | `pod_workers.go`                                      | [`pod_workers`], [`worker`]             |
//! | `kubelet.go` `SyncPod` (deciding half)                | `podwright_planner` (pure)              |
//! | `kuberuntime/kuberuntime_manager.go` `SyncPod` (doing)| [`executor`] (`start`, `kill`)          |
//! | `kuberuntime/kuberuntime_container.go` (kill, hooks)  | [`executor`]`::kill`, [`probes::hooks`] |
//! | `kubelet_pods.go` (`HandlePodCleanups`, removal)      | [`executor`]`::remove`                  |
//! | `pleg/` (generic PLEG, relist)                        | [`pleg`]                                |
//! | `images/` (image manager, puller, GC)                 | [`images`] (`puller`, `queue`, `gc`)    |
//! | `images/pullmanager/` (who pulled which image)        | [`images::verification`] (records on disk) |
//! | `pkg/credentialprovider/` (keyring, exec plugins)     | [`images::credentials`]                 |
//! | `prober/`                                             | [`probes`]                              |
//! | `lifecycle/` (admission), `sysctl/`                   | [`admission`]                           |
//! | `eviction/`                                           | [`eviction`]                            |
//! | `kuberuntime/kuberuntime_sandbox.go`, `_container.go` | [`cri`] (configs, labels, DNS, hosts)   |
//! | `kubelet_pods.go` (`makeEnvironmentVariables`)        | [`cri::env`], [`downward`]              |
//! | `util/env` (env files of `fileKeyRef`)                | [`cri::env_file`]                       |
//! | `volumemanager/`, `volume/` plugins                   | [`volumes`]                             |
//! | `cm/` (pod container manager, QoS cgroups)            | [`pod_cgroup`]                          |
//! | `allocation/` (allocation manager, resize admission)  | [`worker`], `podwright_planner::resize` |
//! | `kuberuntime_manager.go` `doPodResizeAction`          | [`executor`]`::resize`                  |
//! | `runtimeclass/`                                       | [`runtime_class`]                       |
//! | `config/` (pod sources: file, API)                    | [`sources`], [`static_pods`]            |
//! | `pod/mirror_client.go`, static pods in `kubelet.go`   | [`static_pods`] (`StaticPods`, `mirror`)|
//! | `status/` (status manager)                            | [`sinks`] (the modes' sinks)            |
//! | `events/`, `kubelet/events`                           | [`events`]                              |
//! | `metrics/`, `server/stats/`                           | [`metrics`], [`usage`]                  |
//! | `logs/` (container log manager, rotation)             | [`logs`], [`log_rotation`]              |
//! | `checkpointmanager/`                                  | [`checkpoint`]                          |
//! | `kuberuntime/` (`termination-log`)                    | [`termination_message`]                 |
//! | root directory layout (`--root-dir`)                  | [`layout`]                              |

pub(crate) mod admission;
pub(crate) mod builder;
pub(crate) mod checkpoint;
pub(crate) mod context;
pub mod cri;
pub mod downward;
pub mod events;
pub(crate) mod eviction;
pub(crate) mod executor;
pub(crate) mod images;
pub mod layout;
pub mod log_rotation;
pub mod logs;
pub mod metrics;
pub mod node_info;
pub mod objects;
pub(crate) mod pleg;
pub(crate) mod pod_cgroup;
pub(crate) mod pod_update;
pub(crate) mod pod_workers;
pub(crate) mod probes;
pub(crate) mod runtime_class;
pub mod sinks;
pub mod sources;
pub mod static_pods;
pub(crate) mod termination_message;
pub mod timeline;
pub mod usage;
pub mod volumes;
pub(crate) mod worker;

pub use builder::Node;
pub use events::{EventLog, EventSink, EventType};
pub use executor::remove::{managed_pods, remove_managed};
pub use images::credentials::{DockerConfigPaths, PluginConfig, PluginConfigError};
pub use images::gc::ImageGcPolicy;
pub use images::queue::ImagePulls;
pub use images::verification::VerificationPolicy;
pub use metrics::Metrics;
pub use pod_cgroup::PodCgroups;
pub use pod_update::PodUpdate;
pub use pod_workers::PodWorkers;
pub use sinks::{StatusSink, StatusStream};
pub use sources::{PodChange, PodSource};
