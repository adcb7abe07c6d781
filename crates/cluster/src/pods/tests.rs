use super::*;
use k8s_openapi::api::core::v1::PodCondition;

fn status(v: Value) -> PodStatus {
    serde_json::from_value(v).unwrap()
}

#[test]
fn the_patch_carries_the_uid_and_only_the_kubelets_conditions() {
    let ours = status(json!({
        "phase": "Running",
        "podIP": "10.88.0.5",
        "podIPs": [{"ip": "10.88.0.5"}],
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "example.com/gate", "status": "True"},
        ],
    }));
    let patch = status_patch("u-1", &ours, None);
    assert_eq!(patch["metadata"], json!({"uid": "u-1"}));
    assert_eq!(
        patch["status"]["conditions"],
        json!([{"type": "Ready", "status": "True", "reason": null, "message": null}])
    );
    assert_eq!(patch["status"]["podIPs"], json!([{"$patch": "replace"}, {"ip": "10.88.0.5"}]));
    assert!(patch["status"].get("reason").is_none());
}

#[test]
fn a_reason_the_node_no_longer_gives_is_removed() {
    let theirs = status(json!({"phase": "Failed", "reason": "Evicted", "message": "gone"}));
    let ours = status(json!({"phase": "Running"}));
    let patch = status_patch("u", &ours, Some(&theirs));
    assert_eq!(patch["status"]["reason"], Value::Null);
    assert_eq!(patch["status"]["message"], Value::Null);
}

#[test]
fn a_status_marked_not_ready_by_the_control_plane_differs() {
    let ours = status(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}));
    let mut theirs = ours.clone();
    assert_eq!(summary(&ours), summary(&theirs));
    theirs.conditions =
        Some(vec![PodCondition { type_: "Ready".into(), status: "False".into(), ..Default::default() }]);
    assert_ne!(summary(&ours), summary(&theirs));
}

#[test]
fn fields_an_older_api_server_drops_are_no_difference() {
    let ours = status(json!({"phase": "Running", "hostIPs": [{"ip": "10.0.0.1"}], "qosClass": "BestEffort",
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodReadyToStartContainers", "status": "True"}]}));
    // The conditions another component owns, and the times, do not count either.
    let theirs = status(json!({"phase": "Running", "conditions": [
        {"type": "PodReadyToStartContainers", "status": "True"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-27T00:00:00Z"},
        {"type": "example.com/gate", "status": "False"}]}));
    assert_eq!(summary(&ours), summary(&theirs));
}

#[test]
fn observed_generation_counts_only_where_the_api_server_keeps_it() {
    let ours = status(json!({"phase": "Running", "observedGeneration": 2,
        "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 2}]}));
    // A 1.20 API server drops the field: no difference, or the node would write for ever.
    let dropped = status(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}));
    assert!(!differs(&dropped, &ours));
    // A newer one keeps it: a spec update the node has acted on is written.
    let older = status(json!({"phase": "Running", "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}]}));
    assert!(differs(&older, &ours));
    assert!(!differs(&ours, &ours));
    let patch = status_patch("u", &ours, Some(&older));
    assert_eq!(patch["status"]["observedGeneration"], json!(2));
    assert_eq!(patch["status"]["conditions"][0]["observedGeneration"], json!(2));
}

#[test]
fn a_waiting_reason_or_an_exit_code_that_changes_differs() {
    let container = |state: Value| {
        status(json!({"phase": "Pending", "containerStatuses": [
            {"name": "a", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": state}]}))
    };
    // The conformance suite's image pull specs wait for ErrImagePull or ImagePullBackOff in
    // the API server's copy.
    let creating = container(json!({"waiting": {"reason": "ContainerCreating"}}));
    let pull_failed = container(json!({"waiting": {"reason": "ErrImagePull", "message": "not found"}}));
    assert!(differs(&creating, &pull_failed));
    assert!(!differs(&pull_failed, &pull_failed));
    let exited = |code: i32| container(json!({"terminated": {"exitCode": code, "reason": "Error"}}));
    assert!(differs(&exited(1), &exited(2)));
    assert!(!differs(&exited(1), &exited(1)));
}

#[test]
fn only_the_pods_of_this_node_are_asked_for() {
    assert_eq!(node_selector("n1"), "spec.nodeName=n1");
}
