//! The simulation harness: a pod worker against the fake runtime in virtual time.
// Test harness: tokio's Instant is the virtual time of paused tests, as the Clock's is.
#![allow(clippy::disallowed_methods)]
#![allow(dead_code)]

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use podwright_node::{EventLog, Node, PodUpdate, PodWorkers, StatusStream};
use podwright_runtime::Clock;
use podwright_runtime::fake::{Call, FakeRuntime};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

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
    pub workers: PodWorkers,
    pub events: Arc<EventLog>,
    pub clock: Clock,
    statuses: tokio::sync::Mutex<UnboundedReceiver<PodUpdate>>,
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

/// Something done to the pod workers at a virtual time.
pub type Step = Box<dyn FnOnce(&PodWorkers)>;

impl Sim {
    pub fn new() -> Sim {
        Sim::with_objects(Arc::new(podwright_node::objects::FixedObjects::default()))
    }

    /// A simulation whose pods look their ConfigMaps, Secrets and RuntimeClasses up in `objects`.
    pub fn with_objects(objects: Arc<dyn podwright_node::objects::Objects>) -> Sim {
        let clock = Clock::starting_at(epoch());
        let fake = FakeRuntime::new(clock);
        fake.add_image("localhost/busybox:1.36");
        let root =
            std::env::temp_dir().join(format!("pw-sim-{}-{:?}", std::process::id(), std::thread::current().id()));
        let events = Arc::new(EventLog::default());
        let (stream, statuses) = StatusStream::new();
        let workers = Node::new(fake.clone(), root.clone())
            .clock(clock)
            .events(events.clone())
            .status(Arc::new(stream))
            .objects(objects)
            .build();
        Sim { fake, workers, events, clock, statuses: tokio::sync::Mutex::new(statuses), _root: tempdir::Dir(root) }
    }

    /// Runs the pod until it finishes or `limit` of virtual time passes (then deletes it);
    /// returns every status published, in order.
    pub async fn run(&self, pod: Pod, limit: Duration) -> Vec<Pod> {
        self.run_timed(pod, limit).await.into_iter().map(|(_, p)| p).collect()
    }

    /// Like `run`, with the virtual second each status was published at.
    pub async fn run_timed(&self, pod: Pod, limit: Duration) -> Vec<(f64, Pod)> {
        self.run_steps(pod, limit, vec![]).await
    }

    /// Like `run_timed`, doing each step when its virtual second (from the start) comes.
    pub async fn run_steps(&self, pod: Pod, limit: Duration, mut steps: Vec<(f64, Step)>) -> Vec<(f64, Pod)> {
        let uid = pod.metadata.uid.clone().unwrap();
        let start = tokio::time::Instant::now();
        steps.push((
            limit.as_secs_f64(),
            Box::new(move |w: &PodWorkers| {
                w.delete(&uid, None);
            }),
        ));
        steps.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut steps = std::collections::VecDeque::from(steps);
        self.workers.update(pod).unwrap();
        let mut statuses = self.statuses.lock().await;
        let mut history = vec![];
        loop {
            let next = steps.front().map(|(at, _)| start + Duration::from_secs_f64(*at));
            tokio::select! {
                u = statuses.recv() => {
                    let Some(u) = u else { break };
                    history.push((self.at(self.clock.now()), u.pod()));
                    if u.finished { break; }
                }
                _ = tokio::time::sleep_until(next.unwrap_or(start)), if next.is_some() => {
                    let (_, step) = steps.pop_front().unwrap();
                    step(&self.workers);
                }
            }
        }
        self.workers.wait_finished().await;
        history
    }

    /// The node's root directory (the pods' files).
    pub fn root(&self) -> &std::path::Path {
        &self._root.0
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

/// The pod with the container `name` (init or app) made from `image`.
pub fn with_image(p: &Pod, name: &str, image: &str) -> Pod {
    let mut p = p.clone();
    let spec = p.spec.as_mut().unwrap();
    for c in spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut()) {
        if c.name == name {
            c.image = Some(image.into());
        }
    }
    p
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

/// A pod from the JSON of its `spec`, with the busybox image filled in for every container.
pub fn pod_with(spec: serde_json::Value) -> Pod {
    let mut spec = spec;
    for list in ["initContainers", "containers"] {
        for c in spec[list].as_array_mut().into_iter().flatten() {
            c["image"] = "localhost/busybox:1.36".into();
            c["imagePullPolicy"] = "IfNotPresent".into();
        }
    }
    spec["terminationGracePeriodSeconds"] = spec.get("terminationGracePeriodSeconds").cloned().unwrap_or(30.into());
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "sim", "namespace": "default", "uid": "uid-lifecycle"},
        "spec": spec,
    }))
    .unwrap()
}

pub fn exec(cmd: &str) -> serde_json::Value {
    serde_json::json!({"command": ["sh", "-c", cmd]})
}
