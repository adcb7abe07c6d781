use super::*;
use serde_json::{Value, json};

fn pod(containers: Value, init: Value, overhead: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "uid": "1234"},
        "spec": {"containers": containers, "initContainers": init, "overhead": overhead},
    }))
    .unwrap()
}

fn container(requests: Value, limits: Value) -> Value {
    json!({"name": "c", "image": "i", "resources": {"requests": requests, "limits": limits}})
}

const MI: i64 = 1024 * 1024;

/// The cases of the kubelet's `TestResourceConfigForPod` (quota period 100 ms), and overhead.
#[test]
fn resource_config_per_qos_class_and_declared_limits() {
    let none = json!(null);
    let cases = [
        ("besteffort", pod(json!([container(none.clone(), none.clone())]), none.clone(), none.clone()), 2, None, None),
        (
            "burstable-no-limits",
            pod(
                json!([container(json!({"cpu": "100m", "memory": "100Mi"}), none.clone())]),
                none.clone(),
                none.clone(),
            ),
            102,
            None,
            None,
        ),
        (
            "burstable-with-limits",
            pod(
                json!([container(
                    json!({"cpu": "100m", "memory": "100Mi"}),
                    json!({"cpu": "200m", "memory": "200Mi"})
                )]),
                none.clone(),
                none.clone(),
            ),
            102,
            Some((20_000, 100_000)),
            Some(200 * MI),
        ),
        (
            "burstable-partial-limits",
            pod(
                json!([
                    container(json!({"cpu": "100m", "memory": "100Mi"}), json!({"cpu": "200m", "memory": "200Mi"})),
                    container(json!({"cpu": "100m", "memory": "100Mi"}), none.clone()),
                ]),
                none.clone(),
                none.clone(),
            ),
            204,
            None,
            None,
        ),
        (
            "burstable-cpu-limits-only",
            pod(json!([container(json!({"cpu": "100m"}), json!({"cpu": "1"}))]), none.clone(), none.clone()),
            102,
            Some((100_000, 100_000)),
            None,
        ),
        (
            "guaranteed",
            pod(
                json!([container(
                    json!({"cpu": "100m", "memory": "100Mi"}),
                    json!({"cpu": "100m", "memory": "100Mi"})
                )]),
                none.clone(),
                none.clone(),
            ),
            102,
            Some((10_000, 100_000)),
            Some(100 * MI),
        ),
        (
            "guaranteed-tiny-quota",
            pod(
                json!([container(json!({"cpu": "1m", "memory": "1Mi"}), json!({"cpu": "1m", "memory": "1Mi"}))]),
                none.clone(),
                none.clone(),
            ),
            2,
            Some((1_000, 100_000)),
            Some(MI),
        ),
        (
            "burstable-with-limits-and-overhead",
            pod(
                json!([container(
                    json!({"cpu": "100m", "memory": "100Mi"}),
                    json!({"cpu": "200m", "memory": "200Mi"})
                )]),
                none.clone(),
                json!({"cpu": "250m", "memory": "120Mi"}),
            ),
            358,
            Some((45_000, 100_000)),
            Some(320 * MI),
        ),
        (
            // The init container without limits leaves the pod without a declared limit.
            "init-container-without-limits",
            pod(
                json!([container(
                    json!({"cpu": "100m", "memory": "100Mi"}),
                    json!({"cpu": "200m", "memory": "200Mi"})
                )]),
                json!([container(json!({"cpu": "500m"}), none.clone())]),
                none.clone(),
            ),
            512,
            None,
            None,
        ),
    ];
    for (name, p, shares, quota, memory) in cases {
        let want = ResourceConfig { cpu_shares: shares, cpu_quota: quota, memory_limit: memory };
        assert_eq!(resource_config(&p), want, "{name}");
    }
}

#[test]
fn cpu_weight_is_runcs_conversion_of_shares() {
    assert_eq!(cpu_weight(2), 1);
    assert_eq!(cpu_weight(1024), 39);
    assert_eq!(cpu_weight(262_144), 10_000);
}

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fake_mount(name: &str, v2: bool) -> Dir {
    let dir = std::env::temp_dir().join(format!("pw-cgroup-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if v2 {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
    } else {
        for c in ["cpu", "memory", "cpuset", "unified"] {
            std::fs::create_dir_all(dir.join(c)).unwrap();
            std::fs::write(dir.join(c).join("cgroup.procs"), "").unwrap();
        }
        std::fs::write(dir.join("cpuset/cpuset.cpus"), "0-1\n").unwrap();
        std::fs::write(dir.join("cpuset/cpuset.mems"), "0\n").unwrap();
    }
    Dir(dir)
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn burstable_pod() -> Pod {
    pod(
        json!([container(json!({"cpu": "100m", "memory": "100Mi"}), json!({"cpu": "200m", "memory": "200Mi"}))]),
        json!(null),
        json!(null),
    )
}

#[test]
fn v1_the_pod_cgroup_is_made_and_sized_in_every_hierarchy() {
    let mount = fake_mount("v1", false);
    let cgroups = PodCgroups::detect(&mount.0, Path::new("/var/lib/podwright")).unwrap().unwrap();
    let p = burstable_pod();
    let parent = cgroups.ensure(&p).unwrap();
    assert_eq!(parent, "/podwright_var_lib_podwright/kubepods/burstable/pod1234");
    let at = |c: &str, file: &str| read(mount.0.join(c).join(&parent[1..]).join(file));
    assert_eq!(at("cpu", "cpu.shares"), "102");
    assert_eq!(at("cpu", "cpu.cfs_quota_us"), "20000");
    assert_eq!(at("cpu", "cpu.cfs_period_us"), "100000");
    assert_eq!(at("memory", "memory.limit_in_bytes"), (200 * MI).to_string());
    assert_eq!(at("cpuset", "cpuset.cpus"), "0-1");
    assert_eq!(read(mount.0.join("cpu/podwright_var_lib_podwright/kubepods/besteffort/cpu.shares")), "2");
    assert!(mount.0.join("unified").join(&parent[1..]).is_dir(), "made in the hybrid v2 tree, as runc does");
    assert!(!mount.0.join("unified").join(&parent[1..]).join("cpu.shares").exists());
    // Found again as made: a restarted podwright.
    assert_eq!(cgroups.ensure(&p).unwrap(), parent);
    assert_eq!(cgroups.pods(), BTreeSet::from(["1234".to_string()]));
}

#[test]
fn v2_the_pod_cgroup_has_weight_max_and_memory_max() {
    let mount = fake_mount("v2", true);
    let cgroups = PodCgroups::detect(&mount.0, Path::new("/r")).unwrap().unwrap();
    let parent = cgroups.ensure(&burstable_pod()).unwrap();
    assert_eq!(parent, "/podwright_r/kubepods/burstable/pod1234");
    let dir = mount.0.join(&parent[1..]);
    assert_eq!(read(dir.join("cpu.weight")), "4");
    assert_eq!(read(dir.join("cpu.max")), "20000 100000");
    assert_eq!(read(dir.join("memory.max")), (200 * MI).to_string());
    assert_eq!(read(mount.0.join("cgroup.subtree_control")), "+cpu +memory +pids");
}

/// Pod-level resources (`spec.resources`) as `ResourceConfigForPod` reads them: the pod's
/// requests and limits replace the containers' aggregate, and a pod-level limit is declared
/// whatever the containers declare. Defaulted as the API server defaults them.
#[test]
fn resource_config_from_pod_level_resources() {
    let defaulted = |spec: Value| {
        let mut p: Pod =
            serde_json::from_value(json!({"metadata": {"name": "p", "uid": "1234"}, "spec": spec})).unwrap();
        podwright_api::apply_defaults(&mut p);
        p
    };
    let bare = json!([{"name": "c", "image": "i"}]);
    let cases = [
        (
            "limits only: requests default to them, Guaranteed",
            json!({"resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}, "containers": bare}),
            512,
            Some((50_000, 100_000)),
            Some(128 * MI),
            "Guaranteed",
        ),
        (
            "requests below the limits, containers without limits",
            json!({
                "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}, "limits": {"cpu": "200m", "memory": "200Mi"}},
                "containers": bare,
            }),
            102,
            Some((20_000, 100_000)),
            Some(200 * MI),
            "Burstable",
        ),
        (
            "a cpu request only: the memory limit defaults from the containers'",
            json!({
                "resources": {"requests": {"cpu": "500m"}},
                "containers": [container(json!(null), json!({"memory": "64Mi"}))],
            }),
            512,
            None,
            Some(64 * MI),
            "Burstable",
        ),
        (
            "overhead added",
            json!({
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                "overhead": {"cpu": "250m", "memory": "64Mi"},
                "containers": bare,
            }),
            768,
            Some((75_000, 100_000)),
            Some(192 * MI),
            "Guaranteed",
        ),
    ];
    for (name, spec, shares, quota, memory, class) in cases {
        let p = defaulted(spec);
        let want = ResourceConfig { cpu_shares: shares, cpu_quota: quota, memory_limit: memory };
        assert_eq!(resource_config(&p), want, "{name}");
        assert_eq!(qos_class(&p), class, "{name}");
    }
}

#[test]
fn a_resize_grows_the_pod_cgroup_first_and_shrinks_it_last() {
    let mount = fake_mount("v2-resize", true);
    let cgroups = PodCgroups::detect(&mount.0, Path::new("/r")).unwrap().unwrap();
    let before = burstable_pod();
    let dir = mount.0.join(&cgroups.ensure(&before).unwrap()[1..]);
    // CPU limit 200m → 400m, memory limit 200Mi → 100Mi.
    let after = pod(
        json!([container(json!({"cpu": "100m", "memory": "100Mi"}), json!({"cpu": "400m", "memory": "100Mi"}))]),
        json!(null),
        json!(null),
    );
    let config = resource_config(&after);
    cgroups.resize(&after, &config, Step::Grow).unwrap();
    assert_eq!(read(dir.join("cpu.max")), "40000 100000");
    assert_eq!(read(dir.join("memory.max")), (200 * MI).to_string(), "not shrunk before the containers");
    cgroups.resize(&after, &config, Step::Shrink).unwrap();
    assert_eq!(read(dir.join("memory.max")), (100 * MI).to_string());
    assert_eq!(read(dir.join("cpu.weight")), "4", "unchanged");
    std::fs::write(dir.join("memory.current"), (150 * MI).to_string()).unwrap();
    assert_eq!(cgroups.memory_usage(&after), Some(150 * MI));
}
