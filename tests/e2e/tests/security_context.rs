//! The security context seen from inside containers on the embedded containerd: users and
//! groups, a read-only root, a dropped capability, no_new_privs and seccomp, a shared process
//! namespace, `fsGroup` owning the pod's volumes, safe sysctls set in the pod's namespaces, and,
//! with the kubelet's reasons and messages, `runAsNonRoot` refused for an image that runs as
//! root and an unsafe sysctl refused by the node.
// Tests of the real binary: real timeouts and timings.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;
use serde_json::Value;

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

/// SELinux options go to the runtime, as the kubelet passes them: on this host, without
/// SELinux, the pod runs as one without them (the conformance suite's EmptyDir pods set them).
#[test]
fn selinux_options_go_to_the_runtime() {
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  securityContext: {{seLinuxOptions: {{level: s0}}}}
  containers:
  - name: app
    image: {BUSYBOX}
    securityContext: {{seLinuxOptions: {{level: "s0:c1,c2", type: container_t}}}}
    command: [echo, labelled]
"#,
        name = pod_name("e2e-selinux")
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    assert_eq!(o.output_of("app"), ["labelled"], "{}", o.context());
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

/// `fsGroup`: the container runs with the group besides its own; a new emptyDir (on disk and in
/// memory) and a secret volume belong to it, directories with setgid so that what the
/// container writes belongs to it too, and a secret file of mode 0400 is readable by the group
/// (0440), so by a user who is not its owner. In a second pod, safe sysctls are set in the
/// pod's own namespaces, as the pod's processes read them.
#[test]
fn fs_group_owns_the_volumes_and_safe_sysctls_are_set() {
    let pod_name = pod_name("e2e-fsgroup");
    let sysctls = format!("{pod_name}-sysctls");
    let manifest = format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: {pod_name}}}
stringData: {{key: s3cret}}
---
apiVersion: v1
kind: Pod
metadata: {{name: {pod_name}}}
spec:
  restartPolicy: Never
  securityContext: {{runAsUser: 1000, fsGroup: 2000, fsGroupChangePolicy: OnRootMismatch}}
  volumes:
  - {{name: data, emptyDir: {{}}}}
  - {{name: mem, emptyDir: {{medium: Memory}}}}
  - {{name: secret, secret: {{secretName: {pod_name}, defaultMode: 0400}}}}
  containers:
  - name: app
    image: {BUSYBOX}
    volumeMounts:
    - {{name: data, mountPath: /data}}
    - {{name: mem, mountPath: /mem}}
    - {{name: secret, mountPath: /secret}}
    command:
    - sh
    - -c
    - |
      id -G
      stat -c '%g %a' /data
      stat -c '%g' /mem
      stat -L -c '%g %a' /secret/key
      cat /secret/key; echo
      echo hi > /data/f && stat -c '%g %u' /data/f
      mkdir /mem/d && stat -c '%g' /mem/d
---
apiVersion: v1
kind: Pod
metadata: {{name: {sysctls}}}
spec:
  restartPolicy: Never
  securityContext:
    sysctls:
    - {{name: kernel.shm_rmid_forced, value: "1"}}
    - {{name: net/ipv4/ip_local_port_range, value: "1024 2048"}}
  containers:
  - name: reader
    image: {BUSYBOX}
    command: [cat, /proc/sys/kernel/shm_rmid_forced, /proc/sys/net/ipv4/ip_local_port_range]
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    let app = o.output_of("app");
    assert!(
        app.first().is_some_and(|l| l.split(' ').any(|g| g == "2000")),
        "the fsGroup is a group of the container\n{}",
        o.context()
    );
    assert_eq!(
        &app[1..],
        ["2000 2777", "2000", "2000 440", "s3cret", "2000 1000", "2000"],
        "the volumes are the fsGroup's\n{}",
        o.context()
    );
    assert_eq!(o.output_of("reader"), ["1", "1024\t2048"], "{}", o.context());
}

/// A sysctl outside the kubelet's safe set: the node rejects the pod before anything of it is
/// made, with the kubelet's `SysctlForbidden` reason and message.
#[test]
fn an_unsafe_sysctl_is_forbidden_by_the_node() {
    let name = pod_name("e2e-sysctl-unsafe");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  securityContext:
    sysctls:
    - {{name: kernel.shm_rmid_forced, value: "1"}}
    - {{name: kernel.msgmax, value: "65536"}}
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["true"]
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(1);
    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Failed", "{}", o.context());
    assert_eq!(pod["status"]["reason"], "SysctlForbidden", "{}", o.context());
    let message = "forbidden sysctl: \"kernel.msgmax\" not allowlisted";
    assert_eq!(pod["status"]["message"], format!("Pod was rejected: {message}").as_str(), "{}", o.context());
    let of_pod = |e: &Value| e["involvedObject"]["name"] == name.as_str() && e["involvedObject"]["fieldPath"].is_null();
    let rejected: Vec<Value> =
        o.events().into_iter().filter(|e| of_pod(e) && e["reason"] == "SysctlForbidden").collect();
    assert_eq!(rejected.len(), 1, "{}", o.context());
    assert_eq!(rejected[0]["message"], message);
    assert_eq!(rejected[0]["type"], "Warning");
    assert!(o.events_with_reason(&name, "spec.containers{app}", "Created").is_empty(), "{}", o.context());
    assert_nothing_left(&pod);
}

/// The sysctls 1.37 added to the kubelet's safe set are admitted and set in the pod's network
/// namespace (this node's kernel isolates both).
#[test]
fn the_sysctls_safe_since_1_37_are_set() {
    let name = pod_name("e2e-sysctl-1-37");
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  securityContext:
    sysctls:
    - {{name: net.ipv4.tcp_notsent_lowat, value: "16384"}}
    - {{name: net.ipv4.tcp_slow_start_after_idle, value: "0"}}
  containers:
  - name: reader
    image: {BUSYBOX}
    command: [cat, /proc/sys/net/ipv4/tcp_notsent_lowat, /proc/sys/net/ipv4/tcp_slow_start_after_idle]
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    assert_eq!(o.output_of("reader"), ["16384", "0"], "{}", o.context());
}
