//! The recorder keeps each change once, at the time it happened.

mod common;

use common::*;
use podwright_timeline::*;

fn states(r: &Recorder, lane: &str) -> Vec<(i64, State)> {
    let l = r.timeline().lanes.iter().find(|l| l.name == lane).expect("lane");
    l.states.iter().map(|c| (c.at.duration_since(t(0)).as_millis() as i64, c.value.clone())).collect()
}

fn markers(r: &Recorder, lane: &str) -> Vec<(i64, MarkerKind)> {
    let l = r.timeline().lanes.iter().find(|l| l.name == lane).expect("lane");
    l.markers.iter().map(|m| (m.at.duration_since(t(0)).as_millis() as i64, m.kind.clone())).collect()
}

fn run() -> State {
    State::Running { started: true, ready: false }
}

fn ready() -> State {
    State::Running { started: true, ready: true }
}

fn wait(reason: &str) -> State {
    State::Waiting { reason: Some(reason.into()), message: Some(format!("{reason} message")) }
}

fn exited(code: i32) -> State {
    State::Terminated { exit_code: code, reason: Some(if code == 0 { "Completed" } else { "Error" }.into()) }
}

#[test]
fn lanes_follow_the_spec_init_containers_first_with_sidecars_marked() {
    let r = Recorder::new(&pod(), t(10));
    let tl = r.timeline();
    let lanes: Vec<(&str, Role)> = tl.lanes.iter().map(|l| (l.name.as_str(), l.role)).collect();
    assert_eq!(lanes, [("init-setup", Role::Init(0)), ("log-shipper", Role::Sidecar(1)), ("app", Role::App)]);
    assert_eq!((tl.name.as_str(), tl.namespace.as_str(), tl.uid.as_str()), ("web", "shop", "u1"));
    // The axis starts at the pod's creation, not when the recorder first saw it.
    assert_eq!((tl.start, tl.end), (t(0), t(10)));
}

#[test]
fn container_states_are_kept_once_per_change_at_the_time_the_status_gives() {
    let mut r = Recorder::new(&pod(), t(0));
    let s1 =
        status("Pending", &[], &[waiting("init-setup", "PodInitializing", 0)], &[waiting("app", "PodInitializing", 0)]);
    r.status(&s1, t(100));
    // The same status again changes nothing.
    r.status(&s1, t(150));
    r.status(&status("Pending", &[], &[running("init-setup", 180, false, 0)], &[]), t(200));
    r.status(&status("Pending", &[], &[terminated("init-setup", 0, 1_150, 0)], &[]), t(1_200));
    r.status(&status("Running", &[], &[], &[running("app", 1_400, false, 0)]), t(1_500));
    // A ready flip has no time of its own in the status: it takes the moment it was seen.
    r.status(&status("Running", &[], &[], &[running("app", 1_400, true, 0)]), t(2_000));
    assert_eq!(states(&r, "init-setup"), [(100, wait("PodInitializing")), (180, run()), (1_150, exited(0))]);
    assert_eq!(states(&r, "app"), [(100, wait("PodInitializing")), (1_400, run()), (2_000, ready())]);
    let phases: Vec<(i64, &str)> =
        r.timeline().phases.iter().map(|c| (c.at.duration_since(t(0)).as_millis() as i64, c.value.as_str())).collect();
    assert_eq!(phases, [(100, "Pending"), (1_500, "Running")]);
    assert_eq!(r.timeline().end, t(2_000));
}

#[test]
fn a_time_from_the_status_never_goes_back_before_the_last_change_nor_after_it_was_seen() {
    let mut r = Recorder::new(&pod(), t(0));
    r.status(&status("Pending", &[], &[], &[waiting("app", "ContainerCreating", 0)]), t(500));
    // startedAt before the waiting state was recorded (cut to the second): the start is put
    // where it was seen.
    r.status(&status("Running", &[], &[], &[running("app", 300, false, 0)]), t(600));
    // finishedAt after the moment the status was seen: it is put at that moment.
    r.status(&status("Running", &[], &[], &[terminated("app", 0, 9_000, 0)]), t(700));
    assert_eq!(states(&r, "app"), [(500, wait("ContainerCreating")), (600, run()), (700, exited(0))]);
}

#[test]
fn a_terminated_state_shown_again_after_the_back_off_is_drawn_when_it_is_seen() {
    let mut r = Recorder::new(&pod(), t(0));
    r.status(&status("Running", &[], &[], &[running("app", 100, true, 0)]), t(200));
    r.status(&status("Running", &[], &[], &[terminated("app", 3, 1_000, 0)]), t(1_050));
    r.status(&status("Running", &[], &[], &[with_last(waiting("app", "CrashLoopBackOff", 0), 3, 1_000)]), t(1_100));
    // The back-off is over: the status shows the last exit again until the next start.
    r.status(&status("Running", &[], &[], &[terminated("app", 3, 1_000, 0)]), t(11_000));
    r.status(&status("Running", &[], &[], &[with_last(running("app", 11_050, true, 1), 3, 1_000)]), t(11_100));
    assert_eq!(
        states(&r, "app"),
        [(100, ready()), (1_000, exited(3)), (1_100, wait("CrashLoopBackOff")), (11_000, exited(3)), (11_050, ready())]
    );
}

#[test]
fn a_restart_between_two_statuses_still_shows_the_run_that_ended() {
    let mut r = Recorder::new(&pod(), t(0));
    r.status(&status("Running", &[], &[], &[running("app", 100, true, 0)]), t(200));
    // Crashed at 4 s, restarted at 5 s: the next status shows only the new run and lastState.
    r.status(&status("Running", &[], &[], &[with_last(running("app", 5_000, false, 1), 1, 4_000)]), t(5_100));
    // Crashed again; this time the statuses show the exit and the back-off.
    r.status(&status("Running", &[], &[], &[with_last(terminated("app", 2, 6_000, 1), 1, 4_000)]), t(6_050));
    r.status(&status("Running", &[], &[], &[with_last(waiting("app", "CrashLoopBackOff", 1), 2, 6_000)]), t(6_100));
    r.status(&status("Running", &[], &[], &[with_last(running("app", 26_000, false, 2), 2, 6_000)]), t(26_100));
    assert_eq!(
        states(&r, "app"),
        [
            (100, ready()),
            (4_000, exited(1)),
            (5_000, run()),
            (6_000, exited(2)),
            (6_100, wait("CrashLoopBackOff")),
            (26_000, run()),
        ]
    );
    assert_eq!(markers(&r, "app"), [(5_000, MarkerKind::Restart(1)), (26_000, MarkerKind::Restart(2))]);
}

#[test]
fn a_crash_seen_only_as_the_back_off_that_follows_it_still_shows_the_exit() {
    let mut r = Recorder::new(&pod(), t(0));
    r.status(&status("Running", &[], &[], &[running("app", 100, true, 0)]), t(200));
    // The next status already waits for the back-off; the exit is in lastState.
    r.status(&status("Running", &[], &[], &[with_last(waiting("app", "CrashLoopBackOff", 0), 3, 1_000)]), t(1_100));
    r.status(&status("Running", &[], &[], &[with_last(running("app", 11_000, true, 1), 3, 1_000)]), t(11_100));
    assert_eq!(
        states(&r, "app"),
        [(100, ready()), (1_000, exited(3)), (1_100, wait("CrashLoopBackOff")), (11_000, ready())]
    );
    assert_eq!(markers(&r, "app"), [(11_000, MarkerKind::Restart(1))]);
}

#[test]
fn a_recorder_that_starts_late_marks_no_restart_it_did_not_see() {
    let mut r = Recorder::new(&pod(), t(0));
    r.status(&status("Running", &[], &[], &[with_last(running("app", 100, true, 3), 1, 50)]), t(200));
    assert_eq!(states(&r, "app"), [(100, ready())]);
    assert!(markers(&r, "app").is_empty());
}

#[test]
fn conditions_keep_the_kubelets_order_and_their_transition_times() {
    let mut r = Recorder::new(&pod(), t(0));
    // Given out of order; lastTransitionTime before the pod's creation is put at its start.
    r.status(
        &status(
            "Pending",
            &[
                ("Ready", "False", Some("PodInitializing"), -50),
                ("Initialized", "False", Some("ContainersNotInitialized"), 40),
                ("PodReadyToStartContainers", "True", None, 60),
                ("example.com/gate", "False", None, 70),
                ("PodScheduled", "True", None, 0),
                ("ContainersReady", "False", Some("PodInitializing"), 40),
            ],
            &[],
            &[],
        ),
        t(100),
    );
    // Ready's reason changes without a transition: the change takes the moment it was seen.
    r.status(
        &status(
            "Running",
            &[("Ready", "False", Some("ContainersNotReady"), -50), ("Initialized", "True", None, 1_200)],
            &[],
            &[],
        ),
        t(1_300),
    );
    let tl = r.timeline();
    let order: Vec<&str> = tl.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        order,
        ["PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready", "example.com/gate"]
    );
    let changes = |type_: &str| -> Vec<(i64, String, Option<String>)> {
        tl.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap()
            .changes
            .iter()
            .map(|c| (c.at.duration_since(t(0)).as_millis() as i64, c.value.status.clone(), c.value.reason.clone()))
            .collect()
    };
    assert_eq!(
        changes("Ready"),
        [
            (0, "False".into(), Some("PodInitializing".into())),
            (1_300, "False".into(), Some("ContainersNotReady".into()))
        ]
    );
    assert_eq!(
        changes("Initialized"),
        [(40, "False".into(), Some("ContainersNotInitialized".into())), (1_200, "True".into(), None)]
    );
}

#[test]
fn events_become_marks_on_their_containers_lane() {
    let mut r = Recorder::new(&pod(), t(0));
    r.status(
        &status("Running", &[], &[running("log-shipper", 100, true, 0)], &[running("app", 200, false, 0)]),
        t(300),
    );
    let app = Some("spec.containers{app}");
    let sidecar = Some("spec.initContainers{log-shipper}");
    for e in [
        event(app, "Normal", "Pulled", "Container image \"busybox\" already present on machine", 150),
        event(app, "Normal", "Started", "Started container app", 200),
        event(app, "Warning", "Unhealthy", "Readiness probe failed: not yet", 1_000),
        event(app, "Warning", "Unhealthy", "Liveness probe errored and resulted in unknown state: rpc error", 2_000),
        event(app, "Warning", "Unhealthy", "Startup probe failed: no", 3_000),
        event(app, "Warning", "FailedPostStartHook", "PostStartHook failed", 3_500),
        event(app, "Warning", "BackOff", "Back-off restarting failed container app in pod web_shop(u1)", 4_000),
        event(sidecar, "Normal", "Killing", "Stopping container log-shipper", 5_000),
        event(sidecar, "Warning", "FailedPreStopHook", "PreStopHook failed", 5_200),
        event(None, "Normal", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.", 6_000),
    ] {
        r.event(&e);
    }
    let hook = |hook, failed| MarkerKind::Hook { hook, failed };
    let ev = |reason: &str, warning| MarkerKind::Event { reason: reason.into(), warning };
    assert_eq!(
        markers(&r, "app"),
        [
            (150, ev("Pulled", false)),
            (200, ev("Started", false)),
            // postStart runs right after the start; the kubelet records no event when it succeeds.
            (200, hook(Hook::PostStart, false)),
            (1_000, MarkerKind::ProbeFailed(Probe::Readiness)),
            (2_000, MarkerKind::ProbeFailed(Probe::Liveness)),
            (3_000, MarkerKind::ProbeFailed(Probe::Startup)),
            (3_500, hook(Hook::PostStart, true)),
            (4_000, ev("BackOff", true)),
        ]
    );
    // preStop runs at the Killing of a running container.
    assert_eq!(
        markers(&r, "log-shipper"),
        [(5_000, MarkerKind::Killing), (5_000, hook(Hook::PreStop, false)), (5_200, hook(Hook::PreStop, true))]
    );
    let pod_events = &r.timeline().pod_events;
    assert_eq!(pod_events.len(), 1);
    assert_eq!(pod_events[0].kind, ev("SandboxChanged", false));
    assert_eq!(pod_events[0].text, "SandboxChanged: Pod sandbox changed, it will be killed and re-created.");
    assert_eq!(r.timeline().end, t(6_000), "events move the end of the axis too");
}

#[test]
fn killing_a_container_that_is_not_running_runs_no_pre_stop_hook() {
    let mut r = Recorder::new(&pod(), t(0));
    r.status(&status("Pending", &[], &[waiting("log-shipper", "ContainerCreating", 0)], &[]), t(100));
    r.event(&event(
        Some("spec.initContainers{log-shipper}"),
        "Normal",
        "Killing",
        "Stopping container log-shipper",
        200,
    ));
    assert_eq!(markers(&r, "log-shipper"), [(200, MarkerKind::Killing)]);
}

#[test]
fn events_of_another_pod_or_without_a_time_are_left_out() {
    let mut r = Recorder::new(&pod(), t(0));
    let mut other = event(Some("spec.containers{app}"), "Normal", "Started", "Started container app", 100);
    other.involved_object.uid = Some("u2".into());
    r.event(&other);
    let mut timeless = event(Some("spec.containers{app}"), "Normal", "Started", "Started container app", 100);
    timeless.first_timestamp = None;
    timeless.last_timestamp = None;
    r.event(&timeless);
    assert!(markers(&r, "app").is_empty());
    assert!(r.timeline().pod_events.is_empty());
}

#[test]
fn a_lane_keeps_at_most_its_bound_and_counts_what_it_dropped() {
    let mut r = Recorder::new(&pod(), t(0));
    let n = MAX_PER_LANE as i64 + 10;
    for i in 0..n {
        r.event(&event(Some("spec.containers{app}"), "Warning", "Unhealthy", "Readiness probe failed: no", i));
    }
    let lane = &r.timeline().lanes[2];
    assert!(lane.markers.len() <= MAX_PER_LANE);
    assert_eq!(lane.markers.len() + lane.dropped, n as usize);
    // The newest are kept.
    assert_eq!(lane.markers.last().map(|m| m.at), Some(t(n - 1)));
}

#[test]
fn a_recorder_can_move_to_another_thread() {
    fn send<T: Send + Sync + 'static>(_: &T) {}
    send(&Recorder::new(&pod(), t(0)));
}
