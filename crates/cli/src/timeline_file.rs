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
    /// One recorder per pod, in the order the pods first showed up.
    pods: Mutex<Vec<Recorder>>,
}

impl Recording {
    /// Records what passes on to `status` and `events`, with the time of `clock`.
    pub fn new(clock: Clock, status: Arc<dyn StatusSink>, events: Arc<dyn EventSink>) -> Self {
        Recording { clock, status, events, pods: Mutex::default() }
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
