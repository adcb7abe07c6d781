//! Mirror pods: the API's copy of a static pod (`pkg/kubelet/pod/mirror_client.go`), the same
//! in both modes. It carries the static pod's config hash as `kubernetes.io/config.mirror` and
//! the Node as its one controller, gets a UID of its own from the API, and shows the static
//! pod's status; the node runs the static pod, never the mirror's spec.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use podwright_api::annotations::{CONFIG_HASH, CONFIG_MIRROR};

/// The Node that owns mirror pods: its name and UID (a cluster's Node's own; the local API's
/// is derived from the name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    pub name: String,
    pub uid: String,
}

/// The config hash (the static pod's UID) a pod mirrors, if it is a mirror pod.
pub fn mirrored_hash(pod: &Pod) -> Option<&str> {
    pod.metadata.annotations.as_ref()?.get(CONFIG_MIRROR).map(String::as_str)
}

/// The config hash of static pod `pod`: what its mirror carries.
pub fn config_hash(pod: &Pod) -> String {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_HASH))
        .cloned()
        .or_else(|| pod.metadata.uid.clone())
        .unwrap_or_default()
}

/// The mirror pod of static pod `pod`, with `status` (Pending when there is none yet), ready to
/// be created: the API gives it its own UID. Its one owner reference is the Node, as the
/// controller, without `blockOwnerDeletion` (NodeRestriction lets a node create nothing else).
pub fn mirror_pod(pod: &Pod, node: &NodeRef, status: Option<PodStatus>) -> Pod {
    let mut metadata = pod.metadata.clone();
    metadata.annotations.get_or_insert_default().insert(CONFIG_MIRROR.into(), config_hash(pod));
    metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node.name.clone(),
        uid: node.uid.clone(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    metadata.uid = None;
    metadata.resource_version = None;
    metadata.creation_timestamp = None;
    metadata.generation = Some(1);
    let status = status.unwrap_or_else(|| PodStatus { phase: Some("Pending".into()), ..Default::default() });
    Pod { metadata, spec: pod.spec.clone(), status: Some(status) }
}

/// Whether `mirror` is the mirror of static pod `pod` (`IsMirrorPodOf`): the same name and
/// namespace, and its config hash.
pub fn is_mirror_of(mirror: &Pod, pod: &Pod) -> bool {
    mirror.metadata.name == pod.metadata.name
        && mirror.metadata.namespace == pod.metadata.namespace
        && mirrored_hash(mirror) == Some(config_hash(pod).as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_mirror_carries_the_config_hash_and_its_node_and_is_told_from_other_versions() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-n", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                "annotations": {CONFIG_HASH: "u1"}},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]},
        }))
        .unwrap();
        let node = NodeRef { name: "n".into(), uid: "node-uid".into() };
        let mirror = mirror_pod(&pod, &node, None);
        assert_eq!(mirrored_hash(&mirror), Some("u1"));
        assert_eq!(mirror.metadata.uid, None, "the API gives it a UID of its own");
        assert_eq!(mirror.metadata.resource_version, None);
        let owner = &mirror.metadata.owner_references.as_ref().unwrap()[..];
        assert_eq!(owner.len(), 1);
        assert_eq!(
            (owner[0].kind.as_str(), owner[0].uid.as_str(), owner[0].controller),
            ("Node", "node-uid", Some(true))
        );
        assert_eq!(owner[0].block_owner_deletion, None, "NodeRestriction refuses blockOwnerDeletion");
        assert!(is_mirror_of(&mirror, &pod));

        let mut v2 = pod.clone();
        v2.metadata.annotations.as_mut().unwrap().insert(CONFIG_HASH.into(), "u2".into());
        assert!(!is_mirror_of(&mirror, &v2), "another version of the pod");
        let mut renamed = pod.clone();
        renamed.metadata.name = Some("other-n".into());
        assert!(!is_mirror_of(&mirror, &renamed));
        assert_eq!(mirrored_hash(&pod), None, "a static pod is no mirror");
    }
}
