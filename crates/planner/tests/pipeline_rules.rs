//! The pipelined start: while a regular init container runs, the next one is pulled and created
//! (`PrepareContainer`), started the moment the one before has exited 0, and until then nothing:
//! invisible in the status, no evidence of progress, never started out of order, removed when
//! the pod will not go on.

mod common;
use common::*;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use podwright_planner::{
    Action, ContainerKind::*, ObservedContainer, PullPolicy, RunState, StartFailure, StartFailureReason,
};

/// An instance created ahead of its turn: created, never started.
fn created(p: &Pod, name: &str, restart_count: i32, at: i64) -> ObservedContainer {
    ObservedContainer { state: RunState::Created, started_at: None, ..running(p, name, restart_count, at) }
}

fn prepare(index: usize, restart_count: i32) -> Action {
    Action::PrepareContainer { kind: Init, index, restart_count, pull: PullPolicy::IfNotPresent }
}

fn prepares(plan: &podwright_planner::Plan) -> Vec<&Action> {
    plan.actions.iter().filter(|a| matches!(a, Action::PrepareContainer { .. })).collect()
}

fn removes(plan: &podwright_planner::Plan) -> Vec<String> {
    let ids = plan.actions.iter().filter_map(|a| match a {
        Action::RemoveContainer { id, .. } => Some(id.clone()),
        _ => None,
    });
    ids.collect()
}

fn init_status(w: &World, name: &str) -> ContainerStatus {
    let s = w.status();
    s.init_container_statuses.unwrap().into_iter().find(|c| c.name == name).unwrap()
}

/// What a container that has no instance yet shows: waiting `PodInitializing`, no ID.
fn assert_not_there(st: &ContainerStatus, restart_count: i32) {
    let waiting = st.state.as_ref().and_then(|s| s.waiting.as_ref());
    assert_eq!(waiting.and_then(|w| w.reason.as_deref()), Some("PodInitializing"), "{st:?}");
    assert_eq!(st.container_id, None, "{st:?}");
    assert_eq!(st.restart_count, restart_count, "{st:?}");
    assert!(!st.ready && st.last_state.is_none(), "{st:?}");
}

#[test]
fn the_next_init_container_is_prepared_after_the_start_of_the_one_before() {
    let p = pod(&["i1", "i2", "i3"], &["app"], "Always");
    let w = World::new(p.clone()).with_sandbox();
    let plan = w.plan();
    assert_eq!(starts(&plan), vec![(Init, 0, 0)]);
    assert_eq!(plan.actions.last(), Some(&prepare(1, 0)), "after the start: {plan:?}");
    // Once i1 runs, i2 is prepared (a pass whose preparation did not happen, or failed and was
    // forgotten), and only i2: one container ahead, never more.
    let w = w.with(running(&p, "i1", 0, 1)).at(2);
    assert_eq!(w.plan().actions, vec![prepare(1, 0)]);
}

#[test]
fn a_prepared_container_waits_for_the_one_before_to_exit_0() {
    let p = pod(&["i1", "i2", "i3"], &["app"], "Always");
    let w = World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 1)).with(created(&p, "i2", 0, 2)).at(3);
    // i1 runs: nothing to do, i3 not prepared (i2 is not running).
    assert_eq!(w.plan().actions, vec![]);
    // i1 exited 0: i2 starts as it is, and i3 is prepared behind it.
    let done = World { observed: Default::default(), ..w.clone() }
        .with_sandbox()
        .with(exited(&p, "i1", 0, 0, 1, 4))
        .with(created(&p, "i2", 0, 2))
        .at(4);
    let plan = done.plan();
    assert_eq!(
        plan.actions,
        vec![
            Action::StartContainer {
                kind: Init,
                index: 1,
                restart_count: 0,
                pull: PullPolicy::IfNotPresent,
                created: Some("i2-0".into())
            },
            prepare(2, 0),
        ]
    );
}

#[test]
fn a_prepared_container_is_invisible_in_the_status() {
    let p = pod(&["i1", "i2"], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 1)).with(created(&p, "i2", 0, 2)).at(3);
    assert_not_there(&init_status(&w, "i2"), 0);
    let s = w.status();
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    let initialized = s.conditions.unwrap().into_iter().find(|c| c.type_ == "Initialized").unwrap();
    assert_eq!(initialized.message.as_deref(), Some("containers with incomplete status: [i1 i2]"));
    // In a later sandbox it was prepared with the count it will run with; until it runs the
    // count shown is the one before.
    w.observed.containers[1].restart_count = 3;
    w.observed.restart_counts.insert("i2".into(), 2);
    assert_not_there(&init_status(&w, "i2"), 2);
    // The one before exited 0: its turn has come, and it is shown once it has started; until
    // then it waits `PodInitializing`, as a container not yet created.
    let turn = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 1, 4)).with(created(&p, "i2", 0, 2));
    assert_not_there(&init_status(&turn, "i2"), 0);
}

#[test]
fn a_prepared_container_is_no_evidence_that_the_one_before_succeeded() {
    // A podwright restarted after preparing i2: i1 failed meanwhile and restarts (OnFailure);
    // i2 is left for when i1 succeeds, neither started nor prepared again.
    let p = pod(&["i1", "i2"], &["app"], "OnFailure");
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 1, 1, 3)).with(created(&p, "i2", 0, 2)).at(4);
    let plan = w.plan();
    assert_eq!(starts(&plan), vec![(Init, 0, 1)]);
    assert_eq!(prepares(&plan), Vec::<&Action>::new());
    assert_eq!(removes(&plan), Vec::<String>::new());
    // Its predecessor's records gone (an old sandbox's, not counted): still no evidence; the
    // first init container runs again.
    let mut gone = World::new(p.clone()).with_sandbox().with(created(&p, "i2", 0, 2)).at(4);
    gone.observed.restart_counts.insert("i1".into(), 0);
    assert_eq!(starts(&gone.plan()), vec![(Init, 0, 1)]);
    // An app container never starts beside it.
    let two = pod(&["i1", "i2", "i3"], &["app"], "Always");
    let w = World::new(two.clone()).with_sandbox().with(running(&two, "i1", 0, 1)).with(created(&two, "i2", 0, 2));
    let w = w.with(created(&two, "i3", 0, 2)).at(3);
    assert_eq!(w.plan().actions, vec![]);
}

#[test]
fn a_prepared_container_goes_when_the_pod_will_not_go_on() {
    // i1 failed under Never: the pod fails, i2 never has a turn.
    let p = pod(&["i1", "i2"], &["app"], "Never");
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 1, 1, 3)).with(created(&p, "i2", 0, 2)).at(4);
    let plan = w.plan();
    assert_eq!(removes(&plan), vec!["i2-0".to_string()]);
    assert_eq!(starts(&plan), vec![]);
    assert_eq!(w.status().phase.as_deref(), Some("Failed"));
    // It is not reported lost: it never was there.
    assert_not_there(&init_status(&w, "i2"), 0);
    // Deleted while i1 runs: stopped, and the prepared one removed.
    let mut deleted = World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 1)).with(created(&p, "i2", 0, 2));
    deleted.deleting = true;
    let plan = deleted.plan();
    assert!(matches!(plan.actions[0], Action::KillPod { .. }), "{plan:?}");
    assert_eq!(removes(&plan), vec!["i2-0".to_string()]);
}

/// An instance of `name` prepared from a definition since changed, while `runs` runs: removed,
/// and neither the pod restarted nor a new sandbox made.
fn assert_stale_goes_alone(inits: &[&str], name: &str, runs: &str) {
    let p = pod(inits, &["app"], "Always");
    let mut stale = created(&p, name, 0, 2);
    stale.hash = "0000000000000001".into();
    let w = World::new(p.clone()).with_sandbox().with(running(&p, runs, 0, 1)).with(stale).at(3);
    let plan = w.plan();
    assert_eq!(removes(&plan), vec![format!("{name}-0")]);
    assert!(!plan.actions.iter().any(|a| matches!(a, Action::KillPod { .. } | Action::CreateSandbox { .. })));
}

#[test]
fn a_prepared_container_of_a_changed_definition_is_removed_not_the_pods_restart() {
    assert_stale_goes_alone(&["i1", "i2"], "i2", "i1");
}

#[test]
fn nothing_is_prepared_behind_a_sidecar_or_a_held_back_one() {
    // Behind a sidecar: its turn comes with the sidecar's start, which is no exit.
    let p = pod(&["+side", "i2"], &["app"], "Always");
    let w = World::new(p.clone()).with_sandbox();
    assert_eq!(prepares(&w.plan()), Vec::<&Action>::new());
    // Nor are app containers behind a sidecar that is the last init container.
    let p = pod(&["i1", "+side"], &["app"], "Always");
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 1, 2)).with(running(&p, "side", 0, 2));
    assert_eq!(prepares(&w.at(3).plan()), Vec::<&Action>::new());
    // A sidecar after a regular one is prepared like any init container.
    let p = pod(&["i1", "+side"], &["app"], "Always");
    let w = World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 1));
    assert_eq!(
        w.plan().actions,
        vec![Action::PrepareContainer { kind: Sidecar, index: 1, restart_count: 0, pull: PullPolicy::IfNotPresent }]
    );
    // Held back by an image back-off: its start will pull, not a preparation now.
    let p = pod(&["i1", "i2"], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 1)).at(3);
    let failure = StartFailure { reason: StartFailureReason::ErrImagePull, message: "no such image".into(), at: t(2) };
    w.observed.start_failures.insert("i2".into(), failure);
    w.backoff.next(&podwright_planner::decide::pull_key("localhost/i2:1"), t(2), t(2));
    assert_eq!(w.plan().actions, vec![]);
    // A preparation that failed is not tried again before the container starts.
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 1)).at(3);
    w.observed.prepare_failed.insert("i2".into());
    assert_eq!(w.plan().actions, vec![]);
}

fn prepare_app(index: usize, restart_count: i32) -> Action {
    Action::PrepareContainer { kind: App, index, restart_count, pull: PullPolicy::IfNotPresent }
}

fn app_status(w: &World, name: &str) -> ContainerStatus {
    let s = w.status();
    s.container_statuses.unwrap().into_iter().find(|c| c.name == name).unwrap()
}

#[test]
fn the_app_containers_are_prepared_behind_the_last_init_container() {
    // Every app container, in order, after the start of the last init container.
    let p = pod(&["i1"], &["a", "b"], "Always");
    let w = World::new(p.clone()).with_sandbox();
    let plan = w.plan();
    assert_eq!(starts(&plan), vec![(Init, 0, 0)]);
    assert_eq!(prepares(&plan), vec![&prepare_app(0, 0), &prepare_app(1, 0)]);
    // With its start only: while it runs, nothing (a restarted podwright creates them after
    // its exit, as the kubelet does).
    let w = w.with(running(&p, "i1", 0, 1)).with(created(&p, "a", 0, 2)).at(2);
    assert_eq!(w.plan().actions, vec![]);
    let w = World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 1)).at(2);
    assert_eq!(w.plan().actions, vec![]);
    // Behind an init container before the last one: none.
    let two = pod(&["i1", "i2"], &["app"], "Always");
    let w = World::new(two.clone()).with_sandbox().with(running(&two, "i1", 0, 1)).with(created(&two, "i2", 0, 2));
    assert_eq!(w.at(3).plan().actions, vec![]);
    // The pod initialized (written down), its init containers' records pruned: apps start.
    let mut done = World::new(p.clone()).with_sandbox().at(3);
    done.observed.initialized_in = Some("sb1".into());
    assert_eq!(starts(&done.plan()), vec![(App, 0, 0), (App, 1, 0)]);
    assert_eq!(prepares(&done.plan()), Vec::<&Action>::new());
}

#[test]
fn a_prepared_app_container_waits_for_the_last_init_container_to_exit_0_unseen() {
    let p = pod(&["i1"], &["app"], "Always");
    let w = World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 1)).with(created(&p, "app", 0, 2)).at(3);
    assert_eq!(w.plan().actions, vec![]);
    // Invisible: the pod is not initialized, the app waits PodInitializing with no ID.
    assert!(!w.plan().initialized);
    assert_not_there(&app_status(&w, "app"), 0);
    let s = w.status();
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    let initialized = s.conditions.unwrap().into_iter().find(|c| c.type_ == "Initialized").unwrap();
    assert_eq!(initialized.status, "False");
    // i1 exited 0: the app starts as it is, and waits `PodInitializing` until it has.
    let done = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 1, 4)).with(created(&p, "app", 0, 2));
    assert_not_there(&app_status(&done, "app"), 0);
    let plan = done.at(4).plan();
    let start = Action::StartContainer {
        kind: App,
        index: 0,
        restart_count: 0,
        pull: PullPolicy::IfNotPresent,
        created: Some("app-0".into()),
    };
    assert_eq!(plan.actions, vec![start.clone()]);
    assert!(plan.initialized);
    // So does it once the pod is written down as initialized here, the init records pruned.
    let mut pruned = World::new(p.clone()).with_sandbox().with(created(&p, "app", 0, 2)).at(5);
    pruned.observed.initialized_in = Some("sb1".into());
    assert_eq!(pruned.plan().actions, vec![start]);
}

#[test]
fn a_prepared_app_container_is_no_evidence_of_initialization() {
    // A podwright restarted after preparing the app: i1 failed meanwhile and restarts
    // (OnFailure); the app is left for when i1 succeeds, neither started nor prepared again.
    let p = pod(&["i1"], &["app"], "OnFailure");
    let w =
        World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 1, 1, 3)).with(created(&p, "app", 0, 2)).at(4);
    let plan = w.plan();
    assert!(!plan.initialized);
    assert_eq!(starts(&plan), vec![(Init, 0, 1)]);
    assert_eq!(removes(&plan), Vec::<String>::new());
    // Its init container's records gone: it runs again, the app still waits.
    let mut gone = World::new(p.clone()).with_sandbox().with(created(&p, "app", 0, 2)).at(4);
    gone.observed.restart_counts.insert("i1".into(), 0);
    assert_eq!(starts(&gone.plan()), vec![(Init, 0, 1)]);
    // Under Never the pod fails, and the app goes, never shown.
    let p = pod(&["i1"], &["app"], "Never");
    let w =
        World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 1, 1, 3)).with(created(&p, "app", 0, 2)).at(4);
    assert_eq!(removes(&w.plan()), vec!["app-0".to_string()]);
    assert_eq!(starts(&w.plan()), vec![]);
    assert_eq!(w.status().phase.as_deref(), Some("Failed"));
    assert_not_there(&app_status(&w, "app"), 0);
    // A definition changed since: removed (created again from the new one after i1's exit).
    assert_stale_goes_alone(&["i1"], "app", "i1");
}

/// The pod's second sandbox, made after the first (`sb1`, where the helpers' instances are) died.
fn second_sandbox(w: World) -> World {
    let sb2 = podwright_planner::ObservedSandbox { id: "sb2".into(), attempt: 1, ..sandbox() };
    World { observed: podwright_planner::Observed { sandbox: Some(sb2), ..w.observed }, ..w }
}

/// `c`, made in the second sandbox.
fn in_sb2(c: ObservedContainer) -> ObservedContainer {
    ObservedContainer { sandbox_id: "sb2".into(), ..c }
}

#[test]
fn a_prepared_container_stranded_in_a_dead_sandbox_is_removed_at_every_pass_never_started_nor_shown() {
    // The app was prepared in sb1 with i1's start; sb1 died, the removal of the app failed,
    // and sb2 runs the pod again: i1 has exited 0 there.
    let p = pod(&["i1"], &["app"], "Always");
    let stranded = created(&p, "app", 0, 2);
    let w = second_sandbox(World::new(p.clone()).with(stranded)).with(in_sb2(exited(&p, "i1", 1, 0, 5, 6))).at(7);
    let plan = w.plan();
    assert!(plan.initialized);
    // Removed again, before a new instance is made (never started as it is, nor stopped): its
    // attempt is not taken again while it is there.
    let new_app =
        Action::StartContainer { kind: App, index: 0, restart_count: 1, pull: PullPolicy::IfNotPresent, created: None };
    assert_eq!(plan.actions, vec![Action::RemoveContainer { id: "app-0".into(), name: "app".into() }, new_app]);
    // Not shown: the app waits, as one not yet created.
    assert_not_there(&app_status(&w, "app"), 0);
    // The new instance's start failed and left it created in sb2, the removal failed once more:
    // removed again, the new one started as it is once the failure's wait is over, and neither
    // shows (neither as the state nor as the last state) until the new one runs.
    let mut w = w.with(in_sb2(created(&p, "app", 1, 7))).at(8);
    let failure = StartFailure { reason: StartFailureReason::RunContainerError, message: "no".into(), at: t(7) };
    w.observed.start_failures.insert("app".into(), failure);
    let st = app_status(&w, "app");
    assert_eq!(st.container_id, None, "{st:?}");
    assert_eq!(st.last_state, None, "{st:?}");
    assert_eq!(st.restart_count, 0, "{st:?}");
    assert_eq!(removes(&w.plan()), vec!["app-0".to_string()]);
    assert_eq!(starts(&w.plan()), vec![]);
    let later = w.clone().at(20);
    let plan = later.plan();
    assert_eq!(removes(&plan), vec!["app-0".to_string()]);
    let started: Vec<_> = plan.actions.iter().filter(|a| matches!(a, Action::StartContainer { .. })).collect();
    assert_eq!(
        started,
        vec![&Action::StartContainer {
            kind: App,
            index: 0,
            restart_count: 1,
            pull: PullPolicy::IfNotPresent,
            created: Some("app-1".into()),
        }]
    );
    // Once the new one runs, it is the one shown; the stranded one is no last state.
    let mut runs = later.at(22);
    runs.observed.containers[2] = in_sb2(running(&p, "app", 1, 21));
    runs.observed.start_failures.clear();
    let st = app_status(&runs, "app");
    assert_eq!(st.container_id.as_deref(), Some("containerd://app-1"), "{st:?}");
    assert_eq!(st.last_state, None, "{st:?}");
    assert_eq!(removes(&runs.plan()), vec!["app-0".to_string()]);
}

#[test]
fn a_container_stranded_in_a_dead_sandbox_goes_whatever_the_pod_does() {
    let p = pod(&["i1", "i2"], &["app"], "Always");
    // A prepared init container, while i1 runs in sb2: removed, and prepared again in sb2 with
    // the next attempt (not the one it still takes), and not shown.
    let w =
        second_sandbox(World::new(p.clone()).with(created(&p, "i2", 0, 2))).with(in_sb2(running(&p, "i1", 1, 5))).at(6);
    assert_eq!(w.plan().actions, vec![Action::RemoveContainer { id: "i2-0".into(), name: "i2".into() }, prepare(1, 1)]);
    assert_not_there(&init_status(&w, "i2"), 0);
    // The pod deleted: stopped, and the stranded one removed too (it is nothing to stop).
    let mut deleted = w.clone();
    deleted.deleting = true;
    let plan = deleted.plan();
    assert!(matches!(plan.actions[0], Action::KillPod { .. }), "{plan:?}");
    assert_eq!(removes(&plan), vec!["i2-0".to_string()]);
    // No sandbox left at all: every created instance is stranded; a finished pod still
    // removes it, and shows nothing of it.
    let mut gone = World::new(p.clone()).with(exited(&p, "i1", 0, 1, 1, 2)).with(created(&p, "app", 3, 2)).at(3);
    gone.deleting = true;
    assert_eq!(removes(&gone.plan()), vec!["app-3".to_string()]);
    assert_not_there(&app_status(&gone, "app"), 0);
}
