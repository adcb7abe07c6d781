//! Effective pod requests and limits (`PodRequests` / `PodLimits`): the init-containers
//! proposal's worked examples, sidecars (restartable init containers) as the kubelet adds them,
//! every resource name, quantities by value.

use k8s_openapi::api::core::v1::Pod;
use podwright_planner::resources::{describe, pod_limits, pod_requests};
use serde_json::{Value, json};

/// A pod of init containers and app containers with these `resources`; a sidecar is an init
/// container given as `("sidecar", resources)`.
fn pod(init: &[(&str, Value)], app: &[Value]) -> Pod {
    let container =
        |i: usize, prefix: &str, r: &Value| json!({"name": format!("{prefix}{i}"), "image": "busybox", "resources": r});
    let init: Vec<Value> = init
        .iter()
        .enumerate()
        .map(|(i, (kind, r))| {
            let mut c = container(i, "init", r);
            if *kind == "sidecar" {
                c["restartPolicy"] = json!("Always");
            }
            c
        })
        .collect();
    let app: Vec<Value> = app.iter().enumerate().map(|(i, r)| container(i, "app", r)).collect();
    serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"initContainers": init, "containers": app}}))
        .unwrap()
}

fn limits(cpu: &str, memory: &str) -> Value {
    json!({"limits": {"cpu": cpu, "memory": memory}})
}

fn requests(cpu: &str, memory: &str) -> Value {
    json!({"requests": {"cpu": cpu, "memory": memory}})
}

fn cpu(c: &str) -> Value {
    json!({"requests": {"cpu": c}, "limits": {"cpu": c}})
}

#[test]
fn the_proposals_worked_examples() {
    // Highest init cpu beats the app sum; the app memory sum beats the highest init memory.
    let p = pod(
        &[("init", limits("100m", "1Gi")), ("init", limits("50m", "2Gi"))],
        &[limits("10m", "1100Mi"), limits("10m", "1100Mi")],
    );
    assert_eq!(describe(&pod_limits(&p)), "cpu: 100m, memory: 2200Mi");
    assert_eq!(describe(&pod_requests(&p)), "none", "no requests given and none defaulted here");

    // An unset request or limit of a container leaves the other side's to decide.
    let p = pod(&[("init", limits("100m", "1Gi"))], &[requests("10m", "1100Mi")]);
    assert_eq!(describe(&pod_requests(&p)), "cpu: 10m, memory: 1100Mi");
    assert_eq!(describe(&pod_limits(&p)), "cpu: 100m, memory: 1Gi");
}

/// (case, init containers, app containers, effective cpu request = limit)
type Case = (&'static str, Vec<(&'static str, Value)>, Vec<Value>, &'static str);

#[test]
fn sidecars_add_to_the_app_containers_and_to_every_later_init_container() {
    let table: [Case; 7] = [
        ("no init containers: the sum", vec![], vec![cpu("1"), cpu("2")], "3"),
        ("an init container larger than the sum", vec![("init", cpu("5"))], vec![cpu("1"), cpu("2")], "5"),
        ("a sidecar adds to the app containers", vec![("sidecar", cpu("1"))], vec![cpu("1")], "2"),
        (
            "several sidecars",
            vec![("sidecar", cpu("1")), ("sidecar", cpu("2")), ("sidecar", cpu("3"))],
            vec![cpu("1")],
            "7",
        ),
        (
            "an init container runs beside the sidecars before it",
            vec![("sidecar", cpu("1")), ("sidecar", cpu("2")), ("init", cpu("5")), ("sidecar", cpu("3"))],
            vec![cpu("1")],
            "8",
        ),
        (
            "but not beside the sidecars after it",
            vec![("init", cpu("5")), ("sidecar", cpu("1")), ("sidecar", cpu("2"))],
            vec![cpu("1")],
            "5",
        ),
        (
            "an init container smaller than the sidecars and apps",
            vec![("sidecar", cpu("1")), ("init", cpu("1500m"))],
            vec![cpu("2")],
            "3",
        ),
    ];
    for (case, init, app, want) in table {
        let p = pod(&init, &app);
        assert_eq!(describe(&pod_requests(&p)), format!("cpu: {want}"), "{case}");
        assert_eq!(describe(&pod_limits(&p)), format!("cpu: {want}"), "{case}");
    }
}

#[test]
fn every_resource_name_counts_and_quantities_compare_by_value() {
    let p = pod(
        &[("init", json!({"requests": {"cpu": "0.25", "example.com/gpu": "2", "ephemeral-storage": "1G"}}))],
        &[
            json!({"requests": {"cpu": "100m", "example.com/gpu": "1", "ephemeral-storage": "500M"}}),
            json!({"requests": {"cpu": "0.1", "example.com/gpu": "1", "ephemeral-storage": "600M"}}),
        ],
    );
    // cpu: 250m beats 200m; gpu: 2 ties 1+1; storage: 1.1G beats 1G.
    assert_eq!(describe(&pod_requests(&p)), "cpu: 250m, ephemeral-storage: 1100M, example.com/gpu: 2");
    assert_eq!(pod_requests(&p)["cpu"], podwright_planner::resources::Amount::parse("250m").unwrap());
    assert_eq!(pod_requests(&p)["cpu"], podwright_planner::resources::Amount::parse("0.25").unwrap());
}

#[test]
fn overhead_adds_to_requests_and_to_limits_that_are_set() {
    let mut p = pod(&[], &[json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}})]);
    p.spec.as_mut().unwrap().overhead = Some(serde_json::from_value(json!({"cpu": "250m", "memory": "64Mi"})).unwrap());
    assert_eq!(describe(&pod_requests(&p)), "cpu: 350m, memory: 128Mi");
    assert_eq!(describe(&pod_limits(&p)), "memory: 192Mi", "cpu stays unlimited");
}

/// A pod with pod-level resources (`spec.resources`).
fn with_pod_level(mut p: Pod, resources: Value) -> Pod {
    p.spec.as_mut().unwrap().resources = Some(serde_json::from_value(resources).unwrap());
    p
}

#[test]
fn pod_level_resources_replace_the_aggregate_of_what_they_name() {
    let p = pod(&[("init", limits("2", "1Gi"))], &[requests("100m", "64Mi"), requests("200m", "64Mi")]);
    // (case, spec.resources, effective requests, effective limits)
    let table = [
        ("none: the aggregate", json!(null), "cpu: 300m, memory: 128Mi", "cpu: 2, memory: 1Gi"),
        (
            "cpu only: memory stays the aggregate",
            json!({"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}),
            "cpu: 500m, memory: 128Mi",
            "cpu: 1, memory: 1Gi",
        ),
        (
            "both",
            json!({"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "512Mi"}}),
            "cpu: 1, memory: 256Mi",
            "cpu: 2, memory: 512Mi",
        ),
        (
            "limits alone leave the requests to the containers",
            json!({"limits": {"memory": "512Mi"}}),
            "cpu: 300m, memory: 128Mi",
            "cpu: 2, memory: 512Mi",
        ),
    ];
    for (case, resources, want_requests, want_limits) in table {
        let p = if resources.is_null() { p.clone() } else { with_pod_level(p.clone(), resources) };
        assert_eq!(describe(&pod_requests(&p)), want_requests, "{case}");
        assert_eq!(describe(&pod_limits(&p)), want_limits, "{case}");
    }
}

#[test]
fn overhead_adds_to_the_pod_level_values() {
    let mut p =
        with_pod_level(pod(&[], &[json!({})]), json!({"requests": {"cpu": "500m"}, "limits": {"memory": "128Mi"}}));
    p.spec.as_mut().unwrap().overhead = Some(serde_json::from_value(json!({"cpu": "250m", "memory": "64Mi"})).unwrap());
    assert_eq!(describe(&pod_requests(&p)), "cpu: 750m, memory: 64Mi");
    assert_eq!(describe(&pod_limits(&p)), "memory: 192Mi");
}
