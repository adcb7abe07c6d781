//! Events to the API server, as the kubelet's recorder sends them: source `kubelet` on this
//! host, a repeat of the same (object, field path, reason, message) folded into the first
//! event's `count` and `lastTimestamp` by a PATCH (client-go's `EventCorrelator`).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams, PostParams};
use podwright_node::events::PodEvent;
use podwright_node::{EventSink, EventType};
use serde_json::json;
use std::collections::HashMap;
use tokio::sync::mpsc;

/// What makes a repeat of an event: its object (the pod's UID or the node's name), field path,
/// reason and message.
type EventKey = (String, String, String, String);

/// The most events whose repeats are remembered (client-go's correlator cache).
const REMEMBERED: usize = 4096;

/// An event to send: the first occurrence as an object, and what tells its repeats.
struct Pending {
    key: EventKey,
    event: Event,
}

/// The node's [`EventSink`]: hands each event to a task that sends it, so that a slow API
/// server never holds a pod worker up.
pub struct ApiEvents {
    tx: mpsc::UnboundedSender<Pending>,
    node: String,
}

impl ApiEvents {
    /// The sink, and the task that sends what it is given.
    pub fn new(client: kube::Client, node: &str) -> (ApiEvents, impl Future<Output = ()> + Send + use<>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (ApiEvents { tx, node: node.to_string() }, send_events(client, rx))
    }

    fn source(&self) -> EventSource {
        EventSource { component: Some("kubelet".into()), host: Some(self.node.clone()) }
    }

    fn send(&self, key: EventKey, first: PodEvent<'_>) {
        let mut event = first.to_event(self.source());
        event.reporting_component = Some("kubelet".into());
        event.reporting_instance = Some(self.node.clone());
        // The task lives as long as the node.
        let _ = self.tx.send(Pending { key, event });
    }
}

impl EventSink for ApiEvents {
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
        self.send(key, PodEvent::first(pod, field_path, kind, reason, &message, now));
    }

    fn record_node(&self, node: &str, kind: EventType, reason: &str, message: String, now: Timestamp) {
        let key = (node.to_string(), String::new(), reason.to_string(), message.clone());
        self.send(key, PodEvent::node(node, kind, reason, &message, now));
    }
}

/// Sends each event; a repeat raises the count of the event first sent for its key.
async fn send_events(client: kube::Client, mut rx: mpsc::UnboundedReceiver<Pending>) {
    // (namespace, name, count) of the event sent for each key.
    let mut sent: HashMap<EventKey, (String, String, i32)> = HashMap::new();
    while let Some(Pending { key, event }) = rx.recv().await {
        let ns = event.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let api: Api<Event> = Api::namespaced(client.clone(), &ns);
        if let Some((ens, name, count)) = sent.get_mut(&key) {
            let patch = json!({"count": *count + 1, "lastTimestamp": event.last_timestamp.clone().map(|Time(t)| t)});
            let events: Api<Event> = Api::namespaced(client.clone(), ens);
            match events.patch(name, &PatchParams::default(), &Patch::Strategic(patch)).await {
                Ok(_) => {
                    *count += 1;
                    continue;
                }
                Err(e) => tracing::debug!(%e, "event repeat not recorded; sending it anew"),
            }
        }
        let name = event.metadata.name.clone().unwrap_or_default();
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => {
                if sent.len() >= REMEMBERED {
                    sent.clear();
                }
                sent.insert(key, (ns, name, 1));
            }
            Err(e) => tracing::debug!(%e, "event not recorded"),
        }
    }
}
