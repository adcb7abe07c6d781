//! Issue 8's kubelet rules, one test per rule, named after it: where podwright's restart
//! counts, reasons, start order or exit codes differed from a 1.33 kubelet's.

mod common;
use common::*;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus};
use podwright_planner::termination::termination_waits;
use podwright_planner::{Action, ContainerKind::*, ObservedContainer, Plan, StartFailure, StartFailureReason};
use std::time::Duration;

fn waiting(s: &ContainerStatus) -> (Option<&str>, Option<&str>) {
    let w = s.state.as_ref().and_then(|st| st.waiting.as_ref());
    (w.and_then(|w| w.reason.as_deref()), w.and_then(|w| w.message.as_deref()))
}

fn terminated(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.state.as_ref()?.terminated.as_ref()
}

fn last_terminated(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.last_state.as_ref()?.terminated.as_ref()
}

fn app_status<'a>(s: &'a k8s_openapi::api::core::v1::PodStatus, name: &str) -> &'a ContainerStatus {
    s.container_statuses.as_ref().unwrap().iter().find(|c| c.name == name).unwrap()
}

fn init_status<'a>(s: &'a k8s_openapi::api::core::v1::PodStatus, name: &str) -> &'a ContainerStatus {
    s.init_container_statuses.as_ref().unwrap().iter().find(|c| c.name == name).unwrap()
}

fn removed(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::RemoveContainer { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect()
}

fn killed(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::KillContainer { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect()
}

/// An instance whose `StartContainer` failed: containerd leaves it exited, `StartError`, 128.
fn start_error(p: &k8s_openapi::api::core::v1::Pod, name: &str, restart_count: i32, at: i64) -> ObservedContainer {
    ObservedContainer {
        reason: "StartError".into(),
        exit_code: 128,
        message: "exec: \"/no/such\": stat /no/such: no such file or directory".into(),
        started_at: None,
        ..exited(p, name, restart_count, 128, at, at)
    }
}

fn failure(reason: StartFailureReason, at: i64) -> StartFailure {
    StartFailure { reason, message: format!("{} happened", reason.as_str()), at: t(at) }
}

#[test]
fn rule_1_start_failures_back_off_like_crashes() {
    let p = pod(&[], &["app"], "Always");
    // The first failed start counts as a restart and is retried at once.
    let mut w = World::new(p.clone()).with_sandbox().with(start_error(&p, "app", 0, 2)).at(2);
    w.observed.start_failures.insert("app".into(), failure(StartFailureReason::RunContainerError, 2));
    let first = w.plan();
    assert_eq!(starts(&first), vec![(App, 0, 1)]);
    let s = w.status();
    let app = app_status(&s, "app");
    assert_eq!(waiting(app).0, Some("RunContainerError"));
    let last = last_terminated(app).expect("lastState.terminated");
    assert_eq!((last.reason.as_deref(), last.exit_code), (Some("StartError"), 128));

    // The second fails as well: the crash back-off holds the third for 10 s from its end.
    let mut w = World::new(p.clone())
        .with_sandbox()
        .with(start_error(&p, "app", 0, 2))
        .with(start_error(&p, "app", 1, 3))
        .at(3);
    w.observed.start_failures.insert("app".into(), failure(StartFailureReason::RunContainerError, 3));
    w.backoff = first.backoff.clone();
    let second = w.plan();
    assert_eq!(starts(&second), vec![]);
    assert_eq!(second.wake_at, Some(t(13)));
    assert!(second.events.iter().any(|e| e.reason == "BackOff" && e.warning), "{:?}", second.events);
    let s = w.status();
    let app = app_status(&s, "app");
    assert_eq!(
        waiting(app),
        (Some("CrashLoopBackOff"), Some("back-off 10s restarting failed container=app pod=p_default(u1)"))
    );
    assert_eq!(app.restart_count, 1);
    let last = last_terminated(app).expect("lastState.terminated");
    assert_eq!((last.reason.as_deref(), last.exit_code), (Some("StartError"), 128));
    // A container that ran (if only to fail its start) makes the pod Running under Always.
    assert_eq!(s.phase.as_deref(), Some("Running"));

    // Then 20 s, 40 s, ... as for any crash.
    let third = World { now: t(13), ..w }.plan();
    assert_eq!(starts(&third), vec![(App, 0, 2)]);
    assert_eq!(third.backoff.entries.values().next().unwrap().backoff_secs, 20);
}

#[test]
fn rule_2_restarts_after_a_probe_kill_go_through_the_back_off() {
    let p = pod(&[], &["app"], "Always");
    let unhealthy = |w: &mut World, id: &str| {
        w.observed.probes.liveness.insert(id.into(), false);
    };
    // First kill: nothing exited before, so the restart is immediate.
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "app", 0, 1)).at(10);
    unhealthy(&mut w, "app-0");
    let first = w.plan();
    assert_eq!((killed(&first), starts(&first)), (vec!["app-0".to_string()], vec![(App, 0, 1)]));

    // Second kill: the instance killed first is the newest exited one; no entry yet, so the
    // restart is immediate and the back-off starts at 10 s.
    let mut w = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "app", 0, 137, 1, 10))
        .with(running(&p, "app", 1, 10))
        .at(13);
    unhealthy(&mut w, "app-1");
    w.backoff = first.backoff.clone();
    let second = w.plan();
    assert_eq!((killed(&second), starts(&second)), (vec!["app-1".to_string()], vec![(App, 0, 2)]));

    // Third kill, 3 s after the second: inside the window, so the container is only killed...
    let mut w = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "app", 0, 137, 1, 10))
        .with(exited(&p, "app", 1, 137, 10, 13))
        .with(running(&p, "app", 2, 13))
        .at(16);
    unhealthy(&mut w, "app-2");
    w.backoff = second.backoff.clone();
    let third = w.plan();
    assert_eq!((killed(&third), starts(&third)), (vec!["app-2".to_string()], vec![]));

    // ... and waits in CrashLoopBackOff, 10 s from its own end.
    let mut w = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "app", 1, 137, 10, 13))
        .with(exited(&p, "app", 2, 137, 13, 16))
        .at(16);
    w.backoff = third.backoff.clone();
    let waiting_plan = w.plan();
    assert_eq!(starts(&waiting_plan), vec![]);
    assert_eq!(waiting_plan.wake_at, Some(t(26)));
    assert_eq!(waiting(app_status(&w.status(), "app")).0, Some("CrashLoopBackOff"));
}

#[test]
fn rule_3_app_containers_are_started_in_spec_order() {
    // The executor starts them one after another in the plan's order (see the node crate's
    // simulation for the `postStart` hook holding the next one back).
    let p = pod(&["i1"], &["proxy", "app", "another"], "Always");
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 1, 2));
    assert_eq!(starts(&w.plan()), vec![(App, 0, 0), (App, 1, 0), (App, 2, 0)]);
}

#[test]
fn rule_4_a_crashing_sidecar_does_not_hold_back_the_containers_after_it() {
    let p = pod(&["+side", "i1"], &["app"], "Always");
    let side_key = podwright_planner::pod::init_containers(&p).next().unwrap().backoff_key();
    let crashed = |w: World| {
        let mut w = w.with(exited(&p, "side", 0, 1, 1, 4)).with(exited(&p, "side", 1, 1, 4, 5)).at(6);
        w.backoff.next(&side_key, t(4), t(4));
        w
    };
    // The sidecar crashes (in back-off) while i1 runs: i1 goes on, only the sidecar waits.
    let w = crashed(World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 3)));
    let plan = w.plan();
    assert_eq!(starts(&plan), vec![]);
    assert!(plan.actions.is_empty(), "{plan:?}");
    assert_eq!(plan.wake_at, Some(t(15)));
    // i1 completed: the app containers start without waiting for the sidecar.
    let w = crashed(World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 3, 5)));
    assert_eq!(starts(&w.plan()), vec![(App, 0, 0)]);
    let s = w.status();
    assert_eq!(waiting(init_status(&s, "side")).0, Some("CrashLoopBackOff"));
    // Out of back-off, the sidecar is restarted in the same pass as the app starts.
    let w = World { now: t(15), ..w };
    assert_eq!(starts(&w.plan()), vec![(Sidecar, 0, 2), (App, 0, 0)]);
    // A sidecar that never started still holds back the init container after it.
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "side", 0, 1, 1, 2)).at(3);
    assert_eq!(starts(&w.plan()), vec![(Sidecar, 0, 1)]);
}

#[test]
fn rule_5_last_state_survives_a_restart_of_every_kind_of_container() {
    let p = pod(&["i1", "+side"], &["app"], "Always");
    let w = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "i1", 0, 1, 1, 2))
        .with(exited(&p, "i1", 1, 1, 3, 4))
        .with(exited(&p, "i1", 2, 0, 5, 6))
        .with(exited(&p, "side", 0, 1, 7, 8))
        .with(running(&p, "side", 1, 9))
        .with(exited(&p, "app", 0, 1, 10, 11))
        .with(exited(&p, "app", 1, 1, 12, 13))
        .with(running(&p, "app", 2, 14))
        .at(20);
    // Only instances older than the newest exited one before the current one go.
    let mut gone = removed(&w.plan());
    gone.sort();
    assert_eq!(gone, vec!["app-0".to_string(), "i1-0".to_string()]);
    let s = w.status();
    for (st, want_code) in [(init_status(&s, "side"), 1), (app_status(&s, "app"), 1), (init_status(&s, "i1"), 1)] {
        let last = last_terminated(st).unwrap_or_else(|| panic!("{} has no lastState", st.name));
        assert_eq!(last.exit_code, want_code, "{}", st.name);
    }
    assert_eq!(init_status(&s, "side").restart_count, 1);
}

#[test]
fn rule_7_terminal_pods_get_container_status_unknown() {
    fn lost(st: &ContainerStatus) -> Option<(&str, i32, &str)> {
        terminated(st).map(|t| (t.reason.as_deref().unwrap_or(""), t.exit_code, t.message.as_deref().unwrap_or("")))
    }
    let unknown =
        Some(("ContainerStatusUnknown", 137, "The container could not be located when the pod was terminated"));

    // Deleted once initialized: an app container that never ran (its image would not pull)
    // is lost; the one that was stopped keeps its real end.
    let p = pod(&["i1"], &["a", "b"], "Always");
    let mut w = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "i1", 0, 0, 1, 2))
        .with(exited(&p, "a", 0, 143, 3, 9))
        .at(10);
    w.observed.start_failures.insert("b".into(), failure(StartFailureReason::ErrImagePull, 3));
    w.deleting = true;
    let s = w.status();
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(lost(app_status(&s, "b")), unknown);
    assert_eq!(lost(app_status(&s, "a")).map(|l| l.1), Some(143));

    // Deleted during init: the app containers keep PodInitializing; the init container that
    // never started after the one that ran keeps waiting.
    let p = pod(&["i1", "i2"], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 1, 2)).at(10);
    w.observed.start_failures.insert("i2".into(), failure(StartFailureReason::ErrImagePull, 3));
    w.deleting = true;
    let s = w.status();
    assert_eq!(waiting(app_status(&s, "app")).0, Some("PodInitializing"));
    assert!(terminated(init_status(&s, "i2")).is_none());
    assert_eq!(lost(init_status(&s, "i1")).map(|l| l.1), Some(0));

    // Deleted before any init container started: the first one counts as lost.
    let mut w = World::new(p.clone()).with_sandbox().at(10);
    w.observed.start_failures.insert("i1".into(), failure(StartFailureReason::ErrImagePull, 3));
    w.deleting = true;
    let s = w.status();
    assert_eq!(lost(init_status(&s, "i1")), unknown);
    assert!(terminated(init_status(&s, "i2")).is_none());

    // The deadline, once everything has stopped.
    let mut p = pod(&[], &["a", "b"], "Always");
    p.spec.as_mut().unwrap().active_deadline_seconds = Some(5);
    let mut w = World::new(p.clone()).with_sandbox().with(exited(&p, "a", 0, 137, 1, 6)).at(7);
    w.observed.start_failures.insert("b".into(), failure(StartFailureReason::ErrImagePull, 3));
    let s = w.status();
    assert_eq!(s.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(lost(app_status(&s, "b")), unknown);

    // Not while something still runs.
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "a", 0, 1)).at(7);
    w.observed.start_failures.insert("b".into(), failure(StartFailureReason::ErrImagePull, 3));
    assert!(terminated(app_status(&w.status(), "b")).is_none());
}

#[test]
fn rule_8_grace_periods_have_the_kubelets_floor() {
    let mut p = pod(&[], &["app"], "Always");
    p.spec.as_mut().unwrap().termination_grace_period_seconds = Some(0);
    let kill_pod_grace = |w: &World| match w.plan().actions.first() {
        Some(Action::KillPod { grace }) => *grace,
        other => panic!("expected KillPod, got {other:?}"),
    };
    // Deletion with the spec's 0: TERM, then KILL 2 s later.
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "app", 0, 1));
    w.deleting = true;
    assert_eq!(kill_pod_grace(&w), Duration::from_secs(2));
    // `run --grace-period 0`: at once.
    w.grace_override = Some(0);
    assert_eq!(kill_pod_grace(&w), Duration::ZERO);
    // A deleter's 1 s is floored as well.
    w.grace_override = Some(1);
    assert_eq!(kill_pod_grace(&w), Duration::from_secs(2));

    // A probe-level 0 for a liveness kill.
    let mut p = pod(&[], &["app"], "Always");
    p.spec.as_mut().unwrap().containers[0].liveness_probe =
        Some(k8s_openapi::api::core::v1::Probe { termination_grace_period_seconds: Some(0), ..Default::default() });
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "app", 0, 1));
    w.observed.probes.liveness.insert("app-0".into(), false);
    let grace = w.plan().actions.iter().find_map(|a| match a {
        Action::KillContainer { grace, .. } => Some(*grace),
        _ => None,
    });
    assert_eq!(grace, Some(Duration::from_secs(2)));
}

#[test]
fn rule_10_image_pull_back_off_records_failed_events() {
    let p = pod(&[], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().at(3);
    w.observed.start_failures.insert("app".into(), failure(StartFailureReason::ErrImagePull, 2));
    w.backoff.next(&podwright_planner::decide::pull_key("localhost/app:1"), t(2), t(2));
    let events: Vec<_> = w.plan().events.into_iter().map(|e| (e.warning, e.reason, e.message)).collect();
    assert_eq!(
        events,
        vec![
            (false, "BackOff", "Back-off pulling image \"localhost/app:1\"".to_string()),
            (true, "Failed", "Error: ImagePullBackOff".to_string()),
        ]
    );
}

#[test]
fn rule_11_a_sidecar_waits_only_for_app_containers_and_later_sidecars() {
    let p = pod(&["+s1", "i1", "+s2"], &["a"], "Always");
    let running_now =
        [running(&p, "s1", 0, 1), running(&p, "i1", 0, 2), running(&p, "s2", 0, 3), running(&p, "a", 0, 4)];
    let refs: Vec<&ObservedContainer> = running_now.iter().collect();
    let waits = termination_waits(&p, &refs);
    // s1 waits for s2 and a, never for the running init container i1.
    assert_eq!(waits, vec![vec![2, 3], vec![], vec![3], vec![]]);
    // During init (no app yet), a sidecar does not wait for the init container.
    let refs: Vec<&ObservedContainer> = running_now[..2].iter().collect();
    assert_eq!(termination_waits(&p, &refs), vec![Vec::<usize>::new(), vec![]]);
}

#[test]
fn rule_12_image_errors_keep_the_pod_pending() {
    for policy in ["Always", "OnFailure", "Never"] {
        for reason in [StartFailureReason::ErrImageNeverPull, StartFailureReason::InvalidImageName] {
            // An app container.
            let p = pod(&[], &["app"], policy);
            let mut w = World::new(p.clone()).with_sandbox().at(3);
            w.observed.start_failures.insert("app".into(), failure(reason, 2));
            let s = w.status();
            assert_eq!(s.phase.as_deref(), Some("Pending"), "{policy} {reason:?}");
            assert_eq!(waiting(app_status(&s, "app")).0, Some(reason.as_str()));
            assert!(w.plan().actions.is_empty(), "{policy} {reason:?}: waits, kills nothing");
            // An init container.
            let p = pod(&["i1"], &["app"], policy);
            let mut w = World::new(p.clone()).with_sandbox().at(3);
            w.observed.start_failures.insert("i1".into(), failure(reason, 2));
            let s = w.status();
            assert_eq!(s.phase.as_deref(), Some("Pending"), "init {policy} {reason:?}");
            assert_eq!(waiting(init_status(&s, "i1")).0, Some(reason.as_str()));
        }
    }
}

#[test]
fn rule_5_and_7_a_finished_pods_sidecar_shows_how_it_ended_not_a_wait() {
    let p = pod(&["+side"], &["app"], "OnFailure");
    let key = podwright_planner::pod::init_containers(&p).next().unwrap().backoff_key();
    // The sidecar crashed once (back-off entry), ran, and was stopped when the app completed.
    let mut w = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "side", 0, 3, 1, 2))
        .with(exited(&p, "side", 1, 0, 2, 9))
        .with(exited(&p, "app", 0, 0, 3, 8))
        .at(9);
    w.backoff.next(&key, t(2), t(2));
    w.observed.sandbox.as_mut().unwrap().ready = false;
    assert!(w.plan().actions.is_empty(), "{:?}", w.plan());
    let s = w.status();
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    let side = init_status(&s, "side");
    assert_eq!(terminated(side).map(|t| t.exit_code), Some(0), "{side:?}");
    assert_eq!(last_terminated(side).map(|t| t.exit_code), Some(3), "{side:?}");
}
