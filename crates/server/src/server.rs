//! [`ApiServer`]: the local API's shared state (store, node link, configuration), which every
//! handler takes; the routes to the handlers are in `routes`.

use crate::mirror::mirrored_uid;
use crate::node_link::{NodeFeed, NodeLink};
use crate::persist::DiskError;
pub use crate::persist::event_last_seen;
use crate::resources::Resource;
use crate::sinks::{StoreEvents, StoreStatus};
use crate::static_pods::StaticPods;
use crate::store::{Outage, Store};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use podwright_api::go;
use podwright_node::timeline::Recording;
use podwright_node::usage::UsageCollector;
use podwright_node::{EventSink, EventType};
use podwright_runtime::{Clock, Runtime};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// How long an event is kept after it was last seen (the API server's `--event-ttl` default).
pub const EVENT_TTL: SignedDuration = SignedDuration::from_hours(1);
/// How often expired events are removed: an event outlives [`EVENT_TTL`] by up to this.
pub const EVENT_EXPIRY_CHECK: SignedDuration = SignedDuration::from_mins(1);

/// The local API's database, under the root directory.
pub const STORE_FILE: &str = "api.redb";

/// Namespaces that always exist and cannot be deleted.
pub const BUILTIN_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// What the daemon tells the API about the node.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// This node's name (`spec.nodeName` of every pod, the events' source host).
    pub node_name: String,
    /// podwright's root directory, where the pods' logs are.
    pub root: PathBuf,
    /// The node's address, reported as every pod's `status.hostIP`.
    pub host_ip: Option<String>,
}

struct Shared {
    store: Arc<Store>,
    link: Arc<NodeLink>,
    /// The static pods and their mirror pods.
    statics: Arc<StaticPods>,
    /// The events sink inside `recording`: static pods' Warning events (they have no worker),
    /// and expiring old events.
    events: Arc<StoreEvents>,
    config: ServerConfig,
    /// The statuses and events of every pod, into the store and into its timeline.
    recording: Arc<Recording>,
    /// Asked for the streaming URLs of exec, attach and port-forward.
    runtime: Arc<dyn Runtime>,
    /// The node's usage, once the daemon gives it: `/stats/summary`, `/metrics/resource` and
    /// `metrics.k8s.io` answer (and discovery lists the group) only then.
    usage: OnceLock<Arc<UsageCollector>>,
}

/// The local Kubernetes-compatible API. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct ApiServer(Arc<Shared>);

impl ApiServer {
    /// The API and the ends the daemon plugs into the node layer. `runtime` is the node's
    /// runtime, which serves exec, attach and port-forward streams.
    pub fn new(config: ServerConfig, clock: Clock, runtime: Arc<dyn Runtime>) -> (ApiServer, NodeFeed) {
        Self::with_store(config, clock, runtime, Store::new(clock))
    }

    /// Like [`ApiServer::new`], over the store kept under the root directory, with what a
    /// previous run left in it: its pods are handed to the node again, and a pod that was being
    /// deleted goes on being deleted with what is left of its grace period.
    pub fn open(
        config: ServerConfig,
        clock: Clock,
        runtime: Arc<dyn Runtime>,
    ) -> Result<(ApiServer, NodeFeed), DiskError> {
        let store = Store::open(clock, &config.root.join(STORE_FILE))?;
        let (api, feed) = Self::with_store(config, clock, runtime, store);
        api.resume();
        Ok((api, feed))
    }

    fn resume(&self) {
        let now = self.now();
        for obj in self.store().list(Resource::Pods, None).0 {
            // Mirror pods come back with their static pods' files.
            if mirrored_uid(&obj).is_some() {
                continue;
            }
            let Ok(pod) = serde_json::from_value::<Pod>((*obj).clone()) else {
                tracing::warn!(pod = ?crate::store::meta_str(&obj, "name"), "a stored pod does not read as a Pod");
                continue;
            };
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let deleting = pod.metadata.deletion_timestamp.as_ref().map(|t| t.0);
            self.0.link.upsert(pod);
            if let Some(at) = deleting {
                let grace = at.duration_since(now).as_secs().max(0);
                self.0.link.delete(&uid, grace);
            }
        }
    }

    /// The UIDs of every pod the node is to run: the API's and the static pods (not their
    /// mirrors' own UIDs).
    pub fn pod_uids(&self) -> BTreeSet<String> {
        let pods = self.store().list(Resource::Pods, None).0;
        let api = pods.iter().filter(|p| mirrored_uid(p).is_none());
        let mut uids: BTreeSet<String> =
            api.filter_map(|p| crate::store::meta_str(p, "uid").map(str::to_string)).collect();
        uids.extend(self.0.statics.uids());
        uids
    }

    /// One reading of the static-pod path (every pod in it, in file order): new pods start,
    /// pods gone stop, each running one has its mirror pod, and mirrors of no static pod go.
    /// Called once before the node starts, even without a path, so that the UIDs of
    /// [`pod_uids`](Self::pod_uids) are complete.
    pub fn set_static_pods(&self, pods: Vec<Pod>) {
        self.0.statics.set(pods, &*self.0.events);
    }

    fn with_store(
        config: ServerConfig,
        clock: Clock,
        runtime: Arc<dyn Runtime>,
        store: Store,
    ) -> (ApiServer, NodeFeed) {
        let store = Arc::new(store);
        for ns in BUILTIN_NAMESPACES {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
            // Only a fresh store lacks them.
            let _ = store.create(Resource::Namespaces, obj);
        }
        // The serviceaccount controller's `default` account in each namespace: new ones here,
        // and those of a store an older version left.
        for ns in store.list(Resource::Namespaces, None).0 {
            crate::service_accounts::ensure_default(&store, crate::store::meta_str(&ns, "name").unwrap_or_default());
        }
        let (link, feed) = NodeLink::new();
        let link = Arc::new(link);
        let statics = Arc::new(crate::static_pods::static_pods(store.clone(), link.clone(), &config.node_name));
        let status = Arc::new(StoreStatus {
            store: store.clone(),
            link: link.clone(),
            host_ip: config.host_ip.clone(),
            statics: statics.clone(),
        });
        let events = Arc::new(StoreEvents::new(store.clone(), config.node_name.clone()));
        let recording = Arc::new(Recording::new(clock, &[], status, events.clone()));
        let usage = OnceLock::new();
        (ApiServer(Arc::new(Shared { store, link, statics, events, config, recording, runtime, usage })), feed)
    }

    /// Runs forever: removes events an hour after they were last seen, every minute, as the
    /// API server does; the store on disk does not grow without end. Then hands the memory
    /// freed since the last time back to the system.
    pub async fn expire_events(self) {
        let clock = *self.0.store.clock();
        loop {
            clock.sleep_until(clock.now() + EVENT_EXPIRY_CHECK).await;
            self.expire_events_at(clock.now());
            // Only a panic fails it, and nothing is lost with it.
            let _ = tokio::task::spawn_blocking(crate::allocator::release_free_memory).await;
        }
    }

    /// Runs forever: once the store commits again after failing (a full disk), records a
    /// Warning `FailedStoreCommit` on the Node saying for how long and why, as a node event
    /// of the kubelet's. The events queued meanwhile were dropped with everything else; this
    /// one is recorded after the outage, and committed.
    pub async fn report_store_outages(self) {
        loop {
            let outage = self.0.store.outage_ended().await;
            let now = self.now();
            self.0.recording.record_node(
                self.node_name(),
                EventType::Warning,
                "FailedStoreCommit",
                outage_message(&outage),
                now,
            );
        }
    }

    /// Removes the events last seen more than [`EVENT_TTL`] before `now`; returns how many.
    pub fn expire_events_at(&self, now: Timestamp) -> usize {
        let gone = self.0.events.expire(now, EVENT_TTL);
        if gone > 0 {
            tracing::debug!(gone, "expired events");
        }
        gone
    }

    pub fn store(&self) -> &Store {
        &self.0.store
    }

    /// The ConfigMaps and Secrets the node's pods refer to.
    pub fn objects(&self) -> Arc<dyn podwright_node::objects::Objects> {
        Arc::new(crate::objects::StoreObjects(self.0.store.clone()))
    }

    /// Resolves when the API is dropped; calls `changed` after every change to a ConfigMap
    /// or Secret.
    pub fn follow_object_changes<F: Fn() + Send + 'static>(
        &self,
        changed: F,
    ) -> impl Future<Output = ()> + Send + use<F> {
        crate::objects::follow_changes(self.0.store.clone(), changed)
    }

    pub(crate) fn store_handle(&self) -> Arc<Store> {
        self.0.store.clone()
    }

    pub(crate) fn link(&self) -> &NodeLink {
        &self.0.link
    }

    pub(crate) fn statics(&self) -> &StaticPods {
        &self.0.statics
    }

    /// Serves the node's resource usage from `collector` (see [`crate::usage`]); the first
    /// collector given stays.
    pub fn serve_usage(&self, collector: Arc<UsageCollector>) {
        let _ = self.0.usage.set(collector);
    }

    /// The usage collector, or the API server's answer to a path it does not serve.
    pub(crate) fn usage(&self) -> crate::errors::ApiResult<&UsageCollector> {
        self.0.usage.get().map(|c| &**c).ok_or_else(crate::errors::ApiError::no_such_path)
    }

    pub(crate) fn serves_usage(&self) -> bool {
        self.0.usage.get().is_some()
    }

    pub fn node_name(&self) -> &str {
        &self.0.config.node_name
    }

    pub fn config(&self) -> &ServerConfig {
        &self.0.config
    }

    pub fn now(&self) -> Timestamp {
        self.0.store.clock().now()
    }

    /// Where pod statuses and events go: into the store, and into each pod's timeline.
    pub fn sink(&self) -> Arc<Recording> {
        self.0.recording.clone()
    }

    /// The node has removed a deleted pod.
    pub fn pod_removed(&self, uid: &str) {
        self.0.link.forget(uid);
        self.0.recording.forget(uid);
        self.0.statics.removed(uid);
    }

    pub(crate) fn pod_created(&self, _stored: &Value, pod: Pod) {
        self.0.link.upsert(pod);
    }

    /// A pod changed through the API. A mirror pod's changes stay in the API: the node runs
    /// its static pod's file.
    pub(crate) fn pod_updated(&self, stored: &Value, pod: Pod) {
        if mirrored_uid(stored).is_none() {
            self.0.link.upsert(pod);
        }
    }
}

/// `the local API's store could not commit from <from> to <to> (<n> changes refused): <why>`:
/// the failure that started it, where the later ones may be redb refusing until it is opened
/// again.
fn outage_message(o: &Outage) -> String {
    let changes = if o.refused == 1 { "change" } else { "changes" };
    format!(
        "the local API's store could not commit from {} to {} ({} {changes} refused): {}",
        go::format_time(o.from),
        go::format_time(o.to),
        o.refused,
        o.error
    )
}

/// The local API's pods are its store's.
impl crate::host::PodHost for ApiServer {
    fn pod(&self, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.store().get(Resource::Pods, ns, name).ok()
    }

    fn pods(&self) -> Vec<Arc<Value>> {
        self.store().list(Resource::Pods, None).0
    }

    fn runtime(&self) -> &dyn Runtime {
        &*self.0.runtime
    }

    fn root(&self) -> &std::path::Path {
        &self.0.config.root
    }

    fn now(&self) -> Timestamp {
        ApiServer::now(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    /// The `FailedStoreCommit` events in the store.
    fn failed_commits(api: &ApiServer) -> Vec<Arc<Value>> {
        let events = api.store().list(Resource::Events, None).0;
        events.into_iter().filter(|e| e["reason"] == "FailedStoreCommit").collect()
    }

    fn config_map(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}})
    }

    /// Waits up to 10 s for `done`.
    async fn until(mut done: impl FnMut() -> bool) {
        for _ in 0..100 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The store's outage is a Warning on the Node once the store commits again: one per
    /// outage, none while it lasts (it would be dropped with the rest), none without one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_outage_is_one_node_event_once_commits_work_again() {
        let clock = Clock::new();
        let (store, full) = Store::filling(clock);
        let config = ServerConfig { node_name: "n1".into(), root: std::env::temp_dir(), host_ip: None };
        let runtime: Arc<dyn Runtime> = podwright_runtime::FakeRuntime::new(clock);
        let (api, _feed) = ApiServer::with_store(config, clock, runtime, store);
        tokio::spawn(api.clone().report_store_outages());
        api.store().create(Resource::ConfigMaps, config_map("before")).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(failed_commits(&api).is_empty());

        for outage in 1..=2 {
            full.store(true, Ordering::Relaxed);
            let refused = api.store().create(Resource::ConfigMaps, config_map("during")).unwrap_err();
            assert_eq!(refused.code, 500);
            // Past a retry of the writer's, still failing.
            tokio::time::sleep(Duration::from_millis(2500)).await;
            assert!(api.store().health().is_err());
            // Events are read from the file, which is not open again until there is room: a
            // list of them says so rather than answer none.
            assert!(failed_commits(&api).is_empty());
            let list = axum::http::Request::get("/api/v1/events").body(axum::body::Body::empty()).unwrap();
            let answer = tower::ServiceExt::oneshot(api.router(), list).await.unwrap();
            assert_eq!(answer.status(), 500);
            full.store(false, Ordering::Relaxed);
            until(|| failed_commits(&api).len() == outage).await;
            let events = failed_commits(&api);
            assert_eq!(events.len(), outage, "{events:?}");
        }
        // Recorded once each, and no more while commits work.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let events = failed_commits(&api);
        assert_eq!(events.len(), 2);
        for e in events {
            assert_eq!(e["type"], "Warning");
            assert_eq!(e["involvedObject"]["kind"], "Node");
            assert_eq!(e["involvedObject"]["name"], "n1");
            assert_eq!(e["source"]["component"], "kubelet");
            assert_eq!(e["reportingInstance"], "n1");
            assert_eq!(e["count"], 1);
            let message = e["message"].as_str().unwrap();
            assert!(message.starts_with("the local API's store could not commit from "), "{message}");
            assert!(message.contains(" (1 change refused): the local API's store memory"), "{message}");
        }
    }
}
