//! PATCH bodies applied to a stored object, by the request's Content-Type.

use crate::errors::{ApiError, ApiResult};
use serde_json::Value;

/// The patched object.
pub fn apply(original: &Value, body: &[u8], content_type: &str) -> ApiResult<Value> {
    let ty = content_type.split(';').next().unwrap_or_default().trim();
    let patch: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    match ty {
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            let mut out = original.clone();
            merge(&mut out, &patch);
            Ok(out)
        }
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let t = target.as_object_mut().expect("made an object above");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}
