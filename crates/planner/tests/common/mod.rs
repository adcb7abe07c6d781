//! Builders for planner tests: pods from JSON, observed containers in a few words.
#![allow(dead_code)]

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use podwright_planner::pod;
use podwright_planner::*;

pub fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap() + SignedDuration::from_secs(s)
}

/// A pod with the given init containers (names; a `+` prefix makes a sidecar) and apps.
pub fn pod(inits: &[&str], apps: &[&str], policy: &str) -> Pod {
    let c = |n: &str| {
        let (name, sidecar) = match n.strip_prefix('+') {
            Some(n) => (n, true),
            None => (n, false),
        };
        let mut v = serde_json::json!({"name": name, "image": format!("localhost/{name}:1")});
        if sidecar {
            v["restartPolicy"] = "Always".into();
        }
        v
    };
    let v = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
        "spec": {
            "restartPolicy": policy,
            "terminationGracePeriodSeconds": 30,
            "initContainers": inits.iter().map(|n| c(n)).collect::<Vec<_>>(),
            "containers": apps.iter().map(|n| c(n)).collect::<Vec<_>>(),
        }
    });
    serde_json::from_value(v).unwrap()
}

pub fn sandbox() -> ObservedSandbox {
    ObservedSandbox { id: "sb1".into(), attempt: 0, ready: true, ip: Some("10.0.0.2".into()), created_at: t(0) }
}

fn kind_of(p: &Pod, name: &str) -> ContainerKind {
    pod::all_containers(p).find(|s| s.name() == name).map(|s| s.kind).expect("container in spec")
}

pub fn running(p: &Pod, name: &str, restart_count: i32, started: i64) -> ObservedContainer {
    ObservedContainer {
        id: format!("{name}-{restart_count}"),
        name: name.into(),
        kind: kind_of(p, name),
        restart_count,
        state: RunState::Running,
        exit_code: 0,
        reason: String::new(),
        message: String::new(),
        created_at: t(started),
        started_at: Some(t(started)),
        finished_at: None,
        image: format!("localhost/{name}:1"),
        image_ref: "sha256:abc".into(),
        hash: String::new(),
        sandbox_id: "sb1".into(),
        user: None,
        recursive_read_only: vec![],
    }
}

pub fn exited(p: &Pod, name: &str, restart_count: i32, code: i32, started: i64, finished: i64) -> ObservedContainer {
    ObservedContainer {
        state: RunState::Exited,
        exit_code: code,
        reason: if code == 0 { "Completed" } else { "Error" }.into(),
        finished_at: Some(t(finished)),
        ..running(p, name, restart_count, started)
    }
}

#[derive(Clone)]
pub struct World {
    pub pod: Pod,
    pub observed: Observed,
    pub backoff: Backoff,
    pub now: Timestamp,
    pub deleting: bool,
    pub grace_override: Option<i64>,
}

impl World {
    pub fn new(pod: Pod) -> Self {
        World {
            pod,
            observed: Observed::default(),
            backoff: Backoff::default(),
            now: t(0),
            deleting: false,
            grace_override: None,
        }
    }
    pub fn with_sandbox(mut self) -> Self {
        self.observed.sandbox = Some(sandbox());
        self
    }
    pub fn with(mut self, c: ObservedContainer) -> Self {
        self.observed.containers.push(c);
        self
    }
    pub fn at(mut self, s: i64) -> Self {
        self.now = t(s);
        self
    }
    pub fn ctx(&self) -> PodContext<'_> {
        PodContext {
            pod: &self.pod,
            observed: &self.observed,
            backoff: &self.backoff,
            now: self.now,
            start_time: Some(t(0)),
            deleting: self.deleting,
            grace_override: self.grace_override,
        }
    }
    pub fn plan(&self) -> Plan {
        plan(&self.ctx())
    }
    pub fn status(&self) -> k8s_openapi::api::core::v1::PodStatus {
        pod_status(&self.ctx(), None)
    }
}

/// The planner's starts as (kind, index, restartCount).
pub fn starts(p: &Plan) -> Vec<(ContainerKind, usize, i32)> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::StartContainer { kind, index, restart_count, .. } => Some((*kind, *index, *restart_count)),
            _ => None,
        })
        .collect()
}
