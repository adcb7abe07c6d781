use super::*;
use crate::mirror::node_uid;
use crate::node_link::NodeFeed;
use crate::request::{Params, RequestBody};
use crate::server::{ApiServer, ServerConfig};
use crate::store::meta_str;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use futures_util::FutureExt;
use podwright_api::annotations::{CONFIG_HASH, CONFIG_MIRROR, CONFIG_SEEN, CONFIG_SOURCE};
use podwright_node::{PodChange, PodSource, PodUpdate, StatusSink};
use podwright_runtime::{Clock, FakeRuntime};
use serde_json::{Value, json};

fn api() -> (ApiServer, NodeFeed) {
    let clock = Clock::new();
    let config = ServerConfig { node_name: "n".into(), root: "/nonexistent".into(), host_ip: None };
    ApiServer::new(config, clock, FakeRuntime::new(clock))
}

/// A static pod as the file source gives it.
fn static_pod(name: &str, uid: &str, image: &str) -> Pod {
    let mut pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{name}-n"), "namespace": "default", "uid": uid,
            "annotations": {CONFIG_HASH: uid, CONFIG_SOURCE: "file"}},
        "spec": {"nodeName": "n", "containers": [{"name": "app", "image": image}]},
    }))
    .unwrap();
    podwright_api::admit_pod(&mut pod).unwrap();
    pod
}

/// What the node has been handed since the last call.
fn changes(feed: &mut NodeFeed) -> Vec<String> {
    let mut out = vec![];
    while let Some(Some(change)) = feed.source.next().now_or_never() {
        out.push(match change {
            PodChange::Upsert(p) => format!("upsert {}", p.metadata.uid.unwrap()),
            PodChange::Delete { uid, grace } => format!("delete {uid} {grace:?}"),
        });
    }
    out
}

fn mirror(api: &ApiServer, name: &str) -> Option<Arc<Value>> {
    api.store().get(Resource::Pods, "default", name).ok()
}

fn running(phase: &str) -> PodStatus {
    PodStatus { phase: Some(phase.into()), ..Default::default() }
}

/// The node reports a status for `pod`.
fn report(api: &ApiServer, pod: &Pod, phase: &str, finished: bool) {
    let update = PodUpdate { spec: Arc::new(pod.clone()), status: Some(Arc::new(running(phase))), finished };
    api.sink().publish(&update);
}

/// The node removes what the API sends down the removals channel, as `serve` does.
fn remove_finished(api: &ApiServer, feed: &mut NodeFeed) -> Vec<String> {
    let mut removed = vec![];
    while let Ok(uid) = feed.removals.try_recv() {
        api.pod_removed(&uid);
        removed.push(uid);
    }
    removed
}

#[tokio::test]
async fn a_static_pod_runs_with_a_mirror_pod_that_shows_its_status() {
    let (api, mut feed) = api();
    let web = static_pod("web", "u1", "busybox");
    api.set_static_pods(vec![web.clone()]);
    assert_eq!(changes(&mut feed), ["upsert u1"]);

    let m = mirror(&api, "web-n").expect("a mirror pod");
    assert_eq!(m["metadata"]["annotations"][CONFIG_MIRROR], "u1");
    assert_eq!(m["metadata"]["annotations"][CONFIG_SOURCE], "file");
    assert!(m["metadata"]["annotations"][CONFIG_SEEN].is_string());
    assert_eq!(m["metadata"]["ownerReferences"][0]["kind"], "Node");
    assert_eq!(m["metadata"]["ownerReferences"][0]["controller"], true);
    let mirror_uid = meta_str(&m, "uid").unwrap().to_string();
    assert_ne!(mirror_uid, "u1", "the mirror has a UID of its own");
    assert_eq!(api.pod_uids(), BTreeSet::from(["u1".to_string()]), "the node's UID, not the mirror's");

    report(&api, &web, "Running", false);
    assert_eq!(mirror(&api, "web-n").unwrap()["status"]["phase"], "Running");

    api.set_static_pods(vec![web.clone()]);
    assert_eq!(changes(&mut feed), Vec::<String>::new(), "the same set again changes nothing");
    assert_eq!(meta_str(&mirror(&api, "web-n").unwrap(), "uid"), Some(mirror_uid.as_str()));
}

#[tokio::test]
async fn a_changed_file_stops_the_old_pod_and_starts_the_new_one_once_the_old_is_removed() {
    let (api, mut feed) = api();
    let v1 = static_pod("web", "u1", "busybox");
    let v2 = static_pod("web", "u2", "busybox:1.36");
    api.set_static_pods(vec![v1.clone()]);
    report(&api, &v1, "Running", false);
    changes(&mut feed);

    api.set_static_pods(vec![v2.clone()]);
    assert_eq!(changes(&mut feed), ["delete u1 Some(30)"], "the new pod waits for the name");
    assert_eq!(node_uid(&mirror(&api, "web-n").unwrap()), "u1", "the old mirror stays while its pod stops");
    api.set_static_pods(vec![v2.clone()]);
    assert_eq!(changes(&mut feed), Vec::<String>::new());

    report(&api, &v1, "Running", true);
    assert!(mirror(&api, "web-n").is_none(), "the old mirror goes once its pod has stopped");
    assert_eq!(remove_finished(&api, &mut feed), ["u1"]);
    assert_eq!(changes(&mut feed), ["upsert u2"]);
    assert_eq!(node_uid(&mirror(&api, "web-n").unwrap()), "u2");
    assert_eq!(api.pod_uids(), BTreeSet::from(["u2".to_string()]));
}

#[tokio::test]
async fn a_removed_file_stops_its_pod_and_the_mirror_goes_once_it_has_stopped() {
    let (api, mut feed) = api();
    let web = static_pod("web", "u1", "busybox");
    api.set_static_pods(vec![web.clone()]);
    changes(&mut feed);
    api.set_static_pods(vec![]);
    assert_eq!(changes(&mut feed), ["delete u1 Some(30)"]);
    report(&api, &web, "Running", false);
    assert_eq!(mirror(&api, "web-n").unwrap()["status"]["phase"], "Running", "statuses go on while it stops");
    report(&api, &web, "Succeeded", true);
    assert!(mirror(&api, "web-n").is_none());
    assert_eq!(remove_finished(&api, &mut feed), ["u1"]);
    assert!(api.pod_uids().is_empty());
}

#[tokio::test]
async fn deleting_the_mirror_pod_makes_it_again_and_the_static_pod_goes_on() {
    let (api, mut feed) = api();
    let web = static_pod("web", "u1", "busybox");
    api.set_static_pods(vec![web.clone()]);
    report(&api, &web, "Running", false);
    changes(&mut feed);
    let before = mirror(&api, "web-n").unwrap();

    let gone = crate::pods::delete(&api, "default", "web-n", &Default::default(), false).unwrap();
    assert_eq!(meta_str(&gone, "uid"), meta_str(&before, "uid"), "the deleted object is the old mirror");
    let again = mirror(&api, "web-n").expect("the mirror is made again");
    assert_ne!(meta_str(&again, "uid"), meta_str(&before, "uid"), "a new object");
    assert_eq!(node_uid(&again), "u1");
    assert_eq!(again["status"]["phase"], "Running", "with the status it had");
    assert_eq!(changes(&mut feed), Vec::<String>::new(), "the node is told nothing");

    // A status from the node makes a missing mirror again too (here: deleted behind the API's back).
    api.store().delete(Resource::Pods, "default", "web-n").unwrap();
    report(&api, &web, "Running", false);
    assert_eq!(node_uid(&mirror(&api, "web-n").expect("made again")), "u1");
}

async fn patch(api: &ApiServer, body: Value) -> crate::errors::ApiResult<axum::response::Response> {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/strategic-merge-patch+json"));
    let path = Path(("default".to_string(), "pods".to_string(), "web-n".to_string()));
    crate::api::patch(State(api.clone()), path, Query(Params::default()), headers, RequestBody(body.to_string().into()))
        .await
}

#[tokio::test]
async fn changes_to_a_mirror_pod_stay_in_the_api_and_its_annotation_is_fixed() {
    let (api, mut feed) = api();
    api.set_static_pods(vec![static_pod("web", "u1", "busybox")]);
    changes(&mut feed);

    patch(&api, json!({"metadata": {"labels": {"team": "a"}}})).await.unwrap();
    assert_eq!(mirror(&api, "web-n").unwrap()["metadata"]["labels"]["team"], "a", "stored, as the API server does");
    let image = json!({"spec": {"containers": [{"name": "app", "image": "busybox:1.37"}]}});
    patch(&api, image).await.unwrap();
    assert_eq!(mirror(&api, "web-n").unwrap()["spec"]["containers"][0]["image"], "busybox:1.37");
    assert_eq!(changes(&mut feed), Vec::<String>::new(), "the node runs the file, not the mirror");

    let err = patch(&api, json!({"metadata": {"annotations": {CONFIG_MIRROR: null}}})).await.unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "Pod \"web-n\" is invalid: metadata.annotations[{CONFIG_MIRROR}]: Forbidden: may not remove or update mirror pod annotation"
        )
    );
}

#[tokio::test]
async fn a_pod_created_through_the_api_may_not_be_a_mirror_pod() {
    let (api, _feed) = api();
    let input = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "fake", "annotations": {CONFIG_MIRROR: "x"}},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]}});
    let path = Path(("default".to_string(), "pods".to_string()));
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let err = crate::api::create(
        State(api.clone()),
        path,
        Query(Params::default()),
        headers,
        RequestBody(input.to_string().into()),
    )
    .await
    .unwrap_err();
    assert!(err.message.contains("Forbidden: mirror pods are made by the node"), "{}", err.message);
}

#[tokio::test]
async fn of_two_files_with_one_pod_name_the_second_is_ignored_with_a_warning_event() {
    let (api, mut feed) = api();
    let first = static_pod("web", "u1", "busybox");
    let second = static_pod("web", "u2", "busybox:1.36");
    api.set_static_pods(vec![first, second]);
    assert_eq!(changes(&mut feed), ["upsert u1"]);
    let (events, _) = api.store().list(Resource::Events, None);
    let [event] = &events[..] else { panic!("one event: {events:?}") };
    assert_eq!(event["reason"], "FailedValidation");
    assert_eq!(event["type"], "Warning");
    assert_eq!(
        event["message"],
        "Error validating pod web-n_default(u2) from file due to duplicate pod name \"web-n\", ignoring"
    );
}

#[tokio::test]
async fn a_mirror_left_by_an_earlier_run_gives_its_status_and_one_of_no_static_pod_goes() {
    let (api, mut feed) = api();
    let web = static_pod("web", "u1", "busybox");
    let node = crate::mirror::node_ref("n");
    let at = jiff::Timestamp::from_second(1_700_000_000).unwrap();
    let started =
        PodStatus { start_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at)), ..running("Running") };
    let kept = api.store().create(Resource::Pods, mirror_object(&web, &node, Some(started.clone()))).unwrap();
    let old = static_pod("old", "u0", "busybox");
    api.store().create(Resource::Pods, mirror_object(&old, &node, None)).unwrap();

    api.set_static_pods(vec![web]);
    let given = feed.source.next().now_or_never().flatten();
    let Some(PodChange::Upsert(given)) = given else { panic!("the pod is given to the node") };
    assert_eq!(given.status.as_ref(), Some(&started), "the node goes on from the status last reported");
    assert_eq!(meta_str(&mirror(&api, "web-n").unwrap(), "uid"), meta_str(&kept, "uid"), "the mirror is kept");
    assert!(mirror(&api, "old-n").is_none(), "the orphaned mirror is deleted");
}
