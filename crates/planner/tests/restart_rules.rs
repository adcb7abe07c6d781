//! Container restart policies and rules (KEP-5307) and the `RestartAllContainers` action
//! (KEP-5532), as a 1.37 kubelet applies them.

mod common;
use common::*;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podwright_planner::{Action, ContainerKind::*, Phase, Plan, pod_status};

/// Sets a container's own `restartPolicy` and `restartPolicyRules` (given as JSON).
fn with_policy(mut pod: Pod, name: &str, policy: &str, rules: serde_json::Value) -> Pod {
    let spec = pod.spec.as_mut().unwrap();
    let all = spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut());
    let c = all.into_iter().find(|c| c.name == name).unwrap();
    c.restart_policy = Some(policy.into());
    c.restart_policy_rules = serde_json::from_value(rules).unwrap();
    pod
}

fn rule(action: &str, operator: &str, values: &[i32]) -> serde_json::Value {
    serde_json::json!({"action": action, "exitCodes": {"operator": operator, "values": values}})
}

fn phase(w: &World) -> Phase {
    Phase::parse(w.status().phase.as_deref().unwrap()).unwrap()
}

fn cond<'a>(s: &'a PodStatus, kind: &str) -> Option<&'a PodCondition> {
    s.conditions.iter().flatten().find(|c| c.type_ == kind)
}

fn resets(p: &Plan) -> Vec<(String, bool)> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::ResetContainer { id, live, .. } => Some((id.clone(), *live)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_rule_restarts_on_its_exit_code_and_not_on_others() {
    let p = with_policy(pod(&[], &["app"], "Never"), "app", "Never", serde_json::json!([rule("Restart", "In", &[42])]));
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, 42, 0, 1)).at(2);
    assert_eq!(starts(&w.plan()), vec![(App, 0, 1)]);
    assert_eq!(phase(&w), Phase::Running);

    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, 0, 0, 1)).at(2);
    assert!(starts(&w.plan()).is_empty());
    assert_eq!(phase(&w), Phase::Succeeded);
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, 1, 0, 1)).at(2);
    assert!(starts(&w.plan()).is_empty());
    assert_eq!(phase(&w), Phase::Failed);
}

#[test]
fn a_rule_restart_waits_out_the_crash_back_off() {
    let p = with_policy(pod(&[], &["app"], "Never"), "app", "Never", serde_json::json!([rule("Restart", "In", &[42])]));
    let first = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, 42, 0, 1)).at(2);
    let backoff = first.plan().backoff;
    let mut w = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 1, 42, 3, 4)).at(5);
    w.backoff = backoff;
    let plan = w.plan();
    assert!(starts(&plan).is_empty());
    assert_eq!(plan.wake_at, Some(t(14)));
    let st = w.status();
    let app = &st.container_statuses.as_ref().unwrap()[0];
    let waiting = app.state.as_ref().unwrap().waiting.as_ref().unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(st.phase.as_deref(), Some("Running"));
}

#[test]
fn rules_are_evaluated_in_order_and_not_in_matches_the_codes_left_out() {
    let rules = serde_json::json!([rule("Restart", "NotIn", &[0, 3]), rule("Restart", "In", &[3])]);
    let p = with_policy(pod(&[], &["app"], "Always"), "app", "Never", rules);
    let w = |code| World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, code, 0, 1)).at(2);
    assert_eq!(starts(&w(7).plan()), vec![(App, 0, 1)], "NotIn [0 3] matches 7");
    assert_eq!(starts(&w(3).plan()), vec![(App, 0, 1)], "the second rule matches 3");
    assert!(starts(&w(0).plan()).is_empty(), "no rule matches 0: the container's Never decides");
}

#[test]
fn an_app_container_never_in_an_on_failure_pod_is_not_restarted() {
    let p = with_policy(pod(&[], &["once", "other"], "OnFailure"), "once", "Never", serde_json::json!(null));
    let w = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "once", 0, 1, 0, 1))
        .with(exited(&p, "other", 0, 1, 0, 1))
        .at(2);
    // Only the container that follows the pod's OnFailure is restarted.
    assert_eq!(starts(&w.plan()), vec![(App, 1, 1)]);
    assert_eq!(phase(&w), Phase::Running);
    let done = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "once", 0, 1, 0, 1))
        .with(exited(&p, "other", 1, 0, 3, 4))
        .at(5);
    assert_eq!(phase(&done), Phase::Failed);
    assert!(starts(&done.plan()).is_empty());
}

#[test]
fn an_app_container_always_in_a_never_pod_is_restarted() {
    let p = with_policy(pod(&[], &["app"], "Never"), "app", "Always", serde_json::json!(null));
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, 0, 0, 1)).at(2);
    assert_eq!(starts(&w.plan()), vec![(App, 0, 1)]);
    assert_eq!(phase(&w), Phase::Running);
}

#[test]
fn an_init_container_never_that_fails_fails_an_always_pod() {
    let p = with_policy(pod(&["init"], &["app"], "Always"), "init", "Never", serde_json::json!(null));
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "init", 0, 1, 0, 1)).at(2);
    assert_eq!(phase(&w), Phase::Failed);
    let plan = w.plan();
    assert!(starts(&plan).is_empty(), "{plan:?}");
    assert!(plan.actions.iter().any(|a| matches!(a, Action::KillPod { .. })), "the sandbox goes: {plan:?}");
}

#[test]
fn an_init_container_on_failure_in_a_never_pod_is_restarted() {
    let p = with_policy(pod(&["init"], &["app"], "Never"), "init", "OnFailure", serde_json::json!(null));
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "init", 0, 1, 0, 1)).at(2);
    assert_eq!(phase(&w), Phase::Pending);
    assert_eq!(starts(&w.plan()), vec![(Init, 0, 1)]);
    // And once it succeeds, the app starts.
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "init", 1, 0, 3, 4)).at(5);
    assert_eq!(starts(&w.plan()), vec![(App, 0, 0)]);
}

#[test]
fn an_init_container_rule_restarts_it_in_a_never_pod() {
    let p = with_policy(
        pod(&["init"], &["app"], "Never"),
        "init",
        "Never",
        serde_json::json!([rule("Restart", "In", &[42])]),
    );
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "init", 0, 42, 0, 1)).at(2);
    assert_eq!(phase(&w), Phase::Pending);
    assert_eq!(starts(&w.plan()), vec![(Init, 0, 1)]);
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "init", 0, 1, 0, 1)).at(2);
    assert_eq!(phase(&w), Phase::Failed);
}

/// init, a sidecar and two apps, the second of which restarts every container on exit 88.
fn restart_all_pod() -> Pod {
    let p = pod(&["init", "+side"], &["main", "worker"], "Never");
    with_policy(p, "worker", "Never", serde_json::json!([rule("RestartAllContainers", "In", &[88])]))
}

fn running_pod(p: &Pod) -> World {
    World::new(p.clone())
        .with_sandbox()
        .with(exited(p, "init", 0, 0, 0, 1))
        .with(running(p, "side", 0, 1))
        .with(running(p, "main", 0, 2))
}

#[test]
fn restart_all_resets_every_container_the_source_last() {
    let p = restart_all_pod();
    let w = running_pod(&p).with(exited(&p, "worker", 0, 88, 2, 5)).at(6);
    let plan = w.plan();
    assert!(plan.reset);
    assert!(starts(&plan).is_empty(), "{plan:?}");
    assert_eq!(
        resets(&plan),
        vec![
            ("init-0".to_string(), false),
            ("side-0".to_string(), true),
            ("main-0".to_string(), true),
            ("worker-0".to_string(), false),
        ]
    );
    // No KillPod: the sandbox, its IP and volumes stay.
    assert!(!plan.actions.iter().any(|a| matches!(a, Action::KillPod { .. })));
    let st = w.status();
    let c = cond(&st, "AllContainersRestarting").expect("the condition");
    assert_eq!(c.status, "True");
    assert_eq!(c.reason.as_deref(), Some("RestartAllContainersStarted"));
    assert_eq!(c.message.as_deref(), Some("container exited with restart policy rule"));
    assert_eq!(st.phase.as_deref(), Some("Running"));
}

#[test]
fn after_the_reset_the_init_containers_run_again_in_the_same_sandbox() {
    let p = restart_all_pod();
    let first = running_pod(&p).with(exited(&p, "worker", 0, 88, 2, 5)).at(6);
    let mut w = World::new(p.clone()).with_sandbox().at(7);
    w.backoff = first.plan().backoff;
    // The worker kept the counts of the instances removed.
    w.observed.restart_counts =
        [("init", 0), ("side", 0), ("main", 0), ("worker", 0)].into_iter().map(|(n, c)| (n.to_string(), c)).collect();
    let plan = w.plan();
    assert!(!plan.actions.iter().any(|a| matches!(a, Action::CreateSandbox { .. })), "{plan:?}");
    assert_eq!(starts(&plan), vec![(Init, 0, 1)]);
    let previous = running_pod(&p).with(running(&p, "worker", 0, 2)).status();
    let st = pod_status(&w.ctx(), Some(&previous));
    assert_eq!(cond(&st, "AllContainersRestarting").unwrap().status, "False");
    assert_eq!(cond(&st, "Initialized").unwrap().status, "True", "a pod once initialized stays so");
    assert_eq!(st.phase.as_deref(), Some("Pending"));
    assert!(st.init_container_statuses.iter().flatten().all(|s| s.restart_count == 0));

    // The apps wait for the init sequence.
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "init", 1, 0, 8, 9)).at(10);
    assert_eq!(starts(&w.plan()), vec![(Sidecar, 1, 0)]);
}

#[test]
fn after_the_reset_each_container_shows_the_removed_instance_as_its_last_state() {
    let p = restart_all_pod();
    let mut w = World::new(p.clone()).with_sandbox().with(exited(&p, "init", 1, 0, 8, 9)).at(10);
    let ended = |code: i32, reason: &str, finished: i64| ContainerStateTerminated {
        exit_code: code,
        reason: Some(reason.into()),
        finished_at: Some(Time(t(finished))),
        ..Default::default()
    };
    w.observed.reset_terminations =
        [("init", ended(0, "Completed", 1)), ("main", ended(137, "Error", 6)), ("worker", ended(88, "Error", 5))]
            .into_iter()
            .map(|(n, e)| (n.to_string(), e))
            .collect();
    let st = w.status();
    let last = |name: &str| last_exit(&st, name);
    // init's new instance ran after the reset: the removed one is its last state. The apps,
    // not made again yet, show none: a waiting container with one would count as stopped, and
    // end this Never pod.
    assert_eq!(last("init"), Some(0));
    assert_eq!(last("main"), None);
    assert_eq!(st.phase.as_deref(), Some("Pending"));
    let w = w.with(running(&p, "side", 1, 10)).with(running(&p, "main", 1, 11)).with(running(&p, "worker", 1, 11));
    let st = w.status();
    let last = |name: &str| last_exit(&st, name);
    assert_eq!(last("main"), Some(137));
    assert_eq!(last("worker"), Some(88));
    assert_eq!(last("side"), None, "nothing was removed of it");
    assert_eq!(st.phase.as_deref(), Some("Running"));

    // Once an instance after the reset has ended, it is the last state.
    let mut w = w.at(14);
    w.observed.containers.retain(|c| c.name != "main");
    let w = w.with(exited(&p, "main", 1, 3, 11, 12)).with(running(&p, "main", 2, 13));
    assert_eq!(last_exit(&w.status(), "main"), Some(3));
}

/// The exit code of a container's last state.
fn last_exit(st: &PodStatus, name: &str) -> Option<i32> {
    let all = st.init_container_statuses.iter().chain(st.container_statuses.iter()).flatten();
    let s = all.into_iter().find(|s| s.name == name).unwrap();
    s.last_state.as_ref().and_then(|l| l.terminated.as_ref()).map(|t| t.exit_code)
}

#[test]
fn a_source_that_exits_again_waits_out_the_back_off_before_the_next_reset() {
    let p = restart_all_pod();
    let first = running_pod(&p).with(exited(&p, "worker", 0, 88, 2, 5)).at(6);
    let mut w = running_pod(&p).with(exited(&p, "worker", 1, 88, 20, 21)).at(22);
    w.backoff = first.plan().backoff;
    let plan = w.plan();
    assert!(resets(&plan).is_empty() && !plan.reset, "{plan:?}");
    assert_eq!(plan.wake_at, Some(t(31)));
    let st = w.status();
    assert_eq!(cond(&st, "AllContainersRestarting").unwrap().status, "False");
    let worker = st.container_statuses.iter().flatten().find(|s| s.name == "worker").unwrap();
    let waiting = worker.state.as_ref().unwrap().waiting.as_ref().unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(resets(&w.clone().at(31).plan()).len(), 4);
}

#[test]
fn a_sidecar_or_init_container_may_restart_every_container() {
    let rules = serde_json::json!([rule("RestartAllContainers", "In", &[7])]);
    let p = with_policy(pod(&["init", "+side"], &["main"], "Never"), "side", "Always", rules);
    let w = running_pod(&p).with(exited(&p, "side", 1, 7, 3, 4)).at(5);
    // The sidecar's own entry is replaced: it is not running beside the reset.
    let w = World {
        observed: {
            let mut o = w.observed.clone();
            o.containers.retain(|c| c.id != "side-0");
            o
        },
        ..w
    };
    assert_eq!(resets(&w.plan()).last().map(|r| r.0.as_str()), Some("side-1"));

    let rules = serde_json::json!([rule("RestartAllContainers", "NotIn", &[0])]);
    let p = with_policy(pod(&["init"], &["main"], "Never"), "init", "Never", rules);
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "init", 0, 3, 0, 1)).at(2);
    assert_eq!(phase(&w), Phase::Pending, "a reset is no failure");
    assert_eq!(resets(&w.plan()), vec![("init-0".to_string(), false)]);
}

#[test]
fn the_condition_belongs_to_pods_that_can_restart_every_container() {
    let p = pod(&[], &["app"], "Always");
    let w = World::new(p.clone()).with_sandbox().with(running(&p, "app", 0, 0));
    assert!(cond(&w.status(), "AllContainersRestarting").is_none());

    let p = restart_all_pod();
    let w = running_pod(&p).with(running(&p, "worker", 0, 2));
    let st = w.status();
    let c = cond(&st, "AllContainersRestarting").unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_deref()), ("False", None));

    let done = running_pod(&p).with(exited(&p, "worker", 0, 1, 2, 3));
    let done = World {
        observed: {
            let mut o = done.observed.clone();
            o.containers.retain(|c| c.name != "side" && c.name != "main");
            o.containers.push(exited(&p, "main", 0, 0, 2, 3));
            o.containers.push(exited(&p, "side", 0, 137, 1, 4));
            o
        },
        ..done
    };
    let st = done.status();
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    let c = cond(&st, "AllContainersRestarting").unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_deref()), ("False", Some("PodFailed")));
}

#[test]
fn a_deleted_pod_restarts_nothing() {
    let p = restart_all_pod();
    let mut w = running_pod(&p).with(exited(&p, "worker", 0, 88, 2, 5)).at(6);
    w.deleting = true;
    let plan = w.plan();
    assert!(resets(&plan).is_empty() && !plan.reset);
    assert_eq!(cond(&w.status(), "AllContainersRestarting").unwrap().status, "False");
}
