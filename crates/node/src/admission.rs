//! The kubelet's admission of a pod by the node (`pkg/kubelet/lifecycle/predicate.go`,
//! `pkg/kubelet/sysctl/allowlist.go`), for the checks that apply here: the pod's sysctls, its
//! OS, and its ephemeral storage against the node's allocatable (`GeneralPredicates`; a
//! cluster node checks CPU, memory and the rest before, with its Node). A rejected pod never starts; it fails with the rejection's reason and a message of
//! `Pod was rejected: ` and the rejection's.

use crate::downward::NodeStorage;
use k8s_openapi::api::core::v1::Pod;
use podwright_api::sysctl::{self, Namespace};
use std::borrow::Cow;
use std::sync::LazyLock;

/// Why the node refuses a pod: the reason and message of the kubelet's `Warning` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: &'static str,
    pub message: Cow<'static, str>,
}

impl Rejection {
    /// The pod's `status.message` (the kubelet's `rejectPod`).
    pub fn status_message(&self) -> String {
        format!("Pod was rejected: {}", self.message)
    }
}

/// A pod whose `spec.os.name` is not this node's OS.
pub const POD_OS_NOT_SUPPORTED: Rejection = Rejection {
    reason: "PodOSNotSupported",
    message: Cow::Borrowed("Failed to admit pod as the OS field doesn't match node OS"),
};

/// The reason of a pod asking for a sysctl the node does not allow (`ForbiddenReason`).
pub const SYSCTL_FORBIDDEN: &str = "SysctlForbidden";

/// The kubelet's safe sysctls (`safeSysctls`), each with the kernel release from which the
/// kernel isolates it in its namespace, if it has one.
const SAFE_SYSCTLS: &[(&str, Option<(u32, u32)>)] = &[
    ("kernel.shm_rmid_forced", None),
    ("net.ipv4.ip_local_port_range", None),
    ("net.ipv4.tcp_syncookies", None),
    ("net.ipv4.ping_group_range", None),
    ("net.ipv4.ip_unprivileged_port_start", None),
    ("net.ipv4.ip_local_reserved_ports", Some((3, 16))),
    ("net.ipv4.tcp_keepalive_time", Some((4, 5))),
    ("net.ipv4.tcp_fin_timeout", Some((4, 6))),
    ("net.ipv4.tcp_keepalive_intvl", Some((4, 5))),
    ("net.ipv4.tcp_keepalive_probes", Some((4, 5))),
    ("net.ipv4.tcp_rmem", Some((4, 15))),
    ("net.ipv4.tcp_wmem", Some((4, 15))),
    // Added to the safe set in 1.37 (kubernetes#138389).
    ("net.ipv4.tcp_notsent_lowat", Some((4, 6))),
    ("net.ipv4.tcp_slow_start_after_idle", Some((4, 15))),
];

/// `getSafeSysctlAllowlist`: the safe sysctls this kernel (major, minor) isolates; those that
/// need a release are left out when the kernel's is unknown.
fn safe_sysctls(kernel: Option<(u32, u32)>) -> Vec<&'static str> {
    SAFE_SYSCTLS
        .iter()
        .filter(|(_, since)| since.is_none_or(|since| kernel.is_some_and(|k| k >= since)))
        .map(|&(name, _)| name)
        .collect()
}

/// The major and minor numbers of a kernel release such as `6.1.0-13-amd64`.
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(['.', '-']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// This node's allowlist, read once.
static NODE_SAFE_SYSCTLS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let kernel = kernel_version(&release);
    if kernel.is_none() {
        tracing::error!(release, "unknown kernel version: sysctls namespaced in later kernels are not allowed");
    }
    safe_sysctls(kernel)
});

/// The allowlist's `Admit`: every sysctl of the pod must be allowed, and not be isolated by a
/// namespace the pod shares with the host.
fn check_sysctls(pod: &Pod, allowed: &[&str]) -> Result<(), Rejection> {
    let Some(spec) = pod.spec.as_ref() else { return Ok(()) };
    let sysctls = spec.security_context.as_ref().and_then(|sc| sc.sysctls.as_deref()).unwrap_or_default();
    for s in sysctls {
        let name = sysctl::normalize_name(&s.name);
        let problem = if !allowed.contains(&name.as_str()) {
            format!("{name:?} not allowlisted")
        } else {
            match sysctl::namespaced_by(&name) {
                Some(ns @ Namespace::Ipc) if spec.host_ipc == Some(true) => {
                    format!("{name:?} not allowed with host {ns} enabled")
                }
                Some(ns @ Namespace::Net) if spec.host_network == Some(true) => {
                    format!("{name:?} not allowed with host {ns} enabled")
                }
                _ => continue,
            }
        };
        return Err(Rejection { reason: SYSCTL_FORBIDDEN, message: format!("forbidden sysctl: {problem}").into() });
    }
    Ok(())
}

/// Whether the node admits the pod: its sysctls first, then its OS, in the kubelet's order. A
/// pod without `spec.os` runs on any node.
pub fn admit(pod: &Pod) -> Result<(), Rejection> {
    check_sysctls(pod, &NODE_SAFE_SYSCTLS)?;
    let os = pod.spec.as_ref().and_then(|s| s.os.as_ref());
    match os {
        Some(os) if os.name != std::env::consts::OS => Err(POD_OS_NOT_SUPPORTED),
        _ => Ok(()),
    }
}

/// The resource [`fits_storage`] checks.
const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

/// The pod's `ephemeral-storage` request (`PodRequests`), in bytes.
pub fn storage_request(pod: &Pod) -> i128 {
    podwright_planner::resources::pod_requests(pod).get(EPHEMERAL_STORAGE).map_or(0, |a| a.value.value())
}

/// `noderesources.Fits` for ephemeral storage: the pod's request against the node's allocatable
/// less what the node's other pods request (`in_use`). A node whose storage is unknown admits.
pub fn fits_storage(pod: &Pod, storage: Option<NodeStorage>, in_use: i128) -> Result<(), Rejection> {
    let (want, Some(storage)) = (storage_request(pod), storage) else { return Ok(()) };
    let capacity = i128::from(storage.allocatable);
    if want == 0 || want <= capacity - in_use {
        return Ok(());
    }
    Err(Rejection {
        reason: "OutOfephemeral-storage",
        message: format!(
            "Node didn't have enough resource: {EPHEMERAL_STORAGE}, requested: {want}, used: {in_use}, capacity: {capacity}"
        )
        .into(),
    })
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

    fn pod_with_sysctls(host: &str, names: &[&str]) -> Pod {
        let sysctls: Vec<_> = names.iter().map(|n| json!({"name": n, "value": "1"})).collect();
        let spec = json!({"securityContext": {"sysctls": sysctls}, "containers": []});
        let mut spec = spec.as_object().unwrap().clone();
        if !host.is_empty() {
            spec.insert(host.into(), true.into());
        }
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    #[test]
    fn safe_sysctls_are_admitted_and_others_forbidden_in_the_kubelets_words() {
        let allowed = safe_sysctls(Some((6, 1)));
        let verdict = |host, names: &[&str]| check_sysctls(&pod_with_sysctls(host, names), &allowed);
        let table: &[(&str, &[&str], Option<&str>)] = &[
            ("", &["kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net/ipv4/tcp_rmem"], None),
            (
                "",
                &["net.ipv4.ip_local_port_range", "kernel.msgmax"],
                Some("forbidden sysctl: \"kernel.msgmax\" not allowlisted"),
            ),
            ("", &["net/core/somaxconn"], Some("forbidden sysctl: \"net.core.somaxconn\" not allowlisted")),
            ("", &["vm.swappiness"], Some("forbidden sysctl: \"vm.swappiness\" not allowlisted")),
            (
                "hostNetwork",
                &["kernel.shm_rmid_forced", "net.ipv4.tcp_syncookies"],
                Some("forbidden sysctl: \"net.ipv4.tcp_syncookies\" not allowed with host net enabled"),
            ),
            (
                "hostIPC",
                &["kernel.shm_rmid_forced"],
                Some("forbidden sysctl: \"kernel.shm_rmid_forced\" not allowed with host ipc enabled"),
            ),
        ];
        for (host, names, want) in table {
            let got = verdict(host, names).err();
            assert_eq!(got.as_ref().map(|r| r.message.as_ref()), *want, "{host} {names:?}");
            assert!(got.is_none_or(|r| r.reason == "SysctlForbidden"));
        }
        let rejection = verdict("", &["kernel.msgmax"]).unwrap_err();
        assert_eq!(rejection.status_message(), "Pod was rejected: forbidden sysctl: \"kernel.msgmax\" not allowlisted");
    }

    #[test]
    fn sysctls_namespaced_in_later_kernels_are_safe_only_there() {
        assert_eq!(kernel_version("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(kernel_version("4.4.0"), Some((4, 4)));
        assert_eq!(kernel_version("garbage"), None);
        let old = safe_sysctls(kernel_version("4.4.0"));
        assert!(old.contains(&"net.ipv4.ip_local_reserved_ports"));
        assert!(!old.contains(&"net.ipv4.tcp_keepalive_time"));
        assert!(!old.contains(&"net.ipv4.tcp_rmem"));
        assert_eq!(safe_sysctls(Some((4, 15))).len(), SAFE_SYSCTLS.len());
        assert_eq!(safe_sysctls(None), safe_sysctls(Some((3, 0))));
        assert_eq!(safe_sysctls(None).len(), 5);
    }

    #[test]
    fn the_sysctls_safe_since_1_37_are_admitted_on_kernels_that_isolate_them() {
        let pod = pod_with_sysctls("", &["net.ipv4.tcp_notsent_lowat", "net/ipv4/tcp_slow_start_after_idle"]);
        assert_eq!(check_sysctls(&pod, &safe_sysctls(Some((6, 1)))), Ok(()));
        let old = safe_sysctls(Some((4, 6)));
        assert!(old.contains(&"net.ipv4.tcp_notsent_lowat"));
        assert!(!old.contains(&"net.ipv4.tcp_slow_start_after_idle"));
        let rejection = check_sysctls(&pod, &old).unwrap_err();
        assert_eq!(rejection.message, "forbidden sysctl: \"net.ipv4.tcp_slow_start_after_idle\" not allowlisted");
    }

    #[test]
    fn a_pod_for_this_os_or_any_is_admitted() {
        assert_eq!(admit(&pod(Some(std::env::consts::OS))), Ok(()));
        assert_eq!(admit(&pod(None)), Ok(()));
    }

    fn pod_requesting(storage: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "resources": {"requests": {"ephemeral-storage": storage}}},
            {"name": "b"},
        ]}}))
        .unwrap()
    }

    #[test]
    fn ephemeral_storage_is_admitted_against_allocatable_less_the_other_pods() {
        let storage = NodeStorage::of_capacity(1000 << 20);
        assert_eq!(storage.allocatable, 900 << 20);
        let node = Some(storage);
        assert_eq!(storage_request(&pod_requesting("64Mi")), 64 << 20);
        assert_eq!(fits_storage(&pod_requesting("64Mi"), node, 0), Ok(()));
        assert_eq!(fits_storage(&pod_requesting("100Mi"), node, 800 << 20), Ok(()));
        let rejection = fits_storage(&pod_requesting("100Mi"), node, (800 << 20) + 1).unwrap_err();
        assert_eq!(rejection.reason, "OutOfephemeral-storage");
        assert_eq!(
            rejection.status_message(),
            "Pod was rejected: Node didn't have enough resource: ephemeral-storage, requested: 104857600, used: 838860801, capacity: 943718400"
        );
        // Nothing requested, or a node that cannot say: admitted.
        assert_eq!(fits_storage(&pod(None), node, 1 << 40), Ok(()));
        assert_eq!(fits_storage(&pod_requesting("1Ei"), None, 0), Ok(()));
    }

    #[test]
    fn the_nodes_storage_reads_as_the_kubelet_writes_it() {
        let s = NodeStorage::of_capacity(4096 * 25_000_001);
        assert_eq!(s.quantities(), ("100000004Ki".to_string(), "92160003687".to_string()));
        assert_eq!(NodeStorage::of_capacity(10 << 30).quantities(), ("10Gi".to_string(), "9Gi".to_string()));
    }
}
