//! What a static pod may not use since 1.37 (`PreventStaticPodAPIReferences`, always on): any
//! object of the API (`podutil.HasAPIObjectReference`). A static pod runs before, and without,
//! an API server, and the node's credentials must not be a way to read what the pod's author
//! could not.

use k8s_openapi::api::core::v1::{Container, Pod};
use podwright_planner::pod::all_containers;

/// The kind of API object the pod references, as the kubelet's message names it (plural
/// resource, with how for volumes); None when it references none.
pub fn api_object_reference(pod: &Pod) -> Option<&'static str> {
    let spec = pod.spec.as_ref()?;
    // The deprecated `serviceAccount` counts too: conversion copies it to the name.
    if [&spec.service_account_name, &spec.service_account].iter().any(|n| n.as_deref().is_some_and(|n| !n.is_empty())) {
        return Some("serviceaccounts");
    }
    let containers: Vec<&Container> = all_containers(pod).map(|sc| sc.container).collect();
    let volumes = spec.volumes.as_deref().unwrap_or_default();
    let env_sources = || containers.iter().flat_map(|c| c.env.iter().flatten()).filter_map(|e| e.value_from.as_ref());
    let env_from = || containers.iter().flat_map(|c| c.env_from.iter().flatten());
    let projections = || volumes.iter().filter_map(|v| v.projected.as_ref()).flat_map(|p| p.sources.iter().flatten());

    let secrets = spec.image_pull_secrets.as_ref().is_some_and(|s| !s.is_empty())
        || env_from().any(|f| f.secret_ref.is_some())
        || env_sources().any(|s| s.secret_key_ref.is_some())
        || volumes.iter().any(|v| v.secret.is_some())
        || projections().any(|p| p.secret.is_some());
    if secrets {
        return Some("secrets");
    }
    let config_maps = env_from().any(|f| f.config_map_ref.is_some())
        || env_sources().any(|s| s.config_map_key_ref.is_some())
        || volumes.iter().any(|v| v.config_map.is_some())
        || projections().any(|p| p.config_map.is_some());
    if config_maps {
        return Some("configmaps");
    }
    if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
        return Some("resourceclaims");
    }
    for v in volumes {
        if v.persistent_volume_claim.is_some() {
            return Some("persistentvolumeclaims");
        }
        if v.ephemeral.is_some() {
            return Some("persistentvolumeclaims (via ephemeral volumes)");
        }
        if v.csi.is_some() {
            return Some("csidrivers (via CSI volumes)");
        }
        if v.glusterfs.is_some() {
            return Some("endpoints (via glusterFS volumes)");
        }
        for p in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if p.service_account_token.is_some() {
                return Some("serviceaccounts (via projected volumes)");
            }
            if p.cluster_trust_bundle.is_some() {
                return Some("clustertrustbundles");
            }
            if p.pod_certificate.is_some() {
                return Some("podcertificates");
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reference(spec: serde_json::Value) -> Option<&'static str> {
        let mut spec = spec;
        if spec.get("containers").is_none() {
            spec["containers"] = json!([{"name": "c", "image": "i"}]);
        }
        api_object_reference(&serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap())
    }

    #[test]
    fn every_api_object_a_pod_can_name_is_found_in_the_kubelets_order() {
        let c = |extra: serde_json::Value| {
            let mut c = json!({"name": "c", "image": "i"});
            c.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            json!([c])
        };
        let table = [
            (json!({"serviceAccountName": "sa", "imagePullSecrets": [{"name": "s"}]}), Some("serviceaccounts")),
            (json!({"serviceAccount": "sa"}), Some("serviceaccounts")),
            (json!({"imagePullSecrets": [{"name": "s"}]}), Some("secrets")),
            (json!({"containers": c(json!({"envFrom": [{"secretRef": {"name": "s"}}]}))}), Some("secrets")),
            (
                json!({"containers": c(json!({"env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}))}),
                Some("secrets"),
            ),
            (
                json!({"volumes": [{"name": "v", "secret": {"secretName": "s"}}, {"name": "w", "configMap": {"name": "m"}}]}),
                Some("secrets"),
            ),
            (
                json!({"volumes": [{"name": "v", "projected": {"sources": [{"configMap": {"name": "m"}}]}}]}),
                Some("configmaps"),
            ),
            (
                json!({"initContainers": c(json!({"env": [{"name": "E", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}}]}))}),
                Some("configmaps"),
            ),
            (
                json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]}),
                Some("persistentvolumeclaims"),
            ),
            (
                json!({"volumes": [{"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]}),
                Some("serviceaccounts (via projected volumes)"),
            ),
            (
                json!({"volumes": [{"name": "v", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/x"}},
                    {"name": "d", "projected": {"sources": [{"downwardAPI": {"items": []}}]}}]}),
                None,
            ),
            (json!({}), None),
        ];
        for (spec, want) in table {
            assert_eq!(reference(spec.clone()), want, "{spec}");
        }
    }
}
