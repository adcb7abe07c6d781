//! Records the pod's events as the kubelet's event recorder would, folding repeats of the same
//! (object, reason, message) into one Event with a count and first/last timestamps.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// What identifies an event for folding repeats: pod uid, field path, reason, message.
type Key = (String, Option<String>, String, String);

/// One recorded event, small; the full v1 `Event` is built only for `snapshot()`.
#[derive(Debug)]
struct Record {
    /// When its first event came, among all records: the order of `snapshot()`.
    seq: u64,
    pod_name: String,
    namespace: String,
    kind: EventType,
    count: i32,
    first: Timestamp,
    last: Timestamp,
}

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
    pub fn record(
        &self,
        pod: &Pod,
        field_path: Option<String>,
        kind: EventType,
        reason: &str,
        message: String,
        now: Timestamp,
    ) {
        tracing::debug!(pod = pod.metadata.name.as_deref(), reason, %message, "event");
        let key = (pod.metadata.uid.clone().unwrap_or_default(), field_path, reason.to_string(), message);
        let mut log = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = log.records.get_mut(&key) {
            r.count += 1;
            r.last = now;
            return;
        }
        let record = Record {
            seq: log.next_seq,
            pod_name: pod.metadata.name.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
            kind,
            count: 1,
            first: now,
            last: now,
        };
        log.next_seq += 1;
        log.records.insert(key, record);
    }

    /// Every event recorded so far as v1 `Event`s, in the order they first happened.
    pub fn snapshot(&self) -> Vec<Event> {
        let log = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut records: Vec<_> = log.records.iter().collect();
        records.sort_unstable_by_key(|(_, r)| r.seq);
        records
            .into_iter()
            .map(|((uid, field_path, reason, message), r)| Event {
                metadata: ObjectMeta {
                    name: Some(format!("{}.{:x}", r.pod_name, r.first.as_nanosecond())),
                    namespace: Some(r.namespace.clone()),
                    ..Default::default()
                },
                involved_object: ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(r.pod_name.clone()),
                    namespace: Some(r.namespace.clone()),
                    uid: Some(uid.clone()),
                    field_path: field_path.clone(),
                    ..Default::default()
                },
                reason: Some(reason.clone()),
                message: Some(message.clone()),
                type_: Some(
                    match r.kind {
                        EventType::Normal => "Normal",
                        EventType::Warning => "Warning",
                    }
                    .to_string(),
                ),
                count: Some(r.count),
                first_timestamp: Some(Time(r.first)),
                last_timestamp: Some(Time(r.last)),
                source: Some(EventSource { component: Some("podwright".into()), host: hostname() }),
                ..Default::default()
            })
            .collect()
    }
}

fn hostname() -> Option<String> {
    static HOST: OnceLock<Option<String>> = OnceLock::new();
    HOST.get_or_init(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|s| s.trim().to_string())).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_fold_into_one_event_with_a_count() {
        let log = EventLog::default();
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        pod.metadata.uid = Some("u".into());
        let t = |s| Timestamp::from_second(s).unwrap();
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
    }
}
