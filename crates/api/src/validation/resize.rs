//! In-place resize: the `resizePolicy` of containers (`validateResizePolicy`) and what the
//! `resize` subresource may change (`ValidatePodResize` in
//! `pkg/apis/core/validation/validation.go`, 1.35, with the pod-level resources of
//! `InPlacePodLevelResourcesVerticalScaling`, on by default since 1.36).

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use std::collections::BTreeMap;

use super::{Errors, FieldError, FieldPath, validate_pod};
use crate::annotations::CONFIG_MIRROR;
use crate::container_kind::is_sidecar;

const RESIZE_RESOURCES: [&str; 2] = ["cpu", "memory"];
const RESIZE_POLICIES: [&str; 2] = ["NotRequired", "RestartContainer"];

/// `validateResizePolicy` for app containers and sidecars; an init container that runs to
/// completion may not have one.
pub(super) fn validate_resize_policies(spec: &PodSpec, path: &FieldPath, errs: &mut Errors) {
    let never = spec.restart_policy.as_deref() == Some("Never");
    let lists = [
        ("containers", spec.containers.as_slice()),
        ("initContainers", spec.init_containers.as_deref().unwrap_or_default()),
    ];
    for (list, containers) in lists {
        for (i, c) in containers.iter().enumerate() {
            let Some(policies) = c.resize_policy.as_deref() else { continue };
            let p = path.child(list).index(i).child("resizePolicy");
            if list == "initContainers" && !is_sidecar(c) {
                let shown = serde_json::to_string(policies).unwrap_or_default();
                errs.push(FieldError::invalid(
                    p,
                    crate::field_error::Raw(shown),
                    "must not be set for init containers",
                ));
                continue;
            }
            let mut seen = vec![];
            for (j, policy) in policies.iter().enumerate() {
                let name = policy.resource_name.as_str();
                if seen.contains(&name) {
                    errs.push(FieldError::duplicate(p.index(j), name));
                }
                seen.push(name);
                match name {
                    "cpu" | "memory" => {}
                    "" => errs.push(FieldError::required(p.clone(), "")),
                    other => errs.push(FieldError::not_supported(p.clone(), other, &RESIZE_RESOURCES)),
                }
                match policy.restart_policy.as_str() {
                    "NotRequired" | "RestartContainer" => {}
                    "" => errs.push(FieldError::required(p.clone(), "")),
                    other => errs.push(FieldError::not_supported(p.clone(), other, &RESIZE_POLICIES)),
                }
                if never && policy.restart_policy != "NotRequired" {
                    errs.push(FieldError::invalid(
                        p.clone(),
                        policy.restart_policy.as_str(),
                        "must be 'NotRequired' when `restartPolicy` is 'Never'",
                    ));
                }
            }
        }
    }
}

/// The `resize` subresource's update (`ResizeStrategy.PrepareForUpdate`): `old` with the
/// pod-level resources of `new`, and the resources and resize policies `new` gives its
/// containers, by name; every other change is dropped.
pub fn resize_update(new: &Pod, old: &Pod) -> Pod {
    let mut out = old.clone();
    let (Some(spec), Some(new_spec)) = (out.spec.as_mut(), new.spec.as_ref()) else { return out };
    spec.resources = new_spec.resources.clone();
    let take = |mine: &mut [Container], theirs: &[Container]| {
        for c in theirs {
            if let Some(m) = mine.iter_mut().find(|m| m.name == c.name) {
                m.resources = c.resources.clone();
                m.resize_policy = c.resize_policy.clone();
            }
        }
    };
    take(&mut spec.containers, &new_spec.containers);
    if let (Some(mine), Some(theirs)) = (spec.init_containers.as_mut(), new_spec.init_containers.as_ref()) {
        take(mine, theirs);
    }
    out
}

/// Whether the amount of `name` is in `old` but not in `new`.
fn removed(
    name: &str,
    new: Option<&BTreeMap<String, ApiQuantity>>,
    old: Option<&BTreeMap<String, ApiQuantity>>,
) -> bool {
    old.is_some_and(|o| o.contains_key(name)) && !new.is_some_and(|n| n.contains_key(name))
}

/// `validateContainerResize`: requests and limits of cpu and memory may not be removed.
fn validate_container_resize(
    new: &ResourceRequirements,
    old: &ResourceRequirements,
    path: &FieldPath,
    errs: &mut Errors,
) {
    for name in RESIZE_RESOURCES {
        if removed(name, new.requests.as_ref(), old.requests.as_ref()) {
            errs.push(FieldError::forbidden(path.child("requests").key(name), "resource requests cannot be removed"));
        }
    }
    for name in RESIZE_RESOURCES {
        if removed(name, new.limits.as_ref(), old.limits.as_ref()) {
            errs.push(FieldError::forbidden(path.child("limits").key(name), "resource limits cannot be removed"));
        }
    }
}

/// `new` with the cpu and memory amounts set to `old`'s, to see whether anything else changed
/// (`dropCPUMemoryUpdates`); `None` where neither has any.
fn without_cpu_memory_resources(
    new: Option<&ResourceRequirements>,
    old: Option<&ResourceRequirements>,
) -> Option<ResourceRequirements> {
    let keep = |n: Option<&BTreeMap<String, ApiQuantity>>, o: Option<&BTreeMap<String, ApiQuantity>>| {
        let mut out: BTreeMap<String, ApiQuantity> = n.cloned().unwrap_or_default();
        for name in RESIZE_RESOURCES {
            out.remove(name);
            if let Some(q) = o.and_then(|o| o.get(name)) {
                out.insert(name.to_string(), q.clone());
            }
        }
        (!out.is_empty() || o.is_some()).then_some(out)
    };
    let (n, o) = (new.cloned().unwrap_or_default(), old.cloned().unwrap_or_default());
    let resources = ResourceRequirements {
        requests: keep(n.requests.as_ref(), o.requests.as_ref()),
        limits: keep(n.limits.as_ref(), o.limits.as_ref()),
        claims: n.claims,
    };
    (resources != ResourceRequirements::default() || old.is_some()).then_some(resources)
}

/// The container with the cpu and memory amounts set to `old`'s (`dropCPUMemoryResourcesFromContainer`).
fn without_cpu_memory(new: &Container, old: &Container) -> Container {
    let mut c = new.clone();
    c.resources = without_cpu_memory_resources(new.resources.as_ref(), old.resources.as_ref());
    c.resize_policy = old.resize_policy.clone();
    c
}

/// Every reason the resized pod `new` (from [`resize_update`], defaulted) may not replace
/// `old`; `qos` is the pod's QoS class as `status.qosClass` says it, which a resize may not change.
pub fn validate_pod_resize(new: &Pod, old: &Pod, qos: impl Fn(&Pod) -> &'static str) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> =
        validate_pod(new).into_iter().filter(|e| !e.path.starts_with("metadata.name")).collect();
    if old.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(CONFIG_MIRROR)) {
        return vec![FieldError::forbidden("", "static pods cannot be resized")];
    }
    let empty = PodSpec::default();
    let (new_spec, old_spec) = (new.spec.as_ref().unwrap_or(&empty), old.spec.as_ref().unwrap_or(&empty));
    if old_spec.os.as_ref().is_some_and(|os| os.name == "windows") {
        return vec![FieldError::forbidden("", "windows pods cannot be resized")];
    }
    let spec_path = FieldPath::new("spec");
    let old_qos = old.status.as_ref().and_then(|s| s.qos_class.clone()).unwrap_or_else(|| qos(old).to_string());
    if old_qos != qos(new) {
        let shown = new.status.as_ref().and_then(|s| s.qos_class.clone()).unwrap_or_default();
        errs.push(FieldError::invalid(
            spec_path.clone(),
            shown.as_str(),
            "Pod QOS Class may not change as a result of resizing",
        ));
    }
    // Pod-level resources (`InPlacePodLevelResourcesVerticalScaling`): removed amounts and
    // other resources refused as a container's are; their amounts and their consistency with
    // the containers' were checked with the pod above.
    let pod_level_path = spec_path.child("resources");
    let (new_pod_level, old_pod_level) = (new_spec.resources.as_ref(), old_spec.resources.as_ref());
    validate_container_resize(
        &new_pod_level.cloned().unwrap_or_default(),
        &old_pod_level.cloned().unwrap_or_default(),
        &pod_level_path,
        &mut errs,
    );
    if without_cpu_memory_resources(new_pod_level, old_pod_level).as_ref() != old_pod_level {
        errs.push(FieldError::forbidden(pod_level_path, "only cpu and memory resources are mutable"));
    }
    let new_inits = new_spec.init_containers.as_deref().unwrap_or_default();
    let old_inits = old_spec.init_containers.as_deref().unwrap_or_default();
    let lists = [
        ("containers", new_spec.containers.as_slice(), old_spec.containers.as_slice()),
        ("initContainers", new_inits, old_inits),
    ];
    for (list, new_list, old_list) in lists {
        for (i, (n, o)) in new_list.iter().zip(old_list).enumerate() {
            if list == "initContainers" && !is_sidecar(o) {
                continue;
            }
            let path = spec_path.child(list).index(i).child("resources");
            let (nr, or) = (n.resources.clone().unwrap_or_default(), o.resources.clone().unwrap_or_default());
            validate_container_resize(&nr, &or, &path, &mut errs);
            // Amounts as on create (`ValidateResourceRequirements`): a resize may now set a
            // request above its limit.
            super::resources::validate_resources(Some(&nr), &path, &mut errs);
        }
    }
    for (n, o) in new_spec.containers.iter().zip(&old_spec.containers) {
        if without_cpu_memory(n, o) != *o {
            errs.push(FieldError::forbidden(spec_path.clone(), "only cpu and memory resources are mutable"));
        }
    }
    for (n, o) in new_inits.iter().zip(old_inits) {
        if is_sidecar(o) {
            if without_cpu_memory(n, o) != *o {
                errs.push(FieldError::forbidden(
                    spec_path.clone(),
                    "only cpu and memory resources for sidecar containers are mutable",
                ));
            }
        } else if n != o {
            errs.push(FieldError::forbidden(
                spec_path.clone(),
                "resources for non-sidecar init containers are immutable",
            ));
        }
    }
    errs
}
