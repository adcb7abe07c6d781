//! Reading manifests: YAML or JSON, several documents per file, strictly
//! decoded (unknown fields and wrong types are errors that name the field and,
//! where the text allows, the line). Static pod files hold pods only
//! ([`parse_manifests`]); `run` takes ConfigMaps, Secrets, RuntimeClasses and `List`s of
//! them beside the pods ([`parse_objects`]).

use std::fmt;
use std::io::Read;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::node::v1::RuntimeClass;
use serde::de::DeserializeOwned;
use serde_json::Value as JsonValue;

use crate::yaml::{self, Value as YamlValue, YamlError};
use crate::yaml_positions::{
    DocPath, MAX_NESTING_DEPTH, PathSegment, Position, PositionIndex, Scan, Yaml11Scalar, index_positions,
};

/// The largest manifest read, in bytes: the API server's limit on a request body (3 MiB).
pub const MAX_MANIFEST_BYTES: usize = 3 * 1024 * 1024;

/// What is wrong with a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// The text is not valid YAML/JSON.
    Syntax,
    /// Mappings and lists nest deeper than [`MAX_NESTING_DEPTH`].
    TooDeep,
    /// A document is not a mapping (object).
    NotAnObject,
    /// `apiVersion` or `kind` is missing.
    MissingTypeMeta,
    /// A kind (or an apiVersion for it) the reader does not take.
    UnsupportedKind,
    /// A field the kind's schema does not have.
    UnknownField,
    /// A value of the wrong type (string for an int, ...).
    InvalidValue,
    /// A second object of the same kind, namespace and name.
    Duplicate,
}

/// One problem in a manifest, with as much location as is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestProblem {
    pub source_name: String,
    /// 1-based document number in the stream (empty documents counted).
    pub document: Option<usize>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// Field path inside the document, e.g. `spec.containers[0].ports[0].containerPort`.
    pub path: Option<String>,
    pub kind: ProblemKind,
    pub message: String,
}

impl fmt::Display for ManifestProblem {
    /// `<file>[:<line>[:<col>]]: [document N: ][<path>: ]<message>`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source_name)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        f.write_str(": ")?;
        if let Some(doc) = self.document {
            write!(f, "document {doc}: ")?;
        }
        if let Some(path) = &self.path {
            write!(f, "{path}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Reading or decoding manifests failed.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file (or stdin) could not be read.
    #[error("{source_name}: {error}")]
    Read {
        source_name: String,
        #[source]
        error: std::io::Error,
    },
    /// The manifest is larger than [`MAX_MANIFEST_BYTES`]; nothing of it was parsed.
    #[error("{source_name}: too large: must have at most {MAX_MANIFEST_BYTES} bytes (the API server's limit)")]
    TooLarge { source_name: String },
    /// One or more documents are malformed; every problem found is listed,
    /// one per line.
    #[error("{}", join_lines(.0))]
    Invalid(Vec<ManifestProblem>),
}

impl ManifestError {
    /// The individual problems (empty for read errors).
    pub fn problems(&self) -> &[ManifestProblem] {
        match self {
            ManifestError::Read { .. } | ManifestError::TooLarge { .. } => &[],
            ManifestError::Invalid(p) => p,
        }
    }
}

fn join_lines<T: fmt::Display>(items: &[T]) -> String {
    items.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n")
}

/// One object of a manifest, as `run` takes them.
#[derive(Clone, Debug, PartialEq)]
pub enum ManifestObject {
    Pod(Box<Pod>),
    ConfigMap(ConfigMap),
    Secret(Secret),
    /// A `node.k8s.io/v1` RuntimeClass.
    RuntimeClass(RuntimeClass),
}

/// Which documents a reader takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Accept {
    /// `v1` Pods only, as in a static pod file.
    Pods,
    /// Pods, ConfigMaps, Secrets, RuntimeClasses and `v1` Lists of them, as `run` takes.
    Objects,
}

impl Accept {
    /// What the reader takes, in the messages about anything else.
    fn supported(self) -> &'static str {
        match self {
            Accept::Pods => "only apiVersion \"v1\", kind \"Pod\" is supported",
            Accept::Objects => {
                "supported: apiVersion \"v1\", kind \"Pod\", \"ConfigMap\", \"Secret\" or \"List\"; apiVersion \"node.k8s.io/v1\", kind \"RuntimeClass\""
            }
        }
    }

    /// The apiVersion a kind must have, `None` for a kind not taken.
    fn api_version(self, kind: &str) -> Option<&'static str> {
        match (self, kind) {
            (_, "Pod") => Some("v1"),
            (Accept::Objects, "ConfigMap" | "Secret" | "List") => Some("v1"),
            (Accept::Objects, "RuntimeClass") => Some("node.k8s.io/v1"),
            _ => None,
        }
    }
}

/// Read the objects of a manifest file, or of standard input when `path` is `-`, as
/// [`parse_objects`] does. Reading stops one byte past [`MAX_MANIFEST_BYTES`].
pub fn read_objects(path: &str) -> Result<Vec<ManifestObject>, ManifestError> {
    let source_name = if path == "-" { "<stdin>" } else { path };
    let read = |error| ManifestError::Read { source_name: source_name.to_string(), error };
    let input: Box<dyn Read> =
        if path == "-" { Box::new(std::io::stdin()) } else { Box::new(std::fs::File::open(path).map_err(read)?) };
    let mut text = String::new();
    input.take(MAX_MANIFEST_BYTES as u64 + 1).read_to_string(&mut text).map_err(read)?;
    parse_objects(source_name, &text)
}

/// Parse every Pod in `text` (YAML or JSON; documents separated by `---`;
/// empty documents skipped). `source_name` is used in messages.
///
/// Only `apiVersion: v1`, `kind: Pod` documents are accepted. Unknown fields
/// and values of the wrong type are errors; all problems of all documents are
/// reported together, except that a syntax error stops reading. Text larger than
/// [`MAX_MANIFEST_BYTES`] or nesting deeper than [`MAX_NESTING_DEPTH`] is refused before it
/// is decoded, in time linear in its size.
pub fn parse_manifests(source_name: &str, text: &str) -> Result<Vec<Pod>, ManifestError> {
    let objects = parse(source_name, text, Accept::Pods)?;
    Ok(objects
        .into_iter()
        .filter_map(|o| match o {
            ManifestObject::Pod(pod) => Some(*pod),
            _ => None,
        })
        .collect())
}

/// Parse every object in `text`, in file order, as [`parse_manifests`] parses pods: Pods,
/// ConfigMaps and Secrets (`v1`), RuntimeClasses (`node.k8s.io/v1`), and the items of `v1`
/// `List`s (such as `kubectl get -o yaml` writes). Two ConfigMaps, Secrets or RuntimeClasses
/// of one name (in one namespace, `default` when none is given) are an error, as they are
/// for the API server.
pub fn parse_objects(source_name: &str, text: &str) -> Result<Vec<ManifestObject>, ManifestError> {
    parse(source_name, text, Accept::Objects)
}

fn parse(source_name: &str, text: &str, accept: Accept) -> Result<Vec<ManifestObject>, ManifestError> {
    if text.len() > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge { source_name: source_name.to_string() });
    }
    let positions = match index_positions(text) {
        Scan::Indexed(idx) => Some(idx),
        Scan::Unparsable => None,
        Scan::TooDeep(at) => {
            return Err(ManifestError::Invalid(vec![ManifestProblem {
                source_name: source_name.to_string(),
                document: None,
                line: Some(at.line),
                column: Some(at.column),
                path: None,
                kind: ProblemKind::TooDeep,
                message: format!("exceeded max depth of {MAX_NESTING_DEPTH}"),
            }]));
        }
    };
    let mut ctx = Ctx { source_name, accept, positions: positions.as_ref(), problems: Vec::new() };
    let mut objects = Vec::new();
    let mut documents = 0;
    for (i, value) in yaml::documents(text).enumerate() {
        let doc = i + 1;
        documents = doc;
        let value = match value {
            Ok(v) => v,
            Err(e) => {
                ctx.problems.push(syntax_problem(source_name, &e));
                break;
            }
        };
        ctx.document(doc, value, &mut objects);
    }
    ctx.duplicates(&objects);
    // If the position index saw a different number of documents, its
    // positions cannot be trusted; drop them.
    if positions.as_ref().is_some_and(|p| p.documents() < documents) {
        for p in &mut ctx.problems {
            if p.kind != ProblemKind::Syntax {
                p.line = None;
                p.column = None;
            }
        }
    }
    if ctx.problems.is_empty() {
        Ok(objects.into_iter().map(|(object, _, _)| object).collect())
    } else {
        Err(ManifestError::Invalid(ctx.problems))
    }
}

fn syntax_problem(source_name: &str, e: &YamlError) -> ManifestProblem {
    let mut message = e.to_string();
    let (line, column) = match e.location() {
        Some((line, column)) => {
            let suffix = format!(" at line {line} column {column}");
            if let Some(idx) = message.find(&suffix) {
                message.replace_range(idx..idx + suffix.len(), "");
            }
            (Some(line), Some(column))
        }
        None => (None, None),
    };
    ManifestProblem {
        source_name: source_name.to_string(),
        document: None,
        line,
        column,
        path: None,
        kind: ProblemKind::Syntax,
        message,
    }
}

/// An object read, with its document and its place in it (empty, or the item of a List).
type Found = (ManifestObject, usize, DocPath);

struct Ctx<'a> {
    source_name: &'a str,
    accept: Accept,
    positions: Option<&'a PositionIndex>,
    problems: Vec<ManifestProblem>,
}

fn key(at: &DocPath, k: &str) -> DocPath {
    at.with(PathSegment::Key(k.to_string()))
}

impl Ctx<'_> {
    fn problem(&mut self, doc: usize, path: Option<&DocPath>, kind: ProblemKind, message: String) {
        self.problem_at(doc, path, path, kind, message);
    }

    /// Like `problem`, but positioned at `locate` while naming `path`.
    fn problem_at(
        &mut self,
        doc: usize,
        locate: Option<&DocPath>,
        path: Option<&DocPath>,
        kind: ProblemKind,
        message: String,
    ) {
        let pos: Option<Position> = self.positions.and_then(|idx| match locate {
            Some(p) if !p.is_empty() => idx.get_nearest(doc, p),
            _ => idx.doc_root(doc),
        });
        self.problems.push(ManifestProblem {
            source_name: self.source_name.to_string(),
            document: Some(doc),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            path: path.filter(|p| !p.is_empty()).map(|p| p.to_string()),
            kind,
            message,
        });
    }

    fn document(&mut self, doc: usize, mut value: YamlValue, out: &mut Vec<Found>) {
        if value.is_null() {
            return;
        }
        if let Err(e) = value.apply_merge() {
            self.problem(doc, None, ProblemKind::Syntax, e.to_string());
            return;
        }
        let mut json = match yaml_to_json(&value, &mut Vec::new()) {
            Ok(j) => j,
            Err((path, msg)) => {
                let path = DocPath(path);
                self.problem(doc, Some(&path), ProblemKind::InvalidValue, msg);
                return;
            }
        };
        if let Some(idx) = self.positions {
            apply_yaml11_scalars(&mut json, idx, doc);
        }
        self.object(doc, &DocPath::default(), &json, out);
    }

    /// The object at `at` of document `doc` (the document itself, or an item of a List).
    fn object(&mut self, doc: usize, at: &DocPath, json: &JsonValue, out: &mut Vec<Found>) {
        let JsonValue::Object(obj) = json else {
            let what = if self.accept == Accept::Pods { "a Pod object" } else { "an object" };
            let found = json_type_name(json);
            let message = format!("expected {what} (a mapping), found {found}");
            self.problem(doc, Some(at), ProblemKind::NotAnObject, message);
            return;
        };
        let Some(kind) = self.check_type_meta(doc, at, obj) else { return };
        let object = match kind.as_str() {
            "List" => return self.list(doc, at, obj, out),
            "Pod" => self.typed(doc, at, json).map(|p| ManifestObject::Pod(Box::new(p))),
            "ConfigMap" => self.typed(doc, at, json).map(ManifestObject::ConfigMap),
            "Secret" => self.typed(doc, at, json).map(ManifestObject::Secret),
            _ => self.typed(doc, at, json).map(ManifestObject::RuntimeClass),
        };
        if let Some(object) = object {
            out.push((object, doc, at.clone()));
        }
    }

    /// The items of a `v1` List; besides them it may only have a `metadata`.
    fn list(&mut self, doc: usize, at: &DocPath, obj: &serde_json::Map<String, JsonValue>, out: &mut Vec<Found>) {
        let mut unknown: Vec<DocPath> = obj
            .iter()
            .filter(|(k, v)| !v.is_null() && !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "items"))
            .map(|(k, _)| key(at, k))
            .collect();
        self.sort_by_position(doc, &mut unknown);
        for path in unknown {
            self.problem(doc, Some(&path), ProblemKind::UnknownField, "unknown field".into());
        }
        match obj.get("items") {
            None | Some(JsonValue::Null) => {}
            Some(JsonValue::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    self.object(doc, &key(at, "items").with(PathSegment::Index(i)), item, out);
                }
            }
            Some(other) => {
                let message = format!("expected a list, found {}", json_type_name(other));
                self.problem(doc, Some(&key(at, "items")), ProblemKind::InvalidValue, message);
            }
        }
    }

    /// Decodes `json` strictly as a `T`: wrong types and unknown fields are problems.
    fn typed<T: DeserializeOwned + serde::Serialize>(
        &mut self,
        doc: usize,
        at: &DocPath,
        json: &JsonValue,
    ) -> Option<T> {
        let within = |path: Vec<PathSegment>| DocPath(at.0.iter().cloned().chain(path).collect());
        let object: T = match serde_path_to_error::deserialize(json) {
            Ok(o) => o,
            Err(e) => {
                let path = within(convert_path(e.path()));
                self.problem(doc, Some(&path), ProblemKind::InvalidValue, e.inner().to_string());
                return None;
            }
        };
        let mut unknown = match serde_json::to_value(&object) {
            Ok(back) => unknown_fields(json, &back).into_iter().map(|p| within(p.0)).collect::<Vec<_>>(),
            Err(e) => {
                self.problem(doc, Some(at), ProblemKind::InvalidValue, e.to_string());
                return None;
            }
        };
        if unknown.is_empty() {
            return Some(object);
        }
        self.sort_by_position(doc, &mut unknown);
        for path in unknown {
            self.problem(doc, Some(&path), ProblemKind::UnknownField, "unknown field".into());
        }
        None
    }

    /// Source order (JSON objects iterate in key order).
    fn sort_by_position(&self, doc: usize, paths: &mut [DocPath]) {
        if let Some(idx) = self.positions {
            paths.sort_by_key(|p| idx.get(doc, p).map_or((usize::MAX, usize::MAX), |pos| (pos.line, pos.column)));
        }
    }

    /// The kind of the object at `at`, if the reader takes it with the apiVersion given.
    fn check_type_meta(
        &mut self,
        doc: usize,
        at: &DocPath,
        obj: &serde_json::Map<String, JsonValue>,
    ) -> Option<String> {
        let want = self.accept.supported();
        let kind = match obj.get("kind") {
            None | Some(JsonValue::Null) => {
                self.problem(doc, Some(at), ProblemKind::MissingTypeMeta, format!("missing \"kind\" ({want})"));
                return None;
            }
            Some(JsonValue::String(k)) => k,
            Some(other) => {
                let message = format!("expected a string, found {}", json_type_name(other));
                self.problem(doc, Some(&key(at, "kind")), ProblemKind::InvalidValue, message);
                return None;
            }
        };
        let api_version = obj.get("apiVersion");
        let Some(wanted_version) = self.accept.api_version(kind) else {
            let av = match api_version {
                Some(JsonValue::String(a)) => format!(" (apiVersion {a:?})"),
                _ => String::new(),
            };
            let message = format!("kind {kind:?}{av} is not supported ({want})");
            self.problem_at(doc, Some(&key(at, "kind")), Some(at), ProblemKind::UnsupportedKind, message);
            return None;
        };
        match api_version {
            None | Some(JsonValue::Null) => {
                let message = format!("missing \"apiVersion\" ({want})");
                self.problem(doc, Some(at), ProblemKind::MissingTypeMeta, message);
                None
            }
            Some(JsonValue::String(a)) if a == wanted_version => Some(kind.clone()),
            Some(JsonValue::String(a)) => {
                let message = format!("apiVersion {a:?} is not supported for kind {kind:?} ({want})");
                self.problem_at(doc, Some(&key(at, "apiVersion")), Some(at), ProblemKind::UnsupportedKind, message);
                None
            }
            Some(other) => {
                let message = format!("expected a string, found {}", json_type_name(other));
                self.problem(doc, Some(&key(at, "apiVersion")), ProblemKind::InvalidValue, message);
                None
            }
        }
    }

    /// A ConfigMap, Secret or RuntimeClass named like one before it is refused, as the API
    /// server refuses to create it.
    fn duplicates(&mut self, objects: &[Found]) {
        let mut seen = std::collections::HashSet::new();
        for (object, doc, at) in objects {
            let (resource, meta, namespaced) = match object {
                ManifestObject::Pod(_) => continue,
                ManifestObject::ConfigMap(cm) => ("configmaps", &cm.metadata, true),
                ManifestObject::Secret(s) => ("secrets", &s.metadata, true),
                ManifestObject::RuntimeClass(rc) => ("runtimeclasses.node.k8s.io", &rc.metadata, false),
            };
            let Some(name) = meta.name.as_deref().filter(|n| !n.is_empty()) else { continue };
            let namespace = match meta.namespace.as_deref() {
                _ if !namespaced => "",
                Some(ns) if !ns.is_empty() => ns,
                _ => crate::defaults::DEFAULT_NAMESPACE,
            };
            if !seen.insert((resource, namespace.to_string(), name.to_string())) {
                let message = format!("{resource} {name:?} already exists");
                self.problem(*doc, Some(at), ProblemKind::Duplicate, message);
            }
        }
    }
}

/// Give plain scalars their YAML 1.1 meaning (what `kubectl` sends):
/// `0644` → 420, `yes` → true. Only values still holding their original text
/// are changed.
fn apply_yaml11_scalars(json: &mut JsonValue, idx: &PositionIndex, doc: usize) {
    for (path, text, v) in idx.yaml11_values(doc) {
        let mut node = Some(&mut *json);
        for seg in &path.0 {
            node = match (node, seg) {
                (Some(JsonValue::Object(m)), PathSegment::Key(k)) => m.get_mut(k),
                (Some(JsonValue::Array(a)), PathSegment::Index(i)) => a.get_mut(*i),
                _ => None,
            };
        }
        if let Some(n) = node
            && n.as_str() == Some(text)
        {
            *n = match v {
                Yaml11Scalar::Bool(b) => JsonValue::Bool(b),
                Yaml11Scalar::Int(i) => JsonValue::from(i),
            };
        }
    }
}

fn json_type_name(v: &JsonValue) -> &'static str {
    match v {
        JsonValue::Null => "null",
        JsonValue::Bool(_) => "a boolean",
        JsonValue::Number(_) => "a number",
        JsonValue::String(_) => "a string",
        JsonValue::Array(_) => "a list",
        JsonValue::Object(_) => "a mapping",
    }
}

fn convert_path(path: &serde_path_to_error::Path) -> Vec<PathSegment> {
    path.iter()
        .filter_map(|seg| match seg {
            serde_path_to_error::Segment::Seq { index } => Some(PathSegment::Index(*index)),
            serde_path_to_error::Segment::Map { key } => Some(PathSegment::Key(key.clone())),
            serde_path_to_error::Segment::Enum { .. } | serde_path_to_error::Segment::Unknown => None,
        })
        .collect()
}

/// Convert a YAML value to JSON the way Kubernetes' YAML decoder does:
/// non-string scalar keys become strings; tags and non-finite numbers are
/// rejected. On failure returns the path of the bad node and a message.
fn yaml_to_json(v: &YamlValue, path: &mut Vec<PathSegment>) -> Result<JsonValue, (Vec<PathSegment>, String)> {
    use YamlValue as Y;
    Ok(match v {
        Y::Null => JsonValue::Null,
        Y::Bool(b) => JsonValue::Bool(*b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                JsonValue::from(i)
            } else if let Some(u) = n.as_u64() {
                JsonValue::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                match serde_json::Number::from_f64(f) {
                    Some(num) => JsonValue::Number(num),
                    None => {
                        return Err((path.clone(), format!("unsupported number {n}")));
                    }
                }
            }
        }
        Y::String(s) => JsonValue::String(s.clone()),
        Y::Sequence(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                path.push(PathSegment::Index(i));
                out.push(yaml_to_json(item, path)?);
                path.pop();
            }
            JsonValue::Array(out)
        }
        Y::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (k, val) in map {
                let key = match k {
                    Y::String(s) => s.clone(),
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    _ => {
                        return Err((path.clone(), "mapping keys must be strings".to_string()));
                    }
                };
                path.push(PathSegment::Key(key.clone()));
                let jv = yaml_to_json(val, path)?;
                path.pop();
                out.insert(key, jv);
            }
            JsonValue::Object(out)
        }
        Y::Tagged(t) => {
            return Err((path.clone(), format!("YAML tag {} is not supported", t.tag)));
        }
    })
}

/// Every key path present in `input` (with a non-null value) that is missing
/// from `output`, where `output` is `input` decoded into a typed object and
/// encoded again: these are the fields the typed object does not have.
pub fn unknown_fields(input: &JsonValue, output: &JsonValue) -> Vec<DocPath> {
    let mut found = Vec::new();
    let mut path = Vec::new();
    walk_unknown(input, output, &mut path, &mut found);
    found
}

fn walk_unknown(input: &JsonValue, output: &JsonValue, path: &mut Vec<PathSegment>, found: &mut Vec<DocPath>) {
    match (input, output) {
        (JsonValue::Object(i), JsonValue::Object(o)) => {
            for (k, v) in i {
                if v.is_null() {
                    continue;
                }
                path.push(PathSegment::Key(k.clone()));
                match o.get(k) {
                    None => found.push(DocPath(path.clone())),
                    Some(ov) => walk_unknown(v, ov, path, found),
                }
                path.pop();
            }
        }
        (JsonValue::Array(i), JsonValue::Array(o)) if i.len() == o.len() => {
            for (n, (iv, ov)) in i.iter().zip(o).enumerate() {
                path.push(PathSegment::Index(n));
                walk_unknown(iv, ov, path, found);
                path.pop();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A manifest using every field the rest of the crate cares about, plus
    /// empty lists/maps, `resources: {}`, quantities and int-or-string ports.
    pub(crate) const RICH: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: rich
  namespace: default
  labels: {app: rich, tier: ""}
  annotations: {note: "", example.com/x: "y"}
  creationTimestamp: null
  finalizers: []
spec:
  restartPolicy: OnFailure
  terminationGracePeriodSeconds: 10
  activeDeadlineSeconds: 600
  dnsPolicy: ClusterFirst
  hostNetwork: false
  enableServiceLinks: false
  nodeSelector: {}
  tolerations: []
  securityContext: {}
  imagePullSecrets: []
  volumes:
  - name: data
    emptyDir: {}
  - name: cfg
    configMap:
      name: cfg
      items: []
      optional: false
  - name: host
    hostPath: {path: /tmp, type: ""}
  initContainers:
  - name: init-a
    image: busybox:1.36
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "true"]
    args: []
    env: []
    envFrom: []
    ports: []
    resources: {}
    volumeMounts:
    - {name: data, mountPath: /data, readOnly: false, subPath: ""}
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
    stdin: false
    tty: false
    workingDir: ""
  - name: sidecar
    image: busybox
    restartPolicy: Always
    startupProbe:
      exec: {command: [cat, /tmp/ready]}
      initialDelaySeconds: 0
      periodSeconds: 1
    readinessProbe:
      httpGet: {path: /healthz, port: http, scheme: HTTP, httpHeaders: []}
    lifecycle:
      preStop:
        sleep: {seconds: 1}
  containers:
  - name: app
    image: nginx:1.25
    ports:
    - {name: http, containerPort: 80, protocol: TCP}
    - {containerPort: 8443, hostPort: 0}
    env:
    - {name: A, value: "1"}
    - {name: B, value: ""}
    - name: POD_NAME
      valueFrom:
        fieldRef: {fieldPath: metadata.name}
    - name: CPU
      valueFrom:
        resourceFieldRef: {resource: limits.cpu, divisor: "1m"}
    resources:
      limits: {cpu: 100m, memory: 128Mi}
      requests: {cpu: 0.05, memory: 64Mi, ephemeral-storage: 1}
    livenessProbe:
      tcpSocket: {port: 80}
      timeoutSeconds: 2
      failureThreshold: 5
      terminationGracePeriodSeconds: 5
    readinessProbe:
      httpGet: {port: 80}
    lifecycle:
      postStart:
        exec: {command: [echo, started]}
    securityContext:
      privileged: false
      capabilities: {add: [], drop: [ALL]}
status: {}
"#;

    fn problems(text: &str) -> Vec<String> {
        match parse_manifests("pod.yaml", text) {
            Ok(p) => panic!("expected an error, got {} pods", p.len()),
            Err(e) => e.problems().iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn rich_manifest_has_no_false_unknowns() {
        let pods = parse_manifests("rich.yaml", RICH).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pods.len(), 1);
        let pod = &pods[0];
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.init_containers.as_ref().map(Vec::len), Some(2));
        assert_eq!(spec.containers[0].ports.as_ref().map(Vec::len), Some(2));
        let res = spec.containers[0].resources.as_ref().expect("resources");
        let limits = res.limits.as_ref().expect("limits");
        assert_eq!(limits["cpu"].0, "100m");
        assert_eq!(res.requests.as_ref().expect("requests")["cpu"].0, "0.05");
    }

    #[test]
    fn json_manifest() {
        let text = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},
          "spec":{"containers":[{"name":"a","image":"busybox",
                  "ports":[{"containerPort":80}]}]}}"#;
        let pods = parse_manifests("pod.json", text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pods[0].metadata.name.as_deref(), Some("j"));
    }

    #[test]
    fn multi_document_files() {
        let text = "\
---
apiVersion: v1
kind: Pod
metadata: {name: one}
spec: {containers: [{name: a, image: busybox}]}
---
# only a comment
---

---
apiVersion: v1
kind: Pod
metadata: {name: two}
spec: {containers: [{name: a, image: busybox}]}
...
";
        let pods = parse_manifests("pods.yaml", text).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<_> = pods.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect();
        assert_eq!(names, ["one", "two"]);
        assert!(parse_manifests("e.yaml", "").expect("empty ok").is_empty());
        assert!(parse_manifests("e.yaml", "---\n---\n").expect("empty ok").is_empty());
    }

    #[test]
    fn syntax_errors_name_file_line_and_column() {
        let cases = [
            (
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers:\n  - name: a\n    image: b: c\n",
                "pod.yaml:8:13: mapping values are not allowed in this context",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [x\n",
                "pod.yaml:5:1: did not find expected ',' or ']', while parsing a flow sequence at line 4 column 9",
            ),
            ("kind: Pod\nkind: Pod\n", "pod.yaml:1:1: duplicate entry with key \"kind\""),
        ];
        for (text, want) in cases {
            assert_eq!(problems(text), vec![want.to_string()], "text {text:?}");
        }
    }

    #[test]
    fn syntax_error_in_later_document_keeps_line() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: b}]}\n---\nkind: Pod\n  bad: indent\n";
        let got = problems(text);
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with("pod.yaml:7:"), "{got:?}");
    }

    #[test]
    fn wrong_kinds_and_shapes() {
        let cases: Vec<(&str, &str)> = vec![
            (
                "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
                "pod.yaml:2:1: document 1: kind \"Service\" (apiVersion \"v1\") is not supported (only apiVersion \"v1\", kind \"Pod\" is supported)",
            ),
            (
                "apiVersion: apps/v1\nkind: Pod\n",
                "pod.yaml:1:1: document 1: apiVersion \"apps/v1\" is not supported for kind \"Pod\" (only apiVersion \"v1\", kind \"Pod\" is supported)",
            ),
            (
                "apiVersion: v1\nmetadata: {name: x}\n",
                "pod.yaml:1:1: document 1: missing \"kind\" (only apiVersion \"v1\", kind \"Pod\" is supported)",
            ),
            (
                "kind: Pod\nmetadata: {name: x}\n",
                "pod.yaml:1:1: document 1: missing \"apiVersion\" (only apiVersion \"v1\", kind \"Pod\" is supported)",
            ),
            ("- a\n- b\n", "pod.yaml:1:1: document 1: expected a Pod object (a mapping), found a list"),
            ("---\nhello\n", "pod.yaml:2:1: document 1: expected a Pod object (a mapping), found a string"),
        ];
        for (text, want) in cases {
            assert_eq!(problems(text), vec![want.to_string()], "text {text:?}");
        }
        // The document index counts every document of the stream.
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: b}]}\n---\napiVersion: v1\nkind: ConfigMap\n";
        assert_eq!(
            problems(text),
            vec!["pod.yaml:7:1: document 2: kind \"ConfigMap\" (apiVersion \"v1\") is not supported (only apiVersion \"v1\", kind \"Pod\" is supported)".to_string()]
        );
    }

    #[test]
    fn unknown_fields_at_several_depths() {
        let text = "\
apiVersion: v1
kind: Pod
metadata:
  name: x
  nmae: typo
spec:
  initContainers:
  - name: init
    image: busybox
    imagePullPolicyy: Always
  containers:
  - name: app
    image: busybox
    ports:
    - containerPort: 80
      protocl: TCP
    livenessProbe:
      httpGet: {port: 80, pathh: /x}
  volumes:
  - name: v
    emptyDir: {medium: Memory, sizeLimitt: 1Gi}
spec2: {}
";
        assert_eq!(
            problems(text),
            vec![
                "pod.yaml:5:3: document 1: metadata.nmae: unknown field",
                "pod.yaml:10:5: document 1: spec.initContainers[0].imagePullPolicyy: unknown field",
                "pod.yaml:16:7: document 1: spec.containers[0].ports[0].protocl: unknown field",
                "pod.yaml:18:27: document 1: spec.containers[0].livenessProbe.httpGet.pathh: unknown field",
                "pod.yaml:21:32: document 1: spec.volumes[0].emptyDir.sizeLimitt: unknown field",
                "pod.yaml:22:1: document 1: spec2: unknown field",
            ]
        );
    }

    #[test]
    fn unknown_field_in_second_document_and_json() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: b}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec:\n  containers:\n  - {name: a, image: b, bogus: 1}\n";
        assert_eq!(problems(text), vec!["pod.yaml:11:25: document 2: spec.containers[0].bogus: unknown field"]);
        let json = "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"j\"},\n  \"spec\": {\"containers\": [{\"name\": \"a\", \"image\": \"b\", \"imagee\": \"c\"}]}\n}\n";
        assert_eq!(problems(json), vec!["pod.yaml:5:55: document 1: spec.containers[0].imagee: unknown field"]);
    }

    #[test]
    fn null_values_are_not_unknown_fields() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, creationTimestamp: null}\nspec: {containers: [{name: a, image: b, resources: null}], nodeName: null}\nstatus: null\n";
        assert!(parse_manifests("p.yaml", text).is_ok());
    }

    #[test]
    fn wrong_types_name_the_field() {
        let cases = [
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: a\n    image: b\n    ports:\n    - containerPort: \"80\"\n",
                "pod.yaml:9:7: document 1: spec.containers[0].ports[0].containerPort: invalid type: string \"80\", expected i32",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  terminationGracePeriodSeconds: soon\n  containers: []\n",
                "pod.yaml:5:3: document 1: spec.terminationGracePeriodSeconds: invalid type: string \"soon\", expected i64",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {app: 1}}\n",
                "pod.yaml:3:30: document 1: metadata.labels.app: invalid type: integer `1`, expected a string",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n    name: a\n",
                "pod.yaml:5:3: document 1: spec.containers: invalid type: map, expected a sequence",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, command: sh}]}\n",
                "pod.yaml:4:31: document 1: spec.containers[0].command: invalid type: string \"sh\", expected a sequence",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(problems(text), vec![want.to_string()], "text {text:?}");
        }
    }

    #[test]
    fn problems_from_all_documents_are_collected() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, x: 1}\n---\nkind: Secret\napiVersion: v1\n";
        let got = problems(text);
        assert_eq!(got.len(), 2, "{got:?}");
        let err = parse_manifests("pod.yaml", text).expect_err("invalid");
        assert_eq!(err.to_string(), got.join("\n"));
    }

    #[test]
    fn yaml_merge_keys_and_int_keys() {
        let text = "\
apiVersion: v1
kind: Pod
metadata:
  name: m
  annotations: {1: one}
spec:
  containers:
  - &base {name: a, image: busybox}
  - <<: *base
    name: b
";
        let pods = parse_manifests("m.yaml", text).unwrap_or_else(|e| panic!("{e}"));
        let spec = pods[0].spec.as_ref().expect("spec");
        assert_eq!(spec.containers[1].name, "b");
        assert_eq!(spec.containers[1].image.as_deref(), Some("busybox"));
        assert_eq!(pods[0].metadata.annotations.as_ref().expect("annotations")["1"], "one");
    }

    #[test]
    fn yaml_1_1_scalars_as_kubectl_reads_them() {
        let text = "\
apiVersion: v1
kind: Pod
metadata: {name: yaml11}
spec:
  containers:
  - name: a
    image: b
    stdin: yes
    tty: off
    ports: [{containerPort: 8_080}]
    volumeMounts: [{name: c, mountPath: /c, readOnly: on}]
  volumes:
  - name: c
    configMap: {name: c, defaultMode: 0644, items: [{key: k, path: p, mode: 0400}]}
";
        let pods = parse_manifests("y.yaml", text).unwrap_or_else(|e| panic!("{e}"));
        let spec = pods[0].spec.as_ref().expect("spec");
        let c = &spec.containers[0];
        assert_eq!((c.stdin, c.tty), (Some(true), Some(false)));
        assert_eq!(c.ports.as_ref().expect("ports")[0].container_port, 8080);
        assert_eq!(c.volume_mounts.as_ref().expect("mounts")[0].read_only, Some(true));
        let cm = spec.volumes.as_ref().expect("volumes")[0].config_map.as_ref().expect("configMap");
        assert_eq!(cm.default_mode, Some(0o644));
        assert_eq!(cm.items.as_ref().expect("items")[0].mode, Some(0o400));

        // Quoted scalars stay strings, and YAML 1.1 booleans are not strings
        // (kubectl rejects `value: yes` too).
        let cases = [
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  volumes: [{name: c, secret: {defaultMode: '0644'}}]\n",
                "y.yaml:5:32: document 1: spec.volumes[0].secret.defaultMode: invalid type: string \"0644\", expected i32",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: a, env: [{name: X, value: yes}]}]\n",
                "y.yaml:5:42: document 1: spec.containers[0].env[0].value: invalid type: boolean `true`, expected a string",
            ),
        ];
        for (text, want) in cases {
            let err = parse_manifests("y.yaml", text).expect_err("type error");
            assert_eq!(err.to_string(), want);
        }
        let ok = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: a, env: [{name: X, value: \"yes\"}]}]\n";
        assert!(parse_manifests("y.yaml", ok).is_ok());
    }

    /// Issue 8: rejecting deep nesting took time that grew with the square of the depth (a
    /// 200 KB document, more than 30 s). Each of these 1 MiB documents is refused after reading
    /// a few dozen bytes; were the cost quadratic again, this test would take hours.
    #[test]
    fn a_megabyte_of_nesting_is_refused_at_the_depth_limit() {
        let half = 512 * 1024;
        let brackets = format!("{}{}", "[".repeat(half), "]".repeat(half));
        assert_eq!(problems(&brackets), ["pod.yaml:1:33: exceeded max depth of 32"]);
        let mappings = format!("a: {}{}", "{a: ".repeat(half / 2), "}".repeat(half / 2));
        assert_eq!(problems(&mappings), ["pod.yaml:1:128: exceeded max depth of 32"]);
        let lists = format!("a:\n{}x\n", "- ".repeat(half));
        assert_eq!(problems(&lists), ["pod.yaml:2:63: exceeded max depth of 32"]);
        // A tab after a colon is YAML libyaml reads and the position parser does not.
        let tab = format!("a:\tb\nc: {}{}", "[".repeat(half), "]".repeat(half));
        assert_eq!(problems(&tab), ["pod.yaml:2:36: exceeded max depth of 32"]);
    }

    #[test]
    fn manifests_larger_than_the_api_servers_limit_are_not_read() {
        let text = format!("{RICH}#{}", " ".repeat(MAX_MANIFEST_BYTES - RICH.len()));
        let err = parse_manifests("big.yaml", &text).expect_err("too large");
        assert_eq!(err.to_string(), "big.yaml: too large: must have at most 3145728 bytes (the API server's limit)");
        assert!(parse_manifests("big.yaml", &text[..MAX_MANIFEST_BYTES]).is_ok());
    }

    #[test]
    fn read_errors_name_the_file() {
        let err = read_objects("/nonexistent/podwright/pod.yaml").expect_err("missing file");
        assert!(err.to_string().starts_with("/nonexistent/podwright/pod.yaml: "), "{err}");
        let dir = std::env::temp_dir().join(format!("podwright-api-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let file = dir.join("pod.yaml");
        std::fs::write(&file, RICH).expect("write");
        let objects = read_objects(file.to_str().expect("utf8 path")).expect("reads");
        assert!(matches!(objects.as_slice(), [ManifestObject::Pod(_)]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn object_problems(text: &str) -> Vec<String> {
        match parse_objects("all.yaml", text) {
            Ok(o) => panic!("expected an error, got {} objects", o.len()),
            Err(e) => e.problems().iter().map(|p| p.to_string()).collect(),
        }
    }

    /// The kind and name of each object, in order.
    fn names(objects: &[ManifestObject]) -> Vec<String> {
        objects
            .iter()
            .map(|o| match o {
                ManifestObject::Pod(p) => format!("Pod/{}", p.metadata.name.clone().unwrap_or_default()),
                ManifestObject::ConfigMap(c) => format!("ConfigMap/{}", c.metadata.name.clone().unwrap_or_default()),
                ManifestObject::Secret(s) => format!("Secret/{}", s.metadata.name.clone().unwrap_or_default()),
                ManifestObject::RuntimeClass(r) => {
                    format!("RuntimeClass/{}", r.metadata.name.clone().unwrap_or_default())
                }
            })
            .collect()
    }

    #[test]
    fn config_maps_secrets_and_runtime_classes_beside_pods() {
        let text = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {app.conf: \"port=80\\n\"}
binaryData: {logo.png: iVBORw==}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec: {containers: [{name: a, image: busybox}]}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: other}
type: kubernetes.io/basic-auth
data: {password: cGFzcw==}
stringData: {username: admin}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
";
        let objects = parse_objects("all.yaml", text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names(&objects), ["ConfigMap/cfg", "Pod/web", "Secret/creds", "RuntimeClass/gvisor"]);
        let ManifestObject::ConfigMap(cm) = &objects[0] else { unreachable!() };
        assert_eq!(cm.data.as_ref().expect("data")["app.conf"], "port=80\n");
        assert_eq!(cm.binary_data.as_ref().expect("binary")["logo.png"].0, b"\x89PNG");
        let ManifestObject::Secret(secret) = &objects[2] else { unreachable!() };
        assert_eq!(secret.data.as_ref().expect("data")["password"].0, b"pass");
        assert_eq!(secret.string_data.as_ref().expect("stringData")["username"], "admin");
        let ManifestObject::RuntimeClass(rc) = &objects[3] else { unreachable!() };
        assert_eq!(rc.handler, "runsc");

        // A static pod file holds pods only.
        assert_eq!(
            problems(text),
            [
                "pod.yaml:2:1: document 1: kind \"ConfigMap\" (apiVersion \"v1\") is not supported (only apiVersion \"v1\", kind \"Pod\" is supported)",
                "pod.yaml:13:1: document 3: kind \"Secret\" (apiVersion \"v1\") is not supported (only apiVersion \"v1\", kind \"Pod\" is supported)",
                "pod.yaml:20:1: document 4: kind \"RuntimeClass\" (apiVersion \"node.k8s.io/v1\") is not supported (only apiVersion \"v1\", kind \"Pod\" is supported)",
            ]
        );
    }

    #[test]
    fn lists_as_kubectl_writes_them() {
        let text = "\
apiVersion: v1
kind: List
metadata: {resourceVersion: \"\"}
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: a}
- apiVersion: v1
  kind: List
  items:
  - {apiVersion: v1, kind: Secret, metadata: {name: s}}
- apiVersion: v1
  kind: Pod
  metadata: {name: p}
  spec: {containers: [{name: a, image: busybox}]}
";
        let objects = parse_objects("list.yaml", text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names(&objects), ["ConfigMap/a", "Secret/s", "Pod/p"]);
        let json = r#"{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}}]}"#;
        assert_eq!(names(&parse_objects("list.json", json).expect("json list")), ["ConfigMap/j"]);
        assert!(parse_objects("e.yaml", "apiVersion: v1\nkind: List\nitems: []\n").expect("empty list").is_empty());
    }

    #[test]
    fn problems_in_list_items_name_the_item() {
        let text = "\
apiVersion: v1
kind: List
extra: 1
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: a}
  dta: {k: v}
- apiVersion: v1
  kind: Service
  metadata: {name: s}
- 7
- apiVersion: v1
  kind: Secret
  metadata: {name: s}
  data: {k: 1}
";
        assert_eq!(
            object_problems(text),
            [
                "all.yaml:3:1: document 1: extra: unknown field",
                "all.yaml:8:3: document 1: items[0].dta: unknown field",
                "all.yaml:10:3: document 1: items[1]: kind \"Service\" (apiVersion \"v1\") is not supported (supported: apiVersion \"v1\", kind \"Pod\", \"ConfigMap\", \"Secret\" or \"List\"; apiVersion \"node.k8s.io/v1\", kind \"RuntimeClass\")",
                "all.yaml:12:3: document 1: items[2]: expected an object (a mapping), found a number",
                "all.yaml:16:10: document 1: items[3].data.k: invalid type: integer `1`, expected a base64-encoded string",
            ]
        );
        assert_eq!(
            object_problems("apiVersion: v1\nkind: List\nitems: {a: b}\n"),
            ["all.yaml:3:1: document 1: items: expected a list, found a mapping"]
        );
    }

    #[test]
    fn kinds_and_api_versions_of_objects() {
        let cases = [
            (
                "apiVersion: node.k8s.io/v1beta1\nkind: RuntimeClass\nmetadata: {name: r}\nhandler: h\n",
                "all.yaml:1:1: document 1: apiVersion \"node.k8s.io/v1beta1\" is not supported for kind \"RuntimeClass\" (supported: apiVersion \"v1\", kind \"Pod\", \"ConfigMap\", \"Secret\" or \"List\"; apiVersion \"node.k8s.io/v1\", kind \"RuntimeClass\")",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {port: 8080}\n",
                "all.yaml:4:8: document 1: data.port: invalid type: integer `8080`, expected a string",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {enabled: yes}\n",
                "all.yaml:4:8: document 1: data.enabled: invalid type: boolean `true`, expected a string",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(object_problems(text), [want], "{text}");
        }
    }

    #[test]
    fn a_name_given_twice_in_one_namespace_is_refused() {
        let text = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: other}
---
apiVersion: v1
kind: Secret
metadata: {name: cfg}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: cfg, namespace: default}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: r}
handler: h
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: r}
handler: h
";
        assert_eq!(
            object_problems(text),
            [
                "all.yaml:16:3: document 4: items[0]: configmaps \"cfg\" already exists",
                "all.yaml:25:1: document 6: runtimeclasses.node.k8s.io \"r\" already exists",
            ]
        );
    }
}
