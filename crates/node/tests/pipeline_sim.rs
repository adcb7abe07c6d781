//! The pipelined start against the fake runtime: containerd publishes an exit 0 (`TaskExit`)
//! tens of ms before its CRI record shows it; the app container, created while the last init
//! container ran, starts on that event, and the status already shows the init container ended,
//! with its termination message.

mod common;
use common::*;
use podwright_runtime::RuntimeError;
use podwright_runtime::fake::{Behaviour, Call, CallFault, Change};
use std::time::Duration;

#[tokio::test(start_paused = true)]
async fn an_exit_0_published_ahead_of_its_record_starts_the_app_prepared_meanwhile() {
    let sim = Sim::new();
    sim.fake.set_call_log(true);
    sim.fake.script("i1", vec![Behaviour::RunForever]);
    sim.fake.script("app", vec![Behaviour::RunForever]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Never",
        "initContainers": [{"name": "i1"}],
        "containers": [{"name": "app"}],
    }));
    let uid = p.metadata.uid.clone().unwrap();
    let message = podwright_node::layout::termination_message(sim.root(), &uid, "i1", 0);
    let (fake, early) = (sim.fake.clone(), std::sync::Arc::new(std::sync::Mutex::new(None)));
    let (fake2, early2) = (sim.fake.clone(), early.clone());
    let steps: Vec<(f64, Step)> = vec![
        (
            5.0,
            Box::new(move |_| {
                std::fs::write(&message, "initialized").unwrap();
                *early2.lock().unwrap() = fake2.publish_completion("i1");
            }),
        ),
        // The record shows the exit much later than containerd ever takes, to tell them apart.
        (10.0, Box::new(move |_| assert!(fake.exit_container(early.lock().unwrap().as_deref().unwrap(), 0)))),
    ];
    let history = sim.run_steps(p, Duration::from_secs(20), steps).await;
    let at = |want: &dyn Fn(&Call) -> bool| sim.fake.calls().into_iter().find(|(_, c)| want(c)).map(|(t, _)| sim.at(t));
    let created = at(&|c| matches!(c, Call::CreateContainer { name, .. } if name == "app")).unwrap();
    let started = at(&|c| matches!(c, Call::StartContainer { name } if name == "app")).unwrap();
    assert!(created < 5.0, "the app was created while i1 ran: {created}");
    assert!((5.0..5.1).contains(&started), "the app started on the event, not the record: {started}");
    // Before the record: i1 shown ended as the record will say, the pod initialized and running.
    let (t, before) = history.iter().find(|(_, p)| phase(p) == "Running").unwrap();
    assert!(*t < 10.0, "{t}");
    let ended = init(before, 0).state.as_ref().unwrap().terminated.clone().unwrap();
    assert_eq!((ended.exit_code, ended.reason.as_deref()), (0, Some("Completed")));
    assert_eq!(ended.message.as_deref(), Some("initialized"));
    assert!(app(before).state.as_ref().unwrap().running.is_some(), "{:?}", app(before));
    // Before i1 ended, the app was in no status: waiting PodInitializing, no ID.
    for (_, p) in history.iter().filter(|(t, _)| *t < 5.0) {
        assert_eq!((waiting(app(p)), app(p).container_id.as_deref()), (Some("PodInitializing"), None));
    }
}

/// The app container, prepared with the start of the last init container in a sandbox that
/// dies while that one runs, and whose removal the runtime refuses for a while: the pod runs
/// again in a new sandbox with a new app instance, whose events are all recorded; the stranded
/// one is never started, stopped or shown, and goes once the runtime lets it, long before the
/// pod does, without a removal asked in a loop meanwhile.
#[tokio::test(start_paused = true)]
async fn a_prepared_app_stranded_in_a_dead_sandbox_goes_unseen_once_it_can() {
    let sim = Sim::new();
    sim.fake.set_call_log(true);
    sim.fake.record_changes(true);
    sim.fake.script("i1", vec![Behaviour::RunForever, Behaviour::Exit { code: 0, after: Duration::from_secs(1) }]);
    let clock = sim.fake.clock();
    let until = epoch() + Duration::from_secs(30);
    sim.fake.set_call_faults(move |c| {
        let refused = matches!(c, Call::RemoveContainer { name } if name == "app") && clock.now() < until;
        refused.then(|| CallFault::Fail(RuntimeError::Failed("refused".into())))
    });
    let p = pod(&["i1"], &["app"], "Always");
    let fake = sim.fake.clone();
    let kill: Step = Box::new(move |_| {
        let first = fake.changes(0).into_iter().find_map(|(_, c)| match c {
            Change::SandboxReady { id, .. } => Some(id),
            _ => None,
        });
        assert!(fake.kill_sandbox(&first.unwrap()));
    });
    let history = sim.run_steps(p, Duration::from_secs(60), vec![(3.0, kill)]).await;
    let changes = sim.fake.changes(0);
    let apps: Vec<String> = changes
        .iter()
        .filter_map(|(_, c)| match c {
            Change::ContainerCreated { id, name, .. } if name == "app" => Some(id.clone()),
            _ => None,
        })
        .collect();
    let [stranded, new] = &apps[..] else { panic!("two app instances: {apps:?}") };
    assert!(!changes.iter().any(|(_, c)| matches!(c, Change::ContainerStarted { id } if id == stranded)));
    let removed = changes.iter().find_map(|(t, c)| match c {
        Change::ContainerRemoved { id } if id == stranded => Some(sim.at(*t)),
        _ => None,
    });
    assert!(removed.is_some_and(|t| (30.0..32.0).contains(&t)), "removed once it could: {removed:?}");
    // Asked again about once a second, not in a loop.
    let asked =
        sim.fake.calls().iter().filter(|(_, c)| matches!(c, Call::RemoveContainer { name } if name == "app")).count();
    assert!(asked <= 2, "the successful removals are logged, the refused ones not: {asked}");
    let shows = |p: &k8s_openapi::api::core::v1::Pod, id: &str| {
        let id = format!("containerd://{id}");
        let a = app(p);
        let last = a.last_state.as_ref().and_then(|s| s.terminated.as_ref()).and_then(|t| t.container_id.clone());
        a.container_id.as_deref() == Some(id.as_str()) || last.as_deref() == Some(id.as_str())
    };
    assert!(!history.iter().any(|(_, p)| shows(p, stranded)), "the stranded app was shown");
    let running = history.iter().find(|(_, p)| phase(p) == "Running").map(|(_, p)| p).expect("the pod ran again");
    // Its attempt is the one after the stranded one's, which containerd reserves while it is
    // there.
    assert!(shows(running, new) && app(running).restart_count == 1, "{:?}", app(running));
    // Its events are the new instance's, once each, none held back or lost.
    let reasons: Vec<String> = sim
        .events
        .snapshot()
        .into_iter()
        .filter(|e| e.involved_object.field_path.as_deref() == Some("spec.containers{app}"))
        .filter_map(|e| e.reason)
        .collect();
    let count = |r: &str| reasons.iter().filter(|x| *x == r).count();
    assert_eq!((count("Created"), count("Started")), (1, 1), "{reasons:?}");
    // The one stop is the new instance's, at the deletion.
    let stops =
        sim.fake.calls().into_iter().filter(|(_, c)| matches!(c, Call::StopContainer { name, .. } if name == "app"));
    assert_eq!(stops.map(|(t, _)| sim.at(t) >= 60.0).collect::<Vec<_>>(), vec![true]);
}
