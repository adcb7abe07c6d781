//! A pod with an init container, a sidecar and an app container, and its statuses and events
//! in a few words each.
#![allow(dead_code)]

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, Pod, PodStatus};
use serde_json::{Value, json};

/// `ms` milliseconds after the pod's creation.
pub fn t(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(1_700_000_000_000 + ms).unwrap()
}

fn time(ms: i64) -> String {
    t(ms).to_string()
}

/// Pod `shop/web` (uid `u1`, created at `t(0)`): init container `init-setup`, sidecar
/// `log-shipper` with a `preStop` hook, app container `app` with a `postStart` hook.
pub fn pod() -> Pod {
    let exec = json!({"exec": {"command": ["true"]}});
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "creationTimestamp": time(0)},
        "spec": {
            "initContainers": [
                {"name": "init-setup", "image": "busybox"},
                {"name": "log-shipper", "image": "busybox", "restartPolicy": "Always", "lifecycle": {"preStop": exec}},
            ],
            "containers": [{"name": "app", "image": "busybox", "lifecycle": {"postStart": exec}}],
        }
    }))
    .unwrap()
}

pub fn waiting(name: &str, reason: &str, restarts: i32) -> Value {
    json!({"name": name, "image": "busybox", "imageID": "", "ready": false, "restartCount": restarts,
           "state": {"waiting": {"reason": reason, "message": format!("{reason} message")}}})
}

pub fn running(name: &str, started_ms: i64, ready: bool, restarts: i32) -> Value {
    json!({"name": name, "image": "busybox", "imageID": "", "ready": ready, "started": true,
           "restartCount": restarts, "state": {"running": {"startedAt": time(started_ms)}}})
}

pub fn terminated(name: &str, exit_code: i32, finished_ms: i64, restarts: i32) -> Value {
    let reason = if exit_code == 0 { "Completed" } else { "Error" };
    json!({"name": name, "image": "busybox", "imageID": "", "ready": false, "started": false,
           "restartCount": restarts,
           "state": {"terminated": {"exitCode": exit_code, "reason": reason, "finishedAt": time(finished_ms)}}})
}

/// `container` with `lastState` set to a run that ended with `exit_code` at `finished_ms`.
pub fn with_last(mut container: Value, exit_code: i32, finished_ms: i64) -> Value {
    container["lastState"] =
        json!({"terminated": {"exitCode": exit_code, "reason": "Error", "finishedAt": time(finished_ms)}});
    container
}

/// A status: phase, conditions as (type, status, reason, lastTransitionTime), init container
/// statuses and app container statuses.
pub fn status(
    phase: &str,
    conditions: &[(&str, &str, Option<&str>, i64)],
    init: &[Value],
    apps: &[Value],
) -> PodStatus {
    let conditions: Vec<Value> = conditions
        .iter()
        .map(|(type_, status, reason, at)| json!({"type": type_, "status": status, "reason": reason, "lastTransitionTime": time(*at)}))
        .collect();
    serde_json::from_value(json!({
        "phase": phase, "conditions": conditions, "initContainerStatuses": init, "containerStatuses": apps,
    }))
    .unwrap()
}

/// One occurrence of an event about pod `u1` (or no container when `field_path` is `None`).
pub fn event(field_path: Option<&str>, type_: &str, reason: &str, message: &str, ms: i64) -> Event {
    serde_json::from_value(json!({
        "metadata": {"name": "web.1", "namespace": "shop"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "shop", "uid": "u1", "fieldPath": field_path},
        "type": type_, "reason": reason, "message": message, "count": 1,
        "firstTimestamp": time(ms), "lastTimestamp": time(ms),
    }))
    .unwrap()
}
