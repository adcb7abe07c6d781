//! Why a patch was refused, with the status the API server answers for it.
//!
//! Messages are upstream's: apimachinery `pkg/util/mergepatch/errors.go` and
//! `pkg/util/strategicpatch/patch.go` for strategic merge patches, apiserver
//! `pkg/endpoints/handlers/patch.go` for how each becomes a `Status`. `Display` is the `Status`
//! message the API server writes, so `code()`, `reason()` and `to_string()` make the whole
//! answer.

/// The operation limit of one JSON patch (apiserver `maxJSONPatchOperations`).
pub(crate) const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// A patch that could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The body is not JSON at all (checked before the patch type matters).
    #[error("invalid JSON patch")]
    InvalidJson,
    /// The body is JSON of the wrong shape for its patch type; the message is Go's decoding
    /// error, e.g. `json: cannot unmarshal array into Go value of type map[string]interface {}`.
    #[error("{0}")]
    Decode(String),
    /// A JSON patch with more operations than the API server takes.
    #[error(
        "Request entity too large: The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {0}"
    )]
    TooManyOperations(usize),
    /// A JSON patch operation failed (a `test` that did not match, a path that does not exist,
    /// an unknown `op`). The API server answers 422 with a fixed message and drops the detail,
    /// which is kept here for logs.
    #[error("the server rejected our request due to an error in our request")]
    JsonPatchFailed {
        /// What failed, in the `json-patch` crate's words.
        detail: String,
    },
    /// A merge patch that is `null` or a bare scalar.
    #[error("Invalid JSON Patch")]
    InvalidMergePatch,
    /// The object to patch is not a JSON object (`mergepatch.ErrBadJSONDoc`).
    #[error("invalid JSON document")]
    InvalidDocument,
    /// A `$deleteFromPrimitiveList` key without `/<field>`.
    #[error("invalid patch format of primitive list")]
    BadPrimitiveListFormat,
    /// `$retainKeys` is not a list, or the patch sets a field the list does not name.
    #[error("invalid patch format of retainKeys")]
    BadRetainKeysFormat,
    /// A `$setElementOrder` key without `/<field>`.
    #[error("invalid patch format of setElementOrder list")]
    BadSetElementOrderFormat,
    /// A merged list holds lists (`mergepatch.ErrNoListOfLists`). Upstream's message, `lists
    /// of lists are not supported`, is replaced by the generic 422 one.
    #[error("the server rejected our request due to an error in our request")]
    ListOfLists,
    /// A list element (or `$setElementOrder` entry) lacks the list's merge key.
    #[error("map: {map} does not contain declared merge key: {key}")]
    MissingMergeKey {
        /// The element, as Go's `%v` prints it.
        map: String,
        /// The merge key.
        key: String,
    },
    /// A `$patch` directive other than `replace` or `delete` on a map, or other than `replace`,
    /// `delete` or `merge` on a list element.
    #[error("unknown patch type: {directive} in map: {map}")]
    UnknownDirective {
        /// The directive's value, as Go's `%s` prints it.
        directive: String,
        /// The map holding it, as Go's `%v` prints it.
        map: String,
    },
    /// `$patch: merge` on a list element.
    #[error("merging lists cannot yet be specified in the patch")]
    MergeDirectiveInList,
    /// A value of one JSON type where another was needed, e.g. a `$setElementOrder` that is not a
    /// list.
    #[error("expected a {expected}, but received a {actual}")]
    WrongType {
        /// Go's name of the type needed.
        expected: &'static str,
        /// Go's name of the type found.
        actual: &'static str,
    },
    /// A merged list mixes element types; the lists are printed as Go's `%v` does.
    #[error("list element types are not identical: {0}")]
    MixedElementTypes(String),
    /// `$setElementOrder` of a list that is empty in both the object and the patch.
    #[error("no elements in any of the given slices")]
    NoElements,
    /// The patch list names elements in an order `$setElementOrder` contradicts.
    #[error("The order in patch list:\n{patch}\n doesn't match $setElementOrder list:\n{order}\n")]
    OrderMismatch {
        /// The patch list, as Go's `%v` prints it.
        patch: String,
        /// The `$setElementOrder` list, as Go's `%v` prints it.
        order: String,
    },
    /// Maps to merge in a list without a merge key (a primitive-merge list, or a
    /// `$deleteFromPrimitiveList` of maps); names the Go kind of the list's declared elements.
    #[error("cannot merge lists without merge key for {0}")]
    MergeWithoutKey(&'static str),
    /// An element of the object's list is not a map where maps are merged by key.
    #[error("value for key {0} is not a map")]
    NotAMap(usize),
}

impl PatchError {
    /// The HTTP status code of the API server's answer.
    pub fn code(&self) -> u16 {
        match self {
            PatchError::InvalidJson
            | PatchError::Decode(_)
            | PatchError::InvalidMergePatch
            | PatchError::InvalidDocument
            | PatchError::BadPrimitiveListFormat
            | PatchError::BadRetainKeysFormat
            | PatchError::BadSetElementOrderFormat => 400,
            PatchError::TooManyOperations(_) => 413,
            PatchError::JsonPatchFailed { .. } | PatchError::ListOfLists => 422,
            // Returned by the strategic merge code as plain Go errors, which the API server
            // answers as internal errors.
            PatchError::MissingMergeKey { .. }
            | PatchError::UnknownDirective { .. }
            | PatchError::MergeDirectiveInList
            | PatchError::WrongType { .. }
            | PatchError::MixedElementTypes(_)
            | PatchError::NoElements
            | PatchError::OrderMismatch { .. }
            | PatchError::MergeWithoutKey(_)
            | PatchError::NotAMap(_) => 500,
        }
    }

    /// The `Status.reason`; empty for `StatusReasonUnknown`, which the API server omits.
    pub fn reason(&self) -> &'static str {
        match self.code() {
            400 => "BadRequest",
            413 => "RequestEntityTooLarge",
            422 => "Invalid",
            _ => "",
        }
    }
}
