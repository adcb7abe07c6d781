//! Image garbage collection for real (issue 14, part 7): `podwright serve` on a containerd of
//! its own (it removes images, and the suite's shared store must keep its local images), told
//! to collect at 1 % usage down to 0 % with no minimum age. An image whose pod is gone is
//! removed right after the next pull; the image just pulled, the one in use and the sandbox
//! image stay; the Node's events say what was freed and that it was not enough.

// Real waits against a real daemon.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::registry::Registry;
use podwright_e2e::serve::{Daemon, text};
use podwright_e2e::{Manifest, containers_with_label_at};
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

/// A pod named `name` whose one container runs `command` from `image`.
fn pod(name: &str, image: &str, restart: &str, command: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  restartPolicy: {restart}\n  \
         terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {image}\n    command: {command}\n"
    )
}

/// The names of every image in the containerd at `endpoint` (`ctr images ls -q`).
fn images(endpoint: &str) -> Vec<String> {
    let socket = endpoint.strip_prefix("unix://").unwrap_or(endpoint);
    let out = Command::new("ctr")
        .args(["-a", socket, "-n", "k8s.io", "images", "ls", "-q"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run ctr (package containerd): {e}"));
    assert!(out.status.success(), "ctr images ls: {}", text(&out.stderr));
    text(&out.stdout).lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect()
}

fn has_image(endpoint: &str, image: &str) -> bool {
    images(endpoint).iter().any(|i| i == image)
}

fn phase(d: &Daemon, name: &str, wanted: &str) {
    let path = "jsonpath={.status.phase}";
    let got = d.wait_for(&["get", "pod", name, "-o", path], Duration::from_secs(60), |p| p == wanted);
    assert_eq!(got, wanted, "pod {name}:\n{}", d.log());
}

/// The Node's events with this reason.
fn node_events(d: &Daemon, reason: &str) -> Vec<Value> {
    let list: Value = serde_json::from_str(&d.ok(&["get", "events", "-o", "json"])).expect("events as JSON");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items.into_iter().filter(|e| e["involvedObject"]["kind"] == "Node" && e["reason"] == reason).collect()
}

#[test]
fn after_a_pull_the_image_of_a_gone_pod_is_removed_and_images_in_use_stay() {
    let registry = Registry::start();
    // Two images with different contents (so different ids), neither the sandbox image.
    let a = registry.push("busybox-stopsignal-1.36.tar", "gc/a:1");
    let b = registry.push("busybox-1.36.tar", "gc/b:1");
    let config = Manifest::new(
        "kind: KubeletConfiguration\nimageGCHighThresholdPercent: 1\nimageGCLowThresholdPercent: 0\nimageMinimumGCAge: 0s\n",
    );
    // Its own containerd, stopped when the daemon is dropped (also when the test fails).
    let d = Daemon::start_embedded_with(&["--config", config.path_str()]);
    let endpoint = d.endpoint().to_string();

    let first = Manifest::new(&pod("gc-a", &a, "Never", "[\"true\"]"));
    d.ok(&["apply", "-f", first.path_str()]);
    phase(&d, "gc-a", "Succeeded");
    // Collected right after its pull, but held, then used by the exited container.
    assert!(has_image(&endpoint, &a), "{:?}", images(&endpoint));
    let uid = d.ok(&["get", "pod", "gc-a", "-o", "jsonpath={.metadata.uid}"]);
    d.ok(&["delete", "pod", "gc-a"]);
    let socket = endpoint.strip_prefix("unix://").unwrap_or(&endpoint).to_string();
    let start = Instant::now();
    while !containers_with_label_at(std::path::Path::new(&socket), "io.kubernetes.pod.uid", &uid).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(30), "pod gc-a's containers were not removed");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Nothing collects before the next pull: the period is 5 minutes.
    assert!(has_image(&endpoint, &a), "{:?}", images(&endpoint));

    let second = Manifest::new(&pod("gc-b", &b, "Always", "[\"sleep\", \"3600\"]"));
    d.ok(&["apply", "-f", second.path_str()]);
    phase(&d, "gc-b", "Running");
    let start = Instant::now();
    while has_image(&endpoint, &a) {
        assert!(start.elapsed() < Duration::from_secs(30), "{a} was not removed: {:?}\n{}", images(&endpoint), d.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    let left = images(&endpoint);
    assert!(left.contains(&b), "the image in use stays: {left:?}");
    assert!(left.iter().any(|i| i == "localhost/pause:3.9"), "the sandbox image stays: {left:?}");

    let freed = node_events(&d, "ImageGarbageCollected");
    let freed_a: Vec<&Value> =
        freed.iter().filter(|e| e["message"].as_str().is_some_and(|m| m.contains(&format!("\"{a}\"")))).collect();
    assert_eq!(freed_a.len(), 1, "{freed:#?}");
    assert_eq!(freed_a[0]["type"], "Normal");
    let message = freed_a[0]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with(&format!("Removed image \"{a}\" (sha256:")), "{message}");
    assert!(!freed.iter().any(|e| e["message"].as_str().is_some_and(|m| m.contains(&b))), "{freed:#?}");
    // 0 % is out of reach: every collection falls short, and from the second on in a row that
    // is `ImageGCFailed` too.
    let short = node_events(&d, "FreeDiskSpaceFailed");
    assert!(!short.is_empty(), "{}", d.log());
    assert_eq!(short[0]["type"], "Warning");
    let m = short[0]["message"].as_str().unwrap_or_default();
    assert!(m.starts_with("Failed to garbage collect required amount of images. Attempted to free "), "{m}");
    assert!(!node_events(&d, "ImageGCFailed").is_empty());
}
