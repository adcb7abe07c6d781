//! Records the pod's events as the kubelet's event recorder would, folding repeats of the same
//! (object, reason, message) into one Event with a count and first/last timestamps.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

pub(crate) mod wording;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    /// The v1 `Event`'s `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What identifies an event for folding repeats (pod uid, field path, reason, message), and the
/// pod's name and namespace, which the uid fixes. One allocation for all six: a pod records a
/// dozen events, and six small strings each would weigh more than their text.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Key {
    /// The parts one after another.
    text: Box<str>,
    /// Where each part but the last ends in `text`.
    ends: [u32; 5],
    /// Whether the field path (part 1) is given, as opposed to empty.
    has_field_path: bool,
    /// What the event is about: a pod, or (uid and name the node's name) the node.
    involves: Involved,
}

const UID: usize = 0;
const FIELD_PATH: usize = 1;
const REASON: usize = 2;
const MESSAGE: usize = 3;
const POD_NAME: usize = 4;
const NAMESPACE: usize = 5;

impl Key {
    fn new(parts: [&str; 6], has_field_path: bool, involves: Involved) -> Key {
        let mut text = String::with_capacity(parts.iter().map(|p| p.len()).sum());
        let mut ends = [0; 5];
        for (i, part) in parts.into_iter().enumerate() {
            text.push_str(part);
            if let Some(end) = ends.get_mut(i) {
                // An event's text is far below 4 GiB.
                *end = text.len() as u32;
            }
        }
        Key { text: text.into_boxed_str(), ends, has_field_path, involves }
    }

    fn part(&self, i: usize) -> &str {
        let start = i.checked_sub(1).map_or(0, |j| self.ends[j] as usize);
        let end = self.ends.get(i).map_or(self.text.len(), |e| *e as usize);
        &self.text[start..end]
    }

    fn field_path(&self) -> Option<String> {
        self.has_field_path.then(|| self.part(FIELD_PATH).to_string())
    }
}

/// One recorded event, small; the full v1 `Event` is built only for `snapshot()`.
#[derive(Debug)]
struct Record {
    /// When its first event came, among all records: the order of `snapshot()`.
    seq: u64,
    kind: EventType,
    count: i32,
    first: Timestamp,
    last: Timestamp,
}

/// The kind of object an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Involved {
    Pod,
    /// The node itself, as the kubelet's `nodeRef` names it (kind `Node`, its name as the uid,
    /// no namespace): image garbage collection's events.
    Node,
}

/// Where a pod's events go: [`EventLog`] for `run` (printed with the final pods), the local
/// API's store and a real API server later. Called from pod workers as things happen, so an
/// implementation must not block for long.
pub trait EventSink: Send + Sync {
    fn record(
        &self,
        pod: &Pod,
        field_path: Option<String>,
        kind: EventType,
        reason: &str,
        message: String,
        now: Timestamp,
    );

    /// An event about the node named `node` rather than one of its pods.
    fn record_node(&self, node: &str, kind: EventType, reason: &str, message: String, now: Timestamp);
}

impl EventSink for EventLog {
    fn record(
        &self,
        pod: &Pod,
        field_path: Option<String>,
        kind: EventType,
        reason: &str,
        message: String,
        now: Timestamp,
    ) {
        tracing::debug!(pod = pod.metadata.name.as_deref(), reason, %message, "event");
        let m = &pod.metadata;
        let parts = [
            m.uid.as_deref().unwrap_or_default(),
            field_path.as_deref().unwrap_or_default(),
            reason,
            &message,
            m.name.as_deref().unwrap_or_default(),
            m.namespace.as_deref().unwrap_or("default"),
        ];
        self.add(Key::new(parts, field_path.is_some(), Involved::Pod), kind, now);
    }

    fn record_node(&self, node: &str, kind: EventType, reason: &str, message: String, now: Timestamp) {
        tracing::debug!(node, reason, %message, "event");
        self.add(Key::new([node, "", reason, &message, node, ""], false, Involved::Node), kind, now);
    }
}

impl EventLog {
    /// Counts one more of the event `key`, first seen now unless it was before.
    fn add(&self, key: Key, kind: EventType, now: Timestamp) {
        let mut log = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = log.records.get_mut(&key) {
            r.count += 1;
            r.last = now;
            return;
        }
        let record = Record { seq: log.next_seq, kind, count: 1, first: now, last: now };
        log.next_seq += 1;
        log.records.insert(key, record);
    }
}

/// The events of every pod in memory, with repeats folded, as v1 `Event`s on demand.
#[derive(Debug, Default)]
pub struct EventLog {
    inner: Mutex<Log>,
}

#[derive(Debug, Default)]
struct Log {
    /// Records in no order: a second list of keys for their order would cost a copy of every
    /// key, and only `snapshot()` needs it.
    records: HashMap<Key, Record>,
    next_seq: u64,
}

impl EventLog {
    /// Every event recorded so far as v1 `Event`s, in the order they first happened.
    pub fn snapshot(&self) -> Vec<Event> {
        let log = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut records: Vec<_> = log.records.iter().collect();
        records.sort_unstable_by_key(|(_, r)| r.seq);
        records
            .into_iter()
            .map(|(k, r)| {
                let e = PodEvent {
                    involves: k.involves,
                    pod_name: k.part(POD_NAME),
                    namespace: k.part(NAMESPACE),
                    uid: k.part(UID),
                    field_path: k.field_path(),
                    kind: r.kind,
                    reason: k.part(REASON),
                    message: k.part(MESSAGE),
                    count: r.count,
                    first: r.first,
                    last: r.last,
                };
                e.to_event(EventSource { component: Some("podwright".into()), host: hostname() })
            })
            .collect()
    }
}

/// One event about a pod (or the node), with its repeats folded in, as the kubelet's recorder
/// writes it: what every sink that hands out v1 `Event`s builds them from.
#[derive(Debug, Clone)]
pub struct PodEvent<'a> {
    /// A pod's unless [`PodEvent::node`] made it; a node's has its name as `pod_name` and
    /// `uid`, and no namespace.
    pub involves: Involved,
    pub pod_name: &'a str,
    pub namespace: &'a str,
    pub uid: &'a str,
    pub field_path: Option<String>,
    pub kind: EventType,
    pub reason: &'a str,
    pub message: &'a str,
    pub count: i32,
    pub first: Timestamp,
    pub last: Timestamp,
}

impl<'a> PodEvent<'a> {
    /// A first occurrence, at `now`, of what an [`EventSink`] is given.
    pub fn first(
        pod: &'a Pod,
        field_path: Option<String>,
        kind: EventType,
        reason: &'a str,
        message: &'a str,
        now: Timestamp,
    ) -> Self {
        let m = &pod.metadata;
        PodEvent {
            involves: Involved::Pod,
            pod_name: m.name.as_deref().unwrap_or_default(),
            namespace: m.namespace.as_deref().unwrap_or("default"),
            uid: m.uid.as_deref().unwrap_or_default(),
            field_path,
            kind,
            reason,
            message,
            count: 1,
            first: now,
            last: now,
        }
    }

    /// A first occurrence, at `now`, of an event about the node named `node`.
    pub fn node(node: &'a str, kind: EventType, reason: &'a str, message: &'a str, now: Timestamp) -> Self {
        PodEvent {
            involves: Involved::Node,
            pod_name: node,
            namespace: "",
            uid: node,
            field_path: None,
            kind,
            reason,
            message,
            count: 1,
            first: now,
            last: now,
        }
    }

    /// The v1 `Event`, named `<pod>.<first time in nanoseconds, hex>` as the kubelet names them.
    /// A node's event is in the `default` namespace, where the kubelet's recorder puts events
    /// about objects without one.
    pub fn to_event(&self, source: EventSource) -> Event {
        let involved_object = match self.involves {
            Involved::Pod => ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(self.pod_name.to_string()),
                namespace: Some(self.namespace.to_string()),
                uid: Some(self.uid.to_string()),
                field_path: self.field_path.clone(),
                ..Default::default()
            },
            Involved::Node => ObjectReference {
                kind: Some("Node".into()),
                name: Some(self.pod_name.to_string()),
                uid: Some(self.uid.to_string()),
                ..Default::default()
            },
        };
        let namespace = if self.namespace.is_empty() { "default" } else { self.namespace };
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", self.pod_name, self.first.as_nanosecond())),
                namespace: Some(namespace.to_string()),
                ..Default::default()
            },
            involved_object,
            reason: Some(self.reason.to_string()),
            message: Some(self.message.to_string()),
            type_: Some(self.kind.as_str().to_string()),
            count: Some(self.count),
            first_timestamp: Some(Time(self.first)),
            last_timestamp: Some(Time(self.last)),
            source: Some(source),
            ..Default::default()
        }
    }
}

fn hostname() -> Option<String> {
    static HOST: OnceLock<Option<String>> = OnceLock::new();
    HOST.get_or_init(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|s| s.trim().to_string())).clone()
}

/// One container's events held back: the pod, the field path, and each event as it was
/// recorded.
type Held = (Pod, Vec<(EventType, String, String, Timestamp)>);

/// The node's event sink, holding back the events of containers prepared ahead of their turn
/// (the pipelined start: their pull and creation happen while the init container before them
/// runs) until they start, and dropping them should they never start: a container that never
/// ran has no events, as with the kubelet.
pub(crate) struct Deferring {
    inner: Arc<dyn EventSink>,
    /// By pod UID and field path.
    held: Mutex<HashMap<(String, String), Option<Held>>>,
}

impl Deferring {
    pub fn new(inner: Arc<dyn EventSink>) -> Deferring {
        Deferring { inner, held: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Option<Held>>> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Holds back the events of pod `uid`'s container at `field_path` from now on.
    pub fn hold(&self, uid: &str, field_path: String) {
        self.lock().insert((uid.to_string(), field_path), None);
    }

    /// Records what was held back, when it happened, and holds nothing back any more.
    pub fn release(&self, uid: &str, field_path: String) {
        let held = self.lock().remove(&(uid.to_string(), field_path.clone())).flatten();
        if let Some((pod, events)) = held {
            for (kind, reason, message, at) in events {
                self.inner.record(&pod, Some(field_path.clone()), kind, &reason, message, at);
            }
        }
    }

    /// Forgets what was held back, and holds nothing back any more.
    pub fn discard(&self, uid: &str, field_path: String) {
        self.lock().remove(&(uid.to_string(), field_path));
    }
}

impl EventSink for Deferring {
    fn record(
        &self,
        pod: &Pod,
        field_path: Option<String>,
        kind: EventType,
        reason: &str,
        message: String,
        now: Timestamp,
    ) {
        if let Some(path) = &field_path {
            let key = (pod.metadata.uid.clone().unwrap_or_default(), path.clone());
            if let Some(held) = self.lock().get_mut(&key) {
                let (_, events) = held.get_or_insert_with(|| (pod.clone(), Vec::new()));
                events.push((kind, reason.to_string(), message, now));
                return;
            }
        }
        self.inner.record(pod, field_path, kind, reason, message, now);
    }

    fn record_node(&self, node: &str, kind: EventType, reason: &str, message: String, now: Timestamp) {
        self.inner.record_node(node, kind, reason, message, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod with just a name and a uid.
    fn pod(name: &str, uid: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.into());
        pod.metadata.uid = Some(uid.into());
        pod
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn repeats_fold_into_one_event_with_a_count() {
        let log = EventLog::default();
        let pod = pod("p", "u");
        let fp = Some("spec.containers{c}".to_string());
        log.record(&pod, fp.clone(), EventType::Warning, "BackOff", "m".into(), t(1));
        log.record(&pod, None, EventType::Normal, "Other", "x".into(), t(2));
        log.record(&pod, fp.clone(), EventType::Warning, "BackOff", "m".into(), t(3));
        let evs = log.snapshot();
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].count, Some(2));
        assert_eq!(evs[0].first_timestamp, Some(Time(t(1))));
        assert_eq!(evs[0].last_timestamp, Some(Time(t(3))));
        assert_eq!(evs[0].involved_object.field_path, fp);
        assert_eq!(evs[0].type_.as_deref(), Some("Warning"));
        assert_eq!(evs[1].reason.as_deref(), Some("Other"));
        assert_eq!(evs[1].message.as_deref(), Some("x"));
        assert_eq!(evs[1].involved_object.field_path, None);
        assert_eq!(evs[1].involved_object.name.as_deref(), Some("p"));
        assert_eq!(evs[1].involved_object.namespace.as_deref(), Some("default"));
        assert_eq!(evs[1].involved_object.uid.as_deref(), Some("u"));
    }

    #[test]
    fn node_events_involve_the_node_and_fold_apart_from_pod_events() {
        let log = EventLog::default();
        let pod = pod("n1", "n1");
        log.record_node("n1", EventType::Warning, "FreeDiskSpaceFailed", "m".into(), t(1));
        log.record(&pod, None, EventType::Warning, "FreeDiskSpaceFailed", "m".into(), t(2));
        log.record_node("n1", EventType::Warning, "FreeDiskSpaceFailed", "m".into(), t(3));
        let evs = log.snapshot();
        assert_eq!(evs.len(), 2, "a pod named as the node is another object: {evs:?}");
        let node = &evs[0];
        assert_eq!(node.count, Some(2));
        assert_eq!(node.metadata.namespace.as_deref(), Some("default"));
        let o = &node.involved_object;
        assert_eq!((o.kind.as_deref(), o.name.as_deref(), o.uid.as_deref()), (Some("Node"), Some("n1"), Some("n1")));
        assert_eq!((o.namespace.as_deref(), o.api_version.as_deref()), (None, None));
        assert_eq!(evs[1].involved_object.kind.as_deref(), Some("Pod"));
    }

    #[test]
    fn a_prepared_containers_events_wait_for_its_start_and_go_if_it_never_has_one() {
        let log = Arc::new(EventLog::default());
        let sink = Deferring::new(log.clone());
        let (a, b) = (pod("a", "ua"), pod("b", "ub"));
        let fp = "spec.initContainers{i2}".to_string();
        sink.hold("ua", fp.clone());
        sink.record(&a, Some(fp.clone()), EventType::Normal, "Pulled", "present".into(), t(1));
        // Another container's, another pod's: at once.
        sink.record(&a, Some("spec.initContainers{i1}".into()), EventType::Normal, "Started", "i1".into(), t(2));
        sink.record(&b, Some(fp.clone()), EventType::Normal, "Pulled", "present".into(), t(2));
        let reasons = |log: &EventLog| log.snapshot().into_iter().map(|e| e.involved_object.uid).collect::<Vec<_>>();
        assert_eq!(reasons(&log), [Some("ua".to_string()), Some("ub".to_string())]);
        sink.release("ua", fp.clone());
        let evs = log.snapshot();
        let held = evs.iter().find(|e| {
            e.involved_object.field_path.as_deref() == Some(fp.as_str())
                && e.involved_object.uid.as_deref() == Some("ua")
        });
        assert_eq!(held.map(|e| e.first_timestamp.clone()), Some(Some(Time(t(1)))), "{evs:?}");
        // Discarded: never recorded; and nothing is held back afterwards.
        sink.hold("ub", fp.clone());
        sink.record(&b, Some(fp.clone()), EventType::Warning, "Failed", "no".into(), t(3));
        sink.discard("ub", fp.clone());
        sink.record(&b, Some(fp.clone()), EventType::Normal, "Created", "yes".into(), t(4));
        let reasons: Vec<_> = log.snapshot().into_iter().filter_map(|e| e.reason).collect();
        assert!(!reasons.contains(&"Failed".to_string()) && reasons.contains(&"Created".to_string()), "{reasons:?}");
    }
}
