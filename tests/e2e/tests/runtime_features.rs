//! What a pod asks of the container runtime's features. On containerd 1.6 (which reports none in
//! its CRI `Status`): a recursive read-only mount `IfPossible` is plainly read-only, as the
//! kubelet makes it there, and one `Enabled` fails its container with the kubelet's
//! `CreateContainerConfigError`; features the runtime lacks are refused by name before
//! anything starts. On containerd 2 (which reports recursive read-only mounts for its runc
//! handlers), both are read-only all the way down.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;
use std::process::Command;

const BUSYBOX: &str = "localhost/busybox:1.36";

/// A hostPath directory with a tmpfs mounted inside it, unmounted and removed at the end.
struct NestedMount(std::path::PathBuf);

impl NestedMount {
    fn new(tag: &str) -> NestedMount {
        let dir = std::env::temp_dir().join(format!("podwright-e2e-{tag}-{}", std::process::id()));
        let sub = dir.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        let ok = Command::new("mount").args(["-t", "tmpfs", "tmpfs"]).arg(&sub).status().unwrap().success();
        assert!(ok, "mount a tmpfs on {}", sub.display());
        NestedMount(dir)
    }
}

impl Drop for NestedMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.join("sub")).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn if_possible_is_plainly_read_only_where_the_runtime_cannot_recurse() {
    // Read-only at the top, and not below: containerd 1.6 makes no recursive read-only mounts.
    let (written, status) = write_under("IfPossible", &[]);
    assert_eq!(written, ["top read-only", "sub/inner written"]);
    // The status says so, as the kubelet's does; containerd 1.6 reports no user.
    let mounts =
        serde_json::json!([{"name": "v", "mountPath": "/v", "readOnly": true, "recursiveReadOnly": "Disabled"}]);
    assert_eq!(status["volumeMounts"], mounts, "{status}");
    assert!(status.get("user").is_none(), "{status}");
}

/// A pod whose container tries to write at the top of a read-only hostPath mount and in a
/// mount below it, the mount's `recursiveReadOnly` set to `mode`, run with `extra` arguments:
/// what it could write, and the container's status.
fn write_under(mode: &str, extra: &[&str]) -> (Vec<String>, serde_json::Value) {
    let tag = format!("rro-{}-{}", mode.to_lowercase(), if extra.is_empty() { "1-6" } else { "2" });
    let dir = NestedMount::new(&tag);
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  volumes: [{{name: v, hostPath: {{path: {path}, type: Directory}}}}]
  containers:
  - name: write
    image: {BUSYBOX}
    command: [sh, -c, 'for f in top sub/inner; do touch /v/$f 2>/dev/null && echo $f written || echo $f read-only; done']
    volumeMounts: [{{name: v, mountPath: /v, readOnly: true, recursiveReadOnly: {mode}}}]
"#,
        name = pod_name(&tag),
        path = dir.0.display()
    );
    let o = run_manifest(&manifest, extra);
    o.assert_code(0);
    (o.output_of("write"), container_status(&o.single_pod(), "write").clone())
}

/// What containerd 2 reports of a container on its runc handler: its mounts recursively
/// read-only, and the user its process runs as (busybox's root).
fn assert_recursive_status(status: &serde_json::Value) {
    let mounts =
        serde_json::json!([{"name": "v", "mountPath": "/v", "readOnly": true, "recursiveReadOnly": "Enabled"}]);
    assert_eq!(status["volumeMounts"], mounts, "{status}");
    assert_eq!(status["user"]["linux"]["uid"], 0, "{status}");
    assert_eq!(status["user"]["linux"]["gid"], 0, "{status}");
}

#[test]
fn enabled_is_read_only_all_the_way_down_where_the_runtime_recurses() {
    let (written, status) = write_under("Enabled", &["--root-dir", containerd_2_root()]);
    assert_eq!(written, ["top read-only", "sub/inner read-only"]);
    assert_recursive_status(&status);
}

#[test]
fn if_possible_is_read_only_all_the_way_down_where_the_runtime_recurses() {
    let (written, status) = write_under("IfPossible", &["--root-dir", containerd_2_root()]);
    assert_eq!(written, ["top read-only", "sub/inner read-only"]);
    assert_recursive_status(&status);
}

#[test]
fn enabled_fails_the_container_where_the_runtime_cannot_recurse() {
    let dir = NestedMount::new("rro-enabled");
    let name = pod_name("rro-enabled");
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  volumes: [{{name: v, hostPath: {{path: {path}, type: Directory}}}}]
  containers:
  - name: app
    image: {BUSYBOX}
    command: [ls, /v]
    volumeMounts: [{{name: v, mountPath: /v, readOnly: true, recursiveReadOnly: Enabled}}]
"#,
        path = dir.0.display()
    );
    let o = run_manifest(&manifest, &["--timeout", "3"]);
    let pod = o.single_pod();
    let waiting = &container_status(&pod, "app")["state"]["waiting"];
    assert_eq!(waiting["reason"], "CreateContainerConfigError", "{}", o.context());
    let message = "failed to resolve recursive read-only mode: volume \"v\" requested recursive read-only mode, but it is not supported by the runtime";
    assert_eq!(waiting["message"], message, "{}", o.context());
    let failed = o.events_with_reason(&name, "spec.containers{app}", "Failed");
    assert!(failed.iter().any(|e| e["message"] == format!("Error: {message}").as_str()), "{}", o.context());
    assert!(o.output_of("app").is_empty(), "the container never ran\n{}", o.context());
    // The kubelet's status resolves the mode it could not honour to Disabled.
    let mounts = &container_status(&pod, "app")["volumeMounts"];
    assert_eq!(mounts[0]["recursiveReadOnly"], "Disabled", "{}", o.context());
}

#[test]
fn features_the_runtime_lacks_are_refused_by_name() {
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  hostUsers: false
  containers:
  - name: app
    image: {BUSYBOX}
    lifecycle: {{stopSignal: SIGUSR1}}
"#,
        name = pod_name("lacks")
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(2);
    let lacks = |what: &str| format!("needs {what} from the container runtime, which podwright does not ask of it yet");
    assert!(o.stderr.contains(&lacks("stop signals")), "{}", o.context());
    assert!(o.stderr.contains(&lacks("user namespaces")), "{}", o.context());
}

/// A pod that mounts the busybox image as a volume and looks into it.
fn image_volume_pod(name: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  volumes: [{{name: tools, image: {{reference: "{BUSYBOX}"}}}}]
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'ls /tools/bin/busybox; touch /tools/x 2>/dev/null && echo written || echo read-only']
    volumeMounts: [{{name: tools, mountPath: /tools}}]
"#
    )
}

#[test]
fn an_image_volume_is_the_image_read_only_where_the_runtime_mounts_images() {
    let name = pod_name("image-volume-2");
    let o = run_manifest(&image_volume_pod(&name), &["--root-dir", containerd_2_root()]);
    o.assert_code(0);
    assert_eq!(o.output_of("app"), ["/tools/bin/busybox", "read-only"], "{}", o.context());
    // Its image was made sure of as the container's is, with the container's events (the same
    // image here: one event, counted twice).
    let pulled = o.events_with_reason(&name, "spec.containers{app}", "Pulled");
    let count: i64 = pulled.iter().map(|e| e["count"].as_i64().unwrap_or(1)).sum();
    assert_eq!(count, 2, "the container's image and the volume's\n{}", o.context());
}

#[test]
fn an_image_volume_fails_the_pod_before_it_starts_where_the_runtime_cannot_mount_images() {
    let name = pod_name("image-volume-1-6");
    let o = run_manifest(&image_volume_pod(&name), &[]);
    let pod = o.single_pod();
    assert_eq!(pod["status"]["phase"], "Failed", "{}", o.context());
    assert_eq!(pod["status"]["reason"], "FailedCreatePodSandBox", "{}", o.context());
    let message = pod["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Failed to create pod sandbox: containerd 1.6")
            && message.ends_with("cannot mount image volumes (containerd 2.1 or later and CRI-O 1.31 or later can)"),
        "{}",
        o.context()
    );
    assert!(o.output_of("app").is_empty(), "the container never ran\n{}", o.context());
}
