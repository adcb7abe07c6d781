//! What a request carries besides its path: query parameters, the body's media type, and
//! strict decoding of typed objects (`fieldValidation`).

use crate::errors::{ApiError, ApiResult};
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, header};
use futures_util::StreamExt;
use podwright_api::manifest::unknown_fields;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The query parameters the API server takes on list, watch, get, create, update, patch and
/// delete, as kubectl sends them.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Params {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub watch: Option<String>,
    pub resource_version: Option<String>,
    pub timeout_seconds: Option<u64>,
    pub allow_watch_bookmarks: Option<String>,
    pub send_initial_events: Option<String>,
    pub include_object: Option<String>,
    pub field_validation: Option<String>,
    pub dry_run: Option<String>,
    pub grace_period_seconds: Option<i64>,
}

/// Go's `strconv.ParseBool` true values, which the API server's query decoding accepts.
pub(crate) fn truthy(v: &str) -> bool {
    matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// A boolean query parameter that is given and true.
pub(crate) fn is_set(v: &Option<String>) -> bool {
    v.as_deref().is_some_and(truthy)
}

/// The request body's media type, empty when none is given.
pub(crate) fn content_type(headers: &HeaderMap) -> &str {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

impl Params {
    pub fn is_watch(&self) -> bool {
        is_set(&self.watch)
    }
    pub fn bookmarks(&self) -> bool {
        is_set(&self.allow_watch_bookmarks)
    }
    pub fn initial_events(&self) -> bool {
        is_set(&self.send_initial_events)
    }
    pub fn dry_run(&self) -> bool {
        self.dry_run.as_deref().is_some_and(|d| d == "All")
    }
}

/// How unknown fields in a body are treated (`fieldValidation`; Warn unless asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    pub fn parse(p: &Params) -> ApiResult<FieldValidation> {
        match p.field_validation.as_deref() {
            None | Some("" | "Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other}. Supported values: Ignore, Warn, Strict"
            ))),
        }
    }
}

/// The largest request body the API server reads (its `MaxRequestBodyBytes`, 3 MiB): an
/// object over a smaller limit of its own (a ConfigMap's 1 MiB) gets its validation error, not
/// a refused body.
pub const MAX_REQUEST_BODY_BYTES: usize = podwright_api::manifest::MAX_MANIFEST_BYTES;

/// A request's body, read whole but never past [`MAX_REQUEST_BODY_BYTES`]: a larger one is
/// refused with the API server's 413 as soon as its `Content-Length` or its bytes say so,
/// before more of it is held.
pub struct RequestBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RequestBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> ApiResult<RequestBody> {
        let too_large = || ApiError::entity_too_large(MAX_REQUEST_BODY_BYTES);
        let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_REQUEST_BODY_BYTES as u64) {
            return Err(too_large());
        }
        let mut frames = req.into_body().into_data_stream();
        let mut body = Vec::new();
        while let Some(chunk) = frames.next().await {
            let chunk = chunk.map_err(|e| ApiError::internal(format!("reading the request body: {e}")))?;
            if body.len() + chunk.len() > MAX_REQUEST_BODY_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(RequestBody(body.into()))
    }
}

/// The body as JSON, or YAML when it says so. kubectl 1.20 sends JSON without a Content-Type.
pub fn json_body(headers: &HeaderMap, body: &[u8]) -> ApiResult<Value> {
    let ct = content_type(headers);
    if ct.contains("protobuf") {
        return Err(ApiError::unsupported_media_type(ct));
    }
    let undecodable = |e: &dyn std::fmt::Display| ApiError::bad_request(format!("error decoding request body: {e}"));
    if media_type(ct) == "application/yaml" {
        let text = std::str::from_utf8(body).map_err(|e| undecodable(&e))?;
        return podwright_api::yaml::from_str(text).map_err(|e| undecodable(&e));
    }
    serde_json::from_slice(body).map_err(|e| undecodable(&e))
}

/// A media type without its parameters (`; charset=utf-8`).
fn media_type(content_type: &str) -> &str {
    content_type.split(';').next().unwrap_or_default().trim()
}

/// `input` decoded as a `T` and re-encoded (unknown fields dropped), and the warnings for the
/// unknown fields; with Strict validation they are an error instead.
pub fn decode<T: DeserializeOwned + serde::Serialize>(
    input: &Value,
    kind: &str,
    validation: FieldValidation,
    is_patch: bool,
) -> ApiResult<(Value, Vec<String>)> {
    let typed: T = serde_json::from_value(input.clone())
        .map_err(|e| ApiError::bad_request(format!("{kind} in version \"v1\" cannot be handled as a {kind}: {e}")))?;
    let output = serde_json::to_value(&typed).map_err(|e| ApiError::internal(e.to_string()))?;
    let unknown: Vec<String> = if validation == FieldValidation::Ignore {
        vec![]
    } else {
        unknown_fields(input, &output).iter().map(|p| format!("unknown field \"{p}\"")).collect()
    };
    if validation == FieldValidation::Strict && !unknown.is_empty() {
        let detail = format!("strict decoding error: {}", unknown.join(", "));
        if is_patch {
            return Err(ApiError::invalid_patch(format!("\"{}\": {detail}", compact(input))));
        }
        return Err(ApiError::bad_request(format!("{kind} in version \"v1\" cannot be handled as a {kind}: {detail}")));
    }
    Ok((output, unknown))
}

fn compact(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 200 { format!("{}...", &s[..s.floor_char_boundary(200)]) } else { s }
}

/// `Warning` header values (RFC 7234 code 299), as the API server sends them.
pub fn warning_headers(warnings: &[String]) -> Vec<(header::HeaderName, header::HeaderValue)> {
    warnings
        .iter()
        .filter_map(|w| {
            let quoted = serde_json::to_string(w).ok()?;
            let value = header::HeaderValue::from_str(&format!("299 - {quoted}")).ok()?;
            Some((header::WARNING, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    #[test]
    fn unknown_fields_warn_or_fail() {
        let cm = json!({"metadata": {"name": "c"}, "data": {"a": "b"}, "dta": {}});
        let (_, w) = decode::<ConfigMap>(&cm, "ConfigMap", FieldValidation::Warn, false).unwrap();
        assert_eq!(w, ["unknown field \"dta\""]);
        let e = decode::<ConfigMap>(&cm, "ConfigMap", FieldValidation::Strict, false).unwrap_err();
        assert_eq!(
            e.message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"dta\""
        );
        let (_, w) = decode::<ConfigMap>(&cm, "ConfigMap", FieldValidation::Ignore, false).unwrap();
        assert!(w.is_empty());
    }
}
