//! Pod workers against a faulty runtime, in virtual time: the failures the crash-and-fault
//! simulation (`crash_sim`) found, each in a few steps.

mod common;
use common::*;
use podwright_runtime::RuntimeError;
use podwright_runtime::fake::{Behaviour, Call, CallFault, Change, ExecBehaviour};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

fn refused() -> RuntimeError {
    RuntimeError::Failed("injected failure".into())
}

/// The first `n` calls `matching` fail before they take effect.
fn fail_first(sim: &Sim, n: u32, matching: impl Fn(&Call) -> bool + Send + Sync + 'static) {
    let failed = AtomicU32::new(0);
    sim.fake.set_call_faults(move |call| {
        (matching(call) && failed.fetch_add(1, Ordering::Relaxed) < n).then(|| CallFault::Fail(refused()))
    });
}

/// A StartContainer that fails before it takes effect leaves a created instance, which
/// StopContainer cannot stop: the deletion must not wait for it.
#[tokio::test(start_paused = true)]
async fn a_created_instance_left_by_a_failed_start_does_not_hold_up_a_deletion() {
    let sim = Sim::new();
    // Virtual time must pass with every call, so that a worker looping on the kill times out.
    sim.fake.set_latency(Duration::from_millis(1));
    fail_first(&sim, 1, |c| matches!(c, Call::StartContainer { .. }));
    let p = pod(&[], &["app"], "Always");
    let run = sim.run(p, Duration::from_secs(5));
    let history = tokio::time::timeout(Duration::from_secs(600), run).await.expect("the deletion ends");
    assert_eq!(phase(history.last().unwrap()), "Failed");
    let created = sim.fake.calls().iter().filter(|(_, c)| matches!(c, Call::CreateContainer { .. })).count();
    assert_eq!((created, sim.starts().len()), (1, 0), "one instance, created and never started");
}

/// A liveness kill whose StopContainer fails must not start the replacement beside the instance
/// that still runs: the pass ends there, and the next one kills it again.
#[tokio::test(start_paused = true)]
async fn a_failed_kill_starts_nothing_beside_the_instance_it_did_not_stop() {
    let sim = Sim::new();
    sim.fake.record_changes(true);
    sim.fake.script("app", vec![Behaviour::RunForever]);
    sim.fake.script_exec("app", vec![ExecBehaviour::exit(1)]);
    fail_first(&sim, 1, |c| matches!(c, Call::StopContainer { .. }));
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "containers": [{"name": "app", "livenessProbe": {"exec": exec("false"), "periodSeconds": 10, "failureThreshold": 1}}],
    }));
    sim.run(p, Duration::from_secs(15)).await;
    let mut running = 0;
    let mut most = 0;
    for (_, change) in sim.fake.changes(0) {
        match change {
            Change::ContainerStarted { .. } => running += 1,
            Change::ContainerExited { .. } => running -= 1,
            _ => continue,
        }
        most = most.max(running);
    }
    assert_eq!(most, 1, "never two instances at once");
    assert!(sim.starts().len() >= 2, "restarted once the kill went through: {:?}", sim.starts());
}

/// A worker given a pod whose last reported status shows restart counts (its init containers'
/// records gone with their sandbox while podwright was down) counts on from them.
#[tokio::test(start_paused = true)]
async fn restart_counts_go_on_from_the_last_reported_status() {
    let sim = Sim::new();
    sim.fake.script("i1", vec![Behaviour::Exit { code: 0, after: Duration::from_secs(1) }]);
    let mut p = pod(&["i1"], &["app"], "Always");
    p.status = Some(
        serde_json::from_value(serde_json::json!({
            "phase": "Pending",
            "initContainerStatuses": [{"name": "i1", "image": "localhost/busybox:1.36", "imageID": "", "ready": false, "restartCount": 2}],
            "containerStatuses": [{"name": "app", "image": "localhost/busybox:1.36", "imageID": "", "ready": false, "restartCount": 0}],
        }))
        .unwrap(),
    );
    let history = sim.run(p, Duration::from_secs(10)).await;
    let attempts: Vec<(String, u32)> = sim
        .fake
        .calls()
        .into_iter()
        .filter_map(|(_, c)| match c {
            Call::CreateContainer { name, attempt } => Some((name, attempt)),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, vec![("i1".to_string(), 3), ("app".to_string(), 0)]);
    assert!(history.iter().all(|p| init(p, 0).restart_count >= 2));
}
