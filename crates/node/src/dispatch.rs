//! Routes the runtime's container events to the pod worker that owns the container, so a
//! container exit wakes exactly one worker at once.

use podwright_runtime::RuntimeEvent;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tokio::sync::broadcast::{Receiver, error::RecvError};

#[derive(Debug, Default)]
pub struct Dispatcher {
    owners: Mutex<HashMap<String, Arc<Notify>>>,
    /// Every worker's bell, for when events were lost and everyone must relist.
    all: Mutex<Vec<std::sync::Weak<Notify>>>,
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

    /// A bell for one pod worker.
    pub fn bell(&self) -> Arc<Notify> {
        let n = Arc::new(Notify::new());
        let mut all = self.all.lock().unwrap_or_else(|e| e.into_inner());
        // Sweeping dead bells only when the list doubles keeps this amortised O(1).
        if all.len().is_power_of_two() {
            all.retain(|w| w.strong_count() > 0);
        }
        all.push(Arc::downgrade(&n));
        n
    }

    pub fn register(&self, container_id: &str, bell: &Arc<Notify>) {
        let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        // Workers register every container they observe on every pass; most are known already.
        if owners.get(container_id).is_some_and(|b| Arc::ptr_eq(b, bell)) {
            return;
        }
        owners.insert(container_id.to_string(), bell.clone());
    }

    pub fn unregister(&self, container_id: &str) {
        self.owners.lock().unwrap_or_else(|e| e.into_inner()).remove(container_id);
    }

    fn wake_all(&self) {
        for n in self.all.lock().unwrap_or_else(|e| e.into_inner()).iter().filter_map(|w| w.upgrade()) {
            n.notify_one();
        }
    }
}
