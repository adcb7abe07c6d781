//! JSON merge patch (RFC 7386, `application/merge-patch+json`), as the API server's
//! `jsonpatch.MergePatch` (evanphx/json-patch v4) applies it.

use serde_json::Value;

use crate::error::PatchError;

/// Applies `body` (parsed JSON) to `original`.
pub(crate) fn apply(original: &Value, mut body: Value) -> Result<Value, PatchError> {
    match &mut body {
        Value::Object(_) => {
            prune_nulls_in_lists(&mut body);
            let mut patched = original.clone();
            json_patch::merge(&mut patched, &body);
            Ok(patched)
        }
        // A list replaces the whole document (which then fails to decode as an object).
        Value::Array(_) => {
            prune_nulls_in_lists(&mut body);
            Ok(body)
        }
        _ => Err(PatchError::InvalidMergePatch),
    }
}

/// Upstream drops null fields from maps inside the lists it copies from the patch (they would
/// mean nothing in the stored object); the `json-patch` crate copies lists as they are.
fn prune_nulls_in_lists(value: &mut Value) {
    match value {
        Value::Object(map) => map.values_mut().for_each(prune_nulls_in_lists),
        Value::Array(items) => items.iter_mut().for_each(drop_null_fields),
        _ => {}
    }
}

fn drop_null_fields(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_null_fields);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null_fields),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_merge_nulls_delete_lists_replace() {
        let pod = json!({
            "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}, {"name": "side", "image": "x"}]}
        });
        let body = json!({
            "metadata": {"labels": {"a": null, "c": "3"}},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.37", "command": null}]}
        });
        assert_eq!(
            apply(&pod, body).unwrap(),
            json!({
                "metadata": {"name": "p", "labels": {"b": "2", "c": "3"}},
                "spec": {"containers": [{"name": "app", "image": "busybox:1.37"}]}
            })
        );
    }

    #[test]
    fn kubectl_label_removal() {
        let pod = json!({"metadata": {"name": "p", "labels": {"app": "web"}}});
        let body = json!({"metadata": {"labels": null}});
        assert_eq!(apply(&pod, body).unwrap(), json!({"metadata": {"name": "p"}}));
    }

    #[test]
    fn null_or_scalar_body_is_invalid() {
        for body in [Value::Null, json!("x"), json!(1)] {
            let err = apply(&json!({}), body).unwrap_err();
            assert_eq!((err.code(), err.to_string().as_str()), (400, "Invalid JSON Patch"));
        }
    }
}
