//! `soak`: `podwright serve` on its own embedded containerd takes many pods through its API, in
//! waves: each wave's pods (an init container, a sidecar, an exec readiness probe and a
//! ConfigMap volume each) are created at once, waited for until Running and ready, deleted, and
//! waited for until the daemon has removed them. Then it looks for what they left behind: pod
//! cgroups, mounts, network namespaces, CNI IP allocations, containerd's sandboxes, containers
//! and snapshots, pod directories and log files, pod objects in the store, and events kept
//! past their TTL; and for what the daemon kept: its RSS and open files at the end against
//! after the first pods, and its store's size.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use crate::child;
use crate::measure;
use crate::pod::IMAGE;
use crate::runtime;
use crate::serve::{Daemon, str_at};
use podwright_node::PodCgroups;
use podwright_runtime::Runtime;
use podwright_server::server::{EVENT_EXPIRY_CHECK, EVENT_TTL, event_last_seen};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The soak's pods' label, to list them.
const LABEL: &str = "podwright-bench=soak";
/// The ConfigMap every pod mounts.
const CONFIG: &str = "soak-config";
/// How long the node is left alone after the last wave before it is searched for leaks.
const SETTLE: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(200);
/// RSS growth the soak should stay within (KiB).
const TARGET_RSS_GROWTH_KIB: i64 = 5 * 1024;

/// Set by SIGINT or SIGTERM: the soak stops after the wave at hand and removes its pods.
static STOP: AtomicBool = AtomicBool::new(false);

/// The soak's waves, which `events` repeats without containerd.
#[derive(clap::Args)]
pub struct Waves {
    /// Pods created and deleted in all.
    #[arg(long, default_value_t = 10_000)]
    pub pods: usize,
    /// Pods created at once in each wave.
    #[arg(long, default_value_t = 50)]
    pub wave: usize,
    /// The daemon's RSS (and open files) are compared with what they were after this many
    /// pods (at most half of --pods).
    #[arg(long, default_value_t = 1_000)]
    pub baseline: usize,
}

#[derive(clap::Args)]
pub struct SoakArgs {
    #[command(flatten)]
    pub waves: Waves,
    /// Give up when a wave is not all Running this many seconds after its creation, or not
    /// all removed this long after its deletion.
    #[arg(long, default_value_t = 150)]
    pub limit: u64,
    /// The daemon's root: pod directories, its store, and the embedded containerd the soak
    /// starts (or reuses) and searches for leaks.
    #[arg(long, default_value = "/var/lib/podwright-soak")]
    pub root_dir: PathBuf,
    /// The podwright binary; by default the one next to this benchmark's.
    #[arg(long)]
    pub podwright: Option<PathBuf>,
}

pub struct SoakReport {
    pods: usize,
    waves: usize,
    wall: Duration,
    /// The slowest wave, from its create requests to its pods removed.
    slowest_wave: Duration,
    /// Pods done when the baseline was read.
    baseline_pods: usize,
    rss_kib: (u64, u64),
    fds: (usize, usize),
    /// Events in the store then and at the end: they live an hour, in serve's memory too.
    events: (usize, usize),
    store_bytes: u64,
    /// Objects in the store at the end, by kind.
    store_objects: BTreeMap<String, usize>,
    leaks: Vec<String>,
}

/// The daemon's RSS (KiB) and open files.
fn footprint(pid: u32) -> Result<(u64, usize), String> {
    let rss = measure::status_kib(&pid.to_string(), "VmRSS")?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_err(|e| format!("cannot read /proc/{pid}/fd: {e}"))?;
    Ok((rss, fds.count()))
}

pub async fn run(args: &SoakArgs) -> Result<SoakReport, String> {
    for kind in [tokio::signal::unix::SignalKind::interrupt(), tokio::signal::unix::SignalKind::terminate()] {
        let mut signal = tokio::signal::unix::signal(kind).map_err(|e| format!("cannot catch signals: {e}"))?;
        tokio::spawn(async move {
            signal.recv().await;
            eprintln!("podwright-bench: stopping the soak after this wave");
            STOP.store(true, Ordering::Relaxed);
        });
    }
    let podwright = child::podwright_binary(args.podwright.as_ref())?;
    let root = args.root_dir.clone();
    let (endpoint, _) = runtime::endpoint(None, &root).await?;
    let cri = runtime::connect(&endpoint).await?;
    let before = Residue::read(&root, &cri).await?;
    let handle = tokio::runtime::Handle::current();
    let soak = Soak {
        pods: args.waves.pods,
        wave: args.waves.wave.max(1),
        baseline: args.waves.baseline.min(args.waves.pods / 2),
        limit: Duration::from_secs(args.limit),
        root,
        handle,
        cri: Box::new(cri),
    };
    tokio::task::spawn_blocking(move || {
        let daemon = Daemon::start(&podwright, &soak.root, &endpoint)?;
        let result = soak.run(&daemon, before);
        // Whatever happened, no pod of the soak is left running.
        let cleared = daemon.clear(LABEL, soak.limit);
        daemon.stop_after(result, cleared)
    })
    .await
    .map_err(|e| format!("the soak's thread panicked: {e}"))?
}

struct Soak {
    pods: usize,
    wave: usize,
    baseline: usize,
    limit: Duration,
    root: PathBuf,
    handle: tokio::runtime::Handle,
    cri: Box<dyn Runtime>,
}

impl Soak {
    fn run(&self, daemon: &Daemon, before: Residue) -> Result<SoakReport, String> {
        let config = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIG, "namespace": "default"},
            "data": {"greeting": "hello"},
        });
        let r = daemon.request("POST", "/api/v1/namespaces/default/configmaps", Some(&config.to_string()))?;
        if r.status != 201 {
            return Err(format!("creating {CONFIG}: HTTP {}: {}", r.status, String::from_utf8_lossy(&r.body)));
        }
        let t0 = Instant::now();
        let mut netns = BTreeSet::new();
        let (mut done, mut waves, mut slowest) = (0, 0, Duration::ZERO);
        let mut baseline = None;
        while done < self.pods {
            if STOP.load(Ordering::Relaxed) {
                return Err(format!("interrupted after {done} pods"));
            }
            let count = self.wave.min(self.pods - done);
            let t = Instant::now();
            self.wave(daemon, done, count, &mut netns)?;
            slowest = slowest.max(t.elapsed());
            done += count;
            waves += 1;
            if baseline.is_none() && done >= self.baseline {
                baseline = Some((done, footprint(daemon.pid())?, self.count(daemon, "events")?));
            }
            if waves % 20 == 0 {
                eprintln!("soak: {done} pods in {:.0} s", t0.elapsed().as_secs_f64());
            }
        }
        let wall = t0.elapsed();
        std::thread::sleep(SETTLE);
        let (baseline_pods, (rss0, fds0), events0) = baseline.ok_or("no pods were run")?;
        let (rss1, fds1) = footprint(daemon.pid())?;
        let mut leaks = self.handle.block_on(Residue::read(&self.root, self.cri.as_ref()))?.leaks(&before, &netns);
        leaks.extend(self.stored_leaks(daemon)?);
        let store_bytes = std::fs::metadata(self.root.join(podwright_server::server::STORE_FILE))
            .map(|m| m.len())
            .map_err(|e| format!("cannot read the store's size: {e}"))?;
        Ok(SoakReport {
            pods: done,
            waves,
            wall,
            slowest_wave: slowest,
            baseline_pods,
            rss_kib: (rss0, rss1),
            fds: (fds0, fds1),
            events: (events0, self.count(daemon, "events")?),
            store_bytes,
            store_objects: self.store_objects(daemon)?,
            leaks,
        })
    }

    /// One wave: `count` pods created at once, Running and ready, deleted, removed; adds their
    /// sandboxes' network namespaces to `netns`.
    fn wave(&self, daemon: &Daemon, first: usize, count: usize, netns: &mut BTreeSet<PathBuf>) -> Result<(), String> {
        let pods = (first..first + count)
            .map(|i| {
                let name = format!("soak-{i:05}");
                let body = pod(&name).to_string();
                (name, body)
            })
            .collect();
        let created = daemon.create_all(&self.handle, pods)?;
        self.wait(daemon, &format!("{count} pods Running and ready"), |pods| {
            pods.len() == count && pods.iter().all(ready)
        })?;
        netns.extend(self.handle.block_on(sandbox_netns(&self.root, self.cri.as_ref()))?);
        let before = daemon.scrape()?;
        created.keys().try_for_each(|name| daemon.delete(name))?;
        self.wait(daemon, "the pods' objects gone", |pods| pods.is_empty())?;
        daemon.wait_removed(&before, count, self.limit)
    }

    /// Waits until the soak's pods, as listed, pass `done`.
    fn wait(&self, daemon: &Daemon, what: &str, done: impl Fn(&[Value]) -> bool) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            if done(&daemon.pods(LABEL)?) {
                return Ok(());
            }
            if t0.elapsed() > self.limit {
                return Err(format!("not {what} within {:?}", self.limit));
            }
            std::thread::sleep(POLL);
        }
    }

    /// The store's leaks: pod objects of the soak left, and events past their TTL.
    fn stored_leaks(&self, daemon: &Daemon) -> Result<Vec<String>, String> {
        let mut leaks: Vec<String> =
            daemon.pods(LABEL)?.iter().map(|p| format!("pod object {}", str_at(p, "/metadata/name"))).collect();
        let r = daemon.request("GET", "/api/v1/events", None)?;
        let now = jiff::Timestamp::now();
        for e in r.json()?["items"].as_array().into_iter().flatten() {
            if expired(e, now) {
                leaks.push(format!("event past its TTL {}", str_at(e, "/metadata/name")));
            }
        }
        Ok(leaks)
    }

    /// How many objects of each kind the store holds (from the lists the API serves).
    fn store_objects(&self, daemon: &Daemon) -> Result<BTreeMap<String, usize>, String> {
        let kinds = ["pods", "events", "configmaps", "secrets", "serviceaccounts", "namespaces"];
        kinds.iter().map(|kind| Ok((kind.to_string(), self.count(daemon, kind)?))).collect()
    }

    /// How many objects of `kind` (a core resource, plural) the store holds.
    fn count(&self, daemon: &Daemon, kind: &str) -> Result<usize, String> {
        let r = daemon.request("GET", &format!("/api/v1/{kind}"), None)?;
        if r.status != 200 {
            return Err(format!("listing {kind}: HTTP {}", r.status));
        }
        Ok(r.json()?["items"].as_array().map_or(0, Vec::len))
    }
}

/// The soak's pod `name`: an init container, a sidecar (an init container that keeps running),
/// and an app container with an exec readiness probe that reads the ConfigMap volume.
pub(crate) fn pod(name: &str) -> Value {
    let (key, value) = LABEL.split_once('=').unwrap_or_default();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {key: value}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "initContainers": [
                {"name": "init", "image": IMAGE, "command": ["sh", "-c", "exit 0"]},
                {"name": "sidecar", "image": IMAGE, "restartPolicy": "Always", "command": ["sleep", "3600"]},
            ],
            "containers": [{
                "name": "app", "image": IMAGE, "command": ["sleep", "3600"],
                "readinessProbe": {"exec": {"command": ["cat", "/config/greeting"]}, "periodSeconds": 5},
                "volumeMounts": [{"name": "config", "mountPath": "/config"}],
            }],
            "volumes": [{"name": "config", "configMap": {"name": CONFIG}}],
        },
    })
}

/// Whether the pod is Running with its Ready condition true.
fn ready(pod: &Value) -> bool {
    let conditions = pod.pointer("/status/conditions").and_then(Value::as_array);
    str_at(pod, "/status/phase") == "Running"
        && conditions.into_iter().flatten().any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Whether the event was last seen longer than serve's event TTL (the API server's) before
/// `now`, and serve's expiry has run since: serve should have removed it. Expiry runs once a
/// minute, so an event may outlive its hour by up to a minute, as the API server's leases,
/// which it attaches to events, may.
fn expired(event: &Value, now: jiff::Timestamp) -> bool {
    event_last_seen(event).is_some_and(|seen| seen < now - EVENT_TTL - EVENT_EXPIRY_CHECK)
}

/// The embedded containerd's directories under the root.
fn containerd_dir(root: &Path) -> PathBuf {
    root.join("containerd")
}

/// The network namespaces of the sandboxes now in the runtime, from their OCI bundles.
async fn sandbox_netns(root: &Path, cri: &dyn Runtime) -> Result<BTreeSet<PathBuf>, String> {
    let sandboxes = cri.list_pod_sandboxes(&BTreeMap::new()).await.map_err(|e| format!("listing sandboxes: {e}"))?;
    let bundles = containerd_dir(root).join("state/io.containerd.runtime.v2.task/k8s.io");
    let mut netns = BTreeSet::new();
    for sandbox in sandboxes {
        let spec = bundles.join(&sandbox.id).join("config.json");
        let Ok(text) = std::fs::read_to_string(&spec) else { continue };
        let spec: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", spec.display()))?;
        let namespaces = spec.pointer("/linux/namespaces").and_then(Value::as_array).cloned().unwrap_or_default();
        netns.extend(
            namespaces.iter().filter(|n| n["type"] == "network").filter_map(|n| n["path"].as_str()).map(PathBuf::from),
        );
    }
    Ok(netns)
}

/// What pods may leave behind on the node, read at one moment.
#[derive(Debug, Default, PartialEq)]
struct Residue {
    /// UIDs of the pod cgroups under this root's `kubepods`.
    cgroups: BTreeSet<String>,
    /// Mount points under the root.
    mounts: BTreeSet<String>,
    /// Addresses the CNI plugin's host-local IPAM holds.
    ips: BTreeSet<String>,
    sandboxes: BTreeSet<String>,
    containers: BTreeSet<String>,
    /// containerd's overlayfs snapshots (their directories).
    snapshots: BTreeSet<String>,
    /// The pods' directories under `<root>/pods`.
    pod_dirs: BTreeSet<String>,
    /// Files under the pods' log directories.
    logs: BTreeSet<String>,
}

impl Residue {
    async fn read(root: &Path, cri: &dyn Runtime) -> Result<Residue, String> {
        let all = BTreeMap::new();
        let sandboxes = cri.list_pod_sandboxes(&all).await.map_err(|e| format!("listing sandboxes: {e}"))?;
        let containers = cri.list_containers(&all).await.map_err(|e| format!("listing containers: {e}"))?;
        let mountinfo =
            std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("cannot read mountinfo: {e}"))?;
        let pods = podwright_node::layout::pods_dir(root);
        let pod_dirs = names(&pods);
        let logs = pod_dirs
            .iter()
            .flat_map(|uid| files(&podwright_node::layout::log_directory(root, uid)))
            .map(|p| p.display().to_string())
            .collect();
        Ok(Residue {
            cgroups: PodCgroups::of_host(root).map(|c| c.pods()).unwrap_or_default(),
            mounts: mounts_under(&mountinfo, root),
            ips: names(&root.join("cni/networks/podwright"))
                .into_iter()
                .filter(|n| n.parse::<std::net::IpAddr>().is_ok())
                .collect(),
            sandboxes: sandboxes.into_iter().map(|s| s.id).collect(),
            containers: containers.into_iter().map(|c| c.id).collect(),
            snapshots: names(&containerd_dir(root).join("root/io.containerd.snapshotter.v1.overlayfs/snapshots")),
            pod_dirs,
            logs,
        })
    }

    /// Each thing present now that was not `before`, named; and each of the soak's sandboxes'
    /// network namespaces (`netns`) still there.
    fn leaks(&self, before: &Residue, netns: &BTreeSet<PathBuf>) -> Vec<String> {
        let new = |what: &str, now: &BTreeSet<String>, then: &BTreeSet<String>| {
            now.difference(then).map(|n| format!("{what} {n}")).collect::<Vec<_>>()
        };
        let mut leaks = vec![];
        leaks.extend(new("pod cgroup", &self.cgroups, &before.cgroups));
        leaks.extend(new("mount", &self.mounts, &before.mounts));
        leaks.extend(new("CNI IP allocation", &self.ips, &before.ips));
        leaks.extend(new("containerd sandbox", &self.sandboxes, &before.sandboxes));
        leaks.extend(new("containerd container", &self.containers, &before.containers));
        leaks.extend(new("containerd snapshot", &self.snapshots, &before.snapshots));
        leaks.extend(new("pod directory", &self.pod_dirs, &before.pod_dirs));
        leaks.extend(new("log file", &self.logs, &before.logs));
        leaks.extend(netns.iter().filter(|p| p.exists()).map(|p| format!("network namespace {}", p.display())));
        leaks
    }
}

/// The mount points under `root` in a mountinfo text (octal escapes left as they are).
fn mounts_under(mountinfo: &str, root: &Path) -> BTreeSet<String> {
    let root = root.display().to_string();
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.strip_prefix(root.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
        .map(str::to_string)
        .collect()
}

/// The names in a directory; none when it does not exist.
fn names(dir: &Path) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return BTreeSet::new() };
    entries.flatten().filter_map(|e| e.file_name().into_string().ok()).collect()
}

/// Every file under `dir`, at any depth.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return vec![] };
    entries
        .flatten()
        .flat_map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => files(&e.path()),
            _ => vec![e.path()],
        })
        .collect()
}

impl SoakReport {
    pub fn print(&self) {
        let rss_growth = self.rss_kib.1 as i64 - self.rss_kib.0 as i64;
        let fd_growth = self.fds.1 as i64 - self.fds.0 as i64;
        let verdict = |ok: bool| if ok { "ok" } else { "MISSED" };
        let per_wave = self.wall.as_secs_f64() / self.waves.max(1) as f64;
        println!(
            "soak: `podwright serve` on containerd, {} pods (init + sidecar + exec readiness probe + configMap volume) created and deleted through its API in {} waves",
            self.pods, self.waves
        );
        println!(
            "  {:.0} s in all: {per_wave:.1} s a wave on average (create -> Running and ready -> delete -> removed), slowest {:.1} s",
            self.wall.as_secs_f64(),
            self.slowest_wave.as_secs_f64()
        );
        println!(
            "  serve's RSS {} KiB after {} pods, {} KiB at the end: {rss_growth:+} KiB   target <= {} KiB  {}",
            self.rss_kib.0,
            self.baseline_pods,
            self.rss_kib.1,
            TARGET_RSS_GROWTH_KIB,
            verdict(rss_growth <= TARGET_RSS_GROWTH_KIB)
        );
        println!("  serve's open files {} after {} pods, {} at the end", self.fds.0, self.baseline_pods, self.fds.1);
        let events = self.events.1 as i64 - self.events.0 as i64;
        println!(
            "  events in the store (kept an hour, as the API server keeps them): {} after {} pods, {} at the end: {events:+}, {:.1} KiB of RSS growth per event added",
            self.events.0,
            self.baseline_pods,
            self.events.1,
            rss_growth as f64 / events.max(1) as f64
        );
        let objects: Vec<String> = self.store_objects.iter().map(|(k, n)| format!("{n} {k}")).collect();
        println!("  store: {} bytes on disk, holding {}", self.store_bytes, objects.join(", "));
        println!("  leaks: {}   target 0  {}", self.leaks.len(), verdict(self.leaks.is_empty()));
        for leak in &self.leaks {
            println!("    {leak}");
        }
        println!("soak_pods: {}", self.pods);
        println!("soak_wave_s: {per_wave:.2}");
        println!("soak_rss_growth_kib: {rss_growth}");
        println!("soak_fd_growth: {fd_growth}");
        println!("soak_store_bytes: {}", self.store_bytes);
        let named = if self.leaks.is_empty() { String::new() } else { format!(" ({})", self.leaks.join(", ")) };
        println!("soak_leaks: {}{named}", self.leaks.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_mounts_under_the_root_only() {
        let info = "36 35 98:0 / /var/lib/soak rw - ext4 /dev/a rw\n\
            37 35 98:0 / /var/lib/soak/containerd/state/x/rootfs rw - overlay overlay rw\n\
            38 35 98:0 / /var/lib/soak-other/y rw - ext4 /dev/a rw\n\
            39 35 98:0 / /run/netns/cni-1 rw - nsfs nsfs rw\n";
        let found = mounts_under(info, Path::new("/var/lib/soak"));
        assert_eq!(found.into_iter().collect::<Vec<_>>(), ["/var/lib/soak", "/var/lib/soak/containerd/state/x/rootfs"]);
    }

    #[test]
    fn names_each_new_leftover() {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let before = Residue { snapshots: set(&["1", "2"]), ips: set(&["10.89.0.2"]), ..Residue::default() };
        let after = Residue {
            snapshots: set(&["1", "2", "7"]),
            ips: set(&["10.89.0.2"]),
            cgroups: set(&["u1"]),
            ..Residue::default()
        };
        let gone = [PathBuf::from("/nonexistent/netns/cni-x")].into();
        assert_eq!(after.leaks(&before, &gone), ["pod cgroup u1", "containerd snapshot 7"]);
        let kept = [PathBuf::from("/proc/self/ns/net")].into();
        assert_eq!(before.leaks(&before, &kept), ["network namespace /proc/self/ns/net"]);
    }

    #[test]
    fn events_expire_an_hour_after_they_were_last_seen_give_or_take_the_expiry_check() {
        let now: jiff::Timestamp = "2026-11-27T12:00:00Z".parse().unwrap();
        let event = |last: &str| json!({"firstTimestamp": "2026-11-27T09:00:00Z", "lastTimestamp": last});
        assert!(!expired(&event("2026-11-27T11:01:00Z"), now));
        assert!(!expired(&event("2026-11-27T10:59:30Z"), now));
        assert!(expired(&event("2026-11-27T10:58:59Z"), now));
    }

    #[test]
    fn the_pod_loads_with_a_sidecar_a_probe_and_a_config_map() {
        let yaml = serde_json::to_string(&pod("soak-00001")).unwrap();
        let pods = podwright_api::load_str("soak.json", &yaml).unwrap().pods;
        let spec = pods[0].0.spec.clone().unwrap();
        let init = spec.init_containers.unwrap();
        assert_eq!(init[1].restart_policy.as_deref(), Some("Always"));
        assert!(spec.containers[0].readiness_probe.is_some());
        assert!(spec.volumes.unwrap()[0].config_map.is_some());
    }
}
