//! The node-wide image pull queue against the fake runtime in virtual time: how many `PullImage`
//! calls overlap under `serializeImagePulls` (the default), unbounded parallel pulls and
//! `maxParallelImagePulls`, and that one pod never pulls two images at once.
// Test harness: tokio's Instant is the virtual time of paused tests, as the Clock's is.
#![allow(clippy::disallowed_methods)]

mod common;
use common::epoch;
use k8s_openapi::api::core::v1::Pod;
use podwright_node::{EventLog, ImagePulls, Node, PodWorkers};
use podwright_runtime::Clock;
use podwright_runtime::fake::{Call, FakeRuntime};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

/// Every pull takes this long.
const PULL: Duration = Duration::from_secs(10);

struct Node4 {
    fake: Arc<FakeRuntime>,
    workers: PodWorkers,
    events: Arc<EventLog>,
    _root: Dir,
}

struct Dir(std::path::PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn node(pulls: Option<ImagePulls>, images: &[String]) -> Node4 {
    let clock = Clock::starting_at(epoch());
    let fake = FakeRuntime::new(clock);
    for image in images {
        fake.allow_pull_taking(image, PULL);
    }
    let root = std::env::temp_dir().join(format!("pw-pulls-{}-{:?}", std::process::id(), std::thread::current().id()));
    let events = Arc::new(EventLog::default());
    let mut builder = Node::new(fake.clone(), root.clone()).clock(clock).events(events.clone());
    if let Some(p) = pulls {
        builder = builder.image_pulls(p);
    }
    Node4 { fake, workers: builder.build(), events, _root: Dir(root) }
}

/// A pod named `name` whose app containers use these images, pulled always.
fn pod(name: &str, images: &[String]) -> Pod {
    let containers: Vec<_> = images
        .iter()
        .enumerate()
        .map(|(i, image)| serde_json::json!({"name": format!("c{i}"), "image": image, "imagePullPolicy": "Always"}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"restartPolicy": "Always", "containers": containers}
    }))
    .unwrap()
}

fn images(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("localhost/image-{i}:1")).collect()
}

impl Node4 {
    /// Runs these pods besides those running already until every pull is over, then deletes
    /// them all.
    async fn run(&self, pods: Vec<Pod>) {
        for p in pods {
            self.workers.update(p).unwrap();
        }
        tokio::time::sleep(Duration::from_secs(120)).await;
        self.workers.delete_all(None);
        self.workers.wait_finished().await;
    }

    /// The most `PullImage` calls under way at one moment (each takes [`PULL`]), and how many
    /// there were.
    fn overlap(&self) -> (usize, usize) {
        let starts: Vec<_> = self
            .fake
            .calls()
            .into_iter()
            .filter(|(_, c)| matches!(c, Call::PullImage { .. }))
            .map(|(at, _)| at)
            .collect();
        let pull = jiff::SignedDuration::try_from(PULL).unwrap();
        let max = starts.iter().map(|&t| starts.iter().filter(|&&s| s <= t && t < s + pull).count()).max();
        (max.unwrap_or(0), starts.len())
    }

    /// The "(… including waiting)" part of each `Pulled` event, in order.
    fn waits(&self) -> Vec<String> {
        let mut waits: Vec<String> = self
            .events
            .snapshot()
            .iter()
            .filter(|e| e.reason.as_deref() == Some("Pulled"))
            .filter_map(|e| {
                let m = e.message.as_deref()?;
                assert!(m.contains(" in 10s ("), "every pull took 10 s: {m}");
                Some(m.split_once(" (")?.1.split_once(" including")?.0.to_string())
            })
            .collect();
        waits.sort_by_key(|w| w.trim_end_matches('s').parse::<u64>().unwrap_or(u64::MAX));
        waits
    }
}

fn four_pods(images: &[String]) -> Vec<Pod> {
    images.iter().enumerate().map(|(i, image)| pod(&format!("p{i}"), std::slice::from_ref(image))).collect()
}

#[tokio::test(start_paused = true)]
async fn serial_by_default_one_pull_at_a_time_node_wide() {
    let images = images(4);
    let node = node(None, &images);
    node.run(four_pods(&images)).await;
    assert_eq!(node.overlap(), (1, 4));
    // Each waited for the ones before it; the time including waiting says so.
    assert_eq!(node.waits(), ["10s", "20s", "30s", "40s"]);
}

#[tokio::test(start_paused = true)]
async fn parallel_pulls_start_at_once() {
    let images = images(4);
    let node = node(Some(ImagePulls::Parallel { max: None }), &images);
    node.run(four_pods(&images)).await;
    assert_eq!(node.overlap(), (4, 4));
    assert_eq!(node.waits(), ["10s", "10s", "10s", "10s"]);
}

#[tokio::test(start_paused = true)]
async fn max_parallel_image_pulls_bounds_them() {
    let images = images(4);
    let node = node(Some(ImagePulls::Parallel { max: NonZeroUsize::new(2) }), &images);
    node.run(four_pods(&images)).await;
    assert_eq!(node.overlap(), (2, 4));
    assert_eq!(node.waits(), ["10s", "10s", "20s", "20s"]);
}

#[tokio::test(start_paused = true)]
async fn one_pod_pulls_its_images_one_after_another_even_in_parallel_mode() {
    let images = images(3);
    let node = node(Some(ImagePulls::Parallel { max: None }), &images);
    node.run(vec![pod("p", &images)]).await;
    assert_eq!(node.overlap(), (1, 3));
}

/// Pod "first" pulls from t=0 (10 s), "second" asks for its pull at t=1, and the pod with uid
/// `deleted` is deleted at t=3; then both run out. Returns when each pod's pulls started
/// (seconds) and each pod's (reason, message) of its pull and failure events.
async fn one_deleted_during_the_first_pull(deleted: &str) -> Vec<(Vec<i64>, Vec<(String, String)>)> {
    let images = images(2);
    let node = node(None, &images);
    let (first, second) = (pod("first", &images[..1]), pod("second", &images[1..]));
    node.workers.update(first).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    node.workers.update(second).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    node.workers.delete(deleted, None);
    node.run(vec![]).await;
    let events = node.events.snapshot();
    ["first", "second"]
        .into_iter()
        .map(|name| {
            let pulls = node.fake.calls_for_pod(name).into_iter().filter(|(_, c)| matches!(c, Call::PullImage { .. }));
            let started = pulls.map(|(at, _)| at.duration_since(epoch()).as_secs()).collect();
            let said = events
                .iter()
                .filter(|e| e.involved_object.name.as_deref() == Some(name))
                .map(|e| (e.reason.clone().unwrap_or_default(), e.message.clone().unwrap_or_default()))
                .filter(|(reason, _)| reason.starts_with("Pull") || reason == "Failed")
                .collect();
            (started, said)
        })
        .collect()
}

/// The events of a pull of `image` cancelled by the pod's deletion.
fn cancelled(image: &str) -> Vec<(String, String)> {
    let said = |reason: &str, message: String| (reason.to_string(), message);
    vec![
        said("Pulling", format!("Pulling image \"{image}\"")),
        said("Failed", format!("Failed to pull image \"{image}\": rpc error: code = Canceled desc = context canceled")),
        said("Failed", "Error: ErrImagePull".into()),
    ]
}

#[tokio::test(start_paused = true)]
async fn a_pod_deleted_while_waiting_for_its_turn_never_pulls() {
    let [(first, _), (second, second_said)] = one_deleted_during_the_first_pull("uid-second").await.try_into().unwrap();
    assert_eq!(first, [0]);
    assert_eq!(second, [] as [i64; 0]);
    assert_eq!(second_said, cancelled("localhost/image-1:1"));
}

#[tokio::test(start_paused = true)]
async fn deleting_a_pod_cancels_its_pull_and_frees_the_queue() {
    let [(first, first_said), (second, _)] = one_deleted_during_the_first_pull("uid-first").await.try_into().unwrap();
    assert_eq!(first, [0]);
    assert_eq!(second, [3], "the second pull goes as soon as the first is cancelled");
    assert_eq!(first_said, cancelled("localhost/image-0:1"));
}
