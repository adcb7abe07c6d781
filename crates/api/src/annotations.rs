//! The annotation keys the kubelet puts on the pods it takes from a file (static pods) and that
//! the API server reads on their mirror pods, with the sources they name
//! (`pkg/kubelet/types/pod_update.go`).

use k8s_openapi::api::core::v1::Pod;

/// Where a pod came from: [`FILE_SOURCE`] for static pods, [`API_SOURCE`] for the API's.
pub const CONFIG_SOURCE: &str = "kubernetes.io/config.source";
/// The static pod's UID, which its mirror pod carries as [`CONFIG_MIRROR`].
pub const CONFIG_HASH: &str = "kubernetes.io/config.hash";
/// When this process first saw the pod (RFC 3339).
pub const CONFIG_SEEN: &str = "kubernetes.io/config.seen";
/// On a mirror pod: the config hash of the static pod it shows.
pub const CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";
/// The [`CONFIG_SOURCE`] of static pods.
pub const FILE_SOURCE: &str = "file";
/// The [`CONFIG_SOURCE`] of the pods the API server gave.
pub const API_SOURCE: &str = "api";

/// Whether the pod came from a file rather than the API server (`kubetypes.IsStaticPod`).
pub fn is_static(pod: &Pod) -> bool {
    let source = pod.metadata.annotations.as_ref().and_then(|a| a.get(CONFIG_SOURCE));
    source.is_some_and(|s| s != API_SOURCE)
}
