//! One lifecycle: the pod given to an agent (pod workers on the fake runtime, in virtual time),
//! the scenario's steps done when their time comes, the agent killed and started again as
//! `serve` is started again (its API keeps the pod, its last status and its deletion), until the
//! pod has been deleted, stopped and removed, or an invariant breaks.

use super::checker::{Checker, Violation};
use super::rng::Rng;
use super::scenario::{Action, EXECS, FAULTS, Faults, Scenario};
use super::trace::Trace;
use crate::common::epoch;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::PodStatus;
use podwright_node::{Node, PodUpdate, PodWorkers, StatusSink};
use podwright_runtime::fake::{Call, CallFault, EventFault, ExecBehaviour, FakeRuntime};
use podwright_runtime::{Clock, ExecResult, RuntimeError, RuntimeEvent};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub const IMAGE: &str = "localhost/busybox:1.36";
/// How long after the last step the pod must be gone (virtual time): far more than any grace
/// period, hook, slow call and back-off of a termination.
const STUCK_AFTER: Duration = Duration::from_secs(900);
/// More runtime calls than any lifecycle makes: beyond, the agent is looping.
const RUNAWAY_CALLS: u64 = 100_000;

pub struct Outcome {
    pub violation: Option<Violation>,
    pub trace: Vec<String>,
    pub stats: Stats,
}

/// What lifecycles went through: what a run covered.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    pub agent_crashes: u64,
    pub sandboxes: u64,
    pub container_starts: u64,
    /// Runtime calls and events the fake's hooks faulted.
    pub faults: u64,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.agent_crashes += o.agent_crashes;
        self.sandboxes += o.sandboxes;
        self.container_starts += o.container_starts;
        self.faults += o.faults;
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs the scenario on a runtime of its own (virtual time starting at the epoch), with its pod
/// files under `root`; keeps a trace when asked.
pub fn run(sc: &Scenario, root: &Path, trace: bool) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a tokio runtime");
    // Made inside: the clock and the fake read the runtime's paused time from the start.
    rt.block_on(async { Lifecycle::new(sc, root, trace).run().await })
}

/// What the local API keeps across agent restarts.
#[derive(Default)]
struct Api {
    /// The pod's last status published.
    status: Option<PodStatus>,
    /// When the deletion's grace period ends, once deleted.
    deletion_at: Option<Timestamp>,
    /// The running agent's worker has published the pod finished (the API's node link).
    finished: bool,
}

/// The status sink of one agent: statuses are checked the moment they are published, then kept
/// as the API keeps them.
struct Sink {
    api: Arc<Mutex<Api>>,
    checker: Arc<Mutex<Checker>>,
    incarnation: u32,
    finished: mpsc::UnboundedSender<()>,
}

impl StatusSink for Sink {
    fn publish(&self, update: &PodUpdate) {
        lock(&self.checker).status(update, self.incarnation);
        let mut api = lock(&self.api);
        api.status = update.status.as_deref().cloned();
        if update.finished {
            api.finished = true;
            let _ = self.finished.send(());
        }
    }
}

/// One start of the agent.
struct Agent {
    workers: Arc<PodWorkers>,
    finished: mpsc::UnboundedReceiver<()>,
    removal: Option<JoinHandle<bool>>,
}

/// The dice of the runtime's faults, thrown as the calls come.
struct Dice {
    rng: Rng,
    faults: Faults,
    trace: Trace,
    calls: u64,
    /// Calls or events faulted so far.
    faulted: u64,
    /// The pod is being removed.
    removing: bool,
    /// A removal call failed: what is left in the runtime is not a leak of the agent's.
    removal_faulted: bool,
    /// The calls during which the agent is to be killed (see `Scenario::call_crashes`), and
    /// where to say so.
    crash_at: Vec<(u64, Duration)>,
    crashes: Option<mpsc::UnboundedSender<Duration>>,
}

impl Dice {
    fn new(rng: Rng, faults: Faults, trace: &Trace) -> Dice {
        Dice {
            rng,
            faults,
            trace: trace.clone(),
            calls: 0,
            faulted: 0,
            removing: false,
            removal_faulted: false,
            crash_at: vec![],
            crashes: None,
        }
    }

    fn call(&mut self, call: &Call) -> Option<CallFault> {
        self.calls += 1;
        if self.calls > RUNAWAY_CALLS {
            // Slow every call from now on, so that the lifecycle reaches its end in virtual time.
            return Some(CallFault::Slow(Duration::from_secs(1)));
        }
        let f = self.faults;
        // Every die is thrown every time: a fault turned off while shrinking leaves the others'.
        let (fail, lose, slow) = (self.rng.chance(f.fail), self.rng.chance(f.lose_reply), self.rng.chance(f.slow));
        let takes = self.rng.millis(1, f.slow_max.as_millis().max(1) as u64);
        if let Some(&(_, down)) = self.crash_at.iter().find(|(n, _)| *n == self.calls)
            && let Some(crashes) = &self.crashes
        {
            self.trace.line(|| format!("the agent is killed during {call:?}"));
            let _ = crashes.send(down);
            // Long enough for the kill to come before the call acts, even without latency.
            return Some(CallFault::Slow(Duration::from_millis(1)));
        }
        let fault = if fail {
            CallFault::Fail(RuntimeError::Failed("injected failure".into()))
        } else if lose && !matches!(call, Call::ExecSync { .. }) {
            CallFault::LoseReply(RuntimeError::DeadlineExceeded("context deadline exceeded (injected)".into()))
        } else if slow {
            CallFault::Slow(takes)
        } else {
            return None;
        };
        if self.removing && fail {
            self.removal_faulted = true;
        }
        self.faulted += 1;
        self.trace.line(|| format!("fault: {call:?}: {fault:?}"));
        Some(fault)
    }

    fn event(&mut self, event: &RuntimeEvent) -> EventFault {
        let f = self.faults;
        let (drop, delay) = (self.rng.chance(f.drop_event), self.rng.chance(f.delay_event));
        let after = self.rng.millis(1, f.delay_max.as_millis().max(1) as u64);
        let fault = match (drop, delay) {
            (true, _) => EventFault::Drop,
            (_, true) => EventFault::Delay(after),
            _ => return EventFault::Deliver,
        };
        self.faulted += 1;
        self.trace.line(|| format!("event fault: {:?} of {:.8}: {fault:?}", event.kind, event.container_id));
        fault
    }
}

struct Lifecycle<'a> {
    sc: &'a Scenario,
    root: &'a Path,
    clock: Clock,
    trace: Trace,
    fake: Arc<FakeRuntime>,
    checker: Arc<Mutex<Checker>>,
    api: Arc<Mutex<Api>>,
    dice: Arc<Mutex<Dice>>,
    event_dice: Arc<Mutex<Dice>>,
    /// Crashes the dice call for during a runtime call: how long the agent stays down.
    call_crashes: mpsc::UnboundedReceiver<Duration>,
    crashes: u64,
    /// The running agent, if it is up.
    agent: Option<Agent>,
    incarnation: u32,
    uid: String,
}

impl<'a> Lifecycle<'a> {
    fn new(sc: &'a Scenario, root: &'a Path, tracing: bool) -> Self {
        let clock = Clock::starting_at(epoch());
        let trace = Trace::new(tracing, clock);
        let fake = FakeRuntime::new(clock);
        fake.add_image(IMAGE);
        fake.set_call_log(false);
        fake.record_changes(true);
        fake.set_latency(sc.latency);
        for (name, script) in &sc.scripts {
            fake.script(name, script.clone());
        }
        let checker = Arc::new(Mutex::new(Checker::new(fake.clone(), &sc.pod, trace.clone())));
        let execs = Arc::new(Mutex::new(Rng::stream(sc.seed, EXECS)));
        for (name, rates) in sc.execs.clone() {
            // Weak: the checker holds the fake, which holds this function.
            let (execs, checker, trace) = (execs.clone(), Arc::downgrade(&checker), trace.clone());
            fake.script_exec_fn(&name.clone(), move |cmd| {
                let what = cmd.last().map_or("", String::as_str);
                if let Some(checker) = checker.upgrade().filter(|_| what == "ready") {
                    lock(&checker).readiness_probed(&name);
                }
                let mut rng = lock(&execs);
                let (fail, slow) = (rng.chance(rates.fail), rng.chance(rates.slow));
                trace.line(|| {
                    format!(
                        "exec {what:?} in {name}: {}",
                        if slow {
                            "slow"
                        } else if fail {
                            "fails"
                        } else {
                            "ok"
                        }
                    )
                });
                let reply = ExecResult { exit_code: i32::from(fail), stdout: vec![], stderr: vec![] };
                if slow { ExecBehaviour::Slow(Duration::from_secs(3), reply) } else { ExecBehaviour::Reply(reply) }
            });
        }
        let (crashes, call_crashes) = mpsc::unbounded_channel();
        let mut dice = Dice::new(Rng::stream(sc.seed, FAULTS), sc.faults, &trace);
        (dice.crash_at, dice.crashes) = (sc.call_crashes.clone(), Some(crashes));
        let dice = Arc::new(Mutex::new(dice));
        let on_calls = dice.clone();
        fake.set_call_faults(move |call| lock(&on_calls).call(call));
        // Events have dice of their own: how many events a call makes must not move the calls'.
        let event_dice = Arc::new(Mutex::new(Dice::new(Rng::stream(sc.seed, FAULTS + 1), sc.faults, &trace)));
        let events = event_dice.clone();
        fake.set_event_faults(move |event| lock(&events).event(event));
        let uid = sc.pod.metadata.uid.clone().expect("a pod uid");
        // What an earlier lifecycle that broke off left under the root.
        let _ = std::fs::remove_dir_all(podwright_node::layout::pod_dir(root, &uid));
        Lifecycle {
            sc,
            root,
            clock,
            trace,
            fake,
            checker,
            api: Arc::default(),
            dice,
            event_dice,
            call_crashes,
            crashes: 0,
            agent: None,
            incarnation: 0,
            uid,
        }
    }

    async fn run(mut self) -> Outcome {
        let start = self.instant_now();
        self.start_agent();
        let mut steps: VecDeque<_> = self.sc.steps.iter().cloned().collect();
        let downtime: Duration = self
            .sc
            .steps
            .iter()
            .map(|s| if let Action::Crash { down } = s.action { down } else { Duration::ZERO })
            .sum();
        let cap = start + self.sc.steps.last().map_or(Duration::ZERO, |s| s.at) + downtime + STUCK_AFTER;
        let mut restart_at: Option<Instant> = None;
        // Deletions asked while the agent (and its API) was down: asked again once it is up.
        let mut postponed: Vec<Option<i64>> = vec![];
        let mut removed = false;
        while !removed && lock(&self.checker).violation.is_none() {
            let next = steps.front().map(|s| start + s.at);
            tokio::select! {
                biased;
                news = news(&mut self.agent) => match news {
                    News::Finished => {
                        if lock(&self.api).deletion_at.is_some() {
                            self.start_removal();
                        }
                    }
                    News::Removed(done) => {
                        if let Some(agent) = &mut self.agent {
                            agent.removal = None;
                        }
                        if !done {
                            self.violate("removed", "the node refused to remove the finished pod".into());
                        }
                        removed = true;
                    }
                },
                Some(down) = self.call_crashes.recv() => {
                    if self.crash() {
                        restart_at = Some(self.instant_now() + down);
                    }
                }
                () = sleep_until(restart_at) => {
                    restart_at = None;
                    self.start_agent();
                    for grace in std::mem::take(&mut postponed) {
                        self.delete(grace);
                    }
                }
                () = sleep_until(next) => {
                    let step = steps.pop_front().expect("a step");
                    self.trace.line(|| format!("step: {}", step.action));
                    match step.action {
                        Action::Crash { down } => {
                            if self.crash() {
                                restart_at = Some(self.instant_now() + down);
                            }
                        }
                        Action::Delete { grace } if self.agent.is_none() => postponed.push(grace),
                        Action::Delete { grace } => self.delete(grace),
                        Action::KillSandbox => {
                            let ready = lock(&self.checker).ready_sandbox();
                            if let Some(id) = ready {
                                self.fake.kill_sandbox(&id);
                            }
                        }
                        Action::CrashContainer { name, code } => {
                            let running = lock(&self.checker).running(&name);
                            if let Some(id) = running {
                                self.fake.exit_container(&id, code);
                            }
                        }
                        Action::Latency(latency) => self.fake.set_latency(latency),
                    }
                }
                () = tokio::time::sleep_until(cap) => {
                    let calls = lock(&self.dice).calls;
                    let (invariant, detail) = if calls > RUNAWAY_CALLS {
                        ("runaway", format!("the agent made more than {RUNAWAY_CALLS} runtime calls"))
                    } else {
                        ("stuck", format!("the pod was not removed {}s after the last step", STUCK_AFTER.as_secs()))
                    };
                    self.violate(invariant, detail);
                }
            }
            lock(&self.checker).catch_up();
        }
        if removed {
            let faulted = lock(&self.dice).removal_faulted;
            lock(&self.checker).removed(faulted);
        }
        if let Some(agent) = self.agent.take() {
            agent.workers.abort();
        }
        let checker = lock(&self.checker);
        let (sandboxes, container_starts) = checker.made();
        let stats = Stats {
            agent_crashes: self.crashes,
            sandboxes,
            container_starts,
            faults: lock(&self.dice).faulted + lock(&self.event_dice).faulted,
        };
        Outcome { violation: checker.violation.clone(), trace: self.trace.lines(), stats }
    }

    /// Tokio's (virtual) instant now, through the clock.
    fn instant_now(&self) -> Instant {
        self.clock.instant_at(self.clock.now())
    }

    fn violate(&self, invariant: &'static str, detail: String) {
        let mut checker = lock(&self.checker);
        checker.catch_up();
        if checker.violation.is_none() {
            self.trace.line(|| format!("VIOLATION of {invariant}: {detail}"));
            checker.violation = Some(Violation { invariant, detail, at: self.trace.now() });
        }
    }

    /// Starts the agent, as `serve` starts: the API gives it the pod with its last status, and
    /// the deletion with what is left of its grace period.
    fn start_agent(&mut self) {
        self.incarnation += 1;
        let incarnation = self.incarnation;
        self.trace.line(|| format!("agent #{incarnation} starts"));
        lock(&self.checker).agent_started();
        let (tx, finished) = mpsc::unbounded_channel();
        let sink = Sink { api: self.api.clone(), checker: self.checker.clone(), incarnation, finished: tx };
        let runtime: Arc<dyn podwright_runtime::Runtime> = self.fake.clone();
        let workers = Node::new(runtime, self.root).clock(self.clock).status(Arc::new(sink)).build();
        let (status, deletion_at) = {
            let mut api = lock(&self.api);
            api.finished = false;
            (api.status.clone(), api.deletion_at)
        };
        let mut pod = self.sc.pod.clone();
        pod.status = status;
        workers.update(pod).expect("a pod with a uid");
        if let Some(at) = deletion_at {
            workers.delete(&self.uid, Some(self.left(at)));
        }
        self.agent = Some(Agent { workers: Arc::new(workers), finished, removal: None });
    }

    /// Whole seconds from now to `at`, none when it has passed.
    fn left(&self, at: Timestamp) -> i64 {
        at.duration_since(self.clock.now()).as_secs().max(0)
    }

    /// SIGKILL: the agent's workers stop where they are, a removal under way with them. Returns
    /// whether the agent was up.
    fn crash(&mut self) -> bool {
        let Some(agent) = self.agent.take() else { return false };
        if let Some(removal) = &agent.removal {
            removal.abort();
        }
        agent.workers.abort();
        lock(&self.dice).removing = false;
        self.crashes += 1;
        true
    }

    /// A deletion through the API: the grace period asked for (or the pod's own) counts from
    /// now, and a later deletion may only shorten it.
    fn delete(&mut self, grace: Option<i64>) {
        let now = self.clock.now();
        let asked = now + SignedDuration::from_secs(grace.unwrap_or(self.sc.grace()).max(0));
        let (at, finished) = {
            let mut api = lock(&self.api);
            let at = api.deletion_at.map_or(asked, |earlier| earlier.min(asked));
            api.deletion_at = Some(at);
            (at, api.finished)
        };
        if finished {
            self.start_removal();
        } else if let Some(agent) = &self.agent {
            agent.workers.delete(&self.uid, Some(self.left(at)));
        }
    }

    /// The pod is deleted and finished: the node removes it (`serve` does it in a task).
    fn start_removal(&mut self) {
        let Some(agent) = &mut self.agent else { return };
        if agent.removal.is_some() {
            return;
        }
        self.trace.line(|| "removing the pod".into());
        lock(&self.dice).removing = true;
        let (workers, uid) = (agent.workers.clone(), self.uid.clone());
        agent.removal = Some(tokio::spawn(async move { workers.remove(&uid).await }));
    }
}

/// What the agent tells the API.
enum News {
    /// Its worker published the pod finished.
    Finished,
    /// Its removal of the pod ended, having removed it or not.
    Removed(bool),
}

/// The agent's next news; never without an agent.
async fn news(agent: &mut Option<Agent>) -> News {
    let Some(a) = agent else { return std::future::pending().await };
    let removal = async {
        match &mut a.removal {
            Some(handle) => handle.await.unwrap_or(false),
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        Some(()) = a.finished.recv() => News::Finished,
        done = removal => News::Removed(done),
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
