//! The QoS class in the status (`ComputePodQOS`), quantities compared by value.

mod common;
use common::*;

/// The pod with these `resources` on container `name`.
fn with_resources(
    p: &k8s_openapi::api::core::v1::Pod,
    name: &str,
    resources: serde_json::Value,
) -> k8s_openapi::api::core::v1::Pod {
    let mut p = p.clone();
    let spec = p.spec.as_mut().unwrap();
    for c in spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut()) {
        if c.name == name {
            c.resources = Some(serde_json::from_value(resources.clone()).unwrap());
        }
    }
    p
}

#[test]
fn rule_15_quantities_are_compared_by_value() {
    use serde_json::json;
    let both = |req_cpu: &str, lim_cpu: &str, req_mem: &str, lim_mem: &str| json!({"requests": {"cpu": req_cpu, "memory": req_mem}, "limits": {"cpu": lim_cpu, "memory": lim_mem}});
    // (case, resources of `app`, resources of `init` (null: no init container), QoS class)
    let table = [
        ("0.1 and 100m are the same CPU", both("0.1", "100m", "64Mi", "64Mi"), json!(null), "Guaranteed"),
        ("1Gi in bytes is 1Gi", both("1", "1000m", "1073741824", "1Gi"), json!(null), "Guaranteed"),
        ("exponent form", both("1e-1", "100m", "1e3", "1k"), json!(null), "Guaranteed"),
        ("a request below its limit", both("99m", "0.1", "64Mi", "64Mi"), json!(null), "Burstable"),
        (
            "limits only: requests default to them",
            json!({"limits": {"cpu": "0.5", "memory": "1Mi"}}),
            json!(null),
            "Guaranteed",
        ),
        ("a zero request counts as none", json!({"requests": {"cpu": "0.0"}}), json!(null), "BestEffort"),
        ("a positive request only", json!({"requests": {"cpu": "0.001"}}), json!(null), "Burstable"),
        (
            "init containers count, with values equal in other notations",
            both("250m", "0.25", "1Mi", "1024Ki"),
            both("0.5", "500m", "2Mi", "2048Ki"),
            "Guaranteed",
        ),
        (
            "an init container without limits",
            both("1", "1", "1Mi", "1Mi"),
            json!({"requests": {"cpu": "1"}}),
            "Burstable",
        ),
        ("an init container without resources", both("1", "1", "1Mi", "1Mi"), json!({}), "Burstable"),
    ];
    for (case, app, init, class) in table {
        let inits: &[&str] = if init.is_null() { &[] } else { &["init"] };
        let p = with_resources(&pod(inits, &["app"], "Always"), "app", app);
        let p = with_resources(&p, "init", init);
        let s = World::new(p).status();
        assert_eq!(s.qos_class.as_deref(), Some(class), "{case}");
    }
}

/// With `spec.resources` the pod's class is theirs alone (`resourceQOS`), whatever its
/// containers ask.
#[test]
fn pod_level_resources_decide_the_class() {
    use serde_json::json;
    let guaranteed_app = json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}});
    // (case, spec.resources, resources of `app`, QoS class)
    let table = [
        (
            "cpu and memory equal",
            json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}),
            json!({}),
            "Guaranteed",
        ),
        (
            "by value",
            json!({"requests": {"cpu": "0.5", "memory": "1Gi"}, "limits": {"cpu": "500m", "memory": "1073741824"}}),
            json!({}),
            "Guaranteed",
        ),
        (
            "memory unlimited",
            json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1"}}),
            guaranteed_app.clone(),
            "Burstable",
        ),
        ("cpu only, equal", json!({"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}), json!({}), "Burstable"),
        (
            "a request below its limit",
            json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}),
            json!({}),
            "Burstable",
        ),
        ("set but empty: BestEffort over Guaranteed containers", json!({}), guaranteed_app, "BestEffort"),
    ];
    for (case, pod_level, app, class) in table {
        let mut p = with_resources(&pod(&[], &["app"], "Always"), "app", app);
        p.spec.as_mut().unwrap().resources = Some(serde_json::from_value(pod_level).unwrap());
        assert_eq!(podwright_planner::qos::qos_class(&p), class, "{case}");
    }
}
