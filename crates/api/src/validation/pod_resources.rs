//! Pod-level resources (`spec.resources`, KEP-2837): `validatePodResources`, its resource
//! names and quantities (`validatePodResourceRequirements`), and their consistency with the
//! containers' (`validatePodResourceConsistency`).

use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};

use super::{Errors, FieldError, FieldPath, IS_NEGATIVE};
use crate::formats::is_qualified_name;
use crate::pod_resources::{
    Amount, HUGEPAGES_PREFIX, ResourceList, aggregate_container_requests, container_limits, is_overcommit_allowed,
    is_supported_pod_level_resource, list,
};

/// `standardResources`: the names that need no domain.
const STANDARD_RESOURCES: [&str; 20] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
    "requests.storage",
    "storage",
];

/// What `SupportedPodLevelResources` lists (the hugepages by their prefix).
const SUPPORTED: [&str; 3] = ["cpu", "hugepages-", "memory"];

/// `validatePodResources`: `spec.resources` of a (defaulted) pod.
pub(super) fn validate_pod_resources(spec: &PodSpec, path: &FieldPath, errs: &mut Errors) {
    let Some(resources) = spec.resources.as_ref() else { return };
    if resources.claims.is_some() {
        errs.push(FieldError::forbidden(path.child("claims"), "claims cannot be set for Resources at pod-level"));
    }
    validate_requirements(resources, path, errs);
    validate_consistency(spec, resources, path, errs);
}

/// `validateResourceRequirements` with `validatePodResourceName`: names, quantities, each
/// request within its limit, and hugepages only beside cpu or memory.
fn validate_requirements(r: &ResourceRequirements, path: &FieldPath, errs: &mut Errors) {
    let (limits_path, requests_path) = (path.child("limits"), path.child("requests"));
    let limits = list(r.limits.as_ref());
    let (mut cpu_or_memory, mut hugepages) = (false, false);
    for (name, q) in &limits {
        validate_name_and_quantity(name, q, &limits_path.key(name), errs);
        hugepages |= name.starts_with(HUGEPAGES_PREFIX);
        cpu_or_memory |= matches!(name.as_str(), "cpu" | "memory");
    }
    for (name, q) in &list(r.requests.as_ref()) {
        validate_name_and_quantity(name, q, &requests_path.key(name), errs);
        match limits.get(name) {
            Some(limit) if q != limit && !is_overcommit_allowed(name) => errs.push(FieldError::invalid(
                requests_path.clone(),
                q.to_string(),
                format!("must be equal to {name} limit of {limit}"),
            )),
            Some(limit) if q.value > limit.value => errs.push(FieldError::invalid(
                requests_path.clone(),
                q.to_string(),
                format!("must be less than or equal to {name} limit of {limit}"),
            )),
            Some(_) => {}
            None if !is_overcommit_allowed(name) => errs
                .push(FieldError::required(limits_path.clone(), "Limit must be set for non overcommitable resources")),
            None => {}
        }
        hugepages |= name.starts_with(HUGEPAGES_PREFIX);
        cpu_or_memory |= matches!(name.as_str(), "cpu" | "memory");
    }
    if hugepages && !cpu_or_memory {
        errs.push(FieldError::forbidden(path.clone(), "HugePages require cpu or memory"));
    }
}

/// `validatePodResourceName` (a standard or qualified name that pod-level resources support)
/// and `ValidateResourceQuantityValue`.
fn validate_name_and_quantity(name: &str, q: &Amount, path: &FieldPath, errs: &mut Errors) {
    let not_qualified = is_qualified_name(name);
    if !not_qualified.is_empty() {
        errs.extend(not_qualified.into_iter().map(|msg| FieldError::invalid(path.clone(), name, msg)));
    } else if !name.contains('/') && !is_standard_resource(name) {
        errs.push(FieldError::invalid(path.clone(), name, "must be a standard resource type or fully qualified"));
    } else if !is_supported_pod_level_resource(name) {
        errs.push(FieldError::not_supported(path.clone(), name, &SUPPORTED));
    }
    if q.value < Default::default() {
        errs.push(FieldError::invalid(path.clone(), q.to_string(), IS_NEGATIVE));
    }
}

/// `IsStandardResourceName`: a standard name, or a hugepages one of a pod or a quota.
fn is_standard_resource(name: &str) -> bool {
    STANDARD_RESOURCES.contains(&name)
        || name.starts_with(HUGEPAGES_PREFIX)
        || name.strip_prefix("requests.").is_some_and(|n| n.starts_with(HUGEPAGES_PREFIX))
}

/// `validatePodResourceConsistency`: each pod-level request covers the containers' aggregate
/// request of that resource, and no app container's limit is above the pod's.
fn validate_consistency(spec: &PodSpec, r: &ResourceRequirements, path: &FieldPath, errs: &mut Errors) {
    let pod_requests = list(r.requests.as_ref());
    for (name, aggregate) in aggregate_container_requests(Some(spec)) {
        if let Some(requested) = pod_requests.get(&name).filter(|q| aggregate.value > q.value) {
            errs.push(FieldError::invalid(
                path.child("requests").key(&name),
                requested.to_string(),
                format!("must be greater than or equal to aggregate container requests of {aggregate}"),
            ));
        }
    }
    let pod_limits: ResourceList = list(r.limits.as_ref());
    for (i, c) in spec.containers.iter().enumerate() {
        for (name, limit) in container_limits(c) {
            if let Some(pod_limit) = pod_limits.get(&name).filter(|q| limit.value > q.value) {
                // Upstream builds this path under `spec.resources`.
                errs.push(FieldError::invalid(
                    path.child("containers").index(i).key(&name).child("limits"),
                    limit.to_string(),
                    format!("must be less than or equal to pod limits of {pod_limit}"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests;
