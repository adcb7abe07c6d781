//! Timelines of pods' lives (`run --timeline FILE`, `podwright timeline POD`): a status and
//! event sink that passes everything on to the mode's own sinks and into one timeline recorder
//! per pod, drawn as one HTML page when asked.

use crate::events::{EventSink, EventType, PodEvent};
use crate::pod_update::PodUpdate;
use crate::sinks::StatusSink;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{EventSource, Pod};
use podwright_runtime::Clock;
use podwright_timeline::{Recorder, render_html_pods};
use std::sync::{Arc, Mutex};

/// The status and event sink of a run with `--timeline`.
pub struct Recording {
    clock: Clock,
    status: Arc<dyn StatusSink>,
    events: Arc<dyn EventSink>,
    /// One recorder per pod: the manifest's, in its order, then any other in the order it
    /// showed up.
    pods: Mutex<Vec<Recorder>>,
}

impl Recording {
    /// Records the manifest's `pods` and what passes on to `status` and `events`, with the
    /// time of `clock`.
    pub fn new(clock: Clock, pods: &[Pod], status: Arc<dyn StatusSink>, events: Arc<dyn EventSink>) -> Self {
        let now = clock.now();
        let pods = pods.iter().map(|p| Recorder::new(p, now)).collect();
        Recording { clock, status, events, pods: Mutex::new(pods) }
    }

    /// The pods' timelines up to now as one HTML page.
    pub fn render(&self) -> String {
        let now = self.clock.now();
        let pods = self.pods.lock().unwrap_or_else(|e| e.into_inner());
        let timelines: Vec<_> = pods
            .iter()
            .map(|r| {
                let mut t = r.timeline().clone();
                t.extend_to(now);
                t
            })
            .collect();
        render_html_pods(&timelines)
    }

    /// One pod's timeline up to now, if the pod has been seen.
    pub fn render_pod(&self, uid: &str) -> Option<String> {
        let now = self.clock.now();
        let pods = self.pods.lock().unwrap_or_else(|e| e.into_inner());
        let mut t = pods.iter().find(|r| r.timeline().uid == uid)?.timeline().clone();
        t.extend_to(now);
        Some(podwright_timeline::render_html(&t))
    }

    /// Drops a removed pod's recorder.
    pub fn forget(&self, uid: &str) {
        self.pods.lock().unwrap_or_else(|e| e.into_inner()).retain(|r| r.timeline().uid != uid);
    }

    /// Runs `f` on the pod's recorder, made when the pod is first seen.
    fn with_pod(&self, pod: &Pod, now: Timestamp, f: impl FnOnce(&mut Recorder)) {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let mut pods = self.pods.lock().unwrap_or_else(|e| e.into_inner());
        let i = match pods.iter().position(|r| r.timeline().uid == uid) {
            Some(i) => i,
            None => {
                pods.push(Recorder::new(pod, now));
                pods.len() - 1
            }
        };
        f(&mut pods[i]);
    }
}

impl StatusSink for Recording {
    fn publish(&self, update: &PodUpdate) {
        self.status.publish(update);
        let now = self.clock.now();
        self.with_pod(&update.spec, now, |r| {
            if let Some(status) = &update.status {
                r.status(status, now);
            }
        });
    }
}

impl EventSink for Recording {
    fn record(
        &self,
        pod: &Pod,
        field_path: Option<String>,
        kind: EventType,
        reason: &str,
        message: String,
        now: Timestamp,
    ) {
        // The recorder wants each occurrence, which the event log folds into counts.
        let event =
            PodEvent::first(pod, field_path.clone(), kind, reason, &message, now).to_event(EventSource::default());
        self.with_pod(pod, now, |r| r.event(&event));
        self.events.record(pod, field_path, kind, reason, message, now);
    }

    /// Not drawn (the timeline pictures pods); passed on.
    fn record_node(&self, node: &str, kind: EventType, reason: &str, message: String, now: Timestamp) {
        self.events.record_node(node, kind, reason, message, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventLog;
    use crate::sinks::Discard;
    use k8s_openapi::api::core::v1::PodStatus;

    fn pod(name: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }))
        .unwrap()
    }

    #[test]
    fn pods_are_drawn_in_manifest_order_and_everything_passes_on() {
        let clock = Clock::new();
        let (a, b) = (pod("a"), pod("b"));
        let events = Arc::new(EventLog::default());
        let recording = Recording::new(clock, &[a.clone(), b.clone()], Arc::new(Discard), events.clone());
        // b's worker publishes first.
        let status = PodStatus { phase: Some("Running".into()), ..Default::default() };
        recording.publish(&PodUpdate { spec: Arc::new(b), status: Some(Arc::new(status)), finished: false });
        recording.record(&a, Some("spec.containers{c}".into()), EventType::Warning, "BackOff", "m".into(), clock.now());
        let html = recording.render();
        // The legend draws every class once; look at the pods' pictures only.
        let html = &html[..html.find("<div class=\"legend\">").unwrap()];
        let (at_a, at_b) = (html.find("data-uid=\"uid-a\"").unwrap(), html.find("data-uid=\"uid-b\"").unwrap());
        assert!(at_a < at_b, "manifest order");
        assert!(html.contains("class=\"bar phase running\""), "b's status was recorded");
        assert!(html.contains("class=\"marker event warning\""), "a's event was recorded");
        assert_eq!(events.snapshot().len(), 1, "the event went on to the log");
        assert!(recording.render_pod("uid-a").unwrap().contains("data-uid=\"uid-a\""));
        recording.forget("uid-a");
        assert!(recording.render_pod("uid-a").is_none());
    }
}
