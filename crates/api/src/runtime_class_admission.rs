//! The API server's RuntimeClass admission plugin (`plugin/pkg/admission/runtimeclass`) for a
//! new pod: its class must exist, and the class's `overhead.podFixed` becomes the pod's
//! `spec.overhead`, which a pod may only set itself to that same value. `run` applies it at load
//! and `serve` on create, so the effective pod resources (`PodRequests`/`PodLimits` add
//! `spec.overhead`) and the pod-level cgroup include the overhead.

use crate::field_error::FieldError;
use crate::go;
use crate::quantity::Quantity;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use std::collections::BTreeMap;

/// Why the plugin refuses a pod; the API server answers 403 Forbidden with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeClassRefusal {
    #[error("pod rejected: RuntimeClass {} not found", go::quote(.0))]
    NotFound(String),
    #[error("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")]
    OverheadMismatch,
    #[error("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead")]
    OverheadWithoutClass,
}

impl RuntimeClassRefusal {
    /// The refusal as a field error naming the field it is about, for `run`'s load report.
    pub fn field_error(&self) -> FieldError {
        let path = match self {
            RuntimeClassRefusal::NotFound(_) => "spec.runtimeClassName",
            _ => "spec.overhead",
        };
        FieldError::forbidden(path, self.to_string())
    }
}

/// Apimachinery's semantic equality of two resource lists: same names, quantities equal by
/// value, and no list the same as an empty one.
fn same_resources(a: &BTreeMap<String, ApiQuantity>, b: &BTreeMap<String, ApiQuantity>) -> bool {
    let value = |q: &ApiQuantity| Quantity::parse(&q.0).ok();
    a.len() == b.len()
        && a.iter().all(|(name, q)| b.get(name).is_some_and(|other| value(q).is_some() && value(q) == value(other)))
}

/// Admit then validate `pod` as the plugin does on create, `class_of` looking a class up by
/// name: the class must exist, its overhead is set on the pod, and a pod's own overhead must
/// equal its class's (or, without a class overhead, be unset).
pub fn admit_runtime_class_of(
    pod: &mut Pod,
    class_of: impl Fn(&str) -> Option<RuntimeClass>,
) -> Result<(), RuntimeClassRefusal> {
    let Some(spec) = pod.spec.as_mut() else { return Ok(()) };
    let class = match spec.runtime_class_name.as_deref() {
        None => None,
        Some(name) => Some(class_of(name).ok_or_else(|| RuntimeClassRefusal::NotFound(name.to_string()))?),
    };
    match class.and_then(|c| c.overhead) {
        Some(overhead) => {
            let fixed = overhead.pod_fixed.unwrap_or_default();
            if spec.overhead.as_ref().is_some_and(|own| !same_resources(own, &fixed)) {
                return Err(RuntimeClassRefusal::OverheadMismatch);
            }
            spec.overhead = (!fixed.is_empty()).then_some(fixed);
            Ok(())
        }
        None if spec.overhead.is_some() => Err(RuntimeClassRefusal::OverheadWithoutClass),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn classes(name: &str) -> Option<RuntimeClass> {
        let class = match name {
            "alt" => json!({"metadata": {"name": "alt"}, "handler": "runc-alt"}),
            "vm" => json!({"metadata": {"name": "vm"}, "handler": "kata",
                "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}}}),
            _ => return None,
        };
        Some(serde_json::from_value(class).unwrap())
    }

    fn pod(class: Option<&str>, overhead: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"runtimeClassName": class, "overhead": overhead, "containers": []}}))
        .unwrap()
    }

    fn overhead(p: &Pod) -> Option<BTreeMap<String, String>> {
        let o = p.spec.as_ref()?.overhead.as_ref()?;
        Some(o.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
    }

    #[test]
    fn the_classes_overhead_is_set_on_the_pod() {
        let mut p = pod(Some("vm"), json!(null));
        admit_runtime_class_of(&mut p, classes).unwrap();
        let want = [("cpu", "250m"), ("memory", "120Mi")].map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(overhead(&p), Some(BTreeMap::from(want)));

        let mut p = pod(Some("alt"), json!(null));
        admit_runtime_class_of(&mut p, classes).unwrap();
        assert_eq!(overhead(&p), None);
    }

    #[test]
    fn a_pods_own_overhead_must_be_its_classes_by_value() {
        let mut same = pod(Some("vm"), json!({"cpu": "0.25", "memory": "120Mi"}));
        assert_eq!(admit_runtime_class_of(&mut same, classes), Ok(()));

        let mut other = pod(Some("vm"), json!({"cpu": "1"}));
        let err = admit_runtime_class_of(&mut other, classes).unwrap_err();
        assert_eq!(err.to_string(), "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead");

        for class in [Some("alt"), None] {
            let mut p = pod(class, json!({"cpu": "1"}));
            let err = admit_runtime_class_of(&mut p, classes).unwrap_err();
            assert_eq!(
                err.to_string(),
                "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
            );
        }
    }

    #[test]
    fn an_unknown_class_is_refused() {
        let mut p = pod(Some("gvisor"), json!(null));
        let err = admit_runtime_class_of(&mut p, classes).unwrap_err();
        assert_eq!(err.to_string(), "pod rejected: RuntimeClass \"gvisor\" not found");
        assert_eq!(
            err.field_error().to_string(),
            "spec.runtimeClassName: Forbidden: pod rejected: RuntimeClass \"gvisor\" not found"
        );
    }
}
