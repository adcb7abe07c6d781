//! Routes the runtime's container events to the pod worker that owns the container, so a
//! container exit wakes exactly one worker at once.

use jiff::Timestamp;
use podwright_runtime::{RuntimeEvent, RuntimeEventKind};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::Notify;
use tokio::sync::broadcast::{Receiver, error::RecvError};

#[derive(Debug, Default)]
pub(crate) struct Dispatcher {
    owners: Mutex<HashMap<String, Arc<Notify>>>,
    /// Every worker's bell by pod UID: for when events were lost and everyone must observe
    /// again, and for the node-wide relist, which finds changes by pod.
    pods: Mutex<HashMap<String, Weak<Notify>>>,
    /// Containers (init and app) whose exit 0 their worker acts on before the runtime's record shows it
    /// (`RuntimeEventKind::Completed`), and when they finished, once they have.
    completions: Mutex<HashMap<String, Option<Timestamp>>>,
}

impl Dispatcher {
    /// Starts routing `events`; the task ends when the runtime's event stream closes.
    pub fn start(mut events: Receiver<RuntimeEvent>) -> Arc<Dispatcher> {
        let d = Arc::new(Dispatcher::default());
        let weak = Arc::downgrade(&d);
        tokio::spawn(async move {
            loop {
                let ev = events.recv().await;
                let Some(d) = weak.upgrade() else { return };
                match ev {
                    Ok(ev) => {
                        if let RuntimeEventKind::Completed { finished_at } = ev.kind {
                            let mut completions = d.completions.lock().unwrap_or_else(|e| e.into_inner());
                            // Nobody waits for the others: their `Exited` comes soon enough.
                            let Some(at) = completions.get_mut(&ev.container_id) else { continue };
                            *at = Some(finished_at);
                        }
                        let owner = d.owners.lock().unwrap_or_else(|e| e.into_inner()).get(&ev.container_id).cloned();
                        if let Some(n) = owner {
                            n.notify_one();
                        }
                    }
                    Err(RecvError::Lagged(_)) => d.wake_all(),
                    Err(RecvError::Closed) => return,
                }
            }
        });
        d
    }

    /// The bell of pod `uid`'s worker.
    pub fn bell(&self, uid: &str) -> Arc<Notify> {
        let n = Arc::new(Notify::new());
        let mut pods = self.pods.lock().unwrap_or_else(|e| e.into_inner());
        // Sweeping dead bells only when the map doubles keeps this amortised O(1).
        if pods.len().is_power_of_two() {
            pods.retain(|_, w| w.strong_count() > 0);
        }
        pods.insert(uid.to_string(), Arc::downgrade(&n));
        n
    }

    /// Wakes pod `uid`'s worker, if it has one.
    pub fn ring_pod(&self, uid: &str) {
        let bell = self.pods.lock().unwrap_or_else(|e| e.into_inner()).get(uid).and_then(Weak::upgrade);
        if let Some(n) = bell {
            n.notify_one();
        }
    }

    pub fn register(&self, container_id: &str, bell: &Arc<Notify>) {
        let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        // Workers register every container they observe on every pass; most are known already.
        if owners.get(container_id).is_some_and(|b| Arc::ptr_eq(b, bell)) {
            return;
        }
        owners.insert(container_id.to_string(), bell.clone());
    }

    /// Routes `container_id`'s events to pod `uid`'s worker, if it has one.
    pub fn register_for_pod(&self, container_id: &str, uid: &str) {
        let bell = self.pods.lock().unwrap_or_else(|e| e.into_inner()).get(uid).and_then(Weak::upgrade);
        if let Some(bell) = bell {
            self.register(container_id, &bell);
        }
    }

    pub fn unregister(&self, container_id: &str) {
        self.owners.lock().unwrap_or_else(|e| e.into_inner()).remove(container_id);
        self.completions.lock().unwrap_or_else(|e| e.into_inner()).remove(container_id);
    }

    /// Wakes the owner of `container_id` (an init or app container) at its exit 0 as soon as the
    /// runtime publishes it, and keeps when it finished for [`Self::completed`].
    pub fn await_completion(&self, container_id: &str) {
        self.completions.lock().unwrap_or_else(|e| e.into_inner()).entry(container_id.to_string()).or_default();
    }

    /// When `container_id`, awaited, exited 0, if the runtime has said so. Kept until the
    /// container is removed: a pass that read the runtime's record before it showed the exit
    /// still finds it here.
    pub fn completed(&self, container_id: &str) -> Option<Timestamp> {
        self.completions.lock().unwrap_or_else(|e| e.into_inner()).get(container_id).copied().flatten()
    }

    fn wake_all(&self) {
        for n in self.pods.lock().unwrap_or_else(|e| e.into_inner()).values().filter_map(Weak::upgrade) {
            n.notify_one();
        }
    }
}
