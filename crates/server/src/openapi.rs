//! The OpenAPI documents kubectl reads before `apply`, `create -f`, `replace` and `edit` when it
//! validates (the default): v3 (`/openapi/v3` and the `api/v1` group document) for kubectl
//! 1.27+, v2 (`/openapi/v2`, gnostic's protobuf, or the old `/swagger-2.0.0.pb-v1`) for 1.20 and
//! 1.27. Served as kube-openapi's `pkg/handler` and `pkg/handler3` serve them.
//!
//! The documents hold no schemas: a PATCH operation per served kind, carrying the kind
//! (`x-kubernetes-group-version-kind`) and the `fieldValidation` query parameter. From that
//! kubectl 1.27+ conclude that the server validates (cli-runtime
//! `pkg/resource/query_param_verifier_v3.go`) and send `fieldValidation=Strict`; kubectl 1.20
//! finds no definition of the kind, so its client-side check has nothing to check and the
//! server's `Warning` headers report unknown fields; it does look for `dryRun` on the v2
//! operations before `--dry-run=server` (an info-only v2 gets `doesn't support dry-run`, seen).
//! Schemas would have to be all of upstream's: kubectl computes apply patches from the
//! definitions it finds, and a partial Pod schema broke `apply`, `edit` and `replace` for 1.20
//! (local-api.md §2). Without a strategic-merge request body in the v3 operations kubectl 1.32
//! computes apply patches from its compiled-in types (kubectl `pkg/cmd/apply/patcher.go`).

use crate::resources::Resource;
use crate::server::ApiServer;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::LazyLock;

const GVK_EXTENSION: &str = "x-kubernetes-group-version-kind";
/// The query parameters of every PATCH operation: the ones the handlers honour.
const PATCH_PARAMETERS: [&str; 3] = ["dryRun", "fieldManager", "fieldValidation"];
/// gnostic's `openapi.v2.Document` in protobuf, and the older spelling kubectl still sends.
const V2_PROTOBUF: &str = "com.github.proto-openapi.spec.v2.v1.0+protobuf";
const V2_PROTOBUF_DEPRECATED: &str = "com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The only group-version: the core group.
const CORE_GROUP: &str = "api/v1";

/// A PATCH operation: the item's path and the kind it patches.
struct PatchOperation {
    path: String,
    kind: &'static str,
}

/// Every patchable path the API serves, subresources included, sorted as the JSON documents
/// list them.
fn patch_operations() -> Vec<PatchOperation> {
    let mut ops = vec![];
    for r in Resource::of_group("") {
        let item = if r.namespaced() {
            format!("/api/v1/namespaces/{{namespace}}/{}/{{name}}", r.plural())
        } else {
            format!("/api/v1/{}/{{name}}", r.plural())
        };
        for (sub, kind, verbs) in r.subresources() {
            if verbs.contains(&"patch") {
                ops.push(PatchOperation { path: format!("{item}/{sub}"), kind });
            }
        }
        if r.verbs().contains(&"patch") {
            ops.push(PatchOperation { path: item, kind: r.kind() });
        }
    }
    ops.sort_by(|a, b| a.path.cmp(&b.path));
    ops
}

fn gvk(kind: &str) -> Value {
    json!({"group": "", "version": "v1", "kind": kind})
}

fn info() -> Value {
    json!({"title": "Kubernetes", "version": "unversioned"})
}

/// The `paths` of both documents; only the parameters' shape differs between v2 and v3.
fn paths(ops: &[PatchOperation], parameter: fn(&str) -> Value) -> Map<String, Value> {
    let parameters: Vec<Value> = PATCH_PARAMETERS.into_iter().map(parameter).collect();
    ops.iter()
        .map(|op| {
            let patch = json!({
                "parameters": parameters,
                "responses": {"200": {"description": "OK"}},
                GVK_EXTENSION: gvk(op.kind),
            });
            (op.path.clone(), json!({"patch": patch}))
        })
        .collect()
}

fn v3_document(ops: &[PatchOperation]) -> Value {
    let paths = paths(ops, |name| json!({"name": name, "in": "query", "schema": {"type": "string"}}));
    json!({"openapi": "3.0.0", "info": info(), "paths": paths, "components": {"schemas": {}}})
}

fn v2_document(ops: &[PatchOperation]) -> Value {
    let paths = paths(ops, |name| json!({"name": name, "in": "query", "type": "string"}));
    json!({"swagger": "2.0", "info": info(), "paths": paths})
}

/// Protobuf's wire format, as far as these documents need it: length-delimited fields (strings
/// and messages), their keys and lengths being varints.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        // Wire type 2: length-delimited.
        self.varint(u64::from(field) << 3 | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    fn string(&mut self, field: u32, s: &str) -> &mut Self {
        self.bytes(field, s.as_bytes())
    }

    fn message(&mut self, field: u32, m: Message) -> &mut Self {
        self.bytes(field, &m.0)
    }
}

fn message(build: impl FnOnce(&mut Message)) -> Message {
    let mut m = Message::default();
    build(&mut m);
    m
}

/// [`v2_document`] as gnostic's `openapi.v2.Document` (google/gnostic
/// `openapiv2/OpenAPIv2.proto`); field numbers in the comments' message names.
fn v2_protobuf(ops: &[PatchOperation]) -> Vec<u8> {
    let info = message(|m| {
        // Info: title = 1, version = 2.
        m.string(1, "Kubernetes").string(2, "unversioned");
    });
    let paths = message(|m| {
        for op in ops {
            // QueryParameterSubSchema: in = 2, name = 4, type = 6; in NonBodyParameter = 3,
            // in Parameter = 2 (non_body_parameter), in ParametersItem = 1.
            let parameters = PATCH_PARAMETERS.iter().map(|p| {
                let query = message(|q| {
                    q.string(2, "query").string(4, p).string(6, "string");
                });
                let non_body = message(|n| {
                    n.message(3, query);
                });
                let parameter = message(|pm| {
                    pm.message(2, non_body);
                });
                message(|item| {
                    item.message(1, parameter);
                })
            });
            // Responses.response_code = 1: NamedResponseValue{name = 1, value = 2:
            // ResponseValue{response = 1: Response{description = 1}}}.
            let ok = message(|r| {
                let response = message(|r| {
                    r.string(1, "OK");
                });
                let value = message(|v| {
                    v.message(1, response);
                });
                r.string(1, "200").message(2, value);
            });
            let responses = message(|r| {
                r.message(1, ok);
            });
            // NamedAny{name = 1, value = 2: Any{yaml = 2}}: gnostic keeps extensions as YAML.
            let extension = message(|e| {
                let any = message(|a| {
                    a.string(2, &format!("group: \"\"\nkind: {}\nversion: v1\n", op.kind));
                });
                e.string(1, GVK_EXTENSION).message(2, any);
            });
            // Operation: parameters = 8, responses = 9, vendor_extension = 13.
            let operation = message(|o| {
                for p in parameters {
                    o.message(8, p);
                }
                o.message(9, responses).message(13, extension);
            });
            // PathItem.patch = 8; NamedPathItem{name = 1, value = 2}; Paths.path = 2.
            let item = message(|i| {
                i.message(8, operation);
            });
            let named = message(|n| {
                n.string(1, &op.path).message(2, item);
            });
            m.message(2, named);
        }
    });
    // Document: swagger = 1, info = 2, paths = 8.
    message(|d| {
        d.string(1, "2.0").message(2, info).message(8, paths);
    })
    .0
}

/// The documents, built once; hashes as kube-openapi computes them (SHA-512 of the JSON, in
/// upper-case hex), so that a changed document has a new hash and ETag.
struct Documents {
    v2_json: Vec<u8>,
    v2_protobuf: Vec<u8>,
    /// Both v2 forms carry the JSON's ETag, as kube-openapi's do.
    v2_etag: String,
    v3_index: Vec<u8>,
    v3_index_etag: String,
    v3_group: Vec<u8>,
    v3_group_hash: String,
}

fn sha512_hex(data: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA512, data);
    digest.as_ref().iter().map(|b| format!("{b:02X}")).collect()
}

fn group_url(hash: &str) -> String {
    format!("/openapi/v3/{CORE_GROUP}?hash={hash}")
}

impl Documents {
    fn build() -> Documents {
        let ops = patch_operations();
        let v2_json = v2_document(&ops).to_string().into_bytes();
        let v3_group = v3_document(&ops).to_string().into_bytes();
        let v3_group_hash = sha512_hex(&v3_group);
        let v3_index =
            json!({"paths": {CORE_GROUP: {"serverRelativeURL": group_url(&v3_group_hash)}}}).to_string().into_bytes();
        Documents {
            v2_etag: sha512_hex(&v2_json),
            v2_json,
            v2_protobuf: v2_protobuf(&ops),
            v3_index_etag: sha512_hex(&v3_index),
            v3_index,
            v3_group,
            v3_group_hash,
        }
    }
}

static DOCUMENTS: LazyLock<Documents> = LazyLock::new(Documents::build);

/// The first of `offered` (subtypes of `application/`) that the Accept header takes, its
/// clauses tried by quality, then specificity (goautoneg's order). No Accept header takes all.
fn negotiate(headers: &HeaderMap, offered: &[&'static str]) -> Option<&'static str> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).filter(|a| !a.trim().is_empty());
    let mut clauses: Vec<(f32, usize, &str, &str)> = accept
        .unwrap_or("*/*")
        .split(',')
        .filter_map(|clause| {
            let mut parts = clause.split(';');
            let range = parts.next()?.trim();
            let (ty, sub) = if range == "*" { ("*", "*") } else { range.split_once('/')? };
            let q = parts.find_map(|p| p.trim().strip_prefix("q=")?.parse().ok()).unwrap_or(1.0);
            let wildcards = usize::from(ty == "*") + usize::from(sub == "*");
            (q > 0.0).then_some((q, wildcards, ty, sub))
        })
        .collect();
    clauses.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    clauses.iter().find_map(|(_, _, ty, sub)| {
        offered.iter().copied().find(|o| matches!(*ty, "application" | "*") && (sub == o || *sub == "*"))
    })
}

/// `If-None-Match` names this (quoted) ETag, or any.
fn not_modified(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == "*" || t == etag)
}

/// A document with its ETag; 304 when the client has it.
fn document(headers: &HeaderMap, content_type: &str, etag: &str, body: &'static [u8]) -> Response {
    let etag = format!("\"{etag}\"");
    let mut resp = if not_modified(headers, &etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, content_type.to_string())], body).into_response()
    };
    if let Ok(v) = HeaderValue::from_str(&etag) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    resp
}

fn negotiated(mut resp: Response) -> Response {
    resp.headers_mut().insert(header::VARY, HeaderValue::from_static("Accept"));
    resp
}

/// `GET /openapi/v2`: JSON or protobuf, as asked; 406 for anything else.
pub async fn v2(headers: HeaderMap) -> Response {
    let d = &*DOCUMENTS;
    let resp = match negotiate(&headers, &["json", V2_PROTOBUF_DEPRECATED, V2_PROTOBUF]) {
        Some("json") => document(&headers, "application/json", &d.v2_etag, &d.v2_json),
        Some(_) => document(&headers, &format!("application/{V2_PROTOBUF}"), &d.v2_etag, &d.v2_protobuf),
        None => StatusCode::NOT_ACCEPTABLE.into_response(),
    };
    negotiated(resp)
}

/// `GET /swagger-2.0.0.pb-v1`: the protobuf v2 document where API servers before 1.14 kept it;
/// kubectl 1.20 asks there when `/openapi/v2` fails.
pub async fn v2_protobuf_legacy(headers: HeaderMap) -> Response {
    let d = &*DOCUMENTS;
    document(&headers, "application/octet-stream", &d.v2_etag, &d.v2_protobuf)
}

/// `GET /openapi/v3`: where each group-version's document is, with its hash.
pub async fn v3_index(headers: HeaderMap) -> Response {
    let d = &*DOCUMENTS;
    document(&headers, "application/json", &d.v3_index_etag, &d.v3_index)
}

#[derive(Debug, Default, Deserialize)]
pub struct GroupQuery {
    hash: Option<String>,
}

/// `GET /openapi/v3/api/v1`: the core group's document (JSON only; no v3 protobuf). With the
/// current `?hash=` the client may keep it forever; with an old one it is sent to the current.
pub async fn v3_group(State(s): State<ApiServer>, Query(q): Query<GroupQuery>, headers: HeaderMap) -> Response {
    group_document(&headers, q.hash.as_deref(), s.now())
}

/// [`v3_group`] at time `now` (hashed documents expire a year later).
fn group_document(headers: &HeaderMap, hash: Option<&str>, now: Timestamp) -> Response {
    let d = &*DOCUMENTS;
    if negotiate(headers, &["json"]).is_none() {
        return negotiated(StatusCode::NOT_ACCEPTABLE.into_response());
    }
    let resp = match hash.filter(|h| !h.is_empty()) {
        Some(h) if h != d.v3_group_hash => {
            let location = group_url(&d.v3_group_hash);
            (StatusCode::MOVED_PERMANENTLY, [(header::LOCATION, location)]).into_response()
        }
        Some(_) => {
            let mut resp = document(headers, "application/json", &d.v3_group_hash, &d.v3_group);
            let expires = now + SignedDuration::from_hours(365 * 24);
            let h = resp.headers_mut();
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, immutable"));
            if let Ok(at) = jiff::fmt::rfc2822::DateTimePrinter::new().timestamp_to_rfc9110_string(&expires)
                && let Ok(v) = HeaderValue::from_str(&at)
            {
                h.insert(header::EXPIRES, v);
            }
            resp
        }
        None => document(headers, "application/json", &d.v3_group_hash, &d.v3_group),
    };
    negotiated(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protobuf::{Field, fields, varint};

    fn bytes(msg: &[u8], number: u32) -> Vec<&[u8]> {
        fields(msg)
            .expect("valid protobuf")
            .into_iter()
            .filter_map(|f| match f {
                Field::Bytes(n, b) if n == number => Some(b),
                _ => None,
            })
            .collect()
    }

    fn one(msg: &[u8], number: u32) -> &[u8] {
        let found = bytes(msg, number);
        assert_eq!(found.len(), 1, "field {number} once");
        found[0]
    }

    fn text(msg: &[u8], number: u32) -> &str {
        std::str::from_utf8(one(msg, number)).unwrap()
    }

    #[test]
    fn varints_and_lengths_decode_as_written() {
        for v in [0, 1, 127, 128, 300, 16_383, 16_384, u64::from(u32::MAX), u64::MAX] {
            let mut m = Message::default();
            m.varint(v);
            let mut buf = m.0.as_slice();
            assert_eq!(varint(&mut buf), Some(v));
            assert!(buf.is_empty());
        }
        let long = "x".repeat(300);
        let mut m = Message::default();
        m.string(16, &long).string(1, "");
        let decoded = fields(&m.0).unwrap();
        assert!(
            matches!(decoded[..], [Field::Bytes(16, a), Field::Bytes(1, b)] if a == long.as_bytes() && b.is_empty())
        );
    }

    /// What the protobuf says, decoded field by field, is what the JSON says.
    #[test]
    fn the_v2_protobuf_is_the_json_document() {
        let d = Documents::build();
        let json: Value = serde_json::from_slice(&d.v2_json).unwrap();
        let doc = d.v2_protobuf.as_slice();
        assert_eq!(text(doc, 1), "2.0");
        let info = one(doc, 2);
        assert_eq!((text(info, 1), text(info, 2)), ("Kubernetes", "unversioned"));
        let paths = bytes(one(doc, 8), 2);
        let json_paths = json["paths"].as_object().unwrap();
        assert_eq!(paths.len(), json_paths.len());
        for (named, (path, item)) in paths.into_iter().zip(json_paths) {
            assert_eq!(text(named, 1), path);
            let op = one(one(named, 2), 8);
            let params: Vec<(&str, &str, &str)> = bytes(op, 8)
                .into_iter()
                .map(|p| {
                    let query = one(one(one(p, 1), 2), 3);
                    (text(query, 4), text(query, 2), text(query, 6))
                })
                .collect();
            let json_params: Vec<(&str, &str, &str)> = item["patch"]["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p["name"].as_str().unwrap(), p["in"].as_str().unwrap(), p["type"].as_str().unwrap()))
                .collect();
            assert_eq!(params, json_params);
            let response = one(one(one(op, 9), 1), 2);
            assert_eq!(text(one(response, 1), 1), "OK");
            let extension = one(op, 13);
            assert_eq!(text(extension, 1), GVK_EXTENSION);
            let kind = item["patch"][GVK_EXTENSION]["kind"].as_str().unwrap();
            assert_eq!(text(one(extension, 2), 2), format!("group: \"\"\nkind: {kind}\nversion: v1\n"));
        }
    }

    /// cli-runtime's check (`supportsQueryParamV3`): some PATCH operation carries the kind, and
    /// every one that does has `fieldValidation` in the query. Otherwise kubectl 1.27+ validate
    /// on their own, against no schema.
    #[test]
    fn every_kind_has_a_patch_operation_with_field_validation() {
        let d = Documents::build();
        let v3: Value = serde_json::from_slice(&d.v3_group).unwrap();
        let v2: Value = serde_json::from_slice(&d.v2_json).unwrap();
        for doc in [&v3, &v2] {
            for r in Resource::of_group("") {
                let ops: Vec<&Value> = doc["paths"]
                    .as_object()
                    .unwrap()
                    .values()
                    .map(|item| &item["patch"])
                    .filter(|op| op[GVK_EXTENSION] == json!({"group": "", "version": "v1", "kind": r.kind()}))
                    .collect();
                assert!(!ops.is_empty(), "no PATCH operation for {}", r.kind());
                for op in ops {
                    let params = op["parameters"].as_array().unwrap();
                    assert!(params.iter().any(|p| p["name"] == "fieldValidation" && p["in"] == "query"));
                }
            }
        }
        assert!(v3["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/status"]["patch"].is_object());
        assert!(v3["paths"]["/api/v1/namespaces/{name}"]["patch"].is_object());
        // No strategic-merge request body: kubectl must not look for patch metadata in schemas
        // the document does not have.
        assert!(v3["paths"].as_object().unwrap().values().all(|item| item["patch"].get("requestBody").is_none()));
    }

    #[test]
    fn the_index_points_at_the_group_document_by_its_hash() {
        let d = Documents::build();
        let index: Value = serde_json::from_slice(&d.v3_index).unwrap();
        let url = index["paths"]["api/v1"]["serverRelativeURL"].as_str().unwrap();
        assert_eq!(url, format!("/openapi/v3/api/v1?hash={}", sha512_hex(&d.v3_group)));
        assert_eq!(d.v3_group_hash.len(), 128);
        assert_ne!(sha512_hex(b"a"), sha512_hex(b"b"));
    }

    fn accept(value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_static(value));
        h
    }

    #[test]
    fn negotiates_as_kube_openapi() {
        let offered = ["json", V2_PROTOBUF_DEPRECATED, V2_PROTOBUF];
        let kubectl = accept("application/com.github.proto-openapi.spec.v2@v1.0+protobuf");
        assert_eq!(negotiate(&kubectl, &offered), Some(V2_PROTOBUF_DEPRECATED));
        assert_eq!(negotiate(&HeaderMap::new(), &offered), Some("json"));
        assert_eq!(negotiate(&accept("application/json, */*"), &offered), Some("json"));
        let preferred = accept("application/json;q=0.5, application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
        assert_eq!(negotiate(&preferred, &offered), Some(V2_PROTOBUF));
        assert_eq!(negotiate(&accept("*/*;q=0.1, application/json"), &offered), Some("json"));
        assert_eq!(negotiate(&accept("text/html"), &offered), None);
        assert_eq!(negotiate(&accept("application/json;q=0"), &offered), None);
    }

    fn header(resp: &Response, name: header::HeaderName) -> &str {
        resp.headers().get(name).map(|v| v.to_str().unwrap()).unwrap_or_default()
    }

    #[tokio::test]
    async fn v2_serves_protobuf_or_json_with_one_etag() {
        let kubectl = accept("application/com.github.proto-openapi.spec.v2@v1.0+protobuf");
        let resp = v2(kubectl.clone()).await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(header(&resp, header::CONTENT_TYPE), "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
        let etag = header(&resp, header::ETAG).to_string();
        assert_eq!(etag, format!("\"{}\"", DOCUMENTS.v2_etag));
        let resp = v2(accept("application/json")).await;
        assert_eq!(header(&resp, header::CONTENT_TYPE), "application/json");
        assert_eq!(header(&resp, header::ETAG), etag);

        let mut again = kubectl;
        again.insert(header::IF_NONE_MATCH, HeaderValue::from_str(&etag).unwrap());
        assert_eq!(v2(again).await.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(v2(accept("text/html")).await.status(), StatusCode::NOT_ACCEPTABLE);
    }

    #[test]
    fn the_hashed_group_document_is_immutable() {
        let now: Timestamp = "2026-03-01T12:00:00Z".parse().unwrap();
        let hash = DOCUMENTS.v3_group_hash.clone();

        let resp = group_document(&accept("application/json"), Some(&hash), now);
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(header(&resp, header::CACHE_CONTROL), "public, immutable");
        assert_eq!(header(&resp, header::EXPIRES), "Mon, 01 Mar 2027 12:00:00 GMT");

        let resp = group_document(&HeaderMap::new(), None, now);
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(header(&resp, header::CACHE_CONTROL), "");

        let resp = group_document(&accept("application/json"), Some("0ABC"), now);
        assert_eq!(resp.status(), StatusCode::MOVED_PERMANENTLY);
        assert_eq!(header(&resp, header::LOCATION), format!("/openapi/v3/api/v1?hash={hash}"));
    }
}
