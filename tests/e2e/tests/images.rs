//! Image pulls for real, from a registry of the test's own (Debian's `docker-registry` on a
//! loopback port, see `podwright_e2e::registry`): each pull policy and what it asks the registry
//! for, the kubelet's `Pulled` wording, `ErrImageNeverPull`, and `ErrImagePull` then
//! `ImagePullBackOff` for an image that is not there, until it is pushed.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::registry::{CountingProxy, Registry};
use podwright_e2e::*;
use std::time::Duration;

const BUSYBOX_ARCHIVE: &str = "busybox-1.36.tar";

/// A one-container pod that prints `hi` and ends; `policy` is the `imagePullPolicy` line's value
/// (none when empty).
fn pod(name: &str, image: &str, policy: &str) -> String {
    let policy = if policy.is_empty() { String::new() } else { format!("\n    imagePullPolicy: {policy}") };
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: {image}{policy}
    command: ["sh", "-c", "echo hi"]
"#
    )
}

/// Runs the pod to completion and returns its events' messages with reason `reason`.
fn run_to_completion(manifest: &str, name: &str, reason: &str) -> (Outcome, Vec<String>) {
    let o = run_manifest(manifest, &[]);
    o.assert_code(0);
    assert_eq!(phase(&o.pod(name)), "Succeeded", "{}", o.context());
    let messages = o
        .events_with_reason(name, "spec.containers{c}", reason)
        .iter()
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect();
    (o, messages)
}

/// Checks `message` against the kubelet's "Successfully pulled image "X" in D (D including
/// waiting). Image size: N bytes." with Go durations and a positive size; returns the size.
fn assert_pulled_wording(message: &str, image: &str) -> u64 {
    let rest = message
        .strip_prefix(&format!("Successfully pulled image \"{image}\" in "))
        .unwrap_or_else(|| panic!("not a Pulled message for {image}: {message}"));
    let (took, rest) = rest.split_once(" (").expect("the pull's duration");
    let (waited, rest) = rest.split_once(" including waiting). Image size: ").expect("the time with waiting");
    let size = rest.strip_suffix(" bytes.").expect("the size in bytes");
    for d in [took, waited] {
        let number = d.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == 'µ');
        let unit = &d[number.len()..];
        assert!(["ns", "µs", "ms", "s"].contains(&unit), "not a Go duration: {d:?} in {message}");
        assert!(number.parse::<f64>().is_ok_and(|n| n > 0.0), "not a Go duration: {d:?} in {message}");
    }
    let size: u64 = size.parse().unwrap_or_else(|_| panic!("size is not a number: {message}"));
    assert!(size > 0, "{message}");
    size
}

#[test]
fn always_pulls_every_time_and_says_how_long_it_took() {
    let registry = Registry::start();
    let image = registry.push(BUSYBOX_ARCHIVE, "always/busybox:1.36");
    let name = pod_name("pull-always");
    let manifest = pod(&name, &image, "Always");

    let (_, pulled) = run_to_completion(&manifest, &name, "Pulled");
    assert_eq!(pulled.len(), 1, "{pulled:?}");
    assert_pulled_wording(&pulled[0], &image);
    let first = registry.manifest_requests("always/busybox");
    assert!(!first.is_empty(), "the first pull asked the registry for nothing:\n{}", registry.log());

    // Present now, and pulled again all the same.
    let (o, pulled) = run_to_completion(&manifest, &name, "Pulled");
    assert_eq!(pulled.len(), 1, "{pulled:?}");
    assert_pulled_wording(&pulled[0], &image);
    let pulling = o.events_with_reason(&name, "spec.containers{c}", "Pulling");
    assert_eq!(pulling.len(), 1, "{}", o.context());
    assert_eq!(pulling[0]["message"], format!("Pulling image \"{image}\""));
    let second = registry.manifest_requests("always/busybox");
    assert!(second.len() > first.len(), "the second run did not ask the registry:\n{}", registry.log());
}

#[test]
fn latest_or_no_tag_defaults_to_always() {
    let registry = Registry::start();
    registry.push(BUSYBOX_ARCHIVE, "defaulted/busybox:latest");
    // No tag means `latest`, and both mean Always.
    for (run, image) in
        [registry.image("defaulted/busybox:latest"), registry.image("defaulted/busybox")].into_iter().enumerate()
    {
        let before = registry.manifest_requests("defaulted/busybox").len();
        let name = pod_name(&format!("pull-latest-{run}"));
        let (_, pulled) = run_to_completion(&pod(&name, &image, ""), &name, "Pulled");
        assert_eq!(pulled.len(), 1, "{pulled:?}");
        // The second image is present by then (the same one under its full name): a pull anyway.
        assert_pulled_wording(&pulled[0], &image);
        let after = registry.manifest_requests("defaulted/busybox").len();
        assert!(after > before, "{image} was not pulled:\n{}", registry.log());
    }
}

#[test]
fn if_not_present_uses_a_present_image_without_asking_the_registry() {
    let registry = Registry::start();
    let image = registry.push(BUSYBOX_ARCHIVE, "present/busybox:1.36");
    // A tag other than `latest` defaults to IfNotPresent: the explicit policy and the default.
    for policy in ["IfNotPresent", ""] {
        let name = pod_name(&format!("pull-present-{}", if policy.is_empty() { "default" } else { "explicit" }));
        let manifest = pod(&name, &image, policy);
        let (_, pulled) = run_to_completion(&manifest, &name, "Pulled");
        if policy == "IfNotPresent" {
            // Not present yet: pulled.
            assert_pulled_wording(&pulled[0], &image);
        }
        let asked = registry.manifest_requests("present/busybox");
        assert!(!asked.is_empty(), "the image never came from the registry:\n{}", registry.log());
        let (_, pulled) = run_to_completion(&manifest, &name, "Pulled");
        assert_eq!(
            pulled,
            [format!("Container image \"{image}\" already present on machine and can be accessed by the pod")]
        );
        assert_eq!(registry.manifest_requests("present/busybox"), asked, "the registry was asked again");
    }
}

#[test]
fn never_with_a_missing_image_waits_with_err_image_never_pull() {
    let registry = Registry::start();
    let image = registry.push(BUSYBOX_ARCHIVE, "never/busybox:1.36");
    let name = pod_name("pull-never");
    let o = interrupt_when(&pod(&name, &image, "Never"), &[], "ErrImageNeverPull", Duration::from_secs(20));
    let message = format!("Container image \"{image}\" is not present with pull policy of Never");
    let events = o.events_with_reason(&name, "spec.containers{c}", "ErrImageNeverPull");
    assert!(events.iter().any(|e| e["message"] == message.as_str()), "{}", o.context());
    let statuses = o.statuses(&name);
    let waiting = statuses.iter().position(|s| s == "ErrImageNeverPull").expect("the waiting reason");
    // Pending until the interrupt: never started, never Failed.
    assert!(
        statuses[..=waiting]
            .iter()
            .all(|s| ["", "Pending", "ContainerCreating", "ErrImageNeverPull"].contains(&s.as_str()))
    );
    assert!(o.output_of("c").is_empty(), "{}", o.context());
    assert!(registry.manifest_requests("never/busybox").is_empty(), "Never asked the registry:\n{}", registry.log());
}

#[test]
fn a_missing_image_backs_off_and_the_pod_goes_on_once_it_is_pushed() {
    let registry = Registry::start();
    let image = registry.image("late/busybox:1.36");
    let name = pod_name("pull-late");
    let m = Manifest::new(&pod(&name, &image, "IfNotPresent"));
    let mut r = Running::spawn(&run_args(m.path_str(), &[]), None);
    assert!(r.wait_for_stderr("ImagePullBackOff", Duration::from_secs(60)), "{}", r.stderr_so_far());
    registry.push(BUSYBOX_ARCHIVE, "late/busybox:1.36");
    // The back-off's first step is 10 s: the next try finds the image.
    let o = r.wait();
    o.assert_code(0);
    assert_eq!(phase(&o.pod(&name)), "Succeeded", "{}", o.context());
    assert_eq!(o.output_of("c"), ["hi"], "{}", o.context());
    assert!(
        is_subsequence(&o.statuses(&name), &["ErrImagePull", "ImagePullBackOff", "Completed"]),
        "{:?}\n{}",
        o.statuses(&name),
        o.context()
    );
    let messages = |reason: &str| -> Vec<String> {
        o.events_with_reason(&name, "spec.containers{c}", reason)
            .iter()
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let failed = messages("Failed");
    assert!(failed.iter().any(|m| m.starts_with(&format!("Failed to pull image \"{image}\": "))), "{failed:?}");
    assert!(failed.iter().any(|m| m == "Error: ErrImagePull"), "{failed:?}");
    assert!(failed.iter().any(|m| m == "Error: ImagePullBackOff"), "{failed:?}");
    assert!(messages("BackOff").contains(&format!("Back-off pulling image \"{image}\"")), "{}", o.context());
    assert_pulled_wording(messages("Pulled").last().expect("a Pulled event"), &image);
}

#[test]
fn a_private_registry_refuses_a_pull_without_credentials() {
    let registry = Registry::start_with_auth("puller", "s3cret-pw");
    let image = registry.push(BUSYBOX_ARCHIVE, "private/busybox:1.36");
    let name = pod_name("pull-private");
    let o = interrupt_when(&pod(&name, &image, "IfNotPresent"), &[], "ErrImagePull", Duration::from_secs(20));
    let failed = o.events_with_reason(&name, "spec.containers{c}", "Failed");
    let refused = failed
        .iter()
        .filter_map(|e| e["message"].as_str())
        .find(|m| m.starts_with(&format!("Failed to pull image \"{image}\": ")))
        .unwrap_or_else(|| panic!("no pull failure\n{}", o.context()));
    assert!(refused.contains("401 Unauthorized"), "{refused}");
    assert!(o.output_of("c").is_empty(), "{}", o.context());
}

const PULLER: &str = "puller";
const PASSWORD: &str = "s3cret-pw";
const WRONG_PASSWORD: &str = "not-the-pw";

/// A config.json `auth` field: base64 of `user:password`.
fn docker_auth(user: &str, password: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

/// `pod` with `imagePullSecrets` naming `secrets`, after these Secret documents.
fn pod_with_pull_secrets(name: &str, image: &str, secrets: &[&str], documents: &[String]) -> String {
    let refs: Vec<String> = secrets.iter().map(|s| format!("{{name: {s}}}")).collect();
    let pod = pod(name, image, "IfNotPresent").replace(
        "  restartPolicy: Never\n",
        &format!("  restartPolicy: Never\n  imagePullSecrets: [{}]\n", refs.join(", ")),
    );
    let mut manifest: String = documents.iter().map(|d| format!("{d}---\n")).collect();
    manifest.push_str(&pod);
    manifest
}

/// A Secret document of `type_` whose `key` holds `config` (JSON).
fn pull_secret(name: &str, type_: &str, key: &str, config: &serde_json::Value) -> String {
    let doc = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": type_,
        "metadata": {"name": name}, "stringData": {key: config.to_string()}
    });
    format!("{doc}\n")
}

/// Asserts that nothing podwright printed (events, statuses, logs) holds a credential.
fn assert_no_credentials(o: &Outcome) {
    for secret in [PASSWORD, WRONG_PASSWORD, &docker_auth(PULLER, PASSWORD), &docker_auth(PULLER, WRONG_PASSWORD)] {
        assert!(!o.stdout.contains(secret) && !o.stderr.contains(secret), "{secret} was printed:\n{}", o.context());
    }
}

/// The `Failed to pull image` event's message, which must exist.
fn pull_failure(o: &Outcome, name: &str, image: &str) -> String {
    o.events_with_reason(name, "spec.containers{c}", "Failed")
        .iter()
        .filter_map(|e| e["message"].as_str())
        .find(|m| m.starts_with(&format!("Failed to pull image \"{image}\": ")))
        .unwrap_or_else(|| panic!("no pull failure\n{}", o.context()))
        .to_string()
}

#[test]
fn a_private_image_is_pulled_with_the_pull_secret_that_matches_trying_each_in_turn() {
    let registry = Registry::start_with_auth(PULLER, PASSWORD);
    let image = registry.push(BUSYBOX_ARCHIVE, "private/busybox:1.36");
    let name = pod_name("pull-secret");
    // The wrong password's key is the more specific, so it is tried first.
    let wrong = pull_secret(
        "wrong-pw",
        "kubernetes.io/dockerconfigjson",
        ".dockerconfigjson",
        &serde_json::json!({"auths": {format!("{}/private", registry.host): {"auth": docker_auth(PULLER, WRONG_PASSWORD)}}}),
    );
    let right = pull_secret(
        "right-pw",
        "kubernetes.io/dockercfg",
        ".dockercfg",
        &serde_json::json!({format!("http://{}", registry.host): {"username": PULLER, "password": PASSWORD}}),
    );

    // Only the wrong one: refused, and the password is nowhere.
    let manifest = pod_with_pull_secrets(&name, &image, &["wrong-pw", "missing-one"], std::slice::from_ref(&wrong));
    let o = interrupt_when(&manifest, &[], "ErrImagePull", Duration::from_secs(20));
    assert!(pull_failure(&o, &name, &image).contains("401 Unauthorized"), "{}", o.context());
    let missing: Vec<_> = o.events().into_iter().filter(|e| e["reason"] == "FailedToRetrieveImagePullSecret").collect();
    let expected =
        "Unable to retrieve some image pull secrets (missing-one); attempting to pull the image may not succeed.";
    assert!(missing.iter().any(|e| e["message"] == expected), "{}", o.context());
    assert_no_credentials(&o);

    // Both: the wrong one fails, the right one pulls.
    let before = registry.manifest_requests("private/busybox").len();
    let manifest = pod_with_pull_secrets(&name, &image, &["wrong-pw", "right-pw"], &[wrong, right]);
    let (o, pulled) = run_to_completion(&manifest, &name, "Pulled");
    assert_eq!(o.output_of("c"), ["hi"], "{}", o.context());
    assert_pulled_wording(&pulled[0], &image);
    let refused = registry
        .log()
        .lines()
        .filter(|l| l.contains("/v2/private/busybox/manifests/") && l.contains("\" 401 "))
        .count();
    assert!(refused >= 2, "the wrong password was not tried in both runs:\n{}", registry.log());
    assert!(registry.manifest_requests("private/busybox").len() > before + 1, "{}", registry.log());
    assert_no_credentials(&o);
}

/// A `config.json` in podwright's root directory for as long as it lives.
struct NodeConfig(std::path::PathBuf);

impl NodeConfig {
    fn write(auths: serde_json::Value) -> NodeConfig {
        let path = test_root().join("config.json");
        std::fs::create_dir_all(test_root()).expect("the root directory");
        std::fs::write(&path, serde_json::json!({"auths": auths}).to_string()).expect("the node's config.json");
        NodeConfig(path)
    }
}

impl Drop for NodeConfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn the_nodes_config_json_in_the_root_directory_matches_by_glob() {
    let registry = Registry::start_with_auth(PULLER, PASSWORD);
    let image = registry.push(BUSYBOX_ARCHIVE, "private/busybox:1.36");
    let port = registry.host.rsplit_once(':').expect("HOST:PORT").1;
    let name = pod_name("pull-node-creds");
    let manifest = pod(&name, &image, "IfNotPresent");
    {
        // Three labels for the host's four: no match, so the pull is anonymous and refused.
        let _config =
            NodeConfig::write(serde_json::json!({format!("*.0.1:{port}"): {"auth": docker_auth(PULLER, PASSWORD)}}));
        let o = interrupt_when(&manifest, &[], "ErrImagePull", Duration::from_secs(20));
        assert!(pull_failure(&o, &name, &image).contains("401 Unauthorized"), "{}", o.context());
    }
    let _config = NodeConfig::write(serde_json::json!({
        format!("https://127.*.*.*:{port}/private"): {"auth": docker_auth(PULLER, PASSWORD)}
    }));
    let (o, _) = run_to_completion(&manifest, &name, "Pulled");
    assert_eq!(o.output_of("c"), ["hi"], "{}", o.context());
    assert_no_credentials(&o);
}

/// Four pods of four distinct images from one registry, through a proxy that holds each
/// manifest request; returns how many pulls the registry saw under way at once.
fn pulls_at_once(config: Option<&str>) -> usize {
    let registry = Registry::start();
    let proxy = CountingProxy::start(&registry, Duration::from_millis(1500));
    let mut manifest = String::new();
    let mut names = vec![];
    for i in 0..4 {
        registry.push(BUSYBOX_ARCHIVE, &format!("queue-{i}/busybox:1.36"));
        let name = pod_name(&format!("pull-queue-{i}"));
        manifest.push_str(&pod(&name, &proxy.image(&format!("queue-{i}/busybox:1.36")), "Always"));
        manifest.push_str("---\n");
        names.push(name);
    }
    let config_file = config.map(Manifest::new);
    let mut extra = vec![];
    if let Some(c) = &config_file {
        extra.extend(["--config", c.path_str()]);
    }
    let o = run_manifest(&manifest, &extra);
    o.assert_code(0);
    for name in &names {
        assert_eq!(phase(&o.pod(name)), "Succeeded", "{}", o.context());
    }
    proxy.max_at_once()
}

#[test]
fn image_pulls_are_serial_by_default_parallel_or_bounded_by_the_config() {
    const CONFIG: &str =
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 100\n";
    assert_eq!(pulls_at_once(None), 1, "serializeImagePulls is true by default");
    assert_eq!(pulls_at_once(Some(&format!("{CONFIG}serializeImagePulls: true\n"))), 1);
    let bounded = pulls_at_once(Some(&format!("{CONFIG}serializeImagePulls: false\nmaxParallelImagePulls: 2\n")));
    assert_eq!(bounded, 2, "maxParallelImagePulls: 2");
    let parallel = pulls_at_once(Some(&format!("{CONFIG}serializeImagePulls: false\n")));
    assert!(parallel > 2, "parallel pulls went {parallel} at a time");
}

#[test]
fn invalid_image_pull_settings_stop_podwright_naming_the_field() {
    let m = Manifest::new(&pod(&pod_name("never-started"), "localhost/busybox:1.36", ""));
    for (config, field) in [
        ("maxParallelImagePulls: 2\n", "maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls"),
        ("serializeImagePulls: false\nmaxParallelImagePulls: 0\n", "maxParallelImagePulls 0 must be a positive number"),
        (
            "imageGCHighThresholdPercent: 101\n",
            "imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive",
        ),
        ("imageMinimumGCAge: 1h\nmaxPods: 3\n", "unknown field `maxPods`"),
    ] {
        let c = Manifest::new(config);
        let o = podwright(&[
            "run",
            "-f",
            m.path_str(),
            "--config",
            c.path_str(),
            "--root-dir",
            test_root().to_str().unwrap(),
        ]);
        o.assert_code(2);
        assert!(o.stderr.contains(field), "{}", o.context());
        assert!(!o.stderr.contains("never-started"), "a pod ran: {}", o.context());
    }
}
