//! The kubelet's eviction manager, for the one signal podwright acts on: an `emptyDir` whose
//! usage exceeds its `sizeLimit` (`localStorageEviction` → `emptyDirLimitEviction` in
//! `pkg/kubelet/eviction/eviction_manager.go`). Node-pressure evictions are not made.
//!
//! A pod with such a limit gets a [`Watch`] from its pod worker: a task that measures the
//! limited volumes every [`MONITORING_PERIOD`] (a walk of their files, off the async threads)
//! and, at the first one over its limit, hands the worker the verdict and rings its bell. The
//! worker records the eviction (the `Evicted` event, the checkpoint) and the planner fails the
//! pod with it.
//!
//! Memory-backed volumes are measured too, as the kubelet measures them, but their tmpfs is as
//! large as the limit, so writes past it fail instead.

use crate::layout;
use crate::volumes::usage;
use k8s_openapi::api::core::v1::Pod;
use podwright_api::annotations::{API_SOURCE, CONFIG_MIRROR, CONFIG_SOURCE};
use podwright_api::go;
use podwright_api::quantity::{self, Quantity};
use podwright_planner::Eviction;
use podwright_runtime::Clock;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How often usage is measured: the kubelet's eviction manager looks every 10 s
/// (`evictionMonitoringPeriod`), on volume statistics it refreshes every minute
/// (`volumeStatsAggPeriod`). Measuring at the manager's own pace evicts as soon as the kubelet
/// could at best, and a walk of a pod's limited volumes every 10 s is cheap next to that of
/// every volume of every pod.
pub const MONITORING_PERIOD: Duration = Duration::from_secs(10);

/// The pod's `status.reason` and the event's reason (the eviction manager's `Reason`).
pub const REASON: &str = "Evicted";

/// Pods at or above this priority are critical (`scheduling.SystemCriticalPriority`).
const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// An emptyDir with a size limit.
#[derive(Debug, Clone, PartialEq)]
struct Limit {
    volume: String,
    bytes: i128,
    /// The limit as `Quantity.String()` writes it, for the message.
    shown: String,
}

/// The pod's emptyDirs with a positive `sizeLimit`.
fn limits(pod: &Pod) -> Vec<Limit> {
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    volumes
        .filter_map(|v| {
            let written = &v.empty_dir.as_ref()?.size_limit.as_ref()?.0;
            let limit = Quantity::parse(written).ok().filter(|q| q.is_positive())?;
            let shown = quantity::canonical(written).ok()?;
            Some(Limit { volume: v.name.clone(), bytes: limit.value(), shown })
        })
        .collect()
}

/// The kubelet never evicts a critical pod (`IsCriticalPod`): a static or mirror pod, or one of
/// system-critical priority.
fn is_critical(pod: &Pod) -> bool {
    let annotations = pod.metadata.annotations.as_ref();
    let source = annotations.and_then(|a| a.get(CONFIG_SOURCE));
    let static_or_mirror =
        source.is_some_and(|s| s != API_SOURCE) || annotations.is_some_and(|a| a.contains_key(CONFIG_MIRROR));
    let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    static_or_mirror || priority >= SYSTEM_CRITICAL_PRIORITY
}

/// `Usage of EmptyDir volume "cache" exceeds the limit "1Mi". ` (the trailing space is the
/// kubelet's).
fn message(limit: &Limit) -> String {
    format!("Usage of EmptyDir volume {} exceeds the limit {}. ", go::quote(&limit.volume), go::quote(&limit.shown))
}

/// The eviction the volumes' usage calls for now, if any: for the first volume (in spec order)
/// that uses more than its limit. A volume that cannot be measured (not set up yet) is skipped.
fn over_limit(dirs: &[(Limit, PathBuf)]) -> Option<Eviction> {
    dirs.iter().find_map(|(limit, dir)| {
        let used = usage::disk_usage(dir).ok()?;
        (i128::from(used) > limit.bytes).then(|| Eviction { reason: REASON.to_string(), message: message(limit) })
    })
}

/// A pod's usage watcher; the task ends when the watch is dropped.
pub(crate) struct Watch {
    verdict: Arc<Mutex<Option<Eviction>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    /// Starts watching the pod's limited emptyDirs, unless it has none or is critical.
    pub fn start(root: &Path, pod: &Pod, clock: Clock, bell: Arc<Notify>) -> Option<Watch> {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let limits = limits(pod);
        if limits.is_empty() || is_critical(pod) {
            return None;
        }
        let dirs: Vec<(Limit, PathBuf)> = limits
            .into_iter()
            .map(|l| {
                let dir = layout::empty_dir(root, uid, &l.volume);
                (l, dir)
            })
            .collect();
        let dirs = Arc::new(dirs);
        let verdict = Arc::new(Mutex::new(None));
        let found = verdict.clone();
        let task = tokio::spawn(async move {
            loop {
                clock.sleep_until(clock.now() + MONITORING_PERIOD).await;
                let dirs = dirs.clone();
                let Ok(Some(eviction)) = tokio::task::spawn_blocking(move || over_limit(&dirs)).await else { continue };
                *found.lock().unwrap_or_else(|e| e.into_inner()) = Some(eviction);
                bell.notify_one();
                return;
            }
        });
        Some(Watch { verdict, task })
    }

    /// The eviction found, once.
    pub fn take(&self) -> Option<Eviction> {
        self.verdict.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        podwright_api::parse_manifests("p.yaml", yaml).unwrap().remove(0)
    }

    const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: p, uid: u1}
spec:
  containers: [{name: a, image: b}]
  volumes:
  - {name: plain, emptyDir: {}}
  - {name: zero, emptyDir: {sizeLimit: "0"}}
  - {name: cache, emptyDir: {sizeLimit: 1024Ki}}
  - {name: mem, emptyDir: {medium: Memory, sizeLimit: "1000000"}}
  - {name: host, hostPath: {path: /tmp}}
"#;

    #[test]
    fn emptydirs_with_a_positive_limit_are_watched() {
        assert_eq!(
            limits(&pod(POD)),
            [
                Limit { volume: "cache".into(), bytes: 1 << 20, shown: "1Mi".into() },
                Limit { volume: "mem".into(), bytes: 1_000_000, shown: "1M".into() },
            ]
        );
        let l = &limits(&pod(POD))[0];
        assert_eq!(message(l), "Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". ");
    }

    #[test]
    fn critical_pods_are_not_evicted() {
        assert!(!is_critical(&pod(POD)));
        let annotated = |k: &str, v: &str| {
            let mut p = pod(POD);
            p.metadata.annotations = Some([(k.to_string(), v.to_string())].into());
            p
        };
        assert!(is_critical(&annotated(CONFIG_SOURCE, "file")));
        assert!(!is_critical(&annotated(CONFIG_SOURCE, "api")));
        assert!(is_critical(&annotated(CONFIG_MIRROR, "abc")));
        let mut p = pod(POD);
        p.spec.as_mut().unwrap().priority = Some(SYSTEM_CRITICAL_PRIORITY);
        assert!(is_critical(&p));
    }

    #[test]
    fn the_first_volume_over_its_limit_evicts() {
        let root = std::env::temp_dir().join(format!("pw-eviction-{}", std::process::id()));
        let dir = |name: &str| {
            let d = root.join(name);
            std::fs::create_dir_all(&d).unwrap();
            d
        };
        let limit = |volume: &str, bytes: i128| Limit { volume: volume.into(), bytes, shown: format!("{bytes}") };
        let (small, big) = (dir("small"), dir("big"));
        std::fs::write(big.join("f"), vec![7u8; 64 * 1024]).unwrap();
        let dirs = vec![
            (limit("small", 1 << 20), small),
            (limit("big", 16 * 1024), big),
            (limit("gone", 1), root.join("gone")),
        ];
        let e = over_limit(&dirs).expect("big is over its limit");
        assert_eq!(
            (e.reason.as_str(), e.message.as_str()),
            ("Evicted", "Usage of EmptyDir volume \"big\" exceeds the limit \"16384\". ")
        );
        assert_eq!(over_limit(&dirs[..1]), None);
        std::fs::remove_dir_all(root).unwrap();
    }
}
