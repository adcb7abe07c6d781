//! The node-wide relist (the kubelet's PLEG relist, in our terms): every few seconds one cheap
//! listing of podwright's sandboxes and containers, and the worker of every pod whose objects
//! changed since the last listing is woken. Container exits reach their worker at once as
//! runtime events; this catches what events miss (a reconnect, a sandbox whose pause process
//! died) for every pod at the cost of two runtime calls, where a relist by each worker costs
//! several calls per pod.

use crate::cri::labels;
use crate::pleg::dispatch::Dispatcher;
use podwright_runtime::{Clock, Listed, Runtime, RuntimeResult};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often the node relists. The kubelet's generic PLEG relists every second because it has
/// no events; with events this is only the safety net.
pub const RELIST: Duration = Duration::from_secs(5);

/// What the relist compares per pod: its sandboxes' and containers' IDs and states.
pub(crate) type Fingerprint = Vec<(String, i32)>;

/// Starts relisting; the task ends once the dispatcher is gone (no worker is left).
pub(crate) fn start(runtime: Arc<dyn Runtime>, clock: Clock, dispatcher: Weak<Dispatcher>) {
    tokio::spawn(async move {
        let mut last = HashMap::new();
        loop {
            clock.sleep_until(clock.now() + RELIST).await;
            let Some(dispatcher) = dispatcher.upgrade() else { return };
            match snapshot(runtime.as_ref(), &labels::managed_selector()).await {
                Ok(now) => {
                    for uid in changed(&last, &now) {
                        dispatcher.ring_pod(uid);
                    }
                    last = now;
                }
                Err(e) => tracing::warn!(%e, "the node-wide relist could not list the runtime's pods"),
            }
        }
    });
}

/// Every pod with sandboxes or containers selected by `sel`, by UID (one cheap call each).
pub(crate) async fn snapshot(
    runtime: &dyn Runtime,
    sel: &BTreeMap<String, String>,
) -> RuntimeResult<HashMap<String, Fingerprint>> {
    let sandboxes = runtime.list_pod_sandbox_states(sel).await?;
    let containers = runtime.list_container_states(sel).await?;
    Ok(fingerprints(sandboxes.into_iter().chain(containers)))
}

fn fingerprints(objects: impl Iterator<Item = Listed>) -> HashMap<String, Fingerprint> {
    let mut pods: HashMap<String, Fingerprint> = HashMap::new();
    for o in objects {
        if let Some(uid) = o.labels.get(labels::POD_UID) {
            pods.entry(uid.clone()).or_default().push((o.id, o.state));
        }
    }
    for f in pods.values_mut() {
        f.sort();
    }
    pods
}

/// The pods whose objects differ between two listings, including pods in only one of them.
fn changed<'a>(
    before: &'a HashMap<String, Fingerprint>,
    now: &'a HashMap<String, Fingerprint>,
) -> impl Iterator<Item = &'a str> {
    let gone = before.keys().filter(|uid| !now.contains_key(*uid));
    let differ = now.iter().filter(|(uid, f)| before.get(*uid) != Some(f)).map(|(uid, _)| uid);
    gone.chain(differ).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn listed(id: &str, uid: &str, state: i32) -> Listed {
        Listed {
            id: id.into(),
            state,
            labels: HashMap::from([(labels::POD_UID.to_string(), uid.to_string())]),
            created_at: 0,
        }
    }

    fn diff(before: &[Listed], now: &[Listed]) -> BTreeSet<String> {
        let (b, n) = (fingerprints(before.iter().cloned()), fingerprints(now.iter().cloned()));
        changed(&b, &n).map(str::to_string).collect()
    }

    #[test]
    fn only_pods_whose_objects_changed_are_woken() {
        let before = [listed("s1", "a", 0), listed("c1", "a", 1), listed("s2", "b", 0), listed("c2", "b", 1)];
        // Same objects in another order: nothing changed.
        let same = [listed("c2", "b", 1), listed("s2", "b", 0), listed("c1", "a", 1), listed("s1", "a", 0)];
        assert!(diff(&before, &same).is_empty());
        // a's container exited; b's sandbox died.
        let now = [listed("s1", "a", 0), listed("c1", "a", 2), listed("s2", "b", 1), listed("c2", "b", 1)];
        assert_eq!(diff(&before, &now), BTreeSet::from(["a".into(), "b".into()]));
    }

    #[test]
    fn pods_appearing_or_disappearing_and_containers_removed_count_as_changes() {
        let before = [listed("s1", "a", 0), listed("c1", "a", 1), listed("s2", "b", 0)];
        let now = [listed("s1", "a", 0), listed("s3", "c", 0)];
        assert_eq!(diff(&before, &now), BTreeSet::from(["a".into(), "b".into(), "c".into()]));
    }

    #[test]
    fn objects_without_a_pod_uid_are_not_any_pods() {
        let stray = Listed { id: "x".into(), state: 0, labels: HashMap::new(), created_at: 0 };
        assert!(fingerprints([stray].into_iter()).is_empty());
    }
}
