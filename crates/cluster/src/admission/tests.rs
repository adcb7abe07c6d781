use super::*;
use serde_json::json;

fn node() -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": "n1", "labels": {"disk": "ssd", "zone": "a", "cores": "8"}},
        "status": {"allocatable": {"cpu": "2", "memory": "1Gi", "pods": "3"}},
    }))
    .unwrap()
}

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p", "uid": "u"}, "spec": spec})).unwrap()
}

fn asking(cpu: &str, memory: &str) -> Pod {
    pod(json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}))
}

#[test]
fn a_pod_that_fits_is_admitted() {
    let other = asking("1", "512Mi");
    assert_eq!(admit(&asking("500m", "256Mi"), &node(), &[&other]), Ok(()));
}

#[test]
fn too_much_cpu_or_memory_is_refused_in_the_kubelets_words() {
    let other = asking("1500m", "100Mi");
    let refused = admit(&asking("600m", "1Mi"), &node(), &[&other]).unwrap_err();
    assert_eq!(refused.reason, "OutOfcpu");
    assert_eq!(refused.message, "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000");
    let refused = admit(&asking("100m", "2Gi"), &node(), &[]).unwrap_err();
    assert_eq!(refused.reason, "OutOfmemory");
    assert_eq!(
        refused.message,
        "Node didn't have enough resource: memory, requested: 2147483648, used: 0, capacity: 1073741824"
    );
}

#[test]
fn one_pod_too_many_is_refused() {
    let others = [asking("0", "0"), asking("0", "0"), asking("0", "0")];
    let others: Vec<&Pod> = others.iter().collect();
    let refused = admit(&asking("0", "0"), &node(), &others).unwrap_err();
    assert_eq!(refused.reason, "OutOfpods");
    assert_eq!(refused.message, "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3");
}

#[test]
fn node_selector_and_required_affinity_must_match_the_nodes_labels() {
    let selected = pod(json!({"containers": [{"name": "c"}], "nodeSelector": {"disk": "ssd"}}));
    assert_eq!(admit(&selected, &node(), &[]), Ok(()));
    let elsewhere = pod(json!({"containers": [{"name": "c"}], "nodeSelector": {"disk": "hdd"}}));
    let refused = admit(&elsewhere, &node(), &[]).unwrap_err();
    assert_eq!((refused.reason.as_str(), refused.message.as_str()), ("NodeAffinity", "Predicate NodeAffinity failed"));
    let affinity = |terms: serde_json::Value| {
        pod(json!({"containers": [{"name": "c"}], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}))
    };
    // One term of several is enough; within a term, every requirement.
    let ok = affinity(json!([
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}, {"key": "cores", "operator": "Gt", "values": ["4"]}]},
    ]));
    assert_eq!(admit(&ok, &node(), &[]), Ok(()));
    let by_name = affinity(json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]));
    assert_eq!(admit(&by_name, &node(), &[]), Ok(()));
    for refused in [
        json!([{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]),
        json!([{"matchExpressions": [{"key": "disk", "operator": "NotIn", "values": ["ssd"]}]}]),
        json!([{"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["4"]}]}]),
        json!([{}]),
    ] {
        assert_eq!(admit(&affinity(refused.clone()), &node(), &[]).unwrap_err().reason, "NodeAffinity", "{refused}");
    }
}

#[test]
fn a_host_port_another_pod_holds_is_refused() {
    let on = |port: i32, ip: Option<&str>| {
        pod(json!({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": port, "hostIP": ip}]}]}))
    };
    let holder = on(8080, None);
    assert_eq!(admit(&on(8080, Some("127.0.0.1")), &node(), &[&holder]).unwrap_err().reason, "NodePorts");
    assert_eq!(admit(&on(8081, None), &node(), &[&holder]), Ok(()));
    let udp = pod(
        json!({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]}]}),
    );
    assert_eq!(admit(&udp, &node(), &[&holder]), Ok(()));
}
