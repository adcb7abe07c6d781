//! The messages of the kubelet's container, image and probe events, worded as the 1.33 kubelet
//! words them (`kuberuntime_container.go` `startContainer`, `images/image_manager.go`
//! `EnsureImageExists`, `prober/prober.go` `probe`), in one place to check against it.

use podwright_api::go;
use podwright_planner::ProbeKind;
use std::time::Duration;

/// `Created`: 1.33 added the colon.
pub fn created(container: &str) -> String {
    format!("Created container: {container}")
}

/// `Started`.
pub fn started(container: &str) -> String {
    format!("Started container {container}")
}

/// `Pulling`.
pub fn pulling(image: &str) -> String {
    format!("Pulling image {image:?}")
}

/// `Pulled` after a pull: the pull's time and the time including its wait in the node's pull
/// queue, both cut to milliseconds, and the image's size.
pub fn pulled(image: &str, pull: Duration, including_waiting: Duration, size: u64) -> String {
    format!(
        "Successfully pulled image {image:?} in {} ({} including waiting). Image size: {size} bytes.",
        go::format_duration(pull),
        go::format_duration(including_waiting)
    )
}

/// `Pulled` without a pull: the image is present and the pod may use it (the kubelet's words
/// since KubeletEnsureSecretPulledImages is on, 1.35, whoever pulled the image).
pub fn accessible(image: &str) -> String {
    format!("Container image {image:?} already present on machine and can be accessed by the pod")
}

/// `Unhealthy` for a probe that ran and failed.
pub fn probe_failed(kind: ProbeKind, output: &str) -> String {
    format!("{} probe failed: {output}", kind.title())
}

/// `Unhealthy` for a probe that could not be run (a runtime error): its result is unknown.
pub fn probe_errored(kind: ProbeKind, error: &str) -> String {
    format!("{} probe errored and resulted in unknown state: {error}", kind.title())
}

/// `ProbeWarning`.
pub fn probe_warning(kind: ProbeKind, output: &str) -> String {
    format!("{} probe warning: {output}", kind.title())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_16_events_are_worded_as_the_1_33_kubelet_words_them() {
        let ms = Duration::from_millis;
        // (reason, message as podwright words it, as the 1.33 kubelet words it)
        let table = [
            ("Created", created("app"), "Created container: app"),
            ("Started", started("app"), "Started container app"),
            ("Pulling", pulling("busybox:1.36"), "Pulling image \"busybox:1.36\""),
            (
                "Pulled",
                pulled("busybox:1.36", ms(1_234), ms(1_234), 2_154_321),
                "Successfully pulled image \"busybox:1.36\" in 1.234s (1.234s including waiting). Image size: 2154321 bytes.",
            ),
            (
                "Pulled",
                accessible("busybox:1.36"),
                "Container image \"busybox:1.36\" already present on machine and can be accessed by the pod",
            ),
            ("Unhealthy", probe_failed(ProbeKind::Liveness, "boom"), "Liveness probe failed: boom"),
            (
                "Unhealthy",
                probe_errored(ProbeKind::Readiness, "rpc error"),
                "Readiness probe errored and resulted in unknown state: rpc error",
            ),
            ("ProbeWarning", probe_warning(ProbeKind::Startup, "redirect"), "Startup probe warning: redirect"),
        ];
        for (reason, ours, kubelet) in table {
            assert_eq!(ours, kubelet, "{reason}");
        }
    }
}
