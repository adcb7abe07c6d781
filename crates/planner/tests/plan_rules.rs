//! The planner's rules, one table row or test per rule of the init-containers proposal and the
//! kubelet's `computePodActions`.

mod common;
use common::*;
use k8s_openapi::api::core::v1::Pod;
use podwright_planner::{
    Action, ContainerKind::*, ObservedContainer, PullPolicy, RunState, StartFailure, StartFailureReason,
};

#[test]
fn a_new_pod_gets_a_sandbox_first() {
    let w = World::new(pod(&["i1", "i2"], &["app"], "Always"));
    assert_eq!(w.plan().actions, vec![Action::CreateSandbox { attempt: 0 }]);
}

#[test]
fn init_containers_start_one_at_a_time_in_spec_order() {
    let p = pod(&["i1", "i2"], &["app"], "Always");
    let rows: Vec<(World, Vec<_>)> = vec![
        // Nothing ran yet: the first init container.
        (World::new(p.clone()).with_sandbox(), vec![(Init, 0, 0)]),
        // i1 running: wait for it, start nothing.
        (World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 1)), vec![]),
        // i1 done with 0: i2 next.
        (World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 1, 2)), vec![(Init, 1, 0)]),
        // i2 running: wait.
        (World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 1, 2)).with(running(&p, "i2", 0, 3)), vec![]),
        // Both done: the app container.
        (
            World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 1, 2)).with(exited(&p, "i2", 0, 0, 3, 4)),
            vec![(App, 0, 0)],
        ),
    ];
    for (i, (w, want)) in rows.iter().enumerate() {
        assert_eq!(starts(&w.plan()), *want, "row {i}");
    }
}

#[test]
fn app_containers_are_planned_in_spec_order_once_initialized() {
    let p = pod(&["i1"], &["a", "b", "c"], "Always");
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 1, 2));
    assert_eq!(starts(&w.plan()), vec![(App, 0, 0), (App, 1, 0), (App, 2, 0)]);
}

#[test]
fn a_pod_without_init_containers_starts_its_apps_at_once() {
    let p = pod(&[], &["a", "b"], "Never");
    let w = World::new(p).with_sandbox();
    assert_eq!(starts(&w.plan()), vec![(App, 0, 0), (App, 1, 0)]);
}

#[test]
fn failed_init_under_never_kills_the_pod_and_starts_nothing() {
    let p = pod(&["i1", "i2"], &["app"], "Never");
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 1, 1, 2));
    let plan = w.plan();
    assert_eq!(starts(&plan), vec![]);
    assert!(matches!(plan.actions[..], [Action::KillPod { .. }]));
}

#[test]
fn failed_init_restarts_at_once_the_first_time_then_backs_off() {
    for policy in ["Always", "OnFailure"] {
        let p = pod(&["i1"], &["app"], policy);
        // First failure: restarted immediately (no back-off entry yet), restartCount 1.
        let w = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 1, 1, 2)).at(2);
        let plan = w.plan();
        assert_eq!(starts(&plan), vec![(Init, 0, 1)], "{policy}");
        // Second failure right after: back-off of 10 s from its finish time.
        let mut w2 = World::new(p.clone())
            .with_sandbox()
            .with(exited(&p, "i1", 0, 1, 1, 2))
            .with(exited(&p, "i1", 1, 1, 3, 4))
            .at(4);
        w2.backoff = plan.backoff.clone();
        let plan2 = w2.plan();
        assert_eq!(starts(&plan2), vec![], "{policy}");
        assert_eq!(plan2.wake_at, Some(t(14)));
        assert_eq!(plan2.events[0].reason, "BackOff");
        // When the window has passed it restarts, and the next window doubles.
        let w3 = World { now: t(14), ..w2 };
        let plan3 = w3.plan();
        assert_eq!(starts(&plan3), vec![(Init, 0, 2)]);
        let key = plan3.backoff.entries.keys().next().unwrap().clone();
        assert_eq!(plan3.backoff.entries[&key].backoff_secs, 20);
    }
}

#[test]
fn app_containers_never_start_while_an_init_container_backs_off() {
    let p = pod(&["i1"], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 3, 1, 1, 2)).at(3);
    w.backoff.next(&podwright_planner::pod::init_containers(&p).next().unwrap().backoff_key(), t(0), t(0));
    assert!(starts(&w.plan()).iter().all(|(k, _, _)| *k != App));
}

#[test]
fn app_restart_follows_the_pod_restart_policy() {
    // (policy, exit code, restarted?)
    let rows = [
        ("Always", 0, true),
        ("Always", 1, true),
        ("OnFailure", 0, false),
        ("OnFailure", 2, true),
        ("Never", 0, false),
        ("Never", 1, false),
    ];
    for (policy, code, restarted) in rows {
        let p = pod(&[], &["app"], policy);
        let w = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, code, 1, 2)).at(2);
        let plan = w.plan();
        assert_eq!(!starts(&plan).is_empty(), restarted, "{policy} exit {code}");
        if !restarted {
            assert!(matches!(plan.actions[..], [Action::KillPod { .. }]), "{policy} exit {code}: {plan:?}");
        }
    }
}

#[test]
fn sidecar_starts_in_its_place_and_the_next_init_waits_for_it_to_be_started() {
    let p = pod(&["+side", "i1"], &["app"], "Never");
    let w = World::new(p.clone()).with_sandbox();
    assert_eq!(starts(&w.plan()), vec![(Sidecar, 0, 0)]);
    let w = World::new(p.clone()).with_sandbox().with(running(&p, "side", 0, 1));
    assert_eq!(starts(&w.plan()), vec![(Init, 1, 0)]);
}

#[test]
fn sidecar_is_restarted_even_under_never() {
    let p = pod(&["+side"], &["app"], "Never");
    let w =
        World::new(p.clone()).with_sandbox().with(exited(&p, "side", 0, 0, 1, 2)).with(running(&p, "app", 0, 2)).at(3);
    assert_eq!(starts(&w.plan()), vec![(Sidecar, 0, 1)]);
}

#[test]
fn finished_apps_stop_the_sidecars() {
    let p = pod(&["+side"], &["app"], "Never");
    let w =
        World::new(p.clone()).with_sandbox().with(running(&p, "side", 0, 1)).with(exited(&p, "app", 0, 0, 2, 3)).at(3);
    assert!(matches!(w.plan().actions[..], [Action::KillPod { .. }]));
}

#[test]
fn old_init_instances_are_pruned_keeping_the_newest_and_the_one_before() {
    let p = pod(&["i1"], &["app"], "Always");
    let w = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "i1", 0, 1, 1, 2))
        .with(exited(&p, "i1", 1, 1, 3, 4))
        .with(running(&p, "i1", 2, 15))
        .at(16);
    let removed: Vec<_> = w
        .plan()
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::RemoveContainer { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    // i1-1 stays: the running instance's lastState.
    assert_eq!(removed, vec!["i1-0".to_string()]);
}

#[test]
fn deletion_kills_everything_and_starts_nothing() {
    let p = pod(&["i1"], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 1));
    w.deleting = true;
    assert!(matches!(w.plan().actions[..], [Action::KillPod { .. }]));
}

/// Found by the crash-and-fault simulation: a start that failed before it took effect (or an
/// agent killed between CreateContainer and StartContainer) leaves a created instance, which
/// StopContainer cannot stop. Stopping the pod must not wait for it, or a deletion never ends.
#[test]
fn a_created_instance_that_never_started_does_not_keep_a_deleted_pod_alive() {
    let p = pod(&["i1"], &["app"], "Always");
    let created = ObservedContainer { state: RunState::Created, started_at: None, ..running(&p, "i1", 0, 1) };
    let mut w = World::new(p.clone()).with_sandbox().with(created);
    w.observed.sandbox.as_mut().unwrap().ready = false;
    w.deleting = true;
    assert_eq!(w.plan().actions, vec![]);
    let s = w.status();
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    // Its status is that of a container lost when the pod was terminated.
    let i1 = &s.init_container_statuses.as_ref().unwrap()[0];
    let lost = i1.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!((lost.reason.as_deref(), lost.exit_code), (Some("ContainerStatusUnknown"), 137));
    // While the sandbox is ready it is stopped, created instance or not.
    w.observed.sandbox.as_mut().unwrap().ready = true;
    assert!(matches!(w.plan().actions[..], [Action::KillPod { .. }]));
}

/// Found by the crash-and-fault simulation: a new sandbox's removal of the old init records
/// may fail (or the agent die before it), and a record left behind must not count: the new
/// sandbox runs every init container again (kubernetes #137710). It is removed later.
#[test]
fn an_init_record_left_from_an_old_sandbox_does_not_count() {
    let p = pod(&["i1", "i2"], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 1, 2)).at(10);
    let sandbox = w.observed.sandbox.as_mut().unwrap();
    (sandbox.id, sandbox.attempt) = ("sb2".into(), 1);
    let plan = w.plan();
    assert!(plan.actions.contains(&Action::RemoveContainer { id: "i1-0".into(), name: "i1".into() }));
    // i1 runs again (its count goes on from the old record's), not i2.
    assert_eq!(starts(&plan), vec![(Init, 0, 1)]);
    let s = w.status();
    let i1 = &s.init_container_statuses.as_ref().unwrap()[0];
    assert_eq!(i1.state.as_ref().unwrap().waiting.as_ref().unwrap().reason.as_deref(), Some("PodInitializing"));
}

/// Found by the crash-and-fault simulation: the restart counts of init containers whose
/// records went with their sandbox go on from where they were, never back to 0.
#[test]
fn restart_counts_go_on_after_the_records_are_gone() {
    let p = pod(&["i1"], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().at(10);
    w.observed.restart_counts.insert("i1".into(), 2);
    assert_eq!(starts(&w.plan()), vec![(Init, 0, 3)]);
    let s = w.status();
    assert_eq!(s.init_container_statuses.as_ref().unwrap()[0].restart_count, 2);
    assert_eq!(s.container_statuses.as_ref().unwrap()[0].restart_count, 0, "a container that never ran");
}

/// Found by the crash-and-fault simulation: once the pod has initialized in a sandbox (its last
/// init container, a sidecar, started), a crash of that sidecar only restarts it: the pod stays
/// initialized while the sandbox lives, and the app containers start.
#[test]
fn a_pod_initialized_in_its_sandbox_stays_so_while_a_sidecar_restarts() {
    let p = pod(&["+side"], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().with(exited(&p, "side", 0, 1, 1, 5)).at(20);
    let initialized = |w: &World| {
        let s = w.status();
        s.conditions.unwrap().into_iter().find(|c| c.type_ == "Initialized").unwrap().status
    };
    // Without the record: the sidecar restarts first.
    assert_eq!(starts(&w.plan()), vec![(Sidecar, 0, 1)]);
    assert_eq!(initialized(&w), "False");
    w.observed.initialized_in = Some("sb1".into());
    let plan = w.plan();
    assert_eq!(starts(&plan), vec![(Sidecar, 0, 1), (App, 0, 0)]);
    assert!(plan.initialized);
    assert_eq!(initialized(&w), "True");
    // A record of another sandbox says nothing about this one.
    w.observed.initialized_in = Some("sb0".into());
    assert_eq!(initialized(&w), "False");

    // Initialization completed just before a deletion is said while stopping, to be recorded
    // before the sidecar is stopped.
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "side", 0, 1)).at(2);
    w.deleting = true;
    let plan = w.plan();
    assert!(matches!(plan.actions[..], [Action::KillPod { .. }]));
    assert!(plan.initialized);
}

#[test]
fn active_deadline_fails_the_pod_during_init() {
    let mut p = pod(&["i1"], &["app"], "Always");
    p.spec.as_mut().unwrap().active_deadline_seconds = Some(5);
    let w = World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 1)).at(4);
    let plan = w.plan();
    assert_eq!(plan.wake_at, Some(t(5)));
    assert!(plan.actions.is_empty());
    let w = World { now: t(5), ..w };
    let plan = w.plan();
    assert!(matches!(plan.actions[..], [Action::KillPod { .. }]));
    assert_eq!(plan.events[0].reason, "DeadlineExceeded");
    let s = w.status();
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("DeadlineExceeded"));
}

fn evicted() -> podwright_planner::Eviction {
    podwright_planner::Eviction {
        reason: "Evicted".into(),
        message: "Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". ".into(),
    }
}

/// The eviction manager's verdict fails a running pod whatever its restart policy, with its
/// reason and message, and stops it with the eviction's grace period, not the pod's 30 s.
#[test]
fn an_evicted_pod_fails_and_stops_at_once() {
    let p = pod(&["i1"], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 1, 2)).with(running(&p, "app", 0, 3));
    assert_eq!(w.status().phase.as_deref(), Some("Running"));
    w.observed.eviction = Some(evicted());
    let s = w.status();
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("Evicted"));
    assert_eq!(s.message.as_deref(), Some("Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". "));
    let plan = w.plan();
    assert_eq!(plan.actions, vec![Action::KillPod { grace: std::time::Duration::from_secs(2) }]);
    // The event is the eviction manager's, recorded when it decided; the planner adds none.
    assert_eq!(plan.events, vec![]);

    // Stopped: nothing restarts, under Always too, and the app's last state stays.
    let mut w = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "i1", 0, 0, 1, 2))
        .with(exited(&p, "app", 0, 137, 3, 9))
        .at(10);
    w.observed.sandbox.as_mut().unwrap().ready = false;
    w.observed.eviction = Some(evicted());
    assert_eq!(w.plan().actions, vec![]);
    let s = w.status();
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("Evicted"));
    let app = &s.container_statuses.as_ref().unwrap()[0];
    assert_eq!(app.state.as_ref().unwrap().terminated.as_ref().map(|t| t.exit_code), Some(137));
    assert!(app.state.as_ref().unwrap().waiting.is_none(), "no CrashLoopBackOff for an evicted pod: {app:?}");
}

/// A deadline that passes after the eviction does not rename it, and a deletion asking for no
/// grace at all still gets none.
#[test]
fn an_eviction_keeps_its_reason_and_a_shorter_deletion_wins() {
    let mut p = pod(&[], &["app"], "Always");
    p.spec.as_mut().unwrap().active_deadline_seconds = Some(5);
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "app", 0, 1)).at(6);
    w.observed.eviction = Some(evicted());
    assert_eq!(w.status().reason.as_deref(), Some("Evicted"));
    let plan = w.plan();
    assert!(plan.events.iter().all(|e| e.reason != "DeadlineExceeded"), "{:?}", plan.events);
    w.deleting = true;
    w.grace_override = Some(0);
    assert_eq!(w.plan().actions, vec![Action::KillPod { grace: std::time::Duration::ZERO }]);
}

#[test]
fn a_lost_sandbox_is_recreated_and_init_containers_rerun() {
    let p = pod(&["i1"], &["app"], "Always");
    let mut w = World::new(p.clone()).with(exited(&p, "i1", 0, 0, 1, 2)).with(running(&p, "app", 0, 3));
    let mut sb = sandbox();
    sb.ready = false;
    w.observed.sandbox = Some(sb);
    let actions = w.plan().actions;
    assert!(matches!(actions[0], Action::KillPod { .. }));
    assert!(actions.contains(&Action::RemoveContainer { id: "i1-0".into(), name: "i1".into() }));
    assert_eq!(actions.last(), Some(&Action::CreateSandbox { attempt: 1 }));
}

#[test]
fn image_pull_failure_waits_out_its_back_off() {
    let p = pod(&[], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().at(1);
    w.observed.start_failures.insert(
        "app".into(),
        podwright_planner::StartFailure {
            reason: StartFailureReason::ErrImagePull,
            message: "not found".into(),
            at: t(0),
        },
    );
    w.backoff.next("pull:localhost/app:1", t(0), t(0));
    let plan = w.plan();
    assert!(starts(&plan).is_empty());
    assert_eq!(plan.wake_at, Some(t(10)));
    assert_eq!(
        w.status().container_statuses.unwrap()[0].state.as_ref().unwrap().waiting.as_ref().unwrap().reason.as_deref(),
        Some("ImagePullBackOff")
    );
    let w = World { now: t(10), ..w };
    assert_eq!(starts(&w.plan()), vec![(App, 0, 0)]);
}

#[test]
fn deletion_uses_the_callers_grace_period_else_the_pods() {
    use std::time::Duration;
    let p = pod(&[], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "app", 0, 1));
    w.deleting = true;
    assert_eq!(w.plan().actions, vec![Action::KillPod { grace: Duration::from_secs(30) }]);
    w.grace_override = Some(0);
    assert_eq!(w.plan().actions, vec![Action::KillPod { grace: Duration::ZERO }]);
    // An override only applies to deletion, not to a pod that finishes by itself.
    let mut w = World::new(pod(&[], &["app"], "Never")).with_sandbox().with(exited(&p, "app", 0, 0, 1, 2));
    w.grace_override = Some(0);
    assert!(matches!(w.plan().actions[..], [Action::KillPod { grace }] if grace == Duration::from_secs(30)));
}

/// A pod whose named containers carry the given probe (JSON), `terminationGracePeriodSeconds` 30.
fn with_probe(mut p: Pod, name: &str, field: &str, probe: serde_json::Value) -> Pod {
    let spec = p.spec.as_mut().unwrap();
    let c =
        spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut()).find(|c| c.name == name).unwrap();
    let probe = Some(serde_json::from_value(probe).unwrap());
    match field {
        "livenessProbe" => c.liveness_probe = probe,
        "startupProbe" => c.startup_probe = probe,
        _ => c.readiness_probe = probe,
    }
    p
}

fn exec_probe() -> serde_json::Value {
    serde_json::json!({"exec": {"command": ["true"]}})
}

#[test]
fn failed_liveness_kills_and_restarts_at_once_per_policy() {
    let rows = [
        ("Always", "Container app failed liveness probe, will be restarted", true),
        ("OnFailure", "Container app failed liveness probe, will be restarted", true),
        ("Never", "Container app failed liveness probe", false),
    ];
    for (policy, message, restart) in rows {
        let p = with_probe(pod(&[], &["app"], policy), "app", "livenessProbe", exec_probe());
        let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "app", 2, 1)).at(50);
        w.observed.probes.liveness.insert("app-2".into(), false);
        let plan = w.plan();
        let Action::KillContainer { id, message: m, grace, .. } = &plan.actions[0] else { panic!("{plan:?}") };
        assert_eq!((id.as_str(), m.as_str(), grace.as_secs()), ("app-2", message, 30), "{policy}");
        assert_eq!(starts(&plan), if restart { vec![(App, 0, 3)] } else { vec![] }, "{policy}");
        // Not in back-off: the instance was running when the decision was made.
        assert_eq!(plan.backoff, w.backoff, "{policy}");
    }
}

#[test]
fn a_probe_kill_uses_the_probes_own_grace_period() {
    let probe = serde_json::json!({"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 3});
    let p = with_probe(pod(&[], &["app"], "Always"), "app", "startupProbe", probe);
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "app", 0, 1)).at(50);
    w.observed.probes.startup.insert("app-0".into(), false);
    let plan = w.plan();
    let Action::KillContainer { message, grace, .. } = &plan.actions[0] else { panic!("{plan:?}") };
    assert_eq!((message.as_str(), grace.as_secs()), ("Container app failed startup probe, will be restarted", 3));
}

#[test]
fn a_sidecar_failing_its_probes_is_killed_and_restarted_even_under_never() {
    for (field, what) in [("livenessProbe", "liveness"), ("startupProbe", "startup")] {
        let p = with_probe(pod(&["+side", "i1"], &["app"], "Never"), "side", field, exec_probe());
        let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "side", 0, 1)).at(20);
        if what == "liveness" {
            w.observed.probes.startup.insert("side-0".into(), true);
            w.observed.probes.liveness.insert("side-0".into(), false);
        } else {
            w.observed.probes.startup.insert("side-0".into(), false);
        }
        let plan = w.plan();
        let Action::KillContainer { message, .. } = &plan.actions[0] else { panic!("{plan:?}") };
        assert_eq!(message, &format!("Init container side failed {what} probe"));
        // A started sidecar let i1 go ahead, as the kubelet's pass over the init list does.
        let next = if what == "liveness" { vec![(Sidecar, 0, 1), (Init, 1, 0)] } else { vec![(Sidecar, 0, 1)] };
        assert_eq!(starts(&plan), next, "{what}");
    }
}

#[test]
fn a_sidecars_startup_probe_gates_the_next_init_container() {
    let p = with_probe(pod(&["+side", "i1"], &["app"], "Always"), "side", "startupProbe", exec_probe());
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "side", 0, 1)).at(5);
    // Running but no startup result yet: i1 waits.
    assert_eq!(starts(&w.plan()), vec![]);
    w.observed.probes.startup.insert("side-0".into(), true);
    assert_eq!(starts(&w.plan()), vec![(Init, 1, 0)]);
}

#[test]
fn probe_failures_are_ignored_while_the_pod_is_deleted() {
    let p = with_probe(pod(&[], &["app"], "Always"), "app", "livenessProbe", exec_probe());
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "app", 0, 1));
    w.observed.probes.liveness.insert("app-0".into(), false);
    w.deleting = true;
    let plan = w.plan();
    assert!(matches!(plan.actions[..], [Action::KillPod { .. }]), "{plan:?}");
}

#[test]
fn a_failed_post_start_restarts_under_the_crash_back_off_and_names_the_wait() {
    let p = pod(&[], &["app"], "Always");
    let failure = |at| podwright_planner::StartFailure {
        reason: StartFailureReason::PostStartHookError,
        message: "Exec lifecycle hook ([false]) for Container \"app\" in Pod \"p\" failed".into(),
        at: t(at),
    };
    // The hook failed and the instance was killed: restarted at once the first time, and
    // meanwhile the status names the hook's error.
    let mut w = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, 137, 1, 2)).at(2);
    w.observed.start_failures.insert("app".into(), failure(2));
    let plan = w.plan();
    assert_eq!(starts(&plan), vec![(App, 0, 1)]);
    let s = w.status().container_statuses.unwrap().remove(0);
    let waiting = s.state.as_ref().unwrap().waiting.as_ref().unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("PostStartHookError"));
    assert_eq!(s.last_state.unwrap().terminated.unwrap().exit_code, 137);
    // The second failure waits out the back-off that the restart started, as CrashLoopBackOff.
    let mut w2 = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "app", 0, 137, 1, 2))
        .with(exited(&p, "app", 1, 137, 3, 4))
        .at(4);
    w2.backoff = plan.backoff.clone();
    w2.observed.start_failures.insert("app".into(), failure(4));
    let plan2 = w2.plan();
    assert_eq!((starts(&plan2), plan2.wake_at), (vec![], Some(t(14))));
    let s = w2.status().container_statuses.unwrap().remove(0);
    assert_eq!(s.state.unwrap().waiting.unwrap().reason.as_deref(), Some("CrashLoopBackOff"));
}

/// The init-containers proposal: "record whether all init containers have succeeded" and
/// "only invoke new init containers if a pod restart is needed". Once the worker has written
/// down that the pod initialized in this sandbox, init containers whose records are gone
/// (pruned by hand, by GC) do not run again beside a crash-looping app (kubernetes#90271).
#[test]
fn initialization_written_down_outlives_the_init_containers_records() {
    let p = pod(&["init-a", "init-b"], &["app"], "Always");
    // The app crashed; no init container record is left, no app container lives.
    let pruned = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, 1, 5, 6)).at(7);
    assert_eq!(starts(&pruned.plan()), [(Init, 0, 0)], "with nothing written down, init runs again");

    let mut recorded = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, 1, 5, 6)).at(7);
    recorded.observed.initialized_in = Some(sandbox().id);
    let plan = recorded.plan();
    assert!(plan.initialized);
    assert!(starts(&plan).iter().all(|(kind, ..)| *kind == App), "{:?}", plan.actions);

    // Written down for another (dead) sandbox: a new sandbox runs every init container again.
    let mut elsewhere = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, 1, 5, 6)).at(7);
    elsewhere.observed.initialized_in = Some("an-older-sandbox".into());
    assert_eq!(starts(&elsewhere.plan()), [(Init, 0, 0)]);
}

#[test]
fn the_plan_says_when_the_pod_has_initialized_in_its_sandbox() {
    let p = pod(&["init-a"], &["app"], "Always");
    let during = World::new(p.clone()).with_sandbox().with(running(&p, "init-a", 0, 1)).at(2);
    assert!(!during.plan().initialized);
    let done = World::new(p.clone()).with_sandbox().with(exited(&p, "init-a", 0, 0, 1, 2)).at(3);
    let plan = done.plan();
    assert!(plan.initialized);
    assert_eq!(starts(&plan), [(App, 0, 0)]);
}

/// A podwright killed between CreateContainer and StartContainer leaves a created instance: the
/// next one starts that instance as it is (same ID, same restart count) instead of replacing it,
/// so the pod's life reads as if nothing had happened (the restart-safety notes, rule 4).
#[test]
fn an_instance_created_and_never_started_is_started_not_replaced() {
    let p = pod(&["init"], &["app"], "Never");
    let created = ObservedContainer { state: RunState::Created, started_at: None, ..running(&p, "app", 0, 3) };
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "init", 0, 0, 1, 2)).with(created).at(4);
    let plan = w.plan();
    assert_eq!(
        plan.actions,
        [Action::StartContainer {
            kind: App,
            index: 0,
            restart_count: 0,
            pull: PullPolicy::IfNotPresent,
            created: Some("app-0".into())
        }]
    );

    // A start of it failed since and left it created (a start refused while the killed
    // podwright's own was still in flight, or a runtime that was down): after the retry delay
    // the same instance is started again, neither replaced nor counted as a restart.
    let mut failed = w;
    failed.observed.start_failures.insert(
        "app".into(),
        StartFailure {
            reason: StartFailureReason::RunContainerError,
            message: "container is already in starting state".into(),
            at: t(4),
        },
    );
    let waiting = failed.clone().at(5).plan();
    assert!(starts(&waiting).is_empty(), "{waiting:?}");
    assert!(!waiting.actions.iter().any(|a| matches!(a, Action::KillContainer { .. })), "{waiting:?}");
    let plan = failed.at(15).plan();
    assert_eq!(
        plan.actions,
        [Action::StartContainer {
            kind: App,
            index: 0,
            restart_count: 0,
            pull: PullPolicy::IfNotPresent,
            created: Some("app-0".into())
        }]
    );
}

/// A podwright killed during StartContainer: containerd leaves the instance exited with
/// `StartError` "context canceled". It never ran: under `Never` the pod does not fail; the
/// instance is removed and a new one started under the same restart count.
#[test]
fn an_instance_whose_start_was_cut_short_by_podwrights_death_counts_for_nothing() {
    let p = pod(&["init"], &["app"], "Never");
    let cut = ObservedContainer {
        reason: "StartError".into(),
        message: "failed to create containerd task: failed to create shim task: context canceled: unknown".into(),
        started_at: None,
        ..exited(&p, "app", 0, 128, 3, 3)
    };
    assert!(cut.start_interrupted());
    let shim_killed = ObservedContainer {
        message: "failed to create containerd task: failed to start shim: start failed: : signal: killed: unknown"
            .into(),
        ..cut.clone()
    };
    assert!(shim_killed.start_interrupted());
    // Cancelled once its task existed: its process may have run.
    let task_started = ObservedContainer {
        message: "failed to start containerd task \"abc\": context canceled: unknown".into(),
        ..cut.clone()
    };
    assert!(!task_started.start_interrupted());
    let mut w = World::new(p.clone()).with_sandbox().with(exited(&p, "init", 0, 0, 1, 2)).at(4);
    w.observed.interrupted.push(cut);
    assert_ne!(w.status().phase.as_deref(), Some("Failed"));
    let plan = w.plan();
    assert_eq!(plan.actions[0], Action::RemoveContainer { id: "app-0".into(), name: "app".into() });
    assert_eq!(starts(&plan), [(App, 0, 0)]);

    // Any other start failure is the container's: the pod fails under Never.
    let failed = ObservedContainer {
        reason: "StartError".into(),
        message: "exec: \"nope\": executable file not found in $PATH".into(),
        ..exited(&p, "app", 0, 128, 3, 3)
    };
    assert!(!failed.start_interrupted());
}

#[test]
fn a_sandbox_on_the_hosts_network_needs_no_ip_of_its_own() {
    let without_ip = |host_network: bool| {
        let mut p = pod(&[], &["app"], "Always");
        p.spec.as_mut().unwrap().host_network = Some(host_network);
        let mut w = World::new(p);
        let mut sb = sandbox();
        sb.ip = None;
        w.observed.sandbox = Some(sb);
        w
    };
    // The kubelet's PodSandboxChanged: only a sandbox of the pod's own network lacks an IP.
    let own = without_ip(false);
    assert!(own.plan().actions.contains(&Action::CreateSandbox { attempt: 1 }));
    let host = without_ip(true);
    assert_eq!(starts(&host.plan()), vec![(App, 0, 0)]);
    let ready = host.status().conditions.unwrap().into_iter().find(|c| c.type_ == "PodReadyToStartContainers");
    assert_eq!(ready.unwrap().status, "True");
}
