//! Probes every running container instance of a pod on its own schedule: one task per
//! instance and probe type, so a slow probe delays neither the pod worker nor another probe.
//! Results go into a shared table the worker copies into `Observed`; a changed result rings
//! the worker's bell.

use crate::context::NodeContext;
use crate::events::{EventSink, EventType, wording};
use crate::probes::probe::{self, Outcome, Target};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Container, Pod, PodStatus, Probe};
use podwright_planner::pod::{self, SpecContainer};
use podwright_planner::{ContainerKind, Observed, ProbeKind, ProbeResults, RunState};
use podwright_runtime::{Clock, Runtime};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, watch};
use tokio::task::AbortHandle;

/// The kubelet retries a probe that errors this many times within one attempt.
const MAX_TRIES: usize = 3;

/// The probe tasks of one instance; dropping it stops them.
#[derive(Default)]
struct Tasks {
    /// Startup and liveness: stopped when the pod is being deleted.
    killing: Vec<AbortHandle>,
    readiness: Option<AbortHandle>,
}

impl Drop for Tasks {
    fn drop(&mut self) {
        self.killing.iter().chain(&self.readiness).for_each(AbortHandle::abort);
    }
}

pub struct Prober {
    shared: Arc<Shared>,
    /// No container of the pod has a probe: there is nothing to do.
    idle: bool,
    tasks: HashMap<String, Tasks>,
    deleting: bool,
}

/// What the prober and every probe task of one pod hold in common.
struct Shared {
    runtime: Arc<dyn Runtime>,
    clock: Clock,
    events: Arc<dyn EventSink>,
    pod: Arc<Pod>,
    bell: Arc<Notify>,
    results: Mutex<ProbeResults>,
}

/// One instance being probed, shared by its probe tasks.
struct Instance {
    shared: Arc<Shared>,
    id: String,
    kind: ContainerKind,
    index: usize,
    pod_ip: String,
    started_at: Timestamp,
}

impl Prober {
    /// `reported`: the pod's last status from before podwright restarted, if any. A container
    /// it shows ready (or started) that still runs stays so until a probe says otherwise, as
    /// the kubelet does since 1.35 (KEP-4781): a restart of the agent is no reason to flap.
    pub(crate) fn new(ctx: &NodeContext, pod: Arc<Pod>, bell: Arc<Notify>, reported: Option<&PodStatus>) -> Self {
        let idle = pod::all_containers(&pod).all(|sc| {
            let c = sc.container;
            c.startup_probe.is_none() && c.liveness_probe.is_none() && c.readiness_probe.is_none()
        });
        let shared = Shared {
            runtime: ctx.runtime.clone(),
            clock: ctx.clock,
            events: ctx.events.clone(),
            pod,
            bell,
            results: Mutex::new(carried_over(reported)),
        };
        Prober { shared: Arc::new(shared), idle, tasks: HashMap::new(), deleting: false }
    }

    /// Starts probing instances that newly run and stops probing those that no longer do;
    /// once the pod is being deleted only readiness goes on. Returns the current results.
    pub fn sync(&mut self, observed: &Observed, deleting: bool) -> ProbeResults {
        if self.idle {
            return ProbeResults::default();
        }
        let running: HashSet<&str> =
            observed.containers.iter().filter(|c| c.state == RunState::Running).map(|c| c.id.as_str()).collect();
        self.tasks.retain(|id, _| running.contains(id.as_str()));
        if deleting && !self.deleting {
            self.deleting = true;
            for t in self.tasks.values_mut() {
                t.killing.drain(..).for_each(|h| h.abort());
            }
        }
        let pod_ip = observed.sandbox.as_ref().and_then(|s| s.ip.as_deref()).unwrap_or_default();
        for c in observed.containers.iter().filter(|c| c.state == RunState::Running) {
            if self.tasks.contains_key(&c.id) {
                continue;
            }
            let spec = pod::all_containers(&self.shared.pod).find(|s| s.name() == c.name && s.kind == c.kind);
            let started_at = c.started_at.unwrap_or_else(|| self.shared.clock.now());
            let tasks = match spec {
                Some(sc) => self.start(&sc, c.id.clone(), pod_ip, started_at),
                None => Tasks::default(),
            };
            self.tasks.insert(c.id.clone(), tasks);
        }
        let mut results = self.shared.results.lock().unwrap_or_else(|e| e.into_inner());
        for kind in [ProbeKind::Startup, ProbeKind::Liveness, ProbeKind::Readiness] {
            results.of_kind_mut(kind).retain(|id, _| running.contains(id.as_str()));
        }
        results.clone()
    }

    fn start(&self, sc: &SpecContainer, id: String, pod_ip: &str, started_at: Timestamp) -> Tasks {
        let c = sc.container;
        let mut tasks = Tasks::default();
        if c.startup_probe.is_none() && c.liveness_probe.is_none() && c.readiness_probe.is_none() {
            return tasks;
        }
        let inst = Arc::new(Instance {
            shared: self.shared.clone(),
            id,
            kind: sc.kind,
            index: sc.index,
            pod_ip: pod_ip.to_string(),
            started_at,
        });
        // Until the startup probe succeeds, liveness and readiness wait.
        let results = self.shared.results.lock().unwrap_or_else(|e| e.into_inner());
        let started = results.startup.get(&inst.id) == Some(&true);
        drop(results);
        let (started_tx, started_rx) = watch::channel(c.startup_probe.is_none() || started);
        if c.startup_probe.is_some() && !started && !self.deleting {
            let h = tokio::spawn(run(inst.clone(), ProbeKind::Startup, None, Some(started_tx)));
            tasks.killing.push(h.abort_handle());
        }
        if c.liveness_probe.is_some() && !self.deleting {
            let h = tokio::spawn(run(inst.clone(), ProbeKind::Liveness, Some(started_rx.clone()), None));
            tasks.killing.push(h.abort_handle());
        }
        if c.readiness_probe.is_some() {
            tasks.readiness =
                Some(tokio::spawn(run(inst, ProbeKind::Readiness, Some(started_rx), None)).abort_handle());
        }
        tasks
    }
}

/// The readiness and startup results a reported status shows for its containers, by ID.
fn carried_over(reported: Option<&PodStatus>) -> ProbeResults {
    let mut results = ProbeResults::default();
    for st in reported.into_iter().flat_map(podwright_api::container_statuses) {
        let Some(id) = st.container_id.as_deref().and_then(|id| id.split_once("://")).map(|(_, id)| id) else {
            continue;
        };
        if st.ready {
            results.readiness.insert(id.to_string(), true);
        }
        if st.started == Some(true) {
            results.startup.insert(id.to_string(), true);
        }
    }
    results
}

impl Instance {
    fn container(&self) -> Option<&Container> {
        pod::find(&self.shared.pod, self.kind, self.index).map(|s| s.container)
    }

    fn field_path(&self) -> Option<String> {
        pod::find(&self.shared.pod, self.kind, self.index).map(|s| s.field_path())
    }

    fn event(&self, reason: &str, message: String) {
        self.shared.events.record(
            &self.shared.pod,
            self.field_path(),
            EventType::Warning,
            reason,
            message,
            self.shared.clock.now(),
        );
    }

    fn publish(&self, kind: ProbeKind, value: bool) {
        let mut r = self.shared.results.lock().unwrap_or_else(|e| e.into_inner());
        if r.of_kind_mut(kind).insert(self.id.clone(), value) != Some(value) {
            self.shared.bell.notify_one();
        }
    }

    /// One attempt, tried again while the probe cannot be run at all.
    async fn attempt(&self, probe: &Probe, container: &Container) -> Outcome {
        let target =
            Target { runtime: self.shared.runtime.as_ref(), container_id: &self.id, container, pod_ip: &self.pod_ip };
        let mut outcome = Outcome::Error(String::new());
        for _ in 0..MAX_TRIES {
            outcome = probe::attempt(&target, probe).await;
            if !matches!(outcome, Outcome::Error(_)) {
                break;
            }
        }
        outcome
    }
}

fn secs(v: Option<i32>, default: i64) -> SignedDuration {
    SignedDuration::from_secs(v.map_or(default, i64::from))
}

/// Probes on the schedule `startedAt + initialDelaySeconds + k × periodSeconds` until the
/// result is final (startup succeeded, startup or liveness failed); readiness behind a startup
/// probe runs first when the startup probe succeeds, then every period from there.
async fn run(
    inst: Arc<Instance>,
    kind: ProbeKind,
    started: Option<watch::Receiver<bool>>,
    started_tx: Option<watch::Sender<bool>>,
) {
    let Some(probe) = inst.container().and_then(|c| kind.spec(c)).cloned() else { return };
    let mut waited_for_startup = false;
    if let Some(mut started) = started {
        waited_for_startup = !*started.borrow();
        if started.wait_for(|s| *s).await.is_err() {
            return;
        }
    }
    let period = secs(probe.period_seconds, 10).max(SignedDuration::from_secs(1));
    let success_threshold = probe.success_threshold.unwrap_or(1).max(1);
    let failure_threshold = probe.failure_threshold.unwrap_or(3).max(1);
    let mut at = inst.started_at + secs(probe.initial_delay_seconds, 0);
    let now = inst.shared.clock.now();
    if kind == ProbeKind::Readiness && waited_for_startup {
        // The kubelet asks for a readiness probe at once when a started container has no
        // result yet (the prober manager's manual trigger): a container that has just passed
        // its startup probe is probed now, not a period later. Liveness keeps its schedule.
        at = at.max(now);
    } else if at < now {
        // Started late (the container was seen running a moment after it started, or podwright
        // restarted): probe at once, as the kubelet's probe worker does when it starts, then
        // keep to the schedule from the last point of it already passed.
        let behind = now.duration_since(at).as_nanos() / period.as_nanos();
        at += period * i32::try_from(behind).unwrap_or(i32::MAX);
    }
    let (mut successes, mut failures) = (0, 0);
    loop {
        inst.shared.clock.sleep_until(at).await;
        let late = inst.shared.clock.now().duration_since(at);
        tracing::trace!(target: "podwright::probe", late_us = late.as_micros() as i64, "probe");
        let Some(container) = inst.container() else { return };
        match inst.attempt(&probe, container).await {
            Outcome::Success => (successes, failures) = (successes + 1, 0),
            Outcome::Warning(w) => {
                (successes, failures) = (successes + 1, 0);
                inst.event("ProbeWarning", wording::probe_warning(kind, &w));
            }
            Outcome::Failure(out) => {
                (successes, failures) = (0, failures + 1);
                inst.event("Unhealthy", wording::probe_failed(kind, &out));
            }
            Outcome::Error(e) => inst.event("Unhealthy", wording::probe_errored(kind, &e)),
        }
        if successes >= success_threshold {
            inst.publish(kind, true);
            if let Some(tx) = &started_tx {
                let _ = tx.send(true);
                return;
            }
        } else if failures >= failure_threshold {
            inst.publish(kind, false);
            if kind != ProbeKind::Readiness {
                return;
            }
        }
        let now = inst.shared.clock.now();
        while at <= now {
            at += period;
        }
    }
}
