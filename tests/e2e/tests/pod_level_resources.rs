//! Pod-level resources (`spec.resources`, KEP-2837) for real: a pod with only pod-level limits
//! gets them on its pod cgroup and on a container without limits of its own, is Guaranteed,
//! and `check` shows the effective values; a pod whose containers request more than the pod is
//! refused with the API server's message.
// Tests of the real binary: real timeouts and timings.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;
use std::path::Path;

const BUSYBOX: &str = "localhost/busybox:1.36";

/// The container prints its cgroup (the `memory` line on cgroup v1, the only one on v2) and its
/// own memory limit, then waits for `/go/done`.
const SCRIPT: &str = "grep -E ':memory:|^0::' /proc/self/cgroup; echo limit=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max); until [ -e /go/done ]; do sleep 0.1; done";

#[test]
fn a_pod_with_only_pod_level_limits_gets_them_on_its_pod_cgroup() {
    let name = pod_name("podlevel");
    let go = std::env::temp_dir().join(format!("{name}-go"));
    std::fs::create_dir_all(&go).unwrap();
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  resources:
    limits: {{cpu: 500m, memory: 128Mi}}
  volumes: [{{name: go, hostPath: {{path: {go}}}}}]
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, "{SCRIPT}"]
    volumeMounts: [{{name: go, mountPath: /go}}]
"#,
        go = go.display()
    );
    let file = Manifest::new(&manifest);
    let mut running = Running::spawn(&run_args(file.path_str(), &[]), None);
    let found = running.wait_for_stderr("limit=", std::time::Duration::from_secs(60));
    let stderr = running.stderr_so_far();
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    // `[app] 4:memory:/podwright<root>/kubepods/pod<uid>/<container id>` (v1) or
    // `[app] 0::/podwright<root>/kubepods/pod<uid>/<container id>` (v2).
    let marker = if v2 { "0::" } else { ":memory:" };
    let container = stderr.lines().find_map(|l| l.split(marker).nth(1)).map(|c| c.trim().to_string());
    let read = |pod_cgroup: &Path, hierarchy: &str, file: &str| {
        let path = Path::new("/sys/fs/cgroup").join(hierarchy).join(pod_cgroup.strip_prefix("/").unwrap()).join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).trim().to_string()
    };
    let pod_cgroup = container.as_ref().map(|c| Path::new(c).parent().unwrap().to_path_buf());
    let values = pod_cgroup.as_ref().map(|pod_cgroup| {
        if v2 {
            vec![read(pod_cgroup, "", "cpu.max"), read(pod_cgroup, "", "memory.max")]
        } else {
            vec![
                read(pod_cgroup, "cpu", "cpu.shares"),
                read(pod_cgroup, "cpu", "cpu.cfs_quota_us"),
                read(pod_cgroup, "cpu", "cpu.cfs_period_us"),
                read(pod_cgroup, "memory", "memory.limit_in_bytes"),
            ]
        }
    });
    let _ = std::fs::write(go.join("done"), "");
    let o = running.wait();
    let _ = std::fs::remove_dir_all(&go);
    assert!(found, "{stderr}");
    o.assert_code(0);
    let p = o.single_pod();
    // Requests default to the pod-level limits: a Guaranteed pod, its cgroup right under kubepods.
    assert_eq!(p["status"]["qosClass"], "Guaranteed", "{}", o.context());
    let pod_cgroup = pod_cgroup.unwrap();
    assert!(pod_cgroup.parent().unwrap().ends_with("kubepods"), "{}", pod_cgroup.display());
    assert_eq!(pod_cgroup.file_name().unwrap().to_string_lossy(), format!("pod{}", uid(&p)));
    let memory = (128u64 << 20).to_string();
    let want: Vec<&str> = if v2 { vec!["50000 100000", &memory] } else { vec!["512", "50000", "100000", &memory] };
    assert_eq!(values.unwrap(), want, "{}", o.context());
    // The container, without limits of its own, runs with the pod's memory limit.
    assert!(o.output_of("app").contains(&format!("limit={memory}")), "{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn check_shows_the_effective_values_of_pod_level_resources() {
    let m = Manifest::new(&format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: budget}}
spec:
  resources:
    requests: {{cpu: 250m}}
    limits: {{cpu: "1", memory: 256Mi}}
  containers:
  - {{name: bare, image: {BUSYBOX}}}
  - {{name: own, image: {BUSYBOX}, resources: {{requests: {{cpu: 100m}}, limits: {{memory: 64Mi}}}}}}
"#
    ));
    let o = podwright(&["check", "-f", m.path_str()]);
    o.assert_code(0);
    // The memory request defaults to the containers' 64Mi; the pod's limits bound `bare`.
    for want in [
        "limits given to the runtime: cpu: 1, memory: 256Mi",
        "limits given to the runtime: cpu: 1, memory: 64Mi",
        "effective requests: cpu: 250m, memory: 64Mi",
        "effective limits: cpu: 1, memory: 256Mi",
        "QoS class: Burstable",
    ] {
        assert!(o.stdout.contains(want), "check should print {want:?}\n{}", o.context());
    }
}

#[test]
fn containers_requesting_more_than_the_pod_are_refused() {
    let m = Manifest::new(&format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: overbooked}}
spec:
  resources:
    requests: {{cpu: 500m}}
  containers:
  - {{name: a, image: {BUSYBOX}, resources: {{requests: {{cpu: 400m}}}}}}
  - {{name: b, image: {BUSYBOX}, resources: {{requests: {{cpu: 200m}}}}}}
"#
    ));
    let want = r#"The Pod "overbooked" is invalid: spec.resources.requests[cpu]: Invalid value: "500m": must be greater than or equal to aggregate container requests of 600m"#;
    for o in [podwright(&["check", "-f", m.path_str()]), run_file(m.path_str(), &[])] {
        o.assert_code(2);
        assert!(o.stderr.contains(want), "should print {want:?}\n{}", o.context());
        assert!(o.all_progress().is_empty(), "nothing started\n{}", o.context());
    }
}
