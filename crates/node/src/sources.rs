//! Where pods come from: the seam between a mode's input and the node layer (the manifest file
//! for `run`; the local API, a static-pod directory and a real API server later).

use k8s_openapi::api::core::v1::Pod;
use std::collections::VecDeque;
use std::future::Future;

/// One change a source reports.
#[derive(Debug, Clone)]
// One short-lived value per change, moved once into PodWorkers::update: boxing only adds an allocation.
#[allow(clippy::large_enum_variant)]
pub enum PodChange {
    /// A new pod, or a new version of a pod already given (same UID). The source has validated
    /// it, and, for a new version, that the update changes only what may change.
    Upsert(Pod),
    /// Stop the pod: with `grace` seconds instead of its `terminationGracePeriodSeconds` when
    /// given (0: at once).
    Delete { uid: String, grace: Option<i64> },
}

/// A stream of pod changes, consumed by [`crate::PodWorkers::follow`].
pub trait PodSource: Send {
    /// The next change; `None` once the source has nothing more to say.
    fn next(&mut self) -> impl Future<Output = Option<PodChange>> + Send;
}

/// The pods of a manifest file, loaded and validated before anything starts: each is given
/// once, in file order, and then the source is done.
pub struct FileSource {
    pods: VecDeque<Pod>,
}

impl FileSource {
    pub fn new(pods: impl IntoIterator<Item = Pod>) -> Self {
        FileSource { pods: pods.into_iter().collect() }
    }
}

impl PodSource for FileSource {
    async fn next(&mut self) -> Option<PodChange> {
        self.pods.pop_front().map(PodChange::Upsert)
    }
}
