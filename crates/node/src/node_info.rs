//! What the node says of itself in its Node object, the same for `serve`'s local Node and a
//! cluster node's: the machine's facts and the container runtime's version (`nodeInfo`), and
//! whether it is Ready.

/// Facts of the machine that do not change while it runs (`MachineInfo`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MachineInfo {
    pub machine_id: String,
    pub system_uuid: String,
    pub boot_id: String,
    pub kernel_version: String,
    pub os_image: String,
}

impl MachineInfo {
    pub fn read() -> MachineInfo {
        let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
        let os_release = read("/etc/os-release");
        let os_image = os_release
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_else(|| "Linux".to_string());
        MachineInfo {
            machine_id: read("/etc/machine-id"),
            system_uuid: read("/sys/class/dmi/id/product_uuid").to_lowercase(),
            boot_id: read("/proc/sys/kernel/random/boot_id"),
            kernel_version: read("/proc/sys/kernel/osrelease"),
            os_image,
        }
    }
}

/// `containerd 1.6.20` (the CRI's name and version) as the Node shows it: `containerd://1.6.20`.
pub fn runtime_version(version: &str) -> String {
    match version.split_once(' ') {
        Some((name, v)) => format!("{name}://{}", v.trim_start_matches('v')),
        None => version.to_string(),
    }
}

/// The Node's `Ready` condition as the kubelet words it: not ready while the runtime does not
/// answer (`runtime` is why), whatever else holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Readiness {
    pub ready: bool,
    pub reason: &'static str,
    pub message: String,
}

pub fn readiness(runtime: Result<(), &str>) -> Readiness {
    match runtime {
        Ok(()) => Readiness { ready: true, reason: "KubeletReady", message: "kubelet is posting ready status".into() },
        Err(why) => {
            Readiness { ready: false, reason: "KubeletNotReady", message: format!("container runtime is down: {why}") }
        }
    }
}
