//! hostPath and emptyDir volumes for real, seen from inside the containers: every hostPath
//! type, a type check that fails (the kubelet's `FailedMount`) until the path is right, a memory
//! emptyDir on a tmpfs that goes with the pod, an emptyDir over its size limit that gets the pod
//! evicted, and mount propagation from the node.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;
use serde_json::Value;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const BUSYBOX: &str = "localhost/busybox:1.36";

/// A directory on the node for one test, removed (and unmounted) at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("podwright-e2e-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for m in mounts_under(&self.0).into_iter().rev() {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Mount points at or under `dir` in the node's mount table, in mount order.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    table
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(p.replace("\\040", " ")))
        .filter(|p| p.starts_with(dir))
        .collect()
}

fn mode(path: &str) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// A block device of the node, for the `BlockDevice` type.
fn block_device() -> String {
    std::fs::read_dir("/dev")
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.file_type().is_ok_and(|t| t.is_block_device()))
        .map(|e| e.path().to_str().unwrap().to_string())
        .expect("the node has no block device under /dev for the BlockDevice type")
}

fn run_cmd(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn warnings(o: &Outcome, reason: &str) -> Vec<Value> {
    o.events().into_iter().filter(|e| e["reason"] == reason).collect()
}

#[test]
fn hostpath_volumes_of_every_type_are_seen_from_inside() {
    let s = Scratch::new("hostpath-types");
    std::fs::create_dir(s.path("dir")).unwrap();
    std::fs::create_dir(s.path("plain")).unwrap();
    std::fs::write(s.path("file"), "from the node\n").unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(s.path("sock")).unwrap();
    let name = pod_name("hostpath-types");
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  containers:
  - name: look
    image: {BUSYBOX}
    command: [sh, -c, 'test -d /v/dir && test -d /v/dirc && test -f /v/file && cat /v/file && test -f /v/filec && test -S /v/sock && test -c /v/chr && test -b /v/blk && test -d /v/any && echo all types seen && echo written > /v/dirc/out']
    volumeMounts:
    - {{name: dir, mountPath: /v/dir}}
    - {{name: dirc, mountPath: /v/dirc}}
    - {{name: file, mountPath: /v/file, readOnly: true}}
    - {{name: filec, mountPath: /v/filec}}
    - {{name: sock, mountPath: /v/sock}}
    - {{name: chr, mountPath: /v/chr}}
    - {{name: blk, mountPath: /v/blk}}
    - {{name: any, mountPath: /v/any}}
  volumes:
  - {{name: dir, hostPath: {{path: {dir}, type: Directory}}}}
  - {{name: dirc, hostPath: {{path: {dirc}, type: DirectoryOrCreate}}}}
  - {{name: file, hostPath: {{path: {file}, type: File}}}}
  - {{name: filec, hostPath: {{path: {filec}, type: FileOrCreate}}}}
  - {{name: sock, hostPath: {{path: {sock}, type: Socket}}}}
  - {{name: chr, hostPath: {{path: /dev/null, type: CharDevice}}}}
  - {{name: blk, hostPath: {{path: {blk}, type: BlockDevice}}}}
  - {{name: any, hostPath: {{path: {any}, type: ""}}}}
"#,
        dir = s.path("dir"),
        dirc = s.path("made/deep"),
        file = s.path("file"),
        filec = s.path("made-file"),
        sock = s.path("sock"),
        blk = block_device(),
        any = s.path("plain"),
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    assert_eq!(o.output_of("look"), ["from the node", "all types seen"], "{}", o.context());
    // Made on the node by the type check, with the kubelet's modes (the umask applies, 022 here).
    assert_eq!((mode(&s.path("made")), mode(&s.path("made/deep"))), (0o755, 0o755));
    assert_eq!(mode(&s.path("made-file")), 0o644);
    assert_eq!(std::fs::read_to_string(s.path("made/deep/out")).unwrap(), "written\n");
    assert!(warnings(&o, "FailedMount").is_empty(), "{}", o.context());
    assert_nothing_left(&o.single_pod());
}

#[test]
fn a_hostpath_of_the_wrong_type_fails_to_mount_until_it_is_right() {
    let s = Scratch::new("hostpath-mismatch");
    let later = s.path("later");
    let name = pod_name("hostpath-mismatch");
    // The emptyDir is set up after the hostPath is checked: once its directory is there, the
    // check has failed once.
    let marker = format!("checked-{}", std::process::id());
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'test -d /data && echo mounted']
    volumeMounts: [{{name: data, mountPath: /data}}]
  volumes:
  - {{name: data, hostPath: {{path: {later}, type: Directory}}}}
  - {{name: {marker}, emptyDir: {{}}}}
"#
    );
    let m = Manifest::new(&manifest);
    let running = Running::spawn(&run_args(m.path_str(), &["--timeout", "60"]), None);
    let deadline = Instant::now() + Duration::from_secs(30);
    let checked = || {
        let pods = std::fs::read_dir(test_root().join("pods")).into_iter().flatten().filter_map(Result::ok);
        pods.into_iter().any(|p| p.path().join("volumes/kubernetes.io~empty-dir").join(&marker).exists())
    };
    while !checked() {
        assert!(Instant::now() < deadline, "the volumes were never set up:\n{}", running.stderr_so_far());
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::create_dir(&later).unwrap();
    let o = running.wait();
    o.assert_code(0);

    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Succeeded", "{}", o.context());
    assert_eq!(o.output_of("app"), ["mounted"]);
    let failed = warnings(&o, "FailedMount");
    assert!(!failed.is_empty(), "no FailedMount event\n{}", o.context());
    for e in &failed {
        assert_eq!(e["type"], "Warning", "{e}");
        assert_eq!(e["involvedObject"]["name"], name.as_str(), "{e}");
        assert_eq!(
            e["message"],
            format!(
                "MountVolume.SetUp failed for volume \"data\" : hostPath type check failed: {later} is not a directory"
            )
            .as_str(),
            "{e}"
        );
    }
    // Held in ContainerCreating meanwhile: nothing was created before the volume was right.
    let statuses = o.statuses(&name);
    assert!(statuses.iter().any(|s| s == "ContainerCreating"), "never ContainerCreating: {statuses:?}");
    let first_created = o.events().iter().position(|e| e["reason"] == "Created");
    let first_failed = o.events().iter().position(|e| e["reason"] == "FailedMount");
    assert!(first_failed < first_created, "{}", o.context());
}

#[test]
fn a_memory_emptydir_is_a_tmpfs_of_its_size_limit_and_goes_with_the_pod() {
    let name = pod_name("emptydir-memory");
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  containers:
  - name: mem
    image: {BUSYBOX}
    command: [sh, -c, 'grep " /mem " /proc/mounts; dd if=/dev/zero of=/mem/fill bs=1024 count=2048 2>&1 | grep -o "No space left on device"; ls -ld /mem | cut -c1-10']
    volumeMounts: [{{name: mem, mountPath: /mem}}]
  volumes:
  - {{name: mem, emptyDir: {{medium: Memory, sizeLimit: 1Mi}}}}
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    let out = o.output_of("mem");
    assert_eq!(out.len(), 3, "{}", o.context());
    assert!(out[0].starts_with("tmpfs /mem tmpfs rw,") && out[0].contains("size=1024k"), "{out:?}");
    // Writes past the limit fail, as with the kubelet's SizeMemoryBackedVolumes.
    assert_eq!(out[1], "No space left on device");
    // A tmpfs's own mode: world-writable and sticky.
    assert_eq!(out[2], "drwxrwxrwt");

    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Succeeded");
    let pod_dir = test_root().join("pods").join(uid(&pod));
    assert_eq!(mounts_under(&pod_dir), Vec::<PathBuf>::new(), "the tmpfs is left mounted");
    assert_nothing_left(&pod);
}

#[test]
fn an_emptydir_over_its_size_limit_gets_the_pod_evicted() {
    let name = pod_name("emptydir-limit");
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 30
  containers:
  - name: fill
    image: {BUSYBOX}
    command: [sh, -c, 'dd if=/dev/zero of=/cache/fill bs=1024 count=2048 2>/dev/null && echo filled && sleep 3600']
    volumeMounts: [{{name: cache, mountPath: /cache}}]
  volumes:
  - {{name: cache, emptyDir: {{sizeLimit: 1Mi}}}}
"#
    );
    let o = run_manifest(&manifest, &[]);
    // The pod failed: run says so.
    o.assert_code(1);
    assert_eq!(o.output_of("fill"), ["filled"]);
    let message = "Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". ";
    let pod = o.single_pod();
    assert_eq!(phase(&pod), "Failed", "{}", o.context());
    assert_eq!(pod["status"]["reason"], "Evicted");
    assert_eq!(pod["status"]["message"], message);
    // No DisruptionTarget condition: the kubelet's emptyDir eviction gives `evictPod` none
    // (only node-pressure evictions, preemption and node shutdown do).
    let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
    assert!(conditions.iter().all(|c| c["type"] != "DisruptionTarget"), "{conditions:?}");
    let evicted = warnings(&o, "Evicted");
    assert_eq!(evicted.len(), 1, "{}", o.context());
    assert_eq!((evicted[0]["type"].as_str(), evicted[0]["message"].as_str()), (Some("Warning"), Some(message)));
    assert_eq!(evicted[0]["involvedObject"]["fieldPath"], Value::Null, "about the pod: {}", evicted[0]);
    // Stopped, and not restarted under Always.
    let s = container_status(&pod, "fill");
    assert_eq!(s["state"]["terminated"]["reason"], "Error", "{s}");
    assert_eq!(s["restartCount"], 0, "{s}");
    assert_eq!(o.events_with_reason(&name, "spec.containers{fill}", "Killing").len(), 1, "{}", o.context());
    assert_nothing_left(&pod);
}

#[test]
fn mounts_propagate_from_the_node_into_host_to_container_mounts_only() {
    let s = Scratch::new("propagation");
    let prop = s.path("prop");
    std::fs::create_dir(&prop).unwrap();
    // A shared mount of the node's, as / is under systemd: the runtime accepts a
    // HostToContainer mount only from a shared or slave mount.
    run_cmd(Command::new("mount").args(["-t", "tmpfs", "tmpfs", &prop]));
    run_cmd(Command::new("mount").args(["--make-shared", &prop]));
    let name = pod_name("propagation");
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  containers:
  - name: follow
    image: {BUSYBOX}
    command: [sh, -c, 'until [ -e /prop/sub/marker ]; do sleep 0.2; done; echo seen from the node; touch /flags/seen']
    volumeMounts:
    - {{name: prop, mountPath: /prop, mountPropagation: HostToContainer}}
    - {{name: flags, mountPath: /flags}}
    - {{name: scratch, mountPath: /scratch, mountPropagation: HostToContainer}}
  - name: private
    image: {BUSYBOX}
    command: [sh, -c, 'until [ -e /flags/seen ]; do sleep 0.2; done; if [ -e /prop/sub/marker ]; then echo leaked; else echo private; fi']
    volumeMounts:
    - {{name: prop, mountPath: /prop, mountPropagation: None}}
    - {{name: flags, mountPath: /flags}}
  volumes:
  - {{name: prop, hostPath: {{path: {prop}, type: Directory}}}}
  - {{name: flags, emptyDir: {{}}}}
  - {{name: scratch, emptyDir: {{}}}}
"#
    );
    let m = Manifest::new(&manifest);
    let mut running = Running::spawn(&run_args(m.path_str(), &["--timeout", "60"]), None);
    assert!(
        running.wait_for_stderr(" Running ", Duration::from_secs(30)),
        "never Running:\n{}",
        running.stderr_so_far()
    );
    // Mounted on the node after the containers started.
    let sub = s.path("prop/sub");
    std::fs::create_dir(&sub).unwrap();
    run_cmd(Command::new("mount").args(["-t", "tmpfs", "tmpfs", &sub]));
    std::fs::write(format!("{sub}/marker"), "").unwrap();
    let o = running.wait();
    o.assert_code(0);
    assert_eq!(o.output_of("follow"), ["seen from the node"]);
    assert_eq!(o.output_of("private"), ["private"]);
    let pod = o.single_pod();
    let pod_dir = test_root().join("pods").join(uid(&pod));
    assert_eq!(mounts_under(&pod_dir), Vec::<PathBuf>::new(), "the shared emptyDir is left mounted");
    assert_nothing_left(&pod);
}

#[test]
fn a_memory_emptydir_without_a_size_limit_is_as_large_as_the_pods_memory_limit() {
    let name = pod_name("emptydir-pod-limit");
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  containers:
  - name: mem
    image: {BUSYBOX}
    command: [sh, -c, 'df -k /mem | tail -1 | tr -s " " | cut -d" " -f2']
    resources: {{limits: {{memory: 48Mi}}}}
    volumeMounts: [{{name: mem, mountPath: /mem}}]
  - name: other
    image: {BUSYBOX}
    command: ['true']
    resources: {{limits: {{memory: 16Mi}}}}
  volumes:
  - {{name: mem, emptyDir: {{medium: Memory}}}}
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    // The pod's limit, the sum of its containers': 64 MiB in 1 KiB blocks, where the kernel's
    // default would be half the node's memory.
    assert_eq!(o.output_of("mem"), ["65536"], "{}", o.context());
}

#[test]
fn a_missing_sub_path_is_made_with_the_volumes_mode() {
    let name = pod_name("subpath-mode");
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, 'stat -c %a /all/a /all/a/b /sub']
    volumeMounts:
    - {{name: scratch, mountPath: /all}}
    - {{name: scratch, mountPath: /sub, subPath: a/b}}
  volumes:
  - {{name: scratch, emptyDir: {{}}}}
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    // The emptyDir's own mode, 0777, whatever podwright's umask (SafeMakeDir).
    assert_eq!(o.output_of("app"), ["777", "777", "777"], "{}", o.context());
}
