//! The security context seen from inside containers on the embedded containerd: users and
//! groups, a read-only root, a dropped capability, no_new_privs and seccomp, a shared process
//! namespace, and `runAsNonRoot` refused for an image that runs as root, with the kubelet's
//! reason and message.
// Tests of the real binary: real timeouts and timings.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;

const BUSYBOX: &str = "localhost/busybox:1.36";

/// One run of two pods: the first's containers each report what they are allowed (the pod's
/// user, unless the container names its own), the second's see each other's processes. (A pod
/// `runAsGroup` without a `runAsUser` fails its sandbox, as with the kubelet: the CRI says the
/// runtime must refuse a group without a user.)
#[test]
fn users_groups_read_only_root_capabilities_and_a_shared_process_namespace() {
    let pod_name = pod_name("e2e-secctx");
    let shared = format!("{pod_name}-shared");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {pod_name}}}
spec:
  restartPolicy: Never
  securityContext:
    runAsUser: 1000
    runAsGroup: 3000
    supplementalGroups: [4000]
    seccompProfile: {{type: RuntimeDefault}}
  containers:
  - name: ids
    image: {BUSYBOX}
    command: [sh, -c, "id; grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status"]
    securityContext: {{allowPrivilegeEscalation: false}}
  - name: readonly
    image: {BUSYBOX}
    command: [sh, -c, "touch /written 2>&1; echo rc=$?"]
    securityContext: {{runAsUser: 0, readOnlyRootFilesystem: true}}
  - name: nochown
    image: {BUSYBOX}
    command: [sh, -c, "id -u; touch /tmp/f; chown 1 /tmp/f 2>&1; echo rc=$?; grep -E '^Seccomp:' /proc/self/status"]
    securityContext: {{runAsUser: 0, capabilities: {{drop: [CHOWN]}}, seccompProfile: {{type: Unconfined}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: {shared}}}
spec:
  restartPolicy: Never
  shareProcessNamespace: true
  containers:
  - name: sleeper
    image: {BUSYBOX}
    command: [sleep, "3"]
  - name: looker
    image: {BUSYBOX}
    command: [sh, -c, "for i in 1 2 3 4 5 6 7 8 9 10; do ps -o args | grep -q '^sleep 3' && break; sleep 0.2; done; ps -o args"]
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);

    let ids = o.output_of("ids");
    assert!(ids.first().is_some_and(|l| l.starts_with("uid=1000 gid=3000 ") && l.contains("4000")), "{}", o.context());
    assert!(ids.contains(&"NoNewPrivs:\t1".to_string()), "{}", o.context());
    assert!(ids.contains(&"Seccomp:\t2".to_string()), "RuntimeDefault from the pod filters\n{}", o.context());

    let readonly = o.output_of("readonly");
    assert_eq!(readonly, ["touch: /written: Read-only file system", "rc=1"], "{}", o.context());

    let nochown = o.output_of("nochown");
    assert_eq!(
        nochown,
        ["0", "chown: /tmp/f: Operation not permitted", "rc=1", "Seccomp:\t0"],
        "root without CAP_CHOWN, unconfined by the container's own profile\n{}",
        o.context()
    );

    let looker = o.output_of("looker");
    assert!(looker.iter().any(|l| l == "sleep 3"), "the other container's process is visible\n{}", o.context());
}

/// `runAsNonRoot` with an image whose user is root: the container is never created, waiting
/// with the kubelet's `CreateContainerConfigError` and message.
#[test]
fn run_as_non_root_refuses_an_image_that_runs_as_root() {
    let pod_name = pod_name("e2e-nonroot");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {pod_name}}}
spec:
  restartPolicy: Never
  securityContext: {{runAsNonRoot: true}}
  containers:
  - name: app
    image: {BUSYBOX}
    command: [id]
"#
    );
    let o = run_manifest(&manifest, &["--timeout", "3"]);
    let pod = o.single_pod();
    let waiting = &container_status(&pod, "app")["state"]["waiting"];
    assert_eq!(waiting["reason"], "CreateContainerConfigError", "{}", o.context());
    let message = format!(
        "container has runAsNonRoot and image will run as root (pod: \"{pod_name}_default({})\", container: app)",
        uid(&pod)
    );
    assert_eq!(waiting["message"], message.as_str(), "{}", o.context());
    let failed = o.events_with_reason(&pod_name, "spec.containers{app}", "Failed");
    assert!(failed.iter().any(|e| e["message"] == format!("Error: {message}").as_str()), "{}", o.context());
    assert!(o.output_of("app").is_empty(), "the container never ran\n{}", o.context());
}

/// `hostPID` and `hostIPC` put the container in the node's namespaces (it sees the node's first
/// process and shares its IPC namespace); `privileged` may mount.
#[test]
fn host_namespaces_and_a_privileged_container() {
    let pod_name = pod_name("e2e-hostns");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {pod_name}}}
spec:
  restartPolicy: Never
  hostPID: true
  hostIPC: true
  containers:
  - name: host
    image: {BUSYBOX}
    command: [sh, -c, "cat /proc/1/comm; readlink /proc/self/ns/ipc"]
  - name: privileged
    image: {BUSYBOX}
    command: [sh, -c, "mkdir /m && mount -t tmpfs none /m && echo mounted"]
    securityContext: {{privileged: true}}
  - name: unprivileged
    image: {BUSYBOX}
    command: [sh, -c, "mkdir /m && mount -t tmpfs none /m 2>&1; echo rc=$?"]
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    let node_init = std::fs::read_to_string("/proc/1/comm").expect("the node's first process");
    let node_ipc = std::fs::read_link("/proc/self/ns/ipc").expect("the node's IPC namespace");
    assert_eq!(
        o.output_of("host"),
        [node_init.trim().to_string(), node_ipc.to_string_lossy().into_owned()],
        "{}",
        o.context()
    );
    assert_eq!(o.output_of("privileged"), ["mounted"], "{}", o.context());
    assert_eq!(o.output_of("unprivileged"), ["mount: permission denied (are you root?)", "rc=1"], "{}", o.context());
}
