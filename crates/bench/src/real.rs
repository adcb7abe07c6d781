//! `real`: one pod (2 init + 1 app, `sh -c 'exit 0'`) against a real containerd, run by the bare
//! CRI calls in sequence (the floor) and by a real pod worker (podwright), interleaved. Every run
//! also records the timeline of its runtime calls and of the containers' exits, to show where
//! podwright's extra time goes.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use crate::counted::{Counted, Counter, Span};
use crate::measure::{self, Summary};
use crate::pod;
use crate::runtime;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use podwright_node::cri::config as cri_config;
use podwright_node::cri::env::EnvSources;
use podwright_node::cri::{hosts, labels};
use podwright_node::{Node, PodUpdate, PodWorkers, StatusStream, layout, volumes};
use podwright_planner::pod::all_containers;
use podwright_runtime::cri_api::ContainerState;
use podwright_runtime::cri_api::{DnsConfig, PodSandboxConfig};
use podwright_runtime::{CriRuntime, ImageUser, Runtime, RuntimeEventKind, RuntimeService};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc::UnboundedReceiver;

/// Below the floor: podwright's pipelined start creates the next init container while the one
/// before runs and starts it on containerd's exit event, where the floor waits for CRI's record.
pub const TARGET_RATIO: f64 = 0.85;
pub const DEFAULT_ROOT: &str = "/var/lib/podwright-bench";
/// How often the floor asks whether a container has exited.
const POLL: Duration = Duration::from_millis(1);
/// A pod that takes longer than this is a failure, not a sample.
const RUN_LIMIT: Duration = Duration::from_secs(60);
const CONTAINERS: [&str; 3] = ["init1", "init2", "app"];

#[derive(clap::Args)]
pub struct RealArgs {
    /// Measured runs of each kind (floor and podwright, interleaved).
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Unmeasured runs of each kind first (caches, first CNI setup).
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// CRI endpoint; without it the embedded containerd under --root-dir is started or reused.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// podwright's root: pod directories, and the embedded containerd.
    #[arg(long, default_value = DEFAULT_ROOT)]
    pub root_dir: PathBuf,
    /// Print every run's timeline of runtime calls.
    #[arg(long)]
    pub trace: bool,
}

/// One run: its total and the moments that matter, in ms from its start.
struct Trace {
    total: f64,
    spans: Vec<(&'static str, f64, f64)>,
    /// When each container (init1, init2, app) exited, per the runtime's finishedAt.
    exits: [Option<f64>; 3],
    /// When the Exited event of each container reached subscribers (podwright runs).
    events: [Option<f64>; 3],
    reads: u64,
}

/// Exited events with the moment they were delivered, from our own subscription.
type EventTimes = Arc<Mutex<Vec<(Instant, String)>>>;

struct Bench {
    counted: Arc<Counted>,
    workers: PodWorkers,
    statuses: tokio::sync::Mutex<UnboundedReceiver<PodUpdate>>,
    events: EventTimes,
    template: Pod,
    root: PathBuf,
}

pub struct RealReport {
    pub runtime: String,
    pub floor: Vec<Duration>,
    pub podwright: Vec<Duration>,
    phases: Vec<(String, Summary, Summary)>,
    /// Median read calls per run.
    floor_reads: f64,
    podwright_reads: f64,
}

/// The CRI runtime at `endpoint`, or at the embedded containerd under `root` (started unless it
/// runs), and its version.
pub async fn connect(endpoint: Option<&str>, root: &Path) -> Result<(CriRuntime, String), String> {
    let (endpoint, _) = runtime::endpoint(endpoint, root).await?;
    let cri = runtime::connect(&endpoint).await?;
    let version = cri.version().await.map_err(|e| format!("{endpoint} does not answer Version: {e}"))?;
    Ok((cri, version))
}

pub async fn run(args: &RealArgs) -> Result<RealReport, String> {
    let (cri, version) = connect(args.endpoint.as_deref(), &args.root_dir).await?;
    let counted = Arc::new(Counted::new(Arc::new(cri), Counter::new(true)));
    let runtime: Arc<dyn Runtime> = counted.clone();

    let events: EventTimes = Arc::default();
    let mut rx = runtime.subscribe();
    let sink = events.clone();
    tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(ev) if ev.kind == RuntimeEventKind::Exited => {
                    sink.lock().unwrap_or_else(|e| e.into_inner()).push((Instant::now(), ev.container_id));
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
        }
    });
    let (stream, statuses) = StatusStream::new();
    let workers = Node::new(runtime, &args.root_dir).status(Arc::new(stream)).build();
    let bench = Bench {
        counted,
        workers,
        statuses: tokio::sync::Mutex::new(statuses),
        events,
        template: pod::template()?,
        root: args.root_dir.clone(),
    };

    for i in 0..args.warmup {
        bench.floor(&format!("warm-floor-{i}")).await?;
        bench.podwright(&format!("warm-pw-{i}")).await?;
    }
    let (mut floor, mut podwright) = (vec![], vec![]);
    for i in 0..args.runs {
        let f = bench.floor(&format!("floor-{i}")).await?;
        let p = bench.podwright(&format!("podwright-{i}")).await?;
        if args.trace {
            print_trace(&format!("floor run {i}"), &f);
            print_trace(&format!("podwright run {i}"), &p);
        }
        floor.push(f);
        podwright.push(p);
    }
    let report = RealReport::new(version, &floor, &podwright);
    // A run far off the median is a stall worth seeing call by call.
    for (kind, traces, median) in
        [("floor", &floor, report.floor_median()), ("podwright", &podwright, report.podwright_median())]
    {
        for (i, t) in traces.iter().enumerate() {
            if !args.trace && t.total > 2.0 * median {
                print_trace(&format!("outlier: {kind} run {i} (median {median:.2} ms)"), t);
            }
        }
    }
    Ok(report)
}

impl Bench {
    /// Moves the timeline to ms since `t0` and drops what came before it.
    fn spans_since(&self, t0: Instant) -> Vec<(&'static str, f64, f64)> {
        let ms = |i: Instant| i.saturating_duration_since(t0).as_secs_f64() * 1e3;
        let spans: Vec<Span> = self.counted.hook().take_timeline();
        spans.into_iter().filter(|s| s.start >= t0).map(|s| (s.op, ms(s.start), ms(s.end))).collect()
    }

    /// The floor: the CRI calls podwright needs, issued in sequence by hand.
    async fn floor(&self, name: &str) -> Result<Trace, String> {
        let rt: &dyn Runtime = self.counted.as_ref();
        let mut floor = FloorPod::new(pod::instance(&self.template, name), &self.root)?;
        self.counted.hook().take_timeline();
        let reads0 = self.counted.hook().reads();
        let (wall0, t0) = (Timestamp::now(), Instant::now());
        let result = floor.run(rt, true).await;
        let total = t0.elapsed().as_secs_f64() * 1e3;
        let reads = self.counted.hook().reads() - reads0;
        let spans = self.spans_since(t0);

        let mut exits = [None; 3];
        for (i, id) in floor.ids.iter().enumerate() {
            if let Ok(s) = rt.container_status(id).await {
                exits[i] = since(wall0, s.finished_at);
            }
        }
        floor.remove(rt).await;
        result?;
        Ok(Trace { total, spans, exits, events: [None; 3], reads })
    }

    /// podwright: a pod worker from its start until it publishes phase Succeeded.
    async fn podwright(&self, name: &str) -> Result<Trace, String> {
        let pod = pod::instance(&self.template, name);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut statuses = self.statuses.lock().await;
        self.counted.hook().take_timeline();
        self.events.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let reads0 = self.counted.hook().reads();
        let (wall0, t0) = (Timestamp::now(), Instant::now());

        self.workers.update(pod).map_err(|e| e.to_string())?;
        let outcome = tokio::time::timeout(RUN_LIMIT, async {
            loop {
                let Some(upd) = statuses.recv().await else {
                    return Err("the status stream ended before the pod succeeded".to_string());
                };
                match upd.phase() {
                    Some("Succeeded") => return Ok(t0.elapsed()),
                    Some("Failed") => return Err(format!("the pod failed: {:?}", upd.status)),
                    _ => {}
                }
            }
        })
        .await
        .unwrap_or_else(|_| Err(format!("the pod did not succeed within {RUN_LIMIT:?}")));
        let reads = self.counted.hook().reads() - reads0;
        let spans = self.spans_since(t0);
        let delivered: Vec<(Instant, String)> = self.events.lock().unwrap_or_else(|e| e.into_inner()).clone();

        // Not timed: let the worker stop the sandbox and finish, then remove everything.
        if outcome.is_err() {
            self.workers.delete(&uid, None);
        }
        let _ = tokio::time::timeout(RUN_LIMIT, self.workers.wait_finished()).await;
        while statuses.try_recv().is_ok() {}
        let rt: &dyn Runtime = self.counted.as_ref();
        let listed = rt.list_containers(&labels::pod_selector(&uid)).await.unwrap_or_default();
        let (mut exits, mut events) = ([None; 3], [None; 3]);
        for c in &listed {
            let name = c.metadata.as_ref().map_or("", |m| m.name.as_str());
            if let Some(i) = CONTAINERS.iter().position(|n| *n == name) {
                exits[i] = since(wall0, c.finished_at);
                events[i] = delivered
                    .iter()
                    .find(|(_, id)| *id == c.id)
                    .map(|(at, _)| at.saturating_duration_since(t0).as_secs_f64() * 1e3);
            }
        }
        self.workers.remove(&uid).await;
        self.counted.hook().take_timeline();
        let total = outcome?.as_secs_f64() * 1e3;
        Ok(Trace { total, spans, exits, events, reads })
    }
}

/// A pod run by the bare CRI calls podwright needs, issued in sequence by hand: the floor.
pub struct FloorPod {
    pod: Pod,
    root: PathBuf,
    sandbox_config: PodSandboxConfig,
    sandbox: Option<String>,
    /// Its containers, in the order they were created.
    pub ids: Vec<String>,
}

impl FloorPod {
    /// Ready to run: its log directory made and its sandbox config built, outside the timing.
    pub fn new(pod: Pod, root: &Path) -> Result<FloorPod, String> {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let log_dir = layout::log_directory(root, uid);
        std::fs::create_dir_all(&log_dir).map_err(|e| format!("cannot create {}: {e}", log_dir.display()))?;
        let sandbox_config = cri_config::sandbox_config(&pod, root, 0, hosts::hostname(&pod), DnsConfig::default());
        Ok(FloorPod { pod, root: root.to_path_buf(), sandbox_config, sandbox: None, ids: vec![] })
    }

    /// Runs the sandbox, then each container in turn: create, start, and wait for it to exit 0
    /// (polling its status) before the next. The last one is waited for only with `wait_last`.
    pub async fn run(&mut self, rt: &dyn Runtime, wait_last: bool) -> Result<(), String> {
        let sandbox =
            rt.run_pod_sandbox(&self.sandbox_config, "").await.map_err(|e| format!("floor: RunPodSandbox: {e}"))?;
        self.sandbox = Some(sandbox.clone());
        let containers: Vec<_> = all_containers(&self.pod).collect();
        for (i, sc) in containers.iter().enumerate() {
            let (config, _) = cri_config::container_config(
                &EnvSources::bare(&self.pod),
                sc,
                &ImageUser::Uid(0),
                0,
                &sandbox,
                &self.root,
                &volumes::FromRuntime::default(),
            )?;
            let wait = wait_last || i + 1 < containers.len();
            let ids = &mut self.ids;
            let step = async {
                let id = rt.create_container(&sandbox, &config, &self.sandbox_config).await?;
                ids.push(id.clone());
                rt.start_container(&id).await?;
                if !wait {
                    return Ok::<i32, podwright_runtime::RuntimeError>(0);
                }
                loop {
                    let s = rt.container_status(&id).await?;
                    if s.state == ContainerState::ContainerExited as i32 {
                        return Ok(s.exit_code);
                    }
                    tokio::time::sleep(POLL).await;
                }
            };
            match tokio::time::timeout(RUN_LIMIT, step).await {
                Ok(Ok(0)) => {}
                Ok(Ok(code)) => return Err(format!("floor: {} exited with {code}", sc.name())),
                Ok(Err(e)) => return Err(format!("floor: {}: {e}", sc.name())),
                Err(_) => return Err(format!("floor: {} did not exit within {RUN_LIMIT:?}", sc.name())),
            }
        }
        Ok(())
    }

    /// Removes its containers, its sandbox and its files.
    pub async fn remove(&self, rt: &dyn Runtime) {
        for id in &self.ids {
            let _ = rt.remove_container(id).await;
        }
        if let Some(sandbox) = &self.sandbox {
            let _ = rt.stop_pod_sandbox(sandbox).await;
            let _ = rt.remove_pod_sandbox(sandbox).await;
        }
        let _ = volumes::cleanup(&self.root, self.pod.metadata.uid.as_deref().unwrap_or_default());
    }
}

/// ms from `wall0` to a CRI timestamp in ns (None when unset).
fn since(wall0: Timestamp, nanos: i64) -> Option<f64> {
    (nanos > 0).then(|| (nanos as i128 - wall0.as_nanosecond()) as f64 / 1e6)
}

/// The critical path of one run cut into consecutive named phases, in ms; rows in parentheses
/// split the phase above them (podwright runs: when the exit event arrived). A container that
/// podwright created ahead of its turn has its `CreateContainer` before the exit of the one
/// before: those phases are 0, and its start counts from that exit.
fn phases(t: &Trace) -> Vec<(String, f64)> {
    let nth = |op: &str, n: usize| t.spans.iter().filter(|s| s.0 == op).nth(n).map(|s| (s.1, s.2));
    let mut out = vec![];
    let mut cursor = 0.0;
    let mut push = |out: &mut Vec<(String, f64)>, name: String, upto: Option<f64>| {
        if let Some(upto) = upto {
            out.push((name, upto - cursor));
            cursor = upto;
        }
    };
    // The split of the wait after an exit, shown under that wait.
    let mut split = vec![];
    push(&mut out, "RunPodSandbox".into(), nth("RunPodSandbox", 0).map(|s| s.1));
    for (i, c) in CONTAINERS.iter().enumerate() {
        let create = nth("CreateContainer", i);
        let name = match i {
            0 => format!("sandbox ready -> create {c}"),
            _ => format!("{} exit -> create {c}", CONTAINERS[i - 1]),
        };
        push(&mut out, name, create.map(|s| s.0));
        out.append(&mut split);
        push(&mut out, format!("CreateContainer {c}"), create.map(|s| s.1));
        push(&mut out, format!("created -> StartContainer {c} returns"), nth("StartContainer", i).map(|s| s.1));
        push(&mut out, format!("{c} start returns -> exit"), t.exits[i]);
        if let (Some(exit), Some(event)) = (t.exits[i], t.events[i]) {
            let (next, at) = match nth("CreateContainer", i + 1) {
                Some(s) => (format!("create {}", CONTAINERS[i + 1]), s.0),
                None => ("Succeeded published".to_string(), t.total),
            };
            split.push((format!("  ({c} exit -> Exited event delivered)"), event - exit));
            split.push((format!("  (event delivered -> {next})"), at - event));
        }
    }
    push(&mut out, "app exit -> seen (floor poll / Succeeded published)".into(), Some(t.total));
    out.append(&mut split);
    out
}

fn print_trace(title: &str, t: &Trace) {
    println!("{title}: {:.2} ms", t.total);
    for (op, s, e) in &t.spans {
        println!("  {s:9.3} .. {e:9.3}  {op}");
    }
    for (i, c) in CONTAINERS.iter().enumerate() {
        let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
        println!("  {c}: exited at {}, event delivered at {}", show(t.exits[i]), show(t.events[i]));
    }
}

impl RealReport {
    fn new(runtime: String, floor: &[Trace], podwright: &[Trace]) -> RealReport {
        let dur = |v: &[Trace]| v.iter().map(|t| Duration::from_secs_f64(t.total / 1e3)).collect::<Vec<_>>();
        // Median of each phase over the runs that have it, floor and podwright side by side.
        let collect = |v: &[Trace]| {
            let mut m: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
            for t in v {
                for (name, ms) in phases(t) {
                    m.entry(name).or_default().push(Duration::from_secs_f64(ms.max(0.0) / 1e3));
                }
            }
            m
        };
        let (f, p) = (collect(floor), collect(podwright));
        let mut order: Vec<String> =
            podwright.first().map(|t| phases(t).into_iter().map(|(n, _)| n).collect()).unwrap_or_default();
        for (n, _) in floor.first().map(phases).unwrap_or_default() {
            if !order.contains(&n) {
                order.push(n);
            }
        }
        let empty = Summary { median: f64::NAN, min: f64::NAN, max: f64::NAN };
        let sum = |m: &BTreeMap<String, Vec<Duration>>, n: &str| m.get(n).map_or(empty, |v| Summary::of(v));
        let phases = order.into_iter().map(|n| (n.clone(), sum(&f, &n), sum(&p, &n))).collect();
        let reads = |v: &[Trace]| measure::median(&v.iter().map(|t| t.reads as f64).collect::<Vec<_>>());
        RealReport {
            runtime,
            floor: dur(floor),
            podwright: dur(podwright),
            phases,
            floor_reads: reads(floor),
            podwright_reads: reads(podwright),
        }
    }

    fn floor_median(&self) -> f64 {
        Summary::of(&self.floor).median
    }

    fn podwright_median(&self) -> f64 {
        Summary::of(&self.podwright).median
    }

    pub fn print(&self) {
        let (f, p) = (Summary::of(&self.floor), Summary::of(&self.podwright));
        let ratio = p.median / f.median;
        // Each podwright run over the floor run just before it: less sensitive to the machine's
        // load drifting during the benchmark.
        let pairs: Vec<f64> =
            self.floor.iter().zip(&self.podwright).map(|(f, p)| p.as_secs_f64() / f.as_secs_f64()).collect();
        let paired = measure::median(&pairs);
        println!(
            "real runtime ({}), one pod of 2 init + 1 app (sh -c 'exit 0'), {} runs each, interleaved",
            self.runtime,
            self.floor.len()
        );
        println!("  {:<24} {:>10} {:>10} {:>10}", "start -> Succeeded (ms)", "median", "min", "max");
        println!("  {:<24} {:>10.2} {:>10.2} {:>10.2}", "floor (bare CRI calls)", f.median, f.min, f.max);
        println!("  {:<24} {:>10.2} {:>10.2} {:>10.2}", "podwright (pod worker)", p.median, p.min, p.max);
        let verdict = if ratio <= TARGET_RATIO { "ok" } else { "MISSED" };
        println!("  ratio podwright/floor: {ratio:.3}   target <= {TARGET_RATIO:.2}  {verdict}");
        println!("  median of the per-pair ratios: {paired:.3}");
        println!("  where the time goes (median ms per phase; a phase is measured from the end of the one before):");
        println!("  {:<54} {:>9} {:>9} {:>9}", "phase", "floor", "podwright", "extra");
        for (name, f, p) in &self.phases {
            let show = |v: f64| if v.is_nan() { "-".to_string() } else { format!("{v:.2}") };
            let extra = if f.median.is_nan() { f64::NAN } else { p.median - f.median };
            println!("  {name:<54} {:>9} {:>9} {:>9}", show(f.median), show(p.median), show(extra));
        }
        println!(
            "  {:<54} {:>9.0} {:>9.0}",
            "runtime reads (status/list calls), median", self.floor_reads, self.podwright_reads
        );
        println!("floor_ms: {:.2}", f.median);
        println!("floor_min_ms: {:.2}", f.min);
        println!("floor_max_ms: {:.2}", f.max);
        println!("podwright_ms: {:.2}", p.median);
        println!("podwright_min_ms: {:.2}", p.min);
        println!("podwright_max_ms: {:.2}", p.max);
        println!("ratio: {ratio:.3}");
        println!("paired_ratio: {paired:.3}");
    }
}
