//! The node's static pods in cluster mode: the [`StaticPodHost`] of the static pods' state
//! machine (`podwright_node::static_pods`, the same as the local API's), over the API server.
//! The status manager runs them on the node's workers and keeps their mirror pods as the
//! kubelet's `syncPod` and mirror client do (`pkg/kubelet/kubelet.go`,
//! `pkg/kubelet/pod/mirror_client.go`):
//!
//! - every running static pod has a mirror: `POST` of the pod with
//!   `kubernetes.io/config.mirror: <config hash>` and the Node (its UID read from the API
//!   server) as its one controller; on AlreadyExists the mirror there is taken when its hash is
//!   the pod's, and deleted and made again otherwise;
//! - a mirror marked for deletion (`kubectl delete pod`) or of another version of the pod is
//!   deleted (grace 0, its UID as precondition) and made again: the static pod never stops;
//! - the static pod's status is written into its mirror with the same patch as an API pod's,
//!   the mirror's UID as precondition;
//! - a static pod gone from its path stops; once it has left the node its mirror is deleted;
//!   a mirror of no static pod the node knows is deleted;
//! - a mirror the API server refuses (NodeRestriction's: a pod that references a Secret, a
//!   ConfigMap, a ServiceAccount or a claim) is said once in the log and a Warning event; the
//!   static pod runs without it, and the mirror is tried again every minute.

use super::{Heard, StatusManager, gone_error, status_patch, summary};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, Pod, PodStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use podwright_node::EventType;
use podwright_node::static_pods::StaticPodHost;
use podwright_node::static_pods::mirror::{NodeRef, config_hash, is_mirror_of, mirror_pod, mirrored_hash};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use tokio::sync::mpsc;

/// How long after a refusal a mirror is tried again.
const MIRROR_RETRY: SignedDuration = SignedDuration::from_secs(60);
/// The reason of the event that says a static pod has no mirror.
const MIRROR_REFUSED: &str = "FailedCreateMirrorPod";

/// Why a mirror was not made: the API server refused it (tried again after [`MIRROR_RETRY`]),
/// or could not be asked (tried again at the next sync).
enum NoMirror {
    Refused(String),
    Failed(String),
}

impl NoMirror {
    fn of(e: &kube::Error) -> NoMirror {
        match e {
            kube::Error::Api(s) if s.code < 500 && s.code != 429 => NoMirror::Refused(said(e)),
            e => NoMirror::Failed(said(e)),
        }
    }
}

/// The static pods' way to the node and the API server: the status manager.
pub struct ClusterMirrors {
    tx: mpsc::UnboundedSender<Heard>,
    /// The mirror pods on the API server when the node started, by config hash: the statuses
    /// the static pods go on from.
    listed: Mutex<HashMap<String, Pod>>,
}

impl ClusterMirrors {
    pub(super) fn new(tx: mpsc::UnboundedSender<Heard>, listed: Vec<Pod>) -> Self {
        let mut by_hash = HashMap::new();
        for mirror in listed {
            let Some(hash) = mirrored_hash(&mirror).map(str::to_string) else { continue };
            // Known to the manager before any static pod is: it takes them rather than make new.
            let _ = tx.send(Heard::MirrorObserved(Box::new(mirror.clone())));
            by_hash.insert(hash, mirror);
        }
        ClusterMirrors { tx, listed: Mutex::new(by_hash) }
    }

    fn send(&self, heard: Heard) {
        // The manager lives as long as the node.
        let _ = self.tx.send(heard);
    }
}

impl StaticPodHost for ClusterMirrors {
    fn run(&self, pod: Pod) {
        self.send(Heard::StaticRun(Box::new(pod)));
    }

    fn stop(&self, pod: &Pod, grace: i64) {
        self.send(Heard::StaticStop(pod.metadata.uid.clone().unwrap_or_default(), grace));
    }

    /// The manager keeps the mirror of every running static pod, made again whenever it goes.
    fn ensure_mirror(&self, _pod: &Pod, _status: Option<PodStatus>) -> Result<(), String> {
        Ok(())
    }

    fn delete_orphaned_mirrors(&self, known: &BTreeSet<String>) {
        self.send(Heard::StaticKnown(known.clone()));
    }

    fn last_status(&self, pod: &Pod) -> Option<PodStatus> {
        let listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        listed.get(&config_hash(pod)).filter(|m| is_mirror_of(m, pod)).and_then(|m| m.status.clone())
    }
}

/// What the status manager knows of a static pod.
pub(super) struct StaticTracked {
    /// Its newest version.
    pod: Pod,
    /// Gone from its path: stopping, then removed with its mirror.
    stopping: bool,
    /// The node has no worker for it (stopped before it started): nothing to wait for.
    not_running: bool,
    /// The last refusal of its mirror (said once), and when to try again.
    refused: Option<(String, Timestamp)>,
}

impl StatusManager {
    /// Takes in a report about static pods or mirrors; returns the UIDs it concerns.
    pub(super) fn hear_static(&mut self, heard: Heard) -> Vec<String> {
        match heard {
            Heard::StaticRun(pod) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                if let Err(e) = self.workers.update((*pod).clone()) {
                    tracing::debug!(%e, uid, "static pod update not applied");
                }
                let mut pod = *pod;
                pod.status = None;
                let t = self.pods.entry(uid.clone()).or_default();
                match t.statics.as_mut() {
                    Some(s) => s.pod = pod,
                    None => t.statics = Some(StaticTracked { pod, stopping: false, not_running: false, refused: None }),
                }
                vec![uid]
            }
            Heard::StaticStop(uid, grace) => {
                let known = self.workers.delete(&uid, Some(grace));
                if let Some(s) = self.pods.get_mut(&uid).and_then(|t| t.statics.as_mut()) {
                    s.stopping = true;
                    s.not_running = !known;
                }
                vec![uid]
            }
            Heard::StaticKnown(known) => {
                self.statics = Some(known);
                self.pods.iter().filter(|(_, t)| t.mirror.is_some()).map(|(u, _)| u.clone()).collect()
            }
            Heard::MirrorObserved(mirror) => {
                let (Some(hash), Some(muid)) = (mirrored_hash(&mirror), mirror.metadata.uid.as_deref()) else {
                    return vec![];
                };
                if self.deleted_mirrors.contains(muid) {
                    return vec![];
                }
                let hash = hash.to_string();
                self.pods.entry(hash.clone()).or_default().mirror = Some(*mirror);
                vec![hash]
            }
            Heard::MirrorGone(mirror) => {
                let (Some(hash), Some(muid)) = (mirrored_hash(&mirror), mirror.metadata.uid.as_deref()) else {
                    return vec![];
                };
                self.deleted_mirrors.remove(muid);
                let hash = hash.to_string();
                let Some(t) = self.pods.get_mut(&hash) else { return vec![] };
                if t.mirror.as_ref().is_some_and(|m| m.metadata.uid.as_deref() == Some(muid)) {
                    t.mirror = None;
                }
                vec![hash]
            }
            Heard::MirrorsListed(listed) => {
                let mut dirty = vec![];
                for (uid, t) in &mut self.pods {
                    let kept =
                        t.mirror.as_ref().and_then(|m| m.metadata.uid.as_ref()).is_none_or(|m| listed.contains(m));
                    if !kept {
                        t.mirror = None;
                        dirty.push(uid.clone());
                    }
                }
                dirty
            }
            _ => vec![],
        }
    }

    /// Brings a static pod's mirror in line with it (or deletes a mirror of no static pod),
    /// and the static pod's removal from the node once it has stopped.
    pub(super) async fn sync_static(&mut self, uid: &str) {
        let Some(t) = self.pods.get(uid) else { return };
        let Some(s) = &t.statics else {
            // A mirror alone: deleted once the static pods are known and it is none of theirs.
            let orphan = self.statics.as_ref().is_some_and(|known| !known.contains(uid));
            if let Some(mirror) = t.mirror.clone().filter(|_| orphan) {
                tracing::info!(pod = ?mirror.metadata.name, "deleting a mirror pod whose static pod is gone");
                self.delete_mirror(uid, &mirror).await;
            }
            if self.pods.get(uid).is_some_and(|t| t.mirror.is_none() && t.latest.is_none()) {
                self.pods.remove(uid);
            }
            return;
        };
        if s.stopping && (t.finished() || s.not_running) && !t.removing {
            self.pods.entry(uid.to_string()).or_default().removing = true;
            let _ = self.removals.send(uid.to_string());
            return;
        }
        if t.removed {
            // Gone from the node: its mirror goes, then the manager forgets it.
            if let Some(mirror) = t.mirror.clone()
                && !self.delete_mirror(uid, &mirror).await
            {
                return;
            }
            self.pods.remove(uid);
            return;
        }
        if !s.stopping {
            self.keep_mirror(uid).await;
        }
        self.write_mirror_status(uid).await;
    }

    /// Deletes a mirror pod (grace 0, its UID as precondition); returns whether it is gone.
    async fn delete_mirror(&mut self, hash: &str, mirror: &Pod) -> bool {
        let ns = mirror.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let name = mirror.metadata.name.clone().unwrap_or_default();
        let muid = mirror.metadata.uid.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: Some(muid.clone()), resource_version: None }),
            ..Default::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => tracing::info!(pod = name, namespace = ns, "mirror pod deleted"),
            // Not there, or another pod of that name now: the one asked for is gone.
            Err(e) if gone_error(&e) => {}
            Err(e) => {
                tracing::warn!(%e, pod = name, "mirror pod not deleted; trying again");
                return false;
            }
        }
        self.deleted_mirrors.insert(muid.clone());
        if let Some(t) = self.pods.get_mut(hash)
            && t.mirror.as_ref().is_some_and(|m| m.metadata.uid.as_deref() == Some(muid.as_str()))
        {
            t.mirror = None;
        }
        true
    }

    /// A running static pod has its mirror: one marked for deletion or of another version goes,
    /// a missing one is made.
    async fn keep_mirror(&mut self, uid: &str) {
        let Some(t) = self.pods.get(uid) else { return };
        let Some(s) = &t.statics else { return };
        let pod = s.pod.clone();
        if let Some(mirror) = t.mirror.clone()
            && (mirror.metadata.deletion_timestamp.is_some() || !is_mirror_of(&mirror, &pod))
        {
            tracing::info!(pod = ?pod.metadata.name, "the mirror pod is being deleted or is not the static pod's; making it again");
            if !self.delete_mirror(uid, &mirror).await {
                return;
            }
        }
        let Some(t) = self.pods.get(uid) else { return };
        let now = self.clock.now();
        let later = t.statics.as_ref().and_then(|s| s.refused.as_ref()).is_some_and(|(_, at)| now < *at);
        if t.mirror.is_some() || later {
            return;
        }
        match self.create_mirror(&pod).await {
            Ok(mirror) => {
                let t = self.pods.entry(uid.to_string()).or_default();
                t.mirror = Some(mirror);
                if let Some(s) = t.statics.as_mut()
                    && s.refused.take().is_some()
                {
                    tracing::info!(pod = ?pod.metadata.name, "the static pod has its mirror pod now");
                }
            }
            Err(NoMirror::Refused(why)) => self.mirror_refused(uid, &pod, why),
            Err(NoMirror::Failed(why)) => {
                tracing::warn!(pod = ?pod.metadata.name, "mirror pod not created; trying again: {why}");
            }
        }
    }

    /// The mirror of `pod` on the API server: made, or the one there if it is the pod's (one of
    /// another version is deleted first).
    async fn create_mirror(&mut self, pod: &Pod) -> Result<Pod, NoMirror> {
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let nodes: Api<Node> = Api::all(self.client.clone());
        let node = nodes.get(&self.node.name).await.map_err(|e| NoMirror::of(&e))?;
        if node.metadata.deletion_timestamp.is_some() {
            return Err(NoMirror::Refused("the Node is being deleted".into()));
        }
        let node = NodeRef { name: self.node.name.clone(), uid: node.metadata.uid.unwrap_or_default() };
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let mirror = mirror_pod(pod, &node, None);
        for _ in 0..2 {
            match api.create(&PostParams::default(), &mirror).await {
                Ok(created) => {
                    tracing::info!(pod = name, namespace = ns, "mirror pod created");
                    return Ok(created);
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    let there = api.get(&name).await.map_err(|e| NoMirror::of(&e))?;
                    if is_mirror_of(&there, pod) && there.metadata.deletion_timestamp.is_none() {
                        return Ok(there);
                    }
                    if mirrored_hash(&there).is_none() {
                        return Err(NoMirror::Refused(format!(
                            "pods \"{name}\" already exists and is not a mirror pod"
                        )));
                    }
                    let stale = mirrored_hash(&there).unwrap_or_default().to_string();
                    self.delete_mirror(&stale, &there).await;
                }
                Err(e) => return Err(NoMirror::of(&e)),
            }
        }
        Err(NoMirror::Failed(format!("pods \"{name}\" already exists")))
    }

    /// The API server refused a static pod's mirror: said once (log and Warning event) until it
    /// changes; tried again later.
    fn mirror_refused(&mut self, uid: &str, pod: &Pod, why: String) {
        let Some(s) = self.pods.get_mut(uid).and_then(|t| t.statics.as_mut()) else { return };
        let again = self.clock.now() + MIRROR_RETRY;
        if s.refused.as_ref().is_some_and(|(said, _)| *said == why) {
            s.refused = Some((why, again));
            return;
        }
        s.refused = Some((why.clone(), again));
        let name = pod.metadata.name.clone().unwrap_or_default();
        tracing::warn!(pod = name, "no mirror pod for the static pod (it runs without one): {why}");
        let message = format!("Failed creating a mirror pod for {name}: {why}");
        self.events.record(pod, None, EventType::Warning, MIRROR_REFUSED, message, self.clock.now());
    }

    /// Writes the static pod's status into its mirror, the mirror's UID as precondition.
    async fn write_mirror_status(&mut self, uid: &str) {
        let Some(t) = self.pods.get(uid) else { return };
        let Some(mirror) = t.mirror.clone().filter(|m| m.metadata.deletion_timestamp.is_none()) else { return };
        let Some(status) = self.status_of(t) else { return };
        let theirs = mirror.status.as_ref();
        if theirs.is_some_and(|theirs| summary(theirs) == summary(&status)) {
            return;
        }
        let (Some(name), Some(muid)) = (mirror.metadata.name.as_deref(), mirror.metadata.uid.as_deref()) else {
            return;
        };
        let ns = mirror.metadata.namespace.as_deref().unwrap_or("default");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let patch = status_patch(muid, &status, theirs);
        match api.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch)).await {
            Ok(pod) => self.pods.entry(uid.to_string()).or_default().mirror = Some(pod),
            Err(e) if gone_error(&e) => {
                // Deleted (or made again) meanwhile: made again, or taken if it is there.
                self.pods.entry(uid.to_string()).or_default().mirror = None;
            }
            Err(e) => tracing::warn!(%e, pod = name, "mirror pod status not written; trying again"),
        }
    }
}

/// What the API server said, without the rest of its answer.
fn said(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podwright_api::annotations::{CONFIG_HASH, CONFIG_MIRROR};
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_static_pods_reach_the_status_manager_and_go_on_from_their_last_mirror() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let listed = pod(json!({"metadata": {"name": "web-n", "namespace": "default", "uid": "m1",
            "annotations": {CONFIG_MIRROR: "u1"}}, "status": {"phase": "Running"}}));
        let host = ClusterMirrors::new(tx, vec![listed]);
        assert!(
            matches!(rx.try_recv(), Ok(Heard::MirrorObserved(m)) if m.metadata.uid.as_deref() == Some("m1")),
            "the manager knows the mirrors there before any static pod"
        );

        let web = pod(json!({"metadata": {"name": "web-n", "namespace": "default", "uid": "u1",
            "annotations": {CONFIG_HASH: "u1"}}}));
        assert_eq!(host.last_status(&web).and_then(|s| s.phase).as_deref(), Some("Running"));
        let mut v2 = web.clone();
        v2.metadata.uid = Some("u2".into());
        v2.metadata.annotations.as_mut().unwrap().insert(CONFIG_HASH.into(), "u2".into());
        assert_eq!(host.last_status(&v2), None, "another version starts afresh");

        host.run(web.clone());
        host.stop(&web, 5);
        host.delete_orphaned_mirrors(&BTreeSet::from(["u1".to_string()]));
        assert!(host.ensure_mirror(&web, None).is_ok());
        assert!(matches!(rx.try_recv(), Ok(Heard::StaticRun(p)) if p.metadata.uid.as_deref() == Some("u1")));
        assert!(matches!(rx.try_recv(), Ok(Heard::StaticStop(u, 5)) if u == "u1"));
        assert!(matches!(rx.try_recv(), Ok(Heard::StaticKnown(k)) if k.len() == 1 && k.contains("u1")));
        assert!(rx.try_recv().is_err(), "the manager keeps the mirrors by itself");
    }

    #[test]
    fn a_refusal_is_final_and_an_unreachable_api_server_is_not() {
        let failure = |message: &str, reason: &str, code: u16| {
            kube::Error::Api(kube::core::Status::failure(message, reason).with_code(code).boxed())
        };
        let refusal = failure("pods \"p\" is forbidden: a mirror pod may not reference secrets", "Forbidden", 403);
        match NoMirror::of(&refusal) {
            NoMirror::Refused(m) => {
                assert_eq!(m, "pods \"p\" is forbidden: a mirror pod may not reference secrets (403 Forbidden)")
            }
            NoMirror::Failed(m) => panic!("{m}"),
        }
        assert!(matches!(NoMirror::of(&failure("too many requests", "TooManyRequests", 429)), NoMirror::Failed(_)));
        assert!(matches!(NoMirror::of(&failure("etcd", "InternalError", 500)), NoMirror::Failed(_)));
    }
}
