//! What passes between a pod's owner and its worker: [`Desired`] (the newest pod and whether it
//! is to stop, with the [`Deletion`]'s grace), [`PodUpdate`] (each status the worker publishes),
//! and [`Cancel`], the executor's view of a deletion (the kubelet cancels a pod's sync when the
//! pod is to stop).

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use std::sync::Arc;
use tokio::sync::watch;

/// What a pod worker is told to do: run this version of the pod, or stop it.
#[derive(Debug, Clone)]
pub(crate) struct Desired {
    pub pod: Arc<Pod>,
    pub deletion: Option<Deletion>,
}

/// A deletion and its grace period (the kubelet's `KillPodOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Deletion {
    /// Seconds instead of the pod's `terminationGracePeriodSeconds`; 0 stops at once.
    pub grace: Option<i64>,
}

impl Deletion {
    /// A later deletion may shorten the grace period, never lengthen it.
    pub fn and(self, later: Deletion) -> Deletion {
        let grace = match (self.grace, later.grace) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Deletion { grace }
    }
}

/// Resolves once the pod's deletion has been asked for: what the executor's waits (a
/// `postStart` hook, a credential lookup, a pull) give up on.
#[derive(Clone)]
pub(crate) struct Cancel {
    desired: watch::Receiver<Desired>,
}

impl Cancel {
    pub fn new(desired: watch::Receiver<Desired>) -> Self {
        Cancel { desired }
    }

    /// Resolves once deletion is asked for; never if the pod's owner has gone without asking.
    pub async fn requested(&self) {
        let mut desired = self.desired.clone();
        if desired.wait_for(|d| d.deletion.is_some()).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// What the worker publishes on every status change: the pod as given and its status, shared
/// rather than copied (a pod's status changes a dozen times in its life).
#[derive(Debug, Clone)]
pub struct PodUpdate {
    pub spec: Arc<Pod>,
    pub status: Option<Arc<PodStatus>>,
    /// The pod reached a terminal phase and nothing of it runs any more.
    pub finished: bool,
}

impl PodUpdate {
    /// The update before the first status.
    pub fn new(pod: Arc<Pod>) -> Self {
        PodUpdate { spec: pod, status: None, finished: false }
    }

    /// The whole pod, status included.
    pub fn pod(&self) -> Pod {
        let mut p = (*self.spec).clone();
        p.status = self.status.as_deref().cloned();
        p
    }

    pub fn phase(&self) -> Option<&str> {
        self.status.as_ref()?.phase.as_deref()
    }
}
