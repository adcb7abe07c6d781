//! The crash-and-fault simulation (issue 10, part 6): random pods under random runtime faults
//! and agent crashes, in virtual time, checked against the spec's invariants. `scripts/test`
//! runs a quick number of seeds; `scripts/simulate N` runs the same `simulate` test on N.

mod common;
mod crash;

use common::{epoch, pod_with};
use crash::{Checker, Scenario, Trace};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use podwright_node::PodUpdate;
use podwright_runtime::cri_api::{ContainerConfig, ContainerMetadata, ImageSpec, PodSandboxConfig, PodSandboxMetadata};
use podwright_runtime::fake::FakeRuntime;
use podwright_runtime::{Clock, RuntimeService};
use std::sync::Arc;

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn assert_clean(summary: &crash::Summary) {
    let first: Vec<String> =
        summary.failures.iter().map(|f| format!("{} ({})", f.seed, f.violation.invariant)).collect();
    let reports: Vec<&str> = summary.failures.iter().map(|f| f.report.as_str()).collect();
    assert_eq!(summary.violations, 0, "seeds broke invariants, first {}:\n{}", first.join(", "), reports.join("\n"));
}

#[test]
fn a_seed_replays_the_same_lifecycle() {
    let root = std::env::temp_dir().join(format!("podwright-sim-replay-{}", std::process::id()));
    for seed in 1..=12 {
        let sc = Scenario::new(seed);
        assert_eq!(sc.to_string(), Scenario::new(seed).to_string());
        let (first, trace) = crash::traced(&sc, &root);
        let (again, replay) = crash::traced(&sc, &root);
        assert_eq!((first, &trace), (again, &replay), "seed {seed}");
        assert!(trace.iter().any(|l| l.contains("status #1")), "seed {seed} ran its pod:\n{}", trace.join("\n"));
    }
    let _ = std::fs::remove_dir_all(root);
}

/// Random lifecycles keep every invariant. A quick amount by default: seconds in release
/// (`scripts/test`), fewer in a debug build; `scripts/simulate N` sets SIM_LIFECYCLES seeds from
/// SIM_SEED (1) on SIM_THREADS threads (1).
#[test]
fn simulate() {
    let quick = if cfg!(debug_assertions) { 150 } else { 1500 };
    let count = env("SIM_LIFECYCLES").unwrap_or(quick);
    let first = env("SIM_SEED").unwrap_or(1);
    let threads = env("SIM_THREADS").unwrap_or(1).max(1) as usize;
    let summary = crash::run_many(first, count, threads);
    for f in &summary.failures {
        println!("{}", f.report);
    }
    let s = summary.stats;
    println!(
        "covered: {} agent crashes, {} sandboxes, {} container starts, {} runtime faults",
        s.agent_crashes, s.sandboxes, s.container_starts, s.faults
    );
    println!("sim_lifecycles: {}", summary.lifecycles);
    println!("sim_violations: {}", summary.violations);
    println!("sim_lifecycles_per_s: {:.0}", summary.lifecycles as f64 / summary.wall.as_secs_f64());
    assert_clean(&summary);
}

/// A seed's lifecycle as it was drawn (not shrunk), with its trace, keeps every invariant:
/// seed 1 in `scripts/test`, SIM_SEED from `scripts/simulate --replay SEED` (where a failing
/// seed prints its trace, then fails); SIM_TRACE_LIVE prints the trace as it goes (for a
/// lifecycle that hangs).
#[test]
fn replay() {
    let seed = env("SIM_SEED").unwrap_or(1);
    let root = std::env::temp_dir().join(format!("podwright-sim-replay-{}-{seed}", std::process::id()));
    let sc = Scenario::new(seed);
    println!("seed {seed}\n{sc}");
    let (violation, trace) = crash::traced(&sc, &root);
    println!("trace:\n{}\n{violation:?}", trace.join("\n"));
    let _ = std::fs::remove_dir_all(root);
    assert!(violation.is_none(), "seed {seed} broke an invariant: {violation:?}");
    assert!(trace.iter().any(|l| l.contains("status #1")), "seed {seed} never reported a status");
}

// The checker itself: it must see what a broken agent would do.

fn checked_pod() -> Pod {
    pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "initContainers": [{"name": "i0"}],
        "containers": [{"name": "a0"}],
    }))
}

async fn sandbox(fake: &FakeRuntime) -> (String, PodSandboxConfig) {
    let config = PodSandboxConfig {
        metadata: Some(PodSandboxMetadata { name: "sim".into(), uid: "uid-lifecycle".into(), ..Default::default() }),
        ..Default::default()
    };
    (fake.run_pod_sandbox(&config, "").await.unwrap(), config)
}

async fn start(fake: &FakeRuntime, sandbox: &(String, PodSandboxConfig), name: &str, attempt: u32) -> String {
    let config = ContainerConfig {
        metadata: Some(ContainerMetadata { name: name.into(), attempt }),
        image: Some(ImageSpec { image: crash::IMAGE.into(), ..Default::default() }),
        ..Default::default()
    };
    let id = fake.create_container(&sandbox.0, &config, &sandbox.1).await.unwrap();
    fake.start_container(&id).await.unwrap();
    id
}

fn checker() -> (Arc<FakeRuntime>, Checker) {
    let clock = Clock::starting_at(epoch());
    let fake = FakeRuntime::new(clock);
    fake.add_image(crash::IMAGE);
    fake.record_changes(true);
    let checker = Checker::new(fake.clone(), &checked_pod(), Trace::new(false, clock));
    (fake, checker)
}

#[tokio::test(start_paused = true)]
async fn the_checker_sees_an_app_started_before_its_init_container_succeeded() {
    let (fake, mut checker) = checker();
    let sb = sandbox(&fake).await;
    start(&fake, &sb, "i0", 0).await;
    start(&fake, &sb, "a0", 0).await;
    checker.catch_up();
    let v = checker.violation.expect("a violation");
    assert_eq!((v.invariant, v.detail.as_str()), ("init-order", "a0 started in sb1 before i0 had succeeded there"));
}

#[tokio::test(start_paused = true)]
async fn the_checker_sees_an_init_container_run_again_where_it_succeeded() {
    let (fake, mut checker) = checker();
    let sb = sandbox(&fake).await;
    let first = start(&fake, &sb, "i0", 0).await;
    fake.exit_container(&first, 0);
    start(&fake, &sb, "a0", 0).await;
    checker.catch_up();
    assert_eq!(checker.violation, None);
    start(&fake, &sb, "i0", 1).await;
    checker.catch_up();
    assert_eq!(checker.violation.expect("a violation").invariant, "init-rerun");
}

fn update(phase: &str, restarts: i32) -> PodUpdate {
    let status: PodStatus = serde_json::from_value(serde_json::json!({
        "phase": phase,
        "containerStatuses": [{"name": "a0", "image": crash::IMAGE, "imageID": "", "ready": false, "restartCount": restarts}],
    }))
    .unwrap();
    PodUpdate { spec: Arc::new(checked_pod()), status: Some(Arc::new(status)), finished: false }
}

#[tokio::test(start_paused = true)]
async fn the_checker_sees_a_phase_leave_failed_and_a_restart_count_go_down() {
    let (_, mut checker) = checker();
    checker.status(&update("Running", 2), 1);
    checker.status(&update("Failed", 2), 1);
    checker.status(&update("Running", 2), 2);
    assert_eq!(checker.violation.take().expect("a violation").detail, "the phase went from Failed to Running");
    checker.status(&update("Failed", 1), 2);
    assert_eq!(checker.violation.expect("a violation").detail, "a0's restartCount went from 2 to 1");
}

/// The pipelined start's instance of `name` created ahead of its turn, in a pod of init
/// containers i0, i1 and app a0 while `runs` runs: it must not be in a status until the init
/// container before it (for the app, the last one) has succeeded; then it may (an instance that
/// never started). Returns the violation's detail before.
async fn check_created_ahead(runs: &str, name: &str, list: &str) -> String {
    let clock = Clock::starting_at(epoch());
    let fake = FakeRuntime::new(clock);
    fake.add_image(crash::IMAGE);
    fake.record_changes(true);
    let pod = pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "initContainers": [{"name": "i0"}, {"name": "i1"}],
        "containers": [{"name": "a0"}],
    }));
    let mut checker = Checker::new(fake.clone(), &pod, Trace::new(false, clock));
    let sb = sandbox(&fake).await;
    if runs == "i1" {
        let first = start(&fake, &sb, "i0", 0).await;
        fake.exit_container(&first, 0);
    }
    let running = start(&fake, &sb, runs, 0).await;
    let config = ContainerConfig {
        metadata: Some(ContainerMetadata { name: name.into(), attempt: 0 }),
        image: Some(ImageSpec { image: crash::IMAGE.into(), ..Default::default() }),
        ..Default::default()
    };
    let prepared = fake.create_container(&sb.0, &config, &sb.1).await.unwrap();
    let showing = |id: &str| {
        let status: PodStatus = serde_json::from_value(serde_json::json!({
            "phase": "Pending",
            list: [{"name": name, "image": crash::IMAGE, "imageID": "", "ready": false,
                "restartCount": 0, "containerID": format!("containerd://{id}"), "state": {"waiting": {}}}],
        }))
        .unwrap();
        PodUpdate { spec: Arc::new(pod.clone()), status: Some(Arc::new(status)), finished: false }
    };
    checker.status(&showing(&prepared), 1);
    let v = checker.violation.take().expect("a violation");
    assert_eq!(v.invariant, "prepared-unseen");
    fake.exit_container(&running, 0);
    checker.status(&showing(&prepared), 1);
    assert_eq!(checker.violation, None);
    v.detail
}

#[tokio::test(start_paused = true)]
async fn the_checker_sees_a_container_created_ahead_of_its_turn_in_a_status() {
    let detail = check_created_ahead("i0", "i1", "initContainerStatuses").await;
    assert_eq!(detail, "i1 shows i1#2, created ahead of its turn");
}

/// The app container is created while the last init container runs.
#[tokio::test(start_paused = true)]
async fn the_checker_sees_an_app_container_created_ahead_of_its_turn_in_a_status() {
    let detail = check_created_ahead("i1", "a0", "containerStatuses").await;
    assert_eq!(detail, "a0 shows a0#3, created ahead of its turn");
}
