//! The planner's rules for a pod whose spec changed under it (the only changes the API server
//! lets through: images and `activeDeadlineSeconds`), and for waits it now decides itself (the
//! sandbox retry, the pull policy of a start).

mod common;
use common::*;
use k8s_openapi::api::core::v1::Pod;
use podwright_planner::pod;
use podwright_planner::{Action, ContainerKind::*, PullPolicy};
use std::time::Duration;

/// An instance as the runtime shows it: labelled with the hash of the definition it came from.
fn hashed(p: &Pod, mut c: podwright_planner::ObservedContainer) -> podwright_planner::ObservedContainer {
    c.hash = pod::all_containers(p).find(|s| s.name() == c.name).unwrap().hash();
    c
}

fn set_image(p: &mut Pod, name: &str, image: &str) {
    let spec = p.spec.as_mut().unwrap();
    for c in spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut()) {
        if c.name == name {
            c.image = Some(image.into());
        }
    }
}

#[test]
fn a_changed_app_image_kills_that_container_and_starts_it_again_whatever_the_policy() {
    for policy in ["Always", "OnFailure", "Never"] {
        let old = pod(&["i1"], &["a", "b"], policy);
        let mut new = old.clone();
        set_image(&mut new, "a", "localhost/a:2");
        let w = World::new(new)
            .with_sandbox()
            .with(hashed(&old, exited(&old, "i1", 0, 0, 1, 2)))
            .with(hashed(&old, running(&old, "a", 0, 3)))
            .with(hashed(&old, running(&old, "b", 0, 3)))
            .at(10);
        let plan = w.plan();
        assert_eq!(
            plan.actions,
            vec![
                Action::KillContainer {
                    id: "a-0".into(),
                    name: "a".into(),
                    message: "Container a definition changed, will be restarted".into(),
                    grace: Duration::from_secs(30),
                },
                Action::StartContainer {
                    kind: App,
                    index: 0,
                    restart_count: 1,
                    pull: PullPolicy::IfNotPresent,
                    created: None
                },
            ],
            "{policy}: only the changed container restarts"
        );
    }
}

#[test]
fn a_crashed_app_container_with_a_new_image_starts_at_once_outside_the_old_back_off() {
    let old = pod(&[], &["a"], "Always");
    let mut new = old.clone();
    set_image(&mut new, "a", "localhost/a:2");
    let mut w = World::new(new).with_sandbox().with(hashed(&old, exited(&old, "a", 3, 1, 1, 2))).at(3);
    let old_key = pod::app_containers(&old).next().unwrap().backoff_key();
    w.backoff.next(&old_key, t(0), t(0));
    w.backoff.next(&old_key, t(2), t(2));
    assert_eq!(starts(&w.plan()), vec![(App, 0, 4)], "the back-off belongs to the old definition");
    let w = World { pod: old, ..w };
    assert!(starts(&w.plan()).is_empty(), "the old definition still backs off");
}

#[test]
fn a_changed_init_image_restarts_the_pod_in_a_new_sandbox() {
    for policy in ["Always", "OnFailure", "Never"] {
        let old = pod(&["i1", "+side", "i2"], &["app"], policy);
        let mut new = old.clone();
        set_image(&mut new, "i2", "localhost/i2:2");
        let w = World::new(new)
            .with_sandbox()
            .with(hashed(&old, exited(&old, "i1", 0, 0, 1, 2)))
            .with(hashed(&old, running(&old, "side", 0, 2)))
            .with(hashed(&old, exited(&old, "i2", 0, 0, 3, 4)))
            .with(hashed(&old, running(&old, "app", 0, 5)))
            .at(10);
        assert_eq!(
            w.plan().actions,
            vec![
                Action::KillPod { grace: Duration::from_secs(30) },
                Action::RemoveContainer { id: "i1-0".into(), name: "i1".into() },
                Action::RemoveContainer { id: "side-0".into(), name: "side".into() },
                Action::RemoveContainer { id: "i2-0".into(), name: "i2".into() },
                Action::CreateSandbox { attempt: 1 },
            ],
            "{policy}"
        );
    }
}

#[test]
fn instances_without_a_hash_are_taken_as_current() {
    let old = pod(&["i1"], &["a"], "Always");
    let mut new = old.clone();
    set_image(&mut new, "i1", "localhost/i1:2");
    set_image(&mut new, "a", "localhost/a:2");
    let w = World::new(new).with_sandbox().with(exited(&old, "i1", 0, 0, 1, 2)).with(running(&old, "a", 0, 3)).at(4);
    assert_eq!(w.plan().actions, vec![]);
}

#[test]
fn a_lowered_active_deadline_applies_at_once() {
    let mut p = pod(&[], &["app"], "Always");
    let w = World::new(p.clone()).with_sandbox().with(hashed(&p, running(&p, "app", 0, 1))).at(100);
    assert_eq!(w.plan().actions, vec![], "no deadline: runs on");
    p.spec.as_mut().unwrap().active_deadline_seconds = Some(50);
    let w = World { pod: p, ..w };
    let plan = w.plan();
    assert_eq!(plan.actions, vec![Action::KillPod { grace: Duration::from_secs(30) }]);
    assert_eq!(plan.events[0].reason, "DeadlineExceeded");
    assert_eq!(w.status().reason.as_deref(), Some("DeadlineExceeded"));
}

#[test]
fn a_failed_sandbox_is_retried_after_ten_seconds() {
    let p = pod(&["i1"], &["app"], "Always");
    let mut w = World::new(p).at(4);
    w.observed.sandbox_failure = Some(t(0));
    let plan = w.plan();
    assert_eq!(plan.actions, vec![]);
    assert_eq!(plan.wake_at, Some(t(10)));
    let w = World { now: t(10), ..w };
    assert_eq!(w.plan().actions, vec![Action::CreateSandbox { attempt: 0 }]);
}

#[test]
fn a_start_carries_the_pull_policy_defaulted_from_the_tag() {
    let mut p = pod(&[], &["a", "b", "c"], "Always");
    set_image(&mut p, "a", "localhost/a");
    set_image(&mut p, "b", "localhost/b:latest");
    p.spec.as_mut().unwrap().containers[2].image_pull_policy = Some("Never".into());
    let w = World::new(p).with_sandbox();
    let pulls: Vec<PullPolicy> = w
        .plan()
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::StartContainer { pull, .. } => Some(*pull),
            _ => None,
        })
        .collect();
    assert_eq!(pulls, vec![PullPolicy::Always, PullPolicy::Always, PullPolicy::Never]);
}
