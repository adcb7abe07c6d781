//! Containers and init containers: names, ports, host port conflicts, and what each kind may set.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Container, ContainerPort, ContainerRestartRule, Volume};

use super::env::{validate_env, validate_env_from};
use super::probes_and_hooks::{ProbeKind, validate_lifecycle, validate_probe_of};
use super::volume_mounts::{validate_volume_devices, validate_volume_mounts};
use super::{Errors, INIT_FORBIDDEN, str_or_empty};
use crate::field_error::{ErrorKind, FieldError, FieldPath};
use crate::formats::{is_dns1123_label, is_valid_port_name, is_valid_port_num};

pub(super) type VolumeMap<'a> = BTreeMap<&'a str, &'a Volume>;

pub(super) fn validate_containers(
    containers: &[Container],
    volumes: &VolumeMap<'_>,
    grace: Option<i64>,
    host_users: bool,
    path: &FieldPath,
    errs: &mut Errors,
) {
    if containers.is_empty() {
        errs.push(FieldError::required(path.clone(), ""));
        return;
    }
    let mut names = HashSet::new();
    for (i, c) in containers.iter().enumerate() {
        let p = path.index(i);
        validate_container_common(c, volumes, host_users, &p, errs);
        if !names.insert(c.name.as_str()) {
            errs.push(FieldError::duplicate(p.child("name"), &c.name));
        }
        validate_lifecycle_and_probes(c, grace, &p, errs);
        validate_restart_policy(c, false, &p, errs);
    }
    check_host_port_conflicts(containers, path, errs);
}

/// Hooks and probes of an app container or a sidecar (regular init containers may have none).
fn validate_lifecycle_and_probes(c: &Container, grace: Option<i64>, p: &FieldPath, errs: &mut Errors) {
    if let Some(l) = &c.lifecycle {
        validate_lifecycle(l, grace, &p.child("lifecycle"), errs);
    }
    validate_probe_of(ProbeKind::Liveness, c.liveness_probe.as_ref(), grace, p, errs);
    validate_probe_of(ProbeKind::Readiness, c.readiness_probe.as_ref(), grace, p, errs);
    validate_probe_of(ProbeKind::Startup, c.startup_probe.as_ref(), grace, p, errs);
}

pub(super) fn validate_init_containers(
    inits: &[Container],
    regular: &[Container],
    volumes: &VolumeMap<'_>,
    grace: Option<i64>,
    host_users: bool,
    path: &FieldPath,
    errs: &mut Errors,
) {
    let mut names: HashSet<&str> = regular.iter().map(|c| c.name.as_str()).collect();
    for (i, c) in inits.iter().enumerate() {
        let p = path.index(i);
        validate_container_common(c, volumes, host_users, &p, errs);

        let restart_always = c.restart_policy.as_deref() == Some("Always");
        validate_restart_policy(c, restart_always, &p, errs);

        if names.contains(c.name.as_str()) {
            errs.push(FieldError::duplicate(p.child("name"), &c.name));
        } else if !c.name.is_empty() {
            names.insert(c.name.as_str());
        }

        // Init containers run one at a time, so host ports are checked per
        // container (upstream passes a one-element list, hence index 0).
        check_host_port_conflicts(std::slice::from_ref(c), path, errs);

        if restart_always {
            validate_lifecycle_and_probes(c, grace, &p, errs);
        } else {
            for (field, set) in [
                ("lifecycle", c.lifecycle.is_some()),
                ("livenessProbe", c.liveness_probe.is_some()),
                ("readinessProbe", c.readiness_probe.is_some()),
                ("startupProbe", c.startup_probe.is_some()),
            ] {
                if set {
                    errs.push(FieldError::forbidden(p.child(field), INIT_FORBIDDEN));
                }
            }
        }
    }
}

/// The container-level `restartPolicy` and `restartPolicyRules` of 1.37 (ContainerRestartRules
/// and RestartAllContainersOnContainerExits, both beta and on): an app container or a regular
/// init container may override the pod's policy and add rules, evaluated on exit; a sidecar's
/// rules may only restart every container of the pod.
fn validate_restart_policy(c: &Container, sidecar: bool, p: &FieldPath, errs: &mut Errors) {
    let rules = c.restart_policy_rules.as_deref().unwrap_or_default();
    let Some(policy) = &c.restart_policy else {
        if !rules.is_empty() {
            errs.push(FieldError::required(
                p.child("restartPolicy"),
                "must specify restartPolicy when restart rules are used",
            ));
        }
        return;
    };
    if !["Always", "OnFailure", "Never"].contains(&policy.as_str()) {
        errs.push(FieldError::not_supported(p.child("restartPolicy"), policy, &["Always", "OnFailure", "Never"]));
    }
    validate_restart_rules(rules, sidecar, &p.child("restartPolicyRules"), errs);
}

/// The most rules a container may have, and exit codes a rule may list.
const MAX_RESTART_RULES: usize = 20;
const MAX_EXIT_CODES: usize = 255;

/// `field.TooMany(path, actual, max)`.
fn too_many(path: FieldPath, actual: usize, max: usize) -> FieldError {
    FieldError::new(path, ErrorKind::TooMany, Some(actual.to_string()), format!("must have at most {max} items"))
}

fn validate_restart_rules(rules: &[ContainerRestartRule], sidecar: bool, path: &FieldPath, errs: &mut Errors) {
    if rules.len() > MAX_RESTART_RULES {
        errs.push(too_many(path.clone(), rules.len(), MAX_RESTART_RULES));
    }
    let actions: &[&str] = if sidecar { &["RestartAllContainers"] } else { &["Restart", "RestartAllContainers"] };
    for (i, rule) in rules.iter().enumerate() {
        let p = path.index(i);
        if !actions.contains(&rule.action.as_str()) {
            errs.push(FieldError::not_supported(p.child("action"), &rule.action, actions));
        }
        let Some(codes) = &rule.exit_codes else {
            errs.push(FieldError::required(p.child("exitCodes"), "must be specified"));
            continue;
        };
        let cp = p.child("exitCodes");
        if !["In", "NotIn"].contains(&codes.operator.as_str()) {
            errs.push(FieldError::not_supported(cp.child("operator"), &codes.operator, &["In", "NotIn"]));
        }
        let values = codes.values.as_deref().unwrap_or_default();
        if values.len() > MAX_EXIT_CODES {
            errs.push(too_many(cp.child("values"), values.len(), MAX_EXIT_CODES));
        }
    }
}

fn validate_container_common(
    c: &Container,
    volumes: &VolumeMap<'_>,
    host_users: bool,
    path: &FieldPath,
    errs: &mut Errors,
) {
    let name_path = path.child("name");
    if c.name.is_empty() {
        errs.push(FieldError::required(name_path, ""));
    } else {
        for msg in is_dns1123_label(&c.name) {
            errs.push(FieldError::invalid(name_path.clone(), &c.name, msg));
        }
    }

    if str_or_empty(&c.image).is_empty() {
        errs.push(FieldError::required(path.child("image"), ""));
    }

    match str_or_empty(&c.termination_message_policy) {
        "File" | "FallbackToLogsOnError" => {}
        "" => errs.push(FieldError::required(path.child("terminationMessagePolicy"), "")),
        other => errs.push(FieldError::not_supported(
            path.child("terminationMessagePolicy"),
            other,
            &["File", "FallbackToLogsOnError"],
        )),
    }

    let mounts = c.volume_mounts.as_deref().unwrap_or_default();
    let devices = c.volume_devices.as_deref().unwrap_or_default();
    validate_container_ports(c.ports.as_deref().unwrap_or_default(), &path.child("ports"), errs);
    validate_env(c.env.as_deref().unwrap_or_default(), &path.child("env"), errs);
    validate_env_from(c.env_from.as_deref().unwrap_or_default(), &path.child("envFrom"), errs);
    let privileged = c.security_context.as_ref().and_then(|s| s.privileged).unwrap_or(false);
    validate_volume_mounts(mounts, devices, volumes, privileged, &path.child("volumeMounts"), errs);
    validate_volume_devices(devices, mounts, volumes, &path.child("volumeDevices"), errs);

    validate_pull_policy(&c.image_pull_policy, &path.child("imagePullPolicy"), errs);
    super::resources::validate_resources(c.resources.as_ref(), &path.child("resources"), errs);
    super::security_context::validate_security_context(
        c.security_context.as_ref(),
        host_users,
        &path.child("securityContext"),
        errs,
    );
}

fn validate_container_ports(ports: &[ContainerPort], path: &FieldPath, errs: &mut Errors) {
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let p = path.index(i);
        let name = str_or_empty(&port.name);
        if !name.is_empty() {
            let msgs = is_valid_port_name(name);
            if !msgs.is_empty() {
                for msg in msgs {
                    errs.push(FieldError::invalid(p.child("name"), name, msg));
                }
            } else if !names.insert(name) {
                errs.push(FieldError::duplicate(p.child("name"), name));
            }
        }
        if port.container_port == 0 {
            errs.push(FieldError::required(p.child("containerPort"), ""));
        } else {
            for msg in is_valid_port_num(i64::from(port.container_port)) {
                errs.push(FieldError::invalid(p.child("containerPort"), port.container_port, msg));
            }
        }
        if let Some(h) = port.host_port.filter(|h| *h != 0) {
            for msg in is_valid_port_num(i64::from(h)) {
                errs.push(FieldError::invalid(p.child("hostPort"), h, msg));
            }
        }
        match str_or_empty(&port.protocol) {
            "TCP" | "UDP" | "SCTP" => {}
            "" => errs.push(FieldError::required(p.child("protocol"), "")),
            other => errs.push(FieldError::not_supported(p.child("protocol"), other, &["SCTP", "TCP", "UDP"])),
        }
    }
}

fn check_host_port_conflicts(containers: &[Container], path: &FieldPath, errs: &mut Errors) {
    let mut seen = HashSet::new();
    for (ci, c) in containers.iter().enumerate() {
        for (pi, port) in c.ports.iter().flatten().enumerate() {
            let host_port = port.host_port.unwrap_or(0);
            if host_port == 0 {
                continue;
            }
            let key = format!("{}/{}/{}", str_or_empty(&port.protocol), str_or_empty(&port.host_ip), host_port);
            if seen.contains(&key) {
                errs.push(FieldError::duplicate(path.index(ci).child("ports").index(pi).child("hostPort"), &key));
            } else {
                seen.insert(key);
            }
        }
    }
}

/// `validatePullPolicy`, of a container's image or an image volume's.
pub(super) fn validate_pull_policy(policy: &Option<String>, path: &FieldPath, errs: &mut Errors) {
    match str_or_empty(policy) {
        "Always" | "IfNotPresent" | "Never" => {}
        "" => errs.push(FieldError::required(path.clone(), "")),
        other => errs.push(FieldError::not_supported(path.clone(), other, &["Always", "IfNotPresent", "Never"])),
    }
}
