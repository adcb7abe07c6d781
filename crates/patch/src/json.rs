//! JSON patch (RFC 6902, `application/json-patch+json`), with the API server's checks around the
//! `json-patch` crate's application (apiserver `pkg/endpoints/handlers/patch.go`).

use serde_json::Value;

use crate::error::{MAX_JSON_PATCH_OPERATIONS, PatchError};
use crate::go_format;

/// Applies the operations in `body` (parsed JSON) to `original`.
pub(crate) fn apply(original: &Value, body: Value) -> Result<Value, PatchError> {
    let operations = match body {
        // Go decodes `null` into an empty patch.
        Value::Null => return Ok(original.clone()),
        Value::Array(operations) => operations,
        other => return Err(cannot_unmarshal(&other, "jsonpatch.Patch")),
    };
    // Go decodes a `null` operation into an empty one, which fails only when applied.
    if let Some(other) = operations.iter().find(|op| !op.is_object() && !op.is_null()) {
        return Err(cannot_unmarshal(other, "jsonpatch.Operation"));
    }
    if operations.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooManyOperations(operations.len()));
    }
    let failed = |detail: String| PatchError::JsonPatchFailed { detail };
    let patch: json_patch::Patch =
        serde_json::from_value(Value::Array(operations)).map_err(|e| failed(e.to_string()))?;
    let mut patched = original.clone();
    // Without the crate's undo: a failed patch's copy is dropped anyway, and the undo panics
    // when an operation failed halfway (a `move` whose target path is invalid).
    json_patch::patch_unsafe(&mut patched, &patch).map_err(|e| failed(e.to_string()))?;
    Ok(patched)
}

fn cannot_unmarshal(value: &Value, go_type: &str) -> PatchError {
    PatchError::Decode(go_format::cannot_unmarshal(value, go_type))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn operations_apply_in_order() {
        let pod = json!({"metadata": {"name": "p", "labels": {"a": "1"}}});
        let body = json!([
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "remove", "path": "/metadata/labels/a"},
        ]);
        assert_eq!(apply(&pod, body).unwrap(), json!({"metadata": {"name": "p", "labels": {"b": "2"}}}));
    }

    #[test]
    fn a_move_to_an_invalid_path_after_other_operations_is_refused() {
        let pod = json!({"metadata": {"name": "p", "labels": {}}});
        // The move takes away what the add put in, then fails: there is nothing left to undo.
        let body = json!([
            {"op": "add", "path": "/metadata/labels/x", "value": "1"},
            {"op": "move", "from": "/metadata/labels/x", "path": "/#etadata/labels/z"},
        ]);
        let err = apply(&pod, body).unwrap_err();
        assert!(matches!(err, PatchError::JsonPatchFailed { .. }), "{err:?}");
    }

    #[test]
    fn failed_test_is_a_422_with_the_generic_message() {
        let pod = json!({"metadata": {"name": "p"}});
        let err = apply(&pod, json!([{"op": "test", "path": "/metadata/name", "value": "q"}])).unwrap_err();
        assert!(matches!(err, PatchError::JsonPatchFailed { .. }), "{err:?}");
        assert_eq!((err.code(), err.reason()), (422, "Invalid"));
        assert_eq!(err.to_string(), "the server rejected our request due to an error in our request");
    }

    #[test]
    fn unknown_operation_fails_when_applied() {
        let err = apply(&json!({}), json!([{"op": "frobnicate", "path": "/a"}])).unwrap_err();
        assert_eq!(err.code(), 422);
    }

    #[test]
    fn a_body_that_is_not_a_list_is_a_bad_request() {
        let err = apply(&json!({}), json!({"op": "add"})).unwrap_err();
        assert_eq!(err.to_string(), "json: cannot unmarshal object into Go value of type jsonpatch.Patch");
        assert_eq!(err.code(), 400);
        let err = apply(&json!({}), json!([1])).unwrap_err();
        assert_eq!(err.to_string(), "json: cannot unmarshal number into Go value of type jsonpatch.Operation");
    }

    #[test]
    fn too_many_operations() {
        let body = Value::Array(vec![json!({"op": "test", "path": "", "value": {}}); MAX_JSON_PATCH_OPERATIONS + 1]);
        let err = apply(&json!({}), body).unwrap_err();
        assert_eq!(err.code(), 413);
        assert_eq!(
            err.to_string(),
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
    }
}
