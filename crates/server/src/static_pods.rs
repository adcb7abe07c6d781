//! The static pods of `serve` between the file source and the node, as the kubelet's pod config
//! and mirror-pod handling do it (`pkg/kubelet/config/config.go`, `pkg/kubelet/kubelet.go`,
//! `pkg/kubelet/pod/mirror_client.go`):
//!
//! - Each reading of the static-pod path is the whole set. A new UID is a new pod; a UID gone
//!   is a pod removed: stopped with its own grace period, then removed from the node. A changed
//!   file has a new UID, so its old pod stops and the new one starts.
//! - Two pods with one full name: the second in file order is ignored, with a Warning event
//!   `FailedValidation`. A new pod whose name is still held by a pod that is stopping starts
//!   only once that pod has been removed (`allowStaticPodStart`).
//! - Each running static pod has a mirror pod in the API with its status. Deleting the mirror
//!   never stops the pod: it is made again at once. A mirror no static pod stands behind (its
//!   file removed while podwright was down) is deleted. A mirror whose static pod is stopping
//!   stays until the pod has stopped.

use crate::mirror::{NodeRef, mirror_object, mirrored_uid};
use crate::node_link::NodeLink;
use crate::resources::Resource;
use crate::store::Store;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use podwright_api::annotations::{CONFIG_SEEN, FILE_SOURCE};
use podwright_api::go;
use podwright_node::{EventSink, EventType};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// (namespace, name).
type FullName = (String, String);

fn full_name(pod: &Pod) -> FullName {
    let m = &pod.metadata;
    (m.namespace.clone().unwrap_or_default(), m.name.clone().unwrap_or_default())
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

#[derive(Default)]
struct State {
    /// Given to the node, by UID.
    running: BTreeMap<String, Pod>,
    /// Gone from the path and stopping, until the node has removed them.
    stopping: BTreeMap<String, FullName>,
    /// New pods whose name a stopping pod still holds, in file order.
    waiting: Vec<Pod>,
    /// UIDs ignored as duplicates at the last reading (said once each time they appear).
    duplicates: BTreeSet<String>,
}

impl State {
    fn name_taken(&self, name: &FullName) -> bool {
        self.running.values().any(|p| full_name(p) == *name) || self.stopping.values().any(|n| n == name)
    }
}

/// The static pods the node runs and the mirror pods the API shows for them.
pub struct StaticPods {
    store: Arc<Store>,
    link: Arc<NodeLink>,
    node: NodeRef,
    state: Mutex<State>,
}

impl StaticPods {
    pub fn new(store: Arc<Store>, link: Arc<NodeLink>, node_name: &str) -> Self {
        StaticPods { store, link, node: NodeRef::new(node_name), state: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The UIDs of every static pod the node runs or is to run.
    pub fn uids(&self) -> BTreeSet<String> {
        let st = self.lock();
        st.running
            .keys()
            .chain(st.stopping.keys())
            .cloned()
            .chain(st.waiting.iter().map(|p| uid(p).to_string()))
            .collect()
    }

    /// One reading of the static-pod path: every pod it holds, in file order.
    pub fn set(&self, pods: Vec<Pod>, events: &dyn EventSink) {
        let now = self.store.clock().now();
        let mut st = self.lock();
        let mut names = BTreeSet::new();
        let mut duplicates = BTreeSet::new();
        let mut wanted = Vec::with_capacity(pods.len());
        for pod in pods {
            if names.insert(full_name(&pod)) {
                wanted.push(pod);
                continue;
            }
            let (ns, name) = full_name(&pod);
            if !st.duplicates.contains(uid(&pod)) {
                tracing::warn!(pod = %name, namespace = %ns, "a static pod of the same name comes from an earlier file; ignored");
                let message = format!(
                    "Error validating pod {name}_{ns}({}) from {FILE_SOURCE} due to duplicate pod name {}, ignoring",
                    uid(&pod),
                    go::quote(&name)
                );
                events.record(&pod, None, EventType::Warning, "FailedValidation", message, now);
            }
            duplicates.insert(uid(&pod).to_string());
        }
        st.duplicates = duplicates;
        let wanted_uids: BTreeSet<String> = wanted.iter().map(|p| uid(p).to_string()).collect();

        let gone: Vec<String> = st.running.keys().filter(|u| !wanted_uids.contains(*u)).cloned().collect();
        for u in gone {
            if let Some(pod) = st.running.remove(&u) {
                self.stop(&mut st, pod);
            }
        }
        st.waiting.retain(|p| wanted_uids.contains(uid(p)));

        let seen = now.to_string();
        for mut pod in wanted {
            let u = uid(&pod).to_string();
            if let Some(old) = st.running.get(&u) {
                if let Some(new) = self.changed_in_place(old, pod) {
                    st.running.insert(u, new);
                }
                continue;
            }
            if let Some(w) = st.waiting.iter_mut().find(|w| uid(w) == u) {
                keep_seen(w, &mut pod);
                *w = pod;
                continue;
            }
            // Newly seen by this process (`recordFirstSeenTime`).
            pod.metadata.annotations.get_or_insert_default().insert(CONFIG_SEEN.into(), seen.clone());
            if st.name_taken(&full_name(&pod)) || st.stopping.contains_key(&u) {
                st.waiting.push(pod);
            } else {
                self.start(&mut st, pod);
            }
        }
        self.delete_orphaned_mirrors(&st);
    }

    /// A pod whose file changed but kept its UID (a UID given in the file): applied when it
    /// changes only what a pod update may change, as the node takes an update; otherwise the pod
    /// goes on as it was, and the file's version is taken as read so that it is said once.
    fn changed_in_place(&self, old: &Pod, mut new: Pod) -> Option<Pod> {
        keep_seen(old, &mut new);
        if new == *old {
            return None;
        }
        let errs = podwright_api::validation::validate_pod_update(&new, old);
        if errs.is_empty() {
            self.link.upsert(new.clone());
        } else {
            let why: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            tracing::warn!(
                pod = %full_name(&new).1,
                "a static pod's file changed more than a pod update may while keeping its uid; the pod runs as it was (remove the uid from the file to replace the pod): {}",
                why.join(", ")
            );
        }
        Some(new)
    }

    /// Hands a pod to the node and gives it its mirror. A mirror left by an earlier run of the
    /// same static pod carries the status it last reported, which the node goes on from.
    fn start(&self, st: &mut State, pod: Pod) {
        let (ns, name) = full_name(&pod);
        let u = uid(&pod).to_string();
        let mut given = pod.clone();
        if let Ok(obj) = self.store.get(Resource::Pods, &ns, &name)
            && mirrored_uid(&obj) == Some(u.as_str())
        {
            given.status = serde_json::from_value::<PodStatus>(obj["status"].clone()).ok();
        }
        self.link.upsert(given);
        if let Err(why) = self.ensure_mirror(&pod, None) {
            tracing::warn!(pod = %name, namespace = %ns, "no mirror pod for the static pod: {why}");
        }
        st.running.insert(u, pod);
    }

    /// Stops a pod gone from the path; its mirror goes once it has stopped (the status sink
    /// removes the object of a deleted pod when it finishes).
    fn stop(&self, st: &mut State, pod: Pod) {
        let (ns, name) = full_name(&pod);
        let u = uid(&pod).to_string();
        // The pod's own grace period, as for any pod its source removes.
        let grace = pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds).unwrap_or(30);
        if self.link.delete(&u, grace) {
            // Finished already: no status is to come.
            let _ = self.store.delete_if(Resource::Pods, &ns, &name, |o| mirrored_uid(o) == Some(u.as_str()));
        }
        st.stopping.insert(u, (ns, name));
    }

    /// The node has removed pod `uid`: a pod waiting for its name starts now.
    pub fn removed(&self, uid_gone: &str) {
        let mut st = self.lock();
        if st.stopping.remove(uid_gone).is_none() {
            return;
        }
        let mut waiting = std::mem::take(&mut st.waiting);
        waiting.retain(|pod| {
            if st.name_taken(&full_name(pod)) || st.stopping.contains_key(uid(pod)) {
                return true;
            }
            self.start(&mut st, pod.clone());
            false
        });
        st.waiting = waiting;
    }

    /// A mirror pod was deleted through the API: the static pod goes on, and its mirror is made
    /// again at once with the status the deleted one had (the kubelet makes it again at its
    /// next sync).
    pub fn mirror_deleted(&self, uid: &str, status: &Value) {
        let st = self.lock();
        let Some(pod) = st.running.get(uid) else { return };
        if let Err(why) = self.ensure_mirror(pod, serde_json::from_value(status.clone()).ok()) {
            tracing::warn!(pod = %full_name(pod).1, "the deleted mirror pod was not made again: {why}");
        }
    }

    /// The node reported `status` for static pod `uid` and no mirror holds it (its namespace
    /// was made later, or a deletion raced): make one.
    pub fn mirror_missing(&self, uid: &str, status: &PodStatus) {
        let st = self.lock();
        let Some(pod) = st.running.get(uid) else { return };
        if let Err(why) = self.ensure_mirror(pod, Some(status.clone())) {
            tracing::debug!(pod = %full_name(pod).1, "no mirror pod: {why}");
        }
    }

    /// Creates the mirror of `pod` unless it exists; a mirror of another static pod of that name
    /// (an older version) is replaced.
    fn ensure_mirror(&self, pod: &Pod, status: Option<PodStatus>) -> Result<(), String> {
        let (ns, name) = full_name(pod);
        let u = uid(pod);
        if let Ok(obj) = self.store.get(Resource::Pods, &ns, &name) {
            match mirrored_uid(&obj) {
                Some(m) if m == u => return Ok(()),
                Some(stale) => {
                    let stale = stale.to_string();
                    let _ = self.store.delete_if(Resource::Pods, &ns, &name, |o| mirrored_uid(o) == Some(&stale));
                }
                None => return Err(format!("pods {} already exists and is not a mirror pod", go::quote(&name))),
            }
        }
        if self.store.get(Resource::Namespaces, "", &ns).is_err() {
            return Err(format!("namespaces {} not found", go::quote(&ns)));
        }
        self.store.create(Resource::Pods, mirror_object(pod, &self.node, status)).map(drop).map_err(|e| e.message)
    }

    /// Deletes every mirror pod no static pod stands behind (`deleteOrphanedMirrorPods`).
    fn delete_orphaned_mirrors(&self, st: &State) {
        let (pods, _) = self.store.list(Resource::Pods, None);
        for obj in pods {
            let Some(m) = mirrored_uid(&obj) else { continue };
            if st.running.contains_key(m) || st.stopping.contains_key(m) {
                continue;
            }
            let ns = crate::store::meta_str(&obj, "namespace").unwrap_or_default();
            let name = crate::store::meta_str(&obj, "name").unwrap_or_default();
            tracing::info!(pod = name, namespace = ns, "deleting a mirror pod whose static pod is gone");
            let _ = self.store.delete_if(Resource::Pods, ns, name, |o| mirrored_uid(o) == Some(m));
        }
    }
}

/// A pod read again keeps the time it was first seen.
fn keep_seen(old: &Pod, new: &mut Pod) {
    if let Some(seen) = old.metadata.annotations.as_ref().and_then(|a| a.get(CONFIG_SEEN)) {
        new.metadata.annotations.get_or_insert_default().insert(CONFIG_SEEN.into(), seen.clone());
    }
}

#[cfg(test)]
mod tests;
