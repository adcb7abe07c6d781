//! What a seed makes: a random pod (init containers, sidecars, app containers, restart policy,
//! probes, hooks, a deadline), what each of its containers does, the runtime's faults, and the
//! steps done to it from outside (agent crashes, lost sandboxes, crashing containers, a slower
//! runtime, the deletion).

use super::rng::Rng;
use crate::common::{exec, pod_with};
use k8s_openapi::api::core::v1::Pod;
use podwright_runtime::fake::Behaviour;
use serde_json::{Value, json};
use std::fmt;
use std::time::Duration;

/// One random lifecycle, all of it decided before it runs (only the faults' and the exec
/// replies' dice are thrown as the calls come, from their own streams of the seed).
#[derive(Debug, Clone)]
pub struct Scenario {
    pub seed: u64,
    pub pod: Pod,
    /// What the successive instances of each container do (the last repeats).
    pub scripts: Vec<(String, Vec<Behaviour>)>,
    /// Per container, how its `exec_sync` calls (probes, exec hooks) answer.
    pub execs: Vec<(String, ExecRates)>,
    pub faults: Faults,
    /// The runtime's latency per call at the start.
    pub latency: Duration,
    pub steps: Vec<Step>,
    /// Agent crashes in the middle of a runtime call: during the n-th call that acts (counted
    /// from the start), the agent is killed, to be started again `down` later. Where the steps'
    /// crashes fall at random instants, these fall where the agent is at work: between
    /// CreateContainer and StartContainer, during a StartContainer, amid a termination.
    pub call_crashes: Vec<(u64, Duration)>,
}

/// How a container's execs answer, per mille: failing (exit 1), and slower than any probe's
/// timeout (3 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecRates {
    pub fail: u64,
    pub slow: u64,
}

/// The runtime's faults, per mille of the calls (or events) they may hit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// A call that acts fails before it has any effect.
    pub fail: u64,
    /// A call that acts has its effect but its reply is lost (the caller sees an error).
    pub lose_reply: u64,
    /// A call takes up to `slow_max` longer.
    pub slow: u64,
    pub slow_max: Duration,
    /// A runtime event is never sent (only the relist finds the change).
    pub drop_event: u64,
    /// A runtime event comes up to `delay_max` late.
    pub delay_event: u64,
    pub delay_max: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// From the start of the lifecycle (virtual time).
    pub at: Duration,
    pub action: Action,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// The agent is killed (SIGKILL) and started again `down` later.
    Crash { down: Duration },
    /// The pod's ready sandbox dies (its pause process).
    KillSandbox,
    /// The running instance of a container ends from outside with this code.
    CrashContainer { name: String, code: i32 },
    /// Every runtime call takes this long from now on.
    Latency(Duration),
    /// The pod is deleted through the API, with this grace period (the pod's own when `None`).
    Delete { grace: Option<i64> },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Crash { down } => write!(f, "agent crash (down {:.3}s)", down.as_secs_f64()),
            Action::KillSandbox => write!(f, "the sandbox dies"),
            Action::CrashContainer { name, code } => write!(f, "{name} crashes with exit code {code}"),
            Action::Latency(d) => write!(f, "runtime latency {:.3}s", d.as_secs_f64()),
            Action::Delete { grace: Some(g) } => write!(f, "delete (grace {g}s)"),
            Action::Delete { grace: None } => write!(f, "delete"),
        }
    }
}

/// The purposes of the seed's streams.
pub const POD: u64 = 1;
pub const STEPS: u64 = 2;
pub const FAULTS: u64 = 3;
pub const EXECS: u64 = 4;

impl Scenario {
    pub fn new(seed: u64) -> Scenario {
        let mut rng = Rng::stream(seed, POD);
        let (pod, scripts, execs) = random_pod(&mut rng);
        let faults = random_faults(&mut rng);
        let latency = random_latency(&mut rng);
        let names: Vec<String> = scripts.iter().map(|(n, _)| n.clone()).collect();
        let mut rng = Rng::stream(seed, STEPS);
        let steps = random_steps(&mut rng, &names);
        let call_crashes = (0..rng.pick(&[0, 0, 1, 1, 2]))
            .map(|_| (rng.range(1, 60), if rng.chance(300) { Duration::ZERO } else { rng.millis(1, 20_000) }))
            .collect();
        Scenario { seed, pod, scripts, execs, faults, latency, steps, call_crashes }
    }

    /// The pod's `terminationGracePeriodSeconds`.
    pub fn grace(&self) -> i64 {
        podwright_planner::pod::grace_period_secs(&self.pod)
    }

    /// Simpler versions of this scenario, for shrinking a failure: one step fewer (the deletion
    /// stays: without it no lifecycle ends), one kind of fault off, no latency, a container
    /// without probes and hooks, no deadline.
    pub fn simpler(&self) -> Vec<Scenario> {
        let mut out = vec![];
        let deletion = self.steps.iter().position(|s| matches!(s.action, Action::Delete { .. }));
        for i in (0..self.steps.len()).filter(|i| Some(*i) != deletion) {
            let mut s = self.clone();
            s.steps.remove(i);
            out.push(s);
        }
        for i in 0..self.call_crashes.len() {
            let mut s = self.clone();
            s.call_crashes.remove(i);
            out.push(s);
        }
        let f = self.faults;
        let fault_offs = [
            Faults { fail: 0, ..f },
            Faults { lose_reply: 0, ..f },
            Faults { slow: 0, ..f },
            Faults { drop_event: 0, ..f },
            Faults { delay_event: 0, ..f },
        ];
        for off in fault_offs.into_iter().filter(|off| *off != f) {
            out.push(Scenario { faults: off, ..self.clone() });
        }
        if !self.latency.is_zero() {
            out.push(Scenario { latency: Duration::ZERO, ..self.clone() });
        }
        for (i, (name, rates)) in self.execs.iter().enumerate() {
            if *rates != (ExecRates { fail: 0, slow: 0 }) {
                let mut s = self.clone();
                s.execs[i] = (name.clone(), ExecRates { fail: 0, slow: 0 });
                out.push(s);
            }
        }
        let spec = self.pod.spec.as_ref().expect("a spec");
        let containers = spec.init_containers.iter().flatten().chain(&spec.containers);
        for (i, c) in containers.enumerate() {
            let plain = c.startup_probe.is_none()
                && c.liveness_probe.is_none()
                && c.readiness_probe.is_none()
                && c.lifecycle.is_none();
            if !plain {
                let mut s = self.clone();
                let spec = s.pod.spec.as_mut().expect("a spec");
                let inits = spec.init_containers.as_ref().map_or(0, Vec::len);
                let c = match i.checked_sub(inits) {
                    Some(app) => &mut spec.containers[app],
                    None => &mut spec.init_containers.as_mut().expect("init containers")[i],
                };
                (c.startup_probe, c.liveness_probe, c.readiness_probe, c.lifecycle) = (None, None, None, None);
                out.push(s);
            }
        }
        if spec.active_deadline_seconds.is_some() {
            let mut s = self.clone();
            s.pod.spec.as_mut().expect("a spec").active_deadline_seconds = None;
            out.push(s);
        }
        out
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let spec = self.pod.spec.as_ref().expect("a spec");
        writeln!(
            f,
            "pod: restartPolicy {}, terminationGracePeriodSeconds {}, activeDeadlineSeconds {}",
            spec.restart_policy.as_deref().unwrap_or("Always"),
            self.grace(),
            spec.active_deadline_seconds.map_or("-".to_string(), |d| d.to_string()),
        )?;
        let containers = spec.init_containers.iter().flatten().chain(&spec.containers);
        for c in containers {
            let mut extras = vec![];
            if c.restart_policy.as_deref() == Some("Always") {
                extras.push("sidecar".to_string());
            }
            for (probe, p) in
                [("startup", &c.startup_probe), ("liveness", &c.liveness_probe), ("readiness", &c.readiness_probe)]
            {
                if let Some(p) = p {
                    extras.push(format!(
                        "{probe} probe every {}s, {} failures",
                        p.period_seconds.unwrap_or(10),
                        p.failure_threshold.unwrap_or(3)
                    ));
                }
            }
            let hooks = c.lifecycle.as_ref();
            for (hook, h) in [
                ("postStart", hooks.and_then(|l| l.post_start.as_ref())),
                ("preStop", hooks.and_then(|l| l.pre_stop.as_ref())),
            ] {
                if let Some(h) = h {
                    let what = match &h.sleep {
                        Some(s) => format!("sleep {}", s.seconds),
                        None => "exec".to_string(),
                    };
                    extras.push(format!("{hook} {what}"));
                }
            }
            let script = self.scripts.iter().find(|(n, _)| *n == c.name).map(|(_, s)| s.as_slice()).unwrap_or_default();
            let rates = self.execs.iter().find(|(n, _)| *n == c.name).map(|(_, r)| *r);
            if let Some(r) = rates.filter(|r| r.fail + r.slow > 0) {
                extras.push(format!("execs fail {}‰, slow {}‰", r.fail, r.slow));
            }
            writeln!(
                f,
                "  {} [{}]: {}",
                c.name,
                extras.join(", "),
                script.iter().map(behaviour).collect::<Vec<_>>().join(", ")
            )?;
        }
        let fl = &self.faults;
        writeln!(
            f,
            "runtime: latency {:.3}s; calls fail {}‰, lose their reply {}‰, slow {}‰ (up to {:.1}s); events dropped {}‰, late {}‰ (up to {:.1}s)",
            self.latency.as_secs_f64(),
            fl.fail,
            fl.lose_reply,
            fl.slow,
            fl.slow_max.as_secs_f64(),
            fl.drop_event,
            fl.delay_event,
            fl.delay_max.as_secs_f64()
        )?;
        writeln!(f, "steps:")?;
        for s in &self.steps {
            writeln!(f, "  {:>9.3}s  {}", s.at.as_secs_f64(), s.action)?;
        }
        for (call, down) in &self.call_crashes {
            writeln!(f, "  agent crash during runtime call {call} (down {:.3}s)", down.as_secs_f64())?;
        }
        Ok(())
    }
}

fn behaviour(b: &Behaviour) -> String {
    match b {
        Behaviour::Exit { code, after } => format!("exit {code} after {:.3}s", after.as_secs_f64()),
        Behaviour::RunForever => "runs".into(),
        Behaviour::Oom { after } => format!("OOM after {:.3}s", after.as_secs_f64()),
        Behaviour::FailCreate(_) => "create fails".into(),
        Behaviour::FailStart(_) => "start fails".into(),
        Behaviour::IgnoreTerm => "ignores TERM".into(),
    }
}

/// Regular init containers mostly complete; some fail, are OOM killed, cannot be created or
/// started, or never end.
fn init_behaviour(rng: &mut Rng) -> Behaviour {
    match rng.below(1000) {
        0..700 => Behaviour::Exit { code: 0, after: rng.millis(0, 20_000) },
        700..850 => Behaviour::Exit { code: rng.range(1, 3) as i32, after: rng.millis(0, 10_000) },
        850..880 => Behaviour::Oom { after: rng.millis(0, 5_000) },
        880..930 => Behaviour::FailCreate("failed to create containerd container: injected".into()),
        930..985 => Behaviour::FailStart("failed to start containerd task: injected".into()),
        _ => Behaviour::RunForever,
    }
}

fn sidecar_behaviour(rng: &mut Rng) -> Behaviour {
    match rng.below(1000) {
        0..650 => Behaviour::RunForever,
        650..850 => Behaviour::Exit { code: rng.pick(&[0, 1, 2]), after: rng.millis(1_000, 60_000) },
        850..900 => Behaviour::IgnoreTerm,
        900..950 => Behaviour::FailStart("failed to start containerd task: injected".into()),
        _ => Behaviour::Oom { after: rng.millis(0, 30_000) },
    }
}

fn app_behaviour(rng: &mut Rng) -> Behaviour {
    match rng.below(1000) {
        0..350 => Behaviour::RunForever,
        350..750 => Behaviour::Exit { code: rng.pick(&[0, 0, 1, 2]), after: rng.millis(0, 60_000) },
        750..850 => Behaviour::IgnoreTerm,
        850..880 => Behaviour::Oom { after: rng.millis(0, 30_000) },
        880..930 => Behaviour::FailCreate("failed to create containerd container: injected".into()),
        _ => Behaviour::FailStart("failed to start containerd task: injected".into()),
    }
}

fn probe(rng: &mut Rng, command: &str, success: bool) -> Value {
    let mut p = json!({
        "exec": exec(command),
        "periodSeconds": rng.range(1, 10),
        "failureThreshold": rng.range(1, 3),
        "timeoutSeconds": 1,
    });
    if success {
        p["successThreshold"] = rng.range(1, 2).into();
    }
    p
}

fn hook(rng: &mut Rng, max_sleep: u64) -> Value {
    if rng.chance(500) { json!({"sleep": {"seconds": rng.range(0, max_sleep)}}) } else { json!({"exec": exec("hook")}) }
}

/// Probes and hooks for a sidecar or an app container, some of the time.
fn extras(rng: &mut Rng, c: &mut Value) {
    if rng.chance(150) {
        c["startupProbe"] = probe(rng, "started", false);
    }
    if rng.chance(150) {
        c["livenessProbe"] = probe(rng, "alive", false);
    }
    if rng.chance(300) {
        c["readinessProbe"] = probe(rng, "ready", true);
    }
    if rng.chance(120) {
        c["lifecycle"]["postStart"] = hook(rng, 3);
    }
    if rng.chance(200) {
        c["lifecycle"]["preStop"] = hook(rng, 5);
    }
}

fn script(rng: &mut Rng, each: fn(&mut Rng) -> Behaviour, last: Option<Behaviour>) -> Vec<Behaviour> {
    let mut steps: Vec<Behaviour> = (0..rng.range(1, 4)).map(|_| each(rng)).collect();
    steps.extend(last);
    steps
}

type Scripts = Vec<(String, Vec<Behaviour>)>;

fn random_pod(rng: &mut Rng) -> (Pod, Scripts, Vec<(String, ExecRates)>) {
    let regular = rng.below(4);
    let sidecars = rng.pick(&[0, 0, 0, 1, 1, 2]);
    // Where the sidecars go among the init containers.
    let mut kinds = vec![false; regular as usize];
    for _ in 0..sidecars {
        let at = rng.below(kinds.len() as u64 + 1) as usize;
        kinds.insert(at, true);
    }
    let mut scripts = vec![];
    let mut execs = vec![];
    let mut rates = |rng: &mut Rng, name: &str| {
        let fail = rng.pick(&[0, 0, 50, 200, 500]);
        let slow = rng.pick(&[0, 0, 0, 50]);
        execs.push((name.to_string(), ExecRates { fail, slow }));
    };
    let (mut i, mut s) = (0, 0);
    let mut inits = vec![];
    for sidecar in kinds {
        if sidecar {
            let name = format!("s{s}");
            s += 1;
            let mut c = json!({"name": name, "restartPolicy": "Always"});
            extras(rng, &mut c);
            rates(rng, &name);
            scripts.push((name, script(rng, sidecar_behaviour, None)));
            inits.push(c);
        } else {
            let name = format!("i{i}");
            i += 1;
            // Most init containers end up completing, so that most pods get past them.
            let last = rng.chance(850).then(|| Behaviour::Exit { code: 0, after: rng.millis(0, 5_000) });
            scripts.push((name.clone(), script(rng, init_behaviour, last)));
            inits.push(json!({"name": name}));
        }
    }
    let mut apps = vec![];
    for a in 0..rng.range(1, 2) {
        let name = format!("a{a}");
        let mut c = json!({"name": name});
        extras(rng, &mut c);
        rates(rng, &name);
        scripts.push((name, script(rng, app_behaviour, None)));
        apps.push(c);
    }
    let mut spec = json!({
        "restartPolicy": rng.pick(&["Always", "OnFailure", "Never"]),
        "terminationGracePeriodSeconds": rng.pick(&[0, 1, 2, 3, 5, 10, 30]),
        "initContainers": inits,
        "containers": apps,
    });
    if rng.chance(150) {
        spec["activeDeadlineSeconds"] = rng.range(5, 200).into();
    }
    (pod_with(spec), scripts, execs)
}

fn random_faults(rng: &mut Rng) -> Faults {
    let mut f = Faults::default();
    if rng.chance(600) {
        f.fail = rng.pick(&[0, 20, 50, 150]);
        f.lose_reply = rng.pick(&[0, 20, 50]);
        f.slow = rng.pick(&[0, 20, 100]);
        f.slow_max = rng.millis(100, 15_000);
    }
    if rng.chance(500) {
        f.drop_event = rng.pick(&[0, 100, 500, 1000]);
        f.delay_event = rng.pick(&[0, 100, 300]);
        f.delay_max = rng.millis(10, 10_000);
    }
    f
}

fn random_latency(rng: &mut Rng) -> Duration {
    match rng.below(1000) {
        0..300 => Duration::ZERO,
        300..800 => rng.millis(1, 20),
        _ => rng.millis(50, 500),
    }
}

fn random_steps(rng: &mut Rng, names: &[String]) -> Vec<Step> {
    let horizon = rng.range(20_000, 300_000);
    let mut steps = vec![];
    let delete_at = rng.below(horizon);
    let grace = |rng: &mut Rng| if rng.chance(600) { None } else { Some(rng.range(0, 10) as i64) };
    steps.push(Step { at: Duration::from_millis(delete_at), action: Action::Delete { grace: grace(rng) } });
    if rng.chance(100) {
        // A second deletion, which may shorten the grace period of the first.
        let at = delete_at + rng.below(10_000);
        steps.push(Step {
            at: Duration::from_millis(at),
            action: Action::Delete { grace: Some(rng.range(0, 3) as i64) },
        });
    }
    // Crashes up to a little after the deletion, to hit termination too.
    for _ in 0..rng.pick(&[0, 0, 1, 1, 1, 2, 2, 3]) {
        let down = if rng.chance(300) { Duration::ZERO } else { rng.millis(1, 30_000) };
        steps.push(Step { at: rng.millis(0, delete_at + 30_000), action: Action::Crash { down } });
    }
    for _ in 0..rng.pick(&[0, 0, 1, 2]) {
        steps.push(Step { at: rng.millis(0, horizon), action: Action::KillSandbox });
    }
    for _ in 0..rng.pick(&[0, 0, 1, 2]) {
        let name = rng.pick(names);
        let code = rng.pick(&[0, 1, 137]);
        steps.push(Step { at: rng.millis(0, horizon), action: Action::CrashContainer { name, code } });
    }
    for _ in 0..rng.pick(&[0, 0, 0, 1, 2]) {
        steps.push(Step { at: rng.millis(0, horizon), action: Action::Latency(random_latency(rng)) });
    }
    // Stable: steps at the same time keep the order they were drawn in.
    steps.sort_by_key(|s| s.at);
    steps
}
