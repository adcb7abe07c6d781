//! The invariants, checked as the lifecycle goes: at every change of the runtime's state (read
//! from the fake's change log, in the order the changes happened) and at every status the agent
//! publishes. The first violation is kept; the lifecycle stops there.

use super::trace::Trace;
use k8s_openapi::api::core::v1::{ContainerStatus, PodStatus};
use podwright_node::PodUpdate;
use podwright_planner::RestartPolicy;
use podwright_runtime::fake::{Change, FakeRuntime};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// Which rule broke (a short name).
    pub invariant: &'static str,
    pub detail: String,
    /// Virtual seconds from the start.
    pub at: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Init(usize),
    Sidecar(usize),
    App,
}

/// The sandbox and container instances the runtime has had, removed ones included.
struct SandboxSeen {
    id: String,
    ip: String,
    ready: bool,
    removed: bool,
}

struct ContainerSeen {
    name: String,
    /// Index into `sandboxes`.
    sandbox: usize,
    started: bool,
    running: bool,
    exit: Option<(i32, String)>,
    removed: bool,
}

impl ContainerSeen {
    fn succeeded(&self) -> bool {
        self.started && matches!(&self.exit, Some((0, reason)) if reason != "OOMKilled")
    }
}

/// What the checker remembers of the last status published.
struct LastStatus {
    incarnation: u32,
    initialized: bool,
    ip: Option<String>,
    /// Container name → (container ID, ready).
    ready: HashMap<String, (String, bool)>,
    /// In a terminal pod, container name → how its terminated state ended (container ID,
    /// exit code): final.
    ended: HashMap<String, (Option<String>, i32)>,
}

/// How a container status's terminated state ended, if it is terminated.
fn ended(cs: &ContainerStatus) -> Option<(Option<String>, i32)> {
    let t = cs.state.as_ref()?.terminated.as_ref()?;
    Some((t.container_id.clone(), t.exit_code))
}

pub struct Checker {
    fake: Arc<FakeRuntime>,
    trace: Trace,
    /// The init containers in spec order (name, sidecar); the rest are app containers.
    inits: Vec<(String, bool)>,
    /// App containers with a liveness or startup probe: a probe's kill restarts them under
    /// OnFailure even when the instance, killed, happened to exit 0 at that moment.
    probed: Vec<String>,
    policy: RestartPolicy,
    /// Changes read from the fake so far.
    read: usize,
    sandboxes: Vec<SandboxSeen>,
    containers: Vec<ContainerSeen>,
    ids: HashMap<String, usize>,
    /// The terminal phase, once published.
    terminal: Option<String>,
    last: Option<LastStatus>,
    restart_counts: HashMap<String, i32>,
    /// Readiness probes run so far per container name, and as they were when the agent last
    /// started: readiness is carried across a restart until a probe says otherwise.
    readiness_probes: HashMap<String, u64>,
    probes_at_start: HashMap<String, u64>,
    pub violation: Option<Violation>,
}

fn condition(st: &PodStatus, kind: &str) -> bool {
    st.conditions.iter().flatten().any(|c| c.type_ == kind && c.status == "True")
}

use podwright_api::container_statuses as statuses;

fn is_running(cs: &ContainerStatus) -> bool {
    cs.state.as_ref().is_some_and(|s| s.running.is_some())
}

/// `name:state(restarts)`, `+R` when ready: one container of a status line.
fn brief(cs: &ContainerStatus) -> String {
    let state = cs.state.as_ref();
    let what = if is_running(cs) {
        "running".to_string()
    } else if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
        format!("exited {}", t.exit_code)
    } else {
        state.and_then(|s| s.waiting.as_ref()?.reason.clone()).unwrap_or_else(|| "waiting".into())
    };
    format!("{}:{what}({}){}", cs.name, cs.restart_count, if cs.ready { "+R" } else { "" })
}

impl Checker {
    pub fn new(fake: Arc<FakeRuntime>, pod: &k8s_openapi::api::core::v1::Pod, trace: Trace) -> Checker {
        let spec = pod.spec.as_ref().expect("a spec");
        let inits = spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| (c.name.clone(), c.restart_policy.as_deref() == Some("Always")))
            .collect();
        let probed = spec
            .containers
            .iter()
            .filter(|c| c.liveness_probe.is_some() || c.startup_probe.is_some())
            .map(|c| c.name.clone())
            .collect();
        Checker {
            fake,
            trace,
            inits,
            probed,
            policy: RestartPolicy::of(pod),
            read: 0,
            sandboxes: vec![],
            containers: vec![],
            ids: HashMap::new(),
            terminal: None,
            last: None,
            restart_counts: HashMap::new(),
            readiness_probes: HashMap::new(),
            probes_at_start: HashMap::new(),
            violation: None,
        }
    }

    fn kind(&self, name: &str) -> Kind {
        match self.inits.iter().position(|(n, _)| n == name) {
            Some(i) if self.inits[i].1 => Kind::Sidecar(i),
            Some(i) => Kind::Init(i),
            None => Kind::App,
        }
    }

    fn violate(&mut self, invariant: &'static str, detail: String) {
        if self.violation.is_none() {
            self.trace.line(|| format!("VIOLATION of {invariant}: {detail}"));
            self.violation = Some(Violation { invariant, detail, at: self.trace.now() });
        }
    }

    /// `name#n` for the trace: the n-th container instance the runtime made.
    fn label(&self, i: usize) -> String {
        format!("{}#{}", self.containers[i].name, i + 1)
    }

    /// How many sandboxes the runtime made, and container instances it started.
    pub fn made(&self) -> (u64, u64) {
        (self.sandboxes.len() as u64, self.containers.iter().filter(|c| c.started).count() as u64)
    }

    /// The pod's ready sandbox, if it has one.
    pub fn ready_sandbox(&self) -> Option<String> {
        self.sandboxes.iter().find(|s| s.ready).map(|s| s.id.clone())
    }

    /// The running instance of container `name`, if there is one.
    pub fn running(&self, name: &str) -> Option<String> {
        let i = self.containers.iter().position(|c| c.running && c.name == name)?;
        self.ids.iter().find(|(_, n)| **n == i).map(|(id, _)| id.clone())
    }

    /// A readiness probe of container `name` ran.
    pub fn readiness_probed(&mut self, name: &str) {
        *self.readiness_probes.entry(name.to_string()).or_default() += 1;
    }

    /// The agent (re)started.
    pub fn agent_started(&mut self) {
        self.probes_at_start.clone_from(&self.readiness_probes);
    }

    /// Reads the changes the runtime has made since the last call, checking each.
    pub fn catch_up(&mut self) {
        let changes = self.fake.changes(self.read);
        self.read += changes.len();
        for (_, change) in changes {
            self.apply(change);
        }
    }

    fn apply(&mut self, change: Change) {
        match change {
            Change::SandboxReady { id, attempt, ip, .. } => {
                let n = self.sandboxes.len() + 1;
                self.trace.line(|| format!("sandbox sb{n} ready (attempt {attempt}, {ip})"));
                if let Some(phase) = self.terminal.clone() {
                    self.violate("terminal", format!("sandbox sb{n} made after the pod's phase was {phase}"));
                }
                if let Some(other) = self.sandboxes.iter().position(|s| s.ready) {
                    self.violate("one-sandbox", format!("sandbox sb{n} made while sb{} was ready", other + 1));
                }
                self.sandboxes.push(SandboxSeen { id, ip, ready: true, removed: false });
            }
            Change::SandboxNotReady { id } => {
                if let Some(i) = self.sandboxes.iter().position(|s| s.id == id) {
                    self.trace.line(|| format!("sandbox sb{} not ready", i + 1));
                    self.sandboxes[i].ready = false;
                }
            }
            Change::SandboxRemoved { id } => {
                if let Some(i) = self.sandboxes.iter().position(|s| s.id == id) {
                    self.trace.line(|| format!("sandbox sb{} removed", i + 1));
                    self.sandboxes[i].removed = true;
                }
            }
            Change::ContainerCreated { id, sandbox_id, name, attempt } => {
                let sandbox = self.sandboxes.iter().position(|s| s.id == sandbox_id).expect("a known sandbox");
                let n = self.containers.len();
                self.containers.push(ContainerSeen {
                    name,
                    sandbox,
                    started: false,
                    running: false,
                    exit: None,
                    removed: false,
                });
                self.ids.insert(id, n);
                self.trace.line(|| format!("created {} in sb{} (attempt {attempt})", self.label(n), sandbox + 1));
            }
            Change::ContainerStarted { id } => {
                let i = self.ids[&id];
                self.trace.line(|| format!("started {}", self.label(i)));
                self.check_start(i);
                let c = &mut self.containers[i];
                (c.started, c.running) = (true, true);
            }
            Change::ContainerExited { id, exit_code, reason } => {
                let i = self.ids[&id];
                self.trace.line(|| format!("exited {} {exit_code} {reason}", self.label(i)));
                let c = &mut self.containers[i];
                c.running = false;
                c.exit = Some((exit_code, reason));
            }
            Change::ContainerRemoved { id } => {
                let i = self.ids[&id];
                self.trace.line(|| format!("removed {}", self.label(i)));
                self.containers[i].removed = true;
            }
        }
    }

    /// The rules for a container instance that has just started.
    fn check_start(&mut self, i: usize) {
        let (name, sandbox) = (self.containers[i].name.clone(), self.containers[i].sandbox);
        let kind = self.kind(&name);
        let sb = sandbox + 1;
        if let Some(phase) = self.terminal.clone() {
            self.violate("terminal", format!("{name} started after the pod's phase was {phase}"));
        }
        if let Some(other) = self.containers.iter().position(|c| c.running && c.name == name) {
            self.violate("one-instance", format!("{} started while {} still ran", self.label(i), self.label(other)));
        }
        if let Some(other) = self.containers.iter().position(|c| c.running && c.sandbox != sandbox) {
            let other_sb = self.containers[other].sandbox + 1;
            self.violate(
                "old-sandbox",
                format!("{} started in sb{sb} while {} still ran in sb{other_sb}", self.label(i), self.label(other)),
            );
        }
        // Everything before it in the init sequence has done its part in this sandbox.
        let before = match kind {
            Kind::Init(k) | Kind::Sidecar(k) => k,
            Kind::App => self.inits.len(),
        };
        let missing = self.inits[..before].iter().find(|(pre, sidecar)| {
            let done = |c: &ContainerSeen| if *sidecar { c.started } else { c.succeeded() };
            !self.containers.iter().any(|c| &c.name == pre && c.sandbox == sandbox && done(c))
        });
        if let Some((pre, sidecar)) = missing.cloned() {
            let what = if sidecar { "started" } else { "succeeded" };
            self.violate("init-order", format!("{name} started in sb{sb} before {pre} had {what} there"));
        }
        if let Kind::Init(_) = kind {
            let regular = |c: &ContainerSeen| matches!(self.kind(&c.name), Kind::Init(_));
            if let Some(other) = self.containers.iter().position(|c| c.running && c.name != name && regular(c)) {
                self.violate(
                    "init-one-at-a-time",
                    format!("{} started while {} ran", self.label(i), self.label(other)),
                );
            }
            if self.containers.iter().any(|c| c.name == name && c.sandbox == sandbox && c.succeeded()) {
                self.violate("init-rerun", format!("{name} ran again in sb{sb}, where it had succeeded"));
            }
        }
        let earlier = |c: &ContainerSeen| c.name == name && c.sandbox == sandbox;
        match (kind, self.policy) {
            (Kind::Init(_) | Kind::App, RestartPolicy::Never)
                if self.containers.iter().any(|c| earlier(c) && c.started) =>
            {
                self.violate("restart-policy", format!("{name} started again in sb{sb} under restartPolicy Never"));
            }
            (Kind::App, RestartPolicy::OnFailure)
                if !self.probed.contains(&name) && self.containers.iter().any(|c| earlier(c) && c.succeeded()) =>
            {
                self.violate(
                    "restart-policy",
                    format!("{name} started again in sb{sb} after exiting 0, under restartPolicy OnFailure"),
                );
            }
            _ => {}
        }
    }

    /// The rules for a status the agent (its `incarnation`-th start) has just published.
    pub fn status(&mut self, update: &PodUpdate, incarnation: u32) {
        self.catch_up();
        let Some(st) = update.status.as_deref() else { return };
        let phase = st.phase.clone().unwrap_or_default();
        let initialized = condition(st, "Initialized");
        self.trace.line(|| {
            let all: Vec<String> = statuses(st).map(brief).collect();
            let finished = if update.finished { " finished" } else { "" };
            format!("status #{incarnation}: {phase} Initialized={initialized}{finished} {}", all.join(" "))
        });
        match self.terminal.clone() {
            Some(t) if t != phase => self.violate("terminal", format!("the phase went from {t} to {phase}")),
            None if phase == "Succeeded" || phase == "Failed" => self.terminal = Some(phase.clone()),
            _ => {}
        }
        if let Some(last) = self.last.take() {
            if last.initialized && !initialized {
                let lived = last.ip.as_ref().and_then(|ip| self.sandboxes.iter().position(|s| s.ready && &s.ip == ip));
                if let Some(sb) = lived {
                    let detail = format!("Initialized went from True to False while sb{} lived", sb + 1);
                    self.violate("initialized", detail);
                }
            }
            if let Some((name, was)) = last
                .ended
                .iter()
                .find(|(name, was)| statuses(st).find(|cs| &cs.name == *name).and_then(ended).as_ref() != Some(was))
            {
                let detail = format!("{name}, terminated with {} in the {phase} pod, is not any more", was.1);
                self.violate("terminated-final", detail);
            }
            if last.incarnation != incarnation {
                let unprobed = |name: &str| self.readiness_probes.get(name) == self.probes_at_start.get(name);
                let flapped = statuses(st).find(|cs| {
                    let was = last.ready.get(&cs.name);
                    was.is_some_and(|(id, ready)| *ready && cs.container_id.as_ref() == Some(id))
                        && is_running(cs)
                        && !cs.ready
                        && unprobed(&cs.name)
                });
                if let Some(cs) = flapped {
                    let detail = format!("{} was Ready before the agent restarted and not after, unprobed", cs.name);
                    self.violate("ready-carried", detail);
                }
            }
        }
        self.check_prepared_unseen(st);
        for cs in statuses(st) {
            let max = self.restart_counts.entry(cs.name.clone()).or_insert(0);
            if cs.restart_count < *max {
                let detail = format!("{}'s restartCount went from {max} to {}", cs.name, cs.restart_count);
                *max = cs.restart_count.max(*max);
                self.violate("restart-count", detail);
            } else {
                *max = cs.restart_count;
            }
        }
        if update.finished {
            if self.terminal.is_none() {
                self.violate("finished", format!("the pod finished in phase {phase}"));
            }
            self.nothing_runs("finished");
        }
        let ready =
            statuses(st).filter_map(|cs| Some((cs.name.clone(), (cs.container_id.clone()?, cs.ready)))).collect();
        let terminal = phase == "Succeeded" || phase == "Failed";
        let ended = statuses(st).filter(|_| terminal).filter_map(|cs| Some((cs.name.clone(), ended(cs)?))).collect();
        self.last = Some(LastStatus { incarnation, initialized, ip: st.pod_ip.clone(), ready, ended });
    }

    /// An instance created ahead of its turn (the pipelined start: created, never started,
    /// while the regular init container before it, or for an app container the last init
    /// container, has not succeeded in its sandbox) is not in any status: the container shows
    /// as not yet created.
    fn check_prepared_unseen(&mut self, st: &PodStatus) {
        let seen = statuses(st).filter_map(|cs| {
            let id = cs.container_id.as_deref()?.strip_prefix("containerd://")?;
            Some((cs.name.clone(), *self.ids.get(id)?))
        });
        let early = seen.collect::<Vec<_>>().into_iter().find(|(name, i)| {
            let c = &self.containers[*i];
            let before = match self.kind(name) {
                Kind::Init(k) | Kind::Sidecar(k) => k.checked_sub(1).map(|b| &self.inits[b]),
                Kind::App => self.inits.last(),
            };
            let Some((before, false)) = before else { return false };
            let turn = self.containers.iter().any(|p| &p.name == before && p.sandbox == c.sandbox && p.succeeded());
            !c.started && !turn
        });
        if let Some((name, i)) = early {
            self.violate("prepared-unseen", format!("{name} shows {}, created ahead of its turn", self.label(i)));
        }
    }

    fn nothing_runs(&mut self, invariant: &'static str) {
        if let Some(i) = self.containers.iter().position(|c| c.running) {
            self.violate(invariant, format!("{} still runs", self.label(i)));
        }
        if let Some(sb) = self.sandboxes.iter().position(|s| s.ready) {
            self.violate(invariant, format!("sb{} is still ready", sb + 1));
        }
    }

    /// The rules once the pod has been removed: nothing of it runs, and (unless a fault hit a
    /// removal) nothing of it is left in the runtime.
    pub fn removed(&mut self, faulted: bool) {
        self.catch_up();
        self.nothing_runs("removed");
        if faulted {
            return;
        }
        if let Some(i) = self.containers.iter().position(|c| !c.removed) {
            self.violate("removed", format!("{} is left in the runtime", self.label(i)));
        }
        if let Some(sb) = self.sandboxes.iter().position(|s| !s.removed) {
            self.violate("removed", format!("sb{} is left in the runtime", sb + 1));
        }
    }
}
