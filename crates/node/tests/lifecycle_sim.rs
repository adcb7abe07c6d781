//! Probes, hooks and termination in virtual time: a pod worker with its prober against the
//! fake runtime, whose exec replies are scripted.

mod common;
use common::*;
use k8s_openapi::api::core::v1::Pod;
use podwright_runtime::ExecResult;
use podwright_runtime::fake::{Behaviour, Call, ExecBehaviour};
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

fn events(sim: &Sim, reason: &str) -> Vec<(String, i32)> {
    sim.events
        .snapshot()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| (e.message.unwrap_or_default(), e.count.unwrap_or(0)))
        .collect()
}

/// (virtual seconds, container) of every StopContainer call, with its timeout in seconds.
fn stops(sim: &Sim) -> Vec<(f64, String, u64)> {
    sim.fake
        .calls()
        .into_iter()
        .filter_map(|(t, c)| match c {
            Call::StopContainer { name, timeout } => Some((sim.at(t), name, timeout.as_secs())),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_failing_liveness_probe_restarts_the_container_every_threshold() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::RunForever]);
    sim.fake.script_exec("app", vec![ExecResult { exit_code: 1, stdout: b"not alive".to_vec(), stderr: vec![] }]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "containers": [{"name": "app", "livenessProbe": {"exec": exec("false"), "periodSeconds": 10, "failureThreshold": 3}}],
    }));
    let history = sim.run(p, Duration::from_secs(95)).await;
    // Probes at +0, +10, +20 fail; the third kills it and a new instance starts at once.
    let starts: Vec<f64> = sim.starts().into_iter().map(|(t, _)| t).collect();
    let gaps: Vec<i64> = starts.windows(2).map(|w| (w[1] - w[0]).round() as i64).collect();
    assert_eq!(gaps, vec![20, 20, 20, 20], "{starts:?}");
    assert_eq!(history.iter().map(|p| app(p).restart_count).max(), Some(4));
    let killing = events(&sim, "Killing");
    assert!(killing.contains(&("Container app failed liveness probe, will be restarted".into(), 4)), "{killing:?}");
    // Three failures for each of the four killed instances, two for the last one.
    assert_eq!(events(&sim, "Unhealthy"), vec![("Liveness probe failed: not alive".to_string(), 14)]);
    let last = app(history.last().unwrap());
    let previous = last.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(previous.exit_code, 143, "stopped with TERM");
}

#[tokio::test(start_paused = true)]
async fn liveness_kill_under_never_fails_the_pod_without_restart() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::RunForever]);
    sim.fake.script_exec("app", vec![ExecBehaviour::exit(1)]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Never",
        "containers": [{"name": "app", "livenessProbe": {"exec": exec("false"), "periodSeconds": 1, "failureThreshold": 2}}],
    }));
    let history = sim.run(p, Duration::from_secs(60)).await;
    assert_eq!(phase(history.last().unwrap()), "Failed");
    assert_eq!(sim.starts().len(), 1);
    assert!(events(&sim, "Killing").iter().any(|(m, _)| m == "Container app failed liveness probe"));
}

#[tokio::test(start_paused = true)]
async fn a_sidecars_startup_probe_gates_the_next_init_container() {
    let sim = Sim::new();
    sim.fake.script("side", vec![Behaviour::RunForever]);
    sim.fake.script_exec(
        "side",
        vec![ExecBehaviour::exit(1), ExecBehaviour::exit(1), ExecBehaviour::exit(1), ExecBehaviour::exit(0)],
    );
    sim.fake.script("i1", vec![Behaviour::Exit { code: 0, after: SECOND }]);
    sim.fake.script("app", vec![Behaviour::Exit { code: 0, after: SECOND }]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Never",
        "initContainers": [
            {"name": "side", "restartPolicy": "Always", "startupProbe": {"exec": exec("test -f /ready"), "periodSeconds": 2, "failureThreshold": 10}},
            {"name": "i1"},
        ],
        "containers": [{"name": "app"}],
    }));
    let history = sim.run(p, Duration::from_secs(60)).await;
    let starts = sim.starts();
    let names: Vec<&str> = starts.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["side", "i1", "app"]);
    // Three failures at +0, +2, +4, success at +6: only then does i1 start.
    assert_eq!((starts[1].0 - starts[0].0).round() as i64, 6, "{starts:?}");
    // Until then the sidecar runs but is not started, and the pod is Init:0/2.
    let before: Vec<&Pod> = history.iter().filter(|p| init(p, 0).state.as_ref().unwrap().running.is_some()).collect();
    assert_eq!(init(before[0], 0).started, Some(false));
    assert_eq!(phase(history.last().unwrap()), "Succeeded", "the sidecar does not keep the pod from completing");
}

#[tokio::test(start_paused = true)]
async fn a_sidecar_is_restarted_under_never_and_the_pod_still_succeeds() {
    let sim = Sim::new();
    sim.fake.script("side", vec![Behaviour::Exit { code: 1, after: SECOND }]);
    sim.fake.script("app", vec![Behaviour::Exit { code: 0, after: Duration::from_secs(40) }]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Never",
        "initContainers": [{"name": "side", "restartPolicy": "Always"}],
        "containers": [{"name": "app"}],
    }));
    let history = sim.run(p, Duration::from_secs(120)).await;
    let last = history.last().unwrap();
    assert_eq!(phase(last), "Succeeded");
    // Exits at +1, restarted at once, exits at +2, back-off 10 s, then 20 s.
    let side: Vec<f64> = sim.starts().into_iter().filter(|(_, n)| n == "side").map(|(t, _)| t).collect();
    let gaps: Vec<i64> = side.windows(2).map(|w| (w[1] - w[0]).round() as i64).collect();
    assert_eq!(&gaps[..3], &[1, 11, 21], "{side:?}");
    assert!(init(last, 0).restart_count >= 3);
}

#[tokio::test(start_paused = true)]
async fn readiness_drives_ready_and_the_pod_conditions() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::RunForever]);
    sim.fake.script_exec("app", vec![ExecBehaviour::exit(1), ExecBehaviour::exit(0), ExecBehaviour::exit(0)]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "containers": [{"name": "app", "readinessProbe": {"exec": exec("true"), "periodSeconds": 5, "successThreshold": 2}}],
    }));
    let history = sim.run(p, Duration::from_secs(30)).await;
    let ready_at = history.iter().position(|p| app(p).ready).expect("became ready");
    assert!(history[..ready_at].iter().all(|p| !app(p).ready));
    let conditions = history[ready_at].status.as_ref().unwrap().conditions.clone().unwrap();
    let status = |t: &str| conditions.iter().find(|c| c.type_ == t).map(|c| c.status.clone());
    assert_eq!((status("ContainersReady"), status("Ready")), (Some("True".into()), Some("True".into())));
    // Fail at +0, succeed at +5 and +10: ready from +10 (successThreshold 2).
    let running_at = history.iter().position(|p| app(p).state.as_ref().unwrap().running.is_some()).unwrap();
    assert!(ready_at > running_at);
    assert_eq!(events(&sim, "Unhealthy"), vec![("Readiness probe failed: ".to_string(), 1)]);
    assert_eq!(sim.fake.calls().iter().filter(|(_, c)| matches!(c, Call::ExecSync { .. })).count(), 7);
}

fn sidecar_pod(app_pre_stop: u64) -> Pod {
    pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 10,
        "initContainers": [
            {"name": "s1", "restartPolicy": "Always", "lifecycle": {"preStop": {"sleep": {"seconds": 1}}}},
            {"name": "s2", "restartPolicy": "Always"},
        ],
        "containers": [{"name": "app", "lifecycle": {"preStop": {"sleep": {"seconds": app_pre_stop}}}}],
    }))
}

#[tokio::test(start_paused = true)]
async fn deletion_stops_apps_first_then_sidecars_in_reverse_order() {
    let sim = Sim::new();
    for n in ["s1", "s2", "app"] {
        sim.fake.script(n, vec![Behaviour::RunForever]);
    }
    sim.run(sidecar_pod(3), Duration::from_secs(20)).await;
    // Deleted at +20. The app's preStop takes 3 s, then TERM with the 7 s left; s2 waits for
    // it and s1 (whose preStop ran at once) for s2, each with what is left of the 10 s.
    let expected = [(23.0, "app", 7), (23.0, "s2", 7), (23.0, "s1", 7)].map(|(t, n, g)| (t, n.to_string(), g));
    assert_eq!(stops(&sim), expected);
}

#[tokio::test(start_paused = true)]
async fn a_sidecars_wait_for_its_turn_is_bounded_by_the_grace_period() {
    let sim = Sim::new();
    sim.fake.script("s1", vec![Behaviour::RunForever]);
    sim.fake.script("s2", vec![Behaviour::RunForever]);
    sim.fake.script("app", vec![Behaviour::IgnoreTerm]);
    sim.run(sidecar_pod(1), Duration::from_secs(20)).await;
    // The app ignores TERM and is killed at +30; the sidecars stop waiting when the grace
    // period is over and get the minimum 2 s.
    let stops = stops(&sim);
    assert_eq!(stops[0], (21.0, "app".to_string(), 9));
    let mut rest: Vec<(f64, String, u64)> = stops[1..].to_vec();
    rest.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(rest, [(30.0, "s1".to_string(), 2), (30.0, "s2".to_string(), 2)]);
}

#[tokio::test(start_paused = true)]
async fn an_overrunning_pre_stop_is_cut_at_the_grace_period_and_the_stop_gets_two_seconds() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::IgnoreTerm]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 3,
        "containers": [{"name": "app", "lifecycle": {"preStop": {"sleep": {"seconds": 10}}}}],
    }));
    let history = sim.run(p, Duration::from_secs(5)).await;
    assert_eq!(stops(&sim), vec![(8.0, "app".to_string(), 2)]);
    let t = app(history.last().unwrap()).state.as_ref().unwrap().terminated.clone().unwrap();
    assert_eq!(t.exit_code, 137);
}

#[tokio::test(start_paused = true)]
async fn a_failing_pre_stop_is_reported_and_termination_goes_on() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::RunForever]);
    sim.fake.script_exec("app", vec![ExecBehaviour::exit(7)]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "containers": [{"name": "app", "lifecycle": {"preStop": {"exec": exec("exit 7")}}}],
    }));
    sim.run(p, Duration::from_secs(5)).await;
    assert_eq!(events(&sim, "FailedPreStopHook"), vec![("PreStopHook failed".to_string(), 1)]);
    assert_eq!(stops(&sim), vec![(5.0, "app".to_string(), 30)]);
}

#[tokio::test(start_paused = true)]
async fn a_failing_post_start_kills_the_container_and_it_is_restarted_with_back_off() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::RunForever]);
    sim.fake.script_exec("app", vec![ExecBehaviour::exit(1)]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "containers": [{"name": "app", "lifecycle": {"postStart": {"exec": exec("exit 1")}}}],
    }));
    let history = sim.run(p, Duration::from_secs(40)).await;
    assert!(events(&sim, "FailedPostStartHook").iter().any(|(m, _)| m == "PostStartHook failed"));
    assert!(events(&sim, "Killing").iter().any(|(m, _)| m == "FailedPostStartHook"));
    let starts: Vec<i64> = sim.starts().into_iter().map(|(t, _)| t.round() as i64).collect();
    assert_eq!(&starts[..3], &[0, 0, 10], "first restart at once, then back-off");
    // The container never shows Running: postStart had not completed.
    assert!(history.iter().all(|p| app(p).state.as_ref().unwrap().running.is_none()));
    assert!(history.iter().any(|p| waiting(app(p)) == Some("CrashLoopBackOff")));
}

/// Rule 3 of issue 8: app containers start one after another in spec order; the next is
/// created only once the one before has started and its `postStart` hook has completed.
#[tokio::test(start_paused = true)]
async fn rule_3_app_containers_start_one_after_another_after_each_post_start() {
    let sim = Sim::new();
    for n in ["proxy", "app", "last"] {
        sim.fake.script(n, vec![Behaviour::Exit { code: 0, after: Duration::from_secs(20) }]);
    }
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Never",
        "containers": [
            {"name": "proxy", "lifecycle": {"postStart": {"sleep": {"seconds": 3}}}},
            {"name": "app"},
            {"name": "last"},
        ],
    }));
    let history = sim.run(p, Duration::from_secs(60)).await;
    assert_eq!(phase(history.last().unwrap()), "Succeeded");
    let starts: Vec<(i64, String)> = sim.starts().into_iter().map(|(t, n)| (t.round() as i64, n)).collect();
    assert_eq!(starts, vec![(0, "proxy".to_string()), (3, "app".to_string()), (3, "last".to_string())]);
    // `app` was not even created before the proxy's hook completed.
    let creates: Vec<String> = sim
        .fake
        .calls()
        .into_iter()
        .filter_map(|(_, c)| match c {
            Call::CreateContainer { name, .. } => Some(name),
            _ => None,
        })
        .collect();
    assert_eq!(creates, vec!["proxy", "app", "last"]);
}

#[tokio::test(start_paused = true)]
async fn a_post_start_hook_holds_the_container_until_it_completes() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::Exit { code: 0, after: Duration::from_secs(10) }]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Never",
        "containers": [{"name": "app", "lifecycle": {"postStart": {"sleep": {"seconds": 3}}}}],
    }));
    let history = sim.run_timed(p, Duration::from_secs(60)).await;
    let (at, first_running) = history.iter().find(|(_, p)| app(p).state.as_ref().unwrap().running.is_some()).unwrap();
    assert_eq!((at.round() as i64, phase(first_running)), (3, "Running"));
    assert!(history.iter().filter(|(t, _)| *t < 3.0).all(|(_, p)| waiting(app(p)) == Some("ContainerCreating")));
    assert_eq!(phase(&history.last().unwrap().1), "Succeeded");
}

#[tokio::test(start_paused = true)]
async fn the_active_deadline_fails_a_pod_stuck_in_init_and_stops_it() {
    let sim = Sim::new();
    sim.fake.script("stuck", vec![Behaviour::RunForever]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "activeDeadlineSeconds": 30,
        "initContainers": [{"name": "stuck"}],
        "containers": [{"name": "app"}],
    }));
    let history = sim.run_timed(p, Duration::from_secs(300)).await;
    let (at, last) = history.last().unwrap();
    let status = last.status.as_ref().unwrap();
    assert_eq!((status.phase.as_deref(), status.reason.as_deref()), (Some("Failed"), Some("DeadlineExceeded")));
    // Counted from the pod's start, init included: stopped at +30 with the pod's grace period.
    assert_eq!(stops(&sim), vec![(30.0, "stuck".to_string(), 30)]);
    assert!(*at < 31.0, "finished at +{at}");
    assert_eq!(sim.starts().len(), 1, "the app never started");
    let deadline = events(&sim, "DeadlineExceeded");
    assert_eq!(deadline, vec![("Pod was active on the node longer than the specified deadline".to_string(), 1)]);
}

#[tokio::test(start_paused = true)]
async fn an_exec_probe_that_overruns_its_timeout_fails() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::RunForever]);
    sim.fake.script_exec("app", vec![ExecBehaviour::Slow(Duration::from_secs(5), ExecResult::default())]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "containers": [{"name": "app", "livenessProbe": {"exec": exec("sleep 5"), "timeoutSeconds": 2, "periodSeconds": 10}}],
    }));
    sim.run(p, Duration::from_secs(25)).await;
    // Attempts at +0, +10, +20 each time out after 2 s; the third failure kills the container
    // at +22, and the new instance's first attempt times out at +24.
    let unhealthy = events(&sim, "Unhealthy");
    assert_eq!(unhealthy, vec![("Liveness probe failed: command \"sh -c sleep 5\" timed out".to_string(), 4)]);
    assert_eq!(stops(&sim)[0], (22.0, "app".to_string(), 30));
}

/// A class whose handler the runtime lacks: one `FailedCreatePodSandBox` event and the pod
/// Failed with it, instead of a sandbox tried again after every back-off.
#[tokio::test(start_paused = true)]
async fn a_missing_runtime_handler_fails_the_pod() {
    let class = serde_json::from_value(serde_json::json!({"metadata": {"name": "vm"}, "handler": "kata"})).unwrap();
    let objects = podwright_node::objects::FixedObjects::default().with_runtime_classes([class]);
    let sim = Sim::with_objects(std::sync::Arc::new(objects));
    let mut p = pod(&[], &["app"], "Always");
    p.spec.as_mut().unwrap().runtime_class_name = Some("vm".into());
    let history = sim.run(p, Duration::from_secs(600)).await;
    let last = history.last().unwrap();
    let status = last.status.as_ref().unwrap();
    let message = "Failed to create pod sandbox: no runtime for \"kata\" is configured";
    assert_eq!(phase(last), "Failed");
    assert_eq!(status.reason.as_deref(), Some("FailedCreatePodSandBox"));
    assert_eq!(status.message.as_deref(), Some(message));
    assert_eq!(events(&sim, "FailedCreatePodSandBox"), vec![(message.to_string(), 1)]);
    let sandboxes = sim.fake.calls().into_iter().filter(|(_, c)| matches!(c, Call::RunPodSandbox { .. })).count();
    assert_eq!(sandboxes, 1);
}

#[tokio::test(start_paused = true)]
async fn images_are_pulled_for_the_pods_runtime_handler() {
    let class = serde_json::from_value(serde_json::json!({"metadata": {"name": "vm"}, "handler": "kata"})).unwrap();
    let objects = podwright_node::objects::FixedObjects::default().with_runtime_classes([class]);
    let sim = Sim::with_objects(std::sync::Arc::new(objects));
    sim.fake.add_runtime_handler("kata");
    sim.fake.allow_pull("localhost/busybox:1.36");
    let mut p = pod(&[], &["app"], "Never");
    let spec = p.spec.as_mut().unwrap();
    spec.runtime_class_name = Some("vm".into());
    spec.containers[0].image_pull_policy = Some("Always".into());
    sim.run(p, Duration::from_secs(60)).await;
    assert!(!events(&sim, "Started").is_empty(), "the container started on the pulled image");
    let pulls: Vec<_> = sim.fake.calls().into_iter().filter(|(_, c)| matches!(c, Call::PullImage { .. })).collect();
    let pulled = Call::PullImage { image: "localhost/busybox:1.36".into(), runtime_handler: "kata".into() };
    assert_eq!(pulls.into_iter().map(|(_, c)| c).collect::<Vec<_>>(), vec![pulled]);
}

#[tokio::test(start_paused = true)]
async fn restart_all_containers_runs_the_init_containers_again_in_the_same_sandbox() {
    let sim = Sim::new();
    let after = |s| Duration::from_secs(s);
    sim.fake.script("init", vec![Behaviour::Exit { code: 0, after: after(1) }]);
    sim.fake.script("side", vec![Behaviour::RunForever]);
    sim.fake.script("main", vec![Behaviour::RunForever]);
    sim.fake.script("worker", vec![Behaviour::Exit { code: 88, after: after(5) }, Behaviour::RunForever]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Never",
        "initContainers": [{"name": "init"}, {"name": "side", "restartPolicy": "Always"}],
        "containers": [
            {"name": "main", "lifecycle": {"preStop": {"exec": exec("sleep 5")}}},
            {"name": "worker", "restartPolicy": "Never",
             "restartPolicyRules": [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [88]}}]},
        ],
    }));
    let history = sim.run_timed(p, Duration::from_secs(60)).await;
    let sandboxes = sim.fake.calls().into_iter().filter(|(_, c)| matches!(c, Call::RunPodSandbox { .. })).count();
    assert_eq!(sandboxes, 1, "the sandbox stays");
    let order: Vec<String> = sim.starts().into_iter().map(|(_, n)| n).collect();
    assert_eq!(order, ["init", "side", "main", "worker", "init", "side", "main", "worker"]);
    // Killed at once by the reset: no preStop hook, no grace (the pod's own deletion at the
    // end of the run gives the second instance its 30 s).
    let main_stops: Vec<u64> = stops(&sim).into_iter().filter(|(_, n, _)| n == "main").map(|(_, _, t)| t).collect();
    assert_eq!(main_stops, vec![0, 30]);
    let hooks = sim.fake.calls().into_iter().filter(|(_, c)| matches!(c, Call::ExecSync { .. })).count();
    assert_eq!(hooks, 1, "only the deletion runs main's preStop hook");
    let condition = |p: &Pod| {
        let cs = p.status.as_ref().and_then(|s| s.conditions.as_ref());
        cs.and_then(|cs| cs.iter().find(|c| c.type_ == "AllContainersRestarting")).map(|c| c.status.clone())
    };
    let seen: Vec<String> = history.iter().filter_map(|(_, p)| condition(p)).collect();
    assert!(seen.contains(&"True".to_string()), "{seen:?}");
    // The last status before the run's own deletion at its end.
    let last = &history.iter().rfind(|(t, _)| *t < 60.0).unwrap().1;
    assert_eq!(condition(last).as_deref(), Some("False"));
    assert_eq!(phase(last), "Running");
    let st = last.status.as_ref().unwrap();
    let counts: Vec<(String, i32)> = st
        .init_container_statuses
        .iter()
        .flatten()
        .chain(st.container_statuses.iter().flatten())
        .map(|s| (s.name.clone(), s.restart_count))
        .collect();
    assert_eq!(counts, [("init", 1), ("side", 1), ("main", 1), ("worker", 1)].map(|(n, c)| (n.to_string(), c)));
}

/// The active deadline passes while the app waits out its crash back-off: the pod fails with
/// `DeadlineExceeded`, and the container ends lost (`ContainerStatusUnknown`, 137) with its last
/// exit as its last state, as the kubelet's `TerminatePod` leaves it.
#[tokio::test(start_paused = true)]
async fn the_deadline_during_a_crash_loop_reports_the_waiting_container_lost() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::Exit { code: 1, after: Duration::ZERO }]);
    let p = pod_with(serde_json::json!({
        "restartPolicy": "Always",
        "activeDeadlineSeconds": 25,
        "containers": [{"name": "app"}],
    }));
    let history = sim.run_timed(p, Duration::from_secs(120)).await;
    // Started at +0, +0 and +10; at +25 it waits for +30.
    assert_eq!(sim.starts().len(), 3, "{:?}", sim.starts());
    let (at, last) = history.last().unwrap();
    assert!(*at < 26.0, "finished at +{at}");
    let status = last.status.as_ref().unwrap();
    assert_eq!((status.phase.as_deref(), status.reason.as_deref()), (Some("Failed"), Some("DeadlineExceeded")));
    let app = app(last);
    let state = app.state.as_ref().and_then(|s| s.terminated.as_ref()).expect("terminated");
    assert_eq!((state.reason.as_deref(), state.exit_code), (Some("ContainerStatusUnknown"), 137));
    let previous = app.last_state.as_ref().and_then(|s| s.terminated.as_ref()).expect("last state");
    assert_eq!((previous.reason.as_deref(), previous.exit_code), (Some("Error"), 1));
    assert_eq!(app.restart_count, 2);
}

/// After a failed pull the worker looks again 10 s later: within the second, 20 s back-off the
/// reason is `ImagePullBackOff`, with the last pull's error in its message.
#[tokio::test(start_paused = true)]
async fn a_failed_pull_shows_the_back_off_at_the_next_sync_with_its_error() {
    let sim = Sim::new();
    let mut p = pod(&[], &["app"], "Always");
    p.spec.as_mut().unwrap().containers[0].image = Some("localhost/missing:1".into());
    let history = sim.run_timed(p, Duration::from_secs(35)).await;
    let shown: Vec<(i64, &str, &str)> = history
        .iter()
        .filter_map(|(at, p)| {
            let w = app(p).state.as_ref()?.waiting.as_ref()?;
            Some((at.round() as i64, w.reason.as_deref()?, w.message.as_deref().unwrap_or_default()))
        })
        .collect();
    // Pulls at +0 and +10 fail; the sync at +20 is inside the back-off that ends at +30.
    let failed = shown.iter().find(|(at, _, _)| *at == 10).expect("a status at +10");
    assert_eq!(failed.1, "ErrImagePull", "{shown:?}");
    let backoff = shown.iter().find(|(at, _, _)| *at == 20).expect("a status at +20");
    let want = format!("Back-off pulling image \"localhost/missing:1\": ErrImagePull: {}", failed.2);
    assert_eq!((backoff.1, backoff.2), ("ImagePullBackOff", want.as_str()), "{shown:?}");
}

/// A finished pod keeps its IP in its status once its sandbox is stopped and the runtime
/// reports none.
#[tokio::test(start_paused = true)]
async fn a_finished_pod_keeps_its_ip() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::Exit { code: 0, after: SECOND }]);
    let history = sim.run(pod(&[], &["app"], "Never"), Duration::from_secs(30)).await;
    let ip = |p: &Pod| p.status.as_ref().and_then(|s| s.pod_ip.clone());
    let first = history.iter().find_map(ip).expect("an IP while running");
    let last = history.last().unwrap();
    assert_eq!(phase(last), "Succeeded");
    assert_eq!(ip(last), Some(first));
    assert!(sim.fake.calls().iter().any(|(_, c)| matches!(c, Call::StopPodSandbox { .. })));
}
