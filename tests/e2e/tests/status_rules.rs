//! Issue 23's status rules on real containerd, each failing without its change: a 1.37
//! kubelet's `observedGeneration` after a spec update through `serve` (read back with kubectl),
//! a container in its crash back-off when the active deadline passes, the image back-off's
//! reason and message within the back-off, and the IP of a finished pod in `run -o json`.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::registry::Registry;
use podwright_e2e::serve::Daemon;
use podwright_e2e::*;
use std::time::Duration;

const BUSYBOX: &str = "localhost/busybox:1.36";
const OTHER: &str = "localhost/busybox-stopsignal:1.36";

/// `generation` and `observedGeneration` (of the status and of each kubelet condition), as
/// kubectl reads them.
fn generations(d: &Daemon, name: &str) -> String {
    d.ok(&[
        "get",
        "pod",
        name,
        "-o",
        "jsonpath={.metadata.generation} {.status.observedGeneration} {.status.conditions[*].observedGeneration}",
    ])
}

#[test]
fn observed_generation_follows_a_spec_update_through_serve() {
    let d = Daemon::start();
    let m = Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: gen\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: ['sleep', '3600']\n"
    ));
    d.ok(&["create", "-f", m.path_str()]);
    d.wait_for(&["get", "pod", "gen", "--no-headers"], Duration::from_secs(30), |o| o.contains("Running"));
    d.wait_for(&["get", "pod", "gen", "-o", "jsonpath={.status.observedGeneration}"], Duration::from_secs(10), |o| {
        o == "1"
    });
    assert_eq!(generations(&d, "gen"), "1 1 1 1 1 1 1");

    // A new image is a spec change: generation 2, observed once the node has acted on it.
    d.ok(&["set", "image", "pod/gen", &format!("app={OTHER}")]);
    d.wait_for(
        &["get", "pod", "gen", "-o", "jsonpath={.status.containerStatuses[0].image} {.status.observedGeneration}"],
        Duration::from_secs(30),
        |o| o == format!("{OTHER} 2"),
    );
    assert_eq!(generations(&d, "gen"), "2 2 2 2 2 2 2");

    // Metadata is no spec change.
    d.ok(&["label", "pod", "gen", "tier=web"]);
    assert!(generations(&d, "gen").starts_with("2 2 "));

    // A graceful deletion bumps the generation, and the node stops the pod at that one.
    // (`sleep` ignores TERM: the pod takes its 5 s of grace to stop.)
    d.ok(&["delete", "pod", "gen", "--grace-period=5", "--wait=false"]);
    d.wait_for(&["get", "pod", "gen", "-o", "jsonpath={.status.observedGeneration}"], Duration::from_secs(4), |o| {
        o == "3"
    });
    d.ok(&["wait", "--for=delete", "pod/gen", "--timeout=30s"]);
}

#[test]
fn the_deadline_during_a_crash_loop_ends_the_container_lost_with_its_last_exit() {
    let pod = pod_name("deadline-crash-loop");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Always
  activeDeadlineSeconds: 15
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: {BUSYBOX}
    command: ["sh", "-c", "exit 3"]
"#
        ),
        &[],
    );
    o.assert_code(1);
    // Started at +0, again at once, then after 10 s; at +15 it waits out a 20 s back-off.
    let statuses = o.statuses(&pod);
    assert!(statuses.iter().any(|s| s == "CrashLoopBackOff"), "{statuses:?}\n{}", o.context());
    let p = o.pod(&pod);
    assert_eq!((phase(&p), p["status"]["reason"].as_str()), ("Failed", Some("DeadlineExceeded")), "{}", o.context());
    let app = container_status(&p, "app");
    let state = &app["state"]["terminated"];
    assert_eq!(
        (state["reason"].as_str(), state["exitCode"].as_i64()),
        (Some("ContainerStatusUnknown"), Some(137)),
        "{app}"
    );
    assert_eq!(state["message"], "The container could not be located when the pod was terminated");
    let last = &app["lastState"]["terminated"];
    assert_eq!((last["reason"].as_str(), last["exitCode"].as_i64()), (Some("Error"), Some(3)), "{app}");
    assert_eq!(app["restartCount"], 2, "{app}");
    assert_nothing_left(&p);
}

#[test]
fn image_pull_back_off_shows_within_the_back_off_with_the_last_pull_error() {
    let registry = Registry::start();
    let image = registry.image("missing/busybox:1.36");
    let pod = pod_name("pull-backoff-message");
    // Pulls at +0 and +10 fail; the worker looks again at +20, inside the 20 s back-off.
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: {image}
    imagePullPolicy: IfNotPresent
"#
        ),
        &["--timeout", "25"],
    );
    o.assert_code(124);
    let statuses = o.statuses(&pod);
    assert!(is_subsequence(&statuses, &["ErrImagePull", "ImagePullBackOff"]), "{statuses:?}\n{}", o.context());
    let p = o.pod(&pod);
    let waiting = &container_status(&p, "c")["state"]["waiting"];
    assert_eq!(waiting["reason"], "ImagePullBackOff", "{}", o.context());
    let message = waiting["message"].as_str().unwrap_or_default();
    let failed = o.events_with_reason(&pod, "spec.containers{c}", "Failed");
    let error = failed
        .iter()
        .filter_map(|e| e["message"].as_str()?.strip_prefix(&format!("Failed to pull image \"{image}\": ")))
        .next_back()
        .unwrap_or_else(|| panic!("no pull failure\n{}", o.context()));
    assert_eq!(message, format!("Back-off pulling image \"{image}\": ErrImagePull: {error}"), "{}", o.context());
}

#[test]
fn a_finished_pod_keeps_its_ip_in_run_json() {
    let pod = pod_name("ip-kept");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: {BUSYBOX}
    command: ["sh", "-c", "sleep 1; echo done"]
"#
        ),
        &[],
    );
    o.assert_code(0);
    let p = o.pod(&pod);
    assert_eq!(phase(&p), "Succeeded", "{}", o.context());
    let ip = p["status"]["podIP"].as_str().unwrap_or_default();
    assert!(ip.parse::<std::net::IpAddr>().is_ok(), "podIP {ip:?}\n{}", o.context());
    assert_eq!(p["status"]["podIPs"], serde_json::json!([{"ip": ip}]), "{}", o.context());
    assert_nothing_left(&p);
}
