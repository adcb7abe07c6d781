//! Requests and limits for real: the cgroup files a container sees hold the CPU shares, CFS
//! quota and memory limit the kubelet's `calculateLinuxResources` gives, `status.qosClass` is
//! the pod's class, a container over its memory limit ends `OOMKilled`, and `check` prints the
//! effective pod requests and limits.
// Tests of the real binary: real timeouts and timings.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;

const BUSYBOX: &str = "localhost/busybox:1.36";

/// Prints the container's own cgroup v1 files (runc mounts its cgroup at /sys/fs/cgroup/*).
const PRINT_CGROUP: &str = "for f in cpu/cpu.shares cpu/cpu.cfs_quota_us cpu/cpu.cfs_period_us memory/memory.limit_in_bytes; do echo $f=$(cat /sys/fs/cgroup/$f); done";

#[test]
fn cgroup_files_hold_shares_quota_and_memory_limit() {
    let burstable = pod_name("burstable");
    let best_effort = pod_name("besteffort");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {burstable}}}
spec:
  restartPolicy: Never
  containers:
  - name: limited
    image: {BUSYBOX}
    command: [sh, -c, "{PRINT_CGROUP}"]
    resources:
      requests: {{cpu: "0.25", memory: 32Mi}}
      limits: {{cpu: 500m, memory: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {{name: {best_effort}}}
spec:
  restartPolicy: Never
  containers:
  - name: unlimited
    image: {BUSYBOX}
    command: [sh, -c, "{PRINT_CGROUP}"]
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    assert_eq!(
        o.output_of("limited"),
        [
            "cpu/cpu.shares=256",
            "cpu/cpu.cfs_quota_us=50000",
            "cpu/cpu.cfs_period_us=100000",
            "memory/memory.limit_in_bytes=67108864",
        ],
        "{}",
        o.context()
    );
    let unlimited = o.output_of("unlimited");
    assert_eq!(
        unlimited[..3],
        ["cpu/cpu.shares=2", "cpu/cpu.cfs_quota_us=-1", "cpu/cpu.cfs_period_us=100000"],
        "{}",
        o.context()
    );
    assert!(
        unlimited[3].strip_prefix("memory/memory.limit_in_bytes=").unwrap().parse::<u64>().unwrap() > 1 << 40,
        "no memory limit: {}",
        o.context()
    );
    assert_eq!(o.pod(&burstable)["status"]["qosClass"], "Burstable", "{}", o.context());
    assert_eq!(o.pod(&best_effort)["status"]["qosClass"], "BestEffort", "{}", o.context());
}

#[test]
fn a_container_over_its_memory_limit_is_oom_killed() {
    let pod = pod_name("oom");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  containers:
  - name: hungry
    image: {BUSYBOX}
    command: [sh, -c, "x=a; while true; do x=$x$x; done"]
    resources:
      limits: {{cpu: "1", memory: 16Mi}}
"#
    );
    let o = run_manifest(&manifest, &[]);
    let p = o.pod(&pod);
    assert_eq!(phase(&p), "Failed", "{}", o.context());
    assert_eq!(p["status"]["qosClass"], "Guaranteed", "{}", o.context());
    let terminated = &container_status(&p, "hungry")["state"]["terminated"];
    assert_eq!(terminated["reason"], "OOMKilled", "{}", o.context());
    assert_eq!(terminated["exitCode"], 137, "{}", o.context());
}

#[test]
fn check_prints_effective_requests_limits_and_qos_class() {
    let m = Manifest::new(&format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: effective}}
spec:
  initContainers:
  - {{name: init1, image: {BUSYBOX}, resources: {{limits: {{cpu: 100m, memory: 1Gi}}}}}}
  - {{name: init2, image: {BUSYBOX}, resources: {{limits: {{cpu: 50m, memory: 2Gi}}}}}}
  - {{name: sidecar, image: {BUSYBOX}, restartPolicy: Always, resources: {{requests: {{cpu: "0.02"}}}}}}
  containers:
  - {{name: app1, image: {BUSYBOX}, resources: {{limits: {{cpu: 10m, memory: 1100Mi}}}}}}
  - {{name: app2, image: {BUSYBOX}, resources: {{limits: {{cpu: 10m, memory: 1100Mi}}}}}}
"#
    ));
    let o = podwright(&["check", "-f", m.path_str()]);
    o.assert_code(0);
    // Limits: init1's 100m beats app1 + app2 = 20m; app1 + app2 = 2200Mi beats init2's 2Gi.
    // Requests default to the limits; the sidecar's 20m adds to the app containers (40m).
    for want in [
        "effective requests: cpu: 100m, memory: 2200Mi",
        "effective limits: cpu: 100m, memory: 2200Mi",
        "QoS class: Burstable",
    ] {
        assert!(o.stdout.contains(want), "check should print {want:?}\n{}", o.context());
    }
}

/// The pod-level cgroup the kubelet's cgroupfs driver makes, read from the host's cgroup
/// filesystem while the pod runs: under `kubepods/burstable`, CPU shares from the requests, CFS
/// quota and memory limit from the limits, each with its RuntimeClass's overhead added; the
/// container's own cgroup is inside it; and it goes with the pod.
#[test]
fn the_pod_cgroup_holds_effective_resources_with_overhead() {
    let name = pod_name("podcgroup");
    let go = std::env::temp_dir().join(format!("{name}-go"));
    std::fs::create_dir_all(&go).unwrap();
    let manifest = format!(
        r#"apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {{name: {name}}}
handler: runc-alt
overhead: {{podFixed: {{cpu: 250m, memory: 64Mi}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  runtimeClassName: {name}
  restartPolicy: Never
  volumes: [{{name: go, hostPath: {{path: {go}}}}}]
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, "grep :memory: /proc/self/cgroup; until [ -e /go/done ]; do sleep 0.1; done"]
    volumeMounts: [{{name: go, mountPath: /go}}]
    resources:
      requests: {{cpu: 100m, memory: 100Mi}}
      limits: {{cpu: 200m, memory: 200Mi}}
"#,
        go = go.display()
    );
    let file = Manifest::new(&manifest);
    let mut running = Running::spawn(&run_args(file.path_str(), &[]), None);
    let found = running.wait_for_stderr(":memory:/", std::time::Duration::from_secs(60));
    let stderr = running.stderr_so_far();
    let _ = std::fs::write(go.join("done"), "");
    assert!(found, "{stderr}");
    // `[app] 4:memory:/podwright<root>/kubepods/burstable/pod<uid>/<container id>`
    let container = stderr.lines().find_map(|l| l.split(":memory:").nth(1)).unwrap().trim().to_string();
    let pod_cgroup = std::path::Path::new(&container).parent().unwrap().to_path_buf();
    let read = |hierarchy: &str, file: &str| {
        let path = std::path::Path::new("/sys/fs/cgroup")
            .join(hierarchy)
            .join(pod_cgroup.strip_prefix("/").unwrap())
            .join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).trim().to_string()
    };
    let values = [
        read("cpu", "cpu.shares"),
        read("cpu", "cpu.cfs_quota_us"),
        read("cpu", "cpu.cfs_period_us"),
        read("memory", "memory.limit_in_bytes"),
    ];
    let o = running.wait();
    let _ = std::fs::remove_dir_all(&go);
    o.assert_code(0);
    let p = o.single_pod();
    let level = pod_cgroup.parent().unwrap();
    assert!(level.ends_with("kubepods/burstable"), "{}", pod_cgroup.display());
    assert_eq!(pod_cgroup.file_name().unwrap().to_string_lossy(), format!("pod{}", uid(&p)));
    // 100m + 250m requested: 358 shares; 200m + 250m: 45 ms a 100 ms period; 200Mi + 64Mi.
    assert_eq!(values, ["358", "45000", "100000", &(264u64 << 20).to_string()], "{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn check_adds_the_runtime_class_overhead() {
    let m = Manifest::new(&format!(
        r#"apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {{name: vm}}
handler: runc-alt
overhead: {{podFixed: {{cpu: 250m, memory: 120Mi}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: effective}}
spec:
  runtimeClassName: vm
  containers:
  - {{name: app, image: {BUSYBOX}, resources: {{requests: {{cpu: 100m}}, limits: {{memory: 1Gi}}}}}}
"#
    ));
    let o = podwright(&["check", "-f", m.path_str()]);
    o.assert_code(0);
    for want in ["effective requests: cpu: 350m, memory: 1144Mi", "effective limits: memory: 1144Mi"] {
        assert!(o.stdout.contains(want), "check should print {want:?}\n{}", o.context());
    }
}
