//! Images a pod may not borrow (KEP-2535) under `podwright serve`: a private image one pod pulled
//! with its pull secret is not started for a pod of another namespace without matching
//! credentials, is for one with them, and the node's records of who pulled it survive a
//! restart; `AlwaysVerify` holds preloaded images to the same rule.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::registry::Registry;
use podwright_e2e::serve::Daemon;
use podwright_e2e::{KEEP_IMAGES, Manifest, pod_name};
use std::time::Duration;

const BUSYBOX_ARCHIVE: &str = "busybox-1.36.tar";
const PASSWORD: &str = "borrow-s3cret-pw";
const LIMIT: Duration = Duration::from_secs(60);

/// A pod running `sleep 300` on `image` with pull policy `policy`, and `secret` as its pull
/// secret when given.
fn pod(name: &str, image: &str, policy: &str, secret: Option<&str>) -> Manifest {
    let secrets = secret.map(|s| format!("  imagePullSecrets: [{{name: {s}}}]\n")).unwrap_or_default();
    Manifest::new(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: {image}\n    imagePullPolicy: {policy}\n    command: [sleep, \"300\"]\n{secrets}"
    ))
}

fn create(d: &Daemon, namespace: &str, manifest: &Manifest) {
    d.ok(&["create", "-n", namespace, "-f", manifest.path_str()]);
}

/// The pod's container's waiting reason once it is one of `reasons` (within [`LIMIT`]).
fn wait_waiting(d: &Daemon, namespace: &str, name: &str, reasons: &[&str]) -> String {
    let reason =
        ["get", "pod", "-n", namespace, name, "-o", "jsonpath={.status.containerStatuses[0].state.waiting.reason}"];
    d.wait_for(&reason, LIMIT, |o| reasons.contains(&o.trim()))
}

fn wait_running(d: &Daemon, namespace: &str, name: &str) {
    d.wait_for(&["get", "pod", "-n", namespace, name, "--no-headers"], LIMIT, |o| o.contains("Running"));
}

/// The messages of the pod's events of `reason`.
fn events(d: &Daemon, namespace: &str, name: &str, reason: &str) -> String {
    let selector = format!("involvedObject.name={name},reason={reason}");
    d.ok(&["get", "events", "-n", namespace, "--field-selector", &selector, "-o", "jsonpath={.items[*].message}"])
}

#[test]
fn a_private_image_is_not_lent_to_a_pod_without_credentials_even_after_a_restart() {
    let registry = Registry::start_with_auth("puller", PASSWORD);
    let image = registry.push(BUSYBOX_ARCHIVE, "private/borrowed:1.36");
    let mut d = Daemon::start();
    for namespace in ["team-a", "team-b"] {
        d.ok(&["create", "namespace", namespace]);
        // Each team's own secret, holding the same registry credential.
        d.ok(&[
            "create",
            "secret",
            "docker-registry",
            "creds",
            "-n",
            namespace,
            &format!("--docker-server={}", registry.host),
            "--docker-username=puller",
            &format!("--docker-password={PASSWORD}"),
        ]);
    }
    // Team A pulls the image with its secret.
    let a = pod_name("borrow-owner");
    create(&d, "team-a", &pod(&a, &image, "IfNotPresent", Some("creds")));
    wait_running(&d, "team-a", &a);
    let pulls = registry.manifest_requests("private/borrowed").len();

    // Team B without credentials: the image is on the node, but B must pull it itself, and
    // the registry refuses it.
    let b = pod_name("borrow-none");
    create(&d, "team-b", &pod(&b, &image, "IfNotPresent", None));
    wait_waiting(&d, "team-b", &b, &["ErrImagePull", "ImagePullBackOff"]);
    let failed = events(&d, "team-b", &b, "Failed");
    assert!(failed.contains(&format!("Failed to pull image \"{image}\": ")), "{failed}");
    assert!(failed.contains("401 Unauthorized") && failed.contains("Error: ErrImagePull"), "{failed}");
    assert!(registry.manifest_requests("private/borrowed").len() > pulls, "B's pull never reached the registry");
    // Its retries would ask the registry again.
    d.ok(&["delete", "pod", "-n", "team-b", &b, "--grace-period=1"]);
    // With `Never` B is told what the kubelet tells: as if the image were absent.
    let never = pod_name("borrow-never");
    create(&d, "team-b", &pod(&never, &image, "Never", None));
    wait_waiting(&d, "team-b", &never, &["ErrImageNeverPull"]);
    let refused = events(&d, "team-b", &never, "ErrImageNeverPull");
    assert_eq!(refused, format!("Container image \"{image}\" is not present with pull policy of Never"));

    // Team B with its own secret holding the credential: allowed, without asking the registry.
    let pulls = registry.manifest_requests("private/borrowed").len();
    let c = pod_name("borrow-own");
    create(&d, "team-b", &pod(&c, &image, "Never", Some("creds")));
    wait_running(&d, "team-b", &c);
    let accessible = format!("Container image \"{image}\" already present on machine and can be accessed by the pod");
    assert_eq!(events(&d, "team-b", &c, "Pulled"), accessible);
    assert_eq!(registry.manifest_requests("private/borrowed").len(), pulls, "the registry was asked");

    // The records are on disk and survive a crash.
    let pulled = std::fs::read_dir(d.root.join("image_manager/pulled")).expect("the pulled records").count();
    assert_eq!(pulled, 1, "one record for the one image");
    d.crash_and_restart();
    let after = pod_name("borrow-after");
    create(&d, "team-b", &pod(&after, &image, "Never", None));
    wait_waiting(&d, "team-b", &after, &["ErrImageNeverPull"]);
    let again = pod_name("borrow-again");
    create(&d, "team-a", &pod(&again, &image, "IfNotPresent", Some("creds")));
    wait_running(&d, "team-a", &again);
    assert_eq!(events(&d, "team-a", &again, "Pulled"), accessible.clone());
    assert_eq!(registry.manifest_requests("private/borrowed").len(), pulls, "the registry was asked");
    // No credential reached an event, the log or the records.
    let all = d.ok(&["get", "events", "-A", "-o", "json"]);
    assert!(!all.contains(PASSWORD), "a credential reached an event");
    assert!(!d.log().contains(PASSWORD), "a credential reached the log");
    for record in std::fs::read_dir(d.root.join("image_manager/pulled")).unwrap() {
        let text = std::fs::read_to_string(record.unwrap().path()).unwrap();
        assert!(!text.contains(PASSWORD) && text.contains("\"namespace\":\"team-a\""), "{text}");
    }
}

#[test]
fn always_verify_holds_preloaded_images_to_the_rule() {
    let config = std::env::temp_dir().join(format!("podwright-e2e-always-verify-{}.yaml", std::process::id()));
    std::fs::write(&config, format!("{KEEP_IMAGES}imagePullCredentialsVerificationPolicy: AlwaysVerify\n")).unwrap();
    let d = Daemon::start_with(&["--config", config.to_str().unwrap()]);
    // A preloaded image (loaded onto the node, never pulled): any pod, by default; here, none
    // without a pull.
    let name = pod_name("verify-preloaded");
    create(&d, "default", &pod(&name, "localhost/busybox:1.36", "Never", None));
    wait_waiting(&d, "default", &name, &["ErrImageNeverPull"]);
    let refused = events(&d, "default", &name, "ErrImageNeverPull");
    assert_eq!(refused, "Container image \"localhost/busybox:1.36\" is not present with pull policy of Never");
    // An image the node pulled without a pod's secret is every pod's.
    let registry = Registry::start();
    let image = registry.push(BUSYBOX_ARCHIVE, "public/busybox:1.36");
    let first = pod_name("verify-public");
    create(&d, "default", &pod(&first, &image, "IfNotPresent", None));
    wait_running(&d, "default", &first);
    let second = pod_name("verify-public-again");
    create(&d, "default", &pod(&second, &image, "Never", None));
    wait_running(&d, "default", &second);
    assert_eq!(
        events(&d, "default", &second, "Pulled"),
        format!("Container image \"{image}\" already present on machine and can be accessed by the pod")
    );
    std::fs::remove_file(&config).unwrap();
}
