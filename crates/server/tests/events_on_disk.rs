//! Events of a store on disk through the local API: an EventList streamed from the file (as
//! stored, in chunks, filtered), events expiring an hour after they were last seen by their
//! index, and every event still there when `serve` opens its store again.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use futures_util::StreamExt;
use jiff::{SignedDuration, Timestamp};
use podwright_runtime::{Clock, FakeRuntime};
use podwright_server::limits::Limits;
use podwright_server::{ApiServer, ServerConfig};
use serde_json::{Value, json};
use tower::ServiceExt;

/// A root directory of its own, removed when the test ends.
struct Root(std::path::PathBuf);

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(root: &Root) -> ApiServer {
    let clock = Clock::new();
    let config = ServerConfig { node_name: "n".into(), root: root.0.clone(), host_ip: None };
    ApiServer::open(config, clock, FakeRuntime::new(clock)).unwrap().0
}

async fn send(api: &ApiServer, method: Method, uri: &str, body: Option<&Value>) -> (StatusCode, Value) {
    send_accepting(api, method, uri, body, "application/json").await
}

/// kubectl get's Accept.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

async fn send_accepting(
    api: &ApiServer,
    method: Method,
    uri: &str,
    body: Option<&Value>,
    accept: &str,
) -> (StatusCode, Value) {
    let body = body.map_or_else(Body::empty, |b| Body::from(serde_json::to_vec(b).unwrap()));
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("accept", accept)
        .body(body);
    let response = api.router().oneshot(request.unwrap()).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes)));
    (status, body)
}

/// Events made, one in ten in the namespace `other`.
const EVENTS: usize = 600;

fn names(list: &Value) -> Vec<String> {
    list["items"].as_array().unwrap().iter().map(|e| e["metadata"]["name"].as_str().unwrap().to_string()).collect()
}

/// The namespace `other` and [`EVENTS`] events with 1 KiB messages (enough for several chunks
/// of a stream and several reads of the file), one in ten in `other` and last seen half an hour
/// after `t0`, the rest at `t0`; as (namespace, name).
async fn make_events(api: &ApiServer, t0: Timestamp) -> Vec<(&'static str, String)> {
    let (status, _) =
        send(api, Method::POST, "/api/v1/namespaces", Some(&json!({"metadata": {"name": "other"}}))).await;
    assert_eq!(status, StatusCode::CREATED);
    let message = "m".repeat(1024);
    let mut made = vec![];
    for i in 0..EVENTS {
        let (ns, seen) = if i % 10 == 0 { ("other", t0 + SignedDuration::from_mins(30)) } else { ("default", t0) };
        let name = format!("web.{i:04}");
        let event = json!({"metadata": {"name": name, "namespace": ns}, "reason": format!("R{}", i % 3),
            "message": message, "involvedObject": {"kind": "Pod", "name": "web", "namespace": ns},
            "lastTimestamp": seen.to_string()});
        let (status, _) = send(api, Method::POST, &format!("/api/v1/namespaces/{ns}/events"), Some(&event)).await;
        assert_eq!(status, StatusCode::CREATED);
        made.push((ns, name));
    }
    made
}

fn root(test: &str) -> Root {
    let root = Root(std::env::temp_dir().join(format!("pw-{test}-{}", std::process::id())));
    std::fs::create_dir_all(&root.0).unwrap();
    root
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_on_disk_are_listed_from_it_expire_by_their_index_and_are_kept() {
    let root = root("events-on-disk");
    let t0: Timestamp = "2026-11-28T10:00:00Z".parse().unwrap();
    let api = open(&root);
    let made = make_events(&api, t0).await;
    let message = "m".repeat(1024);
    let rv = api.store().resource_version().to_string();

    let (status, all) = send(&api, Method::GET, "/api/v1/events", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!((all["kind"].as_str(), all["apiVersion"].as_str()), (Some("EventList"), Some("v1")));
    assert_eq!(all["metadata"]["resourceVersion"], json!(rv));
    let mut expected: Vec<String> = made.iter().map(|(_, n)| n.clone()).collect();
    let mut got = names(&all);
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    assert_eq!(all["items"][0]["message"], json!(message));

    let (_, other) = send(&api, Method::GET, "/api/v1/namespaces/other/events", None).await;
    assert_eq!(names(&other), (0..EVENTS).step_by(10).map(|i| format!("web.{i:04}")).collect::<Vec<_>>());
    let (_, r1) = send(&api, Method::GET, "/api/v1/namespaces/default/events?fieldSelector=reason%3DR1", None).await;
    let want: Vec<String> = (0..EVENTS).filter(|i| i % 10 != 0 && i % 3 == 1).map(|i| format!("web.{i:04}")).collect();
    assert_eq!(names(&r1), want);

    // kubectl get events: a Table, its rows made one event at a time.
    let (_, table) = send_accepting(&api, Method::GET, "/api/v1/namespaces/other/events", None, TABLE).await;
    assert_eq!((table["kind"].as_str(), table["metadata"]["resourceVersion"].as_str()), (Some("Table"), Some(&*rv)));
    let columns = table["columnDefinitions"].as_array().unwrap().len();
    let rows = table["rows"].as_array().unwrap();
    assert_eq!(rows.len(), EVENTS / 10);
    assert!(rows.iter().all(|r| r["cells"].as_array().unwrap().len() == columns), "{table}");
    assert_eq!(rows[1]["object"]["metadata"]["name"], "web.0010");

    // An hour after t0, the events of `default` (last seen at t0) go; `other`'s stay.
    assert_eq!(api.expire_events_at(t0 + SignedDuration::from_mins(59)), 0);
    assert_eq!(api.expire_events_at(t0 + SignedDuration::from_mins(61)), EVENTS - EVENTS / 10);
    drop(api);
    let api = open(&root);
    let (_, all) = send(&api, Method::GET, "/api/v1/events", None).await;
    assert_eq!(names(&all), names(&other));
    let (status, one) = send(&api, Method::GET, "/api/v1/namespaces/other/events/web.0010", None).await;
    assert_eq!((status, one["reason"].as_str()), (StatusCode::OK, Some("R1")));
    assert_eq!(api.expire_events_at(t0 + SignedDuration::from_mins(91)), EVENTS / 10);
    let (_, all) = send(&api, Method::GET, "/api/v1/events", None).await;
    assert_eq!(all["items"], json!([]));
}

/// A list sent as it is read holds its seat among the requests in flight until it is sent, and
/// must be taken within the request timeout, as the API server's handler would: a client that
/// stops reading neither escapes `--max-requests-inflight` nor holds the file past the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The limits' deadline is real time, as a real client's.
#[allow(clippy::disallowed_methods)]
async fn a_streamed_list_keeps_its_seat_and_its_deadline_until_it_is_sent() {
    let root = root("events-streamed-limits");
    let api = open(&root);
    make_events(&api, "2026-11-28T10:00:00Z".parse().unwrap()).await;
    let limits = Limits {
        max_requests_inflight: 1,
        max_mutating_requests_inflight: 1,
        request_timeout: std::time::Duration::from_secs(1),
    };
    let router = limits.apply(api.router());
    let get = |uri: &str| Request::builder().uri(uri).body(Body::empty()).unwrap();

    let unread = router.clone().oneshot(get("/api/v1/events")).await.unwrap();
    assert_eq!(unread.status(), StatusCode::OK);
    // Its first chunk read: the list is being sent (a thread of its own, which then waits for
    // this client, which reads no more).
    let mut unread = unread.into_body().into_data_stream();
    let first = unread.next().await.unwrap().unwrap();
    let turned_away = router.clone().oneshot(get("/api/v1/namespaces/default/configmaps")).await.unwrap();
    assert_eq!(turned_away.status(), StatusCode::TOO_MANY_REQUESTS);

    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let mut bytes = first.to_vec();
    while let Some(chunk) = unread.next().await {
        bytes.extend_from_slice(&chunk.unwrap());
    }
    assert!(serde_json::from_slice::<Value>(&bytes).is_err(), "the list was sent whole after its deadline");
    assert!(bytes.len() < EVENTS * 1024, "{} bytes", bytes.len());
    let admitted = router.clone().oneshot(get("/api/v1/namespaces/default/configmaps")).await.unwrap();
    assert_eq!(admitted.status(), StatusCode::OK, "the unfinished list's seat was given back");

    // Read as it is sent, the same list is whole.
    let read = router.oneshot(get("/api/v1/events")).await.unwrap();
    let list: Value =
        serde_json::from_slice(&axum::body::to_bytes(read.into_body(), usize::MAX).await.unwrap()).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), EVENTS);
}

/// A watch of events from now (no resourceVersion) begins with those in the file, read as they
/// are sent and filtered, then goes on with what happens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The stream is read in real time.
#[allow(clippy::disallowed_methods)]
async fn a_watch_of_events_begins_with_those_on_disk_then_follows() {
    let root = root("events-watched");
    let api = open(&root);
    let t0: Timestamp = "2026-11-28T10:00:00Z".parse().unwrap();
    make_events(&api, t0).await;
    let uri = "/api/v1/namespaces/other/events?watch=true&fieldSelector=reason%3DR1";
    let response = api.router().oneshot(Request::builder().uri(uri).body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = response.into_body().into_data_stream();
    let mut pending = Vec::new();
    let mut next_line = async || -> Value {
        loop {
            if let Some(at) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=at).collect();
                return serde_json::from_slice(&line).unwrap();
            }
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), stream.next()).await;
            pending.extend_from_slice(&chunk.expect("no event within 10 s").unwrap().unwrap());
        }
    };
    let want: Vec<String> = (0..EVENTS).step_by(10).filter(|i| i % 3 == 1).map(|i| format!("web.{i:04}")).collect();
    let mut got = vec![];
    for _ in &want {
        let ev = next_line().await;
        assert_eq!(ev["type"], "ADDED", "{ev}");
        got.push(ev["object"]["metadata"]["name"].as_str().unwrap().to_string());
    }
    assert_eq!(got, want);
    let late = json!({"metadata": {"name": "late", "namespace": "other"}, "reason": "R1", "message": "m",
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "other"}, "lastTimestamp": t0.to_string()});
    assert_eq!(send(&api, Method::POST, "/api/v1/namespaces/other/events", Some(&late)).await.0, StatusCode::CREATED);
    let ev = next_line().await;
    assert_eq!((ev["type"].as_str(), ev["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("late")));
}

/// A client that does not read the events a watch begins with loses its watch, as it would
/// any other (the API server ends an unresponsive watcher): it holds no thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The watch's patience is real time.
#[allow(clippy::disallowed_methods)]
async fn a_watch_of_events_whose_client_does_not_read_ends() {
    let root = root("events-watch-unread");
    let api = open(&root);
    make_events(&api, "2026-11-28T10:00:00Z".parse().unwrap()).await;
    let request = Request::builder().uri("/api/v1/events?watch=true").body(Body::empty()).unwrap();
    let response = api.router().oneshot(request).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        axum::body::to_bytes(response.into_body(), usize::MAX),
    );
    let bytes = read.await.expect("the watch did not end").unwrap();
    let lines = bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count();
    assert!((1..EVENTS).contains(&lines), "{lines} events sent");
}

/// A namespace's deletion removes its events from the file (found by their keys, none parsed),
/// and only its own: the other namespace's are all still listed, and still there once the store
/// is opened again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_deleted_takes_its_events_from_the_file_and_no_others() {
    let root = root("events-namespace-deleted");
    let api = open(&root);
    let made = make_events(&api, "2026-11-28T10:00:00Z".parse().unwrap()).await;
    let mut kept: Vec<String> = made.iter().filter(|(ns, _)| *ns == "default").map(|(_, n)| n.clone()).collect();
    kept.sort();

    let (status, _) = send(&api, Method::DELETE, "/api/v1/namespaces/other", None).await;
    assert_eq!(status, StatusCode::OK);
    let (_, other) = send(&api, Method::GET, "/api/v1/namespaces/other/events", None).await;
    assert_eq!(other["items"], json!([]));
    drop(api);
    let api = open(&root);
    let (_, all) = send(&api, Method::GET, "/api/v1/events", None).await;
    let mut left = names(&all);
    left.sort();
    assert_eq!(left, kept);
}
