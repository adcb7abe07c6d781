//! Pod validation as the API server does it on create
//! (`pkg/apis/core/validation/validation.go` `ValidatePodCreate`), with the
//! same field paths, error kinds, wording and order. Run it on a defaulted
//! pod (see [`crate::defaults::apply_defaults`]).
//!
//! Feature-gated behaviour follows the defaults of Kubernetes 1.33 (the API
//! version this crate is built against): sidecars allowed, relaxed
//! environment variable names, zero-second sleep hooks allowed.
//!
//! Not covered (accepted without checks): owner references, finalizers, resource quantities'
//! syntax, security contexts (but for ids, seccomp and procMount), affinity, tolerations,
//! topology spread, most network-storage volume sources, mount propagation, OS-specific rules.
//!
//! ConfigMaps, Secrets and RuntimeClasses are validated here too, on create and update
//! (`config_objects`).

mod config_objects;
mod containers;
mod dns;
mod env;
mod go_json;
mod pod_resources;
mod probes_and_hooks;
mod resize;
mod resources;
mod security_context;
mod update;
mod volume_mounts;
mod volumes;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use self::containers::{validate_containers, validate_init_containers};
use self::volumes::validate_volumes;
pub use crate::field_error::{ErrorKind, FieldError, FieldPath, InvalidObject};
use crate::formats::{
    inclusive_range_error, is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_label_value,
    name_is_dns_label, name_is_dns_subdomain,
};
pub use config_objects::{
    MAX_SECRET_SIZE, validate_config_map, validate_config_map_update, validate_runtime_class, validate_secret,
    validate_secret_update,
};
pub use resize::{resize_update, validate_pod_resize};
pub use update::{POD_UPDATE_FORBIDDEN, validate_pod_update};

const INIT_FORBIDDEN: &str = "may not be set for init containers without restartPolicy=Always";
/// The longest `hostnameOverride`: the kernel's host name field (64 bytes).
const HOSTNAME_OVERRIDE_MAX_LEN: usize = 64;
const IS_NEGATIVE: &str = "must be greater than or equal to 0";
const FILE_MODE_ERROR: &str = "must be a number between 0 and 0777 (octal), both inclusive";
/// `TotalAnnotationSizeLimitB`: the keys and values of all annotations together (256 KiB).
pub const TOTAL_ANNOTATION_SIZE_LIMIT_BYTES: usize = 256 * 1024;

type Errors = Vec<FieldError>;

/// Validate a (defaulted) pod for creation. Returns every error found, in
/// the order the API server reports them; empty means valid.
pub fn validate_pod(pod: &Pod) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_object_meta(&pod.metadata, true, &FieldPath::new("metadata"), &mut errs);

    let empty = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&empty);
    let spec_path = FieldPath::new("spec");
    validate_pod_spec(spec, &spec_path, &mut errs);

    // validateContainersOnlyForPod
    for (list, field) in [
        (spec.containers.as_slice(), "containers"),
        (spec.init_containers.as_deref().unwrap_or_default(), "initContainers"),
    ] {
        for (i, c) in list.iter().enumerate() {
            let image = c.image.as_deref().unwrap_or_default();
            if image.len() != image.trim().len() {
                errs.push(FieldError::invalid(
                    spec_path.child(field).index(i).child("image"),
                    image,
                    "must not have leading or trailing whitespace",
                ));
            }
        }
    }

    // ValidatePodCreate
    if spec.ephemeral_containers.as_ref().is_some_and(|e| !e.is_empty()) {
        errs.push(FieldError::forbidden(spec_path.child("ephemeralContainers"), "cannot be set on create"));
    }
    if spec.node_name.as_deref().is_some_and(|n| !n.is_empty())
        && spec.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty())
    {
        errs.push(FieldError::forbidden(
            spec_path.child("nodeName"),
            "cannot be set until all schedulingGates have been cleared",
        ));
    }
    errs
}

/// Validate, and wrap any errors in an [`InvalidObject`] (kubectl's message).
pub fn check_pod(pod: &Pod) -> Result<(), InvalidObject> {
    InvalidObject::check("Pod", pod.metadata.name.as_deref(), validate_pod(pod))
}

fn str_or_empty(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or_default()
}

/// `ValidateObjectMeta` with the DNS-subdomain name rule; `namespaced` is false for
/// cluster-scoped kinds, which may not have a namespace.
fn validate_object_meta(meta: &ObjectMeta, namespaced: bool, path: &FieldPath, errs: &mut Errors) {
    let generate_name = str_or_empty(&meta.generate_name);
    if !generate_name.is_empty() {
        for msg in name_is_dns_subdomain(generate_name, true) {
            errs.push(FieldError::invalid(path.child("generateName"), generate_name, msg));
        }
    }
    let name = str_or_empty(&meta.name);
    if name.is_empty() {
        errs.push(FieldError::required(path.child("name"), "name or generateName is required"));
    } else {
        for msg in name_is_dns_subdomain(name, false) {
            errs.push(FieldError::invalid(path.child("name"), name, msg));
        }
    }
    let namespace = str_or_empty(&meta.namespace);
    if !namespaced {
        if !namespace.is_empty() {
            errs.push(FieldError::forbidden(path.child("namespace"), "not allowed on this type"));
        }
    } else if namespace.is_empty() {
        errs.push(FieldError::required(path.child("namespace"), ""));
    } else {
        for msg in name_is_dns_label(namespace, false) {
            errs.push(FieldError::invalid(path.child("namespace"), namespace, msg));
        }
    }
    // ValidateLabels: errors name the map, not the key.
    for (key, value) in meta.labels.iter().flatten() {
        for msg in is_qualified_name(key) {
            errs.push(FieldError::invalid(path.child("labels"), key, msg));
        }
        for msg in is_valid_label_value(value) {
            errs.push(FieldError::invalid(path.child("labels"), value, msg));
        }
    }
    // ValidateAnnotations: keys are qualified names in any case; the total size is bounded.
    let annotations = meta.annotations.iter().flatten();
    for key in annotations.clone().map(|(k, _)| k) {
        for msg in is_qualified_name(&key.to_lowercase()) {
            errs.push(FieldError::invalid(path.child("annotations"), key, msg));
        }
    }
    if annotations.map(|(k, v)| k.len() + v.len()).sum::<usize>() > TOTAL_ANNOTATION_SIZE_LIMIT_BYTES {
        errs.push(FieldError::too_long(path.child("annotations"), TOTAL_ANNOTATION_SIZE_LIMIT_BYTES));
    }
}

fn validate_pod_spec(spec: &PodSpec, path: &FieldPath, errs: &mut Errors) {
    let grace = spec.termination_grace_period_seconds;
    match grace {
        None => errs.push(FieldError::required(path.child("terminationGracePeriodSeconds"), "")),
        // Upstream coerces negative values at admission; this agent rejects them.
        Some(g) if g < 0 => errs.push(FieldError::invalid(path.child("terminationGracePeriodSeconds"), g, IS_NEGATIVE)),
        Some(_) => {}
    }

    let volumes = validate_volumes(spec.volumes.as_deref().unwrap_or_default(), &path.child("volumes"), errs);
    let host_users = spec.host_users != Some(false);
    validate_containers(&spec.containers, &volumes, grace, host_users, &path.child("containers"), errs);
    validate_init_containers(
        spec.init_containers.as_deref().unwrap_or_default(),
        &spec.containers,
        &volumes,
        grace,
        host_users,
        &path.child("initContainers"),
        errs,
    );
    env::validate_file_key_ref_volumes(spec, &volumes, path, errs);
    pod_resources::validate_pod_resources(spec, &path.child("resources"), errs);
    resize::validate_resize_policies(spec, path, errs);

    // restartPolicy
    let restart = str_or_empty(&spec.restart_policy);
    match restart {
        "Always" | "OnFailure" | "Never" => {}
        "" => errs.push(FieldError::required(path.child("restartPolicy"), "")),
        other => {
            errs.push(FieldError::not_supported(path.child("restartPolicy"), other, &["Always", "OnFailure", "Never"]))
        }
    }

    dns::validate_dns_policy(spec, path, errs);
    // The internal type's pod security context holds hostNetwork: checked first, as there.
    security_context::validate_host_network(spec, &path.child("containers"), errs);
    security_context::validate_pod_security_context(spec, &path.child("securityContext"), errs);
    dns::validate_pod_dns_config(spec, path, errs);

    for (field, value) in [("serviceAccountName", &spec.service_account_name), ("nodeName", &spec.node_name)] {
        let v = str_or_empty(value);
        if !v.is_empty() {
            for msg in name_is_dns_subdomain(v, false) {
                errs.push(FieldError::invalid(path.child(field), v, msg));
            }
        }
    }

    if let Some(v) = spec.active_deadline_seconds
        && !(1..=i64::from(i32::MAX)).contains(&v)
    {
        errs.push(FieldError::invalid(
            path.child("activeDeadlineSeconds"),
            v,
            inclusive_range_error(1, i64::from(i32::MAX)),
        ));
    }

    for (field, value) in [("hostname", &spec.hostname), ("subdomain", &spec.subdomain)] {
        let v = str_or_empty(value);
        if !v.is_empty() {
            for msg in is_dns1123_label(v) {
                errs.push(FieldError::invalid(path.child(field), v, msg));
            }
        }
    }

    dns::validate_host_aliases(spec.host_aliases.as_deref().unwrap_or_default(), &path.child("hostAliases"), errs);
    validate_hostname_override(spec, &path.child("hostnameOverride"), errs);
}

/// `spec.hostnameOverride` (KEP-4762, GA in 1.37): a DNS subdomain of at most 64 characters, the
/// whole host name, so neither made an FQDN nor taken from the node.
fn validate_hostname_override(spec: &PodSpec, path: &FieldPath, errs: &mut Errors) {
    let Some(h) = spec.hostname_override.as_deref() else { return };
    if h.len() > HOSTNAME_OVERRIDE_MAX_LEN {
        errs.push(FieldError::too_long(path.clone(), HOSTNAME_OVERRIDE_MAX_LEN));
    }
    for msg in is_dns1123_subdomain(h) {
        errs.push(FieldError::invalid(path.clone(), h, msg));
    }
    if spec.set_hostname_as_fqdn == Some(true) {
        errs.push(FieldError::invalid(path.clone(), h, "may not be set when setHostnameAsFQDN is true"));
    }
    if spec.host_network == Some(true) {
        errs.push(FieldError::invalid(path.clone(), h, "may not be set when hostNetwork is true"));
    }
}

#[cfg(test)]
mod tests;
