//! The simulation harness: a pod worker against the fake runtime in virtual time.
#![allow(dead_code)]

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use podwright_node::dispatch::Dispatcher;
use podwright_node::events::EventLog;
use podwright_node::{Engine, PodUpdate, PodWorker};
use podwright_runtime::fake::{Call, FakeRuntime};
use podwright_runtime::{Clock, RuntimeService};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

pub fn epoch() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

pub fn pod(inits: &[&str], apps: &[&str], policy: &str) -> Pod {
    let c =
        |n: &&str| serde_json::json!({"name": n, "image": "localhost/busybox:1.36", "imagePullPolicy": "IfNotPresent"});
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "sim", "namespace": "default", "uid": format!("uid-{}", inits.len() * 10 + apps.len())},
        "spec": {
            "restartPolicy": policy,
            "terminationGracePeriodSeconds": 30,
            "initContainers": inits.iter().map(c).collect::<Vec<_>>(),
            "containers": apps.iter().map(c).collect::<Vec<_>>(),
        }
    }))
    .unwrap()
}

pub struct Sim {
    pub fake: Arc<FakeRuntime>,
    pub engine: Engine,
    _root: tempdir::Dir,
}

mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Sim {
    pub fn new() -> Sim {
        let clock = Clock::starting_at(epoch());
        let fake = FakeRuntime::new(clock);
        fake.add_image("localhost/busybox:1.36");
        let root =
            std::env::temp_dir().join(format!("pw-sim-{}-{:?}", std::process::id(), std::thread::current().id()));
        let engine = Engine {
            runtime: fake.clone(),
            clock,
            root: root.clone(),
            dispatcher: Dispatcher::start(fake.subscribe()),
            events: Arc::new(EventLog::default()),
            log_sink: None,
        };
        Sim { fake, engine, _root: tempdir::Dir(root) }
    }

    /// Runs the pod until it finishes or `limit` of virtual time passes (then deletes it);
    /// returns every status published, in order.
    pub async fn run(&self, pod: Pod, limit: Duration) -> Vec<Pod> {
        self.run_timed(pod, limit).await.into_iter().map(|(_, p)| p).collect()
    }

    /// Like `run`, with the virtual second each status was published at.
    pub async fn run_timed(&self, pod: Pod, limit: Duration) -> Vec<(f64, Pod)> {
        let (tx, mut rx) = watch::channel(PodUpdate::new(&pod));
        let (del_tx, del_rx) = watch::channel(false);
        let worker = tokio::spawn(PodWorker::new(self.engine.clone(), pod, true).run(tx, del_rx));
        let mut history = vec![];
        let mut deadline = Some(tokio::time::Instant::now() + limit);
        loop {
            tokio::select! {
                r = rx.changed() => {
                    if r.is_err() { break; }
                    let upd = rx.borrow_and_update().clone();
                    history.push((self.at(self.engine.clock.now()), upd.pod()));
                    if upd.finished { break; }
                }
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                    deadline = None;
                    let _ = del_tx.send(true);
                }
            }
        }
        worker.await.unwrap();
        history
    }

    pub fn at(&self, t: Timestamp) -> f64 {
        t.duration_since(epoch()).as_secs_f64()
    }

    /// (virtual seconds, call) for starts of containers.
    pub fn starts(&self) -> Vec<(f64, String)> {
        self.fake
            .calls()
            .into_iter()
            .filter_map(|(t, c)| match c {
                Call::StartContainer { name } => Some((self.at(t), name)),
                _ => None,
            })
            .collect()
    }
}

pub fn phase(p: &Pod) -> &str {
    p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}
pub fn app(p: &Pod) -> &ContainerStatus {
    &p.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0]
}
pub fn init(p: &Pod, i: usize) -> &ContainerStatus {
    &p.status.as_ref().unwrap().init_container_statuses.as_ref().unwrap()[i]
}
pub fn waiting(s: &ContainerStatus) -> Option<&str> {
    s.state.as_ref()?.waiting.as_ref()?.reason.as_deref()
}
