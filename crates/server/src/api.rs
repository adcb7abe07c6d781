//! The resource handlers: list, watch, get, create, replace, patch and delete, the same for
//! every kind, with what differs per kind in [`crate::kinds`] and pod deletion in
//! [`crate::pods`].

use crate::errors::{ApiError, ApiResult};
use crate::kinds::{Prepared, prepare_create, prepare_resize, prepare_update};
use crate::limits::{Admission, DEFAULT_REQUEST_TIMEOUT};
use crate::persist::EventRows;
use crate::request::{FieldValidation, Params, RequestBody, content_type, json_body, warning_headers};
use crate::resources::{NODE_GROUP, Resource};
use crate::selectors::Filter;
use crate::server::ApiServer;
use crate::service_accounts;
use crate::store::{Wait, meta_str, object_rv};
use crate::table::{self, Include, wants_table};
use crate::watch;
use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use serde_json::{Value, json};

/// A resource of the core group.
pub fn resource(plural: &str) -> ApiResult<Resource> {
    Resource::from_plural("", plural).ok_or_else(ApiError::no_such_path)
}

/// A resource of the `node.k8s.io` group (all cluster-scoped).
fn node_resource(plural: &str) -> ApiResult<Resource> {
    Resource::from_plural(NODE_GROUP, plural).ok_or_else(ApiError::no_such_path)
}

fn with_warnings(code: StatusCode, body: Value, warnings: &[String]) -> Response {
    let mut resp = (code, axum::Json(body)).into_response();
    for (k, v) in warning_headers(warnings) {
        resp.headers_mut().append(k, v);
    }
    resp
}

/// `GET /api/v1/{resource}`: every namespace (or the namespaces themselves).
pub async fn list_all(
    State(s): State<ApiServer>,
    Path(plural): Path<String>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    admission: Option<Extension<Admission>>,
) -> ApiResult<Response> {
    list_or_watch(&s, resource(&plural)?, None, &p, &headers, admission).await
}

/// `GET /api/v1/namespaces/{ns}/{resource}`.
pub async fn list(
    State(s): State<ApiServer>,
    Path((ns, plural)): Path<(String, String)>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    admission: Option<Extension<Admission>>,
) -> ApiResult<Response> {
    let r = resource(&plural)?;
    if !r.namespaced() {
        return Err(ApiError::no_such_path());
    }
    list_or_watch(&s, r, Some(ns), &p, &headers, admission).await
}

async fn list_or_watch(
    s: &ApiServer,
    r: Resource,
    ns: Option<String>,
    p: &Params,
    headers: &HeaderMap,
    admission: Option<Extension<Admission>>,
) -> ApiResult<Response> {
    let filter = Filter::new(p.label_selector.as_deref(), p.field_selector.as_deref())?;
    let table = wants_table(headers).then(|| Include::parse(p.include_object.as_deref()));
    if p.is_watch() {
        return watch::serve(s.clone(), r, ns, filter, p, table);
    }
    if r == Resource::Events
        && let Some(rows) = s.store().event_rows(ns.as_deref())
    {
        // A file that cannot be read (a full disk, until it is opened again) is answered so.
        return Ok(streamed(rows?, filter, table, s.now(), admission.map(|a| a.0)));
    }
    let (items, rv) = s.store().list(r, ns.as_deref());
    let items: Vec<&Value> = items.iter().map(|v| v.as_ref()).filter(|o| filter.matches(o)).collect();
    if let Some(include) = table {
        return Ok(axum::Json(table::table(r, &items, rv, s.now(), include, true)).into_response());
    }
    Ok(axum::Json(json!({
        "kind": format!("{}List", r.kind()),
        "apiVersion": r.api_version(),
        "metadata": {"resourceVersion": rv.to_string()},
        "items": items,
    }))
    .into_response())
}

/// How much of a streamed list is sent at a time.
const CHUNK_BYTES: usize = 64 << 10;

/// An EventList (or its Table) read from the disk as it is sent, each event as it is stored
/// (parsed only to be filtered or made a row): memory for a chunk rather than for every event.
/// The whole list must be taken within the request's deadline, as the API server's request
/// timeout covers writing a list, or it ends unfinished; the request keeps its seat among those
/// in flight until then (the limits' own timeout and seat end with the response's head). Without
/// limits in front, the deadline is [`DEFAULT_REQUEST_TIMEOUT`] away.
fn streamed(
    rows: EventRows,
    filter: Filter,
    table: Option<Include>,
    now: Timestamp,
    admission: Option<Admission>,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(2);
    let handle = tokio::runtime::Handle::current();
    // A real client over a real connection: real time, as the transport's own timeouts.
    #[allow(clippy::disallowed_methods)]
    let deadline =
        admission.as_ref().map_or_else(|| tokio::time::Instant::now() + DEFAULT_REQUEST_TIMEOUT, |a| a.deadline);
    let send = move |chunk: Result<Bytes, std::io::Error>| {
        let sent = handle.block_on(tokio::time::timeout_at(deadline, tx.send(chunk)));
        matches!(sent, Ok(Ok(())))
    };
    let unreadable = |e: &dyn std::fmt::Display| {
        tracing::error!(%e, "an event list could not be read to its end");
        Err(std::io::Error::other(e.to_string()))
    };
    tokio::task::spawn_blocking(move || {
        let _admission = admission;
        let r = Resource::Events;
        let (mut head, items) = match table {
            Some(include) => (table::table(r, &[], rows.rv, now, include, true), "rows"),
            None => {
                let rv = rows.rv.to_string();
                let list = json!({"kind": format!("{}List", r.kind()), "apiVersion": r.api_version(),
                    "metadata": {"resourceVersion": rv}});
                (list, "items")
            }
        };
        if let Some(head) = head.as_object_mut() {
            head.remove(items);
        }
        // The head without its closing brace, then the items.
        let mut buf = head.to_string().into_bytes();
        buf.pop();
        buf.extend_from_slice(format!(r#","{items}":["#).as_bytes());
        let mut first = true;
        for row in rows {
            let bytes = match row {
                Ok(bytes) => bytes,
                Err(e) => {
                    send(unreadable(&e));
                    return;
                }
            };
            let item = match (table, filter.is_empty()) {
                (None, true) => bytes,
                (table, _) => {
                    let event = match serde_json::from_slice::<Value>(&bytes) {
                        Ok(event) => event,
                        Err(e) => {
                            send(unreadable(&e));
                            return;
                        }
                    };
                    if !filter.matches(&event) {
                        continue;
                    }
                    match table {
                        Some(include) => table::row(r, &event, now, include).to_string().into_bytes(),
                        None => bytes,
                    }
                }
            };
            if !std::mem::take(&mut first) {
                buf.push(b',');
            }
            buf.extend_from_slice(&item);
            if buf.len() >= CHUNK_BYTES {
                let full = std::mem::replace(&mut buf, Vec::with_capacity(CHUNK_BYTES + item.len()));
                if !send(Ok(Bytes::from(full))) {
                    return;
                }
            }
        }
        buf.extend_from_slice(b"]}");
        send(Ok(Bytes::from(buf)));
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn one(s: &ApiServer, r: Resource, obj: &Value, headers: &HeaderMap, p: &Params) -> Response {
    if wants_table(headers) {
        let rv = object_rv(obj).unwrap_or_default();
        return axum::Json(table::table(r, &[obj], rv, s.now(), Include::parse(p.include_object.as_deref()), true))
            .into_response();
    }
    axum::Json(obj).into_response()
}

/// `GET /api/v1/namespaces/{ns}/{resource}/{name}`.
pub async fn get(
    State(s): State<ApiServer>,
    Path((ns, plural, name)): Path<(String, String, String)>,
    Query(p): Query<Params>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let r = resource(&plural)?;
    let obj = s.store().get(r, &ns, &name)?;
    Ok(one(&s, r, &obj, &headers, &p))
}

/// `GET /api/v1/namespaces/{name}`.
pub async fn get_namespace(
    State(s): State<ApiServer>,
    Path(name): Path<String>,
    Query(p): Query<Params>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let obj = s.store().get(Resource::Namespaces, "", &name)?;
    Ok(one(&s, Resource::Namespaces, &obj, &headers, &p))
}

async fn create_in(
    s: &ApiServer,
    r: Resource,
    ns: &str,
    p: &Params,
    headers: &HeaderMap,
    body: &[u8],
) -> ApiResult<Response> {
    let input = crate::protobuf::body(headers, body, r).unwrap_or_else(|| json_body(headers, body))?;
    let v = FieldValidation::parse(p)?;
    let Prepared { object, warnings, pod } = prepare_create(s.store(), r, ns, input, v, s.node_name())?;
    if p.dry_run() {
        return Ok(with_warnings(StatusCode::CREATED, object, &warnings));
    }
    let stored = s.store().create(r, object)?;
    if r == Resource::Namespaces {
        // The serviceaccount controller's part, done at once: a pod may follow right away.
        service_accounts::ensure_default(s.store(), meta_str(&stored, "name").unwrap_or_default());
    }
    if let Some(mut pod) = pod {
        pod.metadata = serde_json::from_value(stored["metadata"].clone()).unwrap_or(pod.metadata);
        s.pod_created(&stored, pod);
    }
    Ok(with_warnings(StatusCode::CREATED, stored, &warnings))
}

/// `POST /api/v1/namespaces/{ns}/{resource}`.
pub async fn create(
    State(s): State<ApiServer>,
    Path((ns, plural)): Path<(String, String)>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    create_in(&s, resource(&plural)?, &ns, &p, &headers, &body).await
}

/// `POST /api/v1/{resource}` (namespaces).
pub async fn create_cluster(
    State(s): State<ApiServer>,
    Path(plural): Path<String>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    let r = resource(&plural)?;
    if r.namespaced() {
        return Err(ApiError::method_not_allowed("create", r.plural()));
    }
    create_in(&s, r, "", &p, &headers, &body).await
}

/// How a write prepares the stored version from the old one and the input: as an update of the
/// object, or of a pod's `resize` subresource.
type Prepare = fn(Resource, &Value, Value, FieldValidation, bool) -> ApiResult<Prepared>;

fn resize(_: Resource, old: &Value, input: Value, v: FieldValidation, is_patch: bool) -> ApiResult<Prepared> {
    prepare_resize(old, input, v, is_patch)
}

/// Stores a new version of an object computed from the stored one by `change`, then `prepare`.
#[allow(clippy::too_many_arguments)]
fn write(
    s: &ApiServer,
    r: Resource,
    ns: &str,
    name: &str,
    p: &Params,
    is_patch: bool,
    prepare: Prepare,
    change: impl FnOnce(&Value) -> ApiResult<Value>,
) -> ApiResult<Response> {
    let v = FieldValidation::parse(p)?;
    let mut warnings = vec![];
    let mut pod = None;
    let dry_run = p.dry_run();
    let mut dry = None;
    let stored = s.store().update(r, ns, name, |old| {
        let input = change(old)?;
        let prepared = prepare(r, old, input, v, is_patch)?;
        warnings = prepared.warnings;
        pod = prepared.pod;
        if dry_run {
            dry = Some(prepared.object);
            return Ok(None);
        }
        Ok(Some(prepared.object))
    })?;
    if let Some(obj) = dry {
        return Ok(with_warnings(StatusCode::OK, obj, &warnings));
    }
    if let Some(pod) = pod {
        s.pod_updated(&stored, pod);
    }
    Ok(with_warnings(StatusCode::OK, stored, &warnings))
}

/// `PUT .../{name}`: replace (conditional on `metadata.resourceVersion` when it is given).
pub async fn replace(
    State(s): State<ApiServer>,
    Path((ns, plural, name)): Path<(String, String, String)>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    replace_in(&s, resource(&plural)?, &ns, &name, &p, &headers, &body)
}

/// Replaces the object with the body, whose name, if given, must be the URL's.
fn replace_in(
    s: &ApiServer,
    r: Resource,
    ns: &str,
    name: &str,
    p: &Params,
    headers: &HeaderMap,
    body: &[u8],
) -> ApiResult<Response> {
    let input = json_body(headers, body)?;
    if meta_str(&input, "name").is_some_and(|n| n != name) {
        return Err(ApiError::bad_request("the name of the object does not match the name on the URL"));
    }
    write(s, r, ns, name, p, false, prepare_update, |_| Ok(input))
}

/// `PATCH .../{name}`: JSON patch, merge patch or strategic merge patch.
pub async fn patch(
    State(s): State<ApiServer>,
    Path((ns, plural, name)): Path<(String, String, String)>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    patch_in(&s, resource(&plural)?, &ns, &name, &p, &headers, &body)
}

/// Applies the body as a patch of the kind its Content-Type names.
fn patch_in(
    s: &ApiServer,
    r: Resource,
    ns: &str,
    name: &str,
    p: &Params,
    headers: &HeaderMap,
    body: &[u8],
) -> ApiResult<Response> {
    let ct = content_type(headers);
    write(s, r, ns, name, p, true, prepare_update, |old| crate::patching::apply(old, body, ct))
}

/// `PUT /api/v1/namespaces/{name}` and friends, for the cluster-scoped namespaces.
pub async fn replace_namespace(
    State(s): State<ApiServer>,
    Path(name): Path<String>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    let input = json_body(&headers, &body)?;
    write(&s, Resource::Namespaces, "", &name, &p, false, prepare_update, |_| Ok(input))
}

pub async fn patch_namespace(
    State(s): State<ApiServer>,
    Path(name): Path<String>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    let ct = content_type(&headers);
    write(&s, Resource::Namespaces, "", &name, &p, true, prepare_update, |old| crate::patching::apply(old, &body, ct))
}

/// `DELETE .../{name}`: pods stop gracefully first; other objects go at once.
pub async fn delete(
    State(s): State<ApiServer>,
    Path((ns, plural, name)): Path<(String, String, String)>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    let r = resource(&plural)?;
    let options = crate::pods::DeleteOptions::parse(&headers, &body, &p)?;
    if r == Resource::Pods {
        return crate::pods::delete(&s, &ns, &name, &options, p.dry_run()).map(|obj| axum::Json(obj).into_response());
    }
    delete_now(&s, r, &ns, &name, &options, &p)
}

/// Deletes an object at once, as the API server deletes one without finalizers.
fn delete_now(
    s: &ApiServer,
    r: Resource,
    ns: &str,
    name: &str,
    options: &crate::pods::DeleteOptions,
    p: &Params,
) -> ApiResult<Response> {
    let obj = s.store().get(r, ns, name)?;
    options.check_preconditions(r, &obj)?;
    if p.dry_run() {
        return Ok(axum::Json(success(r, &obj)).into_response());
    }
    let gone = s.store().delete(r, ns, name)?;
    if r == Resource::ServiceAccounts && name == service_accounts::DEFAULT {
        // As the serviceaccount controller does, while the namespace is there.
        service_accounts::ensure_default(s.store(), ns);
    }
    Ok(axum::Json(success(r, &gone)).into_response())
}

/// The `Status` the API server answers a finished deletion with.
fn success(r: Resource, obj: &Value) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": meta_str(obj, "name"), "group": r.group(), "kind": r.plural(), "uid": meta_str(obj, "uid")},
    })
}

/// `GET /apis/node.k8s.io/v1/{resource}`: list or watch.
pub async fn node_list(
    State(s): State<ApiServer>,
    Path(plural): Path<String>,
    Query(p): Query<Params>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    list_or_watch(&s, node_resource(&plural)?, None, &p, &headers, None).await
}

/// `POST /apis/node.k8s.io/v1/{resource}`.
pub async fn node_create(
    State(s): State<ApiServer>,
    Path(plural): Path<String>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    create_in(&s, node_resource(&plural)?, "", &p, &headers, &body).await
}

/// `GET /apis/node.k8s.io/v1/{resource}/{name}`.
pub async fn node_get(
    State(s): State<ApiServer>,
    Path((plural, name)): Path<(String, String)>,
    Query(p): Query<Params>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let r = node_resource(&plural)?;
    let obj = s.store().get(r, "", &name)?;
    Ok(one(&s, r, &obj, &headers, &p))
}

/// `PUT /apis/node.k8s.io/v1/{resource}/{name}`.
pub async fn node_replace(
    State(s): State<ApiServer>,
    Path((plural, name)): Path<(String, String)>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    replace_in(&s, node_resource(&plural)?, "", &name, &p, &headers, &body)
}

/// `PATCH /apis/node.k8s.io/v1/{resource}/{name}`.
pub async fn node_patch(
    State(s): State<ApiServer>,
    Path((plural, name)): Path<(String, String)>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    patch_in(&s, node_resource(&plural)?, "", &name, &p, &headers, &body)
}

/// `DELETE /apis/node.k8s.io/v1/{resource}/{name}`: at once (pods using a class keep running,
/// as on a cluster).
pub async fn node_delete(
    State(s): State<ApiServer>,
    Path((plural, name)): Path<(String, String)>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    let r = node_resource(&plural)?;
    let options = crate::pods::DeleteOptions::parse(&headers, &body, &p)?;
    delete_now(&s, r, "", &name, &options, &p)
}

/// `DELETE /api/v1/namespaces/{name}`: everything in it goes (pods gracefully), then the
/// namespace. `default`, `kube-system` and `kube-public` stay.
pub async fn delete_namespace(
    State(s): State<ApiServer>,
    Path(name): Path<String>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    let options = crate::pods::DeleteOptions::parse(&headers, &body, &p)?;
    if crate::server::BUILTIN_NAMESPACES.contains(&name.as_str()) {
        return Err(ApiError::forbidden(Resource::Namespaces, &name, "this namespace may not be deleted"));
    }
    let obj = s.store().get(Resource::Namespaces, "", &name)?;
    options.check_preconditions(Resource::Namespaces, &obj)?;
    if p.dry_run() {
        return Ok(axum::Json(success(Resource::Namespaces, &obj)).into_response());
    }
    for r in Resource::ALL.into_iter().filter(|r| r.namespaced()) {
        if r == Resource::Events {
            // Queued, then one commit for them all, as their expiry does: not a commit each.
            for event in s.store().event_names(&name)? {
                let _ = s.store().delete_with(Wait::Queued, r, &name, &event, |_| true);
            }
            s.store().flush()?;
            continue;
        }
        let (items, _) = s.store().try_list(r, Some(&name))?;
        for item in items {
            let item_name = meta_str(&item, "name").unwrap_or_default();
            let _ = if r == Resource::Pods && crate::mirror::mirrored_uid(&item).is_some() {
                // Not made again: the namespace goes.
                crate::pods::delete_mirror(&s, &name, item_name, &item).map(drop)
            } else if r == Resource::Pods {
                crate::pods::delete(&s, &name, item_name, &options, false).map(drop)
            } else {
                s.store().delete(r, &name, item_name).map(drop)
            };
        }
    }
    let gone = s.store().delete(Resource::Namespaces, "", &name)?;
    Ok(axum::Json(success(Resource::Namespaces, &gone)).into_response())
}

/// The pod named by a subresource path (`.../pods/{name}/{sub}`); 404 for other kinds.
fn pod_path(plural: &str) -> ApiResult<()> {
    if resource(plural)? != Resource::Pods {
        return Err(ApiError::no_such_path());
    }
    Ok(())
}

/// `GET .../pods/{name}/{status|log|exec|attach|portforward}`.
pub async fn sub_get(
    State(s): State<ApiServer>,
    Path((ns, plural, name, sub)): Path<(String, String, String, String)>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    req: axum::extract::Request,
) -> ApiResult<Response> {
    pod_path(&plural)?;
    match sub.as_str() {
        "status" | "resize" => {
            let obj = s.store().get(Resource::Pods, &ns, &name)?;
            Ok(one(&s, Resource::Pods, &obj, &headers, &p))
        }
        "log" => crate::logs::get(&s, &ns, &name, req.uri()).await,
        "exec" | "attach" | "portforward" => crate::streaming::proxy(&s, &ns, &name, &sub, req).await,
        _ => Err(ApiError::no_such_path()),
    }
}

/// `POST .../pods/{name}/{exec|attach|portforward}` (kubectl's SPDY and WebSocket upgrades).
pub async fn sub_post(
    State(s): State<ApiServer>,
    Path((ns, plural, name, sub)): Path<(String, String, String, String)>,
    req: axum::extract::Request,
) -> ApiResult<Response> {
    pod_path(&plural)?;
    match sub.as_str() {
        "exec" | "attach" | "portforward" => crate::streaming::proxy(&s, &ns, &name, &sub, req).await,
        _ => Err(ApiError::method_not_allowed("create", &format!("pods/{sub}"))),
    }
}

/// A status written through the API replaces the stored one until the pod's worker publishes
/// its next status: the node, not the client, owns a pod's status.
fn write_status(
    s: &ApiServer,
    ns: &str,
    name: &str,
    change: impl FnOnce(&Value) -> ApiResult<Value>,
) -> ApiResult<Response> {
    let stored = s.store().update(Resource::Pods, ns, name, |old| {
        let new = change(old)?;
        let status: k8s_openapi::api::core::v1::PodStatus = serde_json::from_value(new["status"].clone())
            .map_err(|e| ApiError::bad_request(format!("Pod in version \"v1\" cannot be handled as a Pod: {e}")))?;
        let mut out = old.clone();
        out["status"] = serde_json::to_value(status).map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(Some(out))
    })?;
    Ok(axum::Json(stored).into_response())
}

/// `PUT .../pods/{name}/{status|resize}`.
pub async fn sub_put(
    State(s): State<ApiServer>,
    Path((ns, plural, name, sub)): Path<(String, String, String, String)>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    pod_path(&plural)?;
    let input = json_body(&headers, &body)?;
    match sub.as_str() {
        "status" => write_status(&s, &ns, &name, |_| Ok(input)),
        "resize" => write(&s, Resource::Pods, &ns, &name, &p, false, resize, |_| Ok(input)),
        _ => Err(ApiError::method_not_allowed("update", &format!("pods/{sub}"))),
    }
}

/// `PATCH .../pods/{name}/{status|resize}`.
pub async fn sub_patch(
    State(s): State<ApiServer>,
    Path((ns, plural, name, sub)): Path<(String, String, String, String)>,
    Query(p): Query<Params>,
    headers: HeaderMap,
    RequestBody(body): RequestBody,
) -> ApiResult<Response> {
    pod_path(&plural)?;
    let ct = content_type(&headers);
    let patched = |old: &Value| crate::patching::apply(old, &body, ct);
    match sub.as_str() {
        "status" => write_status(&s, &ns, &name, patched),
        "resize" => write(&s, Resource::Pods, &ns, &name, &p, true, resize, patched),
        _ => Err(ApiError::method_not_allowed("patch", &format!("pods/{sub}"))),
    }
}
