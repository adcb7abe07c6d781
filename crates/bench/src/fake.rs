//! `fake`: many pods at once through real pod workers against the zero-latency fake runtime, in
//! wall-clock time, so what is measured is podwright's own cost.

use crate::alloc;
use crate::counted::Counted;
use crate::measure::{self, cpu_time};
use crate::pod;
use podwright_node::dispatch::Dispatcher;
use podwright_node::events::EventLog;
use podwright_node::{Engine, PodUpdate, PodWorker};
use podwright_runtime::{Behaviour, Clock, FakeRuntime, Runtime};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

pub const TARGET_LIFECYCLES_PER_S: f64 = 2000.0;
pub const TARGET_KIB_PER_POD: f64 = 50.0;

#[derive(clap::Args)]
pub struct FakeArgs {
    /// Pods to run at once.
    #[arg(long, default_value_t = 1000)]
    pub pods: usize,
    /// Directory for the workers' checkpoints (created, then removed); default a fresh one under
    /// /dev/shm (tmpfs), else the temporary directory.
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Also count live heap bytes (a counting allocator: adds a little CPU).
    #[arg(long)]
    pub heap: bool,
}

/// Live heap, when counted: peak, and what was left once every pod had finished and once every
/// pod was removed, in bytes since the run began.
pub struct Heap {
    pub peak: isize,
    pub finished: isize,
    pub removed: isize,
    /// Of `removed`: the final pods, and the engine (its event log, mostly).
    pub final_pods: isize,
    pub engine: isize,
}

pub struct FakeReport {
    pub pods: usize,
    pub succeeded: usize,
    /// Spawning the workers until every one has finished.
    pub run: Duration,
    /// Removing every pod afterwards.
    pub remove: Duration,
    pub cpu: Duration,
    pub actions: u64,
    pub reads: u64,
    pub rss_before_kib: u64,
    pub rss_peak_kib: u64,
    pub peak_reset: bool,
    pub events: usize,
    pub heap: Option<Heap>,
}

impl FakeReport {
    pub fn lifecycles_per_s(&self) -> f64 {
        self.pods as f64 / (self.run + self.remove).as_secs_f64()
    }
    pub fn us_per_action(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.actions.max(1) as f64
    }
    pub fn kib_per_pod(&self) -> f64 {
        self.rss_peak_kib.saturating_sub(self.rss_before_kib) as f64 / self.pods.max(1) as f64
    }

    pub fn print(&self) {
        let ok = |good: bool| if good { "ok" } else { "MISSED" };
        let lps = self.lifecycles_per_s();
        let kib = self.kib_per_pod();
        println!("fake runtime, {} pods (2 init + 1 app, exit 0 at once), {} succeeded", self.pods, self.succeeded);
        println!("  {:<34} {:>12}", "figure", "value");
        println!("  {:<34} {:>12.1}", "run until all finished (ms)", self.run.as_secs_f64() * 1e3);
        println!("  {:<34} {:>12.1}", "remove all (ms)", self.remove.as_secs_f64() * 1e3);
        println!("  {:<34} {:>12.0}   target >= {TARGET_LIFECYCLES_PER_S:.0}  {}", "pod lifecycles per second", lps, ok(lps >= TARGET_LIFECYCLES_PER_S));
        println!("  {:<34} {:>12.1}", "process CPU (ms)", self.cpu.as_secs_f64() * 1e3);
        println!("  {:<34} {:>12}", "runtime actions", self.actions);
        println!("  {:<34} {:>12}", "runtime reads", self.reads);
        println!("  {:<34} {:>12.2}", "CPU per action (us)", self.us_per_action());
        println!("  {:<34} {:>12.1}   target <= {TARGET_KIB_PER_POD:.0}  {}", "peak RSS per pod (KiB)", kib, ok(kib <= TARGET_KIB_PER_POD));
        println!("  {:<34} {:>12}", "events recorded", self.events);
        let per_pod = |bytes: isize| bytes as f64 / 1024.0 / self.pods.max(1) as f64;
        if let Some(h) = &self.heap {
            println!("  {:<34} {:>12.1}", "peak live heap per pod (KiB)", per_pod(h.peak));
            println!("  {:<34} {:>12.1}", "heap held per finished pod (KiB)", per_pod(h.finished));
            println!("  {:<34} {:>12.1}", "heap held per removed pod (KiB)", per_pod(h.removed));
            println!("  {:<34} {:>12.1}", "  of which the final pod (KiB)", per_pod(h.final_pods));
            println!("  {:<34} {:>12.1}", "  of which the engine/events (KiB)", per_pod(h.engine));
        }
        if !self.peak_reset {
            println!("  (could not reset VmHWM: the peak may predate the run)");
        }
        println!("pods: {}", self.pods);
        println!("succeeded: {}", self.succeeded);
        println!("run_ms: {:.1}", self.run.as_secs_f64() * 1e3);
        println!("remove_ms: {:.1}", self.remove.as_secs_f64() * 1e3);
        println!("lifecycles_per_s: {lps:.0}");
        println!("actions: {}", self.actions);
        println!("reads: {}", self.reads);
        println!("cpu_ms: {:.1}", self.cpu.as_secs_f64() * 1e3);
        println!("us_per_action: {:.2}", self.us_per_action());
        println!("rss_before_kib: {}", self.rss_before_kib);
        println!("rss_peak_kib: {}", self.rss_peak_kib);
        println!("rss_kib_per_pod: {kib:.1}");
        if let Some(h) = &self.heap {
            println!("heap_peak_kib_per_pod: {:.1}", per_pod(h.peak));
            println!("heap_finished_kib_per_pod: {:.1}", per_pod(h.finished));
            println!("heap_removed_kib_per_pod: {:.1}", per_pod(h.removed));
        }
    }
}

/// Removes the directory when dropped, also on an early return.
struct TempRoot(PathBuf);

impl Drop for TempRoot {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!("bench: could not remove {}: {e}", self.0.display());
        }
    }
}

pub async fn run(args: &FakeArgs) -> Result<FakeReport, String> {
    let root = args.root.clone().unwrap_or_else(|| {
        let shm = PathBuf::from("/dev/shm");
        let base = if shm.is_dir() { shm } else { std::env::temp_dir() };
        base.join(format!("podwright-bench-fake-{}", std::process::id()))
    });
    std::fs::create_dir_all(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    let _root_guard = TempRoot(root.clone());

    let clock = Clock::new();
    let fake = FakeRuntime::new(clock);
    fake.set_call_log(false);
    fake.add_image(pod::IMAGE);
    for name in ["init1", "init2", "app"] {
        fake.script(name, vec![Behaviour::Exit { code: 0, after: Duration::ZERO }]);
    }
    let counted = Arc::new(Counted::new(fake.clone(), false));
    let runtime: Arc<dyn Runtime> = counted.clone();
    let engine = Engine {
        dispatcher: Dispatcher::start(runtime.subscribe()),
        runtime,
        clock,
        root,
        events: Arc::new(EventLog::default()),
        log_sink: None,
    };
    let template = pod::template()?;

    let peak_reset = measure::reset_peak_rss();
    let rss_before_kib = measure::status_kib("VmRSS")?;
    if args.heap {
        alloc::start();
    }
    let cpu0 = cpu_time();
    let t0 = Instant::now();

    let mut workers = Vec::with_capacity(args.pods);
    for i in 0..args.pods {
        let pod = pod::instance(&template, &format!("bench-{i}"));
        let engine = engine.clone();
        workers.push(tokio::spawn(async move {
            let (tx, rx) = watch::channel(PodUpdate { pod: pod.clone(), finished: false });
            // Kept alive until the worker returns: a dropped sender would read as "changed".
            let (_delete, delete_rx) = watch::channel(false);
            PodWorker::new(engine, pod, true).run(tx, delete_rx).await;
            let last = rx.borrow().clone();
            last.pod
        }));
    }
    let mut finished = Vec::with_capacity(args.pods);
    for w in workers {
        finished.push(w.await.map_err(|e| format!("a pod worker panicked: {e}"))?);
    }
    let run = t0.elapsed();
    let heap_finished = alloc::live();

    let t1 = Instant::now();
    let removals: Vec<_> = finished
        .iter()
        .map(|p| {
            let engine = engine.clone();
            let p = p.clone();
            tokio::spawn(async move { engine.remove_pod(&p).await })
        })
        .collect();
    for r in removals {
        r.await.map_err(|e| format!("removing a pod panicked: {e}"))?;
    }
    let remove = t1.elapsed();
    let cpu = cpu_time().saturating_sub(cpu0);
    let rss_peak_kib = measure::status_kib("VmHWM")?;
    let left = fake.stats();
    if left.sandboxes + left.containers > 0 {
        return Err(format!("the fake still holds {} sandboxes and {} containers after removal", left.sandboxes, left.containers));
    }
    let succeeded = finished.iter().filter(|p| pod::phase(p) == Some("Succeeded")).count();
    let events = engine.events.snapshot().len();
    // What is still held after removal: the final pods (ours, as the CLI keeps them) and the
    // engine with its event log.
    let removed = alloc::live();
    drop(finished);
    let after_pods = alloc::live();
    drop(engine);
    let heap = args.heap.then(|| Heap {
        peak: alloc::peak(),
        finished: heap_finished,
        removed,
        final_pods: removed - after_pods,
        engine: after_pods - alloc::live(),
    });
    Ok(FakeReport {
        pods: args.pods,
        succeeded,
        run,
        remove,
        cpu,
        actions: counted.actions(),
        reads: counted.reads(),
        rss_before_kib,
        rss_peak_kib,
        peak_reset,
        events,
        heap,
    })
}
