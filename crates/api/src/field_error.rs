//! Kubernetes' field-level validation error model
//! (apimachinery `pkg/util/validation/field/errors.go`), rendered byte-for-byte
//! the way the API server renders it, plus kubectl's "The <Kind> ... is invalid"
//! wrapper.

use crate::go;
use std::fmt;

/// The class of a field error. `Display` gives the word the API server prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// "Not found": a referenced value does not exist (e.g. an unknown volume).
    NotFound,
    /// "Required value": an empty string, null or empty list where a value is needed.
    Required,
    /// "Duplicate value": a value that must be unique is not.
    Duplicate,
    /// "Invalid value": a malformed or out-of-range value.
    Invalid,
    /// "Unsupported value": a value outside an enumerated set.
    NotSupported,
    /// "Forbidden": well-formed, but not allowed here.
    Forbidden,
    /// "Too long": the value is too long (the value itself is never printed).
    TooLong,
    /// "Too many": a list has too many items.
    TooMany,
    /// "Internal error".
    Internal,
    /// "Invalid value": the value does not have the schema type of the field.
    TypeInvalid,
}

impl ErrorKind {
    /// The text apimachinery's `ErrorType.String()` returns.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "Not found",
            ErrorKind::Required => "Required value",
            ErrorKind::Duplicate => "Duplicate value",
            ErrorKind::Invalid => "Invalid value",
            ErrorKind::NotSupported => "Unsupported value",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::TooLong => "Too long",
            ErrorKind::TooMany => "Too many",
            ErrorKind::Internal => "Internal error",
            ErrorKind::TypeInvalid => "Invalid value",
        }
    }

    /// The machine-readable reason (`FieldValueRequired`, ...) used in API
    /// `Status.details.causes[].reason`.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "FieldValueNotFound",
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::Duplicate => "FieldValueDuplicate",
            ErrorKind::Invalid => "FieldValueInvalid",
            ErrorKind::NotSupported => "FieldValueNotSupported",
            ErrorKind::Forbidden => "FieldValueForbidden",
            ErrorKind::TooLong => "FieldValueTooLong",
            ErrorKind::TooMany => "FieldValueTooMany",
            ErrorKind::Internal => "InternalError",
            ErrorKind::TypeInvalid => "FieldValueTypeInvalid",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One field-level validation error.
///
/// `Display` is exactly apimachinery's `Error.Error()`:
/// `<path>: <Kind>[: <value>][: <detail>]`, where the value is omitted for
/// Required, Forbidden, TooLong and Internal errors (and when `value` is None).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldError {
    /// Field path, e.g. `spec.initContainers[0].name`.
    pub path: String,
    pub kind: ErrorKind,
    /// The offending value, already rendered the way Go's `%v`/`%q` would
    /// (strings quoted, numbers and booleans bare). None = not printed.
    pub value: Option<String>,
    /// Free-form explanation; empty = not printed.
    pub detail: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, kind: ErrorKind, value: Option<String>, detail: impl Into<String>) -> Self {
        FieldError { path: path.into(), kind, value, detail: detail.into() }
    }

    /// `field.Required(path, detail)`.
    pub fn required(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Required, None, detail)
    }

    /// `field.Forbidden(path, detail)`.
    pub fn forbidden(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Forbidden, None, detail)
    }

    /// `field.Invalid(path, value, detail)`.
    pub fn invalid(path: impl Into<String>, value: impl BadValue, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Invalid, Some(value.render()), detail)
    }

    /// `field.Duplicate(path, value)`.
    pub fn duplicate(path: impl Into<String>, value: impl BadValue) -> Self {
        Self::new(path, ErrorKind::Duplicate, Some(value.render()), "")
    }

    /// `field.NotFound(path, value)`.
    pub fn not_found(path: impl Into<String>, value: impl BadValue) -> Self {
        Self::new(path, ErrorKind::NotFound, Some(value.render()), "")
    }

    /// `field.NotSupported(path, value, supported)`: the detail lists every
    /// supported value quoted, in the order given.
    pub fn not_supported(path: impl Into<String>, value: impl BadValue, supported: &[&str]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| go::quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(path, ErrorKind::NotSupported, Some(value.render()), detail)
    }

    /// `field.TooLong(path, value, max)`.
    pub fn too_long(path: impl Into<String>, max_length: usize) -> Self {
        Self::new(path, ErrorKind::TooLong, None, format!("must have at most {max_length} bytes"))
    }

    /// `field.InternalError(path, err)`.
    pub fn internal(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Internal, None, detail)
    }

    /// The message without the field path (apimachinery `ErrorBody`), which
    /// is also what appears as `message` in API status causes.
    pub fn body(&self) -> String {
        let mut s = String::from(self.kind.as_str());
        let prints_value =
            !matches!(self.kind, ErrorKind::Required | ErrorKind::Forbidden | ErrorKind::TooLong | ErrorKind::Internal);
        if prints_value && let Some(v) = &self.value {
            s.push_str(": ");
            s.push_str(v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.body())
    }
}

impl std::error::Error for FieldError {}

/// A value that can appear in a field error, rendered like Go's `%v` for
/// numbers/booleans and `%q` for strings.
pub trait BadValue {
    fn render(&self) -> String;
}

impl BadValue for &str {
    fn render(&self) -> String {
        go::quote(self)
    }
}
impl BadValue for String {
    fn render(&self) -> String {
        go::quote(self)
    }
}
impl BadValue for &String {
    fn render(&self) -> String {
        go::quote(self)
    }
}
macro_rules! bare_bad_value {
    ($($t:ty),*) => {$(
        impl BadValue for $t {
            fn render(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
bare_bad_value!(i32, i64, u16, u32, u64, usize, bool);

/// A value that is printed verbatim (already formatted by the caller).
#[derive(Clone, Debug)]
pub struct Raw(pub String);
impl BadValue for Raw {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// Builds field paths the way apimachinery's `field.Path` does:
/// `child` appends `.name`, `index` appends `[i]`, `key` appends `[key]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldPath(String);

impl FieldPath {
    /// A root path (`field.NewPath(name)`).
    pub fn new(root: &str) -> Self {
        FieldPath(root.to_string())
    }

    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() { FieldPath(name.to_string()) } else { FieldPath(format!("{}.{}", self.0, name)) }
    }

    pub fn index(&self, i: usize) -> Self {
        FieldPath(format!("{}[{}]", self.0, i))
    }

    pub fn key(&self, k: &str) -> Self {
        FieldPath(format!("{}[{}]", self.0, k))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<FieldPath> for String {
    fn from(p: FieldPath) -> String {
        p.0
    }
}

impl From<&FieldPath> for String {
    fn from(p: &FieldPath) -> String {
        p.0.clone()
    }
}

/// Drop errors whose rendered message repeats an earlier one, keeping order
/// (apimachinery `ErrorList.ToAggregate`).
pub fn dedup_errors(errors: Vec<FieldError>) -> Vec<FieldError> {
    let mut seen = std::collections::HashSet::new();
    errors.into_iter().filter(|e| seen.insert(e.to_string())).collect()
}

/// An object rejected by validation, displayed as kubectl prints it:
/// one error on one line, several as a bulleted list.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct InvalidObject {
    /// The object's kind (`Pod`, `ConfigMap`, ...).
    pub kind: &'static str,
    /// `metadata.name` of the object (may be empty).
    pub name: String,
    /// Every error found, deduplicated, in validation order.
    pub errors: Vec<FieldError>,
}

impl InvalidObject {
    pub fn new(kind: &'static str, name: impl Into<String>, errors: Vec<FieldError>) -> Self {
        InvalidObject { kind, name: name.into(), errors: dedup_errors(errors) }
    }

    /// `Ok` when `errors` is empty, else the object of this kind and name is invalid.
    pub fn check(kind: &'static str, name: Option<&str>, errors: Vec<FieldError>) -> Result<(), Self> {
        if errors.is_empty() { Ok(()) } else { Err(Self::new(kind, name.unwrap_or_default(), errors)) }
    }

    /// The API server's own one-line message (`Pod "x" is invalid: [e1, e2]`),
    /// as seen in events and API responses rather than in kubectl output.
    pub fn api_message(&self) -> String {
        let msgs: Vec<String> = self.errors.iter().map(|e| e.to_string()).collect();
        let (kind, name) = (self.kind, go::quote(&self.name));
        match msgs.len() {
            0 => format!("{kind} {name} is invalid"),
            1 => format!("{kind} {name} is invalid: {}", msgs[0]),
            _ => format!("{kind} {name} is invalid: [{}]", msgs.join(", ")),
        }
    }
}

impl fmt::Display for InvalidObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "The {} {} is invalid", self.kind, go::quote(&self.name))?;
        match self.errors.as_slice() {
            [] => Ok(()),
            [only] => write!(f, ": {only}"),
            many => {
                write!(f, ": ")?;
                for e in many {
                    write!(f, "\n* {e}")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_apimachinery() {
        let cases: Vec<(FieldError, &str)> = vec![
            (FieldError::required("spec.containers", ""), "spec.containers: Required value"),
            (
                FieldError::required("metadata.name", "name or generateName is required"),
                "metadata.name: Required value: name or generateName is required",
            ),
            (
                FieldError::forbidden(
                    "spec.initContainers[0].readinessProbe",
                    "may not be set for init containers without restartPolicy=Always",
                ),
                "spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
            ),
            (FieldError::duplicate("spec.containers[1].name", "x"), "spec.containers[1].name: Duplicate value: \"x\""),
            (
                FieldError::not_supported("spec.restartPolicy", "Sometimes", &["Always", "OnFailure", "Never"]),
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ),
            (
                FieldError::invalid("spec.activeDeadlineSeconds", 0i64, "must be between 1 and 2147483647, inclusive"),
                "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
            ),
            (FieldError::invalid("spec.x", "", ""), "spec.x: Invalid value: \"\""),
            (FieldError::invalid("spec.hostNetwork", true, "nope"), "spec.hostNetwork: Invalid value: true: nope"),
            (
                FieldError::not_found("spec.containers[0].volumeMounts[0].name", "data"),
                "spec.containers[0].volumeMounts[0].name: Not found: \"data\"",
            ),
            (FieldError::new("a", ErrorKind::Invalid, None, "detail only"), "a: Invalid value: detail only"),
            (FieldError::new("a", ErrorKind::Forbidden, Some("\"v\"".into()), "x"), "a: Forbidden: x"),
            (
                FieldError::too_long("metadata.annotations", 262144),
                "metadata.annotations: Too long: must have at most 262144 bytes",
            ),
            (FieldError::internal("spec", "boom"), "spec: Internal error: boom"),
        ];
        for (err, want) in cases {
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn field_path_builder() {
        let p = FieldPath::new("spec").child("initContainers").index(0).child("name");
        assert_eq!(p.as_str(), "spec.initContainers[0].name");
        let a = FieldPath::new("metadata").child("annotations").key("pod.beta.kubernetes.io/init-containers");
        assert_eq!(a.to_string(), "metadata.annotations[pod.beta.kubernetes.io/init-containers]");
        assert_eq!(FieldPath::default().child("x").as_str(), "x");
    }

    #[test]
    fn invalid_object_display_single_and_multi() {
        let one = InvalidObject::new("Pod", "myapp-pod", vec![FieldError::required("spec.containers", "")]);
        assert_eq!(one.to_string(), "The Pod \"myapp-pod\" is invalid: spec.containers: Required value");
        assert_eq!(one.api_message(), "Pod \"myapp-pod\" is invalid: spec.containers: Required value");

        let many = InvalidObject::new(
            "Pod",
            "x",
            vec![
                FieldError::required("spec.containers[0].image", ""),
                FieldError::duplicate("spec.initContainers[0].name", "a"),
                // identical messages are reported once
                FieldError::required("spec.containers[0].image", ""),
            ],
        );
        assert_eq!(many.errors.len(), 2);
        assert_eq!(
            many.to_string(),
            "The Pod \"x\" is invalid: \n* spec.containers[0].image: Required value\n* spec.initContainers[0].name: Duplicate value: \"a\""
        );
        assert_eq!(
            many.api_message(),
            "Pod \"x\" is invalid: [spec.containers[0].image: Required value, spec.initContainers[0].name: Duplicate value: \"a\"]"
        );
    }

    #[test]
    fn kind_reasons() {
        assert_eq!(ErrorKind::Required.reason(), "FieldValueRequired");
        assert_eq!(ErrorKind::NotSupported.to_string(), "Unsupported value");
        assert_eq!(ErrorKind::TypeInvalid.as_str(), "Invalid value");
    }
}
