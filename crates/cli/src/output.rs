//! What `podwright` prints: progress lines, the final `List`, and `check`'s summary.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, Pod};
use podwright_api::pod_resources;
use podwright_node::{PodUpdate, StatusSink};
use podwright_planner::resources::ResourceList;
use podwright_planner::{RestartPolicy, pod, qos, resources};
use podwright_runtime::Clock;
use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;

/// `run`'s status sink: a progress line on stderr whenever a pod's kubectl columns change.
pub struct Progress {
    clock: Clock,
    started: Timestamp,
    /// The last line of each pod, by UID.
    last: Mutex<HashMap<String, String>>,
}

impl Progress {
    pub fn new(clock: Clock, started: Timestamp) -> Self {
        Progress { clock, started, last: Mutex::default() }
    }
}

impl StatusSink for Progress {
    fn publish(&self, update: &PodUpdate) {
        let now = self.clock.now();
        let Some(columns) = progress_columns(&update.pod(), now) else { return };
        let uid = update.spec.metadata.uid.clone().unwrap_or_default();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.get(&uid) != Some(&columns) {
            let elapsed = now.duration_since(self.started).as_secs_f64();
            let _ = writeln!(std::io::stderr(), "{elapsed:>7.2}s  {columns}");
            last.insert(uid, columns);
        }
    }
}

/// The columns a progress line shows for a pod (kubectl's STATUS, READY, RESTARTS), once it
/// has a status.
pub fn progress_columns(p: &Pod, now: Timestamp) -> Option<String> {
    p.status.as_ref()?;
    let s = podwright_api::kubectl_status::summarize(p, now);
    Some(format!(
        "{:<24} {:<24} {:<6} {}",
        p.metadata.name.as_deref().unwrap_or(""),
        s.status,
        s.ready,
        s.restart_count
    ))
}

/// A v1 `List` of the final pods followed by the recorded events.
pub fn final_list(pods: &[Pod], events: &[Event]) -> serde_json::Value {
    let mut items: Vec<serde_json::Value> = vec![];
    for p in pods {
        let mut v = serde_json::to_value(p).unwrap_or_default();
        v["apiVersion"] = "v1".into();
        v["kind"] = "Pod".into();
        items.push(v);
    }
    for e in events {
        let mut v = serde_json::to_value(e).unwrap_or_default();
        v["apiVersion"] = "v1".into();
        v["kind"] = "Event".into();
        items.push(v);
    }
    serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items})
}

/// `check`'s account of what `run` would do with a pod.
pub fn describe_plan(p: &Pod) -> String {
    let mut out = format!(
        "pod/{} (namespace {}, restartPolicy {}, terminationGracePeriodSeconds {}): valid",
        p.metadata.name.as_deref().unwrap_or(""),
        p.metadata.namespace.as_deref().unwrap_or("default"),
        RestartPolicy::of(p).as_str(),
        pod::grace_period_secs(p),
    );
    for sc in pod::all_containers(p) {
        let role = match sc.kind {
            podwright_planner::ContainerKind::Init => format!("init container {}", sc.index + 1),
            podwright_planner::ContainerKind::Sidecar => format!("sidecar (init container {})", sc.index + 1),
            podwright_planner::ContainerKind::App => "app container".to_string(),
        };
        out.push_str(&format!(
            "\n  {:<28} {:<30} image {} (pull {})",
            role,
            sc.name(),
            sc.image(),
            sc.container.image_pull_policy.as_deref().unwrap_or("IfNotPresent")
        ));
        // Under pod-level resources a container without limits of its own runs with the pod's.
        if pod_resources::is_pod_level_resources_set(p.spec.as_ref()) {
            let limits: ResourceList = ["cpu", "memory"]
                .into_iter()
                .filter_map(|name| {
                    Some((name.to_string(), pod_resources::container_limit(p.spec.as_ref(), sc.container, name)?))
                })
                .collect();
            out.push_str(&format!("\n  {:<28} limits given to the runtime: {}", "", resources::describe(&limits)));
        }
    }
    out.push_str(&format!(
        "\n  effective requests: {}\n  effective limits: {}\n  QoS class: {}",
        resources::describe(&resources::pod_requests(p)),
        resources::describe(&resources::pod_limits(p)),
        qos::qos_class(p)
    ));
    out
}
