//! `podwright runtime clean`: what a podwright killed mid-run leaves in its containerd is
//! removed (containers, sandboxes, the pod's directory and what is mounted there). On its own
//! embedded containerd (`$PODWRIGHT_TEST_ROOT-clean`), since cleaning removes every pod in it.

use podwright_e2e::{Manifest, Running, binary, containers_with_label_at, podwright, run_args, test_root};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn clean_root() -> PathBuf {
    PathBuf::from(format!("{}-clean", test_root().display()))
}

/// Stops this test's containerd however the test ends.
struct StopRuntime(PathBuf);

impl Drop for StopRuntime {
    fn drop(&mut self) {
        let _ = std::process::Command::new(binary()).arg("runtime").arg("stop").arg("--root-dir").arg(&self.0).output();
    }
}

#[test]
fn clean_removes_what_a_killed_run_left() {
    let root = clean_root();
    let root_str = root.to_str().unwrap();
    let _stop = StopRuntime(root.clone());
    // From an empty runtime, whatever an interrupted earlier run of this test left.
    podwright(&["runtime", "start", "--root-dir", root_str]).assert_code(0);
    podwright(&["runtime", "clean", "--root-dir", root_str]).assert_code(0);
    let m = Manifest::new(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: left-behind}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - {name: init, image: localhost/busybox:1.36, command: [sh, -c, "true"]}
  containers:
  - name: app
    image: localhost/busybox:1.36
    command: [sleep, "3600"]
    volumeMounts: [{name: mem, mountPath: /mem}]
  volumes: [{name: mem, emptyDir: {medium: Memory}}]
"#,
    );
    let mut run = Running::spawn(&run_args(m.path_str(), &["--root-dir", root_str]), None);
    assert!(run.wait_for_stderr("Running", Duration::from_secs(60)), "never Running:\n{}", run.stderr_so_far());
    // SIGKILL: no chance to remove anything.
    run.signal(libc::SIGKILL);
    drop(run);

    let sock = root.join("containerd/containerd.sock");
    let left = containers_with_label_at(&sock, "io.kubernetes.pod.name", "left-behind");
    assert_eq!(left.len(), 3, "sandbox, init and app container should be left: {left:?}");
    let pod_dirs = || std::fs::read_dir(root.join("pods")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(pod_dirs(), 1, "the pod's directory should be left");
    // The memory emptyDir's tmpfs, which nothing of the killed podwright remembers.
    let pods = root.join("pods");
    let mounted = || {
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        table.lines().filter_map(|l| l.split(' ').nth(4)).filter(|p| Path::new(p).starts_with(&pods)).count()
    };
    assert_eq!(mounted(), 1, "the tmpfs should be left mounted");

    let o = podwright(&["runtime", "clean", "--root-dir", root_str]);
    o.assert_code(0);
    assert!(o.stdout.contains("removed 1 pods"), "{}", o.context());
    let left = containers_with_label_at(&sock, "io.kubernetes.pod.name", "left-behind");
    assert!(left.is_empty(), "left after clean: {left:?}");
    assert_eq!(pod_dirs(), 0, "the pod's directory is left after clean");
    assert_eq!(mounted(), 0, "the tmpfs is left mounted after clean");

    // Nothing left to do; a stopped runtime is named, not started.
    podwright(&["runtime", "clean", "--root-dir", root_str]).assert_code(0);
    podwright(&["runtime", "stop", "--root-dir", root_str]).assert_code(0);
    let o = podwright(&["runtime", "clean", "--root-dir", root_str]);
    o.assert_code(3);
    assert!(o.stderr.contains("podwright runtime start"), "{}", o.context());
}
