//! Errors as the API server returns them: a v1 `Status` object whose reason, code, message and
//! details kubectl turns into `Error from server (NotFound): pods "x" not found` and
//! `The Pod "x" is invalid: ...` (apimachinery `pkg/api/errors/errors.go`).

use crate::resources::Resource;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use podwright_api::FieldError;
use serde_json::{Value, json};

/// How long a client turned away for too many requests is told to wait, in seconds.
const RETRY_AFTER_SECONDS: u16 = 1;

/// A failed request, answered with a `Status`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>, details: Option<Value>) -> Self {
        ApiError { code, reason, message: message.into(), details }
    }

    pub fn not_found(resource: Resource, name: &str) -> Self {
        Self::not_found_named(&resource.qualified(), name)
    }

    /// Not found, of a resource named as the API server names it: `nodes`, or with its group
    /// (`podmetrics.metrics.k8s.io`).
    pub fn not_found_named(resource: &str, name: &str) -> Self {
        let message = format!("{resource} \"{name}\" not found");
        let details = match resource.split_once('.') {
            Some((kind, group)) => json!({"name": name, "group": group, "kind": kind}),
            None => json!({"name": name, "kind": resource}),
        };
        Self::new(404, "NotFound", message, Some(details))
    }

    pub fn already_exists(resource: Resource, name: &str) -> Self {
        let message = format!("{} \"{name}\" already exists", resource.qualified());
        Self::new(409, "AlreadyExists", message, Some(details(resource, name)))
    }

    pub fn conflict(resource: Resource, name: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
            resource.qualified()
        );
        Self::new(409, "Conflict", message, Some(details(resource, name)))
    }

    /// 422 with one cause per field error: kubectl prints `The Pod "x" is invalid: ...`.
    pub fn invalid(resource: Resource, name: &str, errors: &[FieldError]) -> Self {
        let rendered: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        let kind = resource.kind();
        let message = match rendered.as_slice() {
            [one] => format!("{kind} \"{name}\" is invalid: {one}"),
            many => format!("{kind} \"{name}\" is invalid: [{}]", many.join(", ")),
        };
        let causes: Vec<Value> =
            errors.iter().map(|e| json!({"reason": e.kind.reason(), "message": e.body(), "field": e.path})).collect();
        Self::new(422, "Invalid", message, Some(json!({"name": name, "kind": kind, "causes": causes})))
    }

    /// 422 for a patch the strict decoder refused (no kind or name, as the API server sends).
    pub fn invalid_patch(detail: impl Into<String>) -> Self {
        let detail = detail.into();
        let message = format!("patch: Invalid value: {detail}");
        let causes =
            json!([{"reason": "FieldValueInvalid", "message": format!("Invalid value: {detail}"), "field": "patch"}]);
        Self::new(422, "Invalid", message, Some(json!({"causes": causes})))
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message, None)
    }

    pub fn forbidden(resource: Resource, name: &str, why: &str) -> Self {
        let message = format!("{} \"{name}\" is forbidden: {why}", resource.qualified());
        Self::new(403, "Forbidden", message, Some(details(resource, name)))
    }

    pub fn method_not_allowed(verb: &str, resource: &str) -> Self {
        let message = format!("{verb} is not supported on resources of kind \"{resource}\"");
        Self::new(405, "MethodNotAllowed", message, Some(json!({"kind": resource})))
    }

    /// The resource or path is not served at all.
    pub fn no_such_path() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource", Some(json!({})))
    }

    /// A watch from a resourceVersion older than the history kept.
    pub fn expired(asked: u64, oldest: u64) -> Self {
        Self::new(410, "Expired", format!("too old resource version: {asked} ({oldest})"), None)
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf; got {content_type:?}"
            ),
            None,
        )
    }

    /// More requests at once than the server takes (apiserver `maxinflight.go`'s words; its
    /// `Retry-After: 1` goes with it).
    pub fn too_many_requests() -> Self {
        Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
            Some(json!({"retryAfterSeconds": RETRY_AFTER_SECONDS})),
        )
    }

    /// A body over the API server's limit (`MaxRequestBodyBytes`).
    pub fn entity_too_large(limit: usize) -> Self {
        Self::new(413, "RequestEntityTooLarge", format!("Request entity too large: limit is {limit}"), None)
    }

    /// A request that did not complete within its time (apiserver `timeout.go`).
    pub fn timeout() -> Self {
        Self::new(504, "Timeout", "Timeout: request did not complete within the allotted timeout", Some(json!({})))
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized", None)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message, None)
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// A Status's `details` for an object: its name, resource (as `kind`) and group, if any.
fn details(resource: Resource, name: &str) -> Value {
    let mut d = json!({"name": name});
    if !resource.group().is_empty() {
        d["group"] = json!(resource.group());
    }
    d["kind"] = json!(resource.plural());
    d
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (code, axum::Json(self.status())).into_response();
        if code == StatusCode::TOO_MANY_REQUESTS {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, RETRY_AFTER_SECONDS.into());
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// A refusal in the kubelet's words: the status and a plain-text body (go-restful's
/// `WriteError`, `streaming.WriteError`). The API server relays the body as the message of its
/// own error (`Error from server (BadRequest): <body>`), and kubectl prints it as
/// `error: unable to upgrade connection: <body>` for a refused upgrade.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletError {
    pub code: StatusCode,
    pub message: String,
}

impl KubeletError {
    pub fn new(code: StatusCode, message: impl Into<String>) -> Self {
        KubeletError { code, message: message.into() }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
}

/// What the local API would answer with a `Status`, the kubelet answers as text.
impl From<ApiError> for KubeletError {
    fn from(e: ApiError) -> Self {
        let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        KubeletError::new(code, e.message)
    }
}

/// A runtime failure as the kubelet answers it: NotFound is a 404, anything else a 500.
impl From<podwright_runtime::RuntimeError> for KubeletError {
    fn from(e: podwright_runtime::RuntimeError) -> Self {
        match e {
            podwright_runtime::RuntimeError::NotFound(m) => KubeletError::not_found(m),
            other => KubeletError::internal(other.to_string()),
        }
    }
}

impl IntoResponse for KubeletError {
    fn into_response(self) -> Response {
        let text = [(axum::http::header::CONTENT_TYPE, "text/plain; charset=utf-8")];
        (self.code, text, self.message).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podwright_api::FieldError;

    #[test]
    fn not_found_reads_as_kubectl_prints_it() {
        let s = ApiError::not_found(Resource::Pods, "x").status();
        assert_eq!(s["message"], "pods \"x\" not found");
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["code"], 404);
    }

    #[test]
    fn invalid_lists_every_cause() {
        let errs = [
            FieldError::forbidden("spec", "no"),
            FieldError::required("metadata.name", "name or generateName is required"),
        ];
        let s = ApiError::invalid(Resource::Pods, "x", &errs).status();
        assert_eq!(s["code"], 422);
        assert_eq!(s["details"]["causes"][0]["field"], "spec");
        assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueForbidden");
        assert_eq!(s["details"]["causes"][0]["message"], "Forbidden: no");
        assert!(s["message"].as_str().unwrap().starts_with("Pod \"x\" is invalid: [spec: Forbidden: no, "));
    }
}
