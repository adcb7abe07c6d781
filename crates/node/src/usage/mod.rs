//! Resource usage: the kubelet's resource analyzer (its cadvisor and CRI stats providers) for
//! podwright. CPU and memory of every running container come from CRI `ListContainerStats`, a
//! pod's are the sum of its containers' (containerd 1.6's `ListPodSandboxStats` reads the pod's
//! cgroup parent, which a sandbox without one does not have), the node's from `/proc`. Read on demand: each read is one round of runtime calls, and CPU
//! rates (`usageNanoCores`) are taken against the sample the round before kept here, so nothing
//! polls while nobody asks.

pub mod host;
pub mod prometheus;
pub mod summary;

use crate::cri::labels;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podwright_runtime::cri_api;
use podwright_runtime::{Clock, Runtime, RuntimeResult};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use summary::{ContainerStats, CpuStats, MemoryStats, NodeStats, PodReference, PodStats, Summary};

/// The shortest window a rate is taken over: a read closer than this to the last keeps the
/// last rate (two requests in a row do not report the noise of a few milliseconds).
const MIN_WINDOW: SignedDuration = SignedDuration::from_secs(1);
/// The node's key among the containers' ids in the kept samples.
const NODE: &str = "";

/// One round's usage, with the window each pod's CPU rate was taken over.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    pub summary: Summary,
    /// Pod UID → the longest window of its containers' rates.
    pub pod_windows: HashMap<String, SignedDuration>,
    pub node_window: SignedDuration,
}

/// A cumulative CPU counter read at a time, with the rate reported for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    at: Timestamp,
    total: u64,
    rate: u64,
    window: SignedDuration,
}

/// The CPU rate at `at` of a counter reading `total`, against the sample kept from before, or,
/// with none, against zero at `start` (a counter is zero when its container starts; so a
/// container that started since the last round gets its exact rate, one older its average).
/// `None` when no window is open yet. The result is what to keep for the next round.
fn advance(kept: Option<Sample>, start: Timestamp, at: Timestamp, total: u64) -> Option<Sample> {
    let (from, from_total) = match kept {
        Some(k) if total >= k.total => {
            if at.duration_since(k.at) < MIN_WINDOW {
                return Some(k);
            }
            (k.at, k.total)
        }
        // No sample, or the counter went back (a reused id): count from the start.
        _ => (start, 0),
    };
    let window = at.duration_since(from);
    let nanos = u128::try_from(window.as_nanos()).ok().filter(|&n| n > 0)?;
    let rate = u128::from(total - from_total) * 1_000_000_000 / nanos;
    Some(Sample { at, total, rate: u64::try_from(rate).unwrap_or(u64::MAX), window })
}

fn time(nanos: i64) -> Time {
    Time(Timestamp::from_nanosecond(i128::from(nanos)).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn value(v: &Option<cri_api::UInt64Value>) -> Option<u64> {
    v.as_ref().map(|v| v.value)
}

/// Reads the node's and its pods' usage; share one per node (it keeps the last samples).
pub struct UsageCollector {
    runtime: Arc<dyn Runtime>,
    clock: Clock,
    node_name: String,
    selector: BTreeMap<String, String>,
    /// Container id (or [`NODE`]) → the sample the next rate is taken against.
    kept: Mutex<HashMap<String, Sample>>,
}

impl UsageCollector {
    /// A collector of the pods that the podwright with root directory `root` runs on `runtime`.
    pub fn new(runtime: Arc<dyn Runtime>, clock: Clock, node_name: &str, root: &Path) -> Self {
        let mut selector = labels::managed_selector();
        selector.insert(labels::ROOT_DIR.to_string(), root.display().to_string());
        UsageCollector { runtime, clock, node_name: node_name.to_string(), selector, kept: Mutex::default() }
    }

    /// One round: three runtime calls (container stats, containers, sandboxes) and `/proc`.
    pub async fn collect(&self) -> RuntimeResult<Usage> {
        let stats = self.runtime.list_container_stats(&self.selector).await?;
        let containers = self.runtime.list_container_states(&self.selector).await?;
        let sandboxes = self.runtime.list_pod_sandbox_states(&self.selector).await?;
        let host = host::sample().map_err(|e| podwright_runtime::RuntimeError::Failed(format!("/proc: {e}")))?;
        let now = self.clock.now();

        let created: HashMap<&str, i64> = containers.iter().map(|c| (c.id.as_str(), c.created_at)).collect();
        // A pod's start is its newest sandbox's creation.
        let mut pod_start: HashMap<&str, i64> = HashMap::new();
        for s in &sandboxes {
            if let Some(uid) = s.labels.get(labels::POD_UID) {
                let t = pod_start.entry(uid).or_default();
                *t = (*t).max(s.created_at);
            }
        }

        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = HashMap::with_capacity(stats.len() + 1);
        let mut pods: BTreeMap<(String, String), PodStats> = BTreeMap::new();
        let mut pod_windows: HashMap<String, SignedDuration> = HashMap::new();
        for s in &stats {
            let Some(attrs) = &s.attributes else { continue };
            let label = |k: &str| attrs.labels.get(k).cloned().unwrap_or_default();
            let uid = label(labels::POD_UID);
            let start = created.get(attrs.id.as_str()).copied().unwrap_or(0);
            let cpu = s.cpu.as_ref().map(|c| {
                let total = value(&c.usage_core_nano_seconds);
                let at = time(c.timestamp).0;
                let sample = total.and_then(|t| advance(kept.get(&attrs.id).copied(), time(start).0, at, t));
                if let Some(sample) = sample {
                    next.insert(attrs.id.clone(), sample);
                    let w = pod_windows.entry(uid.clone()).or_default();
                    *w = (*w).max(sample.window);
                }
                CpuStats { time: Time(at), usage_nano_cores: sample.map(|s| s.rate), usage_core_nano_seconds: total }
            });
            let memory = s.memory.as_ref().map(|m| MemoryStats {
                time: time(m.timestamp),
                available_bytes: value(&m.available_bytes),
                usage_bytes: value(&m.usage_bytes),
                working_set_bytes: value(&m.working_set_bytes),
                rss_bytes: value(&m.rss_bytes),
                page_faults: value(&m.page_faults),
                major_page_faults: value(&m.major_page_faults),
            });
            let (name, namespace) = (label(labels::POD_NAME), label(labels::POD_NAMESPACE));
            let pod = pods.entry((namespace.clone(), name.clone())).or_insert_with(|| PodStats {
                start_time: time(pod_start.get(uid.as_str()).copied().unwrap_or(start)),
                pod_ref: PodReference { name, namespace, uid },
                containers: Vec::new(),
                cpu: None,
                memory: None,
            });
            let container =
                attrs.metadata.as_ref().map(|m| m.name.clone()).unwrap_or_else(|| label(labels::CONTAINER_NAME));
            pod.containers.push(ContainerStats { name: container, start_time: time(start), cpu, memory });
        }
        let mut pods: Vec<PodStats> = pods.into_values().collect();
        for pod in &mut pods {
            pod.containers.sort_by(|a, b| a.name.cmp(&b.name));
            pod.cpu = sum_cpu(&pod.containers);
            pod.memory = sum_memory(&pod.containers);
        }

        let boot = Timestamp::from_second(host.boot_time).unwrap_or(Timestamp::UNIX_EPOCH);
        let node_sample = advance(kept.get(NODE).copied(), boot, now, host.cpu_nanos);
        if let Some(s) = node_sample {
            next.insert(NODE.to_string(), s);
        }
        *kept = next;
        drop(kept);

        let m = host.memory;
        let node = NodeStats {
            node_name: self.node_name.clone(),
            start_time: Time(boot),
            cpu: Some(CpuStats {
                time: Time(now),
                usage_nano_cores: node_sample.map(|s| s.rate),
                usage_core_nano_seconds: Some(host.cpu_nanos),
            }),
            memory: Some(MemoryStats {
                time: Time(now),
                // The kubelet's: capacity less working set.
                available_bytes: Some(m.total.saturating_sub(m.working_set)),
                usage_bytes: Some(m.usage),
                working_set_bytes: Some(m.working_set),
                rss_bytes: None,
                page_faults: None,
                major_page_faults: None,
            }),
        };
        let node_window = node_sample.map_or(SignedDuration::ZERO, |s| s.window);
        Ok(Usage { summary: Summary { node, pods }, pod_windows, node_window })
    }
}

/// A pod's CPU: its containers' summed, at the latest of their times; `None` with no container
/// reporting.
fn sum_cpu(containers: &[ContainerStats]) -> Option<CpuStats> {
    let cpus: Vec<&CpuStats> = containers.iter().filter_map(|c| c.cpu.as_ref()).collect();
    let time = cpus.iter().map(|c| c.time.0).max()?;
    let sum = |f: fn(&CpuStats) -> Option<u64>| cpus.iter().map(|c| f(c)).sum::<Option<u64>>();
    Some(CpuStats {
        time: Time(time),
        usage_nano_cores: sum(|c| c.usage_nano_cores),
        usage_core_nano_seconds: sum(|c| c.usage_core_nano_seconds),
    })
}

fn sum_memory(containers: &[ContainerStats]) -> Option<MemoryStats> {
    let mems: Vec<&MemoryStats> = containers.iter().filter_map(|c| c.memory.as_ref()).collect();
    let time = mems.iter().map(|m| m.time.0).max()?;
    let sum = |f: fn(&MemoryStats) -> Option<u64>| mems.iter().map(|m| f(m)).sum::<Option<u64>>();
    Some(MemoryStats {
        time: Time(time),
        available_bytes: None,
        usage_bytes: sum(|m| m.usage_bytes),
        working_set_bytes: sum(|m| m.working_set_bytes),
        rss_bytes: sum(|m| m.rss_bytes),
        page_faults: sum(|m| m.page_faults),
        major_page_faults: sum(|m| m.major_page_faults),
    })
}

#[cfg(test)]
mod tests;
