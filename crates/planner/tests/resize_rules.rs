//! In-place resize (KEP-1287): the allocation manager's decision on the spec's resources
//! (allocate, `Infeasible`, `Deferred`), what a running container needs (an update, or a
//! restart by its `resizePolicy`), the conditions, and the containers' resources in the status.

mod common;
use common::*;
use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use podwright_planner::resize::{self, Allocate, NodeRoom, ResizeError};
use podwright_planner::{Action, ContainerKind, ResizeTarget};
use serde_json::{Value, json};

fn with(p: &Pod, name: &str, resources: Value, policy: Value) -> Pod {
    let mut p = p.clone();
    for c in &mut p.spec.as_mut().unwrap().containers {
        if c.name == name {
            c.resources = Some(serde_json::from_value(resources.clone()).unwrap());
            c.resize_policy = serde_json::from_value(policy.clone()).unwrap();
        }
    }
    p
}

fn limits(cpu: &str, memory: &str) -> Value {
    json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": cpu, "memory": memory}})
}

fn requirements(v: Value) -> ResourceRequirements {
    serde_json::from_value(v).unwrap()
}

const ROOM: NodeRoom =
    NodeRoom { cpu_millis: 2000, memory_bytes: 4 << 30, others_cpu_millis: 0, others_memory_bytes: 0 };

#[test]
fn a_new_size_is_allocated_when_the_node_has_room() {
    let before = with(&pod(&[], &["app"], "Always"), "app", limits("200m", "128Mi"), json!(null));
    let after = with(&before, "app", limits("400m", "128Mi"), json!(null));
    let allocated = resize::allocation_of(&before);
    assert_eq!(resize::allocate(&before, &allocated, &ROOM), Allocate::Unchanged);
    let Allocate::Resize(next) = resize::allocate(&after, &allocated, &ROOM) else { panic!("not allocated") };
    assert_eq!(next["app"], requirements(limits("400m", "128Mi")));
    // Quantities by value: 0.4 CPU is 400m.
    let same = with(&after, "app", limits("0.4", "128Mi"), json!(null));
    assert_eq!(resize::allocate(&same, &next, &ROOM), Allocate::Unchanged);
}

#[test]
fn more_than_the_node_has_is_infeasible_and_more_than_is_left_is_deferred() {
    let before = with(&pod(&[], &["app"], "Always"), "app", limits("200m", "128Mi"), json!(null));
    let allocated = resize::allocation_of(&before);
    let big = with(
        &before,
        "app",
        json!({"requests": {"cpu": "3", "memory": "64Mi"}, "limits": {"cpu": "3", "memory": "128Mi"}}),
        json!(null),
    );
    let Allocate::Pending(p) = resize::allocate(&big, &allocated, &ROOM) else { panic!("allocated") };
    assert_eq!(
        (p.reason.as_str(), p.message.as_str()),
        ("Infeasible", "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000")
    );
    // Memory is named first when both are too much.
    let huge = with(
        &big,
        "app",
        json!({"requests": {"cpu": "3", "memory": "8Gi"}, "limits": {"cpu": "3", "memory": "8Gi"}}),
        json!(null),
    );
    let Allocate::Pending(p) = resize::allocate(&huge, &allocated, &ROOM) else { panic!("allocated") };
    assert_eq!(
        p.message,
        format!("Node didn't have enough capacity: memory, requested: {}, capacity: {}", 8u64 << 30, 4u64 << 30)
    );
    // Fits the node, not beside the other pods.
    let more = with(
        &before,
        "app",
        json!({"requests": {"cpu": "1500m", "memory": "64Mi"}, "limits": {"cpu": "2", "memory": "128Mi"}}),
        json!(null),
    );
    let crowded = NodeRoom { others_cpu_millis: 1450, ..ROOM };
    let Allocate::Pending(p) = resize::allocate(&more, &allocated, &crowded) else { panic!("allocated") };
    assert_eq!(
        (p.reason.as_str(), p.message.as_str()),
        ("Deferred", "Node didn't have enough resource: cpu, requested: 1500, used: 1450, capacity: 2000")
    );
}

/// A world whose `app` runs with `actuated` and is allocated what `pod` says.
fn running_world(pod: Pod, actuated: Value) -> World {
    let c = running(&pod, "app", 0, 1);
    let mut w = World::new(pod).with_sandbox().with(c).at(10);
    w.observed.resize.actuated.insert("app".into(), requirements(actuated));
    w
}

#[test]
fn a_not_required_change_is_an_update_of_the_running_container() {
    let pod = with(&pod(&[], &["app"], "Always"), "app", limits("400m", "128Mi"), json!(null));
    let w = running_world(pod, limits("200m", "128Mi"));
    let p = w.plan();
    let id = w.observed.containers[0].id.clone();
    assert_eq!(
        p.actions,
        [Action::ResizeContainers { containers: vec![ResizeTarget { kind: ContainerKind::App, index: 0, id }] }]
    );
    let conditions = w.status().conditions.unwrap();
    let progress = conditions.iter().find(|c| c.type_ == "PodResizeInProgress").expect("in progress");
    assert_eq!((progress.status.as_str(), progress.reason.as_deref()), ("True", None));
    // What the running container has, and what is allocated.
    let st = &w.status().container_statuses.unwrap()[0];
    assert_eq!(st.resources.as_ref().unwrap().limits.as_ref().unwrap()["cpu"].0, "200m");
    assert_eq!(st.allocated_resources.as_ref().unwrap()["cpu"].0, "100m");
}

#[test]
fn a_restart_container_policy_restarts_it_with_one_restart_more() {
    let policy = json!([{"resourceName": "cpu", "restartPolicy": "NotRequired"}, {"resourceName": "memory", "restartPolicy": "RestartContainer"}]);
    let pod = with(&pod(&[], &["app"], "Always"), "app", limits("200m", "96Mi"), policy.clone());
    let w = running_world(pod.clone(), limits("200m", "128Mi"));
    let p = w.plan();
    assert!(
        matches!(&p.actions[0], Action::KillContainer { message, .. } if message == "Container app resize requires restart"),
        "{:?}",
        p.actions
    );
    assert_eq!(starts(&p), [(ContainerKind::App, 0, 1)]);
    // Only CPU changed: its policy is NotRequired.
    let cpu_only = with(&pod, "app", limits("300m", "128Mi"), policy);
    let w = running_world(cpu_only, limits("200m", "128Mi"));
    assert!(matches!(w.plan().actions.as_slice(), [Action::ResizeContainers { .. }]));
}

#[test]
fn nothing_to_do_once_actuated_and_a_failed_attempt_waits_for_the_retry() {
    let pod = with(&pod(&[], &["app"], "Always"), "app", limits("400m", "128Mi"), json!(null));
    // Limits below the least the kernel takes are the same to it.
    let tiny = with(&pod, "app", json!({"limits": {"cpu": "5m"}}), json!(null));
    assert!(running_world(tiny, json!({"limits": {"cpu": "1m"}})).plan().actions.is_empty());
    let done = running_world(pod.clone(), limits("0.4", "128Mi"));
    assert!(done.plan().actions.is_empty());
    assert!(!done.status().conditions.unwrap().iter().any(|c| c.type_.starts_with("PodResize")));

    let mut failed = running_world(pod, limits("200m", "128Mi"));
    failed.observed.resize.error = Some(ResizeError { message: "aborting".into(), at: t(5) });
    let p = failed.plan();
    assert!(p.actions.is_empty());
    assert_eq!(p.wake_at, Some(t(15)));
    let conditions = failed.status().conditions.unwrap();
    let progress = conditions.iter().find(|c| c.type_ == "PodResizeInProgress").unwrap();
    assert_eq!((progress.reason.as_deref(), progress.message.as_deref()), (Some("Error"), Some("aborting")));
    assert!(matches!(failed.at(15).plan().actions.as_slice(), [Action::ResizeContainers { .. }]));
}

#[test]
fn a_pending_resize_shows_as_a_condition_and_changes_nothing() {
    let pod = with(&pod(&[], &["app"], "Always"), "app", limits("200m", "128Mi"), json!(null));
    let mut w = running_world(pod, limits("200m", "128Mi"));
    w.observed.resize.pending =
        Some(resize::Pending { reason: "Infeasible".into(), message: "Node didn't have enough capacity".into() });
    assert!(w.plan().actions.is_empty());
    let conditions = w.status().conditions.unwrap();
    let pending: Vec<_> = conditions.iter().filter(|c| c.type_.starts_with("PodResize")).collect();
    assert_eq!(pending.len(), 1);
    assert_eq!((pending[0].type_.as_str(), pending[0].reason.as_deref()), ("PodResizePending", Some("Infeasible")));
}

#[test]
fn the_pod_runs_with_its_allocation_in_place_of_the_spec() {
    let before = with(&pod(&[], &["app"], "Always"), "app", limits("200m", "128Mi"), json!(null));
    let after = with(&before, "app", limits("3", "128Mi"), json!(null));
    let running = resize::allocated_pod(&after, &resize::allocation_of(&before));
    assert_eq!(running.spec.unwrap().containers[0].resources, before.spec.unwrap().containers[0].resources);
}

/// `p` with pod-level resources `r` (`spec.resources`).
fn pod_level(p: &Pod, r: Value) -> Pod {
    let mut p = p.clone();
    p.spec.as_mut().unwrap().resources = Some(serde_json::from_value(r).unwrap());
    p
}

fn guaranteed(cpu: &str, memory: &str) -> Value {
    json!({"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}})
}

#[test]
fn pod_level_resources_are_allocated_and_run_with_like_a_containers() {
    let before = pod_level(&pod(&[], &["app"], "Always"), guaranteed("500m", "128Mi"));
    let after = pod_level(&before, guaranteed("800m", "128Mi"));
    let allocated = resize::allocation_of(&before);
    assert_eq!(resize::allocate(&before, &allocated, &ROOM), Allocate::Unchanged);
    let Allocate::Resize(next) = resize::allocate(&after, &allocated, &ROOM) else { panic!("not allocated") };
    assert_eq!(next[resize::POD_LEVEL], requirements(guaranteed("800m", "128Mi")));
    // Too much for the node: the pod keeps its allocation.
    let huge = pod_level(&before, guaranteed("3", "128Mi"));
    let Allocate::Pending(p) = resize::allocate(&huge, &allocated, &ROOM) else { panic!("allocated") };
    assert_eq!(p.reason, "Infeasible");
    let running = resize::allocated_pod(&huge, &allocated);
    assert_eq!(running.spec.unwrap().resources, before.spec.unwrap().resources);
}

/// A world whose `app` (without limits of its own) and pod cgroup run with the pod-level
/// resources `actuated`, and are allocated what `pod` says.
fn pod_level_world(pod: Pod, actuated: Value) -> World {
    let mut w = running_world(pod, json!({}));
    w.observed.resize.actuated.insert(resize::POD_LEVEL.into(), requirements(actuated));
    w
}

#[test]
fn a_pod_level_change_updates_the_containers_that_follow_it_and_the_pod_cgroup() {
    let pod = pod_level(&pod(&[], &["app"], "Always"), guaranteed("800m", "128Mi"));
    let w = pod_level_world(pod.clone(), guaranteed("500m", "128Mi"));
    let id = w.observed.containers[0].id.clone();
    assert_eq!(
        w.plan().actions,
        [Action::ResizeContainers { containers: vec![ResizeTarget { kind: ContainerKind::App, index: 0, id }] }]
    );
    // A container with limits of its own keeps them: the pod cgroup alone is resized.
    let own = with(&pod, "app", limits("200m", "64Mi"), json!(null));
    let mut w = pod_level_world(own, guaranteed("500m", "128Mi"));
    w.observed.resize.actuated.insert("app".into(), requirements(limits("200m", "64Mi")));
    assert_eq!(w.plan().actions, [Action::ResizeContainers { containers: vec![] }]);
    let conditions = w.status().conditions.unwrap();
    assert!(conditions.iter().any(|c| c.type_ == "PodResizeInProgress"), "{conditions:?}");
    // Once the pod cgroup has it, nothing is left to do.
    let done = pod_level_world(pod, guaranteed("0.8", "128Mi"));
    assert!(done.plan().actions.is_empty());
    assert!(!done.status().conditions.unwrap().iter().any(|c| c.type_.starts_with("PodResize")));
}

#[test]
fn a_pod_level_memory_change_restarts_a_follower_whose_memory_policy_says_so() {
    let policy = json!([{"resourceName": "memory", "restartPolicy": "RestartContainer"}]);
    let pod = with(&pod(&[], &["app"], "Always"), "app", json!({}), policy);
    let pod = pod_level(&pod, guaranteed("500m", "96Mi"));
    let p = pod_level_world(pod, guaranteed("500m", "128Mi")).plan();
    assert!(
        matches!(&p.actions[0], Action::KillContainer { message, .. } if message == "Container app resize requires restart"),
        "{:?}",
        p.actions
    );
}
