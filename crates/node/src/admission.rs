//! The kubelet's admission of a pod by the node (`pkg/kubelet/lifecycle/predicate.go`), for the
//! check that applies here: the pod's OS. A rejected pod never starts; it fails with the
//! rejection's reason and a message of `Pod was rejected: ` and the rejection's.

use k8s_openapi::api::core::v1::Pod;

/// Why the node refuses a pod: the reason and message of the kubelet's `Warning` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: &'static str,
    pub message: &'static str,
}

impl Rejection {
    /// The pod's `status.message` (the kubelet's `rejectPod`).
    pub fn status_message(&self) -> String {
        format!("Pod was rejected: {}", self.message)
    }
}

/// A pod whose `spec.os.name` is not this node's OS.
pub const POD_OS_NOT_SUPPORTED: Rejection =
    Rejection { reason: "PodOSNotSupported", message: "Failed to admit pod as the OS field doesn't match node OS" };

/// Whether the node admits the pod. A pod without `spec.os` runs on any node.
pub fn admit(pod: &Pod) -> Result<(), Rejection> {
    let os = pod.spec.as_ref().and_then(|s| s.os.as_ref());
    match os {
        Some(os) if os.name != std::env::consts::OS => Err(POD_OS_NOT_SUPPORTED),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(os: Option<&str>) -> Pod {
        let os = os.map(|name| json!({ "name": name }));
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"os": os, "containers": []}})).unwrap()
    }

    #[test]
    fn a_pod_for_another_os_is_refused_with_the_kubelets_words() {
        let rejection = admit(&pod(Some("windows"))).unwrap_err();
        assert_eq!(rejection.reason, "PodOSNotSupported");
        assert_eq!(
            rejection.status_message(),
            "Pod was rejected: Failed to admit pod as the OS field doesn't match node OS"
        );
    }

    #[test]
    fn a_pod_for_this_os_or_any_is_admitted() {
        assert_eq!(admit(&pod(Some(std::env::consts::OS))), Ok(()));
        assert_eq!(admit(&pod(None)), Ok(()));
    }
}
