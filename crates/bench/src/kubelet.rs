//! `kubelet`: podwright beside the Go kubelet. The same static pods run under `podwright serve`
//! and under a standalone kubelet (no API server, `--pod-manifest-path`), one agent at a time,
//! alternated, on the same containerd; each pod is timed from its manifest landing in the
//! directory to the runtime's own timestamps of its containers (CRI `ContainerStatus`), so both
//! agents are measured the same way:
//!
//! - the spec's pod (2 init + 1 app container, each exiting at once) to its app container's exit;
//! - density: many pods (2 init + 1 app that keeps running) dropped at once, each to its app
//!   container's start;
//! - steady: many pods with an exec readiness probe each, running: the agent's own CPU and RSS
//!   over a window (containerd's are not counted).
//!
//! Only one agent runs at a time: a kubelet stops every running pod it does not know of.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use crate::child;
use crate::http;
use crate::measure::{self, proc_cpu};
use crate::pod::IMAGE;
use crate::real::DEFAULT_ROOT;
use crate::runtime;
use crate::serve::free_port;
use podwright_runtime::Runtime;
use podwright_runtime::cri_api::ContainerState;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The node name both agents run as; static pods are named `<name>-<node>`.
const NODE: &str = "bench-node";
/// How long an agent may take to answer its health check, or to stop.
const START_LIMIT: Duration = Duration::from_secs(60);
/// How long pods may take to reach what is measured, or to stop once their manifests are gone.
const POD_LIMIT: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(20);
/// Rounds the spec pod's runs are split into, each agent taking its turn in each.
const ROUNDS: usize = 2;
/// How long an agent is left alone after its health check answers: a kubelet's first syncs
/// (its runtime's status, the first stats) come seconds after it starts listening.
const SETTLE: Duration = Duration::from_secs(5);

#[derive(clap::Args)]
pub struct KubeletArgs {
    /// The kubelet binary (v1.20.2, built by scripts/control-plane); the section is skipped
    /// when it is not there.
    #[arg(long)]
    pub kubelet: PathBuf,
    /// Measured runs of the spec's pod under each agent, alternated (0 skips them).
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Pods dropped at once for the density measurement (0 skips it).
    #[arg(long, default_value_t = 30)]
    pub density: usize,
    /// Pods with a readiness probe each for the steady window (0 skips it).
    #[arg(long, default_value_t = 100)]
    pub pods: usize,
    /// Seconds of steady running to measure, once every pod runs and has settled.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Where the embedded containerd (started or reused) and both agents keep their state.
    #[arg(long, default_value = DEFAULT_ROOT)]
    pub root_dir: PathBuf,
    /// The podwright binary; by default the one next to this benchmark's.
    #[arg(long)]
    pub podwright: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Agent {
    Podwright,
    Kubelet,
}

impl Agent {
    fn name(self) -> &'static str {
        match self {
            Agent::Podwright => "podwright serve",
            Agent::Kubelet => "kubelet v1.20.2",
        }
    }
}

/// The agents' CPU and memory over the steady window.
#[derive(Debug, Default, Clone, Copy)]
struct Steady {
    /// From the manifests' drop until every app container ran.
    ramp: Duration,
    wall: Duration,
    cpu: Duration,
    /// Median of VmRSS sampled every second.
    rss_kib: f64,
}

/// One agent's figures.
#[derive(Debug, Default, Clone)]
pub struct Figures {
    init_pod: Vec<Duration>,
    density: Vec<Duration>,
    steady: Steady,
}

pub enum KubeletReport {
    Skipped(String),
    Measured { runs: usize, density: usize, pods: usize, podwright: Box<Figures>, kubelet: Box<Figures> },
}

pub async fn run(args: &KubeletArgs) -> Result<KubeletReport, String> {
    if !args.kubelet.is_file() {
        return Ok(KubeletReport::Skipped(format!(
            "no kubelet binary at {} (scripts/control-plane up builds it)",
            args.kubelet.display()
        )));
    }
    let podwright = child::podwright_binary(args.podwright.as_ref())?;
    let (endpoint, _) = runtime::endpoint(None, &args.root_dir).await?;
    let cri = runtime::connect(&endpoint).await?;
    let work = std::env::temp_dir().join(format!("podwright-bench-kubelet-{}", std::process::id()));
    let manifests = work.join("manifests");
    std::fs::create_dir_all(&manifests).map_err(|e| format!("cannot create {}: {e}", manifests.display()))?;
    let bench = Bench {
        podwright,
        kubelet: args.kubelet.clone(),
        endpoint,
        cri: Arc::new(cri),
        handle: tokio::runtime::Handle::current(),
        root: args.root_dir.clone(),
        work: work.clone(),
        manifests,
    };
    let (runs, density, pods, window) = (args.runs, args.density, args.pods, Duration::from_secs(args.seconds));
    let result = tokio::task::spawn_blocking(move || bench.run(runs, density, pods, window))
        .await
        .map_err(|e| format!("the measuring thread panicked: {e}"))
        .and_then(|r| r);
    let _ = std::fs::remove_dir_all(&work);
    let (podwright, kubelet) = result?;
    Ok(KubeletReport::Measured { runs, density, pods, podwright: Box::new(podwright), kubelet: Box::new(kubelet) })
}

struct Bench {
    podwright: PathBuf,
    kubelet: PathBuf,
    endpoint: String,
    cri: Arc<dyn Runtime>,
    handle: tokio::runtime::Handle,
    root: PathBuf,
    /// The agents' logs, and the manifest directory.
    work: PathBuf,
    manifests: PathBuf,
}

/// A running agent.
struct Running {
    agent: Agent,
    child: Child,
    health: SocketAddr,
}

impl Running {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            if http::request(self.health, "GET", "/healthz", None).is_ok_and(|r| r.status == 200) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("{} exited at its start ({status})", self.agent.name()));
            }
            if t0.elapsed() > START_LIMIT {
                return Err(format!("{} did not answer on {} within {START_LIMIT:?}", self.agent.name(), self.health));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop(mut self) -> Result<(), String> {
        child::stop(&mut self.child, self.agent.name(), START_LIMIT)
    }
}

/// The spec's pod: 2 init + 1 app container, each exiting at once.
fn init_pod(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  initContainers:
  - {{name: init1, image: {IMAGE}, imagePullPolicy: Never, command: [sh, -c, "exit 0"]}}
  - {{name: init2, image: {IMAGE}, imagePullPolicy: Never, command: [sh, -c, "exit 0"]}}
  containers:
  - {{name: app, image: {IMAGE}, imagePullPolicy: Never, command: [sh, -c, "exit 0"]}}
"#
    )
}

/// The density pod: the same init containers, and an app container that keeps running.
fn running_pod(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - {{name: init1, image: {IMAGE}, imagePullPolicy: Never, command: [sh, -c, "exit 0"]}}
  - {{name: init2, image: {IMAGE}, imagePullPolicy: Never, command: [sh, -c, "exit 0"]}}
  containers:
  - {{name: app, image: {IMAGE}, imagePullPolicy: Never, command: [sleep, "3600"]}}
"#
    )
}

/// The steady pod: one running container with an exec readiness probe.
fn probed_pod(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {IMAGE}
    imagePullPolicy: Never
    command: [sleep, "3600"]
    readinessProbe: {{exec: {{command: ["true"]}}, periodSeconds: 10}}
"#
    )
}

/// Now, in nanoseconds since the epoch, as the runtime's timestamps are.
fn now_ns() -> i64 {
    jiff::Timestamp::now().as_nanosecond() as i64
}

fn since(t0_ns: i64, at_ns: i64) -> Duration {
    Duration::from_nanos(u64::try_from(at_ns - t0_ns).unwrap_or(0))
}

impl Bench {
    fn run(&self, runs: usize, density: usize, pods: usize, window: Duration) -> Result<(Figures, Figures), String> {
        // Nothing of an earlier, interrupted run may be running: a kubelet would stop it, and
        // it would count in the figures.
        self.clean()?;
        let mut figures = [Figures::default(), Figures::default()];
        let agents = [Agent::Podwright, Agent::Kubelet];
        // In rounds, so that both agents see the machine alike; in each, an agent runs the pod
        // once unmeasured (its caches and the runtime's warm up), then its share of the runs
        // one after the other.
        for round in (0..ROUNDS).filter(|_| runs > 0) {
            let share = runs / ROUNDS + usize::from(round < runs % ROUNDS);
            for (agent, f) in agents.into_iter().zip(&mut figures) {
                f.init_pod.extend(self.with_agent(agent, |_| {
                    self.init_pod(agent, &format!("warm{round}"))?;
                    (0..share).map(|i| self.init_pod(agent, &format!("init{round}-{i}"))).collect::<Result<Vec<_>, _>>()
                })?);
            }
        }
        for (agent, f) in agents.into_iter().zip(&mut figures).filter(|_| density > 0) {
            f.density = self.with_agent(agent, |_| self.density(density))?;
        }
        for (agent, f) in agents.into_iter().zip(&mut figures).filter(|_| pods > 0) {
            f.steady = self.with_agent(agent, |running| self.steady(running, pods, window))?;
        }
        let [podwright, kubelet] = figures;
        Ok((podwright, kubelet))
    }

    /// Starts `agent` on an empty manifest directory, runs `measure`, then removes the
    /// manifests, lets the agent stop the pods, stops it and removes what is left in the runtime.
    fn with_agent<T>(&self, agent: Agent, measure: impl FnOnce(&Running) -> Result<T, String>) -> Result<T, String> {
        let mut running = self.start(agent)?;
        let result = running.wait_ready().and_then(|()| {
            std::thread::sleep(SETTLE);
            measure(&running)
        });
        let drained = self.remove_manifests().and_then(|()| self.wait_stopped());
        let stopped = running.stop();
        let cleaned = self.clean();
        let value = result?;
        drained.and(stopped).and(cleaned)?;
        Ok(value)
    }

    fn start(&self, agent: Agent) -> Result<Running, String> {
        let log = self.work.join(format!(
            "{}.log",
            match agent {
                Agent::Podwright => "podwright",
                Agent::Kubelet => "kubelet",
            }
        ));
        let log = std::fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let port = free_port()?;
        let mut cmd = match agent {
            Agent::Podwright => {
                // Its store starts empty: the mirror pods of earlier runs would be in it.
                let _ = std::fs::remove_file(self.root.join(podwright_server::server::STORE_FILE));
                let mut cmd = Command::new(&self.podwright);
                cmd.arg("serve")
                    .arg("--root-dir")
                    .arg(&self.root)
                    .args(["--port", &port.to_string(), "--runtime-endpoint", &self.endpoint])
                    .arg("--pod-manifest-path")
                    .arg(&self.manifests)
                    .args(["--hostname-override", NODE])
                    .env("PODWRIGHT_LOG", "error");
                cmd
            }
            Agent::Kubelet => {
                let mut cmd = Command::new(&self.kubelet);
                cmd.args([
                    "--container-runtime=remote",
                    &format!("--container-runtime-endpoint={}", self.endpoint),
                    &format!("--pod-manifest-path={}", self.manifests.display()),
                    &format!("--root-dir={}", self.root.join("kubelet").display()),
                    "--cgroup-driver=cgroupfs",
                    "--cgroups-per-qos=false",
                    "--enforce-node-allocatable=",
                    "--fail-swap-on=false",
                    &format!("--healthz-port={port}"),
                    "--read-only-port=0",
                    &format!("--port={}", free_port()?),
                    "--anonymous-auth=true",
                    "--authorization-mode=AlwaysAllow",
                    // This machine's disk is no concern of the benchmark's: a kubelet near its
                    // thresholds would remove the benchmark's image and evict its pods.
                    "--eviction-hard=",
                    "--image-gc-high-threshold=100",
                    "--image-gc-low-threshold=99",
                    &format!("--hostname-override={NODE}"),
                    "--v=0",
                ]);
                cmd
            }
        };
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
        let child = cmd.spawn().map_err(|e| format!("cannot run {}: {e}", agent.name()))?;
        Ok(Running { agent, child, health: SocketAddr::from((Ipv4Addr::LOCALHOST, port)) })
    }

    /// Writes a manifest whole (renamed into place) and returns when it landed.
    fn drop_manifest(&self, name: &str, text: &str) -> Result<i64, String> {
        let tmp = self.work.join(format!(".{name}.yaml"));
        std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        let t0 = now_ns();
        let path = self.manifests.join(format!("{name}.yaml"));
        std::fs::rename(&tmp, &path).map_err(|e| format!("cannot move {} into place: {e}", path.display()))?;
        Ok(t0)
    }

    fn remove_manifests(&self) -> Result<(), String> {
        let entries = std::fs::read_dir(&self.manifests).map_err(|e| format!("{}: {e}", self.manifests.display()))?;
        for e in entries.flatten() {
            std::fs::remove_file(e.path()).map_err(|err| format!("{}: {err}", e.path().display()))?;
        }
        Ok(())
    }

    /// The benchmark's containers named `app` (all of them without `app_only`) as one cheap
    /// listing shows them: no status call for each.
    fn listed(&self, app_only: bool) -> Result<Vec<podwright_runtime::Listed>, String> {
        let labels: BTreeMap<String, String> = if app_only {
            BTreeMap::from([("io.kubernetes.container.name".to_string(), "app".to_string())])
        } else {
            BTreeMap::new()
        };
        let all = self
            .handle
            .block_on(self.cri.list_container_states(&labels))
            .map_err(|e| format!("listing the runtime's containers: {e}"))?;
        Ok(all.into_iter().filter(|c| pod_of(c).is_some()).collect())
    }

    /// Waits until `pick` finds a time in each named pod's newest `app` container; those times.
    /// Polled by a cheap listing; a container's status is read only while its pod's time is
    /// still missing, so the polling loads the runtime little while the agents work.
    fn wait_for(
        &self,
        pods: &[String],
        pick: impl Fn(&podwright_runtime::ContainerInfo) -> Option<i64>,
    ) -> Result<Vec<i64>, String> {
        let t0 = Instant::now();
        let mut found: BTreeMap<&str, i64> = BTreeMap::new();
        loop {
            let mut newest: BTreeMap<&str, podwright_runtime::Listed> = BTreeMap::new();
            for c in self.listed(true)? {
                let pod = pod_of(&c).unwrap_or_default().trim_end_matches(&format!("-{NODE}")).to_string();
                let Some(name) = pods.iter().find(|p| **p == pod).map(String::as_str) else { continue };
                if !found.contains_key(name) && newest.get(name).is_none_or(|n| n.created_at < c.created_at) {
                    newest.insert(name, c);
                }
            }
            for (name, c) in newest {
                let status = self.handle.block_on(self.cri.container_status(&c.id));
                if let Some(at) = status.ok().as_ref().and_then(&pick) {
                    found.insert(name, at);
                }
            }
            if found.len() == pods.len() {
                return Ok(pods.iter().map(|p| found[p.as_str()]).collect());
            }
            if t0.elapsed() > POD_LIMIT {
                let missing = pods.len() - found.len();
                return Err(format!("{missing} of {} pods had not got there within {POD_LIMIT:?}", pods.len()));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits until no container of the benchmark's pods runs.
    fn wait_stopped(&self) -> Result<(), String> {
        let t0 = Instant::now();
        while self.listed(false)?.iter().any(|c| c.state == ContainerState::ContainerRunning as i32) {
            if t0.elapsed() > POD_LIMIT {
                return Err(format!("the pods' containers still ran {POD_LIMIT:?} after their manifests went"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// Stops and removes the benchmark's sandboxes (and so their containers) that are left.
    fn clean(&self) -> Result<(), String> {
        self.handle.block_on(async {
            let sandboxes =
                self.cri.list_pod_sandboxes(&BTreeMap::new()).await.map_err(|e| format!("listing sandboxes: {e}"))?;
            for s in sandboxes {
                let ours = s.labels.get("io.kubernetes.pod.name").is_some_and(|p| p.ends_with(&format!("-{NODE}")));
                if ours {
                    let _ = self.cri.stop_pod_sandbox(&s.id).await;
                    self.cri.remove_pod_sandbox(&s.id).await.map_err(|e| format!("removing sandbox {}: {e}", s.id))?;
                }
            }
            Ok(())
        })
    }

    /// The spec's pod: from its manifest's drop to its app container's exit. Its manifest
    /// goes after, so that the next run's pod is the agent's only one.
    fn init_pod(&self, agent: Agent, name: &str) -> Result<Duration, String> {
        let name = format!("{}-{name}", short(agent));
        let t0 = self.drop_manifest(&name, &init_pod(&name))?;
        let done = self.wait_for(&[name], |c| (c.finished_at > 0).then_some(c.finished_at))?;
        self.remove_manifests()?;
        Ok(since(t0, done[0]))
    }

    /// Pods dropped at once: each from its manifest's drop to its app container's start.
    fn density(&self, pods: usize) -> Result<Vec<Duration>, String> {
        let names: Vec<String> = (0..pods).map(|i| format!("dense{i:03}")).collect();
        let dropped = names.iter().map(|n| self.drop_manifest(n, &running_pod(n))).collect::<Result<Vec<_>, _>>()?;
        let started = self.wait_for(&names, |c| (c.started_at > 0).then_some(c.started_at))?;
        Ok(dropped.iter().zip(started).map(|(&t0, at)| since(t0, at)).collect())
    }

    /// Probed pods running: the agent's CPU and RSS over `window`, after they all run and a
    /// probe period has passed.
    fn steady(&self, running: &Running, pods: usize, window: Duration) -> Result<Steady, String> {
        let names: Vec<String> = (0..pods).map(|i| format!("steady{i:03}")).collect();
        let t0 = Instant::now();
        for n in &names {
            self.drop_manifest(n, &probed_pod(n))?;
        }
        let running_at = ContainerState::ContainerRunning as i32;
        self.wait_for(&names, |c| (c.state == running_at).then_some(c.started_at))?;
        let ramp = t0.elapsed();
        std::thread::sleep(Duration::from_secs(10));
        let pid = running.pid();
        let (t0, cpu0) = (Instant::now(), proc_cpu(pid)?);
        let mut rss = vec![];
        while t0.elapsed() < window {
            rss.push(measure::status_kib(&pid.to_string(), "VmRSS")? as f64);
            std::thread::sleep(Duration::from_secs(1).min(window.saturating_sub(t0.elapsed())));
        }
        let cpu = proc_cpu(pid)?.own.saturating_sub(cpu0.own);
        Ok(Steady { ramp, wall: t0.elapsed(), cpu, rss_kib: measure::median(&rss) })
    }
}

/// The pods' name prefix of each agent, so a pod of one is never taken for the other's.
fn short(agent: Agent) -> &'static str {
    match agent {
        Agent::Podwright => "pw",
        Agent::Kubelet => "kl",
    }
}

/// The benchmark pod a container belongs to (`<name>-<node>`), if it is one of its.
fn pod_of(c: &podwright_runtime::Listed) -> Option<&str> {
    c.labels.get("io.kubernetes.pod.name").map(String::as_str).filter(|p| p.ends_with(&format!("-{NODE}")))
}

impl KubeletReport {
    pub fn print(&self) {
        let KubeletReport::Measured { runs, density, pods, podwright, kubelet } = self else {
            if let KubeletReport::Skipped(why) = self {
                println!("kubelet: skipped: {why}");
            }
            return;
        };
        let ms = |d: &[Duration]| d.iter().map(|d| d.as_secs_f64() * 1e3).collect::<Vec<f64>>();
        let pct = |d: &[Duration], p| measure::percentile(&ms(d), p).unwrap_or(f64::NAN);
        let init = (measure::median(&ms(&podwright.init_pod)), measure::median(&ms(&kubelet.init_pod)));
        let p50 = (pct(&podwright.density, 50.0), pct(&kubelet.density, 50.0));
        let p99 = (pct(&podwright.density, 99.0), pct(&kubelet.density, 99.0));
        let cpu = (podwright.steady.cpu.as_secs_f64(), kubelet.steady.cpu.as_secs_f64());
        let rss = (podwright.steady.rss_kib / 1024.0, kubelet.steady.rss_kib / 1024.0);
        println!(
            "kubelet: podwright serve beside the Go kubelet v1.20.2 (standalone), static pods on the same containerd,"
        );
        println!(
            "  one agent at a time, alternated; timed from the manifest's drop to the runtime's container timestamps"
        );
        println!("  {:<52} {:>12} {:>12} {:>8}", "", "podwright", "kubelet", "ratio");
        let row = |what: &str, (p, k): (f64, f64), unit: &str| {
            println!("  {:<52} {:>9.1} {unit:<2} {:>9.1} {unit:<2} {:>8.3}", what, p, k, p / k);
        };
        row(&format!("2 init + 1 app, drop to app exit, median of {runs}"), init, "ms");
        row(&format!("{density} pods at once, drop to app start, p50"), p50, "ms");
        row(&format!("{density} pods at once, drop to app start, p99"), p99, "ms");
        let window = podwright.steady.wall.as_secs_f64();
        row(&format!("{pods} pods with an exec readiness probe, CPU over {window:.0} s"), cpu, "s");
        row(&format!("{pods} pods with an exec readiness probe, RSS (median)"), rss, "MiB");
        println!(
            "  ({pods} pods running {:.1} s after their drop under podwright, {:.1} s under the kubelet)",
            podwright.steady.ramp.as_secs_f64(),
            kubelet.steady.ramp.as_secs_f64()
        );
        println!("vs_kubelet_init_pod: {:.3}", init.0 / init.1);
        println!("vs_kubelet_density_p50: {:.3}", p50.0 / p50.1);
        println!("vs_kubelet_density_p99: {:.3}", p99.0 / p99.1);
        println!("vs_kubelet_cpu: {:.3}", cpu.0 / cpu.1);
        println!("vs_kubelet_rss: {:.3}", rss.0 / rss.1);
        println!("kubelet_init_pod_ms: {:.1}", init.1);
        println!("podwright_init_pod_ms: {:.1}", init.0);
        println!("kubelet_density_p50_ms: {:.1}", p50.1);
        println!("kubelet_density_p99_ms: {:.1}", p99.1);
        println!("podwright_density_p50_ms: {:.1}", p50.0);
        println!("podwright_density_p99_ms: {:.1}", p99.0);
        println!("kubelet_steady_cpu_s: {:.2}", cpu.1);
        println!("podwright_steady_cpu_s: {:.2}", cpu.0);
        println!("kubelet_steady_rss_kib: {:.0}", kubelet.steady.rss_kib);
        println!("podwright_steady_rss_kib: {:.0}", podwright.steady.rss_kib);
    }
}
