//! Image pulls under `podwright serve`: pull secrets come from the local API (as `kubectl create
//! secret docker-registry` makes them), and deleting a pod cancels its pull under way.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::registry::{CountingProxy, Registry};
use podwright_e2e::serve::Daemon;
use podwright_e2e::{Manifest, pod_name};
use std::time::Duration;

const BUSYBOX_ARCHIVE: &str = "busybox-1.36.tar";

/// A pod running `sleep 300` on `image`, pulled always, with `extra` appended to its spec.
fn pod(name: &str, image: &str, extra: &str) -> Manifest {
    Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {image}\n    imagePullPolicy: Always\n    command: [sleep, \"300\"]\n{extra}"
    ))
}

#[test]
fn pull_secrets_are_read_from_the_local_api() {
    const PASSWORD: &str = "api-s3cret-pw";
    let registry = Registry::start_with_auth("puller", PASSWORD);
    let image = registry.push(BUSYBOX_ARCHIVE, "private/served:1.36");
    let d = Daemon::start();
    let (with, without) = (pod_name("pull-api-secret"), pod_name("pull-api-none"));
    let secret = format!("{with}-cred");
    d.ok(&[
        "create",
        "secret",
        "docker-registry",
        &secret,
        &format!("--docker-server={}", registry.host),
        "--docker-username=puller",
        &format!("--docker-password={PASSWORD}"),
    ]);
    let without_manifest = pod(&without, &image, "");
    d.ok(&["create", "-f", without_manifest.path_str()]);
    let with_manifest = pod(&with, &image, &format!("  imagePullSecrets: [{{name: {secret}}}]\n"));
    d.ok(&["create", "-f", with_manifest.path_str()]);

    d.wait_for(&["get", "pod", &with, "--no-headers"], Duration::from_secs(60), |o| o.contains("Running"));
    let refused = d.wait_for(&["get", "pod", &without, "--no-headers"], Duration::from_secs(60), |o| {
        o.contains("ErrImagePull") || o.contains("ImagePullBackOff")
    });
    assert!(!refused.contains("Running"), "{refused}");
    let events = d.ok(&["get", "events", "-o", "json"]);
    assert!(events.contains("401 Unauthorized"), "the refused pull's event says why:\n{events}");
    assert!(!events.contains(PASSWORD), "a credential reached an event:\n{events}");
    assert!(!d.log().contains(PASSWORD), "a credential reached the log");
    d.ok(&["delete", "pod", &with, &without, "--grace-period=1"]);
    d.ok(&["delete", "secret", &secret]);
}

#[test]
fn deleting_a_pod_cancels_its_pull_under_way() {
    let registry = Registry::start();
    registry.push(BUSYBOX_ARCHIVE, "slow/busybox:1.36");
    // The proxy holds the pull's first request for longer than the test may run: the pod can only
    // go away if its deletion cancels the pull.
    let proxy = CountingProxy::start(&registry, Duration::from_secs(3600));
    let d = Daemon::start();
    let name = pod_name("pull-cancelled");
    let manifest = pod(&name, &proxy.image("slow/busybox:1.36"), "");
    d.ok(&["create", "-f", manifest.path_str()]);
    let selector = format!("involvedObject.name={name},reason=Pulling");
    d.wait_for(&["get", "events", "--field-selector", &selector, "--no-headers"], Duration::from_secs(60), |o| {
        !o.trim().is_empty()
    });
    // The pull has reached the registry and is held there.
    let held = std::time::Instant::now();
    while proxy.max_at_once() == 0 {
        assert!(held.elapsed() < Duration::from_secs(60), "the pull never reached the registry");
        std::thread::sleep(Duration::from_millis(100));
    }
    d.ok(&["delete", "pod", &name, "--grace-period=1", "--timeout=120s"]);
    let gone = d.kubectl(None, &["get", "pod", &name]);
    assert!(!gone.status.success(), "the pod is still there: {}", podwright_e2e::serve::text(&gone.stdout));
    let events = d.ok(&["get", "events", "--field-selector", &format!("involvedObject.name={name}"), "-o", "json"]);
    assert!(events.contains("context canceled"), "the cancelled pull's event:\n{events}");
}
