//! Image garbage collection, as the kubelet's image GC manager does it
//! (`pkg/kubelet/images/image_gc_manager.go`): when the runtime's image filesystem is at or over
//! `imageGCHighThresholdPercent`, unused images go, least recently used first, until usage is
//! down to `imageGCLowThresholdPercent`; images unused for longer than `imageMaximumGCAge` go
//! whatever the usage.
//!
//! *Expected flow*: [`ImageGc::start`] spawns one task that collects at once, then every
//! [`PERIOD`] and after every successful pull (the image filesystem only grows on pulls), one
//! collection at a time. A collection reads the runtime (images, containers, the image
//! filesystem), lets [`decide`] choose, removes what it chose and records events on the Node.
//!
//! *Guarantees*: an image in use by any container the runtime has, in any state, is never
//! removed; nor one the runtime pins (containerd pins its sandbox image; the CRI client pins
//! it for a containerd that does not), nor one a pod worker is about to start a container from
//! ([`ImageGc::hold`]), nor, for space, one first seen less than `imageMinimumGCAge` ago.
//!
//! *Caveats*: when each image was first seen and last used is kept in memory only, as the
//! kubelet keeps it. That is safe across restarts: a restarted podwright sees every image for
//! the first time, so nothing goes for space until the minimum age has passed again (an image
//! pulled just before the restart included), and nothing goes for its age until the maximum
//! age has passed since the restart. (The kubelet dates its first detection at startup in the
//! distant past instead; podwright errs on keeping.) What is lost is only the order of use from
//! before the restart.

mod decide;
mod policy;

pub use decide::{Decision, InUse, Records, Why, decide};
pub use policy::ImageGcPolicy;

use crate::events::{EventSink, EventType};
use jiff::Timestamp;
use podwright_api::go;
use podwright_runtime::{Clock, ListedImage, Runtime};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// How often images are collected without a pull: the kubelet's `ImageGCPeriod`.
pub const PERIOD: Duration = Duration::from_secs(5 * 60);

/// The Node event for a collection that could not free enough.
pub const FREE_DISK_SPACE_FAILED: &str = "FreeDiskSpaceFailed";
/// The Node event for a collection that failed again right after a failed one.
pub const IMAGE_GC_FAILED: &str = "ImageGCFailed";
/// The Node event for an image filesystem without capacity.
pub const INVALID_DISK_CAPACITY: &str = "InvalidDiskCapacity";
/// The Node event for each image removed. The kubelet records none (it only logs "Removing
/// image to free bytes"); podwright says what it freed.
pub const IMAGE_GARBAGE_COLLECTED: &str = "ImageGarbageCollected";

/// The node's image garbage collector; see the module documentation.
pub struct ImageGc {
    runtime: Arc<dyn Runtime>,
    events: Arc<dyn EventSink>,
    /// The node's name, for its events.
    node: String,
    clock: Clock,
    policy: ImageGcPolicy,
    /// When collection began: last uses before it are unknown.
    began: Timestamp,
    /// Also what makes collections one at a time.
    records: tokio::sync::Mutex<Records>,
    /// Names and ids of images pod workers are about to use, with how many hold each.
    held: Mutex<HashMap<String, usize>>,
    /// Rung after a pull.
    bell: Arc<Notify>,
    /// When each warning was last recorded.
    warned: Mutex<HashMap<String, Timestamp>>,
}

impl ImageGc {
    /// Starts collecting in the background, on `runtime`, with events on the Node `node`; the
    /// task ends once the collector is dropped. Must run inside a tokio runtime.
    pub fn start(
        runtime: Arc<dyn Runtime>,
        events: Arc<dyn EventSink>,
        node: String,
        clock: Clock,
        policy: ImageGcPolicy,
    ) -> Arc<ImageGc> {
        let gc = Arc::new(ImageGc {
            runtime,
            events,
            node,
            clock,
            policy,
            began: clock.now(),
            records: tokio::sync::Mutex::default(),
            held: Mutex::default(),
            bell: Arc::new(Notify::new()),
            warned: Mutex::default(),
        });
        tokio::spawn(collect_periodically(Arc::downgrade(&gc), gc.bell.clone()));
        gc
    }

    /// An image was pulled: collect soon.
    pub fn pulled(&self) {
        self.bell.notify_one();
    }

    /// Keeps the image named `name` (and any id or name added to the hold) from being removed
    /// until the hold is dropped: a container is about to be made from it.
    pub fn hold(self: &Arc<Self>, name: &str) -> Hold {
        let mut hold = Hold { gc: Arc::downgrade(self), keys: Vec::new() };
        hold.add(name);
        hold
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A Node event; a warning at most once per [`PERIOD`] for each reason, as the kubelet's
    /// collections only run that often while podwright's also run after every pull.
    fn event(&self, kind: EventType, reason: &str, message: String) {
        let now = self.clock.now();
        if kind == EventType::Warning {
            let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
            let period = jiff::SignedDuration::try_from(PERIOD).unwrap_or(jiff::SignedDuration::MAX);
            if warned.get(reason).is_some_and(|last| now.duration_since(*last) < period) {
                return;
            }
            warned.insert(reason.to_string(), now);
        }
        self.events.record_node(&self.node, kind, reason, message, now);
    }

    /// One collection, as the kubelet's `GarbageCollect`: the images unused past the maximum
    /// age go first, then the image filesystem is read and images go for space. Err: why it
    /// failed, in the kubelet's words (its events are recorded).
    pub async fn collect(&self) -> Result<(), String> {
        let mut records = self.records.lock().await;
        let (mut images, mut in_use) = self.observe(&mut records).await?;
        let now = self.clock.now();
        let old = decide(&images, &in_use, &records, None, &self.policy, now, self.began);
        if !old.remove.is_empty() {
            self.apply(old).await?;
            (images, in_use) = self.observe(&mut records).await?;
        }
        let fs = self.runtime.image_fs_info().await.map_err(|e| format!("failed to get imageFs info: {e}"))?;
        let decision = decide(&images, &in_use, &records, Some(&fs), &self.policy, now, self.began);
        self.apply(decision).await
    }

    /// The images present and which of them are in use, with `records` brought up to date.
    async fn observe(&self, records: &mut Records) -> Result<(Vec<ListedImage>, InUse), String> {
        let images = self.runtime.list_images().await.map_err(|e| format!("failed to list images: {e}"))?;
        let containers = self
            .runtime
            .list_containers(&BTreeMap::new())
            .await
            .map_err(|e| format!("failed to list containers: {e}"))?;
        let mut in_use = InUse::default();
        for c in containers {
            in_use.insert(c.image_ref);
            in_use.insert(c.image.map(|i| i.image).unwrap_or_default());
        }
        for key in self.held().keys() {
            in_use.insert(key.clone());
        }
        records.detect(&images, &in_use, self.clock.now());
        Ok((images, in_use))
    }

    /// Removes what `decision` chose, in order, going on past a failed removal; for space,
    /// only until enough is freed.
    async fn apply(&self, decision: Decision) -> Result<(), String> {
        if decision.invalid_capacity {
            let message = "invalid capacity 0 on image filesystem".to_string();
            self.event(EventType::Warning, INVALID_DISK_CAPACITY, message.clone());
            return Err(message);
        }
        let needed = decision.space.map_or(0, |s| s.needed);
        let (mut freed, mut age_errors, mut space_errors) = (0u64, Vec::new(), Vec::new());
        for removal in decision.remove.into_iter().chain(decision.spare) {
            if removal.why == Why::Space && (freed >= needed || !age_errors.is_empty()) {
                break;
            }
            tracing::info!(image = %removal.name, id = %removal.id, size = removal.size, "removing image");
            if let Err(e) = self.runtime.remove_image(&removal.id).await {
                match removal.why {
                    Why::Age => age_errors.push(e.to_string()),
                    Why::Space => space_errors.push(e.to_string()),
                }
                continue;
            }
            let why = match removal.why {
                Why::Age => {
                    format!("unused for longer than imageMaximumGCAge {}", go::format_duration(self.policy.max_age))
                }
                Why::Space => format!(
                    "image filesystem usage at or over imageGCHighThresholdPercent {}%",
                    self.policy.high_threshold_percent
                ),
            };
            let message = format!("Removed image \"{}\" ({}, {} bytes): {why}", removal.name, removal.id, removal.size);
            self.event(EventType::Normal, IMAGE_GARBAGE_COLLECTED, message);
            if removal.why == Why::Space {
                freed += removal.size;
            }
        }
        if !age_errors.is_empty() {
            return Err(format!(
                "wanted to free images older than {}, encountered errors in image deletion: {}",
                go::format_duration(self.policy.max_age),
                go::aggregate(age_errors)
            ));
        }
        if !space_errors.is_empty() {
            return Err(format!(
                "wanted to free {needed} bytes, but freed {freed} bytes space with errors in image deletion: {}",
                go::aggregate(space_errors)
            ));
        }
        if freed < needed {
            let message = format!(
                "Failed to garbage collect required amount of images. Attempted to free {needed} bytes, but only found {freed} bytes eligible to free."
            );
            self.event(EventType::Warning, FREE_DISK_SPACE_FAILED, message.clone());
            return Err(message);
        }
        Ok(())
    }
}

/// Keeps images from removal while alive; see [`ImageGc::hold`].
pub struct Hold {
    gc: Weak<ImageGc>,
    keys: Vec<String>,
}

impl Hold {
    /// Holds this name or id too.
    pub fn add(&mut self, name_or_id: &str) {
        let Some(gc) = self.gc.upgrade() else { return };
        *gc.held().entry(name_or_id.to_string()).or_default() += 1;
        self.keys.push(name_or_id.to_string());
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let Some(gc) = self.gc.upgrade() else { return };
        let mut held = gc.held();
        for key in &self.keys {
            if let Some(n) = held.get_mut(key) {
                *n -= 1;
                if *n == 0 {
                    held.remove(key);
                }
            }
        }
    }
}

/// The collector's task: at once, then after each [`PERIOD`] or pull. A failure right after a
/// failure is a Node event, as the kubelet reports only repeated ones (the first may be stats
/// not ready yet).
async fn collect_periodically(gc: Weak<ImageGc>, bell: Arc<Notify>) {
    let mut failed_before = false;
    loop {
        let Some(collector) = gc.upgrade() else { return };
        match collector.collect().await {
            Ok(()) => failed_before = false,
            Err(e) if failed_before => {
                tracing::warn!(%e, "image garbage collection failed multiple times in a row");
                collector.event(EventType::Warning, IMAGE_GC_FAILED, e);
            }
            Err(e) => {
                tracing::warn!(%e, "image garbage collection failed once");
                failed_before = true;
            }
        }
        drop(collector);
        tokio::select! {
            _ = tokio::time::sleep(PERIOD) => {}
            _ = bell.notified() => {}
        }
    }
}
