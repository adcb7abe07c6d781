//! Issue 8's probe and hook rules in virtual time: a pod worker with its prober against the fake
//! runtime, whose exec replies are scripted.

mod common;
use common::*;
use podwright_runtime::fake::{Behaviour, ExecBehaviour};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[tokio::test(start_paused = true)]
async fn rule_6_readiness_is_probed_once_the_startup_probe_succeeds() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::RunForever]);
    // The startup probe passes from the 3rd second on; readiness always passes.
    let clock = sim.clock;
    sim.fake.script_exec_fn("app", move |cmd| {
        let started = clock.now().duration_since(epoch()).as_secs_f64() >= 3.0;
        let startup = cmd.iter().any(|a| a.contains("startup"));
        ExecBehaviour::exit(if startup && !started { 1 } else { 0 })
    });
    let pod = pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "containers": [{
            "name": "app",
            "startupProbe": {"exec": exec("echo startup"), "periodSeconds": 1, "failureThreshold": 30},
            "readinessProbe": {"exec": exec("echo readiness"), "periodSeconds": 30},
        }],
    }));
    let history = sim.run_timed(pod, Duration::from_secs(20)).await;
    let started_at = history.iter().find(|(_, p)| app(p).started == Some(true)).expect("started").0;
    let ready_at = history.iter().find(|(_, p)| app(p).ready).expect("became ready").0;
    assert!((3.0..4.0).contains(&started_at), "started at {started_at}");
    // Probed at once, not 30 s (one readiness period) after the start.
    assert_eq!(ready_at, started_at, "ready at {ready_at}, started at {started_at}");
}

#[tokio::test(start_paused = true)]
async fn rule_9_exec_hooks_run_as_written() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::RunForever]);
    let seen = Arc::new(Mutex::new(vec![]));
    let record = seen.clone();
    sim.fake.script_exec_fn("app", move |cmd| {
        record.lock().unwrap().push(cmd.to_vec());
        ExecBehaviour::exit(0)
    });
    let written = "echo $(GREETING) $$HOME $(UNSET)";
    let pod = pod_with(serde_json::json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "containers": [{
            "name": "app",
            "env": [{"name": "GREETING", "value": "hello"}],
            "lifecycle": {"postStart": {"exec": exec(written)}, "preStop": {"exec": exec(written)}},
            "livenessProbe": {"exec": exec(written), "periodSeconds": 60},
        }],
    }));
    sim.run(pod, Duration::from_secs(3)).await;
    let seen = seen.lock().unwrap().clone();
    let as_written = vec!["sh".to_string(), "-c".into(), written.into()];
    let expanded = vec!["sh".to_string(), "-c".into(), "echo hello $HOME $(UNSET)".into()];
    // postStart, the liveness probe at the start, preStop at the deletion: only the probe expands.
    assert_eq!(seen, vec![as_written.clone(), expanded, as_written], "{seen:?}");
}
