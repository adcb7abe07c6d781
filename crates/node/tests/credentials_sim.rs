//! Pull credentials against the fake runtime's private image: the pod's `imagePullSecrets`
//! (missing ones warned about), the node's `config.json`, every matching credential tried in
//! turn, and no credential in any event.
// Test harness: tokio's Instant is the virtual time of paused tests, as the Clock's is.
#![allow(clippy::disallowed_methods)]

mod common;
use base64::Engine as _;
use common::epoch;
use k8s_openapi::api::core::v1::{Pod, Secret};
use podwright_node::DockerConfigPaths;
use podwright_node::objects::FixedObjects;
use podwright_node::{EventLog, Node};
use podwright_runtime::Clock;
use podwright_runtime::fake::{Call, FakeRuntime};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const IMAGE: &str = "127.0.0.1:5000/private/app:1";
const RIGHT: &str = "right-password";
const WRONG: &str = "wrong-password";

fn auth(user: &str, password: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

/// A `kubernetes.io/dockerconfigjson` Secret giving `password` for `registry`.
fn secret(name: &str, registry: &str, password: &str) -> Secret {
    let config = serde_json::json!({"auths": {registry: {"auth": auth("u", password)}}}).to_string();
    let encoded = base64::engine::general_purpose::STANDARD.encode(config);
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": name, "namespace": "default"},
        "data": {".dockerconfigjson": encoded}
    }))
    .unwrap()
}

fn pod(pull_secrets: &[&str]) -> Pod {
    let refs: Vec<_> = pull_secrets.iter().map(|n| serde_json::json!({"name": n})).collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "private", "namespace": "default", "uid": "uid-private"},
        "spec": {
            "restartPolicy": "Always",
            "imagePullSecrets": refs,
            "containers": [{"name": "app", "image": IMAGE, "imagePullPolicy": "IfNotPresent"}]
        }
    }))
    .unwrap()
}

struct Outcome {
    /// (reason, message) of every event.
    events: Vec<(String, String)>,
    pulls: usize,
}

impl Outcome {
    fn messages(&self, reason: &str) -> Vec<&str> {
        self.events.iter().filter(|(r, _)| r == reason).map(|(_, m)| m.as_str()).collect()
    }

    fn started(&self) -> bool {
        !self.messages("Started").is_empty()
    }

    fn mentions(&self, text: &str) -> bool {
        self.events.iter().any(|(_, m)| m.contains(text))
    }
}

/// Runs `pod` for a minute on a node with these Secrets and node `config.json` text.
async fn run(pod: Pod, secrets: Vec<Secret>, node_config: Option<String>) -> Outcome {
    let clock = Clock::starting_at(epoch());
    let fake = FakeRuntime::new(clock);
    fake.allow_pull_with_auth(IMAGE, "u", RIGHT);
    let root = std::env::temp_dir().join(format!("pw-creds-{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::create_dir_all(&root).unwrap();
    if let Some(text) = node_config {
        std::fs::write(root.join("config.json"), text).unwrap();
    }
    let events = Arc::new(EventLog::default());
    let nowhere = PathBuf::from("/nonexistent-podwright-test");
    let workers = Node::new(fake.clone(), root.clone())
        .clock(clock)
        .events(events.clone())
        .objects(Arc::new(FixedObjects::new([], secrets)))
        .node_credentials(DockerConfigPaths::kubelet(&root, &nowhere, &nowhere))
        .build();
    workers.update(pod).unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    workers.delete_all(None);
    workers.wait_finished().await;
    std::fs::remove_dir_all(&root).unwrap();
    let pulls = fake.calls().iter().filter(|(_, c)| matches!(c, Call::PullImage { .. })).count();
    let events = events
        .snapshot()
        .iter()
        .map(|e| (e.reason.clone().unwrap_or_default(), e.message.clone().unwrap_or_default()))
        .collect();
    Outcome { events, pulls }
}

#[tokio::test(start_paused = true)]
async fn without_credentials_the_private_image_fails_with_the_registrys_answer() {
    let out = run(pod(&[]), vec![], None).await;
    assert!(!out.started());
    assert!(out.messages("Failed").iter().any(|m| m.contains("401 Unauthorized")), "{:?}", out.events);
}

#[tokio::test(start_paused = true)]
async fn every_matching_secret_is_tried_until_one_pull_succeeds() {
    // The wrong one's pattern is the more specific, so it is tried first.
    let secrets =
        vec![secret("wrong", "127.0.0.1:5000/private", WRONG), secret("right", "http://127.0.0.1:5000", RIGHT)];
    let out = run(pod(&["wrong", "absent", "right", ""]), secrets, None).await;
    assert!(out.started(), "{:?}", out.events);
    assert_eq!(out.pulls, 2, "the wrong credential, then the right one");
    assert_eq!(
        out.messages("FailedToRetrieveImagePullSecret"),
        ["Unable to retrieve some image pull secrets (absent); attempting to pull the image may not succeed."]
    );
    assert!(!out.mentions(WRONG) && !out.mentions(RIGHT));
}

#[tokio::test(start_paused = true)]
async fn failed_tries_are_reported_together_without_credentials() {
    let secrets = vec![secret("a", "127.0.0.1:5000", WRONG), secret("b", "127.0.0.1:5000/private/app", "other")];
    let out = run(pod(&["a", "b"]), secrets, None).await;
    assert!(!out.started());
    assert!(out.pulls >= 2);
    let failed = out.messages("Failed");
    // Both tries failed alike: Go's aggregate error keeps the one message, unbracketed.
    assert!(
        failed.iter().any(|m| m.starts_with(&format!("Failed to pull image \"{IMAGE}\": failed to pull"))),
        "{failed:?}"
    );
    assert!(!out.mentions(WRONG) && !out.mentions("other") && !out.mentions(&auth("u", WRONG)));
}

#[tokio::test(start_paused = true)]
async fn node_config_json_in_the_root_directory_matched_by_a_glob() {
    let config = serde_json::json!({"auths": {"127.*.*.*:5000/private": {"auth": auth("u", RIGHT)}}}).to_string();
    let out = run(pod(&[]), vec![], Some(config)).await;
    assert!(out.started(), "{:?}", out.events);
    // A glob with another number of labels does not match, and the pull goes anonymous.
    let config = serde_json::json!({"auths": {"*.0.1:5000": {"auth": auth("u", RIGHT)}}}).to_string();
    let out = run(pod(&[]), vec![], Some(config)).await;
    assert!(!out.started());
}

#[tokio::test(start_paused = true)]
async fn pod_secrets_are_tried_before_node_credentials() {
    let config = serde_json::json!({"auths": {"127.0.0.1:5000": {"auth": auth("u", RIGHT)}}}).to_string();
    let out = run(pod(&["wrong"]), vec![secret("wrong", "127.0.0.1:5000", WRONG)], Some(config)).await;
    assert!(out.started(), "{:?}", out.events);
    assert_eq!(out.pulls, 2, "the secret's wrong credential first, then the node's");
}

/// A pod named `name` in `namespace` asking for the private image with `policy`.
fn pod_in(namespace: &str, name: &str, policy: &str, pull_secrets: &[&str]) -> Pod {
    let mut pod = pod(pull_secrets);
    pod.metadata.name = Some(name.into());
    pod.metadata.namespace = Some(namespace.into());
    pod.metadata.uid = Some(format!("uid-{namespace}-{name}"));
    pod.spec.as_mut().unwrap().containers[0].image_pull_policy = Some(policy.into());
    pod
}

#[tokio::test(start_paused = true)]
async fn a_private_image_one_pod_pulled_is_not_lent_to_a_pod_without_its_credentials() {
    let clock = Clock::starting_at(epoch());
    let fake = FakeRuntime::new(clock);
    fake.allow_pull_with_auth(IMAGE, "u", RIGHT);
    let root = std::env::temp_dir().join(format!("pw-borrow-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let events = Arc::new(EventLog::default());
    let nowhere = PathBuf::from("/nonexistent-podwright-test");
    let mut owners = secret("right", "127.0.0.1:5000", RIGHT);
    owners.metadata.namespace = Some("team-a".into());
    owners.metadata.uid = Some("uid-secret-a".into());
    let workers = Node::new(fake.clone(), root.clone())
        .clock(clock)
        .events(events.clone())
        .objects(Arc::new(FixedObjects::new([], vec![owners])))
        .node_credentials(DockerConfigPaths::kubelet(&root, &nowhere, &nowhere))
        .build();
    workers.update(pod_in("team-a", "owner", "IfNotPresent", &["right"])).unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    workers.update(pod_in("team-b", "borrower", "IfNotPresent", &[])).unwrap();
    workers.update(pod_in("team-b", "never", "Never", &[])).unwrap();
    workers.update(pod_in("team-a", "sibling", "Never", &["right"])).unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;
    workers.delete_all(None);
    workers.wait_finished().await;
    let of = |name: &str, reason: &str| -> Vec<String> {
        events
            .snapshot()
            .iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name) && e.reason.as_deref() == Some(reason))
            .map(|e| e.message.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(of("owner", "Started").len(), 1);
    // The image is on the node, but the borrower must pull it itself, and is refused.
    assert!(of("borrower", "Started").is_empty());
    assert!(of("borrower", "Failed").iter().any(|m| m.contains("401 Unauthorized")), "{:?}", of("borrower", "Failed"));
    assert_eq!(
        of("never", "ErrImageNeverPull"),
        [format!("Container image \"{IMAGE}\" is not present with pull policy of Never")]
    );
    // A pod with the owner's secret uses it as it is.
    assert_eq!(
        of("sibling", "Pulled"),
        [format!("Container image \"{IMAGE}\" already present on machine and can be accessed by the pod")]
    );
    assert_eq!(of("sibling", "Started").len(), 1);
    std::fs::remove_dir_all(&root).unwrap();
}
