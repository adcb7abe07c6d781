//! The three PATCH bodies of the Kubernetes API, applied to objects held as JSON values the way
//! the API server applies them: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic
//! merge patch, which `kubectl apply`, `edit`, `set image` and `patch` send.
//!
//! ```
//! use podwright_patch::{CoreV1Schema, PatchType, apply};
//! use serde_json::json;
//!
//! let pod = json!({"spec": {"containers": [
//!     {"name": "app", "image": "busybox:1.36"},
//!     {"name": "side", "image": "busybox:1.36"},
//! ]}});
//! let body = br#"{"spec":{"containers":[{"name":"app","image":"busybox:1.37"}]}}"#;
//! let ty = PatchType::from_content_type("application/strategic-merge-patch+json").unwrap();
//! let patched = apply(&pod, body, ty, &CoreV1Schema).unwrap();
//! assert_eq!(patched["spec"]["containers"][0]["image"], "busybox:1.37");
//! assert_eq!(patched["spec"]["containers"][1]["name"], "side");
//! ```

mod error;
mod go_format;
mod json;
mod merge;
mod schema;
mod strategic;

use serde_json::Value;

pub use error::PatchError;
pub use schema::{CoreV1Schema, ListStrategy, PatchSchema};

/// The kind of PATCH body, told by its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`: RFC 6902 operations.
    Json,
    /// `application/merge-patch+json`: RFC 7386.
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
}

impl PatchType {
    /// The patch type of a `Content-Type` header value. Parameters (`; charset=utf-8`) are
    /// ignored and the rest must match exactly, as the API server does; `None` is its 415.
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        let media_type = match content_type.find(';') {
            Some(end) if end > 0 => &content_type[..end],
            _ => content_type,
        };
        match media_type {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            _ => None,
        }
    }
}

/// Applies the PATCH `body` of type `ty` to `original` and returns the patched object. `schema`
/// tells how lists merge; only strategic merge patches read it.
pub fn apply(original: &Value, body: &[u8], ty: PatchType, schema: &dyn PatchSchema) -> Result<Value, PatchError> {
    let body: Value = serde_json::from_slice(body).map_err(|_| PatchError::InvalidJson)?;
    match ty {
        PatchType::Json => json::apply(original, body),
        PatchType::Merge => merge::apply(original, body),
        PatchType::StrategicMerge => match body {
            Value::Object(patch) => strategic::apply(original, patch, schema),
            // Go decodes `null` into an empty map.
            Value::Null => strategic::apply(original, Default::default(), schema),
            other => Err(PatchError::Decode(go_format::cannot_unmarshal(&other, "map[string]interface {}"))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types() {
        assert_eq!(PatchType::from_content_type("application/json-patch+json"), Some(PatchType::Json));
        assert_eq!(PatchType::from_content_type("application/merge-patch+json; charset=utf-8"), Some(PatchType::Merge));
        assert_eq!(
            PatchType::from_content_type("application/strategic-merge-patch+json"),
            Some(PatchType::StrategicMerge)
        );
        assert_eq!(PatchType::from_content_type("application/apply-patch+yaml"), None);
        assert_eq!(PatchType::from_content_type("application/json"), None);
        assert_eq!(PatchType::from_content_type("Application/JSON-patch+json"), None);
    }

    #[test]
    fn body_that_is_not_json_is_a_bad_request() {
        for ty in [PatchType::Json, PatchType::Merge, PatchType::StrategicMerge] {
            let err = apply(&json!({}), b"<THIS IS NOT JSON>", ty, &CoreV1Schema).unwrap_err();
            assert_eq!((err.code(), err.reason(), err.to_string().as_str()), (400, "BadRequest", "invalid JSON patch"));
        }
    }

    #[test]
    fn strategic_body_must_be_a_map() {
        let err = apply(&json!({}), b"[]", PatchType::StrategicMerge, &CoreV1Schema).unwrap_err();
        assert_eq!(err.to_string(), "json: cannot unmarshal array into Go value of type map[string]interface {}");
        assert_eq!(err.code(), 400);
        let pod = json!({"metadata": {"name": "p"}});
        assert_eq!(apply(&pod, b"null", PatchType::StrategicMerge, &CoreV1Schema).unwrap(), pod);
    }
}
