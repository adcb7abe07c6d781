//! Where pod statuses go: the seam between the node layer and a mode's output (the terminal and
//! `-o json` for `run`; the store behind the local API and an API server's status subresource
//! later).

use crate::pod_update::PodUpdate;
use tokio::sync::mpsc;

/// Receives every status a pod worker publishes, in order for each pod. Called from the pod's
/// worker, so an implementation must not block for long (hand slow work to a task).
pub trait StatusSink: Send + Sync {
    fn publish(&self, update: &PodUpdate);
}

/// Drops every status (a caller that only reads [`crate::PodWorkers::latest`]).
pub struct Discard;

impl StatusSink for Discard {
    fn publish(&self, _: &PodUpdate) {}
}

/// Every status as a stream: the receiver gets each update in the order it was published.
pub struct StatusStream {
    tx: mpsc::UnboundedSender<PodUpdate>,
}

impl StatusStream {
    pub fn new() -> (Self, mpsc::UnboundedReceiver<PodUpdate>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (StatusStream { tx }, rx)
    }
}

impl StatusSink for StatusStream {
    fn publish(&self, update: &PodUpdate) {
        // A receiver that is gone no longer wants statuses.
        let _ = self.tx.send(update.clone());
    }
}
