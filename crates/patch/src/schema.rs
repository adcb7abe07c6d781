//! How each list of an object merges under a strategic merge patch: the `patchStrategy` and
//! `patchMergeKey` tags of the Go types (`x-kubernetes-patch-strategy` and
//! `x-kubernetes-patch-merge-key` in OpenAPI).
//!
//! Maps always merge key by key: no field of the kinds podwright serves declares
//! `patchStrategy:"replace"` on a map. The `retainKeys` strategy (on `volumes`) needs no entry
//! either: applying a patch honours a `$retainKeys` directive wherever it appears, as upstream
//! does, and only patch creation reads the tag.

/// How a list merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// The patch's list replaces the object's (an atomic list, the default).
    Replace,
    /// Elements are maps merged one by one, matched on this field.
    MergeByKey(&'static str),
    /// Elements are primitives merged as a set (`finalizers`).
    MergePrimitives,
}

impl ListStrategy {
    /// The merge key; `None` for lists without one.
    pub(crate) fn merge_key(self) -> Option<&'static str> {
        match self {
            ListStrategy::MergeByKey(key) => Some(key),
            ListStrategy::Replace | ListStrategy::MergePrimitives => None,
        }
    }

    pub(crate) fn merges(self) -> bool {
        self != ListStrategy::Replace
    }
}

/// The strategies of one kind of object.
pub trait PatchSchema {
    /// The strategy of the list at `path`: field names from the object's root with list indices
    /// left out, e.g. `["spec", "containers", "env"]`.
    fn strategy(&self, path: &[&str]) -> ListStrategy;
}

/// The lists of core/v1 Pod, ConfigMap, Secret, Service, Namespace and Event (and every object's
/// metadata) that merge, from kubernetes/api `core/v1/types.go` and apimachinery
/// `pkg/apis/meta/v1/types.go` as of Kubernetes 1.33. Paths of these kinds never collide
/// (`spec.ports` is only a Service's), so one schema serves them all.
///
/// Lists nested in atomic lists are left out: `status.containerStatuses` is atomic, so its
/// `volumeMounts` (merged by `mountPath`) and `allocatedResourcesStatus` (by `name`) never merge.
#[derive(Debug, Clone, Copy, Default)]
pub struct CoreV1Schema;

impl PatchSchema for CoreV1Schema {
    fn strategy(&self, path: &[&str]) -> ListStrategy {
        use ListStrategy::{MergeByKey, MergePrimitives, Replace};
        const CONTAINERS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];
        match path {
            ["metadata", "ownerReferences"] => MergeByKey("uid"),
            ["metadata", "finalizers"] => MergePrimitives,
            // Pod
            ["spec", "containers" | "initContainers" | "ephemeralContainers"] => MergeByKey("name"),
            ["spec", "volumes" | "resourceClaims" | "imagePullSecrets" | "schedulingGates"] => MergeByKey("name"),
            ["spec", "hostAliases"] => MergeByKey("ip"),
            ["spec", "topologySpreadConstraints"] => MergeByKey("topologyKey"),
            ["spec", containers, field] if CONTAINERS.contains(containers) => match *field {
                "ports" => MergeByKey("containerPort"),
                "env" => MergeByKey("name"),
                "volumeMounts" => MergeByKey("mountPath"),
                "volumeDevices" => MergeByKey("devicePath"),
                _ => Replace,
            },
            ["status", "hostIPs" | "podIPs"] => MergeByKey("ip"),
            ["status", "resourceClaimStatuses"] => MergeByKey("name"),
            // Pod, Service (metav1.Condition) and Namespace conditions.
            ["status", "conditions"] => MergeByKey("type"),
            // Service
            ["spec", "ports"] => MergeByKey("port"),
            // ServiceAccount (its `imagePullSecrets` are replaced)
            ["secrets"] => MergeByKey("name"),
            _ => Replace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_lists_merge_on_their_keys() {
        let schema = CoreV1Schema;
        assert_eq!(schema.strategy(&["spec", "containers"]), ListStrategy::MergeByKey("name"));
        assert_eq!(schema.strategy(&["spec", "initContainers", "env"]), ListStrategy::MergeByKey("name"));
        assert_eq!(
            schema.strategy(&["spec", "ephemeralContainers", "ports"]),
            ListStrategy::MergeByKey("containerPort")
        );
        assert_eq!(schema.strategy(&["spec", "containers", "volumeMounts"]), ListStrategy::MergeByKey("mountPath"));
        assert_eq!(schema.strategy(&["spec", "containers", "args"]), ListStrategy::Replace);
        assert_eq!(schema.strategy(&["spec", "containers", "resizePolicy"]), ListStrategy::Replace);
    }

    #[test]
    fn metadata_and_atomic_lists() {
        let schema = CoreV1Schema;
        assert_eq!(schema.strategy(&["metadata", "finalizers"]), ListStrategy::MergePrimitives);
        assert_eq!(schema.strategy(&["metadata", "ownerReferences"]), ListStrategy::MergeByKey("uid"));
        assert_eq!(schema.strategy(&["metadata", "managedFields"]), ListStrategy::Replace);
        assert_eq!(schema.strategy(&["spec", "tolerations"]), ListStrategy::Replace);
        // A Namespace's spec.finalizers is atomic, unlike metadata.finalizers.
        assert_eq!(schema.strategy(&["spec", "finalizers"]), ListStrategy::Replace);
        assert_eq!(schema.strategy(&["status", "containerStatuses"]), ListStrategy::Replace);
        assert_eq!(schema.strategy(&["spec", "ports"]), ListStrategy::MergeByKey("port"));
        // ServiceAccount
        assert_eq!(schema.strategy(&["secrets"]), ListStrategy::MergeByKey("name"));
        assert_eq!(schema.strategy(&["imagePullSecrets"]), ListStrategy::Replace);
    }
}
