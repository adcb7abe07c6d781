//! Issue 23's status rules, compared with a 1.37 kubelet: `observedGeneration` (KEP-5067), the
//! IPs of a finished pod, a container in its back-off when the node ends the pod, the image
//! back-off's reason and message, and no `DisruptionTarget` for an emptyDir eviction.

mod common;
use common::*;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, PodStatus};
use podwright_planner::{Eviction, StartFailure, StartFailureReason, pod_status};

fn app<'a>(s: &'a PodStatus, name: &str) -> &'a ContainerStatus {
    s.container_statuses.iter().flatten().find(|c| c.name == name).expect("status")
}

fn terminated(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.state.as_ref()?.terminated.as_ref()
}

fn waiting(s: &ContainerStatus) -> (Option<&str>, Option<&str>) {
    let w = s.state.as_ref().and_then(|st| st.waiting.as_ref());
    (w.and_then(|w| w.reason.as_deref()), w.and_then(|w| w.message.as_deref()))
}

/// The status carries the generation of the spec it was made from, and so does each condition
/// the kubelet owns; a pod without a generation (a manifest) reports none.
#[test]
fn observed_generation_is_the_specs_on_the_status_and_the_kubelets_conditions() {
    let mut p = pod(&[], &["app"], "Always");
    p.metadata.generation = Some(3);
    let w = World::new(p.clone()).with_sandbox().with(running(&p, "app", 0, 1)).at(2);
    let s = w.status();
    assert_eq!(s.observed_generation, Some(3));
    let conditions = s.conditions.as_deref().unwrap_or_default();
    let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]);
    assert!(conditions.iter().all(|c| c.observed_generation == Some(3)), "{conditions:?}");

    // A spec update (generation 4) is reported on the next status, on unchanged conditions
    // too (the kubelet stamps every condition with the pod's generation).
    let mut updated = p.clone();
    updated.metadata.generation = Some(4);
    let w2 = World { pod: updated, ..w.clone() };
    let again = pod_status(&w2.ctx(), Some(&s));
    assert_eq!(again.observed_generation, Some(4));
    assert!(again.conditions.iter().flatten().all(|c| c.observed_generation == Some(4)));

    let manifest = pod(&[], &["app"], "Always");
    let s = World::new(manifest.clone()).with_sandbox().with(running(&manifest, "app", 0, 1)).status();
    assert_eq!(s.observed_generation, None);
    assert!(s.conditions.iter().flatten().all(|c| c.observed_generation.is_none()));
}

/// A finished pod keeps the IPs it had, once its sandbox has stopped and the runtime reports
/// none (the kubelet's PLEG keeps a dead pod's IPs); a ready sandbox's own IP always wins.
#[test]
fn a_finished_pod_keeps_its_ip() {
    let p = pod(&[], &["app"], "Never");
    let w = World::new(p.clone()).with_sandbox().with(running(&p, "app", 0, 1)).at(2);
    let running_status = w.status();
    assert_eq!(running_status.pod_ip.as_deref(), Some("10.0.0.2"));

    let mut done = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, 0, 1, 3)).at(4);
    let sandbox = done.observed.sandbox.as_mut().unwrap();
    sandbox.ready = false;
    sandbox.ip = None;
    let s = pod_status(&done.ctx(), Some(&running_status));
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    assert_eq!(s.pod_ip.as_deref(), Some("10.0.0.2"));
    assert_eq!(s.pod_ips.as_ref().map(|ips| ips[0].ip.as_str()), Some("10.0.0.2"));

    // A ready sandbox without an IP (the host's network, before the node's IP is known) says
    // so itself: nothing is carried over.
    let mut no_ip = World::new(p.clone()).with_sandbox().with(running(&p, "app", 0, 1)).at(2);
    no_ip.observed.sandbox.as_mut().unwrap().ip = None;
    assert_eq!(pod_status(&no_ip.ctx(), Some(&running_status)).pod_ip, None);
}

/// The active deadline passes while a container waits in its crash back-off: the kubelet's
/// reason cache still shows it waiting, and `TerminatePod` then reports it lost (137), with its
/// last exit as its last state.
#[test]
fn the_deadline_during_a_crash_loop_ends_the_container_lost_with_its_last_exit() {
    let mut p = pod(&[], &["app"], "Always");
    p.spec.as_mut().unwrap().active_deadline_seconds = Some(10);
    let key = podwright_planner::pod::app_containers(&p).next().unwrap().backoff_key();
    let mut w = World::new(p.clone())
        .with_sandbox()
        .with(exited(&p, "app", 0, 1, 1, 2))
        .with(exited(&p, "app", 1, 1, 3, 8))
        .at(11);
    w.backoff.next(&key, t(2), t(2));
    w.backoff.next(&key, t(8), t(8));
    let s = w.status();
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("DeadlineExceeded"));
    let a = app(&s, "app");
    let state = terminated(a).expect("terminated");
    assert_eq!((state.reason.as_deref(), state.exit_code), (Some("ContainerStatusUnknown"), 137));
    assert_eq!(state.message.as_deref(), Some("The container could not be located when the pod was terminated"));
    let last = a.last_state.as_ref().and_then(|l| l.terminated.as_ref()).expect("last state");
    assert_eq!((last.exit_code, last.container_id.as_deref()), (1, Some("containerd://app-1")));
    assert_eq!(a.restart_count, 1);

    // Once reported, it stays so.
    let later = pod_status(&World { now: t(20), ..w.clone() }.ctx(), Some(&s));
    assert_eq!(app(&later, "app"), a);

    // A deleted pod is not restarted by the kubelet's rule (deletion): the exit stays its state.
    let mut deleted = w.clone();
    deleted.pod.spec.as_mut().unwrap().active_deadline_seconds = None;
    deleted.deleting = true;
    let s = deleted.status();
    assert_eq!(terminated(app(&s, "app")).map(|t| t.exit_code), Some(1));
}

/// After a failed pull the worker syncs again 10 s later (the pod worker's re-queue): within a
/// longer image back-off the reason turns to `ImagePullBackOff`, and its message keeps the last
/// pull's error (1.32+: `Back-off pulling image "x": ErrImagePull: <error>`).
#[test]
fn the_image_back_off_is_shown_at_the_next_sync_with_the_last_pull_error() {
    let p = pod(&[], &["app"], "Always");
    let key = podwright_planner::decide::pull_key("localhost/app:1");
    let mut w = World::new(p.clone()).with_sandbox().at(30);
    // The second failure: a 20 s window from t=30.
    w.backoff.next(&key, t(10), t(10));
    w.backoff.next(&key, t(30), t(30));
    let error = "rpc error: code = NotFound desc = failed to pull and unpack image";
    w.observed.start_failures.insert(
        "app".into(),
        StartFailure { reason: StartFailureReason::ErrImagePull, message: error.into(), at: t(30) },
    );
    assert_eq!(waiting(app(&w.status(), "app")), (Some("ErrImagePull"), Some(error)));
    // The next sync is 10 s after the failure, before the back-off ends at 50 s.
    assert_eq!(w.plan().wake_at, Some(t(40)));
    let later = World { now: t(40), ..w.clone() };
    let message = format!("Back-off pulling image \"localhost/app:1\": ErrImagePull: {error}");
    assert_eq!(waiting(app(&later.status(), "app")), (Some("ImagePullBackOff"), Some(message.as_str())));
    // Then the pull is tried again when the back-off ends.
    assert_eq!(later.plan().wake_at, Some(t(50)));
}

/// An emptyDir over its `sizeLimit` is evicted without a `DisruptionTarget` condition: the
/// kubelet's `emptyDirLimitEviction` passes no condition to `evictPod` (only node-pressure
/// evictions, preemption and node shutdown add one).
#[test]
fn an_emptydir_eviction_adds_no_disruption_target() {
    let p = pod(&[], &["app"], "Always");
    let mut w = World::new(p.clone()).with_sandbox().with(exited(&p, "app", 0, 137, 1, 5)).at(6);
    w.observed.eviction = Some(Eviction {
        reason: "Evicted".into(),
        message: "Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". ".into(),
    });
    let s = w.status();
    assert_eq!((s.phase.as_deref(), s.reason.as_deref()), (Some("Failed"), Some("Evicted")));
    assert!(s.conditions.iter().flatten().all(|c| c.type_ != "DisruptionTarget"));
}
