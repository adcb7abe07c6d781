//! The whole admission path for manifests: parse, convert legacy
//! init-container annotations, apply defaults, validate, refuse fields podwright does not
//! honour. Either every pod is admitted or nothing is, with every problem of every pod reported.

use k8s_openapi::api::core::v1::Pod;

use crate::defaults::apply_defaults;
use crate::field_error::InvalidPod;
use crate::honoured_fields::unsupported_fields;
use crate::init_container_annotations::convert_init_container_annotations;
use crate::manifest::{ManifestError, parse_manifests, read_manifests};
use crate::validation::validate_pod;

/// Loading manifests failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read or decoded.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// One or more pods are invalid; each is listed in kubectl's format.
    #[error("{}", .0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<InvalidPod>),
}

/// Convert, default and validate one pod in place. Returns the warnings
/// (deprecated annotations) or all the reasons the pod is invalid, the fields podwright does
/// not honour last.
pub fn admit_pod(pod: &mut Pod) -> Result<Vec<String>, InvalidPod> {
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
    if errors.is_empty() {
        Ok(warnings)
    } else {
        Err(InvalidPod::new(pod.metadata.name.clone().unwrap_or_default(), errors))
    }
}

fn admit_all(pods: Vec<Pod>) -> Result<Vec<(Pod, Vec<String>)>, LoadError> {
    let mut admitted = Vec::with_capacity(pods.len());
    let mut invalid = Vec::new();
    for mut pod in pods {
        match admit_pod(&mut pod) {
            Ok(warnings) => admitted.push((pod, warnings)),
            Err(e) => invalid.push(e),
        }
    }
    if invalid.is_empty() { Ok(admitted) } else { Err(LoadError::Invalid(invalid)) }
}

/// Load every pod of a manifest file (`-` = stdin): parsed, converted,
/// defaulted and validated. Each pod comes with its warnings.
pub fn load(path: &str) -> Result<Vec<(Pod, Vec<String>)>, LoadError> {
    admit_all(read_manifests(path)?)
}

/// [`load`] for manifest text already in memory.
pub fn load_str(source_name: &str, text: &str) -> Result<Vec<(Pod, Vec<String>)>, LoadError> {
    admit_all(parse_manifests(source_name, text)?)
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
        let pods = load_str("myapp.yaml", text).unwrap_or_else(|e| panic!("{e}"));
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
        let LoadError::Invalid(pods) = &err else {
            panic!("expected validation errors, got {err}");
        };
        assert_eq!(pods.len(), 2);
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
  securityContext: {runAsUser: 1000}
  volumes: [{name: share, nfs: {server: nas, path: /x}}]
  containers: [{name: a, image: busybox, volumeMounts: [{name: nope, mountPath: /x}]}]
";
        let err = load_str("p.yaml", text).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "The Pod \"p\" is invalid: \n\
             * spec.containers[0].volumeMounts[0].name: Not found: \"nope\"\n\
             * spec.securityContext.runAsUser: Unsupported value: 1000: not supported by podwright yet\n\
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
}
