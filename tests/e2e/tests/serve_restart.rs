//! `podwright serve` killed with SIGKILL and started again on the same root: the pods are found
//! in its store and their containers in containerd, and go on where they were. Init containers
//! that completed in the live sandbox never run again, running containers keep their IDs and
//! restart counts, a Ready container does not flap, and a pod whose sandbox died meanwhile runs
//! every init container again.

// Real waits against a real daemon.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::serve::{Daemon, text};
use podwright_e2e::{Manifest, containers_with_label_at};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const IMAGE: &str = "localhost/busybox:1.36";

/// Two init containers that log each run into the emptyDir `work`; the second waits for the
/// file `go` there, which the test writes from the host. The app has a slow readiness probe, so
/// that a readiness forgotten across a restart would show for many seconds.
fn pod_yaml(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: work
    emptyDir: {{}}
  initContainers:
  - name: first
    image: {IMAGE}
    command: ['sh', '-c', 'echo run >> /work/first']
    volumeMounts: [{{name: work, mountPath: /work}}]
  - name: second
    image: {IMAGE}
    command: ['sh', '-c', 'echo run >> /work/second; until [ -f /work/go ]; do sleep 0.2; done']
    volumeMounts: [{{name: work, mountPath: /work}}]
  containers:
  - name: app
    image: {IMAGE}
    command: ['sleep', '3600']
    readinessProbe:
      exec: {{command: ['true']}}
      periodSeconds: 60
"#
    )
}

fn jsonpath(d: &Daemon, name: &str, path: &str) -> String {
    d.ok(&["get", "pod", name, "-o", &format!("jsonpath={path}")])
}

fn uid_of(d: &Daemon, name: &str) -> String {
    jsonpath(d, name, "{.metadata.uid}")
}

/// The pod's emptyDir `work` on the host.
fn work_dir(d: &Daemon, uid: &str) -> PathBuf {
    d.root.join("pods").join(uid).join("volumes/kubernetes.io~empty-dir/work")
}

/// How many times an init container has run, from the lines it appended.
fn runs(work: &std::path::Path, container: &str) -> usize {
    std::fs::read_to_string(work.join(container)).map(|s| s.lines().count()).unwrap_or(0)
}

fn status_column(d: &Daemon, name: &str) -> String {
    let out = text(&d.kubectl(None, &["get", "pod", name, "--no-headers"]).stdout);
    out.split_whitespace().nth(2).unwrap_or_default().to_string()
}

/// Starts the pod and waits until its second init container runs.
fn start_in_init(d: &Daemon, name: &str) -> (String, PathBuf) {
    let m = Manifest::new(&pod_yaml(name));
    d.ok(&["create", "-f", m.path_str()]);
    d.wait_for(&["get", "pod", name, "--no-headers"], Duration::from_secs(30), |o| o.contains("Init:1/2"));
    let uid = uid_of(d, name);
    let work = work_dir(d, &uid);
    let start = Instant::now();
    while runs(&work, "second") == 0 {
        assert!(start.elapsed() < Duration::from_secs(20), "the second init container never ran");
        std::thread::sleep(Duration::from_millis(100));
    }
    (uid, work)
}

fn wait_running(d: &Daemon, name: &str) {
    d.wait_for(&["get", "pod", name, "--no-headers"], Duration::from_secs(30), |o| o.contains("1/1   Running"));
}

#[test]
fn sigkill_during_init_goes_on_without_running_a_completed_init_container_again() {
    let mut d = Daemon::start();
    let (uid, work) = start_in_init(&d, "crash-in-init");
    let first_id = jsonpath(&d, "crash-in-init", "{.status.initContainerStatuses[0].containerID}");
    let second_id = jsonpath(&d, "crash-in-init", "{.status.initContainerStatuses[1].containerID}");
    let start_time = jsonpath(&d, "crash-in-init", "{.status.startTime}");

    d.crash_and_restart();
    assert_eq!(uid_of(&d, "crash-in-init"), uid, "the pod is the same object after the restart");
    assert_eq!(status_column(&d, "crash-in-init"), "Init:1/2");
    std::fs::write(work.join("go"), "").unwrap();
    wait_running(&d, "crash-in-init");

    assert_eq!(runs(&work, "first"), 1, "the completed init container ran again");
    assert_eq!(runs(&work, "second"), 1, "the running init container was started twice");
    let ids = jsonpath(&d, "crash-in-init", "{.status.initContainerStatuses[*].containerID}");
    assert_eq!(ids, format!("{first_id} {second_id}"), "init containers were replaced");
    let restarts = jsonpath(&d, "crash-in-init", "{.status.initContainerStatuses[*].restartCount}");
    assert_eq!(restarts, "0 0");
    assert_eq!(jsonpath(&d, "crash-in-init", "{.status.startTime}"), start_time);
}

#[test]
fn sigkill_when_running_keeps_the_containers_their_restart_counts_and_ready() {
    let mut d = Daemon::start();
    // Another daemon's pod on the same containerd: not the restarted one's to remove.
    let other = Daemon::start();
    let (_, other_work) = start_in_init(&other, "bystander");
    std::fs::write(other_work.join("go"), "").unwrap();
    let (_, work) = start_in_init(&d, "crash-steady");
    std::fs::write(work.join("go"), "").unwrap();
    wait_running(&d, "crash-steady");
    wait_running(&other, "bystander");
    let bystander = jsonpath(&other, "bystander", "{.status.containerStatuses[0].containerID}");
    let ids = "{.status.containerStatuses[*].containerID}";
    let before = jsonpath(&d, "crash-steady", ids);
    let ready_since = jsonpath(&d, "crash-steady", "{.status.conditions[?(@.type==\"Ready\")].lastTransitionTime}");

    d.crash_and_restart();
    // The readiness probe runs once a minute: a readiness forgotten by the restart would show
    // as not ready for that long.
    let watch_until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < watch_until {
        let ready = jsonpath(&d, "crash-steady", "{.status.containerStatuses[0].ready}");
        assert_eq!(ready, "true", "the app flapped to not ready after the restart\n{}", d.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(jsonpath(&d, "crash-steady", ids), before, "containers were replaced");
    assert_eq!(jsonpath(&d, "crash-steady", "{.status.containerStatuses[0].restartCount}"), "0");
    let ready_now = jsonpath(&d, "crash-steady", "{.status.conditions[?(@.type==\"Ready\")].lastTransitionTime}");
    assert_eq!(ready_now, ready_since, "the Ready condition changed");
    assert_eq!((runs(&work, "first"), runs(&work, "second")), (1, 1));
    let still = jsonpath(&other, "bystander", "{.status.containerStatuses[0].containerID}");
    assert_eq!(still, bystander, "the restarted daemon removed another daemon's pod");
    assert_eq!(status_column(&other, "bystander"), "Running");
}

#[test]
fn a_sandbox_that_died_while_podwright_was_down_runs_every_init_container_again() {
    let mut d = Daemon::start();
    let (uid, work) = start_in_init(&d, "crash-sandbox");
    std::fs::write(work.join("go"), "").unwrap();
    wait_running(&d, "crash-sandbox");
    let app_before = jsonpath(&d, "crash-sandbox", "{.status.containerStatuses[0].containerID}");
    // The sandbox's pause process dies while podwright is down; the go file stays, so the
    // second init container passes at once this time.
    let sandbox = sandbox_of(&d, &uid);
    d.crash_and_restart();
    kill_task(&d, &sandbox);
    let start = Instant::now();
    while runs(&work, "second") < 2 {
        assert!(start.elapsed() < Duration::from_secs(30), "the init containers never ran again\n{}", d.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_running(&d, "crash-sandbox");
    let events = || d.ok(&["get", "events", "--sort-by=.lastTimestamp"]);
    assert_eq!((runs(&work, "first"), runs(&work, "second")), (2, 2), "every init container once more\n{}", events());
    let app_after = jsonpath(&d, "crash-sandbox", "{.status.containerStatuses[0].containerID}");
    assert_ne!(app_after, app_before, "the app runs in the new sandbox");
}

/// The ID of the pod's sandbox: a containerd container with the pod's uid and no container name.
fn sandbox_of(d: &Daemon, uid: &str) -> String {
    let socket = d.endpoint().trim_start_matches("unix://");
    let ids = containers_with_label_at(Path::new(socket), "io.kubernetes.pod.uid", uid);
    let sandbox = ids.into_iter().find(|id| {
        let info = Command::new("ctr").args(["-a", socket, "-n", "k8s.io", "containers", "info", id]).output();
        info.is_ok_and(|o| !text(&o.stdout).contains("io.kubernetes.container.name"))
    });
    sandbox.expect("the pod has a sandbox")
}

fn kill_task(d: &Daemon, id: &str) {
    let socket = d.endpoint().trim_start_matches("unix://");
    let out = Command::new("ctr")
        .args(["-a", socket, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id])
        .output()
        .expect("ctr runs");
    assert!(out.status.success(), "ctr tasks kill {id}: {}", text(&out.stderr));
}

#[test]
fn the_embedded_containerd_killed_under_a_running_pod_is_started_again_and_the_pod_goes_on() {
    let d = Daemon::start_embedded();
    let m = Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: under\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: {IMAGE}\n    command: ['sh', '-c', 'trap \"exit 0\" TERM; sleep 3600 & wait']\n"
    ));
    d.ok(&["create", "-f", m.path_str()]);
    wait_running(&d, "under");
    let id = jsonpath(&d, "under", "{.status.containerStatuses[0].containerID}");
    let id = id.trim_start_matches("containerd://");
    let socket = d.endpoint().trim_start_matches("unix://").to_string();
    let tasks =
        text(&Command::new("ctr").args(["-a", &socket, "-n", "k8s.io", "tasks", "ls"]).output().unwrap().stdout);
    let app_pid: i32 = tasks
        .lines()
        .find(|l| l.starts_with(id))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|p| p.parse().ok())
        .expect("the app's task");
    let pid_file = d.root.join("containerd/containerd.pid");
    let containerd: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();

    // containerd dies, and the app dies while it is down: the exit is learnt once containerd is
    // back (the shim kept it), and the container restarted as its policy says.
    // SAFETY: kill(2) on processes this test's daemon started.
    unsafe {
        libc::kill(containerd, libc::SIGKILL);
        libc::kill(app_pid, libc::SIGKILL);
    }
    let out = d.wait_for(&["get", "pod", "under", "--no-headers"], Duration::from_secs(30), |o| {
        o.contains("1/1   Running   1 (")
    });
    assert!(out.contains("Running"), "{out}");
    let again: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    assert_ne!(again, containerd, "a new containerd runs");
    let last = jsonpath(&d, "under", "{.status.containerStatuses[0].lastState.terminated.exitCode}");
    assert_eq!(last, "137", "the exit during the outage, with its code");
    let restarted = jsonpath(&d, "under", "{.status.containerStatuses[0].containerID}");
    assert_ne!(restarted.trim_start_matches("containerd://"), id);
}
