//! The node's pods on the API server: the watch of the pods bound to this node as the node's
//! pod source (`pkg/kubelet/config/apiserver.go`), and their statuses written back as the
//! kubelet's status manager writes them (`pkg/kubelet/status/status_manager.go`):
//!
//! - a strategic merge patch of `pods/<name>/status` carrying the pod's UID (a pod deleted and
//!   made again under the same name refuses it), with the conditions the kubelet owns (others',
//!   such as readiness gates', are left as they are);
//! - sent again whenever the API server's copy differs from the node's (the node lifecycle
//!   controller marks the pods of a node it lost NotReady), checked on every watch event and
//!   every 10 s;
//! - a pod deleted through the API is stopped with the grace the API server gives; once it has
//!   stopped, its terminal phase is written, then the pod is deleted for good (grace 0, with a
//!   UID precondition), then its containers and files leave the node.
//!
//! The node's static pods run beside them, with their mirror pods on the API server
//! ([`ClusterMirrors`]).

use crate::admission::{Refusal, admit};
use crate::objects::ClusterObjects;
use crate::watch_backoff::ReflectorBackoff;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::core::v1::{HostIP, Pod, PodStatus};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use podwright_api::annotations::CONFIG_MIRROR;
use podwright_api::honoured_fields::{Mode, unsupported_fields_in};
use podwright_node::static_pods::StaticPods;
use podwright_node::{EventSink, EventType, PodUpdate, PodWorkers, StatusSink};
use podwright_runtime::Clock;
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

mod mirrors;

pub use mirrors::ClusterMirrors;

/// How often every pod's status is checked against the API server's (`syncPeriod`).
const RESYNC_EVERY: Duration = Duration::from_secs(10);
/// The reason of a pod refused for a field podwright does not honour.
pub const UNSUPPORTED: &str = "UnsupportedPodSpec";

/// The field selector of the pods bound to `node`: the only pod list and watch the Node
/// authorizer allows a node (since 1.32).
pub fn node_selector(node: &str) -> String {
    format!("spec.nodeName={node}")
}

/// The pods bound to the node now: the UIDs of those to run (what the node's clean-up at start
/// keeps), and the mirror pods of its static pods.
pub async fn list_bound(client: &kube::Client, node: &str) -> Result<(BTreeSet<String>, Vec<Pod>), kube::Error> {
    let api: Api<Pod> = Api::all(client.clone());
    let pods = api.list(&ListParams::default().fields(&node_selector(node))).await?;
    let (mirrors, pods): (Vec<Pod>, Vec<Pod>) = pods.items.into_iter().partition(is_mirror);
    Ok((pods.into_iter().filter_map(|p| p.metadata.uid).collect(), mirrors))
}

/// A mirror pod: the API's copy of one of this node's static pods, not a pod to run.
fn is_mirror(pod: &Pod) -> bool {
    pod.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(CONFIG_MIRROR))
}

/// What the status manager hears: the workers' statuses, and the API server's copies.
enum Heard {
    Update(PodUpdate),
    /// The API server's pod, as the watch last saw it.
    Observed(Box<Pod>),
    /// The pod is no longer on the API server.
    Gone(String),
    /// Refused before anything started: fails with this reason and message.
    Refused(Box<Pod>, Refusal),
    /// Its containers, sandboxes and files have left the node.
    Removed(String),
    /// A static pod to run, or its new version.
    StaticRun(Box<Pod>),
    /// A static pod gone from its path: stopped with this grace, then removed with its mirror.
    StaticStop(String, i64),
    /// The UIDs of every static pod running or stopping: mirrors of others are deleted.
    StaticKnown(BTreeSet<String>),
    /// A mirror pod as the watch (or the listing at start) saw it.
    MirrorObserved(Box<Pod>),
    /// A mirror pod deleted from the API server.
    MirrorGone(Box<Pod>),
    /// The UIDs of the mirror pods a relist found: others are gone.
    MirrorsListed(HashSet<String>),
}

/// The node's [`StatusSink`]: hands each status to the status manager.
pub struct ApiStatus {
    tx: mpsc::UnboundedSender<Heard>,
}

impl StatusSink for ApiStatus {
    fn publish(&self, update: &PodUpdate) {
        // The manager lives as long as the node.
        let _ = self.tx.send(Heard::Update(update.clone()));
    }
}

/// The node's pods on the API server: the sink to build the node with, then [`ClusterPods::run`]
/// with the node's workers.
pub struct ClusterPods {
    tx: mpsc::UnboundedSender<Heard>,
    rx: mpsc::UnboundedReceiver<Heard>,
}

/// What [`ClusterPods::run`] runs the pods with.
pub struct PodsContext {
    pub node: PodNode,
    /// The node's own Node as the API server has it (for the admission of new pods).
    pub own_node: tokio::sync::watch::Receiver<Option<Node>>,
    pub workers: Arc<PodWorkers>,
    pub objects: Arc<ClusterObjects>,
    pub events: Arc<dyn EventSink>,
    pub statics: Arc<StaticPods>,
    pub clock: Clock,
}

/// Who the pods' node is, for their statuses.
#[derive(Debug, Clone)]
pub struct PodNode {
    pub name: String,
    pub ip: Option<String>,
}

impl ClusterPods {
    pub fn new() -> (ClusterPods, ApiStatus) {
        let (tx, rx) = mpsc::unbounded_channel();
        (ClusterPods { tx: tx.clone(), rx }, ApiStatus { tx })
    }

    /// The static pods' host: they reach the node and the API server through the status
    /// manager.
    pub fn mirrors(&self, listed: Vec<Pod>) -> ClusterMirrors {
        ClusterMirrors::new(self.tx.clone(), listed)
    }

    /// Runs the node's pods: the watch gives them to the workers (the static pods come from
    /// `statics`), the status manager writes their statuses and deletes them when they are
    /// done. Runs until the node stops.
    pub async fn run(self, client: kube::Client, cx: PodsContext) {
        let PodsContext { node, own_node, workers, objects, events, statics, clock } = cx;
        let (removals_tx, mut removals) = mpsc::unbounded_channel::<String>();
        let manager = StatusManager {
            client: client.clone(),
            node: node.clone(),
            pods: HashMap::new(),
            removals: removals_tx,
            workers: workers.clone(),
            events: events.clone(),
            clock,
            statics: None,
            deleted_mirrors: HashSet::new(),
        };
        tokio::spawn(manager.run(self.rx));
        tokio::spawn({
            let (workers, objects, heard) = (workers.clone(), objects.clone(), self.tx.clone());
            async move {
                while let Some(uid) = removals.recv().await {
                    workers.remove(&uid).await;
                    objects.release(&uid);
                    let _ = heard.send(Heard::Removed(uid.clone()));
                    // A static pod waiting for the name of this one starts now.
                    statics.removed(&uid);
                }
            }
        });
        tokio::spawn({
            let workers = Arc::downgrade(&workers);
            let mut changed = objects.subscribe();
            async move {
                while changed.changed().await.is_ok() {
                    match workers.upgrade() {
                        Some(w) => w.objects_changed(),
                        None => return,
                    }
                }
            }
        });
        let (read, done) = mpsc::unbounded_channel();
        let source = PodWatch {
            workers,
            objects,
            events,
            clock,
            status: self.tx,
            given: HashSet::new(),
            reading: HashMap::new(),
            read,
            own_node,
        };
        source.run(client, &node.name, done).await;
    }
}

/// The watch of the node's pods, handing them to the workers.
struct PodWatch {
    workers: Arc<PodWorkers>,
    objects: Arc<ClusterObjects>,
    events: Arc<dyn EventSink>,
    clock: Clock,
    status: mpsc::UnboundedSender<Heard>,
    /// UIDs given to the workers (or refused), or admitted and being read.
    given: HashSet<String>,
    /// Admitted pods whose objects and tokens are being read, each in a task of its own, at
    /// their newest version: one pod's wait (a token the API server refuses for a pod whose
    /// namespace is going) holds up no other, as the kubelet's per-pod workers wait apart.
    reading: HashMap<String, Pod>,
    /// Where those tasks say they are done.
    read: mpsc::UnboundedSender<String>,
    /// The node's own Node, for admission.
    own_node: tokio::sync::watch::Receiver<Option<Node>>,
}

impl PodWatch {
    async fn run(mut self, client: kube::Client, node: &str, mut read: mpsc::UnboundedReceiver<String>) {
        let api: Api<Pod> = Api::all(client);
        let mut stream = watcher(api, watcher::Config::default().fields(&node_selector(node)))
            .backoff(ReflectorBackoff::default())
            .boxed();
        // The UIDs of a relist so far: those given before and missing from it were deleted
        // while the watch was away.
        let mut listing: Option<HashSet<String>> = None;
        loop {
            let event = tokio::select! {
                event = stream.next() => match event {
                    Some(event) => event,
                    None => return,
                },
                Some(uid) = read.recv() => {
                    self.read_done(&uid);
                    continue;
                }
            };
            match event {
                Ok(watcher::Event::Init) => listing = Some(HashSet::new()),
                Ok(watcher::Event::InitApply(pod)) => {
                    if let (Some(l), Some(uid)) = (listing.as_mut(), pod.metadata.uid.clone()) {
                        l.insert(uid);
                    }
                    self.apply(pod);
                }
                Ok(watcher::Event::InitDone) => {
                    let listed = listing.take().unwrap_or_default();
                    let gone: Vec<String> = self.given.iter().filter(|u| !listed.contains(*u)).cloned().collect();
                    for uid in gone {
                        self.gone(&uid, None);
                    }
                    let _ = self.status.send(Heard::MirrorsListed(listed));
                }
                Ok(watcher::Event::Apply(pod)) => self.apply(pod),
                Ok(watcher::Event::Delete(pod)) if is_mirror(&pod) => {
                    let _ = self.status.send(Heard::MirrorGone(Box::new(pod)));
                }
                Ok(watcher::Event::Delete(pod)) => {
                    if let Some(uid) = pod.metadata.uid.clone() {
                        self.gone(&uid, pod.metadata.deletion_grace_period_seconds);
                    }
                }
                Err(e) => tracing::warn!(%e, "watch of the node's pods failed; it resumes with back-off"),
            }
        }
    }

    /// A pod added or changed on the API server.
    fn apply(&mut self, pod: Pod) {
        // Not a pod to run: the status manager keeps it for its static pod.
        if is_mirror(&pod) {
            let _ = self.status.send(Heard::MirrorObserved(Box::new(pod)));
            return;
        }
        let Some(uid) = pod.metadata.uid.clone() else { return };
        let _ = self.status.send(Heard::Observed(Box::new(pod.clone())));
        if let Some(newest) = self.reading.get_mut(&uid) {
            *newest = pod;
            return;
        }
        if self.given.insert(uid.clone()) {
            if let Err(refusal) = self.admit(&pod) {
                self.events.record(
                    &pod,
                    None,
                    EventType::Warning,
                    &refusal.reason,
                    refusal.message.clone(),
                    self.clock.now(),
                );
                let _ = self.status.send(Heard::Refused(Box::new(pod), refusal));
                return;
            }
            self.reading.insert(uid.clone(), pod.clone());
            let (objects, read) = (self.objects.clone(), self.read.clone());
            tokio::spawn(async move {
                objects.track(&pod).await;
                let _ = read.send(uid);
            });
            return;
        }
        self.give(pod);
    }

    /// A new pod's objects and tokens are read (or their bounded wait is over): the workers
    /// get its newest version. One gone meanwhile is not started, and what was read for it goes.
    fn read_done(&mut self, uid: &str) {
        match self.reading.remove(uid) {
            Some(pod) => self.give(pod),
            None => self.objects.release(uid),
        }
    }

    /// Gives the workers a pod's version, and its deletion if it has one.
    fn give(&self, mut pod: Pod) {
        let Some(uid) = pod.metadata.uid.clone() else { return };
        let deletion = pod.metadata.deletion_timestamp.as_ref().map(|_| pod.metadata.deletion_grace_period_seconds);
        podwright_api::defaults::apply_defaults(&mut pod);
        if let Err(e) = self.workers.update(pod) {
            tracing::debug!(%e, uid, "pod update not applied");
        }
        if let Some(grace) = deletion {
            self.workers.delete(&uid, grace);
        }
    }

    /// A new pod: refused for a field podwright does not honour, or by the kubelet's admission
    /// against the node and its other pods. A pod that has started already (the node's own, met
    /// again after a restart) was admitted then.
    fn admit(&self, pod: &Pod) -> Result<(), Refusal> {
        let refused = unsupported_fields_in(pod, Mode::Cluster);
        if !refused.is_empty() {
            let message = refused.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
            return Err(Refusal { reason: UNSUPPORTED.into(), message });
        }
        let started = pod.status.as_ref().is_some_and(|s| {
            s.phase.as_deref().is_some_and(|p| p != "Pending")
                || s.container_statuses.as_ref().is_some_and(|c| !c.is_empty())
        });
        let node = self.own_node.borrow().clone();
        let (Some(node), false) = (node, started) else { return Ok(()) };
        let others: Vec<Arc<Pod>> = self.workers.latest().into_iter().filter(|u| !u.finished).map(|u| u.spec).collect();
        // Admitted pods still being read count as the running ones do.
        let others: Vec<&Pod> = others.iter().map(Arc::as_ref).chain(self.reading.values()).collect();
        admit(pod, &node, &others)
    }

    /// A pod no longer on the API server: stopped (with the grace its deletion had, if it still
    /// runs), then removed once stopped.
    fn gone(&mut self, uid: &str, grace: Option<i64>) {
        if self.given.remove(uid) {
            self.reading.remove(uid);
            self.workers.delete(uid, grace);
            let _ = self.status.send(Heard::Gone(uid.to_string()));
        }
    }
}

/// What the status manager knows of one pod.
#[derive(Default)]
struct Tracked {
    /// The API server's copy, as last seen (by the watch or in a patch's answer).
    api: Option<Pod>,
    /// The workers' newest report.
    latest: Option<PodUpdate>,
    /// Refused: the status to report instead of a worker's.
    refused: Option<PodStatus>,
    /// No longer on the API server.
    gone: bool,
    /// Its removal from the node was asked for, and is done.
    removing: bool,
    removed: bool,
    /// A static pod: its newest version, and what of its mirror the manager knows.
    statics: Option<mirrors::StaticTracked>,
    /// The mirror pod on the API server that carries this UID as its config hash, as last
    /// seen: a static pod's, or one with no static pod behind it (to delete).
    mirror: Option<Pod>,
}

impl Tracked {
    /// A static pod or a mirror pod: not an API pod of its own.
    fn is_static(&self) -> bool {
        self.statics.is_some() || self.mirror.is_some()
    }

    fn finished(&self) -> bool {
        self.refused.is_some() || self.latest.as_ref().is_some_and(|u| u.finished)
    }

    fn deleting(&self) -> bool {
        self.api.as_ref().is_some_and(|p| p.metadata.deletion_timestamp.is_some())
    }

    /// (namespace, name, uid) of the pod.
    fn names(&self) -> Option<(String, String, String)> {
        let meta = match (&self.api, &self.latest) {
            (Some(p), _) => &p.metadata,
            (None, Some(u)) => &u.spec.metadata,
            (None, None) => return None,
        };
        Some((meta.namespace.clone().unwrap_or_else(|| "default".into()), meta.name.clone()?, meta.uid.clone()?))
    }
}

struct StatusManager {
    client: kube::Client,
    node: PodNode,
    pods: HashMap<String, Tracked>,
    removals: mpsc::UnboundedSender<String>,
    workers: Arc<PodWorkers>,
    events: Arc<dyn EventSink>,
    clock: Clock,
    /// The static pods' UIDs as of the last reading of their path; none read yet: `None`.
    statics: Option<BTreeSet<String>>,
    /// Mirror pods this node deleted: what the watch still says of them is old.
    deleted_mirrors: HashSet<String>,
}

impl StatusManager {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Heard>) {
        let mut resync = tokio::time::interval(RESYNC_EVERY);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let dirty: BTreeSet<String> = tokio::select! {
                biased;
                heard = rx.recv() => {
                    let Some(heard) = heard else { return };
                    let mut dirty = BTreeSet::new();
                    self.hear(heard, &mut dirty);
                    // Fold what else is waiting: one patch per pod for a burst of reports.
                    while let Ok(more) = rx.try_recv() {
                        self.hear(more, &mut dirty);
                    }
                    dirty
                }
                _ = resync.tick() => self.pods.keys().cloned().collect(),
            };
            for uid in dirty {
                self.sync(&uid).await;
            }
        }
    }

    /// Takes one report in; adds the UIDs it concerns to `dirty`.
    fn hear(&mut self, heard: Heard, dirty: &mut BTreeSet<String>) {
        let uid = match heard {
            Heard::Update(u) => {
                let uid = u.spec.metadata.uid.clone().unwrap_or_default();
                self.pods.entry(uid.clone()).or_default().latest = Some(u);
                uid
            }
            Heard::Observed(pod) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                self.pods.entry(uid.clone()).or_default().api = Some(*pod);
                uid
            }
            Heard::Gone(uid) => {
                self.pods.entry(uid.clone()).or_default().gone = true;
                uid
            }
            Heard::Removed(uid) => {
                self.pods.entry(uid.clone()).or_default().removed = true;
                uid
            }
            Heard::Refused(pod, refusal) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                let t = self.pods.entry(uid.clone()).or_default();
                t.refused = Some(PodStatus {
                    phase: Some("Failed".into()),
                    reason: Some(refusal.reason),
                    message: Some(format!("Pod was rejected: {}", refusal.message)),
                    ..Default::default()
                });
                t.api = Some(*pod);
                uid
            }
            other => {
                dirty.extend(self.hear_static(other));
                return;
            }
        };
        dirty.insert(uid);
    }

    /// Brings one pod's API copy in line with the node: its status, its final deletion, its
    /// removal from the node.
    async fn sync(&mut self, uid: &str) {
        let Some(t) = self.pods.get(uid) else { return };
        if t.is_static() {
            return self.sync_static(uid).await;
        }
        let Some((ns, name, _)) = t.names() else { return };
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        if !t.gone
            && let Some(status) = self.status_of(t)
        {
            let theirs = t.api.as_ref().and_then(|p| p.status.as_ref());
            if theirs.is_none_or(|theirs| differs(theirs, &status)) {
                let patch = status_patch(uid, &status, theirs);
                match api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch)).await {
                    Ok(pod) => self.pods.entry(uid.to_string()).or_default().api = Some(pod),
                    Err(e) if gone_error(&e) => self.pods.entry(uid.to_string()).or_default().gone = true,
                    Err(e) => tracing::warn!(%e, pod = name, "pod status not written; trying again"),
                }
            }
        }
        let Some(t) = self.pods.get(uid) else { return };
        let terminal_written = t
            .api
            .as_ref()
            .and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed");
        // A deleted pod leaves the node (containers, sandbox, files) once stopped and its
        // terminal phase written, before its object goes: once the API server no longer shows
        // it, nothing of it is left. A pod whose object went first (a forced deletion) leaves
        // once stopped.
        let leave = t.finished() && ((t.deleting() && terminal_written) || t.gone) || (t.gone && t.latest.is_none());
        if leave && !t.removing {
            self.pods.entry(uid.to_string()).or_default().removing = true;
            let _ = self.removals.send(uid.to_string());
            return;
        }
        if t.removed && !t.gone {
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions { uid: Some(uid.to_string()), resource_version: None }),
                ..Default::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => tracing::info!(pod = name, "pod deleted"),
                Err(e) if gone_error(&e) => {}
                Err(e) => {
                    tracing::warn!(%e, pod = name, "pod not deleted; trying again");
                    return;
                }
            }
            self.pods.entry(uid.to_string()).or_default().gone = true;
        }
        if self.pods.get(uid).is_some_and(|t| t.gone && t.removed) {
            self.pods.remove(uid);
        }
    }

    /// The status to write for a pod: the node's (or its refusal), with the node's IP.
    fn status_of(&self, t: &Tracked) -> Option<PodStatus> {
        let mut status = t.refused.clone().or_else(|| t.latest.as_ref().and_then(|u| u.status.as_deref().cloned()))?;
        if let Some(ip) = &self.node.ip {
            status.host_ip = Some(ip.clone());
            status.host_ips = Some(vec![HostIP { ip: ip.clone() }]);
        }
        Some(status)
    }
}

/// An answer meaning the pod is not there any more: not found, or another pod of the same
/// name (its UID differs: 409 on a delete's precondition, 422 on a patch's immutable UID).
fn gone_error(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 409 || s.code == 422)
}

/// Whether the API server's status is not the node's. `observedGeneration` counts only where
/// the API server keeps it (1.33 and later; an older one drops the field, and the node would
/// write it for ever).
fn differs(theirs: &PodStatus, ours: &PodStatus) -> bool {
    let generation_kept = theirs.observed_generation.is_some();
    summary(theirs) != summary(ours) || generation_kept && theirs.observed_generation != ours.observed_generation
}

/// What decides whether the API server's status is the node's: phase, reason, the conditions'
/// statuses, each container's state (a waiting or terminated one with its reason, and the exit
/// code), readiness and restarts, the pod IP. (Fields an older API server drops are left out,
/// or the node would write them for ever.) A waiting reason that changes is written, as the
/// kubelet's status manager writes every change: `ContainerCreating`, then `ErrImagePull`.
fn summary(status: &PodStatus) -> Value {
    let containers = |list: &Option<Vec<k8s_openapi::api::core::v1::ContainerStatus>>| {
        list.iter()
            .flatten()
            .map(|c| {
                let state = c.state.as_ref().map(|s| {
                    if s.running.is_some() {
                        json!("running")
                    } else if let Some(t) = &s.terminated {
                        json!(["terminated", t.reason, t.exit_code])
                    } else {
                        json!(["waiting", s.waiting.as_ref().and_then(|w| w.reason.as_ref())])
                    }
                });
                json!([c.name, c.ready, c.restart_count, c.container_id, state, c.started])
            })
            .collect::<Vec<_>>()
    };
    let mut conditions: Vec<Value> = status
        .conditions
        .iter()
        .flatten()
        .filter(|c| OWNED_CONDITIONS.contains(&c.type_.as_str()))
        .map(|c| json!([c.type_, c.status]))
        .collect();
    conditions.sort_by_key(|c| c.to_string());
    json!({
        "phase": status.phase,
        "reason": status.reason,
        "podIP": status.pod_ip,
        "conditions": conditions,
        "init": containers(&status.init_container_statuses),
        "containers": containers(&status.container_statuses),
    })
}

/// The conditions the kubelet owns (`pkg/kubelet/types/pod_status.go`); others' are left as
/// they are.
const OWNED_CONDITIONS: &[&str] =
    &["PodScheduled", "Ready", "Initialized", "ContainersReady", "PodReadyToStartContainers"];

/// The strategic merge patch of a pod's status: the UID (the precondition), the node's status
/// with its own conditions (merged by type), the pod IPs replaced whole, and a reason and
/// message the node no longer gives removed.
fn status_patch(uid: &str, status: &PodStatus, theirs: Option<&PodStatus>) -> Value {
    let mut status = status.clone();
    if let Some(c) = status.conditions.as_mut() {
        c.retain(|c| OWNED_CONDITIONS.contains(&c.type_.as_str()));
    }
    let mut value = serde_json::to_value(&status).unwrap_or_else(|_| json!({}));
    // Conditions merge by type, field by field: a reason or message a condition no longer has
    // must be removed, or the API server keeps the old one beside the new status.
    for c in value.get_mut("conditions").and_then(Value::as_array_mut).into_iter().flatten() {
        for field in ["reason", "message"] {
            if c.get(field).is_none() {
                c[field] = Value::Null;
            }
        }
    }
    for list in ["podIPs", "hostIPs"] {
        if let Some(items) = value.get_mut(list).and_then(Value::as_array_mut) {
            items.insert(0, json!({"$patch": "replace"}));
        }
    }
    for (field, theirs_set) in
        [("reason", theirs.and_then(|s| s.reason.as_ref())), ("message", theirs.and_then(|s| s.message.as_ref()))]
    {
        if theirs_set.is_some() && value.get(field).is_none() {
            value[field] = Value::Null;
        }
    }
    json!({"metadata": {"uid": uid}, "status": value})
}

#[cfg(test)]
mod tests;
