//! The node layer against a real containerd: pods updated while they run. Runs when
//! `PODWRIGHT_CRI_ENDPOINT` names the runtime's socket (scripts/test sets it); otherwise it says
//! it was skipped and passes. Needs the local images of scripts/build-images.

mod common;
use common::with_image;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use podwright_node::cri::labels::pod_selector;
use podwright_node::{EventLog, Node, PodUpdate, PodWorkers, StatusStream};
use podwright_runtime::{CriRuntime, RuntimeService};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

const NEW_IMAGE: &str = "localhost/busybox-stopsignal:1.36";
/// Runs until told to stop, and stops at once on TERM.
const LOOP: &str = "trap 'exit 0' TERM; while true; do sleep 0.2; done";

fn container(name: &str, script: &str) -> serde_json::Value {
    serde_json::json!({
        "name": name, "image": "localhost/busybox:1.36", "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", script],
    })
}

fn pod(uid: &str, inits: Vec<serde_json::Value>, apps: Vec<serde_json::Value>) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": uid, "namespace": "default", "uid": uid},
        "spec": {
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 5,
            "initContainers": inits, "containers": apps,
        },
    }))
    .unwrap()
}

fn status<'a>(u: &'a PodUpdate, name: &str) -> Option<&'a ContainerStatus> {
    let s = u.status.as_ref()?;
    podwright_api::container_statuses(s).find(|s| s.name == name)
}

fn running(s: Option<&ContainerStatus>) -> bool {
    s.and_then(|s| s.state.as_ref()).is_some_and(|st| st.running.is_some())
}

/// One pod on the real runtime, through `PodWorkers`.
struct Real {
    runtime: Arc<CriRuntime>,
    workers: PodWorkers,
    statuses: UnboundedReceiver<PodUpdate>,
    events: Arc<EventLog>,
    uid: String,
}

impl Real {
    /// The first status that satisfies `f`, within 60 s.
    async fn until(&mut self, f: impl Fn(&PodUpdate) -> bool) -> PodUpdate {
        tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let u = self.statuses.recv().await.expect("the status stream ended");
                if f(&u) {
                    return u;
                }
            }
        })
        .await
        .expect("no such status within 60 s")
    }

    fn killing(&self) -> Vec<String> {
        let events = self.events.snapshot().into_iter();
        events.filter(|e| e.reason.as_deref() == Some("Killing")).filter_map(|e| e.message).collect()
    }

    /// The pod's sandbox attempts, and whether each is ready.
    async fn sandboxes(&self) -> Vec<(u32, bool)> {
        let list = self.runtime.list_pod_sandboxes(&pod_selector(&self.uid)).await.unwrap();
        let mut v: Vec<(u32, bool)> =
            list.iter().map(|s| (s.metadata.as_ref().map_or(0, |m| m.attempt), s.state == 0)).collect();
        v.sort();
        v
    }
}

/// Starts the pod, runs `test` on it, then deletes and removes the pod whatever happened.
async fn on_containerd<F, Fut>(name: &str, pod: impl FnOnce(&str) -> Pod, test: F)
where
    F: FnOnce(Real) -> Fut,
    Fut: Future<Output = Real> + Send + 'static,
{
    let Ok(endpoint) = std::env::var("PODWRIGHT_CRI_ENDPOINT") else {
        eprintln!("{name}: skipped (PODWRIGHT_CRI_ENDPOINT is not set)");
        return;
    };
    let runtime = Arc::new(podwright_runtime::connect(&endpoint).await.expect("connect to the runtime"));
    let root = std::env::temp_dir().join(format!("pw-node-real-{name}-{}", std::process::id()));
    let events = Arc::new(EventLog::default());
    let (stream, statuses) = StatusStream::new();
    let workers = Node::new(runtime.clone(), &root).events(events.clone()).status(Arc::new(stream)).build();
    let uid = format!("{name}-{}", std::process::id());
    workers.update(pod(&uid)).unwrap();
    let real = Real { runtime, workers, statuses, events, uid: uid.clone() };
    let outcome = tokio::spawn(test(real)).await;
    let Real { workers, .. } = match outcome {
        Ok(real) => real,
        Err(e) => {
            // The pod's worker outlives the failed test: stop and remove what it made.
            let runtime = podwright_runtime::connect(&endpoint).await.expect("connect to the runtime");
            for s in runtime.list_pod_sandboxes(&pod_selector(&uid)).await.unwrap_or_default() {
                let _ = runtime.stop_pod_sandbox(&s.id).await;
                let _ = runtime.remove_pod_sandbox(&s.id).await;
            }
            let _ = std::fs::remove_dir_all(&root);
            std::panic::resume_unwind(e.into_panic());
        }
    };
    workers.delete(&uid, Some(0));
    workers.wait_finished().await;
    assert!(workers.remove(&uid).await);
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_app_image_restarts_only_that_container_on_containerd() {
    let pod = |uid: &str| pod(uid, vec![], vec![container("a", LOOP), container("b", LOOP)]);
    on_containerd("app-image", pod, |mut r| async move {
        let first = r.until(|u| running(status(u, "a")) && running(status(u, "b"))).await;
        r.workers.update(with_image(&first.spec, "a", NEW_IMAGE)).unwrap();
        let after = r.until(|u| running(status(u, "a")) && status(u, "a").is_some_and(|s| s.restart_count == 1)).await;

        let (a, b) = (status(&after, "a").unwrap(), status(&after, "b").unwrap());
        assert_eq!(a.image, NEW_IMAGE);
        assert_ne!(a.container_id, status(&first, "a").unwrap().container_id);
        assert_eq!(b.restart_count, 0);
        assert_eq!(b.container_id, status(&first, "b").unwrap().container_id, "b kept running");
        assert!(running(Some(b)));
        assert_eq!(r.killing(), ["Container a definition changed, will be restarted"]);
        assert_eq!(r.sandboxes().await, [(0, true)], "the sandbox stays");
        r
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_init_image_reruns_the_init_containers_in_a_new_sandbox_on_containerd() {
    let pod =
        |uid: &str| pod(uid, vec![container("i1", "exit 0"), container("i2", "exit 0")], vec![container("a", LOOP)]);
    on_containerd("init-image", pod, |mut r| async move {
        let first = r.until(|u| running(status(u, "a"))).await;
        let i1_before = status(&first, "i1").unwrap().container_id.clone();
        r.workers.update(with_image(&first.spec, "i2", NEW_IMAGE)).unwrap();
        let after = r.until(|u| running(status(u, "a")) && status(u, "a").is_some_and(|s| s.restart_count == 1)).await;

        let (i1, i2) = (status(&after, "i1").unwrap(), status(&after, "i2").unwrap());
        assert_ne!(i1.container_id, i1_before, "i1 ran again");
        assert_eq!(i1.state.as_ref().unwrap().terminated.as_ref().map(|t| t.exit_code), Some(0));
        assert_eq!(i2.image, NEW_IMAGE);
        assert_eq!(i2.state.as_ref().unwrap().terminated.as_ref().map(|t| t.exit_code), Some(0));
        assert_eq!(r.sandboxes().await, [(0, false), (1, true)], "a new sandbox; the old one stopped");

        // Then a deadline, set while it runs, applies at once.
        let mut deadline = after.spec.as_ref().clone();
        deadline.spec.as_mut().unwrap().active_deadline_seconds = Some(1);
        r.workers.update(deadline).unwrap();
        let last = r.until(|u| u.finished).await;
        let s = last.status.as_ref().unwrap();
        assert_eq!((s.phase.as_deref(), s.reason.as_deref()), (Some("Failed"), Some("DeadlineExceeded")));
        r
    })
    .await;
}
