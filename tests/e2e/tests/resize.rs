//! In-place pod resize (KEP-1287) through `serve`'s `resize` subresource with kubectl 1.32, on
//! real containerd: the new values read back from the container's own cgroup, restart counts
//! by `resizePolicy`, an infeasible resize left pending, a memory decrease below the pod's or a
//! container's usage refused, a resize that survives a SIGKILL of `serve`, and a resize of
//! pod-level resources read back from the pod cgroup.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::serve::{Daemon, text};
use podwright_e2e::*;
use std::time::Duration;

const BUSYBOX: &str = "localhost/busybox:1.36";
const KUBECTL: Option<&str> = Some("1.32");

/// A pod whose one container runs `command`, with CPU resized in place and memory by a restart.
fn create(d: &Daemon, name: &str, command: &str) {
    let m = Manifest::new(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c", "{command}"]
    resizePolicy:
    - {{resourceName: cpu, restartPolicy: NotRequired}}
    - {{resourceName: memory, restartPolicy: RestartContainer}}
    resources:
      requests: {{cpu: 100m, memory: 64Mi}}
      limits: {{cpu: 200m, memory: 128Mi}}
"#
    ));
    d.ok(&["create", "-f", m.path_str()]);
    d.wait_for(&["get", "pod", name, "--no-headers"], Duration::from_secs(30), |o| o.contains("Running"));
}

/// `kubectl patch pod NAME --subresource resize` with kubectl 1.32; its output.
fn resize(d: &Daemon, name: &str, patch: &str) -> std::process::Output {
    d.kubectl(KUBECTL, &["patch", "pod", name, "--subresource", "resize", "--patch", patch])
}

fn resize_ok(d: &Daemon, name: &str, patch: &str) {
    let out = resize(d, name, patch);
    assert!(out.status.success(), "resize failed: {}{}", text(&out.stdout), text(&out.stderr));
}

/// The container's CFS quota and memory limit as its own cgroup shows them (v1 or v2).
fn cgroup(d: &Daemon, name: &str) -> String {
    let script = "if [ -f /sys/fs/cgroup/cpu.max ]; then cut -d' ' -f1 /sys/fs/cgroup/cpu.max; \
                  cat /sys/fs/cgroup/memory.max; else cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us \
                  /sys/fs/cgroup/memory/memory.limit_in_bytes; fi";
    d.ok(&["exec", name, "--", "sh", "-c", script]).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Raises the CPU limit of `name`'s container in place and waits until its status shows it.
fn raise_cpu_limit(d: &Daemon, name: &str, cpu: &str) {
    resize_ok(
        d,
        name,
        &format!(r#"{{"spec":{{"containers":[{{"name":"app","resources":{{"limits":{{"cpu":"{cpu}"}}}}}}]}}}}"#),
    );
    d.wait_for(
        &["get", "pod", name, "-o", "jsonpath={.status.containerStatuses[0].resources.limits.cpu}"],
        Duration::from_secs(20),
        |o| o == cpu,
    );
}

fn jsonpath(d: &Daemon, name: &str, path: &str) -> String {
    d.ok(&["get", "pod", name, "-o", &format!("jsonpath={path}")])
}

const RESIZE_CONDITIONS: &str = "{range .status.conditions[?(@.type==\"PodResizePending\")]}{.type}/{.reason}: {.message}{end}{range .status.conditions[?(@.type==\"PodResizeInProgress\")]}{.type}/{.reason}: {.message}{end}";

const MI: u64 = 1024 * 1024;

#[test]
fn a_cpu_limit_raised_in_place_and_a_memory_limit_lowered_by_a_restart() {
    let d = Daemon::start();
    create(&d, "rz", "sleep 3600");
    assert_eq!(cgroup(&d, "rz"), format!("20000 {}", 128 * MI));
    let id = jsonpath(&d, "rz", "{.status.containerStatuses[0].containerID}");

    // CPU, NotRequired: the running container gets the new quota.
    raise_cpu_limit(&d, "rz", "400m");
    assert_eq!(cgroup(&d, "rz"), format!("40000 {}", 128 * MI));
    assert_eq!(jsonpath(&d, "rz", "{.status.containerStatuses[0].containerID}"), id, "the container was replaced");
    assert_eq!(jsonpath(&d, "rz", "{.status.containerStatuses[0].restartCount}"), "0");
    assert_eq!(
        jsonpath(&d, "rz", "{.metadata.generation} {.status.observedGeneration} {.status.qosClass}"),
        "2 2 Burstable"
    );

    // Memory, RestartContainer: a new instance with the lower limit, one restart more.
    resize_ok(
        &d,
        "rz",
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"memory":"32Mi"},"limits":{"memory":"96Mi"}}}]}}"#,
    );
    d.wait_for(
        &[
            "get",
            "pod",
            "rz",
            "-o",
            "jsonpath={.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].ready}",
        ],
        Duration::from_secs(30),
        |o| o == "1 true",
    );
    assert_eq!(cgroup(&d, "rz"), format!("40000 {}", 96 * MI));
    assert_eq!(
        jsonpath(
            &d,
            "rz",
            "{.status.containerStatuses[0].allocatedResources} {.status.containerStatuses[0].resources.limits}"
        ),
        r#"{"cpu":"100m","memory":"32Mi"} {"cpu":"400m","memory":"96Mi"}"#
    );
    assert_eq!(jsonpath(&d, "rz", RESIZE_CONDITIONS), "", "no resize is pending or in progress");
    let events =
        d.ok(&["get", "events", "--field-selector", "involvedObject.name=rz", "-o", "jsonpath={.items[*].message}"]);
    assert!(events.contains("Container app resize requires restart"), "{events}");
}

#[test]
fn an_infeasible_resize_stays_pending_and_the_api_server_refuses_bad_ones() {
    let d = Daemon::start();
    create(&d, "rz-big", "sleep 3600");
    resize_ok(
        &d,
        "rz-big",
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"1000"},"limits":{"cpu":"1000"}}}]}}"#,
    );
    let cpus = std::thread::available_parallelism().unwrap().get() * 1000;
    let pending = d.wait_for(
        &["get", "pod", "rz-big", "-o", &format!("jsonpath={RESIZE_CONDITIONS}")],
        Duration::from_secs(20),
        |o| !o.is_empty(),
    );
    assert_eq!(
        pending,
        format!(
            "PodResizePending/Infeasible: Node didn't have enough capacity: cpu, requested: 1000000, capacity: {cpus}"
        )
    );
    // Nothing changed on the node.
    assert_eq!(cgroup(&d, "rz-big"), format!("20000 {}", 128 * MI));
    assert_eq!(jsonpath(&d, "rz-big", "{.status.containerStatuses[0].resources.limits.cpu}"), "200m");

    // The API server's validation of a resize.
    let refused = |patch: &str| {
        let out = resize(&d, "rz-big", patch);
        assert!(!out.status.success(), "{patch} was accepted");
        text(&out.stderr)
    };
    assert!(
        refused(r#"{"spec":{"containers":[{"name":"app","resources":{"limits":{"memory":null}}}]}}"#)
            .contains("spec.containers[0].resources.limits[memory]: Forbidden: resource limits cannot be removed")
    );
    assert!(
        refused(r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"1000","memory":"128Mi"}}}]}}"#)
            .contains(r#"spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing"#)
    );
    assert!(
        refused(r#"{"spec":{"containers":[{"name":"app","resources":{"limits":{"ephemeral-storage":"1Gi"}}}]}}"#)
            .contains("spec: Forbidden: only cpu and memory resources are mutable")
    );
}

#[test]
fn a_memory_limit_below_the_pods_usage_is_refused() {
    let d = Daemon::start();
    // Holds 90 MiB: dd's buffer, filled, waits to be written to a pipe nobody reads.
    create(&d, "rz-mem", "dd if=/dev/zero bs=90M count=1 | sleep 3600");
    std::thread::sleep(Duration::from_secs(2));
    let patch = r#"{"spec":{"containers":[{"name":"app","resources":{"limits":{"memory":"80Mi","cpu":"300m"}}}]}}"#;
    // Lowered in place (NotRequired), so that the kubelet's check applies.
    resize_ok(
        &d,
        "rz-mem",
        r#"{"spec":{"containers":[{"name":"app","resizePolicy":[{"resourceName":"memory","restartPolicy":"NotRequired"}]}]}}"#,
    );
    resize_ok(&d, "rz-mem", patch);
    let status = d.wait_for(
        &["get", "pod", "rz-mem", "-o", &format!("jsonpath={RESIZE_CONDITIONS}")],
        Duration::from_secs(20),
        |o| o.contains("Error"),
    );
    // The 1.35 kubelet's words: the pod's check and the container's, aggregated.
    let pod_over = format!(
        "PodResizeInProgress/Error: cannot decrease memory limits: [attempting to set pod memory limit ({}) below current usage (",
        80 * MI
    );
    let container_over =
        format!("attempting to set container \"app\" memory limit ({}) below current usage (", 80 * MI);
    assert!(status.starts_with(&pod_over) && status.contains(&container_over), "{status}");
    assert_eq!(cgroup(&d, "rz-mem"), format!("20000 {}", 128 * MI), "nothing was applied");
    assert_eq!(jsonpath(&d, "rz-mem", "{.status.containerStatuses[0].restartCount}"), "0");
}

#[test]
fn a_resize_survives_a_sigkill_of_serve() {
    let mut d = Daemon::start();
    create(&d, "rz-kill", "sleep 3600");
    let id = jsonpath(&d, "rz-kill", "{.status.containerStatuses[0].containerID}");
    raise_cpu_limit(&d, "rz-kill", "500m");
    d.crash_and_restart();
    // The allocation and what the container was given come back from the checkpoint: nothing
    // is applied again, nothing restarts.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        jsonpath(
            &d,
            "rz-kill",
            "{.status.containerStatuses[0].resources.limits.cpu} {.status.containerStatuses[0].allocatedResources.cpu}"
        ),
        "500m 100m"
    );
    assert_eq!(cgroup(&d, "rz-kill"), format!("50000 {}", 128 * MI));
    assert_eq!(jsonpath(&d, "rz-kill", "{.status.containerStatuses[0].containerID}"), id);
    assert_eq!(jsonpath(&d, "rz-kill", "{.status.containerStatuses[0].restartCount}"), "0");
    assert_eq!(jsonpath(&d, "rz-kill", RESIZE_CONDITIONS), "");
    let checkpoint =
        std::fs::read_dir(d.root.join("pods")).unwrap().flatten().map(|e| e.path().join("checkpoint.json"));
    let saved: Vec<String> = checkpoint.filter_map(|p| std::fs::read_to_string(p).ok()).collect();
    assert!(saved.iter().any(|s| s.contains(r#""allocated":{"app":{"limits":{"cpu":"500m""#)), "{saved:?}");
}

#[test]
fn a_containers_memory_limit_is_not_lowered_below_its_usage() {
    let d = Daemon::start();
    // `app` holds 40 MiB (dd's buffer, filled, waits to be written to a pipe nobody reads);
    // `side` has no memory limit, so the pod cgroup has none and only the container's check
    // applies.
    let m = Manifest::new(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: rz-ctr}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c", "dd if=/dev/zero bs=40M count=1 | sleep 3600"]
    resizePolicy: [{{resourceName: memory, restartPolicy: NotRequired}}]
    resources:
      limits: {{cpu: 200m, memory: 64Mi}}
  - name: side
    image: {BUSYBOX}
    command: ["sleep", "3600"]
"#
    ));
    d.ok(&["create", "-f", m.path_str()]);
    d.wait_for(&["get", "pod", "rz-ctr", "--no-headers"], Duration::from_secs(30), |o| o.contains("2/2"));
    std::thread::sleep(Duration::from_secs(2));
    resize_ok(
        &d,
        "rz-ctr",
        r#"{"spec":{"containers":[{"name":"app","resources":{"requests":{"memory":"20Mi"},"limits":{"memory":"20Mi"}}}]}}"#,
    );
    let status = d.wait_for(
        &["get", "pod", "rz-ctr", "-o", &format!("jsonpath={RESIZE_CONDITIONS}")],
        Duration::from_secs(20),
        |o| o.contains("Error"),
    );
    let want = format!(
        "PodResizeInProgress/Error: cannot decrease memory limits: attempting to set container \"app\" memory limit ({}) below current usage (",
        20 * MI
    );
    assert!(status.starts_with(&want), "{status}");
    assert_eq!(cgroup(&d, "rz-ctr"), format!("20000 {}", 64 * MI), "nothing was applied");
    assert_eq!(jsonpath(&d, "rz-ctr", "{.status.containerStatuses[*].restartCount}"), "0 0");
    assert_eq!(jsonpath(&d, "rz-ctr", "{.status.containerStatuses[0].resources.limits.memory}"), "64Mi");
}

/// The pod cgroup of `name` as the host shows it: its CFS quota and its memory limit.
fn pod_cgroup(d: &Daemon, name: &str) -> String {
    let own = d.ok(&["exec", name, "--", "cat", "/proc/self/cgroup"]);
    let v2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let marker = if v2 { "0::" } else { ":memory:" };
    let container = own.lines().find_map(|l| l.split(marker).nth(1)).expect("the container's cgroup").trim();
    let pod = std::path::Path::new(container).parent().unwrap().strip_prefix("/").unwrap().to_path_buf();
    let read = |hierarchy: &str, file: &str| {
        let path = std::path::Path::new("/sys/fs/cgroup").join(hierarchy).join(&pod).join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).trim().to_string()
    };
    if v2 {
        format!("{} {}", read("", "cpu.max").split(' ').next().unwrap(), read("", "memory.max"))
    } else {
        format!("{} {}", read("cpu", "cpu.cfs_quota_us"), read("memory", "memory.limit_in_bytes"))
    }
}

#[test]
fn pod_level_resources_are_resized_in_place() {
    let d = Daemon::start();
    let m = Manifest::new(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: rz-pod}}
spec:
  terminationGracePeriodSeconds: 1
  resources:
    limits: {{cpu: 500m, memory: 128Mi}}
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sleep", "3600"]
"#
    ));
    d.ok(&["create", "-f", m.path_str()]);
    d.wait_for(&["get", "pod", "rz-pod", "--no-headers"], Duration::from_secs(30), |o| o.contains("Running"));
    assert_eq!(pod_cgroup(&d, "rz-pod"), format!("50000 {}", 128 * MI));
    let id = jsonpath(&d, "rz-pod", "{.status.containerStatuses[0].containerID}");

    // Guaranteed: requests (defaulted to the limits) move with them.
    let out = d.kubectl(
        KUBECTL,
        &[
            "patch",
            "pod",
            "rz-pod",
            "--subresource",
            "resize",
            "--type",
            "merge",
            "--patch",
            r#"{"spec":{"resources":{"requests":{"cpu":"800m","memory":"160Mi"},"limits":{"cpu":"800m","memory":"160Mi"}}}}"#,
        ],
    );
    assert!(out.status.success(), "resize failed: {}{}", text(&out.stdout), text(&out.stderr));
    let resized = format!("80000 {}", 160 * MI);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while pod_cgroup(&d, "rz-pod") != resized && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(pod_cgroup(&d, "rz-pod"), resized);
    // The container, without limits of its own, follows the pod's.
    assert_eq!(cgroup(&d, "rz-pod"), resized);
    assert_eq!(jsonpath(&d, "rz-pod", "{.status.containerStatuses[0].containerID}"), id, "the container was replaced");
    assert_eq!(jsonpath(&d, "rz-pod", "{.status.containerStatuses[0].restartCount}"), "0");
    assert_eq!(jsonpath(&d, "rz-pod", "{.status.qosClass}"), "Guaranteed");
    assert_eq!(jsonpath(&d, "rz-pod", RESIZE_CONDITIONS), "");

    // The API server's refusals: the QoS class may not change, nor an amount go.
    let refused = |patch: &str| {
        let out = d.kubectl(
            KUBECTL,
            &["patch", "pod", "rz-pod", "--subresource", "resize", "--type", "merge", "--patch", patch],
        );
        assert!(!out.status.success(), "{patch} was accepted");
        text(&out.stderr)
    };
    let qos = refused(r#"{"spec":{"resources":{"requests":{"memory":"64Mi"}}}}"#);
    assert!(qos.contains("Pod QOS Class may not change as a result of resizing"), "{qos}");
    let removed = refused(r#"{"spec":{"resources":{"limits":{"cpu":null},"requests":{"cpu":null}}}}"#);
    assert!(removed.contains("spec.resources.limits[cpu]: Forbidden: resource limits cannot be removed"), "{removed}");
    assert_eq!(pod_cgroup(&d, "rz-pod"), resized, "nothing changed");
}
