//! `fake`: many pods at once through real pod workers against the zero-latency fake runtime, in
//! wall-clock time, so what is measured is podwright's own cost.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use crate::alloc;
use crate::counted::{Counted, Counter};
use crate::measure::{self, cpu_time};
use crate::pod;
use k8s_openapi::api::core::v1::Pod;
use podwright_node::cri::config as cri_config;
use podwright_node::cri::env::EnvSources;
use podwright_node::cri::hosts;
use podwright_node::{EventLog, Node};
use podwright_planner::pod::all_containers;
use podwright_runtime::cri_api::DnsConfig;
use podwright_runtime::{Behaviour, Clock, FakeRuntime, ImageUser, Runtime, RuntimeService};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const TARGET_LIFECYCLES_PER_S: f64 = 2000.0;
pub const TARGET_KIB_PER_POD: f64 = 50.0;
const CONTAINERS: [&str; 3] = ["init1", "init2", "app"];

#[derive(clap::Args)]
pub struct FakeArgs {
    /// Pods to run at once.
    #[arg(long, default_value_t = 1000)]
    pub pods: usize,
    /// Directory for the workers' checkpoints (created, then removed); default a fresh one under
    /// /dev/shm (tmpfs) when there is one, else under the temporary directory.
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Also count live heap bytes (a counting allocator, a little more CPU), and what the fake
    /// runtime alone holds for the same pods.
    #[arg(long)]
    pub heap: bool,
}

/// Live heap in bytes, when counted (`--heap`).
pub struct Heap {
    /// The highest since the run began.
    pub peak: isize,
    /// Held once every pod had finished (before removal).
    pub finished: isize,
    /// Held after removal: of it, the final pods (kept like the CLI keeps them) and the engine
    /// (its event log, mostly).
    pub removed: isize,
    pub final_pods: isize,
    pub engine: isize,
    /// What the fake runtime alone holds for the same pods, all finished, driven without podwright.
    pub fake_alone: isize,
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
        let (lps, kib) = (self.lifecycles_per_s(), self.kib_per_pod());
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let per_pod = |bytes: isize| bytes as f64 / 1024.0 / self.pods.max(1) as f64;
        println!(
            "fake runtime, {} pods at once (2 init + 1 app, exit 0 at once), {} succeeded",
            self.pods, self.succeeded
        );
        println!("  {:<36} {:>10}", "figure", "value");
        println!("  {:<36} {:>10.1}", "run until all finished (ms)", ms(self.run));
        println!("  {:<36} {:>10.1}", "remove all (ms)", ms(self.remove));
        let target = format!("target >= {TARGET_LIFECYCLES_PER_S:.0}");
        println!(
            "  {:<36} {:>10.0}   {target}  {}",
            "pod lifecycles per second",
            lps,
            ok(lps >= TARGET_LIFECYCLES_PER_S)
        );
        println!("  {:<36} {:>10.1}", "process CPU (ms)", ms(self.cpu));
        println!("  {:<36} {:>10}", "runtime actions (state changes)", self.actions);
        println!("  {:<36} {:>10}", "runtime reads (status, list)", self.reads);
        println!("  {:<36} {:>10.2}", "CPU per action (us)", self.us_per_action());
        let target = format!("target <= {TARGET_KIB_PER_POD:.0}");
        println!("  {:<36} {:>10.1}   {target}  {}", "peak RSS per pod (KiB)", kib, ok(kib <= TARGET_KIB_PER_POD));
        if let Some(h) = &self.heap {
            println!("  {:<36} {:>10.1}", "peak live heap per pod (KiB)", per_pod(h.peak));
            println!("  {:<36} {:>10.1}", "  held when all finished", per_pod(h.finished));
            println!("  {:<36} {:>10.1}", "  of that, the fake runtime's", per_pod(h.fake_alone));
            println!("  {:<36} {:>10.1}", "  held after removal", per_pod(h.removed));
            println!("  {:<36} {:>10.1}", "    of that, the final pods", per_pod(h.final_pods));
            println!("  {:<36} {:>10.1}", "    of that, the engine (events)", per_pod(h.engine));
        }
        println!("  {:<36} {:>10}", "events recorded", self.events);
        if !self.peak_reset {
            println!("  (could not reset VmHWM: the peak may predate the run)");
        }
        println!("pods: {}", self.pods);
        println!("succeeded: {}", self.succeeded);
        println!("run_ms: {:.1}", ms(self.run));
        println!("remove_ms: {:.1}", ms(self.remove));
        println!("lifecycles_per_s: {lps:.0}");
        println!("actions: {}", self.actions);
        println!("reads: {}", self.reads);
        println!("cpu_ms: {:.1}", ms(self.cpu));
        println!("us_per_action: {:.2}", self.us_per_action());
        println!("rss_before_kib: {}", self.rss_before_kib);
        println!("rss_peak_kib: {}", self.rss_peak_kib);
        println!("rss_kib_per_pod: {kib:.1}");
        if let Some(h) = &self.heap {
            println!("heap_peak_kib_per_pod: {:.1}", per_pod(h.peak));
            println!("heap_finished_kib_per_pod: {:.1}", per_pod(h.finished));
            println!("heap_fake_alone_kib_per_pod: {:.1}", per_pod(h.fake_alone));
            println!("heap_removed_kib_per_pod: {:.1}", per_pod(h.removed));
            println!("heap_final_pods_kib_per_pod: {:.1}", per_pod(h.final_pods));
            println!("heap_engine_kib_per_pod: {:.1}", per_pod(h.engine));
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
            eprintln!("podwright-bench: could not remove {}: {e}", self.0.display());
        }
    }
}

/// The fake with the benchmark's image and scripts, call log off.
fn new_fake() -> Arc<FakeRuntime> {
    let fake = FakeRuntime::new(Clock::new());
    fake.set_call_log(false);
    fake.add_image(pod::IMAGE);
    for name in CONTAINERS {
        fake.script(name, vec![Behaviour::Exit { code: 0, after: Duration::ZERO }]);
    }
    fake
}

pub async fn run(args: &FakeArgs) -> Result<FakeReport, String> {
    let root = args.root.clone().unwrap_or_else(|| {
        let shm = PathBuf::from("/dev/shm");
        let base = if shm.is_dir() { shm } else { std::env::temp_dir() };
        base.join(format!("podwright-bench-fake-{}", std::process::id()))
    });
    std::fs::create_dir_all(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    let _root_guard = TempRoot(root.clone());

    let fake = new_fake();
    let counted = Arc::new(Counted::new(fake.clone(), Counter::new(false)));
    let runtime: Arc<dyn Runtime> = counted.clone();
    let event_log = Arc::new(EventLog::default());
    let workers = Node::new(runtime, &root).clock(fake.clock()).events(event_log.clone()).build();
    let template = pod::template()?;

    let peak_reset = measure::reset_peak_rss();
    let rss_before_kib = measure::status_kib("self", "VmRSS")?;
    if args.heap {
        alloc::start();
    }
    let cpu0 = cpu_time();
    let t0 = Instant::now();

    for i in 0..args.pods {
        workers.update(pod::instance(&template, &format!("bench-{i}"))).map_err(|e| e.to_string())?;
    }
    workers.wait_finished().await;
    let run = t0.elapsed();
    let heap_finished = alloc::live();

    let t1 = Instant::now();
    // Kept like the CLI keeps them, for `-o json`.
    let finished = workers.remove_finished().await;
    let remove = t1.elapsed();
    let cpu = cpu_time().saturating_sub(cpu0);
    let rss_peak_kib = measure::status_kib("self", "VmHWM")?;

    let left = fake.stats();
    if left.sandboxes + left.containers > 0 {
        return Err(format!(
            "the fake still holds {} sandboxes and {} containers after removal",
            left.sandboxes, left.containers
        ));
    }
    let succeeded = finished.iter().filter(|u| u.phase() == Some("Succeeded")).count();
    let events = event_log.snapshot().len();
    let removed = alloc::live();
    drop(finished);
    let after_pods = alloc::live();
    drop(workers);
    drop(event_log);
    let after_engine = alloc::live();
    let heap = match args.heap {
        true => Some(Heap {
            peak: alloc::peak(),
            finished: heap_finished,
            removed,
            final_pods: removed - after_pods,
            engine: after_pods - after_engine,
            fake_alone: fake_alone(&template, args.pods, &root).await?,
        }),
        false => None,
    };
    Ok(FakeReport {
        pods: args.pods,
        succeeded,
        run,
        remove,
        cpu,
        actions: counted.hook().actions(),
        reads: counted.hook().reads(),
        rss_before_kib,
        rss_peak_kib,
        peak_reset,
        events,
        heap,
    })
}

/// The heap a fresh fake holds for `pods` finished pods when driven directly with the same
/// configs (sandbox, then each container created and started), without podwright.
async fn fake_alone(template: &Pod, pods: usize, root: &Path) -> Result<isize, String> {
    let fake = new_fake();
    let pods: Vec<Pod> = (0..pods).map(|i| pod::instance(template, &format!("alone-{i}"))).collect();
    let before = alloc::live();
    let mut sandboxes = Vec::with_capacity(pods.len());
    for pod in &pods {
        let sandbox_config = cri_config::sandbox_config(pod, root, 0, hosts::hostname(pod), DnsConfig::default());
        let id = fake.run_pod_sandbox(&sandbox_config, "").await.map_err(|e| format!("fake alone: {e}"))?;
        for sc in all_containers(pod) {
            let (config, _) = cri_config::container_config(
                &EnvSources::bare(pod),
                &sc,
                &ImageUser::Uid(0),
                0,
                &id,
                root,
                &podwright_node::volumes::FromRuntime::default(),
            )
            .map_err(|e| format!("fake alone: {e}"))?;
            let c =
                fake.create_container(&id, &config, &sandbox_config).await.map_err(|e| format!("fake alone: {e}"))?;
            fake.start_container(&c).await.map_err(|e| format!("fake alone: {e}"))?;
        }
        sandboxes.push(id);
    }
    let held = alloc::live() - before;
    for id in sandboxes {
        let _ = fake.remove_pod_sandbox(&id).await;
    }
    Ok(held)
}
