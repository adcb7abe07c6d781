//! Records the pod's events as the kubelet's event recorder would, folding repeats of the same
//! (object, reason, message) into one Event with a count and first/last timestamps.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct EventLog {
    events: Mutex<Vec<Event>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
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
        let type_ = match kind {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        tracing::debug!(pod = pod.metadata.name.as_deref(), reason, %message, "event");
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let same = |e: &&mut Event| {
            e.involved_object.uid == pod.metadata.uid
                && e.involved_object.field_path == field_path
                && e.reason.as_deref() == Some(reason)
                && e.message.as_deref() == Some(message.as_str())
        };
        if let Some(e) = events.iter_mut().find(same) {
            e.count = Some(e.count.unwrap_or(1) + 1);
            e.last_timestamp = Some(Time(now));
            return;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        events.push(Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}", now.as_nanosecond())),
                namespace: Some(ns.clone()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name),
                namespace: Some(ns),
                uid: pod.metadata.uid.clone(),
                field_path,
                ..Default::default()
            },
            reason: Some(reason.to_string()),
            message: Some(message),
            type_: Some(type_.to_string()),
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            source: Some(EventSource { component: Some("podwright".into()), host: hostname() }),
            ..Default::default()
        });
    }

    pub fn snapshot(&self) -> Vec<Event> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|s| s.trim().to_string())
}
