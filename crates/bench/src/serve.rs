//! `serve`: the `podwright serve` daemon on containerd, driven through its API like a node
//! agent: its resident memory once it has settled with no pods; how long `kubectl apply` of a
//! pod with 2 init + 1 app containers takes until a watch sees it Running, beside the floor of
//! the same CRI calls issued by hand (interleaved); and its memory and CPU over a window of steady running
//! with many pods (busybox `sleep 3600`, no probes) created through the API; and, with those
//! pods running, what one round of usage collection (`/stats/summary`, what `kubectl top`
//! costs) takes of the daemon's CPU and of containerd's.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use crate::child;
use crate::http::{self, Watch};
use crate::measure::{self, Summary, proc_cpu};
use crate::pod;
use crate::real::{DEFAULT_ROOT, FloorPod};
use crate::runtime;
use k8s_openapi::api::core::v1::Pod;
use podwright_runtime::Runtime;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// podwright serve's idle resident memory should stay within this (KiB).
pub const TARGET_IDLE_RSS_KIB: u64 = 15 * 1024;
/// ... and its CPU with the pods running, in cores.
pub const TARGET_CPU_CORES: f64 = 0.01;
/// Label of the pods of the steady window, to list them.
const LABEL: &str = "podwright-bench=serve";
/// How long a pod may take to run, or to go once deleted.
const POD_LIMIT: Duration = Duration::from_secs(60);
/// How long the daemon may take to answer its first request.
const START_LIMIT: Duration = Duration::from_secs(30);
const SAMPLE: Duration = Duration::from_secs(1);
/// Measured usage-collection rounds (CPU is counted in clock ticks: enough rounds to see them).
const USAGE_ROUNDS: u32 = 20;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Pods to run at once for the steady window.
    #[arg(long, default_value_t = 100)]
    pub pods: usize,
    /// Seconds of steady running to measure, once every pod is Running and has settled.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Measured `kubectl apply` runs (and floor runs), after one unmeasured run of each.
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Seconds the daemon is left alone after its start before its idle memory is read.
    #[arg(long, default_value_t = 10)]
    pub settle: u64,
    /// Give up when the pods are not all Running this many seconds after they were created, or
    /// not all removed this long after their deletion.
    #[arg(long, default_value_t = 150)]
    pub ramp_limit: u64,
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

/// Resident memory and CPU of a process over a window.
#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    wall: Duration,
    cpu: Duration,
    /// Median and maximum of VmRSS sampled every second.
    rss_kib: f64,
    rss_max_kib: u64,
}

/// What the daemon's `/metrics` says, for the report's breakdown.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Scrape {
    /// Every runtime call so far.
    runtime_calls: f64,
    /// `kubelet_pod_start_duration_seconds`: sum and count.
    pod_start_s: f64,
    pod_starts: f64,
    /// `remove_podsandbox` calls: one for each pod the daemon has removed from the runtime.
    sandbox_removals: f64,
}

impl Scrape {
    fn parse(text: &str) -> Scrape {
        let mut s = Scrape::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else { continue };
            let value: f64 = value.parse().unwrap_or_default();
            if series.starts_with("kubelet_runtime_operations_total{") {
                s.runtime_calls += value;
                if series.contains("\"remove_podsandbox\"") {
                    s.sandbox_removals = value;
                }
            } else if series == "kubelet_pod_start_duration_seconds_sum" {
                s.pod_start_s = value;
            } else if series == "kubelet_pod_start_duration_seconds_count" {
                s.pod_starts = value;
            }
        }
        s
    }
}

impl Usage {
    fn cores(&self) -> f64 {
        self.cpu.as_secs_f64() / self.wall.as_secs_f64()
    }
}

pub struct ServeReport {
    idle: Usage,
    /// `kubectl apply` with field validation (the daemon serves OpenAPI), or `--validate=false`.
    validated: bool,
    floor: Vec<Duration>,
    apply: Vec<Duration>,
    /// Of each apply run, the part until the watch saw the pod created: kubectl's own start
    /// and requests, and the create's commit.
    created: Vec<Duration>,
    /// Mean of the daemon's own part of the apply runs: its worker first seeing the pod to
    /// Running (`kubelet_pod_start_duration_seconds`).
    worker_start: Duration,
    pods: usize,
    ramp: Duration,
    loaded: Usage,
    /// Runtime calls per second over the window.
    loaded_calls: f64,
    usage_round: UsageRound,
}

/// One round of usage collection with the pods running, averaged over [`USAGE_ROUNDS`].
#[derive(Debug, Default, Clone, Copy)]
struct UsageRound {
    wall: Duration,
    /// The daemon's CPU.
    cpu: Duration,
    /// containerd's CPU (reading every container's cgroup); `None` on a runtime the benchmark
    /// did not start.
    containerd_cpu: Option<Duration>,
}

pub async fn run(args: &ServeArgs) -> Result<ServeReport, String> {
    let podwright = child::podwright_binary(args.podwright.as_ref())?;
    let (endpoint, containerd_pid) = runtime::endpoint(args.runtime_endpoint.as_deref(), &args.root_dir).await?;
    let cri = runtime::connect(&endpoint).await?;
    let work = std::env::temp_dir().join(format!("podwright-bench-serve-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let bench = Bench {
        podwright,
        endpoint,
        containerd_pid,
        cri: Arc::new(cri),
        handle: tokio::runtime::Handle::current(),
        template: pod::running_template()?,
        root: args.root_dir.clone(),
        work: work.clone(),
        runs: args.runs,
        pods: args.pods,
        settle: Duration::from_secs(args.settle),
        window: Duration::from_secs(args.seconds),
        ramp_limit: Duration::from_secs(args.ramp_limit),
    };
    let result = tokio::task::spawn_blocking(move || bench.run())
        .await
        .map_err(|e| format!("the measuring thread panicked: {e}"))
        .and_then(|r| r);
    let _ = std::fs::remove_dir_all(&work);
    result
}

struct Bench {
    podwright: PathBuf,
    endpoint: String,
    containerd_pid: Option<u32>,
    /// The runtime, for the floor's bare CRI calls, made on `handle` from the measuring thread.
    cri: Arc<dyn Runtime>,
    handle: tokio::runtime::Handle,
    /// The pod of the apply runs, admitted, for the floor.
    template: Pod,
    root: PathBuf,
    /// Manifests and kubectl's cache.
    work: PathBuf,
    runs: usize,
    pods: usize,
    settle: Duration,
    window: Duration,
    ramp_limit: Duration,
}

/// How a [`Daemon`] is started.
#[derive(Default)]
pub(crate) struct Launch<'a> {
    /// `--runtime-endpoint`; without it serve starts (or reuses) and keeps running the
    /// embedded containerd under its root.
    pub(crate) endpoint: Option<&'a str>,
    /// Starts on the store a previous daemon left under the root, rather than an empty one.
    pub(crate) keep_store: bool,
    /// Where its log (stderr) is appended, rather than to the benchmark's.
    pub(crate) log: Option<&'a Path>,
}

/// The daemon, as a child process with its API's address.
pub(crate) struct Daemon {
    child: Child,
    pub(crate) addr: SocketAddr,
}

impl Daemon {
    /// Starts `podwright serve` on `endpoint` from an empty store under `root` (what earlier
    /// runs left in it, their events live an hour, would count in its figures) and waits
    /// until its API answers.
    pub(crate) fn start(podwright: &Path, root: &Path, endpoint: &str) -> Result<Daemon, String> {
        Daemon::launch(podwright, root, &Launch { endpoint: Some(endpoint), ..Launch::default() })
    }

    /// Starts `podwright serve` under `root` as `launch` says and waits until its API answers.
    pub(crate) fn launch(podwright: &Path, root: &Path, launch: &Launch) -> Result<Daemon, String> {
        let store = root.join(podwright_server::server::STORE_FILE);
        if !launch.keep_store
            && let Err(e) = std::fs::remove_file(&store)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(format!("cannot remove {}: {e}", store.display()));
        }
        let port = free_port()?;
        let mut cmd = Command::new(podwright);
        cmd.arg("serve").arg("--root-dir").arg(root).args(["--port", &port.to_string()]);
        if let Some(endpoint) = launch.endpoint {
            cmd.args(["--runtime-endpoint", endpoint]);
        }
        cmd.env("PODWRIGHT_LOG", "error").stdin(Stdio::null()).stdout(Stdio::null());
        if let Some(log) = launch.log {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
            cmd.stderr(file);
        }
        let child = cmd.spawn().map_err(|e| format!("cannot run {}: {e}", podwright.display()))?;
        let mut daemon = Daemon { child, addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)) };
        if let Err(e) = daemon.wait_ready() {
            let _ = daemon.stop();
            return Err(e);
        }
        Ok(daemon)
    }

    /// Stops it, then starts it again as `launch` says (its store and its port are its own
    /// while it runs).
    pub(crate) fn restart(&mut self, podwright: &Path, root: &Path, launch: &Launch) -> Result<(), String> {
        child::stop(&mut self.child, "podwright serve", START_LIMIT)?;
        *self = Daemon::launch(podwright, root, launch)?;
        Ok(())
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn request(&self, method: &str, path: &str, body: Option<&str>) -> Result<http::Response, String> {
        http::request(self.addr, method, path, body)
    }

    pub(crate) fn scrape(&self) -> Result<Scrape, String> {
        let r = self.request("GET", "/metrics", None)?;
        match r.status {
            200 => Ok(Scrape::parse(&String::from_utf8_lossy(&r.body))),
            s => Err(format!("GET /metrics: HTTP {s}")),
        }
    }

    /// Waits for the API to answer.
    fn wait_ready(&mut self) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            if let Ok(r) = self.request("GET", "/healthz", None)
                && r.status == 200
            {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("podwright serve exited at its start ({status})"));
            }
            if t0.elapsed() > START_LIMIT {
                return Err(format!("podwright serve did not answer on {} within {START_LIMIT:?}", self.addr));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its memory and CPU over `window`.
    fn usage(&self, window: Duration) -> Result<Usage, String> {
        let pid = self.pid();
        let (t0, cpu0) = (Instant::now(), proc_cpu(pid)?);
        let mut samples = vec![];
        while t0.elapsed() < window {
            samples.push(measure::status_kib(&pid.to_string(), "VmRSS")?);
            std::thread::sleep(SAMPLE.min(window.saturating_sub(t0.elapsed())));
        }
        let cpu = proc_cpu(pid)?.own.saturating_sub(cpu0.own);
        let wall = t0.elapsed();
        let rss: Vec<f64> = samples.iter().map(|&k| k as f64).collect();
        Ok(Usage { wall, cpu, rss_kib: measure::median(&rss), rss_max_kib: samples.into_iter().max().unwrap_or(0) })
    }

    /// The pods with `selector` (in the namespace `default`), as the API lists them.
    pub(crate) fn pods(&self, selector: &str) -> Result<Vec<Value>, String> {
        let r = self.request("GET", &format!("/api/v1/namespaces/default/pods?labelSelector={selector}"), None)?;
        if r.status != 200 {
            return Err(format!("listing the pods: HTTP {}", r.status));
        }
        Ok(r.json()?["items"].as_array().cloned().unwrap_or_default())
    }

    /// The pods' names and phases, of those with `selector`.
    pub(crate) fn phases(&self, selector: &str) -> Result<Vec<(String, String)>, String> {
        Ok(self.pods(selector)?.iter().map(|p| (str_at(p, "/metadata/name"), str_at(p, "/status/phase"))).collect())
    }

    /// Deletes the pods with `selector` and waits (up to `limit`) until the daemon has removed
    /// them from the runtime.
    pub(crate) fn clear(&self, selector: &str, limit: Duration) -> Result<(), String> {
        let left = self.pods(selector)?;
        if left.is_empty() {
            return Ok(());
        }
        let before = self.scrape()?;
        left.iter().try_for_each(|p| self.delete(&str_at(p, "/metadata/name")))?;
        self.wait_removed(&before, left.len(), limit)
    }

    /// Creates the pods (name and JSON body each) by concurrent requests on `handle`; returns
    /// when each request was sent, and the object created.
    pub(crate) fn create_all(
        &self,
        handle: &tokio::runtime::Handle,
        pods: Vec<(String, String)>,
    ) -> Result<HashMap<String, (Instant, Value)>, String> {
        let addr = self.addr;
        let tasks: Vec<_> = pods
            .into_iter()
            .map(|(name, pod)| {
                handle.spawn(async move {
                    let sent = Instant::now();
                    let r = http::exchange(addr, "POST", "/api/v1/namespaces/default/pods", Some(&pod)).await;
                    (name, sent, r)
                })
            })
            .collect();
        let mut created = HashMap::new();
        for task in tasks {
            let (name, at, r) = handle.block_on(task).map_err(|e| format!("a create request failed: {e}"))?;
            let r = r?;
            if r.status != 201 {
                return Err(format!("creating {name}: HTTP {}: {}", r.status, String::from_utf8_lossy(&r.body)));
            }
            created.insert(name, (at, r.json()?));
        }
        Ok(created)
    }

    /// Deletes a pod at once (grace 0: `sleep` ignores SIGTERM as PID 1); a pod already gone
    /// is fine. Its object goes at once, the pod itself once the node has stopped and removed
    /// it (see [`Daemon::wait_removed`]).
    pub(crate) fn delete(&self, name: &str) -> Result<(), String> {
        let r = self.request(
            "DELETE",
            &format!("/api/v1/namespaces/default/pods/{name}"),
            Some(r#"{"gracePeriodSeconds":0,"propagationPolicy":"Background"}"#),
        )?;
        match r.status {
            200 | 202 | 404 => Ok(()),
            s => Err(format!("deleting {name}: HTTP {s}: {}", String::from_utf8_lossy(&r.body))),
        }
    }

    /// Waits until the daemon has removed `pods` more pods from the runtime than it had when
    /// `before` was read: their containers, sandboxes and files are gone (stopping the daemon
    /// earlier leaves them to the runtime).
    pub(crate) fn wait_removed(&self, before: &Scrape, pods: usize, limit: Duration) -> Result<(), String> {
        let t0 = Instant::now();
        while self.scrape()?.sandbox_removals < before.sandbox_removals + pods as f64 {
            if t0.elapsed() > limit {
                return Err(format!("the daemon had not removed {pods} deleted pods within {limit:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Asks it to stop (it leaves no pod behind: every pod was deleted) and waits.
    pub(crate) fn stop(mut self) -> Result<(), String> {
        child::stop(&mut self.child, "podwright serve", START_LIMIT)
    }

    /// Stops the daemon after a run whose pods were cleared, whatever the run and the clearing
    /// returned: the run's result, or the first error of the three.
    pub(crate) fn stop_after<T>(self, run: Result<T, String>, cleared: Result<(), String>) -> Result<T, String> {
        let stopped = self.stop();
        let report = run?;
        cleared?;
        stopped?;
        Ok(report)
    }
}

pub(crate) fn str_at(v: &Value, pointer: &str) -> String {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_string()
}

/// A port nobody listens on now.
pub(crate) fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| format!("cannot find a free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

impl Bench {
    fn run(self) -> Result<ServeReport, String> {
        let daemon = Daemon::start(&self.podwright, &self.root, &self.endpoint)?;
        let result = self.measure(&daemon);
        daemon.stop_after(result, Ok(()))
    }

    fn measure(&self, daemon: &Daemon) -> Result<ServeReport, String> {
        std::thread::sleep(self.settle);
        let idle = daemon.usage(Duration::from_secs(5))?;
        // kubectl validates fields when the API serves OpenAPI v3, and refuses to apply
        // without it unless told not to.
        let validated = daemon.request("GET", "/openapi/v3", None).is_ok_and(|r| r.status == 200);
        // The first runs warm the caches up (kubectl's discovery cache, the runtime's).
        self.floor("serve-floor-warm-up")?;
        self.apply(daemon, "apply-warm-up", validated)?;
        let before = daemon.scrape()?;
        // Interleaved, so that both see the machine's load alike.
        let (mut floor, mut apply, mut created) = (vec![], vec![], vec![]);
        for i in 0..self.runs {
            floor.push(self.floor(&format!("serve-floor-{i}"))?);
            let (running, added) = self.apply(daemon, &format!("apply-{i}"), validated)?;
            apply.push(running);
            created.push(added);
        }
        let after = daemon.scrape()?;
        let starts = (after.pod_starts - before.pod_starts).max(1.0);
        let worker_start = Duration::from_secs_f64((after.pod_start_s - before.pod_start_s) / starts);
        let names: Vec<String> = (0..self.pods).map(|i| format!("steady-{i:03}")).collect();
        let before = daemon.scrape()?;
        let loaded = self.steady(daemon, &names);
        // Every pod goes, whatever happened.
        let gone = names
            .iter()
            .try_for_each(|n| daemon.delete(n))
            .and_then(|()| self.wait_gone(daemon))
            .and_then(|()| daemon.wait_removed(&before, names.len(), self.ramp_limit));
        let (ramp, loaded, loaded_calls, usage_round) = loaded?;
        gone?;
        Ok(ServeReport {
            idle,
            validated,
            floor,
            apply,
            created,
            worker_start,
            pods: self.pods,
            ramp,
            loaded,
            loaded_calls,
            usage_round,
        })
    }

    /// The floor of an apply run: the pod's sandbox, its init containers run to their exit and
    /// its app container started, by bare CRI calls (the daemon does not touch the pod).
    fn floor(&self, name: &str) -> Result<Duration, String> {
        self.handle.block_on(async {
            let rt = self.cri.as_ref();
            let mut floor = FloorPod::new(pod::instance(&self.template, name), &self.root)?;
            let t0 = Instant::now();
            let result = floor.run(rt, false).await;
            let took = t0.elapsed();
            floor.remove(rt).await;
            result.map(|()| took)
        })
    }

    /// `kubectl apply` of the pod until a watch sees it Running, and until it saw it created;
    /// then deletes it.
    fn apply(&self, daemon: &Daemon, name: &str, validated: bool) -> Result<(Duration, Duration), String> {
        let manifest = self.work.join(format!("{name}.yaml"));
        std::fs::write(&manifest, pod::running_manifest(name))
            .map_err(|e| format!("cannot write {}: {e}", manifest.display()))?;
        let path = format!("/api/v1/namespaces/default/pods?watch=true&fieldSelector=metadata.name%3D{name}");
        let mut watch = Watch::open(daemon.addr, &path)?;
        let before = daemon.scrape()?;
        let t0 = Instant::now();
        let mut kubectl = Command::new("kubectl");
        kubectl
            .arg("--kubeconfig")
            .arg(self.root.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.work.join("kube-cache"))
            .args(["apply", "-f"])
            .arg(&manifest)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if !validated {
            kubectl.arg("--validate=false");
        }
        let mut child = kubectl.spawn().map_err(|e| format!("cannot run kubectl: {e}"))?;
        let mut added = None;
        let running = (|| loop {
            if let Ok(Some(status)) = child.try_wait()
                && !status.success()
            {
                return Err(format!("kubectl apply failed ({status})"));
            }
            if t0.elapsed() > POD_LIMIT {
                return Err(format!("{name} was not Running within {POD_LIMIT:?}"));
            }
            let Some(event) = watch.next(Instant::now() + Duration::from_millis(100))? else { continue };
            let at = t0.elapsed();
            added.get_or_insert(at);
            if str_at(&event, "/object/status/phase") == "Running" {
                return Ok(at);
            }
        })();
        let output = child.wait_with_output().map_err(|e| format!("kubectl: {e}"))?;
        let running = running.map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&output.stderr).trim()))?;
        daemon.delete(name)?;
        let deadline = Instant::now() + POD_LIMIT;
        loop {
            match watch.next(deadline)? {
                Some(event) if event["type"] == "DELETED" => break,
                Some(_) => {}
                None => return Err(format!("{name} was not gone within {POD_LIMIT:?} of its deletion")),
            }
        }
        daemon.wait_removed(&before, 1, POD_LIMIT)?;
        Ok((running, added.unwrap_or(running)))
    }

    /// Creates the pods through the API, waits until all are Running and have settled, then
    /// measures the daemon over the window: how long the ramp took, the window's usage, and the
    /// runtime calls per second over it; then one usage-collection round's cost.
    fn steady(&self, daemon: &Daemon, names: &[String]) -> Result<(Duration, Usage, f64, UsageRound), String> {
        let t0 = Instant::now();
        let (key, value) = LABEL.split_once('=').unwrap_or_default();
        for name in names {
            let pod = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "labels": {key: value}},
                "spec": {"containers": [{"name": "sleep", "image": pod::IMAGE, "command": ["sleep", "3600"]}]},
            });
            let r = daemon.request("POST", "/api/v1/namespaces/default/pods", Some(&pod.to_string()))?;
            if r.status != 201 {
                return Err(format!("creating {name}: HTTP {}: {}", r.status, String::from_utf8_lossy(&r.body)));
            }
        }
        loop {
            let phases = daemon.phases(LABEL)?;
            let running = phases.iter().filter(|(_, p)| p == "Running").count();
            if running == names.len() {
                break;
            }
            if t0.elapsed() > self.ramp_limit {
                return Err(format!("only {running} of {} pods were Running after {:?}", names.len(), self.ramp_limit));
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        let ramp = t0.elapsed();
        std::thread::sleep(Duration::from_secs(5));
        let before = daemon.scrape()?;
        let usage = daemon.usage(self.window)?;
        let calls = (daemon.scrape()?.runtime_calls - before.runtime_calls) / usage.wall.as_secs_f64();
        Ok((ramp, usage, calls, self.usage_rounds(daemon, names.len())?))
    }

    /// [`USAGE_ROUNDS`] reads of `/stats/summary` after one unmeasured one, each checked to
    /// hold every pod: the daemon's and containerd's CPU and the wall time of one.
    fn usage_rounds(&self, daemon: &Daemon, pods: usize) -> Result<UsageRound, String> {
        let round = || -> Result<(), String> {
            let r = daemon.request("GET", "/stats/summary", None)?;
            if r.status != 200 {
                return Err(format!("GET /stats/summary: HTTP {}: {}", r.status, String::from_utf8_lossy(&r.body)));
            }
            let seen = r.json()?["pods"].as_array().map_or(0, Vec::len);
            if seen < pods {
                return Err(format!("/stats/summary has {seen} pods of {pods}"));
            }
            Ok(())
        };
        round()?;
        let containerd = |pid: u32| proc_cpu(pid).map(|c| c.own);
        let (t0, cpu0) = (Instant::now(), proc_cpu(daemon.pid())?.own);
        let ctrd0 = self.containerd_pid.map(containerd).transpose()?;
        for _ in 0..USAGE_ROUNDS {
            round()?;
        }
        let wall = t0.elapsed() / USAGE_ROUNDS;
        let cpu = proc_cpu(daemon.pid())?.own.saturating_sub(cpu0) / USAGE_ROUNDS;
        let containerd_cpu = match (self.containerd_pid, ctrd0) {
            (Some(pid), Some(before)) => Some(containerd(pid)?.saturating_sub(before) / USAGE_ROUNDS),
            _ => None,
        };
        Ok(UsageRound { wall, cpu, containerd_cpu })
    }

    fn wait_gone(&self, daemon: &Daemon) -> Result<(), String> {
        let t0 = Instant::now();
        let limit = self.ramp_limit;
        while t0.elapsed() < limit {
            if daemon.phases(LABEL)?.is_empty() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Err(format!("the pods were not all gone {limit:?} after their deletion"))
    }
}

impl ServeReport {
    pub fn print(&self) {
        let (floor, apply, created) = (Summary::of(&self.floor), Summary::of(&self.apply), Summary::of(&self.created));
        let kib = |k: f64| format!("{k:.0} KiB ({:.1} MiB)", k / 1024.0);
        let verdict = |ok: bool| if ok { "ok" } else { "MISSED" };
        println!("serve: `podwright serve` on containerd, driven through its API");
        println!(
            "  idle (no pods, after settling): RSS {}, CPU {:.4} cores   target <= {} MiB  {}",
            kib(self.idle.rss_kib),
            self.idle.cores(),
            TARGET_IDLE_RSS_KIB / 1024,
            verdict(self.idle.rss_kib <= TARGET_IDLE_RSS_KIB as f64)
        );
        let validation = if self.validated { "field validation on" } else { "--validate=false: no OpenAPI served" };
        println!(
            "  kubectl apply (2 init + 1 app) -> Running seen by a watch, {} runs each, interleaved ({validation}):",
            self.apply.len()
        );
        println!("  {:<40} {:>10} {:>10} {:>10}", "ms", "median", "min", "max");
        println!(
            "  {:<40} {:>10.2} {:>10.2} {:>10.2}",
            "floor (bare CRI calls to app started)", floor.median, floor.min, floor.max
        );
        println!("  {:<40} {:>10.2} {:>10.2} {:>10.2}", "kubectl apply -> Running", apply.median, apply.min, apply.max);
        println!(
            "  of which kubectl until the watch saw the pod created: {:.2} ms (median); the pod worker, from first seeing the pod to Running: {:.2} ms (mean, from /metrics)",
            created.median,
            self.worker_start.as_secs_f64() * 1e3
        );
        println!(
            "  {} pods (sleep 3600, no probes) Running {:.1} s after their creation; over {:.0} s of steady running:",
            self.pods,
            self.ramp.as_secs_f64(),
            self.loaded.wall.as_secs_f64()
        );
        println!(
            "  RSS {} (max {}), CPU {:.2} s = {:.4} cores   target <= {TARGET_CPU_CORES} cores  {}",
            kib(self.loaded.rss_kib),
            kib(self.loaded.rss_max_kib as f64),
            self.loaded.cpu.as_secs_f64(),
            self.loaded.cores(),
            verdict(self.loaded.cores() <= TARGET_CPU_CORES)
        );
        println!("  runtime calls: {:.1}/s (from /metrics)", self.loaded_calls);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let u = &self.usage_round;
        let containerd = u
            .containerd_cpu
            .map_or("not measured (a runtime it did not start)".to_string(), |c| format!("{:.2} ms", ms(c)));
        println!(
            "  usage collection for {} pods (/stats/summary, {USAGE_ROUNDS} rounds): {:.2} ms wall, daemon CPU {:.2} ms, containerd CPU {containerd} per round",
            self.pods,
            ms(u.wall),
            ms(u.cpu)
        );
        println!("serve_idle_rss_kib: {:.0}", self.idle.rss_kib);
        println!("serve_idle_cpu_cores: {:.4}", self.idle.cores());
        println!("apply_floor_ms: {:.2}", floor.median);
        println!("apply_to_running_ms: {:.2}", apply.median);
        println!("apply_to_running_min_ms: {:.2}", apply.min);
        println!("apply_to_running_max_ms: {:.2}", apply.max);
        println!("apply_created_ms: {:.2}", created.median);
        println!("apply_worker_start_ms: {:.2}", self.worker_start.as_secs_f64() * 1e3);
        println!("serve_pods: {}", self.pods);
        println!("serve_ramp_s: {:.2}", self.ramp.as_secs_f64());
        println!("serve_rss_kib_{}_pods: {:.0}", self.pods, self.loaded.rss_kib);
        println!("serve_rss_max_kib_{}_pods: {}", self.pods, self.loaded.rss_max_kib);
        println!("serve_cpu_cores_{}_pods: {:.4}", self.pods, self.loaded.cores());
        println!("serve_runtime_calls_per_s_{}_pods: {:.1}", self.pods, self.loaded_calls);
        println!("usage_round_wall_ms_{}_pods: {:.2}", self.pods, ms(u.wall));
        println!("usage_round_cpu_ms_{}_pods: {:.2}", self.pods, ms(u.cpu));
        if let Some(c) = u.containerd_cpu {
            println!("usage_round_containerd_cpu_ms_{}_pods: {:.2}", self.pods, ms(c));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_figures_it_needs_from_metrics() {
        let text = "# HELP kubelet_runtime_operations_total x\n\
            kubelet_runtime_operations_total{operation_type=\"list_containers\"} 7\n\
            kubelet_runtime_operations_total{operation_type=\"remove_podsandbox\"} 2\n\
            kubelet_pod_start_duration_seconds_sum 1.5\n\
            kubelet_pod_start_duration_seconds_count 3\n";
        let s = Scrape::parse(text);
        assert_eq!((s.runtime_calls, s.pod_start_s, s.pod_starts, s.sandbox_removals), (9.0, 1.5, 3.0, 2.0));
    }

    #[test]
    fn the_applied_manifest_loads_as_two_init_and_one_app_container() {
        let pods = podwright_api::load_str("apply.yaml", &pod::running_manifest("apply-3")).unwrap().pods;
        let (pod, _) = &pods[0];
        assert_eq!(pod.metadata.name.as_deref(), Some("apply-3"));
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!((spec.init_containers.as_ref().map(Vec::len), spec.containers.len()), (Some(2), 1));
    }
}
