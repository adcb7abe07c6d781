//! Status rules: phase (`getPhase`), conditions and container states as the kubelet reports them.

mod common;
use common::*;
use k8s_openapi::api::core::v1::{ContainerStatus, LinuxContainerUser, PodStatus};
use podwright_planner::ObservedContainer;

fn waiting_reason(s: &ContainerStatus) -> Option<&str> {
    s.state.as_ref()?.waiting.as_ref()?.reason.as_deref()
}
fn cond<'a>(s: &'a PodStatus, kind: &str) -> (&'a str, Option<&'a str>, Option<&'a str>) {
    let c = s.conditions.as_ref().unwrap().iter().find(|c| c.type_ == kind).unwrap();
    (c.status.as_str(), c.reason.as_deref(), c.message.as_deref())
}

#[test]
fn during_init_apps_and_later_inits_wait_with_pod_initializing() {
    let p = pod(&["i1", "i2"], &["app"], "Always");
    let s = World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 1)).status();
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    let inits = s.init_container_statuses.as_ref().unwrap();
    assert!(inits[0].state.as_ref().unwrap().running.is_some());
    assert_eq!(waiting_reason(&inits[1]), Some("PodInitializing"));
    assert_eq!(waiting_reason(&s.container_statuses.as_ref().unwrap()[0]), Some("PodInitializing"));
    assert_eq!(
        cond(&s, "Initialized"),
        ("False", Some("ContainersNotInitialized"), Some("containers with incomplete status: [i1 i2]"))
    );
    assert_eq!(
        cond(&s, "ContainersReady"),
        ("False", Some("ContainersNotReady"), Some("containers with unready status: [app]"))
    );
    assert_eq!(cond(&s, "Ready").0, "False");
    assert_eq!(cond(&s, "PodReadyToStartContainers").0, "True");
    assert_eq!(cond(&s, "PodScheduled").0, "True");
}

#[test]
fn without_init_containers_apps_wait_with_container_creating() {
    let p = pod(&[], &["app"], "Always");
    let s = World::new(p).status();
    assert_eq!(waiting_reason(&s.container_statuses.unwrap()[0]), Some("ContainerCreating"));
    assert_eq!(cond(&World::new(pod(&[], &["app"], "Always")).status(), "PodReadyToStartContainers").0, "False");
}

#[test]
fn phase_table() {
    // (policy, init states, app states, phase)
    let p = |policy| pod(&["i1"], &["app"], policy);
    let rows: Vec<(&str, World, &str)> = vec![
        ("nothing yet", World::new(p("Always")), "Pending"),
        ("init running", World::new(p("Always")).with_sandbox().with(running(&p("Always"), "i1", 0, 1)), "Pending"),
        (
            "init failed, Never",
            World::new(p("Never")).with_sandbox().with(exited(&p("Never"), "i1", 0, 1, 1, 2)),
            "Failed",
        ),
        (
            "init failed, OnFailure",
            World::new(p("OnFailure")).with_sandbox().with(exited(&p("OnFailure"), "i1", 0, 1, 1, 2)),
            "Pending",
        ),
        (
            "app running",
            World::new(p("Always")).with_sandbox().with(exited(&p("Always"), "i1", 0, 0, 1, 2)).with(running(
                &p("Always"),
                "app",
                0,
                3,
            )),
            "Running",
        ),
        (
            "app succeeded, Never",
            World::new(p("Never")).with_sandbox().with(exited(&p("Never"), "i1", 0, 0, 1, 2)).with(exited(
                &p("Never"),
                "app",
                0,
                0,
                3,
                4,
            )),
            "Succeeded",
        ),
        (
            "app failed, Never",
            World::new(p("Never")).with_sandbox().with(exited(&p("Never"), "i1", 0, 0, 1, 2)).with(exited(
                &p("Never"),
                "app",
                0,
                2,
                3,
                4,
            )),
            "Failed",
        ),
        (
            "app succeeded, OnFailure",
            World::new(p("OnFailure")).with_sandbox().with(exited(&p("OnFailure"), "i1", 0, 0, 1, 2)).with(exited(
                &p("OnFailure"),
                "app",
                0,
                0,
                3,
                4,
            )),
            "Succeeded",
        ),
        (
            "app exited 0, Always (will restart)",
            World::new(p("Always")).with_sandbox().with(exited(&p("Always"), "i1", 0, 0, 1, 2)).with(exited(
                &p("Always"),
                "app",
                0,
                0,
                3,
                4,
            )),
            "Running",
        ),
    ];
    for (what, w, want) in rows {
        assert_eq!(w.status().phase.as_deref(), Some(want), "{what}");
    }
}

#[test]
fn crash_loop_shows_waiting_with_last_state_and_message() {
    let p = pod(&["i1"], &["app"], "Always");
    let mut w = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "i1", 0, 1, 1, 2))
        .with(exited(&p, "i1", 1, 1, 3, 4))
        .at(5);
    w.backoff.next(&podwright_planner::pod::init_containers(&p).next().unwrap().backoff_key(), t(2), t(2));
    let s = w.status();
    let i1 = &s.init_container_statuses.unwrap()[0];
    assert_eq!(waiting_reason(i1), Some("CrashLoopBackOff"));
    assert_eq!(
        i1.state.as_ref().unwrap().waiting.as_ref().unwrap().message.as_deref(),
        Some("back-off 10s restarting failed container=i1 pod=p_default(u1)")
    );
    assert_eq!(i1.restart_count, 1);
    let last = i1.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    assert_eq!(s.phase.as_deref(), Some("Pending"));
}

#[test]
fn terminated_states_carry_runtime_reason_exit_code_and_ids() {
    let p = pod(&["i1"], &["app"], "Never");
    let mut oom = exited(&p, "app", 0, 137, 3, 4);
    oom.reason = "OOMKilled".into();
    let s = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 1, 2)).with(oom).status();
    let i1 = &s.init_container_statuses.as_ref().unwrap()[0];
    let t1 = i1.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!((t1.exit_code, t1.reason.as_deref()), (0, Some("Completed")));
    assert!(i1.ready, "a completed init container is ready");
    assert_eq!(i1.container_id.as_deref(), Some("containerd://i1-0"));
    assert_eq!(i1.image_id, "sha256:abc");
    let app = &s.container_statuses.as_ref().unwrap()[0];
    let ta = app.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!((ta.exit_code, ta.reason.as_deref()), (137, Some("OOMKilled")));
    assert_eq!(s.phase.as_deref(), Some("Failed"));
}

#[test]
fn succeeded_pod_conditions_say_pod_completed() {
    let p = pod(&["i1"], &["app"], "Never");
    let s = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "i1", 0, 0, 1, 2))
        .with(exited(&p, "app", 0, 0, 3, 4))
        .status();
    assert_eq!(cond(&s, "Initialized"), ("True", Some("PodCompleted"), None));
    assert_eq!(cond(&s, "ContainersReady"), ("False", Some("PodCompleted"), None));
    assert_eq!(cond(&s, "Ready"), ("False", Some("PodCompleted"), None));
}

#[test]
fn running_app_is_ready_and_started() {
    let p = pod(&["i1"], &["app"], "Always");
    let s =
        World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 0, 1, 2)).with(running(&p, "app", 0, 3)).status();
    let app = &s.container_statuses.as_ref().unwrap()[0];
    assert!(app.ready && app.started == Some(true));
    assert_eq!(cond(&s, "Ready").0, "True");
    assert_eq!(cond(&s, "Initialized"), ("True", None, None));
    assert_eq!(s.pod_ip.as_deref(), Some("10.0.0.2"));
    assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
}

#[test]
fn app_statuses_are_sorted_by_name_and_inits_keep_spec_order() {
    let p = pod(&["z", "a"], &["b", "a2"], "Always");
    let s = World::new(p).status();
    let names = |v: &Vec<ContainerStatus>| v.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(s.init_container_statuses.as_ref().unwrap()), ["z", "a"]);
    assert_eq!(names(s.container_statuses.as_ref().unwrap()), ["a2", "b"]);
}

#[test]
fn sidecar_running_counts_for_readiness_and_not_for_completion() {
    let p = pod(&["+side"], &["app"], "Never");
    let w = World::new(p.clone()).with_sandbox().with(running(&p, "side", 0, 1)).with(exited(&p, "app", 0, 0, 2, 3));
    // Until the sidecar is stopped the pod is still Running; then it is Succeeded from the app.
    assert_eq!(w.status().phase.as_deref(), Some("Running"));
    let w =
        World::new(p.clone()).with_sandbox().with(exited(&p, "side", 0, 143, 1, 4)).with(exited(&p, "app", 0, 0, 2, 3));
    assert_eq!(w.status().phase.as_deref(), Some("Succeeded"));
}

#[test]
fn terminal_phase_is_kept() {
    let p = pod(&[], &["app"], "Never");
    let w = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, 1, 1, 2));
    let first = w.status();
    assert_eq!(first.phase.as_deref(), Some("Failed"));
    let w2 = World::new(p.clone());
    let again = podwright_planner::pod_status(&w2.ctx(), Some(&first));
    assert_eq!(again.phase.as_deref(), Some("Failed"));
}

#[test]
fn a_pod_deleted_during_init_ends_failed_once_nothing_runs() {
    let p = pod(&["i1"], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "i1", 0, 1));
    w.deleting = true;
    assert_eq!(w.status().phase.as_deref(), Some("Pending"), "still running");
    let mut w = World::new(p.clone()).with_sandbox().with(exited(&p, "i1", 0, 143, 1, 2));
    w.deleting = true;
    assert_eq!(w.status().phase.as_deref(), Some("Failed"));
}

/// The pod with a probe (JSON) on one container.
fn probed(mut p: k8s_openapi::api::core::v1::Pod, name: &str, field: &str) -> k8s_openapi::api::core::v1::Pod {
    let spec = p.spec.as_mut().unwrap();
    let c =
        spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut()).find(|c| c.name == name).unwrap();
    let probe = Some(serde_json::from_value(serde_json::json!({"exec": {"command": ["true"]}})).unwrap());
    match field {
        "startupProbe" => c.startup_probe = probe,
        _ => c.readiness_probe = probe,
    }
    p
}

#[test]
fn probe_results_drive_started_ready_and_the_ready_conditions() {
    // (probe field, result for the instance, started, ready, Ready condition)
    let rows = [
        ("readinessProbe", None, true, false, "False"),
        ("readinessProbe", Some(false), true, false, "False"),
        ("readinessProbe", Some(true), true, true, "True"),
        ("startupProbe", None, false, false, "False"),
        ("startupProbe", Some(false), false, false, "False"),
        ("startupProbe", Some(true), true, true, "True"),
    ];
    for (field, result, started, ready, condition) in rows {
        let p = probed(pod(&[], &["app"], "Always"), "app", field);
        let mut w = World::new(p.clone()).with_sandbox().with(running(&p, "app", 0, 1));
        if let Some(r) = result {
            let table =
                if field == "startupProbe" { &mut w.observed.probes.startup } else { &mut w.observed.probes.readiness };
            table.insert("app-0".into(), r);
        }
        let s = w.status();
        let app = &s.container_statuses.as_ref().unwrap()[0];
        assert_eq!((app.started, app.ready), (Some(started), ready), "{field} {result:?}");
        assert_eq!(cond(&s, "Ready").0, condition, "{field} {result:?}");
        assert_eq!(cond(&s, "ContainersReady").0, condition, "{field} {result:?}");
    }
}

#[test]
fn an_unready_sidecar_keeps_the_pod_unready_and_an_unstarted_one_uninitialized() {
    let p = probed(probed(pod(&["+side"], &["app"], "Always"), "side", "readinessProbe"), "side", "startupProbe");
    let base = World::new(p.clone()).with_sandbox().with(running(&p, "side", 0, 1));
    // Not started: initialization waits, and the app has not started.
    let s = base.status();
    assert_eq!(cond(&s, "Initialized").0, "False");
    assert_eq!(s.init_container_statuses.as_ref().unwrap()[0].started, Some(false));
    // Started and the app running, but the sidecar not ready: ContainersReady names it.
    let mut w = World { observed: base.observed.clone(), ..World::new(p.clone()) }.with(running(&p, "app", 0, 2));
    w.observed.probes.startup.insert("side-0".into(), true);
    let s = w.status();
    assert_eq!(cond(&s, "Initialized").0, "True");
    assert_eq!(
        cond(&s, "ContainersReady"),
        ("False", Some("ContainersNotReady"), Some("containers with unready status: [side]"))
    );
    w.observed.probes.readiness.insert("side-0".into(), true);
    assert_eq!(cond(&w.status(), "Ready").0, "True");
}

#[test]
fn readiness_gates_hold_ready_until_their_conditions_are_true() {
    let mut p = pod(&[], &["app"], "Always");
    p.spec.as_mut().unwrap().readiness_gates =
        Some(vec![serde_json::from_value(serde_json::json!({"conditionType": "example.com/lb"})).unwrap()]);
    let w = World::new(p.clone()).with_sandbox().with(running(&p, "app", 0, 1));
    let s = w.status();
    assert_eq!(cond(&s, "ContainersReady").0, "True");
    assert_eq!(
        cond(&s, "Ready"),
        (
            "False",
            Some("ReadinessGatesNotReady"),
            Some("corresponding condition of pod readiness gate \"example.com/lb\" does not exist.")
        )
    );
}

/// Found by the crash-and-fault simulation: podwright killed while it removed a finished pod
/// finds some of its records gone, others (an older instance whose removal failed) still there.
/// How each container ended, once reported for the terminal pod, stays as it was.
#[test]
fn a_terminal_pods_ended_containers_stay_as_reported_whatever_records_are_left() {
    let p = pod(&["i1"], &["app"], "Never");
    let ended = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "i1", 0, 0, 1, 2))
        .with(exited(&p, "app", 1, 0, 3, 9))
        .at(10)
        .status();
    assert_eq!(ended.phase.as_deref(), Some("Succeeded"));
    // Later: i1's record is gone, and of app only an older instance, which failed, is left.
    let w = World::new(p.clone()).with(exited(&p, "app", 0, 143, 1, 2)).at(30);
    let s = podwright_planner::pod_status(&w.ctx(), Some(&ended));
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    assert_eq!(s.init_container_statuses, ended.init_container_statuses);
    assert_eq!(s.container_statuses, ended.container_statuses);
}

#[test]
fn volume_mounts_and_the_user_are_reported_as_the_kubelet_does() {
    let mut p = pod(&[], &["app", "later"], "Always");
    let mounts = serde_json::json!([
        {"name": "data", "mountPath": "/data"},
        {"name": "cfg", "mountPath": "/cfg", "readOnly": true},
        {"name": "tree", "mountPath": "/tree", "readOnly": true, "recursiveReadOnly": "IfPossible"},
    ]);
    for c in &mut p.spec.as_mut().unwrap().containers {
        c.volume_mounts = serde_json::from_value(mounts.clone()).unwrap();
    }
    let user = LinuxContainerUser { uid: 1000, gid: 3000, supplemental_groups: Some(vec![3000, 4000]) };
    let app = ObservedContainer {
        user: Some(user.clone()),
        recursive_read_only: vec!["/tree".into()],
        ..running(&p, "app", 0, 1)
    };
    let mut w = World::new(p).with_sandbox().with(app);
    let statuses = |w: &World| w.status().container_statuses.unwrap();
    let modes = |s: &ContainerStatus| {
        let m = s.volume_mounts.as_ref().unwrap();
        m.iter().map(|m| (m.read_only, m.recursive_read_only.clone())).collect::<Vec<_>>()
    };
    let st = statuses(&w);
    // The running instance: as the runtime mounted it, and the user it reports.
    assert_eq!(
        modes(&st[0]),
        [(None, None), (Some(true), Some("Disabled".into())), (Some(true), Some("Enabled".into()))]
    );
    assert_eq!(st[0].user.as_ref().unwrap().linux.as_ref(), Some(&user));
    // Not made yet: IfPossible resolves by what the runtime handler can do; no user yet.
    assert_eq!(modes(&st[1])[2], (Some(true), Some("Disabled".into())));
    assert!(st[1].user.is_none());
    w.observed.recursive_read_only_supported = true;
    assert_eq!(modes(&statuses(&w)[1])[2], (Some(true), Some("Enabled".into())));
    assert_eq!(statuses(&w)[1].volume_mounts.as_ref().unwrap()[0].name, "data");
}
