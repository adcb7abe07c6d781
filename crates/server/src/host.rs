//! [`PodHost`]: what the node's own endpoints (logs, exec, attach, port-forward) need, whichever
//! server answers them: the local API, whose pods are in its store, or the kubelet port of a
//! cluster node, whose pods are its pod workers'. One implementation of each endpoint serves
//! both; only how a request names its pod and how a refusal is worded differ.

use jiff::Timestamp;
use podwright_runtime::Runtime;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// The node's pods and the runtime that runs them.
pub trait PodHost: Send + Sync + 'static {
    /// The pod `ns/name` as v1 JSON, its status included; `None` when the node has no such pod.
    fn pod(&self, ns: &str, name: &str) -> Option<Arc<Value>>;
    /// Every pod of the node, as [`PodHost::pod`] gives each.
    fn pods(&self) -> Vec<Arc<Value>>;
    /// The runtime, asked for exec, attach and port-forward streams.
    fn runtime(&self) -> &dyn Runtime;
    /// podwright's root directory, under which the containers' logs are.
    fn root(&self) -> &Path;
    fn now(&self) -> Timestamp;
}
