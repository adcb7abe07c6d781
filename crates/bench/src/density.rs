//! `density`: `podwright serve` on containerd with many pods, driven through its API. Pods
//! (busybox `sleep 3600`, no probes) created at once by concurrent requests: each pod's startup
//! latency, from its create request to a watch seeing it Running, p50 and p99; then the daemon's
//! CPU per pod start while 10, 50, 100 and 200 other pods are already running, which stays flat
//! when nothing in the daemon scans every pod per status change.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use crate::child;
use crate::http::Watch;
use crate::measure::{self, proc_cpu};
use crate::pod;
use crate::real::DEFAULT_ROOT;
use crate::runtime;
use crate::serve::{Daemon, str_at};
use serde_json::json;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Label of the measured pods (the burst's and each level's starts).
const MEASURED: &str = "podwright-bench=density";
/// Label of the pods already running at each level.
const BASE: &str = "podwright-bench=density-base";
/// How long the daemon is left alone before a level's starts: the base pods' last passes end.
const SETTLE: Duration = Duration::from_secs(3);
/// After the last measured pod is Running, its last passes (its events, the status after the
/// start) still count.
const TAIL: Duration = Duration::from_secs(1);

#[derive(clap::Args)]
pub struct DensityArgs {
    /// Pods created at once for the startup latencies.
    #[arg(long, default_value_t = 100)]
    pub pods: usize,
    /// Pods already running when the CPU per start is measured, one level after another.
    #[arg(long, value_delimiter = ',', default_value = "10,50,100,200")]
    pub levels: Vec<usize>,
    /// Pods started at each level to measure the CPU per start (CPU is counted in clock ticks).
    #[arg(long, default_value_t = 20)]
    pub starts: usize,
    /// Give up when pods are not all Running this many seconds after their creation, or not
    /// all removed this long after their deletion.
    #[arg(long, default_value_t = 150)]
    pub limit: u64,
    /// CRI endpoint; without it the embedded containerd under --root-dir is started or reused.
    #[arg(long)]
    pub runtime_endpoint: Option<String>,
    /// The daemon's root: pod directories, its kubeconfig, and the embedded containerd.
    #[arg(long, default_value = DEFAULT_ROOT)]
    pub root_dir: PathBuf,
    /// The podwright binary; by default the one next to this benchmark's.
    #[arg(long)]
    pub podwright: Option<PathBuf>,
}

pub struct DensityReport {
    pods: usize,
    /// Each pod's create request to Running, ms.
    latencies: Vec<f64>,
    /// The burst's create requests to the last pod Running.
    ramp: Duration,
    levels: Vec<Level>,
}

struct Level {
    running: usize,
    starts: usize,
    /// The daemon's CPU per start, less what it uses idle with the base pods over as long.
    cpu_per_start: Duration,
    /// containerd's alike (the runtime's own cost of a start, with the shims' and runc's
    /// outside it); `None` on a runtime the benchmark did not start.
    containerd_cpu_per_start: Option<Duration>,
    /// The starts' median latency.
    p50_ms: f64,
}

pub async fn run(args: &DensityArgs) -> Result<DensityReport, String> {
    let podwright = child::podwright_binary(args.podwright.as_ref())?;
    let (endpoint, containerd) = runtime::endpoint(args.runtime_endpoint.as_deref(), &args.root_dir).await?;
    let root = args.root_dir.clone();
    let (pods, levels, starts, limit) = (args.pods, args.levels.clone(), args.starts, Duration::from_secs(args.limit));
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let daemon = Daemon::start(&podwright, &root, &endpoint)?;
        let bench = Density { daemon: &daemon, containerd, handle, limit };
        let result = bench.measure(pods, &levels, starts);
        // Every pod goes, whatever happened.
        let cleared = daemon.clear(MEASURED, limit).and_then(|()| daemon.clear(BASE, limit));
        daemon.stop_after(result, cleared)
    })
    .await
    .map_err(|e| format!("the measuring thread panicked: {e}"))?
}

struct Density<'a> {
    daemon: &'a Daemon,
    containerd: Option<u32>,
    handle: tokio::runtime::Handle,
    limit: Duration,
}

impl Density<'_> {
    fn measure(&self, pods: usize, levels: &[usize], starts: usize) -> Result<DensityReport, String> {
        let t0 = Instant::now();
        let latencies = self.start("burst", pods)?;
        let ramp = t0.elapsed();
        self.daemon.clear(MEASURED, self.limit)?;
        let mut measured = vec![];
        let mut running = 0;
        for &level in levels {
            let names: Vec<String> = (running..level).map(|i| format!("base-{i:03}")).collect();
            self.create_all(&names, BASE)?;
            self.wait_running(BASE, level)?;
            running = level;
            std::thread::sleep(SETTLE);
            let pids: Vec<u32> = [Some(self.daemon.pid()), self.containerd].into_iter().flatten().collect();
            let idle = self.cpu_over(&pids, SETTLE)?;
            let (t, cpu0) = (Instant::now(), cpu_of(&pids)?);
            let latencies = self.start(&format!("at-{level}"), starts)?;
            std::thread::sleep(TAIL);
            let scale = t.elapsed().as_secs_f64() / SETTLE.as_secs_f64();
            let per_start: Vec<Duration> = cpu_of(&pids)?
                .iter()
                .zip(cpu0)
                .zip(idle)
                .map(|((now, before), idle)| {
                    now.saturating_sub(before).saturating_sub(idle.mul_f64(scale)) / starts as u32
                })
                .collect();
            measured.push(Level {
                running: level,
                starts,
                cpu_per_start: per_start[0],
                containerd_cpu_per_start: per_start.get(1).copied(),
                p50_ms: measure::percentile(&latencies, 50.0).unwrap_or(f64::NAN),
            });
            self.daemon.clear(MEASURED, self.limit)?;
        }
        Ok(DensityReport { pods, latencies, ramp, levels: measured })
    }

    /// The processes' CPU over `window`, left alone.
    fn cpu_over(&self, pids: &[u32], window: Duration) -> Result<Vec<Duration>, String> {
        let cpu0 = cpu_of(pids)?;
        std::thread::sleep(window);
        Ok(cpu_of(pids)?.iter().zip(cpu0).map(|(now, before)| now.saturating_sub(before)).collect())
    }

    /// Creates `count` measured pods at once and returns each one's latency from its create
    /// request to a watch seeing it Running, in ms.
    fn start(&self, prefix: &str, count: usize) -> Result<Vec<f64>, String> {
        let path = format!("/api/v1/namespaces/default/pods?watch=true&labelSelector={MEASURED}");
        let mut watch = Watch::open(self.daemon.addr, &path)?;
        let names: Vec<String> = (0..count).map(|i| format!("{prefix}-{i:03}")).collect();
        let sent = self.create_all(&names, MEASURED)?;
        let mut running: HashMap<String, Instant> = HashMap::new();
        let deadline = Instant::now() + self.limit;
        while running.len() < count {
            let Some(event) = watch.next(deadline)? else {
                return Err(format!("only {} of {count} pods were Running after {:?}", running.len(), self.limit));
            };
            let name = str_at(&event, "/object/metadata/name");
            if sent.contains_key(&name) && str_at(&event, "/object/status/phase") == "Running" {
                running.entry(name).or_insert_with(Instant::now);
            }
        }
        Ok(running.iter().map(|(n, at)| at.duration_since(sent[n]).as_secs_f64() * 1e3).collect())
    }

    /// Creates the pods by concurrent requests; returns when each request was sent.
    fn create_all(&self, names: &[String], label: &str) -> Result<HashMap<String, Instant>, String> {
        let (key, value) = label.split_once('=').unwrap_or_default();
        let pods = names
            .iter()
            .map(|name| {
                let pod = json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": "default", "labels": {key: value}},
                    "spec": {"terminationGracePeriodSeconds": 0,
                        "containers": [{"name": "sleep", "image": pod::IMAGE, "command": ["sleep", "3600"]}]},
                });
                (name.clone(), pod.to_string())
            })
            .collect();
        let created = self.daemon.create_all(&self.handle, pods)?;
        Ok(created.into_iter().map(|(name, (sent, _))| (name, sent)).collect())
    }

    fn wait_running(&self, label: &str, count: usize) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            let running = self.daemon.phases(label)?.iter().filter(|(_, p)| p == "Running").count();
            if running >= count {
                return Ok(());
            }
            if t0.elapsed() > self.limit {
                return Err(format!("only {running} of {count} pods were Running after {:?}", self.limit));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Each process's own CPU time so far.
fn cpu_of(pids: &[u32]) -> Result<Vec<Duration>, String> {
    pids.iter().map(|&pid| proc_cpu(pid).map(|c| c.own)).collect()
}

impl DensityReport {
    pub fn print(&self) {
        let p50 = measure::percentile(&self.latencies, 50.0).unwrap_or(f64::NAN);
        let p99 = measure::percentile(&self.latencies, 99.0).unwrap_or(f64::NAN);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!("density: `podwright serve` on containerd, pods (sleep 3600) created at once through its API");
        println!(
            "  {} pods: startup latency (create request -> Running seen by a watch) p50 {p50:.0} ms, p99 {p99:.0} ms ({:.2}x p50, target <= 2x); all Running {:.1} s after the first request",
            self.pods,
            p99 / p50,
            self.ramp.as_secs_f64()
        );
        println!(
            "  {:<28} {:>22} {:>26} {:>20}",
            "pods already running", "daemon CPU per start", "containerd CPU per start", "start latency p50"
        );
        for l in &self.levels {
            let containerd =
                l.containerd_cpu_per_start.map_or("not measured".to_string(), |c| format!("{:.2} ms", ms(c)));
            println!(
                "  {:<28} {:>19.2} ms {:>26} {:>17.0} ms",
                format!("{} (+{} started)", l.running, l.starts),
                ms(l.cpu_per_start),
                containerd,
                l.p50_ms
            );
        }
        println!("density_pods: {}", self.pods);
        println!("density_p50_ms: {p50:.1}");
        println!("density_p99_ms: {p99:.1}");
        println!("density_ramp_s: {:.2}", self.ramp.as_secs_f64());
        for l in &self.levels {
            println!("density_cpu_ms_per_start_at_{}: {:.2}", l.running, ms(l.cpu_per_start));
        }
        for l in &self.levels {
            if let Some(c) = l.containerd_cpu_per_start {
                println!("density_containerd_cpu_ms_per_start_at_{}: {:.2}", l.running, ms(c));
            }
        }
        for l in &self.levels {
            println!("density_start_p50_ms_at_{}: {:.0}", l.running, l.p50_ms);
        }
    }
}
