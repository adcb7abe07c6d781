//! The node's metrics as a pod worker records them, against the fake runtime in virtual time.

mod common;
use common::*;
use podwright_node::PodWorkers;
use podwright_runtime::fake::Behaviour;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The value of the series `series` (name and labels, exactly as rendered).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A step that keeps what `/metrics` would show at its moment.
fn snapshot(into: &Arc<Mutex<String>>) -> Step {
    let into = into.clone();
    Box::new(move |w: &PodWorkers| *into.lock().unwrap() = w.metrics().render())
}

#[tokio::test(start_paused = true)]
async fn a_pod_with_two_init_containers_counts_its_starts_and_transitions() {
    let sim = Sim::new();
    sim.fake.set_latency(Duration::from_millis(10));
    sim.fake.script("i1", vec![Behaviour::Exit { code: 0, after: Duration::from_secs(1) }]);
    sim.fake.script("i2", vec![Behaviour::Exit { code: 0, after: Duration::from_secs(1) }]);
    sim.fake.script("app", vec![Behaviour::RunForever]);
    let running = Arc::new(Mutex::new(String::new()));
    let history = sim
        .run_steps(pod(&["i1", "i2"], &["app"], "Always"), Duration::from_secs(20), vec![(10.0, snapshot(&running))])
        .await;
    assert!(history.iter().any(|(_, p)| phase(p) == "Running"));

    let text = running.lock().unwrap().clone();
    let at = |series: &str| value(&text, series).unwrap_or_else(|| panic!("no {series} in\n{text}"));
    assert_eq!(at("kubelet_started_containers_total{container_type=\"init_container\"}"), 2.0);
    assert_eq!(at("kubelet_started_containers_total{container_type=\"container\"}"), 1.0);
    assert!(!text.contains("kubelet_started_containers_errors_total"), "{text}");
    // i1 completed -> i2 started, i2 completed -> app started: each about the create and start
    // calls (10 ms each) after the exit was seen.
    assert_eq!(at("podwright_container_transition_seconds_count"), 2.0);
    let sum = at("podwright_container_transition_seconds_sum");
    assert!(sum > 0.0 && sum < 0.2, "{sum}");
    assert_eq!(at("podwright_container_transition_seconds_bucket{le=\"0.005\"}"), 0.0);
    // Running about 2 s after the worker first saw the pod (two 1 s init containers).
    assert_eq!(at("kubelet_pod_start_duration_seconds_count"), 1.0);
    assert_eq!(at("kubelet_pod_start_duration_seconds_bucket{le=\"2\"}"), 0.0);
    assert_eq!(at("kubelet_pod_start_duration_seconds_bucket{le=\"3\"}"), 1.0);
    assert_eq!(at("kubelet_running_pods"), 1.0);
    assert_eq!(at("kubelet_running_containers{container_state=\"running\"}"), 1.0);
    assert_eq!(at("kubelet_running_containers{container_state=\"exited\"}"), 2.0);
    assert_eq!(at("kubelet_pod_worker_duration_seconds_count{operation_type=\"create\"}"), 1.0);
    assert!(at("kubelet_pod_worker_duration_seconds_count{operation_type=\"sync\"}") >= 3.0);
    assert_eq!(at("kubelet_runtime_operations_total{operation_type=\"run_podsandbox\"}"), 1.0);
    assert_eq!(at("kubelet_runtime_operations_total{operation_type=\"start_container\"}"), 3.0);
    assert!(!text.contains("operation_type=\"kill\""), "{text}");

    // Deleted at 20 s: the kill passes are counted, and the finished pod has left the gauges.
    let text = sim.workers.metrics().render();
    assert!(value(&text, "kubelet_pod_worker_duration_seconds_count{operation_type=\"kill\"}").unwrap() >= 1.0);
    assert_eq!(value(&text, "kubelet_running_pods"), Some(0.0));
    assert_eq!(value(&text, "kubelet_running_containers{container_state=\"exited\"}"), Some(0.0));
    assert_eq!(value(&text, "kubelet_runtime_operations_total{operation_type=\"stop_container\"}"), Some(1.0));
}

#[tokio::test(start_paused = true)]
async fn a_failed_start_is_counted_with_its_code() {
    let sim = Sim::new();
    sim.fake.script("app", vec![Behaviour::FailStart("exec: \"nope\": not found".into()), Behaviour::RunForever]);
    sim.run(pod(&[], &["app"], "Always"), Duration::from_secs(30)).await;
    let text = sim.workers.metrics().render();
    assert_eq!(
        value(
            &text,
            "kubelet_started_containers_errors_total{code=\"RunContainerError\",container_type=\"container\"}"
        ),
        Some(1.0),
        "{text}"
    );
    // The failed attempt and the one after its back-off.
    assert_eq!(value(&text, "kubelet_started_containers_total{container_type=\"container\"}"), Some(2.0));
    assert_eq!(value(&text, "kubelet_runtime_operations_errors_total{operation_type=\"start_container\"}"), Some(1.0));
    // No init container, so no transition.
    assert_eq!(value(&text, "podwright_container_transition_seconds_count"), Some(0.0));
}
