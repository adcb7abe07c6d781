//! The eviction manager's local-storage checks (`localStorageEviction` in
//! `pkg/kubelet/eviction/eviction_manager.go`), decided from the pod's limits and what its
//! storage uses, in the kubelet's order: an emptyDir over its `sizeLimit`
//! (`emptyDirLimitEviction`), then the pod over its containers' `ephemeral-storage` limits
//! together (`podEphemeralStorageLimitEviction`), then an app container over its own
//! (`containerEphemeralStorageLimitEviction`). None of them gives the pod a `DisruptionTarget`
//! condition: `evictPod` is passed none (only node-pressure evictions add one). No I/O here.

use k8s_openapi::api::core::v1::{Pod, Volume};
use podwright_api::go;
use podwright_api::quantity::{self, Quantity};
use podwright_planner::Eviction;
use podwright_planner::resources::pod_limits;
use std::collections::BTreeMap;

/// The pod's `status.reason` and the event's reason (the eviction manager's `Reason`).
const REASON: &str = "Evicted";

/// The resource whose limits are checked.
const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

/// A limit in bytes, and as `Quantity.String()` writes it for a message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Limit {
    pub bytes: i128,
    pub shown: String,
}

impl Limit {
    fn parse(written: &str) -> Option<Limit> {
        let bytes = Quantity::parse(written).ok()?.value();
        Some(Limit { bytes, shown: quantity::canonical(written).ok()? })
    }
}

/// What a pod's local storage is held to.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Limits {
    /// The emptyDirs with a positive `sizeLimit`, in spec order, by volume name.
    pub empty_dirs: Vec<(String, Limit)>,
    /// The pod's `ephemeral-storage` limit (`PodLimits`: its containers', init containers
    /// counted as the scheduler counts them), when any container sets one.
    pub pod: Option<Limit>,
    /// The app containers with a non-zero `ephemeral-storage` limit, by name.
    pub containers: BTreeMap<String, Limit>,
}

impl Limits {
    pub fn of(pod: &Pod) -> Limits {
        let spec = pod.spec.as_ref();
        let empty_dirs = spec.iter().flat_map(|s| s.volumes.iter().flatten()).filter_map(|v| {
            let written = &v.empty_dir.as_ref()?.size_limit.as_ref()?.0;
            Some((v.name.clone(), Limit::parse(written).filter(|l| l.bytes > 0)?))
        });
        let containers = spec.iter().flat_map(|s| &s.containers).filter_map(|c| {
            let written = &c.resources.as_ref()?.limits.as_ref()?.get(EPHEMERAL_STORAGE)?.0;
            Some((c.name.clone(), Limit::parse(written).filter(|l| l.bytes != 0)?))
        });
        let pod_limit =
            pod_limits(pod).remove(EPHEMERAL_STORAGE).map(|a| Limit { bytes: a.value.value(), shown: a.to_string() });
        Limits { empty_dirs: empty_dirs.collect(), pod: pod_limit, containers: containers.collect() }
    }

    pub fn is_empty(&self) -> bool {
        self.empty_dirs.is_empty() && self.pod.is_none() && self.containers.is_empty()
    }

    /// Whether the pod's whole ephemeral storage is to be measured, not only its limited
    /// emptyDirs.
    pub fn counts_pod(&self) -> bool {
        self.pod.is_some() || !self.containers.is_empty()
    }
}

/// The volumes that count towards the pod's ephemeral storage (`IsLocalEphemeralVolume`): an
/// emptyDir on disk, a configMap.
pub(crate) fn is_local_ephemeral(v: &Volume) -> bool {
    let on_disk = v.empty_dir.as_ref().is_some_and(|e| e.medium.as_deref().unwrap_or_default().is_empty());
    on_disk || v.config_map.is_some()
}

/// What a pod's local storage uses, in bytes, as one round measured it.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Usage {
    /// Each volume measured, by name: the limited emptyDirs, and the pod's local ephemeral
    /// volumes when the pod is measured whole. A volume not set up yet is missing.
    pub volumes: BTreeMap<String, u64>,
    /// Each running container, by name: its writable layer and its logs.
    pub containers: BTreeMap<String, u64>,
    /// The pod's own files beside them (its hosts file, as the kubelet's `etcHostsStats`).
    pub pod_files: u64,
    /// The names in `volumes` of the pod's local ephemeral volumes.
    pub local_ephemeral: Vec<String>,
}

impl Usage {
    /// The pod's ephemeral storage (the summary's `EphemeralStorage.UsedBytes`): its containers,
    /// its local ephemeral volumes and its own files.
    fn pod_total(&self) -> i128 {
        let volumes = self.local_ephemeral.iter().filter_map(|n| self.volumes.get(n));
        let bytes: u64 = self.containers.values().chain(volumes).sum::<u64>() + self.pod_files;
        i128::from(bytes)
    }
}

fn evicted(message: String) -> Eviction {
    Eviction { reason: REASON.to_string(), message }
}

/// The eviction the pod's usage calls for now, if any.
pub(crate) fn decide(limits: &Limits, usage: &Usage) -> Option<Eviction> {
    for (volume, limit) in &limits.empty_dirs {
        if usage.volumes.get(volume).is_some_and(|&used| i128::from(used) > limit.bytes) {
            return Some(evicted(format!(
                "Usage of EmptyDir volume {} exceeds the limit {}. ",
                go::quote(volume),
                go::quote(&limit.shown)
            )));
        }
    }
    if let Some(limit) = &limits.pod
        && usage.pod_total() > limit.bytes
    {
        return Some(evicted(format!(
            "Pod ephemeral local storage usage exceeds the total limit of containers {}. ",
            limit.shown
        )));
    }
    usage.containers.iter().find_map(|(name, &used)| {
        let limit = limits.containers.get(name)?;
        (i128::from(used) > limit.bytes).then(|| {
            evicted(format!(
                "Container {name} exceeded its local ephemeral storage limit {}. ",
                go::quote(&limit.shown)
            ))
        })
    })
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
  initContainers:
  - {name: init, image: b, resources: {limits: {ephemeral-storage: 3Gi}}}
  - {name: side, image: b, restartPolicy: Always, resources: {limits: {ephemeral-storage: 512Mi}}}
  containers:
  - {name: a, image: b, resources: {limits: {ephemeral-storage: 1Gi}}}
  - {name: zero, image: b, resources: {limits: {ephemeral-storage: "0"}}}
  - {name: none, image: b}
  volumes:
  - {name: plain, emptyDir: {}}
  - {name: zero, emptyDir: {sizeLimit: "0"}}
  - {name: cache, emptyDir: {sizeLimit: 1024Ki}}
  - {name: mem, emptyDir: {medium: Memory, sizeLimit: "1000000"}}
  - {name: cm, configMap: {name: c}}
  - {name: s, secret: {secretName: s}}
  - {name: host, hostPath: {path: /tmp}}
"#;

    fn limit(bytes: i128, shown: &str) -> Limit {
        Limit { bytes, shown: shown.into() }
    }

    #[test]
    fn the_pods_limits() {
        let l = Limits::of(&pod(POD));
        assert_eq!(
            l.empty_dirs,
            [("cache".to_string(), limit(1 << 20, "1Mi")), ("mem".to_string(), limit(1_000_000, "1M"))]
        );
        // An app container with a zero limit has none; one without has none either.
        assert_eq!(l.containers, BTreeMap::from([("a".to_string(), limit(1 << 30, "1Gi"))]));
        // The init container's 3Gi (the sidecar starts after it) is more than the app
        // containers' and the sidecar's 1.5Gi: `PodLimits` takes the larger.
        assert_eq!(l.pod, Some(limit(3 << 30, "3Gi")));
        assert!(l.counts_pod());
        let volumes = pod(POD).spec.unwrap().volumes.unwrap();
        let counted: Vec<&str> = volumes.iter().filter(|v| is_local_ephemeral(v)).map(|v| v.name.as_str()).collect();
        assert_eq!(counted, ["plain", "zero", "cache", "cm"]);
    }

    #[test]
    fn a_pod_without_storage_limits_is_not_watched() {
        let p = pod(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: a, image: b, resources: {requests: {ephemeral-storage: 64Mi}}}]\n",
        );
        assert!(Limits::of(&p).is_empty());
    }

    fn usage(volumes: &[(&str, u64)], containers: &[(&str, u64)], local: &[&str]) -> Usage {
        Usage {
            volumes: volumes.iter().map(|(n, b)| (n.to_string(), *b)).collect(),
            containers: containers.iter().map(|(n, b)| (n.to_string(), *b)).collect(),
            pod_files: 4096,
            local_ephemeral: local.iter().map(|n| n.to_string()).collect(),
        }
    }

    fn message(limits: &Limits, usage: &Usage) -> Option<String> {
        decide(limits, usage).map(|e| {
            assert_eq!(e.reason, "Evicted");
            e.message
        })
    }

    #[test]
    fn an_emptydir_over_its_limit_comes_first() {
        let l = Limits::of(&pod(POD));
        let u = usage(&[("cache", (1 << 20) + 1), ("plain", 8 << 30)], &[("a", 2 << 30)], &["plain", "cache"]);
        assert_eq!(message(&l, &u).unwrap(), "Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". ");
        // At its limit, not over: the next check.
        let u = usage(&[("cache", 1 << 20)], &[("a", 2 << 30)], &["cache"]);
        assert_eq!(message(&l, &u).unwrap(), "Container a exceeded its local ephemeral storage limit \"1Gi\". ");
    }

    #[test]
    fn the_pod_over_its_containers_limits_together() {
        let l = Limits { pod: Some(limit(1 << 30, "1Gi")), ..Limits::default() };
        // Containers, local ephemeral volumes and the hosts file add up; a volume not counted
        // (a memory emptyDir) does not.
        let under = usage(&[("plain", 512 << 20), ("mem", 4 << 30)], &[("a", (512 << 20) - 4096)], &["plain"]);
        assert_eq!(message(&l, &under), None);
        let over = usage(&[("plain", 512 << 20)], &[("a", (512 << 20) - 4095)], &["plain"]);
        assert_eq!(
            message(&l, &over).unwrap(),
            "Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. "
        );
    }

    #[test]
    fn a_container_over_its_own_limit() {
        let l = Limits::of(&pod(POD));
        // A container without a limit, or with a zero one, is never over it.
        let u = usage(&[], &[("none", 8 << 30), ("zero", 8 << 30), ("a", 1 << 30)], &[]);
        let pod_only = Limits { pod: None, ..l.clone() };
        assert_eq!(message(&pod_only, &u), None);
        let u = usage(&[], &[("a", (1 << 30) + 1)], &[]);
        assert_eq!(message(&pod_only, &u).unwrap(), "Container a exceeded its local ephemeral storage limit \"1Gi\". ");
    }
}
