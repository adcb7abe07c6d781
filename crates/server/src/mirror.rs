//! Mirror pods in the local API's store: the objects of [`podwright_node::static_pods::mirror`]
//! (the API's copy of a static pod, `pkg/kubelet/pod/mirror_client.go`) as stored JSON, and the
//! local Node that owns them.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use podwright_api::annotations::CONFIG_MIRROR;
use podwright_node::static_pods::mirror::mirror_pod;
use podwright_node::static_pods::uid::Fnv128a;
use serde_json::{Value, json};

pub use podwright_node::static_pods::mirror::NodeRef;

/// The config hash (the static pod's UID) a pod object mirrors, if it is a mirror pod.
pub fn mirrored_uid(obj: &Value) -> Option<&str> {
    obj.get("metadata")?.get("annotations")?.get(CONFIG_MIRROR)?.as_str()
}

/// The UID the node runs a pod object's containers under: the static pod's for a mirror pod,
/// the object's own otherwise (logs, exec and timelines are found by it).
pub fn node_uid(obj: &Value) -> &str {
    mirrored_uid(obj).or_else(|| crate::store::meta_str(obj, "uid")).unwrap_or_default()
}

/// The local API's Node, which owns mirror pods (and is served read-only,
/// [`crate::usage::node_object`]); its UID is derived from the name so that it is the same in
/// every run.
pub fn node_ref(name: &str) -> NodeRef {
    let mut h = Fnv128a::new();
    h.write(format!("node:{name}").as_bytes());
    let uid = uuid::Uuid::from_u128(h.value()).to_string();
    NodeRef { name: name.to_string(), uid }
}

/// The mirror pod of static pod `pod` as a stored object, with `status` (Pending when there
/// is none yet), ready to be created: the store gives it its own UID.
pub fn mirror_object(pod: &Pod, node: &NodeRef, status: Option<PodStatus>) -> Value {
    let mut obj = serde_json::to_value(mirror_pod(pod, node, status)).unwrap_or(Value::Null);
    obj["kind"] = json!("Pod");
    obj["apiVersion"] = json!("v1");
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use podwright_api::annotations::CONFIG_HASH;

    #[test]
    fn a_mirror_pod_names_its_static_pod_and_its_node() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-n", "namespace": "default", "uid": "abc", "annotations": {CONFIG_HASH: "abc"}},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]},
        }))
        .unwrap();
        let node = node_ref("n");
        let m = mirror_object(&pod, &node, None);
        assert_eq!(mirrored_uid(&m), Some("abc"));
        assert_eq!(m["metadata"]["uid"], Value::Null, "the store gives the mirror a UID of its own");
        assert_eq!(
            m["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": node.uid, "controller": true}])
        );
        assert_eq!(m["status"]["phase"], "Pending");
        assert_eq!(node.uid, node_ref("n").uid);
        assert_eq!(node.uid.len(), 36);
        let mut stored = m.clone();
        stored["metadata"]["uid"] = json!("mirror-uid");
        assert_eq!(node_uid(&stored), "abc");
        assert_eq!(node_uid(&json!({"metadata": {"uid": "api-pod"}})), "api-pod");
    }
}
