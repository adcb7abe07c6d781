//! podwright-api: Kubernetes v1 Pod manifests (and the ConfigMaps, Secrets and
//! RuntimeClasses beside them) for the podwright node agent, handled the way the API server
//! and kubectl handle them.
//!
//! * [`annotations`] — the `kubernetes.io/config.*` keys of static and mirror pods;
//! * [`manifest`] — strict YAML/JSON parsing (unknown fields, wrong types and
//!   syntax errors name the file, line and field path);
//! * [`init_container_annotations`] — the pre-1.6 `pod.beta/alpha.kubernetes.io/init-containers`
//!   annotations, converted into `spec.initContainers`;
//! * [`defaults`] — API-server defaulting (`pkg/apis/core/v1/defaults.go`);
//! * [`validation`] / [`field_error`] — create-time validation with the API
//!   server's field paths and messages, and kubectl's "The Pod ... is invalid";
//! * [`honoured_fields`] — the table of the Pod fields podwright honours, and the refusal of
//!   any other field a pod sets;
//! * [`kubectl_status`] — the READY/STATUS/RESTARTS/AGE columns of `kubectl get pods`;
//! * [`container_kind`] — init/regular/sidecar classification and container field paths;
//! * [`image_ref`] — image reference parsing and the default pull policy;
//! * [`quantity`] — resource quantities, compared and scaled by value;
//! * [`pod_resources`] — resource lists added and compared by value, the containers' aggregate
//!   requests and limits, and the pod-level resources (`spec.resources`);
//! * [`sysctl`] — sysctl names and the kernel namespaces that isolate them;
//! * [`runtime_class_admission`] — the RuntimeClass admission plugin: unknown classes refused,
//!   the class's overhead set on the pod;
//! * [`expansion`] — `$(VAR)` references in commands, env values and `subPathExpr`;
//! * [`yaml`] — YAML in and out, for the manifests and every other crate;
//! * [`go`] — Go's quoting, duration text and aggregate error message, as Kubernetes prints them;
//! * [`load()`] — all of the above for a manifest file, pods and the objects beside them.

pub mod annotations;
pub mod container_kind;
pub mod defaults;
pub mod expansion;
pub mod field_error;
pub mod formats;
pub mod go;
pub mod honoured_fields;
pub mod hook;
pub mod image_ref;
pub mod init_container_annotations;
pub mod kubectl_status;
pub mod load;
pub mod manifest;
pub mod pod_resources;
pub mod quantity;
pub mod runtime_class_admission;
pub mod sysctl;
pub mod validation;
pub mod volume_sources;
pub mod yaml;
pub mod yaml_positions;

/// The Kubernetes release whose API and kubelet rules podwright follows: what it reports as its
/// version (the local API's `/version`, a Node's `kubeletVersion`).
pub const KUBERNETES_VERSION: &str = "v1.37.0";

pub use k8s_openapi;

pub use container_kind::{ContainerKind, PodContainer, container_statuses, field_path, is_sidecar, pod_containers};
pub use defaults::apply_defaults;
pub use field_error::{ErrorKind, FieldError, InvalidObject};
pub use hook::Hook;
pub use init_container_annotations::convert_init_container_annotations;
pub use kubectl_status::{PodSummary, summarize};
pub use load::{ConfigObject, LoadError, Loaded, admit_config_object, admit_pod, admit_runtime_class, load, load_str};
pub use manifest::{ManifestError, ManifestObject, parse_manifests, parse_objects, read_objects};
pub use validation::{validate_config_map, validate_pod, validate_secret};
