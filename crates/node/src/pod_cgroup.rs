//! The pod-level cgroup, as the kubelet's cgroupfs driver makes it (`pkg/kubelet/cm`:
//! `qos_container_manager_linux.go`, `pod_container_manager_linux.go`, `ResourceConfigForPod`):
//! `<root>/kubepods/pod<uid>` for a Guaranteed pod, `<root>/kubepods/burstable/pod<uid>` and
//! `<root>/kubepods/besteffort/pod<uid>` for the others, sized from the pod's effective requests
//! and limits (`spec.overhead` included), made before the sandbox, which gets it as its
//! `cgroup_parent` so that containerd puts the sandbox and every container under it. The CPU
//! arithmetic (`MilliCPUToShares`, `milliCPUToQuota`) is here, and the containers' CRI resources
//! use it too.
//!
//! `<root>` is `podwright_<root directory>` (each `/` as `_`), not the kubelet's `/`: several
//! podwrights (tests run many, each with its own root directory and containerd) share the host's
//! cgroup tree, and each removes the pod cgroups it finds that its pods no longer need.
//!
//! Cgroup v1 (a hierarchy per controller under the mount, `unified` beside them on hybrid
//! hosts): the cgroup is made in every hierarchy (`unified` included), with `cpu.shares`, `cpu.cfs_quota_us`,
//! `cpu.cfs_period_us` and `memory.limit_in_bytes`. Cgroup v2 (one tree, `cgroup.controllers`
//! at the mount): the controllers are enabled down the path, with `cpu.weight`, `cpu.max` and
//! `memory.max`.

use k8s_openapi::api::core::v1::Pod;
use podwright_planner::qos::qos_class;
use podwright_planner::resources::{pod_limits_declared, pod_requests};
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

/// Where the host mounts its cgroups.
pub const CGROUP_MOUNT: &str = "/sys/fs/cgroup";

/// CFS period of the kubelet's `--cpu-cfs-quota-period`, in microseconds.
pub(crate) const CPU_PERIOD: i64 = 100_000;
/// The least CFS quota the kernel takes, in microseconds.
const MIN_CPU_QUOTA: i64 = 1_000;
/// The least and most cpu shares cgroups take; the least is also what a pod without CPU
/// requests, and the `besteffort` level, get.
const MIN_CPU_SHARES: i64 = 2;
const MAX_CPU_SHARES: i64 = 262_144;

/// `MilliCPUToShares`: 1024 shares a core.
pub(crate) fn milli_cpu_to_shares(milli: i128) -> i64 {
    let shares = milli.saturating_mul(1024) / 1000;
    i64::try_from(shares).unwrap_or(MAX_CPU_SHARES).clamp(MIN_CPU_SHARES, MAX_CPU_SHARES)
}

/// `milliCPUToQuota`: no limit is no quota (0); a limit is at least the kernel's least quota.
pub(crate) fn milli_cpu_to_quota(milli: i128) -> i64 {
    if milli <= 0 {
        return 0;
    }
    i64::try_from(milli.saturating_mul(i128::from(CPU_PERIOD)) / 1000).unwrap_or(i64::MAX).max(MIN_CPU_QUOTA)
}

/// The pod cgroup's settings (`ResourceConfig`); `None` leaves the kernel's default (no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceConfig {
    pub cpu_shares: i64,
    /// CFS quota and period, in microseconds.
    pub cpu_quota: Option<(i64, i64)>,
    /// Bytes.
    pub memory_limit: Option<i64>,
}

/// `ResourceConfigForPod`: CPU shares from the pod's CPU requests; a CFS quota from its CPU limit
/// and a memory limit from its memory limit, each only when every container has that limit
/// (which a Guaranteed pod always has); a BestEffort pod gets the least shares and nothing else.
pub fn resource_config(pod: &Pod) -> ResourceConfig {
    if qos_class(pod) == "BestEffort" {
        return ResourceConfig { cpu_shares: MIN_CPU_SHARES, cpu_quota: None, memory_limit: None };
    }
    let requests = pod_requests(pod);
    let (limits, declared) = pod_limits_declared(pod);
    let cpu_request = requests.get("cpu").map_or(0, |q| q.value.milli_value());
    let cpu_limit = limits.get("cpu").map_or(0, |q| q.value.milli_value());
    let memory_limit = limits.get("memory").map_or(0, |q| i64::try_from(q.value.value()).unwrap_or(i64::MAX));
    ResourceConfig {
        cpu_shares: milli_cpu_to_shares(cpu_request),
        cpu_quota: declared.cpu.then(|| (milli_cpu_to_quota(cpu_limit), CPU_PERIOD)),
        memory_limit: declared.memory.then_some(memory_limit),
    }
}

/// The QoS level of a pod's cgroup under `kubepods`: none for Guaranteed.
fn qos_level(pod: &Pod) -> Option<&'static str> {
    match qos_class(pod) {
        "Guaranteed" => None,
        "BestEffort" => Some("besteffort"),
        _ => Some("burstable"),
    }
}

const QOS_LEVELS: [&str; 2] = ["burstable", "besteffort"];

/// `cpu.weight` of cgroup v2 for v1's `cpu.shares` (runc's `ConvertCPUSharesToCgroupV2Value`).
fn cpu_weight(shares: i64) -> i64 {
    1 + ((shares - 2) * 9999) / 262_142
}

/// The cgroup hierarchies found under the mount.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Hierarchy {
    /// The directories of the v1 hierarchies (one per mounted controller).
    V1(Vec<PathBuf>),
    V2,
}

/// The pod cgroups of one podwright: made, sized and removed under its own `kubepods`.
#[derive(Debug, Clone)]
pub struct PodCgroups {
    mount: PathBuf,
    /// `podwright_<root dir>/kubepods`, relative to the mount (or to each v1 hierarchy).
    kubepods: PathBuf,
    hierarchy: Hierarchy,
}

impl PodCgroups {
    /// The pod cgroups of the podwright with root directory `root`, under the cgroup mount
    /// `mount` ([`CGROUP_MOUNT`] on a host); `None` when no cgroup hierarchy is mounted there.
    pub fn detect(mount: &Path, root: &Path) -> io::Result<Option<PodCgroups>> {
        let name: String = root
            .to_string_lossy()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || "-.".contains(c) { c } else { '_' })
            .collect();
        let kubepods = PathBuf::from(format!("podwright{name}")).join("kubepods");
        let hierarchy = if mount.join("cgroup.controllers").exists() {
            Hierarchy::V2
        } else {
            let mut dirs = Vec::new();
            let mut seen = BTreeSet::new();
            let Ok(entries) = std::fs::read_dir(mount) else { return Ok(None) };
            for entry in entries {
                let path = entry?.path();
                // Hybrid hosts mount the v2 tree (`unified`) beside the v1 hierarchies: runc
                // makes the containers' cgroups there too, so the pod's is made and removed
                // there alike. A controller mounted twice (`cpu` and `cpu,cpuacct`) counts once.
                if !path.join("cgroup.procs").exists() {
                    continue;
                }
                if seen.insert(std::fs::canonicalize(&path)?) {
                    dirs.push(path);
                }
            }
            if dirs.is_empty() {
                return Ok(None);
            }
            dirs.sort();
            Hierarchy::V1(dirs)
        };
        Ok(Some(PodCgroups { mount: mount.to_path_buf(), kubepods, hierarchy }))
    }

    /// The pod cgroups on this host ([`CGROUP_MOUNT`]), or `None`, with a warning, where there
    /// are no cgroups or they cannot be written (an unprivileged podwright): pods then go
    /// straight under the runtime's cgroup.
    pub fn of_host(root: &Path) -> Option<PodCgroups> {
        let found = PodCgroups::detect(Path::new(CGROUP_MOUNT), root).and_then(|found| {
            let Some(cgroups) = found else { return Ok(None) };
            for hierarchy in cgroups.roots() {
                std::fs::create_dir_all(hierarchy.join(&cgroups.kubepods))?;
            }
            Ok(Some(cgroups))
        });
        found.unwrap_or_else(|e| {
            tracing::warn!(%e, "cannot make pod cgroups under {CGROUP_MOUNT}; pods get none of their own");
            None
        })
    }

    /// The pod's cgroup relative to the hierarchies' roots.
    fn relative(&self, pod: &Pod) -> PathBuf {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let mut path = self.kubepods.clone();
        path.extend(qos_level(pod));
        path.join(format!("pod{uid}"))
    }

    /// The sandbox's `cgroup_parent`: the pod's cgroup as an absolute cgroup path.
    pub fn parent(&self, pod: &Pod) -> String {
        format!("/{}", self.relative(pod).display())
    }

    /// Makes the `kubepods` levels and the pod's cgroup where missing, and sizes the pod's
    /// cgroup; the same again finds them made (a restarted podwright). Returns [`Self::parent`].
    pub fn ensure(&self, pod: &Pod) -> io::Result<String> {
        let config = resource_config(pod);
        let relative = self.relative(pod);
        // Both QoS levels exist from the first pod on, as the kubelet makes them at start.
        let paths = QOS_LEVELS.map(|l| self.kubepods.join(l)).into_iter().chain([relative.clone()]);
        match &self.hierarchy {
            Hierarchy::V1(dirs) => {
                for (dir, path) in paths.flat_map(|p| dirs.iter().map(move |d| (d, p.clone()))) {
                    make_path_v1(dir, &path)?;
                }
                let besteffort = self.kubepods.join("besteffort");
                for dir in dirs.iter().filter(|d| is_controller(d, "cpu")) {
                    write(&dir.join(&besteffort), "cpu.shares", MIN_CPU_SHARES)?;
                    let pod_dir = dir.join(&relative);
                    write(&pod_dir, "cpu.shares", config.cpu_shares)?;
                    if let Some((quota, period)) = config.cpu_quota {
                        write(&pod_dir, "cpu.cfs_period_us", period)?;
                        write(&pod_dir, "cpu.cfs_quota_us", quota)?;
                    }
                }
                if let Some(limit) = config.memory_limit {
                    for dir in dirs.iter().filter(|d| is_controller(d, "memory")) {
                        write(&dir.join(&relative), "memory.limit_in_bytes", limit)?;
                    }
                }
            }
            Hierarchy::V2 => {
                for path in paths {
                    make_path_v2(&self.mount, &path)?;
                }
                write(&self.mount.join(self.kubepods.join("besteffort")), "cpu.weight", cpu_weight(MIN_CPU_SHARES))?;
                let pod_dir = self.mount.join(&relative);
                write(&pod_dir, "cpu.weight", cpu_weight(config.cpu_shares))?;
                if let Some((quota, period)) = config.cpu_quota {
                    write(&pod_dir, "cpu.max", format!("{quota} {period}"))?;
                }
                if let Some(limit) = config.memory_limit {
                    write(&pod_dir, "memory.max", limit)?;
                }
            }
        }
        Ok(self.parent(pod))
    }

    /// Gives the pod's cgroup the settings of `config` that are `step`'s: those that grow, or
    /// those that shrink (`doPodResizeAction`: a pod's cgroup is grown before its containers
    /// and shrunk after them, so that theirs always fit in it). An unset limit of `config` is
    /// left as it is.
    pub fn resize(&self, pod: &Pod, config: &ResourceConfig, step: Step) -> io::Result<()> {
        let relative = self.relative(pod);
        let due = |current: Option<i64>, new: i64| {
            // No current value is no limit: the kernel's `max`.
            let current = current.unwrap_or(i64::MAX);
            match step {
                Step::Grow => new > current,
                Step::Shrink => new < current,
            }
        };
        let quota = config.cpu_quota.map(|(quota, _)| quota);
        match &self.hierarchy {
            Hierarchy::V1(dirs) => {
                for dir in dirs.iter().filter(|d| is_controller(d, "cpu")) {
                    let pod_dir = dir.join(&relative);
                    if due(read_number(&pod_dir, "cpu.shares"), config.cpu_shares) {
                        write(&pod_dir, "cpu.shares", config.cpu_shares)?;
                    }
                    let current = read_number(&pod_dir, "cpu.cfs_quota_us").filter(|q| *q >= 0);
                    if let Some((quota, period)) = config.cpu_quota.filter(|_| quota.is_some_and(|q| due(current, q))) {
                        write(&pod_dir, "cpu.cfs_period_us", period)?;
                        write(&pod_dir, "cpu.cfs_quota_us", quota)?;
                    }
                }
                for dir in dirs.iter().filter(|d| is_controller(d, "memory")) {
                    let pod_dir = dir.join(&relative);
                    if let Some(limit) =
                        config.memory_limit.filter(|l| due(read_number(&pod_dir, "memory.limit_in_bytes"), *l))
                    {
                        write(&pod_dir, "memory.limit_in_bytes", limit)?;
                    }
                }
            }
            Hierarchy::V2 => {
                let pod_dir = self.mount.join(&relative);
                let weight = cpu_weight(config.cpu_shares);
                if due(read_number(&pod_dir, "cpu.weight"), weight) {
                    write(&pod_dir, "cpu.weight", weight)?;
                }
                let current = std::fs::read_to_string(pod_dir.join("cpu.max"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next()?.parse().ok());
                if let Some((quota, period)) = config.cpu_quota.filter(|_| quota.is_some_and(|q| due(current, q))) {
                    write(&pod_dir, "cpu.max", format!("{quota} {period}"))?;
                }
                if let Some(limit) = config.memory_limit.filter(|l| due(read_number(&pod_dir, "memory.max"), *l)) {
                    write(&pod_dir, "memory.max", limit)?;
                }
            }
        }
        Ok(())
    }

    /// The memory the pod's processes use, in bytes (`GetPodCgroupMemoryUsage`); `None` when
    /// it cannot be read.
    pub fn memory_usage(&self, pod: &Pod) -> Option<i64> {
        let relative = self.relative(pod);
        match &self.hierarchy {
            Hierarchy::V1(dirs) => {
                let dir = dirs.iter().find(|d| is_controller(d, "memory"))?;
                read_number(&dir.join(relative), "memory.usage_in_bytes")
            }
            Hierarchy::V2 => read_number(&self.mount.join(relative), "memory.current"),
        }
    }

    /// The hierarchies' roots.
    fn roots(&self) -> Vec<&Path> {
        match &self.hierarchy {
            Hierarchy::V1(dirs) => dirs.iter().map(PathBuf::as_path).collect(),
            Hierarchy::V2 => vec![self.mount.as_path()],
        }
    }

    /// The UIDs of the pods that have a cgroup here.
    pub fn pods(&self) -> BTreeSet<String> {
        let mut uids = BTreeSet::new();
        for root in self.roots() {
            let kubepods = root.join(&self.kubepods);
            let levels = std::iter::once(kubepods.clone()).chain(QOS_LEVELS.map(|l| kubepods.join(l)));
            for level in levels {
                let Ok(entries) = std::fs::read_dir(&level) else { continue };
                for name in entries.flatten().filter_map(|e| e.file_name().into_string().ok()) {
                    if let Some(uid) = name.strip_prefix("pod") {
                        uids.insert(uid.to_string());
                    }
                }
            }
        }
        uids
    }

    /// Removes pod `uid`'s cgroup wherever it is, what the runtime left inside it first. Best
    /// effort: a cgroup that still has processes stays, with a warning.
    pub fn remove(&self, uid: &str) {
        for root in self.roots() {
            let kubepods = root.join(&self.kubepods);
            let levels = std::iter::once(kubepods.clone()).chain(QOS_LEVELS.map(|l| kubepods.join(l)));
            for level in levels {
                let dir = level.join(format!("pod{uid}"));
                if dir.exists()
                    && let Err(e) = remove_tree(&dir)
                {
                    tracing::warn!(%e, dir = %dir.display(), "could not remove the pod's cgroup");
                }
            }
        }
    }

    /// Removes the cgroups of every pod `keep` does not name (pods a killed podwright left).
    pub fn remove_all_but(&self, keep: &BTreeSet<String>) {
        for uid in self.pods().difference(keep) {
            tracing::info!(uid, "removing the cgroup of a pod that is gone");
            self.remove(uid);
        }
    }
}

/// Which settings a [`PodCgroups::resize`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Grow,
    Shrink,
}

/// A cgroup file's number; `None` for `max`, or a file that cannot be read.
fn read_number(dir: &Path, file: &str) -> Option<i64> {
    std::fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()
}

/// Whether the v1 hierarchy at `dir` holds `controller` (`cpu` in `cpu` or `cpu,cpuacct`).
fn is_controller(dir: &Path, controller: &str) -> bool {
    dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.split(',').any(|c| c == controller))
}

fn write(dir: &Path, file: &str, value: impl ToString) -> io::Result<()> {
    let path = dir.join(file);
    std::fs::write(&path, value.to_string()).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// Makes each missing directory of `relative` under the v1 hierarchy `dir`. A new cpuset cgroup
/// has no CPUs or memory nodes until given its parent's.
fn make_path_v1(dir: &Path, relative: &Path) -> io::Result<()> {
    let mut path = dir.to_path_buf();
    for part in relative.components() {
        let parent = path.clone();
        path.push(part);
        if path.is_dir() {
            continue;
        }
        std::fs::create_dir(&path).or_else(|e| if path.is_dir() { Ok(()) } else { Err(e) })?;
        if is_controller(dir, "cpuset") {
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let inherited = std::fs::read_to_string(parent.join(file))?;
                write(&path, file, inherited.trim())?;
            }
        }
    }
    Ok(())
}

/// Makes each missing directory of `relative` under the v2 mount, each level's parent letting
/// it use every controller the parent has.
fn make_path_v2(mount: &Path, relative: &Path) -> io::Result<()> {
    let mut path = mount.to_path_buf();
    for part in relative.components() {
        let controllers = std::fs::read_to_string(path.join("cgroup.controllers")).unwrap_or_default();
        let enable: Vec<String> = controllers.split_whitespace().map(|c| format!("+{c}")).collect();
        if !enable.is_empty() {
            write(&path, "cgroup.subtree_control", enable.join(" "))?;
        }
        path.push(part);
        if !path.is_dir() {
            std::fs::create_dir(&path).or_else(|e| if path.is_dir() { Ok(()) } else { Err(e) })?;
        }
    }
    Ok(())
}

/// Removes a cgroup and the cgroups under it, deepest first (a cgroup directory is removed with
/// `rmdir`, its files going with it).
fn remove_tree(dir: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            remove_tree(&entry.path())?;
        }
    }
    std::fs::remove_dir(dir)
}

#[cfg(test)]
mod tests;
