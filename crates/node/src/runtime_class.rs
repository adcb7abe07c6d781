//! A pod's RuntimeClass as the kubelet's runtime class manager resolves it
//! (`pkg/kubelet/runtimeclass`): the CRI runtime handler its sandbox is made with. (The class's
//! overhead is set on the pod at admission: `podwright_api::runtime_class_admission`.)

use crate::objects::Objects;
use k8s_openapi::api::core::v1::Pod;
use podwright_api::go;
use podwright_runtime::RuntimeError;

/// The pod names a RuntimeClass that does not exist. Worded as the API's NotFound error the
/// kubelet's lister returns, which ends up in the `FailedCreatePodSandBox` event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("runtimeclasses.node.k8s.io {} not found", go::quote(.0))]
pub struct NotFound(pub String);

fn class_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.runtime_class_name.as_deref().filter(|n| !n.is_empty())
}

/// The runtime handler for the pod's sandbox: the empty (default) handler without a
/// `runtimeClassName`, else its class's `handler`.
pub fn runtime_handler(objects: &dyn Objects, pod: &Pod) -> Result<String, NotFound> {
    let Some(name) = class_name(pod) else { return Ok(String::new()) };
    objects.runtime_class(name).map(|rc| rc.handler).ok_or_else(|| NotFound(name.to_string()))
}

/// The runtime refused the sandbox for want of the handler (containerd's `no runtime for "x"
/// is configured`).
pub fn handler_missing(e: &RuntimeError) -> bool {
    matches!(e, RuntimeError::Failed(m) if m.contains("no runtime for") && m.contains("is configured"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::FixedObjects;
    use k8s_openapi::api::node::v1::RuntimeClass;
    use serde_json::json;

    fn objects() -> FixedObjects {
        let classes: Vec<RuntimeClass> = [
            json!({"metadata": {"name": "alt"}, "handler": "runc-alt"}),
            json!({"metadata": {"name": "vm"}, "handler": "kata", "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}}}),
        ]
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect();
        FixedObjects::default().with_runtime_classes(classes)
    }

    fn pod(class: Option<&str>) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p"}, "spec": {"runtimeClassName": class, "containers": []}}),
        )
        .unwrap()
    }

    #[test]
    fn the_handler_is_the_classes_and_the_default_without_one() {
        let objects = objects();
        assert_eq!(runtime_handler(&objects, &pod(Some("alt"))).unwrap(), "runc-alt");
        assert_eq!(runtime_handler(&objects, &pod(None)).unwrap(), "");
        assert_eq!(runtime_handler(&objects, &pod(Some(""))).unwrap(), "");
        let err = runtime_handler(&objects, &pod(Some("gvisor"))).unwrap_err();
        assert_eq!(err.to_string(), "runtimeclasses.node.k8s.io \"gvisor\" not found");
    }
}
