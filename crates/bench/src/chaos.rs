//! `chaos`: `podwright serve` on its own embedded containerd, with many pods running, through
//! the faults a node meets, one case at a time; each case passes or fails with its reason:
//!
//! - `containerd`: containerd SIGKILLed; serve starts it again (the embedded runtime). No pod
//!   lost, no running container restarted, every status right within 15 s of its return.
//! - `containerd-external`: the same containerd given to serve with `--runtime-endpoint`, then
//!   SIGKILLed: serve waits for it, its Node not Ready and every pod as it was through 10 s
//!   down; once containerd is started again (by the benchmark, as by a service manager), the
//!   same as the embedded case.
//! - `disk-full`: the root directory's filesystem (a tmpfs `scripts/chaos` mounts) filled up.
//!   The store's writes fail visibly (the API's answer, `/healthz`, a log line), the pods run on,
//!   and once space returns the store takes writes again, `/healthz` is OK, the Node has one
//!   `FailedStoreCommit` Warning, and a restarted serve finds every object it had acknowledged,
//!   that event included.
//! - `cni`: the pod network's plugin failing for new sandboxes: their pods get
//!   `FailedCreatePodSandBox` events, retried; the running pods are untouched; once the
//!   network works again the new pods run.
//! - `clock` (only with `--step-clock`: it steps the machine's clock, which every process on
//!   it sees, and steps it back): the wall clock stepped an hour forward. Running pods are
//!   untouched, a crash-looping container keeps a back-off, a container started after the step
//!   is probed on its schedule, a deadline that has not passed is kept.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use crate::child;
use crate::pod::IMAGE;
use crate::runtime;
use crate::serve::{Daemon, Launch, str_at};
use podwright_containerd::EmbeddedRuntime;
use podwright_runtime::RuntimeService;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The running pods' label, to list them.
const LABEL: &str = "podwright-bench=chaos";
/// How soon after containerd's return every status must be right again.
const RECOVERY: Duration = Duration::from_secs(15);
/// How long after containerd's return the pods must still be as they were: the node's relist
/// (every 5 s) has looked at the new containerd several times.
const RELISTS: Duration = Duration::from_secs(20);
/// How long containerd stays down when serve was given it and must wait for it.
const OUTAGE: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(250);
/// The clock case's step: an hour.
const STEP_SECS: i64 = 3600;
/// Written under the root before the clock is stepped, with the step in seconds, removed once
/// it is stepped back: `scripts/chaos` steps it back when the benchmark could not.
pub const CLOCK_MARK: &str = "chaos-clock-step";
/// The file that fills the root's filesystem in the disk-full case.
const FILLER: &str = "chaos-filler";

/// Set by SIGINT or SIGTERM: the case at hand gives up, undoes its fault, and the pods go.
static STOP: AtomicBool = AtomicBool::new(false);

#[derive(clap::Args)]
pub struct ChaosArgs {
    /// Pods running through every case.
    #[arg(long, default_value_t = 50)]
    pub pods: usize,
    /// Give up when pods are not Running this many seconds after their creation, or not
    /// removed this long after their deletion.
    #[arg(long, default_value_t = 150)]
    pub limit: u64,
    /// The cases to run (containerd, containerd-external, disk-full, cni, clock); all by default.
    #[arg(long, value_delimiter = ',')]
    pub cases: Vec<String>,
    /// Run the clock case: steps the machine's clock an hour forward for about a minute, then
    /// back. Every process on the machine sees it (builds, other tests, a control plane).
    #[arg(long)]
    pub step_clock: bool,
    /// The daemon's root, a small filesystem of its own for the disk-full case: pod
    /// directories, its store, and the embedded containerd the benchmark starts (or reuses).
    #[arg(long, default_value = "/var/lib/podwright-chaos")]
    pub root_dir: PathBuf,
    /// serve's log, appended; by default `podwright-chaos-serve.log` in the temporary directory.
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// The podwright binary; by default the one next to this benchmark's.
    #[arg(long)]
    pub podwright: Option<PathBuf>,
}

const CASES: [&str; 5] = ["containerd", "containerd-external", "disk-full", "cni", "clock"];

/// A case run: its name, and what it saw or why it failed.
type Outcome = (String, Result<String, String>);

pub struct ChaosReport {
    pods: usize,
    results: Vec<Outcome>,
    skipped: Vec<String>,
    log: PathBuf,
}

pub async fn run(args: &ChaosArgs) -> Result<ChaosReport, String> {
    for kind in [tokio::signal::unix::SignalKind::interrupt(), tokio::signal::unix::SignalKind::terminate()] {
        let mut signal = tokio::signal::unix::signal(kind).map_err(|e| format!("cannot catch signals: {e}"))?;
        tokio::spawn(async move {
            signal.recv().await;
            eprintln!("podwright-bench: undoing the fault at hand and stopping");
            STOP.store(true, Ordering::Relaxed);
        });
    }
    if let Some(unknown) = args.cases.iter().find(|c| !CASES.contains(&c.as_str())) {
        return Err(format!("no case {unknown}: the cases are {}", CASES.join(", ")));
    }
    let wanted = |case: &str| args.cases.is_empty() || args.cases.iter().any(|c| c == case);
    let mut cases: Vec<&str> = CASES.into_iter().filter(|c| wanted(c)).collect();
    let mut skipped = vec![];
    if !args.step_clock && cases.contains(&"clock") {
        cases.retain(|c| *c != "clock");
        skipped.push("clock (steps the machine's clock: run with --step-clock)".to_string());
    }
    let podwright = child::podwright_binary(args.podwright.as_ref())?;
    let root = args.root_dir.clone();
    let log = args.log.clone().unwrap_or_else(|| std::env::temp_dir().join("podwright-chaos-serve.log"));
    std::fs::write(&log, "").map_err(|e| format!("cannot write {}: {e}", log.display()))?;
    // Started here, so that serve finds it running, and kept running by serve.
    runtime::endpoint(None, &root).await?;
    let chaos = Chaos {
        pods: args.pods,
        limit: Duration::from_secs(args.limit),
        podwright,
        root,
        log: log.clone(),
        handle: tokio::runtime::Handle::current(),
    };
    let cases: Vec<String> = cases.into_iter().map(str::to_string).collect();
    tokio::task::spawn_blocking(move || {
        let mut daemon = chaos.start()?;
        let results = chaos.run(&mut daemon, &cases);
        // Whatever happened, no pod of the benchmark is left running.
        let cleared = daemon.clear("podwright-bench", chaos.limit);
        let stopped = daemon.stop();
        let report = ChaosReport { pods: chaos.pods, results: results?, skipped, log };
        // The cases' results are worth seeing even when the clean-up after them failed.
        if let Err(e) = cleared.and(stopped) {
            report.print();
            return Err(e);
        }
        Ok(report)
    })
    .await
    .map_err(|e| format!("the chaos thread panicked: {e}"))?
}

struct Chaos {
    pods: usize,
    limit: Duration,
    podwright: PathBuf,
    root: PathBuf,
    log: PathBuf,
    handle: tokio::runtime::Handle,
}

/// What a running pod was when a case began: its UID and its containers' IDs and restarts.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    uid: String,
    containers: Vec<(String, String, i64)>,
}

impl Seen {
    fn of(pod: &Value) -> Seen {
        let containers = pod
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| (str_at(c, "/name"), str_at(c, "/containerID"), c["restartCount"].as_i64().unwrap_or(0)))
            .collect();
        Seen { uid: str_at(pod, "/metadata/uid"), containers }
    }
}

/// Whether the pod is Running with its Ready condition true.
fn ready(pod: &Value) -> bool {
    let conditions = pod.pointer("/status/conditions").and_then(Value::as_array);
    str_at(pod, "/status/phase") == "Running"
        && conditions.into_iter().flatten().any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Why `now` (the pods listed) differs from `before`: a pod lost, replaced, not Running and
/// ready, or a container of it restarted or replaced. None when every pod is as it was.
fn differences(before: &BTreeMap<String, Seen>, now: &[Value]) -> Option<String> {
    let now: BTreeMap<String, &Value> = now.iter().map(|p| (str_at(p, "/metadata/name"), p)).collect();
    let mut why = vec![];
    for (name, seen) in before {
        let Some(pod) = now.get(name) else {
            why.push(format!("{name} lost"));
            continue;
        };
        let current = Seen::of(pod);
        if current.uid != seen.uid {
            why.push(format!("{name} replaced (uid {})", current.uid));
        } else if !ready(pod) {
            why.push(format!("{name} not Running and ready (phase {})", str_at(pod, "/status/phase")));
        } else if current.containers != seen.containers {
            why.push(format!("{name}'s containers changed: {:?} -> {:?}", seen.containers, current.containers));
        }
    }
    match why.len() {
        0 => None,
        n if n > 3 => Some(format!("{}; and {} more", why[..3].join("; "), n - 3)),
        _ => Some(why.join("; ")),
    }
}

impl Chaos {
    fn start(&self) -> Result<Daemon, String> {
        Daemon::launch(&self.podwright, &self.root, &self.launch(false))
    }

    /// No endpoint: serve keeps its embedded containerd running, as a node would run it.
    fn launch(&self, keep_store: bool) -> Launch<'_> {
        Launch { keep_store, log: Some(&self.log), ..Launch::default() }
    }

    fn run(&self, daemon: &mut Daemon, cases: &[String]) -> Result<Vec<Outcome>, String> {
        let t0 = Instant::now();
        let pods = (0..self.pods)
            .map(|i| (format!("chaos-{i:03}"), running_pod(&format!("chaos-{i:03}")).to_string()))
            .collect();
        daemon.create_all(&self.handle, pods)?;
        self.wait(daemon, LABEL, &format!("{} pods Running and ready", self.pods), |pods| {
            pods.len() == self.pods && pods.iter().all(ready)
        })?;
        eprintln!("chaos: {} pods Running and ready in {:.0} s", self.pods, t0.elapsed().as_secs_f64());
        let mut results = vec![];
        for case in cases {
            if STOP.load(Ordering::Relaxed) {
                return Err("interrupted".into());
            }
            let before = self.seen(daemon)?;
            let t = Instant::now();
            let result = match case.as_str() {
                "containerd" => self.containerd(daemon, &before),
                "containerd-external" => self.containerd_external(daemon, &before),
                "disk-full" => self.disk_full(daemon, &before),
                "cni" => self.cni(daemon, &before),
                _ => self.clock(daemon, &before),
            };
            eprintln!("chaos: {case} done in {:.0} s", t.elapsed().as_secs_f64());
            results.push((case.clone(), result));
        }
        Ok(results)
    }

    /// The running pods as they are now.
    fn seen(&self, daemon: &Daemon) -> Result<BTreeMap<String, Seen>, String> {
        Ok(daemon.pods(LABEL)?.iter().map(|p| (str_at(p, "/metadata/name"), Seen::of(p))).collect())
    }

    /// containerd SIGKILLed: serve starts it again; every pod must be as it was within
    /// [`RECOVERY`] of its return.
    fn containerd(&self, daemon: &Daemon, before: &BTreeMap<String, Seen>) -> Result<String, String> {
        let embedded = EmbeddedRuntime::new(&self.root);
        let pid = kill_containerd(&self.root)?;
        let killed = Instant::now();
        // Back once it answers CRI again, under a new pid.
        let back = loop {
            let status = self.handle.block_on(embedded.status()).map_err(|e| e.to_string())?;
            if status.running && status.pid.is_some_and(|p| p as i32 != pid) {
                break Instant::now();
            }
            self.give_up_after(killed, "containerd started again by serve")?;
            std::thread::sleep(Duration::from_millis(50));
        };
        let (last, new_pod) = self.after_return(daemon, before, back)?;
        Ok(format!(
            "containerd back {:.1} s after the kill, every status right {:.1} s after its return and still {} s after; a new pod Running {:.1} s after its creation",
            back.duration_since(killed).as_secs_f64(),
            last.as_secs_f64(),
            RELISTS.as_secs(),
            new_pod.as_secs_f64()
        ))
    }

    /// containerd SIGKILLed under a serve given it with `--runtime-endpoint`, which is not
    /// serve's to start: serve waits for it, its Node not Ready meanwhile and every pod as it
    /// was; once containerd is started again (here, as its service manager would), every pod is
    /// as it was within [`RECOVERY`] and the Node Ready. serve is then restarted on its embedded
    /// containerd again, for the cases after this one.
    fn containerd_external(&self, daemon: &mut Daemon, before: &BTreeMap<String, Seen>) -> Result<String, String> {
        let endpoint = EmbeddedRuntime::new(&self.root).endpoint();
        daemon.restart(&self.podwright, &self.root, &Launch { endpoint: Some(&endpoint), ..self.launch(true) })?;
        let result = self.waited_for(daemon, before);
        let restored = self
            .handle
            .block_on(runtime::endpoint(None, &self.root))
            .and_then(|_| daemon.restart(&self.podwright, &self.root, &self.launch(true)))
            .and_then(|()| self.settle(daemon, before, Instant::now(), RECOVERY))
            .map_err(|e| format!("serve on its embedded containerd again: {e}"));
        result.and_then(|how| restored.map(|_| how))
    }

    fn waited_for(&self, daemon: &Daemon, before: &BTreeMap<String, Seen>) -> Result<String, String> {
        self.settle(daemon, before, Instant::now(), RECOVERY).map_err(|e| format!("serve on the endpoint: {e}"))?;
        kill_containerd(&self.root)?;
        let killed = Instant::now();
        let down = self
            .poll(RECOVERY, || Ok(node_ready(daemon)?.filter(|(ready, _)| !ready).map(|(_, message)| message)))
            .map_err(|e| format!("the Node stayed Ready with its runtime down: {e}"))?;
        let not_ready_after = killed.elapsed();
        std::thread::sleep((killed + OUTAGE).saturating_duration_since(Instant::now()));
        if let Some(why) = differences(before, &daemon.pods(LABEL)?) {
            return Err(format!("{OUTAGE:?} into containerd's outage: {why}"));
        }
        self.handle.block_on(runtime::endpoint(None, &self.root))?;
        let back = Instant::now();
        let (last, new_pod) = self.after_return(daemon, before, back)?;
        if node_ready(daemon)?.is_none_or(|(ready, _)| !ready) {
            return Err("the Node not Ready again after containerd's return".into());
        }
        Ok(format!(
            "the Node not Ready {:.1} s after the kill ({down:?}), every pod as it was {} s into the outage; every status right {:.1} s after containerd's return and still {} s after; a new pod Running {:.1} s after its creation",
            not_ready_after.as_secs_f64(),
            OUTAGE.as_secs(),
            last.as_secs_f64(),
            RELISTS.as_secs(),
            new_pod.as_secs_f64()
        ))
    }

    /// After containerd's return at `back`: every pod as it was within [`RECOVERY`] and still
    /// after [`RELISTS`], a new pod runs, and containerd runs every container it ran before.
    /// How long the pods took to be right, and the new pod to run.
    fn after_return(
        &self,
        daemon: &Daemon,
        before: &BTreeMap<String, Seen>,
        back: Instant,
    ) -> Result<(Duration, Duration), String> {
        let last = self.settle(daemon, before, back, RECOVERY)?;
        // And still so after the node's relists (every 5 s) have seen the new containerd.
        std::thread::sleep((back + RELISTS).saturating_duration_since(Instant::now()));
        if let Some(why) = differences(before, &daemon.pods(LABEL)?) {
            return Err(format!("{:?} after containerd's return: {why}", RELISTS));
        }
        // The node drives the new containerd: a pod created now runs.
        let created = Instant::now();
        daemon.create_all(&self.handle, vec![("chaos-after".into(), running_pod("chaos-after").to_string())])?;
        self.poll(Duration::from_secs(30), || {
            let pod = daemon.request("GET", "/api/v1/namespaces/default/pods/chaos-after", None)?.json()?;
            Ok(ready(&pod).then_some(()))
        })
        .map_err(|_| "a pod created after containerd's return was not Running within 30 s".to_string())?;
        let new_pod = created.elapsed();
        let removed = daemon.scrape()?;
        daemon.delete("chaos-after")?;
        daemon.wait_removed(&removed, 1, self.limit)?;
        let cri = self.handle.block_on(runtime::connect(&EmbeddedRuntime::new(&self.root).endpoint()))?;
        let running = self
            .handle
            .block_on(cri.list_containers(&BTreeMap::new()))
            .map_err(|e| format!("listing containers: {e}"))?
            .into_iter()
            .filter(|c| c.state == podwright_runtime::cri_api::ContainerState::ContainerRunning as i32)
            .count();
        if running < before.len() {
            return Err(format!("{running} containers running in containerd after its restart, not {}", before.len()));
        }
        Ok((last, new_pod))
    }

    /// Waits up to `within` after `from` until every pod is as it was; how long it took.
    fn settle(
        &self,
        daemon: &Daemon,
        before: &BTreeMap<String, Seen>,
        from: Instant,
        within: Duration,
    ) -> Result<Duration, String> {
        loop {
            let why = match daemon.pods(LABEL) {
                Ok(pods) => match differences(before, &pods) {
                    None => return Ok(from.elapsed()),
                    Some(why) => why,
                },
                Err(e) => e,
            };
            if from.elapsed() > within || STOP.load(Ordering::Relaxed) {
                return Err(format!("not right {within:?} after: {why}"));
            }
            std::thread::sleep(POLL);
        }
    }

    /// The root's filesystem full: writes fail visibly, pods run on, and everything resumes
    /// once the space returns, across a restart of serve too.
    fn disk_full(&self, daemon: &mut Daemon, before: &BTreeMap<String, Seen>) -> Result<String, String> {
        if !own_filesystem(&self.root)? {
            return Err(format!(
                "{} is not a filesystem of its own to fill (scripts/chaos mounts a tmpfs there)",
                self.root.display()
            ));
        }
        // A pod whose container ends while the disk is full: its status must reach the store
        // once the space returns.
        let mut ending = running_pod("chaos-full-exit");
        ending["metadata"]["labels"] = json!({"podwright-bench": "chaos-disk"});
        ending["spec"]["restartPolicy"] = json!("Never");
        ending["spec"]["containers"][0]["command"] = json!(["sleep", "6"]);
        daemon.create_all(&self.handle, vec![("chaos-full-exit".into(), ending.to_string())])?;
        self.wait(daemon, "podwright-bench=chaos-disk", "chaos-full-exit Running", |p| p.iter().any(ready))?;
        let filler = Filler::fill(&self.root.join(FILLER))?;
        let t0 = Instant::now();
        // Written until the store refuses one (redb may have room left in its file).
        let (mut acknowledged, mut refused) = (vec![], None);
        for i in 0..64 {
            let name = format!("chaos-full-{i:02}");
            let r = daemon.request("POST", "/api/v1/namespaces/default/configmaps", Some(&config_map(&name)))?;
            match r.status {
                201 => acknowledged.push(name),
                s if s >= 500 => {
                    refused = Some((name, s, String::from_utf8_lossy(&r.body).into_owned()));
                    break;
                }
                s => return Err(format!("creating {name} on a full disk: HTTP {s}")),
            }
        }
        let Some((refused, status, body)) = refused else {
            return Err(format!("64 ConfigMaps were acknowledged on a full filesystem ({})", filler.bytes));
        };
        let health = self.poll(Duration::from_secs(10), || {
            let r = daemon.request("GET", "/healthz", None)?;
            Ok((r.status != 200).then(|| format!("HTTP {}: {}", r.status, String::from_utf8_lossy(&r.body))))
        });
        let Ok(health) = health else {
            return Err("/healthz still answers OK with the store failing".into());
        };
        let logged = std::fs::read_to_string(&self.log).unwrap_or_default();
        let Some(line) = logged.lines().find(|l| l.contains("store")) else {
            return Err(format!("nothing about the store in serve's log ({})", self.log.display()));
        };
        let line = line.to_string();
        if let Some(why) = differences(before, &daemon.pods(LABEL)?) {
            return Err(format!("with the disk full: {why}"));
        }
        // chaos-full-exit's container ends meanwhile.
        std::thread::sleep(Duration::from_secs(10).saturating_sub(t0.elapsed()));
        drop(filler);
        let freed = Instant::now();
        let healthy = self.poll(Duration::from_secs(30), || {
            Ok(daemon.request("GET", "/healthz", None).is_ok_and(|r| r.status == 200).then_some(()))
        });
        if healthy.is_err() {
            return Err("/healthz not OK again within 30 s of the space returning".into());
        }
        let healthy = freed.elapsed();
        let ended = self.poll(RECOVERY, || {
            let pod = daemon.request("GET", "/api/v1/namespaces/default/pods/chaos-full-exit", None)?.json()?;
            Ok((str_at(&pod, "/status/phase") == "Succeeded").then(|| freed.elapsed()))
        });
        let Ok(ended) = ended else {
            return Err(format!(
                "chaos-full-exit, whose container ended with the disk full, not Succeeded {RECOVERY:?} after the space returned"
            ));
        };
        let r = daemon.request("POST", "/api/v1/namespaces/default/configmaps", Some(&config_map(&refused)))?;
        if r.status != 201 {
            return Err(format!("creating {refused} once space returned: HTTP {}", r.status));
        }
        acknowledged.push(refused.clone());
        let reported = self.poll(RECOVERY, || Ok(store_outages(daemon)?.pop()));
        let Ok(reported) = reported else {
            return Err(format!("no FailedStoreCommit Warning on the Node {RECOVERY:?} after the space returned"));
        };
        // Nothing lost, nothing half-written: a new serve reads the same objects from the store.
        daemon.restart(&self.podwright, &self.root, &self.launch(true))?;
        let outages = store_outages(daemon)?;
        if outages != [reported.clone()] {
            return Err(format!("after a restart the FailedStoreCommit events are {outages:?}, not once {reported:?}"));
        }
        let names: Vec<String> = daemon.request("GET", "/api/v1/namespaces/default/configmaps", None)?.json()?["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| str_at(c, "/metadata/name"))
            .filter(|n| n.starts_with("chaos-full-"))
            .collect();
        acknowledged.sort();
        if names != acknowledged {
            return Err(format!("after a restart the store holds {names:?}, not the acknowledged {acknowledged:?}"));
        }
        self.settle(daemon, before, Instant::now(), self.limit)?;
        for name in &acknowledged {
            daemon.request("DELETE", &format!("/api/v1/namespaces/default/configmaps/{name}"), None)?;
        }
        let removed = daemon.scrape()?;
        daemon.delete("chaos-full-exit")?;
        daemon.wait_removed(&removed, 1, self.limit)?;
        let refusal: Value = serde_json::from_str(&body).unwrap_or_default();
        let failed_check = health.lines().find(|l| l.starts_with("[-]")).unwrap_or_default().to_string();
        let logged = line.split_once(" ERROR ").map_or(line.as_str(), |(_, l)| l);
        Ok(format!(
            "{} ConfigMaps acknowledged, then HTTP {status} \"{}\"; /healthz \"{}\"; logged \"{}\"; /healthz OK {:.1} s after the space returned, a status from meanwhile in {:.1} s; the Node's Warning FailedStoreCommit \"{reported}\"; a restarted serve found every acknowledged object and that event once",
            acknowledged.len() - 1,
            str_at(&refusal, "/message"),
            failed_check,
            logged.split(" e=").next().unwrap_or_default(),
            healthy.as_secs_f64(),
            ended.as_secs_f64()
        ))
    }

    /// New sandboxes' network failing: their pods get `FailedCreatePodSandBox`, retried, the
    /// running pods are untouched, and the new pods run once the network works again.
    fn cni(&self, daemon: &Daemon, before: &BTreeMap<String, Seen>) -> Result<String, String> {
        const NEW: &str = "podwright-bench=chaos-cni";
        let broken = BrokenNetwork::break_it(&self.root)?;
        // containerd reads the network configuration again when it changes.
        std::thread::sleep(Duration::from_secs(2));
        let names: Vec<String> = (0..3).map(|i| format!("chaos-cni-{i}")).collect();
        let pods = names
            .iter()
            .map(|n| {
                let mut pod = running_pod(n);
                pod["metadata"]["labels"] = json!({"podwright-bench": "chaos-cni"});
                (n.clone(), pod.to_string())
            })
            .collect();
        daemon.create_all(&self.handle, pods)?;
        let t0 = Instant::now();
        // Each pod's failures, counted, until each has been retried.
        let failed = self.poll(Duration::from_secs(90), || {
            let events = daemon.request("GET", "/api/v1/namespaces/default/events", None)?.json()?;
            let mut counts: BTreeMap<String, i64> = names.iter().map(|n| (n.clone(), 0)).collect();
            for e in events["items"].as_array().into_iter().flatten() {
                let pod = str_at(e, "/involvedObject/name");
                if str_at(e, "/reason") == "FailedCreatePodSandBox" && str_at(e, "/type") == "Warning" {
                    counts.entry(pod).and_modify(|n| *n += e["count"].as_i64().unwrap_or(1));
                }
            }
            Ok(counts.values().all(|n| *n >= 2).then_some(counts))
        });
        let Ok(failed) = failed else {
            return Err("the new pods did not each get FailedCreatePodSandBox twice within 90 s".into());
        };
        let retried = t0.elapsed();
        if let Some(p) = daemon.pods(NEW)?.iter().find(|p| str_at(p, "/status/phase") != "Pending") {
            return Err(format!("{} is {} without a network", str_at(p, "/metadata/name"), str_at(p, "/status/phase")));
        }
        if let Some(why) = differences(before, &daemon.pods(LABEL)?) {
            return Err(format!("with the network failing: {why}"));
        }
        drop(broken);
        let fixed = Instant::now();
        self.wait(daemon, NEW, "the new pods Running once the network works", |pods| {
            pods.len() == names.len() && pods.iter().all(ready)
        })?;
        let running = fixed.elapsed();
        let removed = daemon.scrape()?;
        names.iter().try_for_each(|n| daemon.delete(n))?;
        daemon.wait_removed(&removed, names.len(), self.limit)?;
        let counts: Vec<String> = failed.iter().map(|(n, c)| format!("{n} {c}")).collect();
        Ok(format!(
            "FailedCreatePodSandBox at least twice each within {:.0} s ({}); the new pods Running {:.1} s after the network returned",
            retried.as_secs_f64(),
            counts.join(", "),
            running.as_secs_f64()
        ))
    }

    /// The machine's clock an hour forward: the pods run on, a crash loop keeps its back-off,
    /// a container started after the step is probed, a deadline not reached is kept.
    fn clock(&self, daemon: &Daemon, before: &BTreeMap<String, Seen>) -> Result<String, String> {
        const EXTRA: &str = "podwright-bench=chaos-clock";
        let extra = |name: &str, spec: Value| {
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "labels": {"podwright-bench": "chaos-clock"}},
                "spec": spec,
            })
        };
        let crash = extra(
            "chaos-crash",
            json!({"terminationGracePeriodSeconds": 0,
                   "containers": [{"name": "crash", "image": IMAGE, "command": ["sh", "-c", "sleep 1; exit 1"]}]}),
        );
        let deadline = extra(
            "chaos-deadline",
            json!({"terminationGracePeriodSeconds": 0, "activeDeadlineSeconds": 7200,
                   "containers": [{"name": "app", "image": IMAGE, "command": ["sleep", "3600"]}]}),
        );
        daemon.create_all(
            &self.handle,
            vec![("chaos-crash".into(), crash.to_string()), ("chaos-deadline".into(), deadline.to_string())],
        )?;
        let restarts = |daemon: &Daemon| -> Result<i64, String> {
            let pod = daemon.request("GET", "/api/v1/namespaces/default/pods/chaos-crash", None)?.json()?;
            Ok(pod.pointer("/status/containerStatuses/0/restartCount").and_then(Value::as_i64).unwrap_or(0))
        };
        // In back-off: restarted twice (10 s, then 20 s).
        self.poll(self.limit, || Ok((restarts(daemon)? >= 2).then_some(())))
            .map_err(|_| "chaos-crash did not restart twice".to_string())?;
        let stepped = ClockStep::forward(&self.root, STEP_SECS)?;
        let t0 = Instant::now();
        let at_step = restarts(daemon)?;
        // A container started after the step, with a readiness probe every 2 s.
        let probed = extra(
            "chaos-probed",
            json!({"terminationGracePeriodSeconds": 0,
                   "containers": [{"name": "app", "image": IMAGE, "command": ["sleep", "3600"],
                                   "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 2}}]}),
        );
        daemon.create_all(&self.handle, vec![("chaos-probed".into(), probed.to_string())])?;
        let ready_after = self.poll(Duration::from_secs(30), || {
            let pod = daemon.request("GET", "/api/v1/namespaces/default/pods/chaos-probed", None)?.json()?;
            Ok(ready(&pod).then(|| t0.elapsed()))
        });
        // Watched for 45 s from the step: 10 s, 20 s ... from a back-off reset at the most.
        while t0.elapsed() < Duration::from_secs(45) && !STOP.load(Ordering::Relaxed) {
            std::thread::sleep(POLL);
        }
        let during = restarts(daemon)? - at_step;
        let pods = daemon.pods(EXTRA)?;
        let deadline_phase = pods
            .iter()
            .find(|p| str_at(p, "/metadata/name") == "chaos-deadline")
            .map(|p| str_at(p, "/status/phase"))
            .unwrap_or_default();
        let untouched = differences(before, &daemon.pods(LABEL)?);
        drop(stepped);
        let removed = daemon.scrape()?;
        for name in ["chaos-crash", "chaos-deadline", "chaos-probed"] {
            daemon.delete(name)?;
        }
        daemon.wait_removed(&removed, 3, self.limit)?;
        if let Some(why) = untouched {
            return Err(format!("after the step: {why}"));
        }
        if during > 3 {
            return Err(format!("chaos-crash restarted {during} times in the 45 s after the step: no back-off"));
        }
        let Ok(ready_after) = ready_after else {
            return Err("a pod created after the step was not ready within 30 s (its probe not run?)".into());
        };
        if deadline_phase != "Running" {
            return Err(format!("the pod with a 2 h activeDeadlineSeconds is {deadline_phase} an hour on"));
        }
        Ok(format!(
            "chaos-crash restarted {during} times in the 45 s after the step; a probed pod created after it ready in {:.1} s; a 2 h deadline kept",
            ready_after.as_secs_f64()
        ))
    }

    /// Polls `check` until it gives a value, for up to `within`.
    fn poll<T>(&self, within: Duration, mut check: impl FnMut() -> Result<Option<T>, String>) -> Result<T, String> {
        let t0 = Instant::now();
        loop {
            if let Some(v) = check()? {
                return Ok(v);
            }
            self.give_up_after(t0, "the check")?;
            if t0.elapsed() > within {
                return Err(format!("not within {within:?}"));
            }
            std::thread::sleep(POLL);
        }
    }

    /// An error once `limit` has passed since `t0`, or once stopped.
    fn give_up_after(&self, t0: Instant, what: &str) -> Result<(), String> {
        if STOP.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        if t0.elapsed() > self.limit {
            return Err(format!("{what}: not within {:?}", self.limit));
        }
        Ok(())
    }

    /// Waits until the pods with `selector`, as listed, pass `done`.
    fn wait(&self, daemon: &Daemon, selector: &str, what: &str, done: impl Fn(&[Value]) -> bool) -> Result<(), String> {
        let t0 = Instant::now();
        while !done(&daemon.pods(selector)?) {
            self.give_up_after(t0, what)?;
            std::thread::sleep(POLL);
        }
        Ok(())
    }
}

/// SIGKILLs the embedded containerd under `root`; its pid.
fn kill_containerd(root: &Path) -> Result<i32, String> {
    let pid_file = root.join("containerd/containerd.pid");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .map_err(|e| format!("cannot read {}: {e}", pid_file.display()))?
        .trim()
        .parse()
        .map_err(|e| format!("{}: {e}", pid_file.display()))?;
    // SAFETY: kill has no memory effects.
    if unsafe { libc::kill(pid, libc::SIGKILL) } != 0 {
        return Err(format!("cannot kill containerd ({pid}): {}", std::io::Error::last_os_error()));
    }
    Ok(pid)
}

/// The Node's Ready condition: whether it holds, and its message; `None` without one.
fn node_ready(daemon: &Daemon) -> Result<Option<(bool, String)>, String> {
    let nodes = daemon.request("GET", "/api/v1/nodes", None)?.json()?;
    let conditions = nodes["items"].get(0).and_then(|n| n["status"]["conditions"].as_array()).cloned();
    Ok(conditions
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .map(|c| (c["status"] == "True", str_at(&c, "/message"))))
}

/// The messages of the Warning `FailedStoreCommit` events on the Node: the store's outages,
/// recorded once it commits again.
fn store_outages(daemon: &Daemon) -> Result<Vec<String>, String> {
    let events = daemon.request("GET", "/api/v1/events", None)?.json()?;
    Ok(events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            str_at(e, "/reason") == "FailedStoreCommit"
                && str_at(e, "/type") == "Warning"
                && str_at(e, "/involvedObject/kind") == "Node"
        })
        .map(|e| str_at(e, "/message"))
        .collect())
}

fn running_pod(name: &str) -> Value {
    let (key, value) = LABEL.split_once('=').unwrap_or_default();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {key: value}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "app", "image": IMAGE, "command": ["sleep", "3600"]}],
        },
    })
}

/// A ConfigMap of 64 KiB, so that the store's file must grow.
fn config_map(name: &str) -> String {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"filler": "x".repeat(64 << 10)},
    })
    .to_string()
}

/// Whether `dir` is a mount point: its filesystem is not its parent's.
fn own_filesystem(dir: &Path) -> Result<bool, String> {
    use std::os::unix::fs::MetadataExt;
    let of = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).map_err(|e| format!("{}: {e}", p.display()));
    Ok(of(dir)? != of(&dir.join(".."))?)
}

/// A file filling its filesystem, removed when dropped.
struct Filler {
    path: PathBuf,
    bytes: u64,
}

impl Filler {
    fn fill(path: &Path) -> Result<Filler, String> {
        let mut file = std::fs::File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let mut filler = Filler { path: path.to_path_buf(), bytes: 0 };
        // Big blocks, then small ones for what is left.
        for size in [1 << 20, 4 << 10, 1] {
            let block = vec![0xa5u8; size];
            while file.write_all(&block).is_ok() {
                filler.bytes += size as u64;
            }
        }
        let _ = file.sync_all();
        Ok(filler)
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The pod network's configuration with a plugin that does not exist, put back when dropped.
struct BrokenNetwork {
    path: PathBuf,
    good: String,
}

impl BrokenNetwork {
    fn break_it(root: &Path) -> Result<BrokenNetwork, String> {
        let path = root.join("cni/net.d/10-podwright.conflist");
        let good = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut broken: Value = serde_json::from_str(&good).map_err(|e| format!("{}: {e}", path.display()))?;
        broken["plugins"][0]["type"] = json!("podwright-chaos-no-such-plugin");
        replace(&path, &format!("{broken:#}\n"))?;
        Ok(BrokenNetwork { path, good })
    }
}

impl Drop for BrokenNetwork {
    fn drop(&mut self) {
        if let Err(e) = replace(&self.path, &self.good) {
            eprintln!("podwright-bench: could not put the pod network's configuration back: {e}");
        }
    }
}

/// Writes `text` to `path` whole (a temporary file renamed over it).
fn replace(path: &Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension("chaos-tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot rename {}: {e}", tmp.display()))
}

/// The machine's clock stepped by some seconds, stepped back when dropped; the step is written
/// under the root meanwhile, for `scripts/chaos` to undo if this process is killed.
struct ClockStep {
    mark: PathBuf,
    secs: i64,
}

impl ClockStep {
    fn forward(root: &Path, secs: i64) -> Result<ClockStep, String> {
        let mark = root.join(CLOCK_MARK);
        std::fs::write(&mark, secs.to_string()).map_err(|e| format!("cannot write {}: {e}", mark.display()))?;
        let step = ClockStep { mark, secs };
        step_clock(secs)?;
        Ok(step)
    }
}

impl Drop for ClockStep {
    fn drop(&mut self) {
        match step_clock(-self.secs) {
            Ok(()) => {
                let _ = std::fs::remove_file(&self.mark);
            }
            Err(e) => eprintln!("podwright-bench: could not step the clock back: {e}"),
        }
    }
}

/// Steps CLOCK_REALTIME by `secs` from where it is now.
fn step_clock(secs: i64) -> Result<(), String> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime and clock_settime read and write the timespec given, nothing else.
    unsafe {
        if libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) != 0 {
            return Err(format!("clock_gettime: {}", std::io::Error::last_os_error()));
        }
        now.tv_sec += secs;
        if libc::clock_settime(libc::CLOCK_REALTIME, &now) != 0 {
            return Err(format!("clock_settime: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

impl ChaosReport {
    pub fn print(&self) {
        println!(
            "chaos: `podwright serve` on its embedded containerd, {} pods running, through faults (serve's log: {})",
            self.pods,
            self.log.display()
        );
        for (case, result) in &self.results {
            match result {
                Ok(how) => println!("  {case}: pass: {how}"),
                Err(why) => println!("  {case}: FAIL: {why}"),
            }
        }
        for skipped in &self.skipped {
            println!("  skipped: {skipped}");
        }
        println!("chaos_cases: {}", self.results.len());
        println!("chaos_failures: {}", self.results.iter().filter(|(_, r)| r.is_err()).count());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: &str, id: &str, restarts: i64, phase: &str) -> Value {
        json!({
            "metadata": {"name": name, "uid": uid},
            "status": {
                "phase": phase,
                "conditions": [{"type": "Ready", "status": if phase == "Running" { "True" } else { "False" }}],
                "containerStatuses": [{"name": "app", "containerID": id, "restartCount": restarts}],
            },
        })
    }

    #[test]
    fn names_each_pod_lost_replaced_or_restarted() {
        let then = [pod("a", "u1", "c1", 0, "Running"), pod("b", "u2", "c2", 0, "Running")];
        let before: BTreeMap<String, Seen> = then.iter().map(|p| (str_at(p, "/metadata/name"), Seen::of(p))).collect();
        assert_eq!(differences(&before, &then), None);
        let why = |now: &[Value]| differences(&before, now).unwrap_or_default();
        assert_eq!(why(&[then[0].clone()]), "b lost");
        assert!(why(&[then[0].clone(), pod("b", "u9", "c2", 0, "Running")]).starts_with("b replaced"));
        assert!(why(&[then[0].clone(), pod("b", "u2", "c3", 1, "Running")]).starts_with("b's containers changed"));
        assert!(why(&[then[0].clone(), pod("b", "u2", "c2", 0, "Pending")]).starts_with("b not Running"));
    }

    #[test]
    fn the_running_pod_loads_and_every_case_has_a_name() {
        let json = running_pod("chaos-001").to_string();
        let pods = podwright_api::load_str("chaos.json", &json).unwrap().pods;
        assert_eq!(pods[0].0.metadata.name.as_deref(), Some("chaos-001"));
        assert_eq!(CASES.len(), 5);
    }
}
