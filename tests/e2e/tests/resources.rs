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
