//! The whole admission path for manifests: parse, convert legacy
//! init-container annotations, apply defaults, validate, refuse fields podwright does not
//! honour; and for the ConfigMaps, Secrets and RuntimeClasses beside the pods, what the API
//! server does to them on create. Either every object is admitted or nothing is, with every
//! problem of every object reported.

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::defaults::{DEFAULT_NAMESPACE, apply_defaults, default_secret, set_if_empty};
use crate::field_error::{FieldError, InvalidObject};
use crate::honoured_fields::unsupported_fields;
use crate::init_container_annotations::convert_init_container_annotations;
use crate::manifest::{ManifestError, ManifestObject, parse_objects, read_objects};
use crate::runtime_class_admission::admit_runtime_class_of;
use crate::validation::{
    validate_config_map, validate_config_map_update, validate_pod, validate_runtime_class, validate_secret,
    validate_secret_update,
};

/// Loading manifests failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read or decoded.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// One or more objects are invalid; each is listed in kubectl's format, in file order.
    #[error("{}", .0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<InvalidObject>),
}

/// Everything a manifest holds, admitted, each kind in file order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Loaded {
    /// The pods, each with its warnings (deprecated annotations).
    pub pods: Vec<(Pod, Vec<String>)>,
    /// Namespace defaulted.
    pub config_maps: Vec<ConfigMap>,
    /// Namespace defaulted, `stringData` folded into `data`, type defaulted.
    pub secrets: Vec<Secret>,
    /// Validated; pods are admitted against them (their overhead set on the pods).
    pub runtime_classes: Vec<RuntimeClass>,
}

/// Convert, default and validate one pod in place. Returns the warnings
/// (deprecated annotations) or all the reasons the pod is invalid, the fields podwright does
/// not honour last.
pub fn admit_pod(pod: &mut Pod) -> Result<Vec<String>, InvalidObject> {
    // A status in a manifest (one saved from a cluster) is ignored, as the API server ignores
    // it on create: the node reports its own, and takes a given one as what it reported before.
    pod.status = None;
    let (warnings, mut errors) = match convert_init_container_annotations(pod) {
        Ok(w) => (w, Vec::new()),
        Err(e) => (Vec::new(), e),
    };
    // Before defaulting, so that each refusal names a field the manifest sets.
    let unsupported = unsupported_fields(pod);
    apply_defaults(pod);
    errors.extend(validate_pod(pod));
    errors.extend(unsupported);
    InvalidObject::check("Pod", pod.metadata.name.as_deref(), errors).map(|()| warnings)
}

/// A ConfigMap or Secret: what the API server does to one besides defaulting its namespace,
/// the same for `run` and the local API.
pub trait ConfigObject: k8s_openapi::Metadata<Ty = ObjectMeta> {
    /// The kind's own defaults, applied before validation.
    fn apply_defaults(&mut self) {}
    /// Validate for creation (after defaulting); empty means valid.
    fn validate(&self) -> Vec<FieldError>;
    /// Validate a new version (defaulted) against the stored one.
    fn validate_update(&self, old: &Self) -> Vec<FieldError>;
}

impl ConfigObject for ConfigMap {
    fn validate(&self) -> Vec<FieldError> {
        validate_config_map(self)
    }

    fn validate_update(&self, old: &Self) -> Vec<FieldError> {
        validate_config_map_update(self, old)
    }
}

impl ConfigObject for Secret {
    /// `stringData` into `data`, and the type.
    fn apply_defaults(&mut self) {
        default_secret(self);
    }

    fn validate(&self) -> Vec<FieldError> {
        validate_secret(self)
    }

    fn validate_update(&self, old: &Self) -> Vec<FieldError> {
        validate_secret_update(self, old)
    }
}

/// Default (the namespace, and the kind's own defaults) and validate a ConfigMap or Secret in
/// place, as the API server does on create.
pub fn admit_config_object<T: ConfigObject>(object: &mut T) -> Result<(), InvalidObject> {
    set_if_empty(&mut object.metadata_mut().namespace, DEFAULT_NAMESPACE);
    object.apply_defaults();
    InvalidObject::check(T::KIND, object.metadata().name.as_deref(), object.validate())
}

/// Validate a RuntimeClass (cluster-scoped: no namespace is defaulted).
pub fn admit_runtime_class(rc: &RuntimeClass) -> Result<(), InvalidObject> {
    InvalidObject::check("RuntimeClass", rc.metadata.name.as_deref(), validate_runtime_class(rc))
}

/// [`admit_pod`], then the RuntimeClass admission against the classes beside the pod, its
/// refusal naming the field.
fn admit_pod_with_classes(pod: &mut Pod, classes: &[RuntimeClass]) -> Result<Vec<String>, InvalidObject> {
    let warnings = admit_pod(pod)?;
    let class_of = |name: &str| classes.iter().find(|rc| rc.metadata.name.as_deref() == Some(name)).cloned();
    admit_runtime_class_of(pod, class_of).map_err(|refusal| {
        InvalidObject::new("Pod", pod.metadata.name.clone().unwrap_or_default(), vec![refusal.field_error()])
    })?;
    Ok(warnings)
}

fn admit_all(objects: Vec<ManifestObject>) -> Result<Loaded, LoadError> {
    let mut loaded = Loaded::default();
    let mut invalid = Vec::new();
    let classes: Vec<RuntimeClass> = objects
        .iter()
        .filter_map(|o| match o {
            ManifestObject::RuntimeClass(rc) => Some(rc.clone()),
            _ => None,
        })
        .collect();
    for object in objects {
        let admitted = match object {
            ManifestObject::Pod(mut pod) => {
                admit_pod_with_classes(&mut pod, &classes).map(|warnings| loaded.pods.push((*pod, warnings)))
            }
            ManifestObject::ConfigMap(mut cm) => admit_config_object(&mut cm).map(|()| loaded.config_maps.push(cm)),
            ManifestObject::Secret(mut s) => admit_config_object(&mut s).map(|()| loaded.secrets.push(s)),
            ManifestObject::RuntimeClass(rc) => admit_runtime_class(&rc).map(|()| loaded.runtime_classes.push(rc)),
        };
        if let Err(e) = admitted {
            invalid.push(e);
        }
    }
    if invalid.is_empty() { Ok(loaded) } else { Err(LoadError::Invalid(invalid)) }
}

/// Load every object of a manifest file (`-` = stdin): parsed, converted, defaulted and
/// validated.
pub fn load(path: &str) -> Result<Loaded, LoadError> {
    admit_all(read_objects(path)?)
}

/// [`load`] for manifest text already in memory.
pub fn load_str(source_name: &str, text: &str) -> Result<Loaded, LoadError> {
    admit_all(parse_objects(source_name, text)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_the_legacy_docs_example() {
        let text = r#"
apiVersion: v1
kind: Pod
metadata:
  name: myapp-pod
  labels:
    app: myapp
  annotations:
    pod.beta.kubernetes.io/init-containers: '[
        {"name": "init-myservice", "image": "busybox",
         "command": ["sh", "-c", "until nslookup myservice; do echo waiting for myservice; sleep 2; done;"]},
        {"name": "init-mydb", "image": "busybox",
         "command": ["sh", "-c", "until nslookup mydb; do echo waiting for mydb; sleep 2; done;"]}
    ]'
spec:
  containers:
  - name: myapp-container
    image: busybox
    command: ['sh', '-c', 'echo The app is running! && sleep 3600']
"#;
        let pods = load_str("myapp.yaml", text).unwrap_or_else(|e| panic!("{e}")).pods;
        assert_eq!(pods.len(), 1);
        let (pod, warnings) = &pods[0];
        assert_eq!(
            warnings,
            &vec!["metadata.annotations[pod.beta.kubernetes.io/init-containers]: deprecated since v1.6; use the \"spec.initContainers\" field instead".to_string()]
        );
        let spec = pod.spec.as_ref().expect("spec");
        let inits = spec.init_containers.as_ref().expect("init containers");
        assert_eq!(inits.len(), 2);
        // converted containers are defaulted like any other
        assert_eq!(inits[1].image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(inits[1].termination_message_path.as_deref(), Some("/dev/termination-log"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
    }

    #[test]
    fn reports_all_errors_of_all_pods_and_admits_none() {
        let text = "\
apiVersion: v1
kind: Pod
metadata: {name: good}
spec: {containers: [{name: a, image: b}]}
---
apiVersion: v1
kind: Pod
metadata:
  name: bad-one
  annotations:
    pod.beta.kubernetes.io/init-containers: '[{\"name\": \"x\", \"image\": \"b\"}]'
spec:
  initContainers: [{name: yy, image: b, readinessProbe: {exec: {command: [x]}}}]
  containers: [{name: a, image: b}]
---
apiVersion: v1
kind: Pod
metadata: {name: bad-two}
spec: {containers: []}
";
        let err = load_str("pods.yaml", text).expect_err("invalid");
        let LoadError::Invalid(objects) = &err else {
            panic!("expected validation errors, got {err}");
        };
        assert_eq!(objects.len(), 2);
        assert_eq!(
            err.to_string(),
            "The Pod \"bad-one\" is invalid: \n\
             * metadata.annotations[pod.beta.kubernetes.io/init-containers]: Forbidden: may not be set together with spec.initContainers; declare init containers only in spec.initContainers\n\
             * spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always\n\
             The Pod \"bad-two\" is invalid: spec.containers: Required value"
        );
    }

    #[test]
    fn fields_podwright_does_not_honour_come_after_validation_errors() {
        let text = "\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  securityContext: {appArmorProfile: {type: RuntimeDefault}}
  volumes: [{name: share, nfs: {server: nas, path: /x}}]
  containers: [{name: a, image: busybox, volumeMounts: [{name: nope, mountPath: /x}]}]
";
        let err = load_str("p.yaml", text).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "The Pod \"p\" is invalid: \n\
             * spec.containers[0].volumeMounts[0].name: Not found: \"nope\"\n\
             * spec.securityContext.appArmorProfile: Unsupported value: not supported by podwright yet\n\
             * spec.volumes[0].nfs: Unsupported value: not supported by podwright yet"
        );
    }

    #[test]
    fn manifest_errors_pass_through() {
        let err = load_str("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a, nmae: b}\n")
            .expect_err("unknown field");
        assert!(matches!(err, LoadError::Manifest(_)));
        assert_eq!(err.to_string(), "pod.yaml:3:21: document 1: metadata.nmae: unknown field");
        assert!(matches!(load("/nonexistent/podwright.yaml"), Err(LoadError::Manifest(ManifestError::Read { .. }))));
    }

    #[test]
    fn admit_single_pod() {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a", "image": "busybox:1.36"}]}
        }))
        .expect("pod");
        assert_eq!(admit_pod(&mut pod), Ok(vec![]));
        assert!(pod.metadata.uid.is_some());
        let mut bad = Pod::default();
        let err = admit_pod(&mut bad).expect_err("invalid");
        assert_eq!(
            err.to_string(),
            "The Pod \"\" is invalid: \n* metadata.name: Required value: name or generateName is required\n* spec.containers: Required value"
        );
    }

    #[test]
    fn config_maps_and_secrets_are_admitted_as_the_api_server_admits_them() {
        let text = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {app.conf: x}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec: {containers: [{name: a, image: busybox}]}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: other}
data: {username: YWRtaW4=}
stringData: {password: hunter2, username: root}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
";
        let loaded = load_str("all.yaml", text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(loaded.pods.len(), 1);
        let [cm] = loaded.config_maps.as_slice() else { panic!("one config map: {loaded:?}") };
        assert_eq!(cm.metadata.namespace.as_deref(), Some("default"));
        let [secret] = loaded.secrets.as_slice() else { panic!("one secret: {loaded:?}") };
        assert_eq!(secret.metadata.namespace.as_deref(), Some("other"));
        assert_eq!(secret.type_.as_deref(), Some("Opaque"));
        assert_eq!(secret.string_data, None);
        let data = secret.data.as_ref().expect("data");
        assert_eq!((data["username"].0.as_slice(), data["password"].0.as_slice()), (&b"root"[..], &b"hunter2"[..]));
        assert_eq!(loaded.runtime_classes.len(), 1);
    }

    #[test]
    fn pods_get_their_classes_overhead_and_an_unknown_class_is_refused() {
        let text = "\
apiVersion: v1
kind: Pod
metadata: {name: vm}
spec: {runtimeClassName: kata, containers: [{name: a, image: busybox}]}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: kata}
handler: runc-alt
overhead: {podFixed: {memory: 64Mi}}
";
        let loaded = load_str("vm.yaml", text).unwrap_or_else(|e| panic!("{e}"));
        let overhead = loaded.pods[0].0.spec.as_ref().and_then(|s| s.overhead.clone()).expect("overhead");
        assert_eq!(overhead["memory"].0, "64Mi");

        let unknown = "\
apiVersion: v1
kind: Pod
metadata: {name: sandboxed}
spec: {runtimeClassName: gvisor, containers: [{name: a, image: busybox}]}
";
        let err = load_str("gvisor.yaml", unknown).unwrap_err();
        assert_eq!(
            err.to_string(),
            "The Pod \"sandboxed\" is invalid: spec.runtimeClassName: Forbidden: pod rejected: RuntimeClass \"gvisor\" not found"
        );
    }

    #[test]
    fn every_invalid_object_is_reported_and_none_admitted() {
        let text = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {\"a b\": x, ..data: z}
binaryData: {..data: eQ==}
---
apiVersion: v1
kind: Pod
metadata: {name: bad-pod}
spec: {containers: []}
---
apiVersion: v1
kind: Secret
metadata: {name: Tls}
type: kubernetes.io/tls
stringData: {tls.crt: x}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: fine}
";
        let err = load_str("all.yaml", text).expect_err("invalid");
        assert_eq!(
            err.to_string(),
            "The ConfigMap \"cfg\" is invalid: \n\
             * data[..data]: Invalid value: \"..data\": must not start with '..'\n\
             * data[..data]: Invalid value: \"..data\": duplicate of key present in binaryData\n\
             * data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')\n\
             * binaryData[..data]: Invalid value: \"..data\": must not start with '..'\n\
             The Pod \"bad-pod\" is invalid: spec.containers: Required value\n\
             The Secret \"Tls\" is invalid: \n\
             * metadata.name: Invalid value: \"Tls\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')\n\
             * data[tls.key]: Required value"
        );
    }

    #[test]
    fn a_config_map_over_a_mebibyte_is_refused() {
        let text = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata:\n  a: {}\n  b: x\n",
            "x".repeat(1024 * 1024)
        );
        let err = load_str("big.yaml", &text).expect_err("too large");
        assert_eq!(err.to_string(), "The ConfigMap \"big\" is invalid: []: Too long: must have at most 1048576 bytes");
    }
}
