//! The pipelined start against the fake runtime: containerd publishes an exit 0 (`TaskExit`)
//! tens of ms before its CRI record shows it; the app container, created while the last init
//! container ran, starts on that event, and the status already shows the init container ended,
//! with its termination message.

mod common;
use common::*;
use podwright_runtime::fake::{Behaviour, Call};
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
