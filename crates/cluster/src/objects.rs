//! The ConfigMaps and Secrets of the node's pods, and the cluster's RuntimeClasses, as the
//! kubelet's watch-based managers keep them (`pkg/kubelet/util/manager/watch_based_manager.go`):
//! one watch per referenced object, by `metadata.name=` (the only reads the Node authorizer
//! allows a node), started when the first pod refers to the object and stopped when the last
//! one goes; an immutable object is not watched once read. Projected service account tokens
//! are asked for bound to their pod (`serviceaccounts/<name>/token`, as the kubelet's token
//! manager does) and asked for again once 80 % of their life has passed. Every Service of the
//! cluster is kept by one watch (the kubelet's service informer), for the containers' service
//! variables.

use crate::watch_backoff::ReflectorBackoff;
use futures_util::StreamExt;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount, ServiceAccountTokenProjection};
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use podwright_api::defaults::service_account;
use podwright_node::objects::Objects;
use podwright_runtime::Clock;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::AbortHandle;

/// How long a new pod waits for its objects' first reading before it starts (a missing one
/// then holds its container back, as it would in the kubelet, until it appears).
const FIRST_READ: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    ConfigMap,
    Secret,
}

type Key = (Kind, String, String);

/// A pod's token for one projected source: (pod UID, audience, expiration seconds).
type TokenKey = (String, Option<String>, Option<i64>);

/// What is asked of the API server when a source gives no expiration (the API's default).
const DEFAULT_TOKEN_SECONDS: i64 = 3600;

/// One watched object: what it is now (`None`: not there), who refers to it, its watch.
struct Watched {
    value: Option<serde_json::Value>,
    read: watch::Receiver<bool>,
    pods: BTreeSet<String>,
    task: Option<AbortHandle>,
}

/// Every object of one kind in the cluster, by namespace and name; `None` until first listed.
type Listing<K> = Mutex<Option<HashMap<(String, String), K>>>;

/// The objects the node's pods refer to, kept current by watches.
pub struct ClusterObjects {
    client: kube::Client,
    watched: Mutex<HashMap<Key, Watched>>,
    runtime_classes: Listing<RuntimeClass>,
    services: Listing<Service>,
    /// Service account tokens, and the tasks that renew them (per pod UID).
    tokens: Mutex<HashMap<TokenKey, String>>,
    renewals: Mutex<HashMap<String, Vec<AbortHandle>>>,
    clock: Clock,
    /// Rings whenever a watched object changes, or a token is renewed.
    changed: watch::Sender<u64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ClusterObjects {
    pub fn new(client: kube::Client, clock: Clock) -> Arc<ClusterObjects> {
        Arc::new(ClusterObjects {
            client,
            watched: Mutex::default(),
            runtime_classes: Mutex::default(),
            services: Mutex::default(),
            tokens: Mutex::default(),
            renewals: Mutex::default(),
            clock,
            changed: watch::Sender::new(0),
        })
    }

    /// Resolves on every change of a watched object (for the pods to read them again).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Watches every object `pod` refers to and waits (a bounded time) until each has been
    /// read once.
    pub async fn track(self: &Arc<Self>, pod: &Pod) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let mut waits = Vec::new();
        for key in references(pod, &ns) {
            let mut watched = lock(&self.watched);
            let entry = watched.entry(key.clone()).or_insert_with(|| {
                let (read_tx, read) = watch::channel(false);
                let task = tokio::spawn(self.clone().follow(key.clone(), read_tx)).abort_handle();
                Watched { value: None, read, pods: BTreeSet::new(), task: Some(task) }
            });
            entry.pods.insert(uid.clone());
            waits.push(entry.read.clone());
        }
        let all_read = async {
            for mut w in waits {
                let _ = w.wait_for(|read| *read).await;
            }
        };
        if tokio::time::timeout(FIRST_READ, all_read).await.is_err() {
            tracing::warn!(uid, "the pod's ConfigMaps and Secrets were not all read in time");
        }
        for source in token_sources(pod) {
            let key: TokenKey = (uid.clone(), source.audience.clone(), source.expiration_seconds);
            if lock(&self.tokens).contains_key(&key) {
                continue;
            }
            let task = tokio::spawn(self.clone().keep_token(pod.clone(), source, key)).abort_handle();
            lock(&self.renewals).entry(uid.clone()).or_default().push(task);
        }
        // The first tokens, before the pod starts (bounded as the objects are).
        let have_tokens = async {
            while token_sources(pod)
                .iter()
                .any(|s| !lock(&self.tokens).contains_key(&(uid.clone(), s.audience.clone(), s.expiration_seconds)))
            {
                let mut changed = self.changed.subscribe();
                let _ = changed.changed().await;
            }
        };
        if tokio::time::timeout(FIRST_READ, have_tokens).await.is_err() {
            tracing::warn!(uid, "the pod's service account tokens were not all issued in time");
        }
    }

    /// Asks for the pod's token and asks again at 80 % of each token's life, until the pod
    /// is released; a failure is retried after 10 s.
    async fn keep_token(self: Arc<Self>, pod: Pod, source: ServiceAccountTokenProjection, key: TokenKey) {
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &ns);
        let request = TokenRequest {
            metadata: Default::default(),
            spec: Some(TokenRequestSpec {
                audiences: source.audience.clone().map(|a| vec![a]),
                expiration_seconds: Some(source.expiration_seconds.unwrap_or(DEFAULT_TOKEN_SECONDS)),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: pod.metadata.name.clone(),
                    uid: pod.metadata.uid.clone(),
                }),
                ..Default::default()
            }),
            status: None,
        };
        loop {
            let issued_at = self.clock.now();
            let next = match api.create_token_request(service_account(&pod), &PostParams::default(), &request).await {
                Ok(answer) => match answer.status.and_then(|s| Some((s.token?, s.expiration_timestamp?))) {
                    Some((token, expires)) => {
                        lock(&self.tokens).insert(key.clone(), token);
                        self.changed.send_modify(|n| *n = n.wrapping_add(1));
                        renewal_time(issued_at, expires.0)
                    }
                    None => issued_at + jiff::SignedDuration::from_secs(10),
                },
                Err(e) => {
                    tracing::warn!(%e, pod = ?pod.metadata.name, "service account token not issued; asking again in 10 s");
                    issued_at + jiff::SignedDuration::from_secs(10)
                }
            };
            self.clock.sleep_until(next).await;
        }
    }

    /// The pod is gone: stop watching what only it referred to, and renewing its tokens.
    pub fn release(&self, uid: &str) {
        for task in lock(&self.renewals).remove(uid).into_iter().flatten() {
            task.abort();
        }
        lock(&self.tokens).retain(|(u, _, _), _| u != uid);
        lock(&self.watched).retain(|_, w| {
            w.pods.remove(uid);
            if w.pods.is_empty() {
                if let Some(t) = &w.task {
                    t.abort();
                }
                return false;
            }
            true
        });
    }

    /// Keeps one object current until aborted.
    async fn follow(self: Arc<Self>, key: Key, read: watch::Sender<bool>) {
        let (kind, ns, name) = key.clone();
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let stream = match kind {
            Kind::ConfigMap => watcher(Api::<ConfigMap>::namespaced(self.client.clone(), &ns), config)
                .backoff(ReflectorBackoff::default())
                .map(|e| e.map(as_values))
                .boxed(),
            Kind::Secret => watcher(Api::<Secret>::namespaced(self.client.clone(), &ns), config)
                .backoff(ReflectorBackoff::default())
                .map(|e| e.map(as_values))
                .boxed(),
        };
        let mut stream = stream;
        let mut listed: Option<serde_json::Value> = None;
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    // The graph behind the Node authorizer lags a new pod: a first read may be
                    // forbidden for a moment, and every read is once the pod is gone from the
                    // API server while it still runs here. The watch is asked again with the
                    // reflector's back-off (0.8 s doubling to 30 s), not at once.
                    tracing::debug!(%e, name, "watch of a referenced object failed");
                    continue;
                }
            };
            let value = match event {
                watcher::Event::Init => {
                    listed = None;
                    continue;
                }
                watcher::Event::InitApply(v) => {
                    listed = v;
                    continue;
                }
                watcher::Event::InitDone => listed.take(),
                watcher::Event::Apply(v) => v,
                watcher::Event::Delete(_) => None,
            };
            let immutable = value.as_ref().and_then(|v| v.get("immutable")).and_then(|i| i.as_bool()) == Some(true);
            let changed = {
                let mut watched = lock(&self.watched);
                let Some(w) = watched.get_mut(&key) else { return };
                let changed = w.value != value;
                w.value = value;
                if immutable {
                    w.task = None;
                }
                changed
            };
            read.send_replace(true);
            if changed {
                self.changed.send_modify(|n| *n = n.wrapping_add(1));
            }
            // An immutable object never changes again: no watch to keep.
            if immutable {
                return;
            }
        }
    }

    /// Keeps the cluster's RuntimeClasses and Services current until the node stops.
    pub async fn follow_listings(self: Arc<Self>) {
        tokio::join!(
            follow_all(Api::<RuntimeClass>::all(self.client.clone()), &self.runtime_classes),
            follow_all(Api::<Service>::all(self.client.clone()), &self.services),
        );
    }

    fn get<T: serde::de::DeserializeOwned>(&self, kind: Kind, ns: &str, name: &str) -> Option<T> {
        let watched = lock(&self.watched);
        let value = watched.get(&(kind, ns.to_string(), name.to_string()))?.value.clone()?;
        serde_json::from_value(value).ok()
    }
}

impl Objects for ClusterObjects {
    fn config_map(&self, namespace: &str, name: &str) -> Option<ConfigMap> {
        self.get(Kind::ConfigMap, namespace, name)
    }

    fn secret(&self, namespace: &str, name: &str) -> Option<Secret> {
        self.get(Kind::Secret, namespace, name)
    }

    fn runtime_class(&self, name: &str) -> Option<RuntimeClass> {
        lock(&self.runtime_classes).as_ref()?.get(&(String::new(), name.to_string())).cloned()
    }

    fn services(&self) -> Option<Vec<Service>> {
        Some(lock(&self.services).as_ref()?.values().cloned().collect())
    }

    fn service_account_token(&self, pod: &Pod, source: &ServiceAccountTokenProjection) -> Option<String> {
        let key = (pod.metadata.uid.clone().unwrap_or_default(), source.audience.clone(), source.expiration_seconds);
        lock(&self.tokens).get(&key).cloned()
    }
}

/// When a token issued at `issued` and expiring at `expires` is asked for again: at 80 % of its
/// life, and at least once a day (the kubelet's `requiresRefresh`).
/// Keeps `listing` equal to every `K` of the cluster, by a watch, until the node stops.
async fn follow_all<K>(api: Api<K>, listing: &Listing<K>)
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let key = |o: &K| (o.meta().namespace.clone().unwrap_or_default(), o.meta().name.clone().unwrap_or_default());
    let mut stream = watcher(api, watcher::Config::default()).backoff(ReflectorBackoff::default()).boxed();
    let mut relisting = HashMap::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => relisting.clear(),
            Ok(watcher::Event::InitApply(o)) => {
                relisting.insert(key(&o), o);
            }
            Ok(watcher::Event::InitDone) => *lock(listing) = Some(std::mem::take(&mut relisting)),
            Ok(watcher::Event::Apply(o)) => {
                lock(listing).get_or_insert_default().insert(key(&o), o);
            }
            Ok(watcher::Event::Delete(o)) => {
                lock(listing).get_or_insert_default().remove(&key(&o));
            }
            Err(e) => tracing::debug!(%e, kind = K::kind(&()).as_ref(), "watch failed"),
        }
    }
}

fn renewal_time(issued: jiff::Timestamp, expires: jiff::Timestamp) -> jiff::Timestamp {
    let life = expires.duration_since(issued);
    let at = issued + life * 4 / 5;
    at.min(issued + jiff::SignedDuration::from_hours(24))
}

/// The projected `serviceAccountToken` sources of a pod's volumes.
fn token_sources(pod: &Pod) -> Vec<ServiceAccountTokenProjection> {
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    volumes
        .flat_map(|v| v.projected.iter().flat_map(|p| p.sources.iter().flatten()))
        .filter_map(|s| s.service_account_token.clone())
        .collect()
}

/// A watch event of a ConfigMap or a Secret, its object as JSON.
fn as_values<K: serde::Serialize>(event: watcher::Event<K>) -> watcher::Event<Option<serde_json::Value>> {
    let value = |o: K| serde_json::to_value(o).ok();
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(value(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(value(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(value(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// Every ConfigMap and Secret a pod refers to: in its containers' environment, its volumes
/// (projected ones too) and its image pull secrets.
fn references(pod: &Pod, ns: &str) -> BTreeSet<Key> {
    let mut keys = BTreeSet::new();
    let mut add = |kind: Kind, name: Option<&String>| {
        if let Some(n) = name.filter(|n| !n.is_empty()) {
            keys.insert((kind, ns.to_string(), n.clone()));
        }
    };
    let Some(spec) = &pod.spec else { return keys };
    for s in spec.image_pull_secrets.iter().flatten() {
        add(Kind::Secret, Some(&s.name));
    }
    let containers = spec.init_containers.iter().flatten().chain(&spec.containers);
    for c in containers {
        for e in c.env.iter().flatten() {
            let from = e.value_from.as_ref();
            add(Kind::ConfigMap, from.and_then(|f| f.config_map_key_ref.as_ref()).map(|r| &r.name));
            add(Kind::Secret, from.and_then(|f| f.secret_key_ref.as_ref()).map(|r| &r.name));
        }
        for e in c.env_from.iter().flatten() {
            add(Kind::ConfigMap, e.config_map_ref.as_ref().map(|r| &r.name));
            add(Kind::Secret, e.secret_ref.as_ref().map(|r| &r.name));
        }
    }
    for v in spec.volumes.iter().flatten() {
        add(Kind::ConfigMap, v.config_map.as_ref().map(|c| &c.name));
        add(Kind::Secret, v.secret.as_ref().and_then(|s| s.secret_name.as_ref()));
        for p in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            add(Kind::ConfigMap, p.config_map.as_ref().map(|c| &c.name));
            add(Kind::Secret, p.secret.as_ref().map(|s| &s.name));
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_renewed_at_four_fifths_of_its_life_and_at_least_daily() {
        let t0: jiff::Timestamp = "2026-11-27T00:00:00Z".parse().unwrap();
        let hour = t0 + jiff::SignedDuration::from_secs(3600);
        assert_eq!(renewal_time(t0, hour), t0 + jiff::SignedDuration::from_secs(2880));
        let year = t0 + jiff::SignedDuration::from_hours(24 * 365);
        assert_eq!(renewal_time(t0, year), t0 + jiff::SignedDuration::from_hours(24));
    }

    #[test]
    fn every_reference_of_a_pod_is_watched() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {
                "imagePullSecrets": [{"name": "pull"}],
                "initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "cm-from"}}]}],
                "containers": [{"name": "c", "env": [
                    {"name": "A", "valueFrom": {"secretKeyRef": {"name": "s-env", "key": "k"}}},
                    {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cm-env", "key": "k"}}},
                    {"name": "C", "value": "plain"}]}],
                "volumes": [
                    {"name": "v1", "configMap": {"name": "cm-vol"}},
                    {"name": "v2", "secret": {"secretName": "s-vol"}},
                    {"name": "v3", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}},
                        {"secret": {"name": "s-proj"}}, {"downwardAPI": {}}]}},
                    {"name": "v4", "emptyDir": {}}]
            }
        }))
        .unwrap();
        let names: Vec<(Kind, String)> = references(&pod, "ns").into_iter().map(|(k, _, n)| (k, n)).collect();
        assert_eq!(
            names,
            [
                (Kind::ConfigMap, "cm-env".to_string()),
                (Kind::ConfigMap, "cm-from".into()),
                (Kind::ConfigMap, "cm-vol".into()),
                (Kind::ConfigMap, "kube-root-ca.crt".into()),
                (Kind::Secret, "pull".into()),
                (Kind::Secret, "s-env".into()),
                (Kind::Secret, "s-proj".into()),
                (Kind::Secret, "s-vol".into()),
            ]
        );
    }
}
