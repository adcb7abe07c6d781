//! The pre-1.6 way of declaring init containers: a JSON array of containers in
//! the `pod.beta.kubernetes.io/init-containers` (or, before that,
//! `pod.alpha.kubernetes.io/init-containers`) annotation. Converted into
//! `spec.initContainers` with a deprecation warning.
//!
//! Rules (strict, so nothing is silently dropped):
//! * the annotation must hold a JSON array of v1 Containers, decoded as
//!   strictly as a manifest (unknown fields and wrong types are errors);
//! * if both the beta and the alpha annotation are set they must hold the
//!   same containers;
//! * if `spec.initContainers` is also set, the annotation must hold exactly
//!   the same containers (the mirror a 1.6/1.7 API server wrote); otherwise
//!   it is a `Forbidden` error on the annotation's path.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use serde_json::Value as JsonValue;

use crate::field_error::{ErrorKind, FieldError, FieldPath};
use crate::manifest::unknown_fields;
use crate::yaml_positions::{DocPath, PathSegment};

/// The beta annotation (Kubernetes 1.4–1.7).
pub const INIT_CONTAINERS_BETA_ANNOTATION: &str = "pod.beta.kubernetes.io/init-containers";
/// The alpha annotation (Kubernetes 1.3–1.5).
pub const INIT_CONTAINERS_ALPHA_ANNOTATION: &str = "pod.alpha.kubernetes.io/init-containers";

/// Field path of an annotation: `metadata.annotations[<key>]`.
pub fn annotation_path(key: &str) -> String {
    FieldPath::new("metadata").child("annotations").key(key).into()
}

/// The deprecation warning for a legacy init-container annotation.
pub fn deprecation_warning(key: &str) -> String {
    format!("{}: deprecated since v1.6; use the \"spec.initContainers\" field instead", annotation_path(key))
}

fn invalid(key: &str, detail: String) -> FieldError {
    FieldError::new(annotation_path(key), ErrorKind::Invalid, None, detail)
}

/// Decode an annotation value as strictly as a manifest.
fn decode(key: &str, text: &str) -> Result<Vec<Container>, Vec<FieldError>> {
    let json: JsonValue = serde_json::from_str(text)
        .map_err(|e| vec![invalid(key, format!("must be a JSON array of containers: {e}"))])?;
    if !json.is_array() {
        return Err(vec![invalid(key, "must be a JSON array of containers".to_string())]);
    }
    let containers: Vec<Container> = serde_path_to_error::deserialize(&json).map_err(|e| {
        let path: Vec<PathSegment> = e
            .path()
            .iter()
            .filter_map(|s| match s {
                serde_path_to_error::Segment::Seq { index } => Some(PathSegment::Index(*index)),
                serde_path_to_error::Segment::Map { key } => Some(PathSegment::Key(key.clone())),
                _ => None,
            })
            .collect();
        vec![invalid(key, format!("{}: {}", DocPath(path), e.inner()))]
    })?;
    let back = serde_json::to_value(&containers)
        .map_err(|e| vec![FieldError::internal(annotation_path(key), e.to_string())])?;
    let unknown = unknown_fields(&json, &back);
    if !unknown.is_empty() {
        return Err(unknown.into_iter().map(|p| invalid(key, format!("unknown field \"{p}\""))).collect());
    }
    Ok(containers)
}

/// Move init containers declared in the legacy annotations into
/// `spec.initContainers`, removing the annotations. Returns the deprecation
/// warnings, or the field errors that make the pod invalid.
pub fn convert_init_container_annotations(pod: &mut Pod) -> Result<Vec<String>, Vec<FieldError>> {
    let Some(annotations) = pod.metadata.annotations.as_mut() else {
        return Ok(Vec::new());
    };
    let beta = annotations.remove(INIT_CONTAINERS_BETA_ANNOTATION);
    let alpha = annotations.remove(INIT_CONTAINERS_ALPHA_ANNOTATION);
    if annotations.is_empty() {
        pod.metadata.annotations = None;
    }

    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    let mut decoded: Vec<(&str, Vec<Container>)> = Vec::new();
    for (key, value) in [(INIT_CONTAINERS_BETA_ANNOTATION, beta), (INIT_CONTAINERS_ALPHA_ANNOTATION, alpha)] {
        let Some(text) = value else { continue };
        warnings.push(deprecation_warning(key));
        match decode(key, &text) {
            Ok(c) => decoded.push((key, c)),
            Err(e) => errors.extend(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let Some((key, containers)) = decoded.first() else {
        return Ok(warnings);
    };
    if let Some((other_key, other)) = decoded.get(1)
        && other != containers
    {
        return Err(vec![FieldError::invalid(
            annotation_path(other_key),
            crate::field_error::Raw("<containers>".into()),
            format!("must hold the same containers as metadata.annotations[{key}] when both are set"),
        )]);
    }

    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    match spec.init_containers.as_ref() {
        Some(existing) if !existing.is_empty() => {
            if existing != containers {
                return Err(vec![FieldError::forbidden(
                    annotation_path(key),
                    "may not be set together with spec.initContainers; declare init containers only in spec.initContainers",
                )]);
            }
        }
        _ => spec.init_containers = Some(containers.clone()),
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::parse_manifests;

    /// The example from the Kubernetes 1.5 init-containers documentation.
    const DOC_EXAMPLE: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: myapp-pod
  labels:
    app: myapp
  annotations:
    pod.beta.kubernetes.io/init-containers: '[
        {
            "name": "init-myservice",
            "image": "busybox",
            "command": ["sh", "-c", "until nslookup myservice; do echo waiting for myservice; sleep 2; done;"]
        },
        {
            "name": "init-mydb",
            "image": "busybox",
            "command": ["sh", "-c", "until nslookup mydb; do echo waiting for mydb; sleep 2; done;"]
        }
    ]'
spec:
  containers:
  - name: myapp-container
    image: busybox
    command: ['sh', '-c', 'echo The app is running! && sleep 3600']
"#;

    fn pod(yaml: &str) -> Pod {
        parse_manifests("t.yaml", yaml).unwrap_or_else(|e| panic!("{e}")).remove(0)
    }

    fn with_annotations(annotations: &[(&str, &str)], init: &str) -> Pod {
        let mut p = pod(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers: [{{name: app, image: busybox}}]\n{init}"
        ));
        p.metadata.annotations = Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        p
    }

    fn init_names(p: &Pod) -> Vec<String> {
        p.spec
            .as_ref()
            .and_then(|s| s.init_containers.as_ref())
            .map(|v| v.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default()
    }

    fn errors(r: Result<Vec<String>, Vec<FieldError>>) -> Vec<String> {
        match r {
            Ok(w) => panic!("expected errors, got warnings {w:?}"),
            Err(e) => e.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn beta_annotation_from_the_docs() {
        let mut p = pod(DOC_EXAMPLE);
        let warnings = convert_init_container_annotations(&mut p).expect("converts");
        assert_eq!(
            warnings,
            vec![
                "metadata.annotations[pod.beta.kubernetes.io/init-containers]: deprecated since v1.6; use the \"spec.initContainers\" field instead"
            ]
        );
        assert_eq!(init_names(&p), ["init-myservice", "init-mydb"]);
        // the annotation is gone, other metadata kept
        assert_eq!(p.metadata.annotations, None);
        assert_eq!(p.metadata.labels.as_ref().map(|l| l["app"].as_str()), Some("myapp"));
        let first = &p.spec.as_ref().expect("spec").init_containers.as_ref().expect("init")[0];
        assert_eq!(first.image.as_deref(), Some("busybox"));
        assert_eq!(first.command.as_ref().map(Vec::len), Some(3));
    }

    #[test]
    fn alpha_annotation() {
        let mut p = with_annotations(
            &[(INIT_CONTAINERS_ALPHA_ANNOTATION, r#"[{"name":"a","image":"busybox"}]"#), ("keep", "me")],
            "",
        );
        let warnings = convert_init_container_annotations(&mut p).expect("converts");
        assert_eq!(
            warnings,
            vec![
                "metadata.annotations[pod.alpha.kubernetes.io/init-containers]: deprecated since v1.6; use the \"spec.initContainers\" field instead"
            ]
        );
        assert_eq!(init_names(&p), ["a"]);
        assert_eq!(p.metadata.annotations.as_ref().map(|a| a.len()), Some(1), "unrelated annotations are kept");
    }

    #[test]
    fn beta_and_alpha_together() {
        let same = r#"[{"name":"a","image":"busybox"}]"#;
        let mut p =
            with_annotations(&[(INIT_CONTAINERS_BETA_ANNOTATION, same), (INIT_CONTAINERS_ALPHA_ANNOTATION, same)], "");
        let warnings = convert_init_container_annotations(&mut p).expect("identical is fine");
        assert_eq!(warnings.len(), 2);
        assert_eq!(init_names(&p), ["a"]);

        let mut p = with_annotations(
            &[
                (INIT_CONTAINERS_BETA_ANNOTATION, same),
                (INIT_CONTAINERS_ALPHA_ANNOTATION, r#"[{"name":"b","image":"busybox"}]"#),
            ],
            "",
        );
        assert_eq!(
            errors(convert_init_container_annotations(&mut p)),
            vec![
                "metadata.annotations[pod.alpha.kubernetes.io/init-containers]: Invalid value: <containers>: must hold the same containers as metadata.annotations[pod.beta.kubernetes.io/init-containers] when both are set"
            ]
        );
    }

    #[test]
    fn annotation_and_spec_field_together() {
        let mut p = with_annotations(
            &[(INIT_CONTAINERS_BETA_ANNOTATION, r#"[{"name":"x","image":"busybox"}]"#)],
            "  initContainers: [{name: yy, image: busybox}]\n",
        );
        assert_eq!(
            errors(convert_init_container_annotations(&mut p)),
            vec![
                "metadata.annotations[pod.beta.kubernetes.io/init-containers]: Forbidden: may not be set together with spec.initContainers; declare init containers only in spec.initContainers"
            ]
        );
        let mut p = with_annotations(
            &[(INIT_CONTAINERS_ALPHA_ANNOTATION, r#"[{"name":"x","image":"busybox"}]"#)],
            "  initContainers: [{name: yy, image: busybox}]\n",
        );
        assert_eq!(
            errors(convert_init_container_annotations(&mut p)),
            vec![
                "metadata.annotations[pod.alpha.kubernetes.io/init-containers]: Forbidden: may not be set together with spec.initContainers; declare init containers only in spec.initContainers"
            ]
        );

        // The mirror written by 1.6/1.7 API servers (identical content) is accepted.
        let mut p = with_annotations(
            &[(INIT_CONTAINERS_BETA_ANNOTATION, r#"[{"name":"yy","image":"busybox"}]"#)],
            "  initContainers: [{name: yy, image: busybox}]\n",
        );
        assert_eq!(convert_init_container_annotations(&mut p).map(|w| w.len()), Ok(1));
        assert_eq!(init_names(&p), ["yy"]);

        // An empty spec list does not count as "set".
        let mut p = with_annotations(
            &[(INIT_CONTAINERS_BETA_ANNOTATION, r#"[{"name":"x","image":"busybox"}]"#)],
            "  initContainers: []\n",
        );
        assert!(convert_init_container_annotations(&mut p).is_ok());
        assert_eq!(init_names(&p), ["x"]);
    }

    #[test]
    fn strict_json() {
        let cases: Vec<(&str, Vec<&str>)> = vec![
            (
                "[{\"name\": \"a\",}]",
                vec![
                    "metadata.annotations[pod.beta.kubernetes.io/init-containers]: Invalid value: must be a JSON array of containers: trailing comma at line 1 column 15",
                ],
            ),
            (
                "{\"name\": \"a\"}",
                vec![
                    "metadata.annotations[pod.beta.kubernetes.io/init-containers]: Invalid value: must be a JSON array of containers",
                ],
            ),
            (
                "",
                vec![
                    "metadata.annotations[pod.beta.kubernetes.io/init-containers]: Invalid value: must be a JSON array of containers: EOF while parsing a value at line 1 column 0",
                ],
            ),
            (
                r#"[{"name":"a","image":"b","imagePullPolicyy":"Always"},{"name":"c","image":"d","portz":[]}]"#,
                vec![
                    "metadata.annotations[pod.beta.kubernetes.io/init-containers]: Invalid value: unknown field \"[0].imagePullPolicyy\"",
                    "metadata.annotations[pod.beta.kubernetes.io/init-containers]: Invalid value: unknown field \"[1].portz\"",
                ],
            ),
            (
                r#"[{"name":"a","image":"b","ports":[{"containerPort":"80"}]}]"#,
                vec![
                    "metadata.annotations[pod.beta.kubernetes.io/init-containers]: Invalid value: [0].ports[0].containerPort: invalid type: string \"80\", expected i32",
                ],
            ),
        ];
        for (json, want) in cases {
            let mut p = with_annotations(&[(INIT_CONTAINERS_BETA_ANNOTATION, json)], "");
            assert_eq!(errors(convert_init_container_annotations(&mut p)), want, "json {json:?}");
        }
    }

    #[test]
    fn no_annotations_is_a_no_op() {
        let mut p = with_annotations(&[], "  initContainers: [{name: yy, image: busybox}]\n");
        assert_eq!(convert_init_container_annotations(&mut p), Ok(vec![]));
        assert_eq!(init_names(&p), ["yy"]);
        let mut bare = Pod::default();
        assert_eq!(convert_init_container_annotations(&mut bare), Ok(vec![]));
    }
}
