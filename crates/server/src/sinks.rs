//! The [`StatusSink`] and [`EventSink`] that write what the pod workers report back into the
//! store, where kubectl reads it.

use crate::mirror::node_uid;
use crate::node_link::NodeLink;
use crate::persist::event_seen_before;
use crate::resources::Resource;
use crate::static_pods::StaticPods;
use crate::store::{Store, Wait, lock, meta_str};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{EventSource, HostIP, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podwright_node::events::PodEvent;
use podwright_node::{EventSink, EventType, PodUpdate, StatusSink};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Writes pod statuses into the store (kubectl reads them there) and removes deleted pods'
/// objects once their containers have stopped, without waiting for the store's commits.
pub struct StoreStatus {
    pub store: Arc<Store>,
    pub link: Arc<NodeLink>,
    pub host_ip: Option<String>,
    /// Static pods' statuses go into their mirror pods, made again when missing.
    pub statics: Arc<StaticPods>,
}

impl StatusSink for StoreStatus {
    fn publish(&self, update: &PodUpdate) {
        let m = &update.spec.metadata;
        let Some(uid) = m.uid.as_deref() else { return };
        // The pod as the node was given it names its object; the uid tells it from a pod of the
        // same name created since. A pod deleted at once (grace 0) has no object any more, but
        // its worker still has to be removed from the node when it finishes.
        let (ns, name) = (m.namespace.as_deref().unwrap_or("default"), m.name.as_deref().unwrap_or_default());
        // A static pod's object is its mirror pod, which has a UID of its own.
        let ours = |obj: &Value| node_uid(obj) == uid;
        if let Some(status) = &update.status {
            let mut status = status.as_ref().clone();
            if let Some(ip) = &self.host_ip {
                status.host_ip = Some(ip.clone());
                status.host_ips = Some(vec![HostIP { ip: ip.clone() }]);
            }
            let value = serde_json::to_value(&status).unwrap_or(Value::Null);
            let mut found = false;
            // Queued: the worker goes on at once; the status is visible once committed.
            let written = self.store.update_with(Wait::Queued, Resource::Pods, ns, name, |old| {
                if !ours(old) {
                    return Ok(None);
                }
                found = true;
                let mut new = old.clone();
                new["status"] = value;
                Ok(Some(new))
            });
            if let Err(e) = written {
                tracing::debug!(%e, uid, "status of a pod no longer stored");
            }
            if !found {
                self.statics.mirror_missing(uid, &status);
            }
        }
        if self.link.on_status(uid, update.finished) {
            let _ = self.store.delete_with(Wait::Queued, Resource::Pods, ns, name, ours);
        }
    }
}

/// What folds repeats of an event: (pod uid, field path, reason, message).
type EventKey = (String, String, String, String);

/// How many recent events are remembered for folding their repeats: the kubelet's event
/// correlator keeps as many (`maxLruCacheEntries`, client-go's `events_cache.go`).
const EVENTS_REMEMBERED: usize = 4096;

/// The event object (namespace, name) of each recent (uid, field path, reason, message): at
/// most [`EVENTS_REMEMBERED`], the least recently seen forgotten first. Two halves: one seen
/// lately, the one before; when the new half is full the old one is forgotten.
#[derive(Default)]
struct Recent {
    new: HashMap<EventKey, (String, String)>,
    old: HashMap<EventKey, (String, String)>,
}

impl Recent {
    fn get(&mut self, key: &EventKey) -> Option<(String, String)> {
        if let Some(at) = self.new.get(key) {
            return Some(at.clone());
        }
        let at = self.old.remove(key)?;
        self.insert(key.clone(), at.clone());
        Some(at)
    }

    fn insert(&mut self, key: EventKey, at: (String, String)) {
        if self.new.len() >= EVENTS_REMEMBERED / 2 {
            self.old = std::mem::take(&mut self.new);
        }
        self.new.insert(key, at);
    }

    fn forget(&mut self, gone: &HashSet<(String, String)>) {
        self.new.retain(|_, at| !gone.contains(at));
        self.old.retain(|_, at| !gone.contains(at));
    }
}

/// Records events as Event objects in the store, folding repeats of the same (pod, field
/// path, reason, message) into one object with a count, as the kubelet's recorder does.
pub struct StoreEvents {
    pub store: Arc<Store>,
    pub node_name: String,
    names: Mutex<Recent>,
}

impl StoreEvents {
    pub fn new(store: Arc<Store>, node_name: String) -> Self {
        StoreEvents { store, node_name, names: Mutex::default() }
    }

    /// Removes the events last seen more than `ttl` before `now`, as the API server's event
    /// TTL does (`--event-ttl`, 1 h), and what this sink remembers of them. Returns how many.
    pub fn expire(&self, now: Timestamp, ttl: SignedDuration) -> usize {
        let cutoff = now - ttl;
        let expired = match self.store.events_seen_before(cutoff) {
            Ok(expired) => expired,
            Err(e) => {
                tracing::warn!(e = %e.message, "expired events could not be read");
                return 0;
            }
        };
        // Seen again since the index was read: kept.
        let still_expired = |e: &Value| event_seen_before(e, cutoff);
        let gone: HashSet<(String, String)> = expired
            .into_iter()
            .filter(|(ns, name)| {
                self.store.delete_with(Wait::Queued, Resource::Events, ns, name, still_expired).is_ok()
            })
            .collect();
        if let Err(e) = self.store.flush() {
            // Still in the index: the next expiry tries them again.
            tracing::warn!(e = %e.message, "expired events could not be removed");
            return 0;
        }
        lock(&self.names).forget(&gone);
        gone.len()
    }
}

impl EventSink for StoreEvents {
    fn record(
        &self,
        pod: &Pod,
        field_path: Option<String>,
        kind: EventType,
        reason: &str,
        message: String,
        now: Timestamp,
    ) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let key = (uid, field_path.clone().unwrap_or_default(), reason.to_string(), message.clone());
        self.add(key, PodEvent::first(pod, field_path, kind, reason, &message, now), now);
    }

    fn record_node(&self, node: &str, kind: EventType, reason: &str, message: String, now: Timestamp) {
        let key = (node.to_string(), String::new(), reason.to_string(), message.clone());
        self.add(key, PodEvent::node(node, kind, reason, &message, now), now);
    }
}

impl StoreEvents {
    /// Counts one more of the event `key` on its object, or creates the object from `first`.
    fn add(&self, key: EventKey, first: PodEvent<'_>, now: Timestamp) {
        let now_v = serde_json::to_value(Time(now)).unwrap_or(Value::Null);
        let mut names = lock(&self.names);
        if let Some((ens, ename)) = names.get(&key) {
            let bumped = self.store.update_with(Wait::Queued, Resource::Events, &ens, &ename, |old| {
                let mut new = old.clone();
                new["count"] = json!(old["count"].as_i64().unwrap_or(1) + 1);
                new["lastTimestamp"] = now_v.clone();
                Ok(Some(new))
            });
            if bumped.is_ok() {
                return;
            }
        }
        let source = EventSource { component: Some("kubelet".into()), host: Some(self.node_name.clone()) };
        let mut event = first.to_event(source);
        event.reporting_component = Some("kubelet".into());
        event.reporting_instance = Some(self.node_name.clone());
        let ns = event.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let Ok(mut event) = serde_json::to_value(&event) else { return };
        // Named `<pod>.<nanoseconds in hex>` as the kubelet names them: events of one pass share
        // an instant, so a taken name moves on by a nanosecond.
        for _ in 0..16 {
            let name = meta_str(&event, "name").unwrap_or_default().to_string();
            match self.store.create_with(Wait::Queued, Resource::Events, event.clone()) {
                Ok(_) => {
                    names.insert(key, (ns, name));
                    return;
                }
                Err(e) if e.reason == "AlreadyExists" => event["metadata"]["name"] = json!(next_name(&name)),
                Err(e) => {
                    tracing::debug!(%e, "event not recorded");
                    return;
                }
            }
        }
    }
}

/// `web.18eaa440dfca4000` → `web.18eaa440dfca4001`.
fn next_name(name: &str) -> String {
    match name.rsplit_once('.').and_then(|(pod, n)| Some((pod, u64::from_str_radix(n, 16).ok()?))) {
        Some((pod, n)) => format!("{pod}.{:x}", n.wrapping_add(1)),
        None => format!("{name}.1"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podwright_runtime::Clock;

    /// An events sink over a fresh store, and a pod to record events of.
    fn events_of_web() -> (Arc<Store>, StoreEvents, Pod) {
        let store = Arc::new(Store::new(Clock::new()));
        let sink = StoreEvents::new(store.clone(), "node".into());
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".into());
        pod.metadata.uid = Some("u1".into());
        (store, sink, pod)
    }

    #[tokio::test]
    async fn events_expire_an_hour_after_they_were_last_seen() {
        let (store, sink, pod) = events_of_web();
        let t0: Timestamp = "2026-11-23T10:00:00Z".parse().unwrap();
        let minutes = |m: i64| t0 + SignedDuration::from_mins(m);
        sink.record(&pod, None, EventType::Normal, "Old", "once".into(), t0);
        sink.record(&pod, None, EventType::Normal, "Seen", "often".into(), t0);
        sink.record(&pod, None, EventType::Normal, "Seen", "often".into(), minutes(50));
        assert_eq!(sink.expire(minutes(59), EVENT_TTL_FOR_TEST), 0);
        assert_eq!(sink.expire(minutes(61), EVENT_TTL_FOR_TEST), 1);
        let left = store.list(Resource::Events, None).0;
        assert_eq!(left.len(), 1);
        assert_eq!(left[0]["reason"], "Seen");
        assert_eq!(left[0]["count"], 2);
        // Seen again after it expired: a new event, counted from one.
        sink.record(&pod, None, EventType::Normal, "Old", "once".into(), minutes(62));
        let again = store.list(Resource::Events, None).0;
        let old = again.iter().find(|e| e["reason"] == "Old").expect("recorded again");
        assert_eq!(old["count"], 1);
    }

    /// Events of one pass share an instant, and with it the kubelet's name for them.
    #[tokio::test]
    async fn events_at_the_same_instant_are_all_kept() {
        let (store, sink, pod) = events_of_web();
        let t0: Timestamp = "2026-11-23T10:00:00Z".parse().unwrap();
        sink.record(&pod, None, EventType::Normal, "BackOff", "Back-off pulling image".into(), t0);
        sink.record(&pod, None, EventType::Warning, "Failed", "Error: ImagePullBackOff".into(), t0);
        let mut reasons: Vec<String> =
            store.list(Resource::Events, None).0.iter().map(|e| e["reason"].as_str().unwrap().to_string()).collect();
        reasons.sort();
        assert_eq!(reasons, ["BackOff", "Failed"]);
        assert_eq!(next_name("web.18eaa440dfca4000"), "web.18eaa440dfca4001");
    }

    /// The events remembered for folding repeats are the most recent few thousand, as the
    /// kubelet's correlator keeps: an event seen lately stays, the oldest go.
    #[test]
    fn the_events_remembered_are_bounded_and_the_recent_stay() {
        let key = |i: usize| (format!("uid{i}"), String::new(), "Started".to_string(), String::new());
        let at = |i: usize| ("default".to_string(), format!("e{i}"));
        let mut recent = Recent::default();
        recent.insert(key(0), at(0));
        for i in 1..3 * EVENTS_REMEMBERED {
            recent.insert(key(i), at(i));
            // Seen again and again: never forgotten.
            assert_eq!(recent.get(&key(0)), Some(at(0)));
            assert!(recent.new.len() + recent.old.len() <= EVENTS_REMEMBERED);
        }
        assert_eq!(recent.get(&key(1)), None);
        assert_eq!(recent.get(&key(3 * EVENTS_REMEMBERED - 1)), Some(at(3 * EVENTS_REMEMBERED - 1)));
        recent.forget(&HashSet::from([at(0)]));
        assert_eq!(recent.get(&key(0)), None);
    }

    const EVENT_TTL_FOR_TEST: SignedDuration = SignedDuration::from_hours(1);

    /// `kubectl delete --force --grace-period=0` removes the object before the worker has
    /// stopped; the worker must still be removed from the node once it has.
    #[tokio::test]
    async fn a_pod_deleted_at_once_is_removed_from_the_node_when_it_finishes() {
        let store = Arc::new(Store::new(Clock::new()));
        let (link, mut feed) = NodeLink::new();
        let link = Arc::new(link);
        let obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"}});
        let stored = store.create(Resource::Pods, obj).unwrap();
        let uid = meta_str(&stored, "uid").unwrap().to_string();
        let pod: Pod = serde_json::from_value(stored).unwrap();
        store.delete(Resource::Pods, "default", "web").unwrap();
        assert!(!link.delete(&uid, 0));

        let statics = Arc::new(crate::static_pods::static_pods(store.clone(), link.clone(), "node"));
        let sink = StoreStatus { store, link, host_ip: None, statics };
        sink.publish(&PodUpdate { finished: false, ..PodUpdate::new(Arc::new(pod.clone())) });
        assert!(feed.removals.try_recv().is_err());
        sink.publish(&PodUpdate { finished: true, ..PodUpdate::new(Arc::new(pod)) });
        assert_eq!(feed.removals.try_recv().ok(), Some(uid));
    }
}
