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

/// An API server whose pod list has `pods` on node `n`, whose watches and token requests are
/// never answered (a token the API server holds back, as for a pod whose namespace is going).
fn silent_api_server(pods: Value) -> kube::Client {
    use http::{Method, Response};
    use kube::client::Body;
    let service = tower::service_fn(move |req: http::Request<Body>| {
        let pods = pods.clone();
        async move {
            let query = req.uri().query().unwrap_or_default().to_string();
            if req.method() != Method::GET || req.uri().path() != "/api/v1/pods" || query.contains("watch=true") {
                std::future::pending::<()>().await;
            }
            let list =
                json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": pods});
            let response = Response::builder().status(200).header("content-type", "application/json");
            Ok::<_, tower::BoxError>(response.body(Body::from(serde_json::to_vec(&list)?))?)
        }
    });
    kube::Client::new(service, "default")
}

/// A pod whose service account token the API server never gives (for `waits_for_token`).
fn waiting_pod() -> Value {
    json!({"metadata": {"name": "waits", "namespace": "going", "uid": "waits"},
        "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "localhost/busybox:1.36"}],
            "volumes": [{"name": "token", "projected":
                {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}}]}})
}

/// The watch of node `n`'s pods against [`silent_api_server`] listing `pods`, with workers on
/// the fake runtime; the receiver of its finished reads; its root, to remove.
fn pod_watch(
    pods: Value,
    node: Option<Node>,
) -> (PodWatch, mpsc::UnboundedReceiver<String>, kube::Client, std::path::PathBuf) {
    use podwright_runtime::fake::FakeRuntime;
    let clock = Clock::new();
    let client = silent_api_server(pods);
    let fake = FakeRuntime::new(clock);
    fake.add_image("localhost/busybox:1.36");
    let root =
        std::env::temp_dir().join(format!("pw-pod-watch-{}-{:?}", std::process::id(), std::thread::current().id()));
    // No status manager: what it would hear is dropped.
    let (status, _) = mpsc::unbounded_channel();
    let (read, done) = mpsc::unbounded_channel();
    // Without a Node, admission lets every pod in.
    let (_, own_node) = tokio::sync::watch::channel(node);
    let source = PodWatch {
        workers: Arc::new(podwright_node::Node::new(fake, root.clone()).clock(clock).build()),
        objects: ClusterObjects::new(client.clone(), clock),
        events: Arc::new(podwright_node::EventLog::default()),
        clock,
        status,
        given: HashSet::new(),
        reading: HashMap::new(),
        read,
        own_node,
    };
    (source, done, client, root)
}

fn names(workers: &PodWorkers) -> Vec<String> {
    workers.latest().iter().map(|u| u.spec.metadata.name.clone().unwrap_or_default()).collect()
}

/// One pod's wait for its service account token holds up no other pod: the conformance suite
/// found a pod left Pending for its whole minute behind pods of a namespace being deleted,
/// whose tokens the API server refused, each waited for in turn.
#[tokio::test(start_paused = true)]
async fn a_pod_waiting_for_its_token_holds_up_no_other() {
    let ready = json!({"metadata": {"name": "ready", "namespace": "here", "uid": "ready"},
        "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "localhost/busybox:1.36"}]}});
    let (source, done, client, root) = pod_watch(json!([waiting_pod(), ready]), None);
    let workers = source.workers.clone();
    tokio::spawn(async move { source.run(client, "n", done).await });

    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(names(&workers), ["ready"], "the pod listed second started without waiting for the first's token");
    // The first starts once its bounded wait is over, as before.
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert_eq!(names(&workers), ["ready", "waits"]);
    workers.abort();
    let _ = std::fs::remove_dir_all(root);
}

/// A pod deleted while its token is awaited never reaches the workers.
#[tokio::test(start_paused = true)]
async fn a_pod_deleted_while_its_token_is_awaited_never_starts() {
    let (mut source, mut done, _client, root) = pod_watch(json!([]), None);
    source.apply(serde_json::from_value(waiting_pod()).unwrap());
    source.gone("waits", None);
    let uid = done.recv().await.unwrap();
    source.read_done(&uid);
    assert!(names(&source.workers).is_empty());
    let _ = std::fs::remove_dir_all(root);
}

/// A pod still being read counts in the admission of the next, as a running one does.
#[tokio::test(start_paused = true)]
async fn a_pod_being_read_counts_in_the_next_ones_admission() {
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n"},
        "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "110"}}}))
    .unwrap();
    let (mut source, mut done, _client, root) = pod_watch(json!([]), Some(node));
    let mut first = waiting_pod();
    first["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "800m"}});
    source.apply(serde_json::from_value(first).unwrap());
    let second = json!({"metadata": {"name": "second", "namespace": "here", "uid": "second"},
        "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "localhost/busybox:1.36",
            "resources": {"requests": {"cpu": "800m"}}}]}});
    source.apply(serde_json::from_value(second).unwrap());
    assert_eq!(source.reading.keys().collect::<Vec<_>>(), ["waits"], "the second pod was refused (OutOfcpu)");
    let uid = done.recv().await.unwrap();
    source.read_done(&uid);
    assert_eq!(names(&source.workers), ["waits"]);
    source.workers.abort();
    let _ = std::fs::remove_dir_all(root);
}
