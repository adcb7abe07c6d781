//! The static pods between the file source and the node, with their mirror pods, as the
//! kubelet's pod config and mirror-pod handling do it (`pkg/kubelet/config/config.go`,
//! `pkg/kubelet/kubelet.go`, `pkg/kubelet/pod/mirror_client.go`). The same in both modes; what
//! runs the pods and where the mirrors live (the local API's store, a cluster's API server) is
//! the mode's [`StaticPodHost`]:
//!
//! - Each reading of the static-pod path is the whole set. A new UID is a new pod; a UID gone
//!   is a pod removed: stopped with its own grace period, then removed from the node. A changed
//!   file has a new UID, so its old pod stops and the new one starts.
//! - Two pods with one full name: the second in file order is ignored, with a Warning event
//!   `FailedValidation`. A new pod whose name is still held by a pod that is stopping starts
//!   only once that pod has been removed (`allowStaticPodStart`).
//! - Each running static pod has a mirror pod with its status. Deleting the mirror never stops
//!   the pod: it is made again. A mirror no static pod stands behind (its file removed while
//!   podwright was down) is deleted. A mirror whose static pod is stopping stays until the pod
//!   has stopped.

use crate::events::{EventSink, EventType};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use podwright_api::annotations::{CONFIG_SEEN, FILE_SOURCE};
use podwright_api::go;
use podwright_runtime::Clock;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// What the static pods drive: the node that runs them, and the API that shows their mirrors.
pub trait StaticPodHost: Send + Sync {
    /// Hands a new pod to the node, or a new version of a pod it runs.
    fn run(&self, pod: Pod);
    /// Stops `pod` (gone from the path) with `grace` seconds; it leaves the node once stopped,
    /// its mirror with it, and [`StaticPods::removed`] is then to be called.
    fn stop(&self, pod: &Pod, grace: i64);
    /// Makes `pod`'s mirror unless it is there, replacing one of another version of the pod
    /// (another config hash); `status` is what a new mirror shows until the node reports one.
    fn ensure_mirror(&self, pod: &Pod, status: Option<PodStatus>) -> Result<(), String>;
    /// Deletes every mirror whose config hash is not in `known` (`deleteOrphanedMirrorPods`).
    fn delete_orphaned_mirrors(&self, known: &BTreeSet<String>);
    /// The status a mirror of `pod` left by an earlier run holds, for the node to go on from.
    fn last_status(&self, pod: &Pod) -> Option<PodStatus>;
}

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

/// The static pods the node runs and the mirror pods shown for them.
pub struct StaticPods {
    host: Box<dyn StaticPodHost>,
    clock: Clock,
    state: Mutex<State>,
}

impl StaticPods {
    pub fn new(host: Box<dyn StaticPodHost>, clock: Clock) -> Self {
        StaticPods { host, clock, state: Mutex::default() }
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

    /// The static pod `uid` if it runs (not stopping).
    pub fn running(&self, uid: &str) -> Option<Pod> {
        self.lock().running.get(uid).cloned()
    }

    /// One reading of the static-pod path: every pod it holds, in file order.
    pub fn set(&self, pods: Vec<Pod>, events: &dyn EventSink) {
        let now = self.clock.now();
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
        let mut started = Vec::new();
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
                started.push(self.start(&mut st, pod));
            }
        }
        self.ensure_mirrors(&started);
        let known: BTreeSet<String> = st.running.keys().chain(st.stopping.keys()).cloned().collect();
        self.host.delete_orphaned_mirrors(&known);
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
            self.host.run(new.clone());
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

    /// Hands a pod to the node, which starts it at once; its mirror is made by
    /// [`Self::ensure_mirrors`] once every pod of the reading has been handed over, so that no pod
    /// waits for the mirrors of the pods before it to be committed. A mirror left by an earlier
    /// run of the same static pod carries the status it last reported, which the node goes on
    /// from. Returns the pod, whose mirror is to be made.
    fn start(&self, st: &mut State, pod: Pod) -> Pod {
        let mut given = pod.clone();
        given.status = self.host.last_status(&pod);
        self.host.run(given);
        st.running.insert(uid(&pod).to_string(), pod.clone());
        pod
    }

    /// Gives each pod just started its mirror.
    fn ensure_mirrors(&self, started: &[Pod]) {
        for pod in started {
            if let Err(why) = self.host.ensure_mirror(pod, None) {
                let (ns, name) = full_name(pod);
                tracing::warn!(pod = %name, namespace = %ns, "no mirror pod for the static pod: {why}");
            }
        }
    }

    /// Stops a pod gone from the path; its mirror goes once it has stopped.
    fn stop(&self, st: &mut State, pod: Pod) {
        // The pod's own grace period, as for any pod its source removes.
        let grace = pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds).unwrap_or(30);
        self.host.stop(&pod, grace);
        st.stopping.insert(uid(&pod).to_string(), full_name(&pod));
    }

    /// The node has removed pod `uid`: a pod waiting for its name starts now.
    pub fn removed(&self, uid_gone: &str) {
        let mut st = self.lock();
        if st.stopping.remove(uid_gone).is_none() {
            return;
        }
        let mut waiting = std::mem::take(&mut st.waiting);
        let mut started = Vec::new();
        waiting.retain(|pod| {
            if st.name_taken(&full_name(pod)) || st.stopping.contains_key(uid(pod)) {
                return true;
            }
            started.push(self.start(&mut st, pod.clone()));
            false
        });
        st.waiting = waiting;
        self.ensure_mirrors(&started);
    }

    /// A mirror pod was deleted through the API: the static pod goes on, and its mirror is made
    /// again at once with the status the deleted one had (the kubelet makes it again at its
    /// next sync).
    pub fn mirror_deleted(&self, uid: &str, status: Option<PodStatus>) {
        let st = self.lock();
        let Some(pod) = st.running.get(uid) else { return };
        if let Err(why) = self.host.ensure_mirror(pod, status) {
            tracing::warn!(pod = %full_name(pod).1, "the deleted mirror pod was not made again: {why}");
        }
    }

    /// The node reported `status` for static pod `uid` and no mirror holds it (its namespace
    /// was made later, or a deletion raced): make one.
    pub fn mirror_missing(&self, uid: &str, status: &PodStatus) {
        let st = self.lock();
        let Some(pod) = st.running.get(uid) else { return };
        if let Err(why) = self.host.ensure_mirror(pod, Some(status.clone())) {
            tracing::debug!(pod = %full_name(pod).1, "no mirror pod: {why}");
        }
    }
}

/// A pod read again keeps the time it was first seen.
fn keep_seen(old: &Pod, new: &mut Pod) {
    if let Some(seen) = old.metadata.annotations.as_ref().and_then(|a| a.get(CONFIG_SEEN)) {
        new.metadata.annotations.get_or_insert_default().insert(CONFIG_SEEN.into(), seen.clone());
    }
}
