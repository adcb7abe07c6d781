//! `run --timeline FILE`: every status and event goes on to `run`'s own sinks and into one
//! timeline recorder per pod; at the end the timelines are written to FILE as one HTML page.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podwright_node::{EventSink, EventType, PodUpdate, StatusSink};
use podwright_runtime::Clock;
use podwright_timeline::{Recorder, render_html_pods};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
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
        let event = Event {
            involved_object: ObjectReference {
                uid: pod.metadata.uid.clone(),
                field_path: field_path.clone(),
                ..Default::default()
            },
            reason: Some(reason.to_string()),
            message: Some(message.clone()),
            type_: Some(kind.as_str().to_string()),
            last_timestamp: Some(Time(now)),
            ..Default::default()
        };
        self.with_pod(pod, now, |r| r.event(&event));
        self.events.record(pod, field_path, kind, reason, message, now);
    }
}

/// The file `--timeline` names, created before any pod starts so that a path that cannot be
/// written fails the run before it begins.
pub struct TimelineFile {
    path: PathBuf,
    file: File,
}

impl TimelineFile {
    pub fn create(path: &Path) -> Result<TimelineFile, String> {
        let file = File::create(path).map_err(|e| format!("cannot write the timeline to {}: {e}", path.display()))?;
        Ok(TimelineFile { path: path.to_path_buf(), file })
    }

    pub fn write(mut self, html: &str) -> Result<(), String> {
        self.file
            .write_all(html.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|e| format!("cannot write the timeline to {}: {e}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodStatus;
    use podwright_node::EventLog;
    use podwright_node::sinks::Discard;

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
    }
}
