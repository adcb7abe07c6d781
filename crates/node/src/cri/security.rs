//! The security context the runtime is asked for, as the kubelet's `determineEffectiveSecurityContext`
//! and `generatePodSandboxLinuxConfig` make it: the pod's settings merged under the container's
//! (`securitycontext.DetermineEffectiveSecurityContext`), the image's user where the pod names
//! none, the `runAsNonRoot` check, seccomp profiles, SELinux labels and the pod's namespaces.

use crate::layout;
use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext, SELinuxOptions, SeccompProfile, SecurityContext};
use podwright_planner::pod::{all_containers, spec};
use podwright_runtime::ImageUser;
use podwright_runtime::cri_api::{
    Capability, Int64Value, LinuxContainerSecurityContext, LinuxSandboxSecurityContext, NamespaceMode, NamespaceOption,
    SeLinuxOption, SecurityProfile, security_profile::ProfileType,
};
use std::collections::HashMap;
use std::path::Path;

/// The paths of `/proc` and `/sys` hidden from a container whose `procMount` is `Default` (the
/// kubelet's `defaultMaskedPaths`, kept in step with moby's).
const MASKED_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// The paths of `/proc` a `Default` `procMount` makes read-only (the kubelet's `defaultReadonlyPaths`).
const READONLY_PATHS: &[&str] = &["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"];

fn pod_context(pod: &Pod) -> Option<&PodSecurityContext> {
    spec(pod).security_context.as_ref()
}

/// The container's security context with the pod's user, group, `runAsNonRoot`, SELinux,
/// Windows, seccomp and AppArmor settings under it: a container's own setting wins.
pub fn effective(pod: &Pod, c: &Container) -> SecurityContext {
    let p = pod_context(pod).cloned().unwrap_or_default();
    let c = c.security_context.clone().unwrap_or_default();
    SecurityContext {
        run_as_user: c.run_as_user.or(p.run_as_user),
        run_as_group: c.run_as_group.or(p.run_as_group),
        run_as_non_root: c.run_as_non_root.or(p.run_as_non_root),
        se_linux_options: c.se_linux_options.or(p.se_linux_options),
        windows_options: c.windows_options.or(p.windows_options),
        seccomp_profile: c.seccomp_profile.or(p.seccomp_profile),
        app_armor_profile: c.app_armor_profile.or(p.app_armor_profile),
        ..c
    }
}

/// The kubelet's `verifyRunAsNonRoot`: with `runAsNonRoot`, the container must run as a user
/// known not to be root. Err: the `CreateContainerConfigError` message.
pub fn verify_run_as_non_root(pod: &Pod, c: &Container, image_user: &ImageUser) -> Result<(), String> {
    let sc = effective(pod, c);
    if sc.run_as_non_root != Some(true) {
        return Ok(());
    }
    let who = format!("(pod: \"{}\", container: {})", podwright_planner::pod::display_name(pod), c.name);
    match (sc.run_as_user, image_user) {
        (Some(0), _) => Err(format!("container's runAsUser breaks non-root policy {who}")),
        (Some(_), _) => Ok(()),
        (None, ImageUser::Name(name)) => Err(format!(
            "container has runAsNonRoot and image has non-numeric user ({name}), cannot verify user is non-root {who}"
        )),
        (None, ImageUser::Uid(0)) => Err(format!("container has runAsNonRoot and image will run as root {who}")),
        (None, ImageUser::Uid(uid)) if !(1..=i64::from(i32::MAX)).contains(uid) => Err(format!(
            "container has runAsNonRoot and image has an invalid user id ({uid}). (Must be 1-({})): must be between 0 and 2147483647, inclusive {who}",
            i32::MAX
        )),
        (None, ImageUser::Uid(_)) => Ok(()),
    }
}

/// The kubelet's `NamespacesForPod`: the node's network, IPC and PID namespaces when asked for, one PID
/// namespace for the whole pod with `shareProcessNamespace`, else one per container.
pub fn namespaces(pod: &Pod) -> NamespaceOption {
    let spec = spec(pod);
    let mode = |host: Option<bool>, otherwise| if host == Some(true) { NamespaceMode::Node } else { otherwise };
    let pid_otherwise =
        if spec.share_process_namespace == Some(true) { NamespaceMode::Pod } else { NamespaceMode::Container };
    NamespaceOption {
        network: mode(spec.host_network, NamespaceMode::Pod) as i32,
        pid: mode(spec.host_pid, pid_otherwise) as i32,
        ipc: mode(spec.host_ipc, NamespaceMode::Pod) as i32,
        ..Default::default()
    }
}

/// The kubelet's `fieldSeccompProfile`, without `SeccompDefault`: unset is `Unconfined`.
fn seccomp(profile: Option<&SeccompProfile>, root: &Path) -> Result<SecurityProfile, String> {
    let Some(profile) = profile else {
        return Ok(SecurityProfile { profile_type: ProfileType::Unconfined as i32, ..Default::default() });
    };
    Ok(match profile.type_.as_str() {
        "RuntimeDefault" => SecurityProfile { profile_type: ProfileType::RuntimeDefault as i32, ..Default::default() },
        "Localhost" => match profile.localhost_profile.as_deref() {
            Some(name) if !name.is_empty() => SecurityProfile {
                profile_type: ProfileType::Localhost as i32,
                localhost_ref: layout::seccomp_dir(root).join(name).to_string_lossy().into_owned(),
            },
            _ => return Err("localhostProfile must be set if seccompProfile type is Localhost.".into()),
        },
        _ => SecurityProfile { profile_type: ProfileType::Unconfined as i32, ..Default::default() },
    })
}

/// The pod's supplemental groups: `fsGroup`, then `supplementalGroups`.
fn supplemental_groups(pod: &Pod) -> Vec<i64> {
    let Some(p) = pod_context(pod) else { return Vec::new() };
    p.fs_group.into_iter().chain(p.supplemental_groups.iter().flatten().copied()).collect()
}

/// The pod's sysctls for its sandbox, by their dotted names
/// (`ConvertPodSysctlsVariableToDotsSeparator`): runc takes no other form. Admission has
/// refused the pod unless each is allowed.
pub fn sysctls(pod: &Pod) -> HashMap<String, String> {
    let sysctls = pod_context(pod).and_then(|p| p.sysctls.as_deref()).unwrap_or_default();
    sysctls.iter().map(|s| (podwright_api::sysctl::normalize_name(&s.name), s.value.clone())).collect()
}

/// Whether any container of the pod is privileged (the kubelet's `HasPrivilegedContainer`): the
/// sandbox must be too, or the runtime refuses the container.
fn has_privileged_container(pod: &Pod) -> bool {
    all_containers(pod).any(|sc| sc.container.security_context.as_ref().and_then(|s| s.privileged) == Some(true))
}

/// The container's Linux security context (`determineEffectiveSecurityContext`); `image_user`
/// is who the image runs as, used when the pod names no user. Err: the
/// `CreateContainerConfigError` message.
pub fn container_security(
    pod: &Pod,
    c: &Container,
    image_user: &ImageUser,
    root: &Path,
) -> Result<LinuxContainerSecurityContext, String> {
    // Its seccomp profile is the container's own, else the pod's (the kubelet's `getSeccompProfile`).
    let sc = effective(pod, c);
    let (run_as_user, run_as_username) = match (sc.run_as_user, image_user) {
        (Some(uid), _) => (Some(uid), String::new()),
        (None, ImageUser::Uid(uid)) => (Some(*uid), String::new()),
        (None, ImageUser::Name(name)) => (None, name.clone()),
    };
    let unmasked = sc.proc_mount.as_deref() == Some("Unmasked");
    let paths =
        |defaults: &[&str]| if unmasked { Vec::new() } else { defaults.iter().map(|p| p.to_string()).collect() };
    Ok(LinuxContainerSecurityContext {
        capabilities: sc.capabilities.as_ref().map(|caps| Capability {
            add_capabilities: caps.add.clone().unwrap_or_default(),
            drop_capabilities: caps.drop.clone().unwrap_or_default(),
            ..Default::default()
        }),
        privileged: sc.privileged.unwrap_or(false),
        namespace_options: Some(namespaces(pod)),
        run_as_user: run_as_user.map(|value| Int64Value { value }),
        run_as_group: sc.run_as_group.map(|value| Int64Value { value }),
        run_as_username,
        readonly_rootfs: sc.read_only_root_filesystem.unwrap_or(false),
        supplemental_groups: supplemental_groups(pod),
        // Only an explicit `allowPrivilegeEscalation: false` sets no_new_privs.
        no_new_privs: sc.allow_privilege_escalation == Some(false),
        masked_paths: paths(MASKED_PATHS),
        readonly_paths: paths(READONLY_PATHS),
        seccomp: Some(seccomp(sc.seccomp_profile.as_ref(), root)?),
        selinux_options: selinux(sc.se_linux_options.as_ref()),
        ..Default::default()
    })
}

/// The kubelet's `ConvertToRuntimeSELinuxOption`: the runtime labels the container's processes
/// and files with it on a host with SELinux, and has nothing to label on one without.
fn selinux(o: Option<&SELinuxOptions>) -> Option<SeLinuxOption> {
    o.map(|o| SeLinuxOption {
        user: o.user.clone().unwrap_or_default(),
        role: o.role.clone().unwrap_or_default(),
        r#type: o.type_.clone().unwrap_or_default(),
        level: o.level.clone().unwrap_or_default(),
    })
}

/// The sandbox's Linux security context (`generatePodSandboxLinuxConfig`): the pod's user,
/// group and supplemental groups, its namespaces, privileged when a container is, and the
/// runtime's default seccomp profile for the pause container.
pub fn sandbox_security(pod: &Pod) -> LinuxSandboxSecurityContext {
    let p = pod_context(pod);
    LinuxSandboxSecurityContext {
        namespace_options: Some(namespaces(pod)),
        run_as_user: p.and_then(|p| p.run_as_user).map(|value| Int64Value { value }),
        run_as_group: p.and_then(|p| p.run_as_group).map(|value| Int64Value { value }),
        supplemental_groups: supplemental_groups(pod),
        privileged: has_privileged_container(pod),
        seccomp: Some(SecurityProfile { profile_type: ProfileType::RuntimeDefault as i32, ..Default::default() }),
        selinux_options: selinux(p.and_then(|p| p.se_linux_options.as_ref())),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
