//! The API server's checks of pod and container security contexts
//! (`validatePodSpecSecurityContext`, `ValidateSecurityContext`, `validateSeccompProfileField`)
//! for the fields podwright honours: user and group ids, the host's network with container
//! ports, a shared process namespace with the host's, sysctls, the `fsGroup` change policy,
//! seccomp profiles and `procMount`.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, SeccompProfile, SecurityContext};

use super::Errors;
use super::volumes::validate_local_descending_path;
use crate::field_error::{FieldError, FieldPath};
use crate::formats::inclusive_range_error;
use crate::sysctl::{self, Namespace};

/// `IsValidUserID` / `IsValidGroupID`: 0 to MaxInt32.
fn validate_id(id: i64, path: FieldPath, errs: &mut Errors) {
    if !(0..=i64::from(i32::MAX)).contains(&id) {
        errs.push(FieldError::invalid(path, id, inclusive_range_error(0, i64::from(i32::MAX))));
    }
}

/// The pod's security context; `path` is `spec.securityContext`. `hostPID` and
/// `shareProcessNamespace` sit in the internal type's security context, so their error is
/// reported under it.
pub(super) fn validate_pod_security_context(spec: &PodSpec, path: &FieldPath, errs: &mut Errors) {
    let empty = PodSecurityContext::default();
    let sc = spec.security_context.as_ref().unwrap_or(&empty);
    if let Some(g) = sc.fs_group {
        validate_id(g, path.child("fsGroup"), errs);
    }
    if let Some(u) = sc.run_as_user {
        validate_id(u, path.child("runAsUser"), errs);
    }
    if let Some(g) = sc.run_as_group {
        validate_id(g, path.child("runAsGroup"), errs);
    }
    for (i, g) in sc.supplemental_groups.iter().flatten().enumerate() {
        validate_id(*g, path.child("supplementalGroups").index(i), errs);
    }
    if spec.share_process_namespace == Some(true) && spec.host_pid == Some(true) {
        errs.push(FieldError::invalid(
            path.child("shareProcessNamespace"),
            true,
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    validate_sysctls(spec, sc, &path.child("sysctls"), errs);
    if let Some(policy) = sc.fs_group_change_policy.as_deref()
        && !matches!(policy, "Always" | "OnRootMismatch")
    {
        errs.push(FieldError::not_supported(path.child("fsGroupChangePolicy"), policy, &["Always", "OnRootMismatch"]));
    }
    validate_seccomp_profile(sc.seccomp_profile.as_ref(), &path.child("seccompProfile"), errs);
}

/// `validateHostNetwork`: on the host's network a container port is the host's port, so each
/// must equal its `hostPort` (which defaulting sets to it when left out). The API server checks
/// the pod's `containers`, not its init containers; `containers` is `spec.containers`.
pub(super) fn validate_host_network(spec: &PodSpec, containers: &FieldPath, errs: &mut Errors) {
    if spec.host_network != Some(true) {
        return;
    }
    for (i, c) in spec.containers.iter().enumerate() {
        for (j, port) in c.ports.iter().flatten().enumerate() {
            if port.host_port.unwrap_or(0) != port.container_port {
                errs.push(FieldError::invalid(
                    containers.index(i).child("ports").index(j).child("containerPort"),
                    port.container_port,
                    "must match `hostPort` when `hostNetwork` is true",
                ));
            }
        }
    }
}

/// `validateSysctls`: names valid and not repeated, and none isolated by a namespace the pod
/// shares with the host (`ValidateHostSysctl`).
fn validate_sysctls(spec: &PodSpec, sc: &PodSecurityContext, path: &FieldPath, errs: &mut Errors) {
    let mut names = HashSet::new();
    for (i, s) in sc.sysctls.iter().flatten().enumerate() {
        let p = path.index(i).child("name");
        if s.name.is_empty() {
            errs.push(FieldError::required(p.clone(), ""));
        } else if !sysctl::is_valid_name(&s.name) {
            let detail =
                format!("must have at most {} characters and match regex {}", sysctl::MAX_LENGTH, sysctl::NAME_REGEX);
            errs.push(FieldError::invalid(p.clone(), &s.name, detail));
        } else if names.contains(s.name.as_str()) {
            errs.push(FieldError::duplicate(p.clone(), &s.name));
        }
        match sysctl::namespaced_by(&sysctl::normalize_name(&s.name)) {
            Some(Namespace::Net) if spec.host_network == Some(true) => {
                errs.push(FieldError::invalid(p, &s.name, "may not be specified when 'hostNetwork' is true"))
            }
            Some(Namespace::Ipc) if spec.host_ipc == Some(true) => {
                errs.push(FieldError::invalid(p, &s.name, "may not be specified when 'hostIPC' is true"))
            }
            _ => {}
        }
        names.insert(s.name.as_str());
    }
}

/// A container's security context; `path` is its `securityContext`. `host_users` is whether
/// the pod runs in the host's user namespace (`hostUsers` unset or true).
pub(super) fn validate_security_context(
    sc: Option<&SecurityContext>,
    host_users: bool,
    path: &FieldPath,
    errs: &mut Errors,
) {
    let Some(sc) = sc else { return };
    if let Some(u) = sc.run_as_user {
        validate_id(u, path.child("runAsUser"), errs);
    }
    if let Some(g) = sc.run_as_group {
        validate_id(g, path.child("runAsGroup"), errs);
    }
    if let Some(mount) = sc.proc_mount.as_deref() {
        let p = path.child("procMount");
        match mount {
            "Default" | "Unmasked" => {}
            other => errs.push(FieldError::not_supported(p.clone(), other, &["Default", "Unmasked"])),
        }
        if host_users && mount == "Unmasked" {
            errs.push(FieldError::invalid(p, mount, "`hostUsers` must be false to use `Unmasked`"));
        }
    }
    validate_seccomp_profile(sc.seccomp_profile.as_ref(), &path.child("seccompProfile"), errs);
}

fn validate_seccomp_profile(sp: Option<&SeccompProfile>, path: &FieldPath, errs: &mut Errors) {
    let Some(sp) = sp else { return };
    let type_path = path.child("type");
    match sp.type_.as_str() {
        "Localhost" | "RuntimeDefault" | "Unconfined" => {}
        "" => errs.push(FieldError::required(type_path, "type is required when seccompProfile is set")),
        other => errs.push(FieldError::not_supported(type_path, other, &["Localhost", "RuntimeDefault", "Unconfined"])),
    }
    if sp.type_ == "Localhost" {
        match sp.localhost_profile.as_deref() {
            None => errs.push(FieldError::required(
                path.child("localhostProfile"),
                "must be set when seccomp type is Localhost",
            )),
            Some(profile) => validate_local_descending_path(profile, &path.child("localhostProfile"), errs),
        }
    }
}
