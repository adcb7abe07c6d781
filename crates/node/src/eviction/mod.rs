//! The kubelet's eviction manager, for the signals podwright acts on: a pod's local storage
//! over its limits (`localStorageEviction` in `pkg/kubelet/eviction/eviction_manager.go`; the
//! checks and their order are [`local_storage`]'s). Node-pressure evictions are not made.
//!
//! A pod with such a limit (an emptyDir `sizeLimit`, an `ephemeral-storage` limit) gets a
//! [`Watch`] from its pod worker: a task that measures the pod's storage every
//! [`MONITORING_PERIOD`] and, at the first verdict, hands it to the worker and rings its bell.
//! The worker records the eviction (the `Evicted` event, the checkpoint) and the planner fails
//! the pod with it.
//!
//! What a round measures, as the kubelet's summary counts it: the limited emptyDirs (memory-backed
//! ones too, though their tmpfs is as large as the limit, so writes past it fail instead); and,
//! for a pod with an `ephemeral-storage` limit, each running container's writable layer (CRI
//! `ListContainerStats`, one call for the pod) and log directory, its local ephemeral volumes
//! and its hosts file. Files are walked off the async threads.

mod local_storage;

use crate::context::NodeContext;
use crate::cri::labels;
use crate::layout;
use crate::volumes::{projection, usage};
use k8s_openapi::api::core::v1::Pod;
use local_storage::{Limits, Usage};
use podwright_api::annotations::{CONFIG_MIRROR, is_static};
use podwright_planner::Eviction;
use podwright_runtime::Runtime;
use podwright_runtime::cri_api::ContainerStats;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How often usage is measured: the kubelet's eviction manager looks every 10 s
/// (`evictionMonitoringPeriod`), on volume statistics it refreshes every minute
/// (`volumeStatsAggPeriod`). Measuring at the manager's own pace evicts as soon as the kubelet
/// could at best, and a walk of one pod's storage every 10 s is cheap next to that of every
/// volume of every pod.
pub const MONITORING_PERIOD: Duration = Duration::from_secs(10);

/// Pods at or above this priority are critical (`scheduling.SystemCriticalPriority`).
const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// The kubelet never evicts a critical pod (`IsCriticalPod`): a static or mirror pod, or one of
/// system-critical priority.
fn is_critical(pod: &Pod) -> bool {
    let mirror = pod.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(CONFIG_MIRROR));
    let static_or_mirror = is_static(pod) || mirror;
    let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    static_or_mirror || priority >= SYSTEM_CRITICAL_PRIORITY
}

/// Where one pod's storage is, and which of it a round measures.
struct Target {
    uid: String,
    limits: Limits,
    /// The volumes to walk, by name.
    volumes: Vec<(String, PathBuf)>,
    /// The names of the pod's local ephemeral volumes.
    local_ephemeral: Vec<String>,
    logs: PathBuf,
    etc_hosts: PathBuf,
}

impl Target {
    fn of(root: &Path, pod: &Pod) -> Target {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let limits = Limits::of(pod);
        let whole = limits.counts_pod();
        let (mut volumes, mut local_ephemeral) = (Vec::new(), Vec::new());
        for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let counted = whole && local_storage::is_local_ephemeral(v);
            if counted {
                local_ephemeral.push(v.name.clone());
            }
            if !counted && !limits.empty_dirs.iter().any(|(name, _)| *name == v.name) {
                continue;
            }
            let dir = match projection::plugin(v) {
                Some((plugin, _)) => layout::volume_dir(root, &uid, plugin, &v.name),
                None => layout::empty_dir(root, &uid, &v.name),
            };
            volumes.push((v.name.clone(), dir));
        }
        let (logs, etc_hosts) = (layout::log_directory(root, &uid), layout::etc_hosts(root, &uid));
        Target { uid, limits, volumes, local_ephemeral, logs, etc_hosts }
    }

    /// One round's usage; `None` when the runtime could not say.
    async fn measure(self: &Arc<Self>, runtime: &dyn Runtime) -> Option<Usage> {
        let layers = if self.limits.counts_pod() {
            let selector = BTreeMap::from([(labels::POD_UID.to_string(), self.uid.clone())]);
            match runtime.list_container_stats(&selector).await {
                Ok(stats) => writable_layers(&stats),
                Err(e) => {
                    tracing::debug!(%e, "could not read the pod's container stats");
                    return None;
                }
            }
        } else {
            BTreeMap::new()
        };
        let target = self.clone();
        tokio::task::spawn_blocking(move || target.walk(layers)).await.ok()
    }

    /// The files' share of a round, added to the containers' writable layers. What cannot be
    /// measured (not there yet) is left out.
    fn walk(&self, layers: BTreeMap<String, u64>) -> Usage {
        let volumes = self.volumes.iter().filter_map(|(name, dir)| Some((name.clone(), usage::disk_usage(dir).ok()?)));
        let containers = layers.into_iter().map(|(name, layer)| {
            let logs = usage::disk_usage(&self.logs.join(&name)).unwrap_or(0);
            (name, layer.saturating_add(logs))
        });
        let pod_files = if self.limits.counts_pod() { usage::disk_usage(&self.etc_hosts).unwrap_or(0) } else { 0 };
        Usage {
            volumes: volumes.collect(),
            containers: containers.collect(),
            pod_files,
            local_ephemeral: self.local_ephemeral.clone(),
        }
    }
}

/// Each container's writable layer, by name: its newest instance's, as the kubelet's summary
/// keeps the newest container of each name.
fn writable_layers(stats: &[ContainerStats]) -> BTreeMap<String, u64> {
    let mut newest: BTreeMap<String, (u32, u64)> = BTreeMap::new();
    for s in stats {
        let Some(meta) = s.attributes.as_ref().and_then(|a| a.metadata.as_ref()) else { continue };
        let used = s.writable_layer.as_ref().and_then(|w| w.used_bytes.as_ref()).map_or(0, |v| v.value);
        let kept = newest.entry(meta.name.clone()).or_insert((meta.attempt, used));
        if meta.attempt >= kept.0 {
            *kept = (meta.attempt, used);
        }
    }
    newest.into_iter().map(|(name, (_, used))| (name, used)).collect()
}

/// A pod's usage watcher; the task ends when the watch is dropped.
pub(crate) struct Watch {
    verdict: Arc<Mutex<Option<Eviction>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    /// Starts watching the pod's local storage, unless it has no limit on it or is critical.
    pub fn start(ctx: &NodeContext, pod: &Pod, bell: Arc<Notify>) -> Option<Watch> {
        let target = Arc::new(Target::of(&ctx.root, pod));
        if target.limits.is_empty() || is_critical(pod) {
            return None;
        }
        let (runtime, clock) = (ctx.runtime.clone(), ctx.clock);
        let verdict = Arc::new(Mutex::new(None));
        let found = verdict.clone();
        let task = tokio::spawn(async move {
            loop {
                clock.sleep_until(clock.now() + MONITORING_PERIOD).await;
                let Some(usage) = target.measure(runtime.as_ref()).await else { continue };
                let Some(eviction) = local_storage::decide(&target.limits, &usage) else { continue };
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
    use local_storage::Limit;
    use podwright_api::annotations::CONFIG_SOURCE;
    use podwright_runtime::cri_api::{ContainerAttributes, ContainerMetadata, FilesystemUsage, UInt64Value};

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
        let target = Target::of(Path::new("/r"), &pod(POD));
        assert_eq!(
            target.limits.empty_dirs,
            [
                ("cache".to_string(), Limit { bytes: 1 << 20, shown: "1Mi".into() }),
                ("mem".to_string(), Limit { bytes: 1_000_000, shown: "1M".into() }),
            ]
        );
        // Only they are walked: the pod has no ephemeral-storage limit.
        let walked: Vec<&str> = target.volumes.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(walked, ["cache", "mem"]);
        assert!(target.local_ephemeral.is_empty());
    }

    #[test]
    fn a_pod_with_a_storage_limit_is_measured_whole() {
        let limited = POD
            .replace("[{name: a, image: b}]", "[{name: a, image: b, resources: {limits: {ephemeral-storage: 1Gi}}}]");
        let target = Target::of(Path::new("/r"), &pod(&limited));
        let walked: Vec<(&str, &Path)> = target.volumes.iter().map(|(n, d)| (n.as_str(), d.as_path())).collect();
        assert_eq!(
            walked,
            [
                ("plain", Path::new("/r/pods/u1/volumes/kubernetes.io~empty-dir/plain")),
                ("zero", Path::new("/r/pods/u1/volumes/kubernetes.io~empty-dir/zero")),
                ("cache", Path::new("/r/pods/u1/volumes/kubernetes.io~empty-dir/cache")),
                ("mem", Path::new("/r/pods/u1/volumes/kubernetes.io~empty-dir/mem")),
            ]
        );
        assert_eq!(target.local_ephemeral, ["plain", "zero", "cache"]);
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

    fn scratch(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("pw-eviction-{name}-{}", std::process::id()))
    }

    #[test]
    fn the_first_volume_over_its_limit_evicts() {
        let root = scratch("volumes");
        let dir = |name: &str| {
            let d = root.join(name);
            std::fs::create_dir_all(&d).unwrap();
            d
        };
        let limit = |volume: &str, bytes: i128| (volume.to_string(), Limit { bytes, shown: format!("{bytes}") });
        let (small, big) = (dir("small"), dir("big"));
        std::fs::write(big.join("f"), vec![7u8; 64 * 1024]).unwrap();
        let limits = Limits {
            empty_dirs: vec![limit("small", 1 << 20), limit("big", 16 * 1024), limit("gone", 1)],
            ..Limits::default()
        };
        let target = |limits: Limits| Target {
            uid: "u1".into(),
            limits,
            volumes: vec![
                ("small".into(), small.clone()),
                ("big".into(), big.clone()),
                ("gone".into(), root.join("gone")),
            ],
            local_ephemeral: vec![],
            logs: root.join("logs"),
            etc_hosts: root.join("etc-hosts"),
        };
        let usage = target(limits.clone()).walk(BTreeMap::new());
        let e = local_storage::decide(&limits, &usage).expect("big is over its limit");
        assert_eq!(
            (e.reason.as_str(), e.message.as_str()),
            ("Evicted", "Usage of EmptyDir volume \"big\" exceeds the limit \"16384\". ")
        );
        let first = Limits { empty_dirs: limits.empty_dirs[..1].to_vec(), ..Limits::default() };
        assert_eq!(local_storage::decide(&first, &target(first.clone()).walk(BTreeMap::new())), None);
        std::fs::remove_dir_all(root).unwrap();
    }

    fn stats(name: &str, attempt: u32, layer: Option<u64>) -> ContainerStats {
        ContainerStats {
            attributes: Some(ContainerAttributes {
                metadata: Some(ContainerMetadata { name: name.into(), attempt }),
                ..Default::default()
            }),
            writable_layer: layer
                .map(|value| FilesystemUsage { used_bytes: Some(UInt64Value { value }), ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn a_container_counts_its_newest_writable_layer_and_its_logs() {
        let layers =
            writable_layers(&[stats("a", 0, Some(1 << 20)), stats("a", 1, Some(3 << 20)), stats("b", 0, None)]);
        assert_eq!(layers, BTreeMap::from([("a".to_string(), 3 << 20), ("b".to_string(), 0)]));

        let root = scratch("containers");
        std::fs::create_dir_all(root.join("logs/a")).unwrap();
        std::fs::write(root.join("logs/a/0.log"), vec![b'x'; 64 * 1024]).unwrap();
        std::fs::write(root.join("etc-hosts"), "127.0.0.1 localhost\n").unwrap();
        let limits = Limits {
            containers: BTreeMap::from([(
                "a".to_string(),
                Limit { bytes: (3 << 20) + 32 * 1024, shown: "3104Ki".into() },
            )]),
            ..Limits::default()
        };
        let target = Target {
            uid: "u1".into(),
            limits: limits.clone(),
            volumes: vec![],
            local_ephemeral: vec![],
            logs: root.join("logs"),
            etc_hosts: root.join("etc-hosts"),
        };
        let usage = target.walk(layers);
        assert!(usage.containers["a"] >= (3 << 20) + 64 * 1024, "{usage:?}");
        assert!(usage.pod_files > 0, "the hosts file counts: {usage:?}");
        let e = local_storage::decide(&limits, &usage).expect("a is over its limit with its logs");
        assert_eq!(e.message, "Container a exceeded its local ephemeral storage limit \"3104Ki\". ");
        std::fs::remove_dir_all(root).unwrap();
    }
}
