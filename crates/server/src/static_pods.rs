//! The static pods of `serve` with their mirror pods in the local API's store: the
//! [`StaticPodHost`] of the static pods' state machine (`podwright_node::static_pods`), which
//! cluster mode shares with its own host over the API server.

use crate::mirror::{NodeRef, mirror_object, mirrored_uid};
use crate::node_link::NodeLink;
use crate::resources::Resource;
use crate::store::Store;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use podwright_api::go;
use podwright_node::static_pods::StaticPodHost;
use std::collections::BTreeSet;
use std::sync::Arc;

pub use podwright_node::static_pods::StaticPods;

/// The static pods of the local API: run by the node through the API's [`NodeLink`], mirrored
/// in the store.
pub fn static_pods(store: Arc<Store>, link: Arc<NodeLink>, node_name: &str) -> StaticPods {
    let clock = *store.clock();
    StaticPods::new(Box::new(StoreMirrors { store, link, node: crate::mirror::node_ref(node_name) }), clock)
}

struct StoreMirrors {
    store: Arc<Store>,
    link: Arc<NodeLink>,
    node: NodeRef,
}

fn names(pod: &Pod) -> (&str, &str) {
    let m = &pod.metadata;
    (m.namespace.as_deref().unwrap_or_default(), m.name.as_deref().unwrap_or_default())
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

impl StaticPodHost for StoreMirrors {
    fn run(&self, pod: Pod) {
        self.link.upsert(pod);
    }

    /// The mirror goes once the pod has stopped: the status sink removes the object of a
    /// deleted pod when it finishes.
    fn stop(&self, pod: &Pod, grace: i64) {
        let u = uid(pod);
        if self.link.delete(u, grace) {
            // Finished already: no status is to come.
            let (ns, name) = names(pod);
            let _ = self.store.delete_if(Resource::Pods, ns, name, |o| mirrored_uid(o) == Some(u));
        }
    }

    fn ensure_mirror(&self, pod: &Pod, status: Option<PodStatus>) -> Result<(), String> {
        let (ns, name) = names(pod);
        let u = uid(pod);
        if let Ok(obj) = self.store.get(Resource::Pods, ns, name) {
            match mirrored_uid(&obj) {
                Some(m) if m == u => return Ok(()),
                Some(stale) => {
                    let stale = stale.to_string();
                    let _ = self.store.delete_if(Resource::Pods, ns, name, |o| mirrored_uid(o) == Some(&stale));
                }
                None => return Err(format!("pods {} already exists and is not a mirror pod", go::quote(name))),
            }
        }
        if self.store.get(Resource::Namespaces, "", ns).is_err() {
            return Err(format!("namespaces {} not found", go::quote(ns)));
        }
        self.store.create(Resource::Pods, mirror_object(pod, &self.node, status)).map(drop).map_err(|e| e.message)
    }

    fn delete_orphaned_mirrors(&self, known: &BTreeSet<String>) {
        let (pods, _) = self.store.list(Resource::Pods, None);
        for obj in pods {
            let Some(m) = mirrored_uid(&obj) else { continue };
            if known.contains(m) {
                continue;
            }
            let ns = crate::store::meta_str(&obj, "namespace").unwrap_or_default();
            let name = crate::store::meta_str(&obj, "name").unwrap_or_default();
            tracing::info!(pod = name, namespace = ns, "deleting a mirror pod whose static pod is gone");
            let _ = self.store.delete_if(Resource::Pods, ns, name, |o| mirrored_uid(o) == Some(m));
        }
    }

    fn last_status(&self, pod: &Pod) -> Option<PodStatus> {
        let (ns, name) = names(pod);
        let obj = self.store.get(Resource::Pods, ns, name).ok()?;
        if mirrored_uid(&obj) != Some(uid(pod)) {
            return None;
        }
        serde_json::from_value::<PodStatus>(obj["status"].clone()).ok()
    }
}

#[cfg(test)]
mod tests;
