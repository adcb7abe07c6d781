//! Image garbage collection (issue 14, part 7) against the fake runtime in virtual time: a
//! collection right after a pull that fills the image filesystem, least recently used first,
//! never an image in use, pinned or just pulled, and the Node events for what was freed and
//! what could not be.
// Test harness: tokio's Instant is the virtual time of paused tests, as the Clock's is.
#![allow(clippy::disallowed_methods)]

mod common;
use common::epoch;
use k8s_openapi::api::core::v1::{Event, Pod};
use podwright_node::downward::NodeFacts;
use podwright_node::{EventLog, ImageGcPolicy, Node};
use podwright_runtime::fake::{Call, FakeRuntime};
use podwright_runtime::{Clock, ImageService};
use std::sync::Arc;
use std::time::Duration;

const MIB: u64 = 1 << 20;

struct Dir(std::path::PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A pod whose one container runs `image` (for ever: the fake's default).
fn pod(name: &str, image: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c", "image": image, "imagePullPolicy": "IfNotPresent"}]}
    }))
    .unwrap()
}

fn node_events(events: &EventLog) -> Vec<Event> {
    events.snapshot().into_iter().filter(|e| e.involved_object.kind.as_deref() == Some("Node")).collect()
}

fn with_reason<'a>(events: &'a [Event], reason: &str) -> Vec<&'a Event> {
    events.iter().filter(|e| e.reason.as_deref() == Some(reason)).collect()
}

#[tokio::test(start_paused = true)]
async fn a_pull_that_fills_the_disk_frees_unused_images_and_keeps_those_in_use_pinned_or_new() {
    let clock = Clock::starting_at(epoch());
    let fake = FakeRuntime::new(clock);
    // 100 MiB, 10 of them used by something else: 75 % used to begin with.
    fake.set_image_fs(100 * MIB, 10 * MIB);
    for (image, size) in [("localhost/old:1", 30), ("localhost/in-use:1", 30), ("localhost/pause:1", 5)] {
        fake.add_image(image);
        fake.set_image_size(image, size * MIB);
    }
    fake.pin_image("localhost/pause:1");
    fake.set_image_size("localhost/new:1", 25 * MIB);
    fake.allow_pull_taking("localhost/new:1", Duration::from_secs(10));
    let root = std::env::temp_dir().join(format!("pw-image-gc-{}", std::process::id()));
    let _root = Dir(root.clone());
    let events = Arc::new(EventLog::default());
    let policy = ImageGcPolicy::from_config(Some(80), Some(50), Some("1m"), None).unwrap();
    let facts = NodeFacts { name: "sim-node".into(), ..NodeFacts::UNKNOWN };
    let workers =
        Node::new(fake.clone(), root).clock(clock).events(events.clone()).facts(facts).image_gc(policy).build();
    workers.update(pod("user", "localhost/in-use:1")).unwrap();

    // Under the high threshold at start and at the 5-minute collection: nothing goes.
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;
    let removals = || -> Vec<(f64, String)> {
        let calls = fake.calls().into_iter();
        calls
            .filter_map(|(at, c)| match c {
                Call::RemoveImage { image } => Some((at.duration_since(epoch()).as_secs_f64(), image)),
                _ => None,
            })
            .collect()
    };
    assert_eq!(removals(), []);
    assert_eq!(node_events(&events), []);

    // At 10 min a pod pulls 25 MiB (for 10 s): the disk is full, and the collection right after
    // the pull, not the next periodic one, frees what it can of the 50 MiB down to 50 %: the
    // unused image. The one in use, the pinned one and the one just pulled stay.
    workers.update(pod("puller", "localhost/new:1")).unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let old_id = fake.image_status("localhost/old:1").await;
    assert_eq!(old_id, Ok(None), "the unused image is gone");
    let removed = removals();
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert!(removed[0].1.starts_with("sha256:"), "removed by id: {removed:?}");
    assert_eq!(removed[0].0, 610.0, "right after the pull ended: {removed:?}");
    for kept in ["localhost/in-use:1", "localhost/pause:1", "localhost/new:1"] {
        assert!(fake.image_status(kept).await.unwrap().is_some(), "{kept} was kept");
    }

    let node = node_events(&events);
    let freed = with_reason(&node, "ImageGarbageCollected");
    assert_eq!(freed.len(), 1, "{node:?}");
    assert_eq!(freed[0].type_.as_deref(), Some("Normal"));
    assert_eq!(freed[0].involved_object.name.as_deref(), Some("sim-node"));
    let message = freed[0].message.as_deref().unwrap_or_default();
    assert!(
        message.starts_with("Removed image \"localhost/old:1\" (sha256:")
            && message.ends_with(&format!(
                ", {} bytes): image filesystem usage at or over imageGCHighThresholdPercent 80%",
                30 * MIB
            )),
        "{message}"
    );
    let failed = with_reason(&node, "FreeDiskSpaceFailed");
    assert_eq!(failed.len(), 1, "{node:?}");
    assert_eq!(failed[0].type_.as_deref(), Some("Warning"));
    assert_eq!(
        failed[0].message.as_deref(),
        Some(
            format!(
                "Failed to garbage collect required amount of images. Attempted to free {} bytes, but only found {} bytes eligible to free.",
                50 * MIB,
                30 * MIB
            )
            .as_str()
        )
    );
    // One failure is not yet `ImageGCFailed`; the next collection (70 % used) succeeds.
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;
    assert_eq!(removals().len(), 1);
    assert_eq!(with_reason(&node_events(&events), "ImageGCFailed"), Vec::<&Event>::new());
    workers.delete_all(None);
    workers.wait_finished().await;
}

#[tokio::test(start_paused = true)]
async fn repeated_failures_are_image_gc_failed_and_a_node_without_policy_removes_nothing() {
    let clock = Clock::starting_at(epoch());
    let fake = FakeRuntime::new(clock);
    fake.set_image_fs(100 * MIB, 95 * MIB);
    fake.add_image("localhost/old:1");
    fake.set_image_size("localhost/old:1", MIB);
    let root = std::env::temp_dir().join(format!("pw-image-gc-fail-{}", std::process::id()));
    let _root = Dir(root.clone());
    let events = Arc::new(EventLog::default());
    let facts = NodeFacts { name: "sim-node".into(), ..NodeFacts::UNKNOWN };
    let policy = ImageGcPolicy::from_config(Some(90), Some(80), Some("0s"), None).unwrap();
    let _workers =
        Node::new(fake.clone(), root.clone()).clock(clock).events(events.clone()).facts(facts).image_gc(policy).build();
    // 96 % used: the 1 MiB image goes at once and that is not enough, at start and every 5 min.
    tokio::time::sleep(Duration::from_secs(11 * 60)).await;
    let node = node_events(&events);
    let space = with_reason(&node, "FreeDiskSpaceFailed");
    assert_eq!(space.len(), 2, "two messages (what was found differs): {node:?}");
    let gc_failed = with_reason(&node, "ImageGCFailed");
    assert_eq!(gc_failed.len(), 1, "{node:?}");
    assert_eq!(gc_failed[0].count, Some(2), "the second and third failures: {node:?}");
    assert_eq!(gc_failed[0].message, space[1].message);

    // Without `image_gc` the node never removes an image.
    let fake = FakeRuntime::new(clock);
    fake.set_image_fs(100 * MIB, 99 * MIB);
    fake.add_image("localhost/old:1");
    let _plain = Node::new(fake.clone(), root).clock(clock).build();
    tokio::time::sleep(Duration::from_secs(11 * 60)).await;
    assert!(!fake.calls().iter().any(|(_, c)| matches!(c, Call::RemoveImage { .. })));
}
