//! Pod workers against the fake runtime in virtual time: back-off of 10, 20, 40 s runs in
//! milliseconds, and every runtime call is logged with its virtual time.

mod common;
use common::*;
use podwright_runtime::fake::{Behaviour, Call};
use std::time::Duration;

#[tokio::test(start_paused = true)]
async fn init_containers_run_in_order_then_the_app() {
    let sim = Sim::new();
    let second = Duration::from_secs(1);
    sim.fake.script("i1", vec![Behaviour::Exit { code: 0, after: 2 * second }]);
    sim.fake.script("i2", vec![Behaviour::Exit { code: 0, after: 3 * second }]);
    sim.fake.script("app", vec![Behaviour::Exit { code: 0, after: second }]);
    let history = sim.run(pod(&["i1", "i2"], &["app"], "Never"), Duration::from_secs(60)).await;
    let last = history.last().unwrap();
    assert_eq!(phase(last), "Succeeded");
    let starts = sim.starts();
    let names: Vec<&str> = starts.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["i1", "i2", "app"]);
    // Each starts only when the one before has exited (virtual seconds).
    assert!(starts[1].0 >= starts[0].0 + 2.0 && starts[1].0 < starts[0].0 + 2.5, "{starts:?}");
    assert!(starts[2].0 >= starts[1].0 + 3.0 && starts[2].0 < starts[1].0 + 3.5, "{starts:?}");
    // While init ran, the app waited with PodInitializing.
    assert!(history.iter().filter(|p| phase(p) == "Pending").all(|p| waiting(app(p)) == Some("PodInitializing")));
    // Everything it started was stopped; nothing runs.
    assert!(sim.fake.calls().iter().any(|(_, c)| matches!(c, Call::StopPodSandbox { .. })));
}

#[tokio::test(start_paused = true)]
async fn failing_init_under_always_backs_off_10_20_40_and_the_app_never_starts() {
    let sim = Sim::new();
    sim.fake.script("i1", vec![Behaviour::Exit { code: 1, after: Duration::ZERO }]);
    sim.fake.script("app", vec![Behaviour::RunForever]);
    let history = sim.run(pod(&["i1"], &["app"], "Always"), Duration::from_secs(100)).await;
    let starts = sim.starts();
    assert!(starts.iter().all(|(_, n)| n == "i1"), "the app container never starts: {starts:?}");
    let gaps: Vec<i64> = starts.windows(2).map(|w| (w[1].0 - w[0].0).round() as i64).collect();
    assert_eq!(&gaps[..4], &[0, 10, 20, 40], "{starts:?}");
    let restarts = history.iter().map(|p| init(p, 0).restart_count).max().unwrap();
    assert!(restarts >= 3, "restartCount {restarts}");
    // The app container stays PodInitializing and the init container shows the back-off.
    assert!(history.iter().all(|p| waiting(app(p)) == Some("PodInitializing")));
    assert!(history.iter().any(|p| waiting(init(p, 0)) == Some("CrashLoopBackOff")));
    assert!(history.iter().all(|p| phase(p) == "Pending" || phase(p) == "Failed"));
    let backoffs = sim.events.snapshot().into_iter().filter(|e| e.reason.as_deref() == Some("BackOff")).count();
    assert!(backoffs >= 1);
}

#[tokio::test(start_paused = true)]
async fn failing_init_under_never_fails_the_pod() {
    let sim = Sim::new();
    sim.fake.script("i1", vec![Behaviour::Exit { code: 3, after: Duration::from_secs(1) }]);
    let history = sim.run(pod(&["i1", "i2"], &["app"], "Never"), Duration::from_secs(60)).await;
    let last = history.last().unwrap();
    assert_eq!(phase(last), "Failed");
    let t = init(last, 0).state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!((t.exit_code, t.reason.as_deref()), (3, Some("Error")));
    assert_eq!(init(last, 0).restart_count, 0);
    assert_eq!(sim.starts().len(), 1, "nothing after the failed init container starts");
}

#[tokio::test(start_paused = true)]
async fn crash_looping_app_counts_restarts_and_reports_back_off() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::Exit { code: 2, after: Duration::ZERO }]);
    let history = sim.run(pod(&[], &["app"], "Always"), Duration::from_secs(80)).await;
    assert!(history.iter().any(|p| waiting(app(p)) == Some("CrashLoopBackOff")));
    let max = history.iter().map(|p| app(p).restart_count).max().unwrap();
    assert!(max >= 3, "{max}");
    let last = history.last().unwrap();
    assert_eq!(phase(last), "Failed", "deleted while crash looping: containers ended with errors");
}

#[tokio::test(start_paused = true)]
async fn missing_image_becomes_err_image_pull_and_nothing_is_left_running() {
    let sim = Sim::new();
    let mut p = pod(&[], &["app"], "Always");
    p.spec.as_mut().unwrap().containers[0].image = Some("localhost/missing:1".into());
    let history = sim.run(p, Duration::from_secs(30)).await;
    let reasons: Vec<&str> = history.iter().filter_map(|p| waiting(app(p))).collect();
    assert!(reasons.contains(&"ErrImagePull"), "{reasons:?}");
    let events = sim.events.snapshot();
    assert!(events.iter().any(|e| e.message.as_deref() == Some("Error: ErrImagePull")));
    assert!(events.iter().all(|e| e.involved_object.field_path.as_deref().is_none_or(|f| f == "spec.containers{app}")));
    let pulls = sim.fake.calls().iter().filter(|(_, c)| matches!(c, Call::PullImage { .. })).count();
    assert!((2..=3).contains(&pulls), "retried with back-off, not in a loop: {pulls}");
}

#[tokio::test(start_paused = true)]
async fn events_name_the_container_field_path_and_count_repeats() {
    let sim = Sim::new();
    sim.fake.script("init-mydb", vec![Behaviour::Exit { code: 0, after: Duration::ZERO }]);
    sim.fake.script("app", vec![Behaviour::Exit { code: 0, after: Duration::ZERO }]);
    sim.run(pod(&["init-mydb"], &["app"], "Never"), Duration::from_secs(30)).await;
    let events = sim.events.snapshot();
    let started = events
        .iter()
        .find(|e| {
            e.reason.as_deref() == Some("Started")
                && e.involved_object.field_path.as_deref() == Some("spec.initContainers{init-mydb}")
        })
        .expect("Started event for the init container");
    assert_eq!(started.message.as_deref(), Some("Started container init-mydb"));
    assert_eq!(started.count, Some(1));
}
