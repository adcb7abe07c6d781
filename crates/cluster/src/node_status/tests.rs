use super::*;

fn signals() -> Signals {
    Signals {
        cpus: 2,
        memory_total: 8 << 30,
        memory_available: 4 << 30,
        disk_total: 100 << 30,
        disk_available: 50 << 30,
        runtime: Ok("containerd://1.6.20".into()),
        images: vec![],
    }
}

fn identity() -> NodeIdentity {
    NodeIdentity {
        name: "n1".into(),
        ip: Some("10.0.0.5".into()),
        port: 10250,
        root: "/tmp".into(),
        version: "v1.37.0".into(),
    }
}

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn by_type<'a>(c: &'a [NodeCondition], ty: &str) -> &'a NodeCondition {
    c.iter().find(|c| c.type_ == ty).unwrap()
}

#[test]
fn a_healthy_machine_is_ready_without_pressure() {
    let c = conditions(&signals(), &[], t("2026-11-27T00:00:00Z"));
    let types: Vec<&str> = c.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]);
    let ready = by_type(&c, "Ready");
    assert_eq!((ready.status.as_str(), ready.reason.as_deref()), ("True", Some("KubeletReady")));
    assert_eq!(ready.message.as_deref(), Some("kubelet is posting ready status"));
    assert_eq!(by_type(&c, "MemoryPressure").reason.as_deref(), Some("KubeletHasSufficientMemory"));
    assert_eq!(by_type(&c, "DiskPressure").reason.as_deref(), Some("KubeletHasNoDiskPressure"));
    assert_eq!(by_type(&c, "PIDPressure").reason.as_deref(), Some("KubeletHasSufficientPID"));
}

#[test]
fn pressure_follows_the_default_eviction_thresholds() {
    let mut s = signals();
    s.memory_available = 99 << 20;
    s.disk_available = s.disk_total / 20;
    let c = conditions(&s, &[], t("2026-11-27T00:00:00Z"));
    assert_eq!(by_type(&c, "MemoryPressure").status, "True");
    assert_eq!(by_type(&c, "MemoryPressure").reason.as_deref(), Some("KubeletHasInsufficientMemory"));
    assert_eq!(by_type(&c, "DiskPressure").status, "True");
    assert_eq!(by_type(&c, "DiskPressure").reason.as_deref(), Some("KubeletHasDiskPressure"));
}

#[test]
fn an_unreachable_runtime_makes_the_node_not_ready() {
    let mut s = signals();
    s.runtime = Err("connection refused".into());
    let c = conditions(&s, &[], t("2026-11-27T00:00:00Z"));
    let ready = by_type(&c, "Ready");
    assert_eq!((ready.status.as_str(), ready.reason.as_deref()), ("False", Some("KubeletNotReady")));
    assert!(ready.message.as_deref().unwrap().contains("container runtime is down"));
}

#[test]
fn a_transition_time_moves_only_when_the_status_flips() {
    let t0 = t("2026-11-27T00:00:00Z");
    let t1 = t("2026-11-27T00:00:10Z");
    let t2 = t("2026-11-27T00:00:20Z");
    let first = conditions(&signals(), &[], t0);
    let same = conditions(&signals(), &first, t1);
    let ready = by_type(&same, "Ready");
    assert_eq!(ready.last_transition_time, Some(Time(t0)));
    assert_eq!(ready.last_heartbeat_time, Some(Time(t1)));
    let mut down = signals();
    down.runtime = Err("gone".into());
    let flipped = conditions(&down, &same, t2);
    assert_eq!(by_type(&flipped, "Ready").last_transition_time, Some(Time(t2)));
    assert_eq!(by_type(&flipped, "MemoryPressure").last_transition_time, Some(Time(t0)));
}

#[test]
fn the_status_describes_the_machine() {
    let s = status(&identity(), &MachineInfo { boot_id: "b".into(), ..Default::default() }, &signals(), &[]);
    assert_eq!(s["capacity"]["cpu"], "2");
    assert_eq!(s["capacity"]["memory"], "8388608Ki");
    assert_eq!(s["capacity"]["pods"], "110");
    assert_eq!(s["allocatable"]["memory"], "8286208Ki");
    assert_eq!(s["daemonEndpoints"]["kubeletEndpoint"]["Port"], 10250);
    assert_eq!(
        s["addresses"],
        json!([{"type": "InternalIP", "address": "10.0.0.5"}, {"type": "Hostname", "address": "n1"}])
    );
    assert_eq!(s["nodeInfo"]["containerRuntimeVersion"], "containerd://1.6.20");
    assert_eq!(s["nodeInfo"]["kubeletVersion"], "v1.37.0");
    assert_eq!(s["nodeInfo"]["bootID"], "b");
    // The status is a valid NodeStatus.
    let _: k8s_openapi::api::core::v1::NodeStatus = serde_json::from_value(s).unwrap();
}

#[test]
fn the_patch_replaces_the_addresses_whole() {
    let s = status(&identity(), &MachineInfo::default(), &signals(), &[]);
    let patch = status_patch(&s);
    assert_eq!(patch["status"]["addresses"][0], json!({"$patch": "replace"}));
    assert_eq!(patch["status"]["addresses"].as_array().unwrap().len(), 3);
}

#[test]
fn the_runtime_version_is_the_nodes_form() {
    assert_eq!(runtime_version("containerd 1.6.20~ds1"), "containerd://1.6.20~ds1");
    assert_eq!(runtime_version("containerd v1.7.0"), "containerd://1.7.0");
}

#[test]
fn the_initial_node_has_the_kubelets_labels_and_annotation() {
    let node = initial_node(&identity(), &json!({})).unwrap();
    let labels = node.metadata.labels.unwrap();
    assert_eq!(labels["kubernetes.io/hostname"], "n1");
    assert_eq!(labels["kubernetes.io/os"], "linux");
    assert!(labels.contains_key("kubernetes.io/arch"));
    assert_eq!(node.metadata.annotations.unwrap()[ATTACH_DETACH], "true");
}

#[test]
fn heartbeats_alone_are_no_change() {
    let a = status(
        &identity(),
        &MachineInfo::default(),
        &signals(),
        &conditions(&signals(), &[], t("2026-11-27T00:00:00Z")),
    );
    let b = status(
        &identity(),
        &MachineInfo::default(),
        &signals(),
        &conditions(&signals(), &[], t("2026-11-27T00:00:00Z")),
    );
    let mut c = b.clone();
    c["conditions"][0]["lastHeartbeatTime"] = json!("2026-11-27T00:00:10Z");
    assert_eq!(without_heartbeats(&a), without_heartbeats(&c));
    c["conditions"][0]["status"] = json!("True");
    assert_ne!(without_heartbeats(&a), without_heartbeats(&c));
}

#[test]
fn what_others_put_in_the_capacity_is_allocatable_and_leaves_it_with_the_capacity() {
    let ours = status(&identity(), &MachineInfo::default(), &signals(), &[]);
    // The conformance suite's preemption specs advertise an extended resource by patching the
    // Node's capacity; the scheduler places pods by its allocatable.
    let seen: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1"},
        "status": {
            "capacity": {"cpu": "2", "scheduling.k8s.io/foo": "5"},
            "allocatable": {"cpu": "2", "example.com/gone": "1", "hugepages-2Mi": "0"}
        }
    }))
    .unwrap();
    let s = with_others_resources(ours.clone(), Some(&seen));
    assert_eq!(s["allocatable"]["scheduling.k8s.io/foo"], "5");
    // Ours stay as the node counts them.
    assert_eq!(s["allocatable"]["cpu"], ours["allocatable"]["cpu"]);
    assert_eq!(s["allocatable"]["memory"], ours["allocatable"]["memory"]);
    // An extended resource no longer in the capacity is removed by the merge patch.
    assert_eq!(s["allocatable"]["example.com/gone"], Value::Null);
    assert!(s["allocatable"].as_object().unwrap().contains_key("example.com/gone"));
    assert_eq!(status_patch(&s)["status"]["allocatable"]["example.com/gone"], Value::Null);
    // Nothing seen yet: the node's own status.
    assert_eq!(with_others_resources(ours.clone(), None), ours);
}
