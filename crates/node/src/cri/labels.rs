//! The labels and annotations podwright puts on sandboxes and containers. The runtime is the
//! source of truth for containers, so everything needed to rebuild `Observed` after a restart
//! rides on them (the kubelet's keys where it has one); and the selectors that find them again.

use std::collections::BTreeMap;

pub const POD_NAME: &str = "io.kubernetes.pod.name";
pub const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const POD_UID: &str = "io.kubernetes.pod.uid";
pub const CONTAINER_NAME: &str = "io.kubernetes.container.name";
/// `init`, `sidecar` or `app`.
pub const CONTAINER_KIND: &str = "podwright.io/container-kind";
/// CRI container statuses do not name their sandbox.
pub const SANDBOX_ID: &str = "podwright.io/sandbox-id";
pub const MANAGED: &str = "podwright.io/managed";
/// The root directory of the podwright that made it: several (a `serve`, `run`s) may share
/// one runtime, and each removes only what it left itself.
pub const ROOT_DIR: &str = "podwright.io/root-dir";

pub const CONTAINER_HASH: &str = "io.kubernetes.container.hash";
pub const RESTART_COUNT: &str = "io.kubernetes.container.restartCount";
pub const TERMINATION_GRACE: &str = "io.kubernetes.pod.terminationGracePeriod";
pub const TERMINATION_MESSAGE_PATH: &str = "io.kubernetes.container.terminationMessagePath";
pub const TERMINATION_MESSAGE_POLICY: &str = "io.kubernetes.container.terminationMessagePolicy";

/// The labels that select everything of one pod in the runtime.
pub fn pod_selector(uid: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(POD_UID.to_string(), uid.to_string())])
}

/// The labels that select everything podwright made in the runtime.
pub fn managed_selector() -> BTreeMap<String, String> {
    BTreeMap::from([(MANAGED.to_string(), "true".to_string())])
}
