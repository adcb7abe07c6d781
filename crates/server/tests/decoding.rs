//! Property tests of request decoding: whatever body a client sends to create, replace or patch
//! an object (JSON, YAML or protobuf; a JSON patch, merge patch, strategic merge patch or
//! apply patch), random bytes, random JSON documents in the API's vocabulary, or a valid body
//! with bytes changed, the API answers with a status and never panics or fails internally.

use axum::body::Body;
use axum::http::{Method, Request};
use podwright_runtime::{Clock, FakeRuntime};
use podwright_server::{ApiServer, ServerConfig};
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt;

const CREATE_TYPES: [&str; 5] =
    ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "", "text/plain"];
const PATCH_TYPES: [&str; 4] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"},
        "finalizers": ["a/b"], "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u"}]},
        "spec": {"containers": [
            {"name": "app", "image": "busybox", "env": [{"name": "A", "value": "1"}],
             "ports": [{"containerPort": 80}], "volumeMounts": [{"name": "d", "mountPath": "/d"}]},
            {"name": "side", "image": "busybox"}],
        "volumes": [{"name": "d", "emptyDir": {}}], "tolerations": [{"key": "k", "operator": "Exists"}]}})
}

/// An API with a pod, a ConfigMap and a Secret to replace and patch.
fn api() -> ApiServer {
    let clock = Clock::new();
    let config = ServerConfig { node_name: "n".into(), root: "/nonexistent".into(), host_ip: None };
    let api = ApiServer::new(config, clock, FakeRuntime::new(clock)).0;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        for (path, body) in [
            ("pods", pod()),
            ("configmaps", json!({"metadata": {"name": "web"}, "data": {"a": "b"}})),
            ("secrets", json!({"metadata": {"name": "web"}, "stringData": {"a": "b"}})),
        ] {
            let path = format!("/api/v1/namespaces/default/{path}");
            let status = send(&api, Method::POST, &path, "application/json", body.to_string().into_bytes()).await;
            assert_eq!(status, 201, "{path}");
        }
    });
    api
}

/// Sends one request and checks its answer: JSON, and no internal failure but the ones the
/// API server has too (a strategic merge patch its code cannot apply, such as `{"$patch":
/// null}` or a list item without its merge key, is a 500 there, with the patch code's words).
async fn send(api: &ApiServer, method: Method, path: &str, content_type: &str, body: Vec<u8>) -> u16 {
    let mut request = Request::builder().method(method.clone()).uri(path);
    if !content_type.is_empty() {
        request = request.header("content-type", content_type);
    }
    let response = api.router().oneshot(request.body(Body::from(body.clone())).unwrap()).await.unwrap();
    let status = response.status().as_u16();
    let answer = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    let what = || {
        format!(
            "{method} {path} ({content_type}) answered {status}: {}\nbody: {}",
            String::from_utf8_lossy(&answer),
            String::from_utf8_lossy(&body)
        )
    };
    let answer: Value = serde_json::from_slice(&answer).unwrap_or_else(|_| panic!("not JSON: {}", what()));
    if status >= 500 {
        let strategic = method == Method::PATCH && content_type == "application/strategic-merge-patch+json";
        assert!(strategic && answer["kind"] == "Status" && answer["code"] == status, "{}", what());
    }
    status
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field(number: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(number << 3 | 2, &mut out);
    varint(bytes.len() as u64, &mut out);
    out.extend_from_slice(bytes);
    out
}

/// A ConfigMap as kubectl 1.32 sends it: `k8s\0` and a `runtime.Unknown`.
fn protobuf_config_map() -> Vec<u8> {
    let meta = field(1, b"pb");
    let entry = [field(1, b"a"), field(2, b"b")].concat();
    let object = [field(1, &meta), field(2, &entry)].concat();
    let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
    [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &object)].concat()
}

/// Valid bodies of every kind, to change byte by byte.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let pod = pod();
    vec![
        ("application/json", pod.to_string().into_bytes()),
        ("application/yaml", podwright_api::yaml::to_string(&pod).unwrap().into_bytes()),
        ("application/vnd.kubernetes.protobuf", protobuf_config_map()),
        (
            "application/json-patch+json",
            br#"[{"op":"replace","path":"/spec/containers/0/image","value":"busybox:1.37"},{"op":"add","path":"/metadata/labels/x","value":"y"},{"op":"remove","path":"/metadata/labels/app"},{"op":"test","path":"/metadata/name","value":"web"},{"op":"move","from":"/metadata/labels/x","path":"/metadata/labels/z"},{"op":"copy","from":"/metadata/name","path":"/metadata/labels/n"}]"#.to_vec(),
        ),
        ("application/merge-patch+json", br#"{"metadata":{"labels":{"app":null,"x":"y"}},"spec":{"activeDeadlineSeconds":30}}"#.to_vec()),
        (
            "application/strategic-merge-patch+json",
            br#"{"metadata":{"$deleteFromPrimitiveList/finalizers":["a/b"]},"spec":{"$setElementOrder/containers":[{"name":"side"},{"name":"app"}],"containers":[{"name":"app","image":"busybox:1.37","$setElementOrder/env":[{"name":"B"}],"env":[{"name":"B","value":"2"},{"$patch":"delete","name":"A"}]}],"volumes":[{"name":"d","$retainKeys":["name","emptyDir"],"emptyDir":{"medium":"Memory"}}],"tolerations":[{"$patch":"replace"}]}}"#.to_vec(),
        ),
        ("application/apply-patch+yaml", b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n".to_vec()),
    ]
}

/// A valid body with bytes replaced, inserted and removed, and maybe cut short.
fn mutated() -> impl Strategy<Value = (&'static str, Vec<u8>)> {
    let seeds = seeds();
    let count = seeds.len();
    (
        0..count,
        prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 1..8),
        any::<Option<prop::sample::Index>>(),
    )
        .prop_map(move |(which, edits, cut)| {
            let (content_type, mut body) = seeds[which].clone();
            for (at, op, byte) in edits {
                let i = at.index(body.len() + 1);
                match op {
                    0 if i < body.len() => body[i] = byte,
                    1 => body.insert(i, byte),
                    _ if i < body.len() => {
                        body.remove(i);
                    }
                    _ => body.push(byte),
                }
            }
            if let Some(cut) = cut {
                body.truncate(cut.index(body.len() + 1));
            }
            (content_type, body)
        })
}

/// Keys and strings of the API's, its patches' and their directives' vocabulary, so that
/// random documents reach deep into decoding and patching.
const WORDS: &[&str] = &[
    "apiVersion",
    "v1",
    "kind",
    "Pod",
    "ConfigMap",
    "metadata",
    "name",
    "web",
    "namespace",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "uid",
    "resourceVersion",
    "spec",
    "containers",
    "initContainers",
    "image",
    "env",
    "value",
    "ports",
    "containerPort",
    "volumeMounts",
    "mountPath",
    "volumes",
    "emptyDir",
    "tolerations",
    "status",
    "data",
    "binaryData",
    "stringData",
    "op",
    "add",
    "remove",
    "replace",
    "move",
    "copy",
    "test",
    "path",
    "from",
    "/metadata/labels/x",
    "/spec/containers/0",
    "/spec/containers/-",
    "/",
    "",
    "~1",
    "$patch",
    "delete",
    "merge",
    "$setElementOrder/containers",
    "$setElementOrder/env",
    "$retainKeys",
    "$deleteFromPrimitiveList/finalizers",
    "activeDeadlineSeconds",
    "terminationGracePeriodSeconds",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![4 => prop::sample::select(WORDS).prop_map(str::to_string), 1 => ".{0,8}"]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        word().prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(word(), inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Each body sent as a new object, a replacement and a patch of every type, to each kind.
fn exercise(api: &ApiServer, content_type: &str, body: &[u8]) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        for kind in ["pods", "configmaps", "secrets"] {
            let collection = format!("/api/v1/namespaces/default/{kind}");
            let object = format!("{collection}/web");
            send(api, Method::POST, &collection, content_type, body.to_vec()).await;
            send(api, Method::PUT, &object, content_type, body.to_vec()).await;
            for patch in PATCH_TYPES {
                send(api, Method::PATCH, &object, patch, body.to_vec()).await;
            }
        }
        send(api, Method::PATCH, "/api/v1/namespaces/default/pods/web/status", content_type, body.to_vec()).await;
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_are_answered(content_type in prop::sample::select(&CREATE_TYPES[..]), body in prop::collection::vec(any::<u8>(), 0..512)) {
        exercise(&api(), content_type, &body);
    }

    #[test]
    fn changed_valid_bodies_are_answered((content_type, body) in mutated()) {
        exercise(&api(), content_type, &body);
    }

    #[test]
    fn random_documents_are_answered(doc in json_value(), content_type in prop::sample::select(&CREATE_TYPES[..2])) {
        let body = if content_type == "application/yaml" {
            podwright_api::yaml::to_string(&doc).unwrap().into_bytes()
        } else {
            doc.to_string().into_bytes()
        };
        exercise(&api(), content_type, &body);
    }
}
