//! PATCH bodies applied to a stored object, by the request's Content-Type: JSON patch, merge
//! patch, or strategic merge patch with the core/v1 patch-merge keys (podwright-patch).

use crate::errors::{ApiError, ApiResult};
use podwright_patch::{CoreV1Schema, PatchType};
use serde_json::Value;

/// The patched object, or the API server's error for the patch.
pub fn apply(original: &Value, body: &[u8], content_type: &str) -> ApiResult<Value> {
    let ty =
        PatchType::from_content_type(content_type).ok_or_else(|| ApiError::unsupported_media_type(content_type))?;
    podwright_patch::apply(original, body, ty, &CoreV1Schema).map_err(|e| ApiError {
        code: e.code(),
        reason: e.reason(),
        message: e.to_string(),
        details: None,
    })
}
