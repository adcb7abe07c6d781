//! The protobuf bodies kubectl 1.32+ sends for `create configmap` and `create secret`
//! (client-go's typed clients default to protobuf): `k8s\0` and a `runtime.Unknown` whose raw
//! bytes are the object (kubernetes/api `core/v1/generated.proto`); `create namespace` and
//! `create serviceaccount` too.
//! Decoded into the JSON
//! the rest of the API works with; other kinds answer 415, as kubectl then says.

use crate::errors::{ApiError, ApiResult};
use crate::resources::Resource;
use axum::http::{HeaderMap, header};
use base64::Engine;
use serde_json::{Map, Value, json};

const MAGIC: &[u8] = b"k8s\0";

/// One field of a message: its number and its bytes (for varints, the value).
pub(crate) enum Field<'a> {
    Varint(u32, u64),
    Bytes(u32, &'a [u8]),
}

pub(crate) fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (b, rest) = buf.split_first()?;
        *buf = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

pub(crate) fn fields(mut buf: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut out = vec![];
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let number = u32::try_from(key >> 3).ok()?;
        match key & 7 {
            0 => out.push(Field::Varint(number, varint(&mut buf)?)),
            2 => {
                let len = usize::try_from(varint(&mut buf)?).ok()?;
                if len > buf.len() {
                    return None;
                }
                let (bytes, rest) = buf.split_at(len);
                out.push(Field::Bytes(number, bytes));
                buf = rest;
            }
            // Fixed-width fields do not occur in these messages.
            _ => return None,
        }
    }
    Some(out)
}

fn bytes_of(msg: &[u8], number: u32) -> Option<&[u8]> {
    fields(msg)?.into_iter().find_map(|f| match f {
        Field::Bytes(n, b) if n == number => Some(b),
        _ => None,
    })
}

/// Every occurrence of a repeated message field.
fn repeated(msg: &[u8], number: u32) -> Vec<&[u8]> {
    let all = fields(msg).unwrap_or_default();
    all.into_iter()
        .filter_map(|f| match f {
            Field::Bytes(n, b) if n == number => Some(b),
            _ => None,
        })
        .collect()
}

/// Empty strings are how proto2 writes unset optional fields kubectl fills with Go's zero value.
fn set_text(obj: &mut Value, field: &str, b: Option<&[u8]>) {
    if let Some(b) = b.filter(|b| !b.is_empty()) {
        obj[field] = text(b);
    }
}

fn text(b: &[u8]) -> Value {
    Value::String(String::from_utf8_lossy(b).into_owned())
}

/// A `map<string, V>` field: repeated entries of key = 1, value = 2.
fn map(msg: &[u8], number: u32, value: impl Fn(&[u8]) -> Value) -> Option<Value> {
    let mut m = Map::new();
    for f in fields(msg)? {
        if let Field::Bytes(n, entry) = f
            && n == number
        {
            let k = bytes_of(entry, 1).unwrap_or_default();
            let v = bytes_of(entry, 2).unwrap_or_default();
            m.insert(String::from_utf8_lossy(k).into_owned(), value(v));
        }
    }
    (!m.is_empty()).then_some(Value::Object(m))
}

fn object_meta(msg: &[u8]) -> Value {
    let mut meta = json!({});
    for (field, n) in [("name", 1), ("generateName", 2), ("namespace", 3)] {
        set_text(&mut meta, field, bytes_of(msg, n));
    }
    for (field, n) in [("labels", 11), ("annotations", 12)] {
        if let Some(m) = map(msg, n, text) {
            meta[field] = m;
        }
    }
    meta
}

fn b64(b: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(b))
}

fn bool_of(msg: &[u8], number: u32) -> Option<bool> {
    fields(msg)?.into_iter().find_map(|f| match f {
        Field::Varint(n, v) if n == number => Some(v != 0),
        _ => None,
    })
}

fn decode(resource: Resource, body: &[u8]) -> Option<Value> {
    let unknown = body.strip_prefix(MAGIC)?;
    let raw = bytes_of(unknown, 2)?;
    let meta = object_meta(bytes_of(raw, 1).unwrap_or_default());
    let mut obj = json!({"apiVersion": "v1", "kind": resource.kind(), "metadata": meta});
    match resource {
        Resource::ConfigMaps => {
            if let Some(d) = map(raw, 2, text) {
                obj["data"] = d;
            }
            if let Some(d) = map(raw, 3, b64) {
                obj["binaryData"] = d;
            }
            if let Some(i) = bool_of(raw, 4) {
                obj["immutable"] = json!(i);
            }
        }
        Resource::Secrets => {
            if let Some(d) = map(raw, 2, b64) {
                obj["data"] = d;
            }
            set_text(&mut obj, "type", bytes_of(raw, 3));
            if let Some(d) = map(raw, 4, text) {
                obj["stringData"] = d;
            }
            if let Some(i) = bool_of(raw, 5) {
                obj["immutable"] = json!(i);
            }
        }
        Resource::ServiceAccounts => {
            let refs = |n: u32, fields: &[(&str, u32)]| -> Vec<Value> {
                repeated(raw, n)
                    .into_iter()
                    .map(|r| {
                        let mut reference = json!({});
                        for (field, number) in fields {
                            set_text(&mut reference, field, bytes_of(r, *number));
                        }
                        reference
                    })
                    .collect()
            };
            let secrets = refs(
                2,
                &[
                    ("kind", 1),
                    ("namespace", 2),
                    ("name", 3),
                    ("uid", 4),
                    ("apiVersion", 5),
                    ("resourceVersion", 6),
                    ("fieldPath", 7),
                ],
            );
            if !secrets.is_empty() {
                obj["secrets"] = json!(secrets);
            }
            let pull = refs(3, &[("name", 1)]);
            if !pull.is_empty() {
                obj["imagePullSecrets"] = json!(pull);
            }
            if let Some(a) = bool_of(raw, 4) {
                obj["automountServiceAccountToken"] = json!(a);
            }
        }
        // Nothing but metadata matters in a new namespace.
        Resource::Namespaces => {}
        _ => return None,
    }
    Some(obj)
}

/// The body as JSON when it is protobuf (`None` when it is not).
pub fn body(headers: &HeaderMap, body: &[u8], resource: Resource) -> Option<ApiResult<Value>> {
    let ct = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    if !ct.starts_with("application/vnd.kubernetes.protobuf") {
        return None;
    }
    Some(decode(resource, body).ok_or_else(|| ApiError::unsupported_media_type(ct)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u32, b: &[u8]) -> Vec<u8> {
        let mut out = vec![((n << 3) | 2) as u8, b.len() as u8];
        out.extend_from_slice(b);
        out
    }

    #[test]
    fn decodes_a_config_map_as_kubectl_sends_it() {
        let meta = field(1, b"cfg");
        let entry = [field(1, b"k"), field(2, b"v")].concat();
        let raw = [field(1, &meta), field(2, &entry)].concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let obj = decode(Resource::ConfigMaps, &body).unwrap();
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn secret_data_comes_out_base64() {
        let entry = [field(1, b"p"), field(2, b"hi")].concat();
        let meta = [field(1, b"s"), field(2, b"")].concat();
        let raw = [field(1, &meta), field(2, &entry), field(3, b"Opaque")].concat();
        let body = [MAGIC.to_vec(), field(2, &raw)].concat();
        let obj = decode(Resource::Secrets, &body).unwrap();
        assert_eq!(obj["data"]["p"], "aGk=");
        assert_eq!(obj["type"], "Opaque");
        assert_eq!(obj["metadata"], json!({"name": "s"}));
        assert!(decode(Resource::Pods, &body).is_none());
    }

    #[test]
    fn decodes_a_service_account_with_its_references() {
        let meta = field(1, b"builder");
        let secret = [field(1, b"Secret"), field(3, b"tok")].concat();
        let raw = [
            field(1, &meta),
            field(2, &secret),
            field(3, &field(1, b"reg-a")),
            field(3, &field(1, b"reg-b")),
            vec![4 << 3, 0],
        ]
        .concat();
        let body = [MAGIC.to_vec(), field(2, &raw)].concat();
        assert_eq!(
            decode(Resource::ServiceAccounts, &body).unwrap(),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder"},
                "secrets": [{"kind": "Secret", "name": "tok"}],
                "imagePullSecrets": [{"name": "reg-a"}, {"name": "reg-b"}],
                "automountServiceAccountToken": false})
        );
    }
}
