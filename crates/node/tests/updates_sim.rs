//! The node layer in virtual time: pods updated while they run (a new app image, a new init
//! image, a lowered deadline), deletions with the caller's grace period, and a worker whose
//! owner went away.

mod common;
use common::*;
use k8s_openapi::api::core::v1::Pod;
use podwright_node::{Node, PodWorkers};
use podwright_runtime::RuntimeService;
use podwright_runtime::cri_api::{ContainerState, PodSandboxState};
use podwright_runtime::fake::{Behaviour, Call};
use podwright_runtime::{Clock, FakeRuntime};
use std::time::Duration;

const NEW_IMAGE: &str = "localhost/busybox-new:1";

fn update(p: Pod) -> Step {
    Box::new(move |w: &PodWorkers| w.update(p).unwrap())
}

/// The last status published before virtual second `t`.
fn at(history: &[(f64, Pod)], t: f64) -> &Pod {
    &history.iter().rev().find(|(s, _)| *s < t).expect("a status before then").1
}

fn app_named<'a>(p: &'a Pod, name: &str) -> &'a k8s_openapi::api::core::v1::ContainerStatus {
    p.status.as_ref().unwrap().container_statuses.iter().flatten().find(|s| s.name == name).unwrap()
}

fn killing(sim: &Sim) -> Vec<(Option<String>, String)> {
    sim.events
        .snapshot()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Killing"))
        .map(|e| (e.involved_object.field_path, e.message.unwrap_or_default()))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_new_app_image_restarts_only_that_container() {
    let sim = Sim::new();
    sim.fake.add_image(NEW_IMAGE);
    sim.fake.script("i1", vec![Behaviour::Exit { code: 0, after: Duration::from_secs(1) }]);
    let p = pod(&["i1"], &["a", "b"], "Always");
    let steps = vec![(10.0, update(with_image(&p, "a", NEW_IMAGE)))];
    let history = sim.run_steps(p, Duration::from_secs(30), steps).await;

    let starts = sim.starts();
    let names: Vec<&str> = starts.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["i1", "a", "b", "a"], "{starts:?}");
    assert_eq!(starts[3].0, 10.0, "restarted as soon as the update came: {starts:?}");
    assert_eq!(
        killing(&sim)[0],
        (Some("spec.containers{a}".into()), "Container a definition changed, will be restarted".into())
    );
    let before = at(&history, 10.0);
    let after = at(&history, 30.0);
    assert_eq!(app_named(after, "a").restart_count, 1);
    assert_eq!(app_named(after, "a").image, NEW_IMAGE);
    assert!(app_named(after, "a").state.as_ref().unwrap().running.is_some());
    assert_eq!(app_named(after, "b").restart_count, 0);
    assert_eq!(app_named(after, "b").container_id, app_named(before, "b").container_id, "b kept running");
    assert_eq!(phase(after), "Running");
    // Nothing else was stopped before the deletion at 30 s.
    let stops: Vec<(f64, String)> = sim
        .fake
        .calls()
        .into_iter()
        .filter_map(|(t, c)| match c {
            Call::StopContainer { name, .. } | Call::StopPodSandbox { name } => Some((sim.at(t), name)),
            _ => None,
        })
        .filter(|(t, _)| *t < 30.0)
        .collect();
    assert_eq!(stops, vec![(10.0, "a".to_string())]);
}

#[tokio::test(start_paused = true)]
async fn a_new_init_image_reruns_every_init_container_in_a_new_sandbox() {
    let sim = Sim::new();
    sim.fake.add_image(NEW_IMAGE);
    let second = Duration::from_secs(1);
    sim.fake.script("i1", vec![Behaviour::Exit { code: 0, after: second }]);
    sim.fake.script("i2", vec![Behaviour::Exit { code: 0, after: second }]);
    let p = pod(&["i1", "i2"], &["app"], "Always");
    let steps = vec![(10.0, update(with_image(&p, "i2", NEW_IMAGE)))];
    let history = sim.run_steps(p, Duration::from_secs(30), steps).await;

    let sandboxes: Vec<(f64, u32)> = sim
        .fake
        .calls()
        .into_iter()
        .filter_map(|(t, c)| match c {
            Call::RunPodSandbox { attempt, .. } => Some((sim.at(t), attempt)),
            _ => None,
        })
        .collect();
    assert_eq!(sandboxes, vec![(0.0, 0), (10.0, 1)]);
    let starts = sim.starts();
    let names: Vec<&str> = starts.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["i1", "i2", "app", "i1", "i2", "app"], "{starts:?}");
    let times: Vec<f64> = starts.iter().map(|(t, _)| *t).collect();
    assert_eq!(times, [0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
    // The statuses follow the new sandbox: i1 running again, then i2.
    let state = |t: f64, i: usize| {
        let s = init(at(&history, t), i).state.clone().unwrap();
        (s.running.is_some(), s.terminated.map(|t| t.exit_code))
    };
    assert_eq!((state(10.5, 0), state(10.5, 1)), ((true, None), (false, None)));
    assert_eq!((state(11.5, 0), state(11.5, 1)), ((false, Some(0)), (true, None)));
    let after = at(&history, 30.0);
    assert_eq!(phase(after), "Running");
    assert_eq!(init(after, 1).image, NEW_IMAGE);
    assert_eq!(app(after).restart_count, 1);
}

#[tokio::test(start_paused = true)]
async fn a_lowered_deadline_fails_the_pod_at_once() {
    let sim = Sim::new();
    let p = pod(&[], &["app"], "Always");
    let mut lowered = p.clone();
    lowered.spec.as_mut().unwrap().active_deadline_seconds = Some(5);
    let history = sim.run_steps(p, Duration::from_secs(60), vec![(20.0, update(lowered))]).await;
    let (t, last) = history.last().unwrap();
    assert_eq!(*t, 20.0);
    assert_eq!(phase(last), "Failed");
    assert_eq!(last.status.as_ref().unwrap().reason.as_deref(), Some("DeadlineExceeded"));
}

#[tokio::test(start_paused = true)]
async fn a_deletion_stops_with_the_grace_period_of_the_call() {
    for (grace, want) in [(None, 30), (Some(7), 7), (Some(0), 0)] {
        let sim = Sim::new();
        let p = pod(&[], &["app"], "Always");
        let uid = p.metadata.uid.clone().unwrap();
        let delete: Step = Box::new(move |w: &PodWorkers| assert!(w.delete(&uid, grace)));
        sim.run_steps(p, Duration::from_secs(60), vec![(5.0, delete)]).await;
        let stops: Vec<(f64, u64)> = sim
            .fake
            .calls()
            .into_iter()
            .filter_map(|(t, c)| match c {
                Call::StopContainer { timeout, .. } => Some((sim.at(t), timeout.as_secs())),
                _ => None,
            })
            .collect();
        assert_eq!(stops, vec![(5.0, want)], "grace {grace:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_later_deletion_shortens_the_grace_period_never_lengthens_it() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::IgnoreTerm]);
    let p = pod(&[], &["app"], "Always");
    let (u1, u2) = (p.metadata.uid.clone().unwrap(), p.metadata.uid.clone().unwrap());
    let steps: Vec<(f64, Step)> = vec![
        (5.0, Box::new(move |w: &PodWorkers| assert!(w.delete(&u1, Some(20))))),
        // Before the worker's next pass: folded into the first.
        (5.0, Box::new(move |w: &PodWorkers| assert!(w.delete(&u2, Some(40))))),
    ];
    let history = sim.run_steps(p, Duration::from_secs(120), steps).await;
    assert_eq!(history.last().unwrap().0, 25.0, "stopped 20 s after the deletion");
}

#[tokio::test(start_paused = true)]
async fn a_worker_whose_owner_went_away_does_not_spin() {
    // A runtime of its own: a `Sim` runs a node (and its relist) on its runtime too.
    let clock = Clock::starting_at(epoch());
    let fake = FakeRuntime::new(clock);
    fake.add_image("localhost/busybox:1.36");
    let root = std::env::temp_dir().join(format!("pw-sim-owner-{}", std::process::id()));
    let workers = Node::new(fake.clone(), &root).clock(clock).build();
    workers.update(pod(&[], &["app"], "Always")).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(workers.latest()[0].phase(), Some("Running"));
    drop(workers);

    let passes = || fake.stats().list_containers;
    let before = passes();
    for _ in 0..1000 {
        tokio::task::yield_now().await;
    }
    assert!(passes() <= before + 1, "{} passes with nothing to do", passes() - before);
    // While nothing changes the worker does no pass; only the node-wide relist lists the
    // runtime, cheaply, every 5 s (sandboxes and containers: two listings).
    let relists = || fake.stats().list_states;
    let relists_before = relists();
    tokio::time::sleep(Duration::from_secs(60)).await;
    // One pass when the relist first lists the pod (a change before that listing would
    // otherwise never show as one).
    assert!(passes() <= before + 2, "{} passes in 60 s with nothing to do", passes() - before);
    let relists = (relists() - relists_before) / 2;
    assert!((11..=13).contains(&relists), "{relists} relists in 60 s");
    // It goes on by itself: a crash is seen and the container restarted.
    let listed = fake.list_containers(&Default::default()).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(fake.exit_container(&listed[0].id, 1));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let listed = fake.list_containers(&Default::default()).await.unwrap();
    let running = listed.iter().filter(|c| c.state == ContainerState::ContainerRunning as i32).count();
    assert_eq!((listed.len(), running), (2, 1), "restarted at once after the crash: {listed:?}");
    let _ = std::fs::remove_dir_all(root);
}

/// `abort` is a SIGKILL of the agent: the workers stop where they are, publish nothing more and
/// stop nothing; the containers run on in the runtime.
#[tokio::test(start_paused = true)]
async fn aborted_workers_stop_where_they_are_and_leave_the_pod_running() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::Exit { code: 1, after: Duration::from_secs(5) }]);
    sim.workers.update(pod(&[], &["app"], "Always")).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(sim.workers.latest()[0].phase(), Some("Running"));
    sim.workers.abort();
    let calls = sim.fake.calls().len();
    // The app exits at +5: nobody restarts it, nobody stops the sandbox.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(sim.fake.calls().len(), calls, "no call after the abort: {:?}", &sim.fake.calls()[calls..]);
    let sandboxes = sim.fake.list_pod_sandboxes(&Default::default()).await.unwrap();
    assert_eq!(sandboxes[0].state, PodSandboxState::SandboxReady as i32);
    assert_eq!(sim.workers.latest()[0].phase(), Some("Running"), "nothing more published");
}

#[tokio::test(start_paused = true)]
async fn a_dead_sandbox_is_noticed_by_the_node_wide_relist() {
    let sim = Sim::new();
    sim.workers.update(pod(&[], &["app"], "Always")).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(sim.workers.latest()[0].phase(), Some("Running"));
    let first = sim.fake.list_pod_sandboxes(&Default::default()).await.unwrap();
    // Its exit event names the sandbox, which no worker registers: only the relist sees it.
    assert!(sim.fake.kill_sandbox(&first[0].id));
    tokio::time::sleep(Duration::from_secs(6)).await;
    let now = sim.fake.list_pod_sandboxes(&Default::default()).await.unwrap();
    let ready: Vec<_> = now.iter().filter(|s| s.state == PodSandboxState::SandboxReady as i32).collect();
    assert_eq!(ready.len(), 1, "a new sandbox within one relist period: {now:?}");
    assert_ne!(ready[0].id, first[0].id);
}

/// kubernetes#90271: once initialized in a sandbox, a pod whose init containers' records are
/// removed (by hand, by garbage collection) does not run them again beside its crash-looping
/// app: the worker wrote down where it initialized.
#[tokio::test(start_paused = true)]
async fn init_containers_whose_records_are_removed_do_not_run_again() {
    let sim = Sim::new();
    sim.fake.script("init", vec![Behaviour::Exit { code: 0, after: Duration::ZERO }]);
    sim.fake.script("app", vec![Behaviour::Exit { code: 1, after: Duration::from_secs(1) }; 20]);
    sim.workers.update(pod(&["init"], &["app"], "Always")).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let listed = sim.fake.list_containers(&Default::default()).await.unwrap();
    let init = listed.iter().find(|c| c.metadata.as_ref().is_some_and(|m| m.name == "init")).expect("init ran");
    assert_eq!(init.state, ContainerState::ContainerExited as i32);
    sim.fake.remove_container(&init.id).await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let creates = |name: &str| {
        let calls = sim.fake.calls();
        calls.iter().filter(|(_, c)| matches!(c, Call::CreateContainer { name: n, .. } if n == name)).count()
    };
    assert_eq!(creates("init"), 1, "the init container ran again");
    assert!(creates("app") >= 3, "the app goes on crash-looping: {}", creates("app"));
}
