//! What an update of a pod may change (`ValidatePodUpdate` in
//! `pkg/apis/core/validation/validation.go`, 1.33): container images, a lower or newly set
//! `activeDeadlineSeconds`, added tolerations, a negative grace period raised to 1, and the
//! metadata besides the pod's identity.

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{FieldError, FieldPath, validate_pod};
// Go renders the nil `*int64` of an unset deadline as `null`.
use crate::field_error::Raw;

/// The API server's words for a spec change it does not allow.
pub const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn immutable_meta(new: &ObjectMeta, old: &ObjectMeta, errs: &mut Vec<FieldError>) {
    let path = FieldPath::new("metadata");
    let fields: [(&str, Option<String>, Option<String>); 3] = [
        ("name", new.name.clone(), old.name.clone()),
        ("namespace", new.namespace.clone(), old.namespace.clone()),
        ("uid", new.uid.clone(), old.uid.clone()),
    ];
    for (field, n, o) in fields {
        if n != o {
            errs.push(FieldError::invalid(path.child(field), n.unwrap_or_default().as_str(), "field is immutable"));
        }
    }
    if new.creation_timestamp != old.creation_timestamp {
        let shown = new.creation_timestamp.as_ref().map(|t| t.0.to_string()).unwrap_or_default();
        errs.push(FieldError::invalid(path.child("creationTimestamp"), shown.as_str(), "field is immutable"));
    }
}

/// Every reason `new` may not replace `old`; empty means the update is allowed. Both are
/// defaulted pods.
pub fn validate_pod_update(new: &Pod, old: &Pod) -> Vec<FieldError> {
    let mut errs = vec![];
    immutable_meta(&new.metadata, &old.metadata, &mut errs);
    errs.extend(validate_pod(new).into_iter().filter(|e| !e.path.starts_with("metadata.name")));
    let empty = PodSpec::default();
    let (new_spec, old_spec) = (new.spec.as_ref().unwrap_or(&empty), old.spec.as_ref().unwrap_or(&empty));
    let spec_path = FieldPath::new("spec");

    let new_inits = new_spec.init_containers.as_deref().unwrap_or_default();
    let old_inits = old_spec.init_containers.as_deref().unwrap_or_default();
    if new_spec.containers.len() != old_spec.containers.len() || new_inits.len() != old_inits.len() {
        errs.push(FieldError::forbidden(spec_path.child("containers"), "pod updates may not add or remove containers"));
        return errs;
    }

    match (new_spec.active_deadline_seconds, old_spec.active_deadline_seconds) {
        (Some(n), Some(o)) if o < n => errs.push(FieldError::invalid(
            spec_path.child("activeDeadlineSeconds"),
            n,
            "must be less than or equal to previous value",
        )),
        (None, Some(_)) => errs.push(FieldError::invalid(
            spec_path.child("activeDeadlineSeconds"),
            Raw("null".to_string()),
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }

    // The spec with everything that may change taken from the old one must equal the old one.
    let mut munged = new_spec.clone();
    for (m, o) in munged.containers.iter_mut().zip(&old_spec.containers) {
        m.image = o.image.clone();
    }
    if let Some(inits) = munged.init_containers.as_mut() {
        for (m, o) in inits.iter_mut().zip(old_inits) {
            m.image = o.image.clone();
        }
    }
    munged.active_deadline_seconds = old_spec.active_deadline_seconds;
    let old_tolerations = old_spec.tolerations.as_deref().unwrap_or_default();
    let new_tolerations = new_spec.tolerations.as_deref().unwrap_or_default();
    if old_tolerations.iter().all(|t| new_tolerations.contains(t)) {
        munged.tolerations = old_spec.tolerations.clone();
    }
    if old_spec.termination_grace_period_seconds.is_some_and(|g| g < 0)
        && new_spec.termination_grace_period_seconds == Some(1)
    {
        munged.termination_grace_period_seconds = old_spec.termination_grace_period_seconds;
    }
    if munged != *old_spec {
        let changed = changed_fields(&munged, old_spec);
        let detail = format!("{POD_UPDATE_FORBIDDEN}\n  changed: {}", changed.join(", "));
        errs.push(FieldError::forbidden(spec_path.as_str(), detail));
    }
    errs
}

/// The top-level spec fields (as JSON names) that differ, to say what the update changed.
fn changed_fields(new: &PodSpec, old: &PodSpec) -> Vec<String> {
    let (n, o) = (serde_json::to_value(new).unwrap_or_default(), serde_json::to_value(old).unwrap_or_default());
    let empty = serde_json::Map::new();
    let (n, o) = (n.as_object().unwrap_or(&empty), o.as_object().unwrap_or(&empty));
    let mut keys: Vec<&String> = n.keys().chain(o.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter().filter(|k| n.get(*k) != o.get(*k)).map(|k| format!("spec.{k}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::defaults::apply_defaults;
    use k8s_openapi::api::core::v1::Toleration;

    fn pod() -> Pod {
        let mut p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {"containers": [{"name": "app", "image": "busybox:1"}],
                     "initContainers": [{"name": "init", "image": "busybox:1"}],
                     "activeDeadlineSeconds": 100}
        }))
        .unwrap();
        apply_defaults(&mut p);
        p
    }

    fn spec(p: &mut Pod) -> &mut PodSpec {
        p.spec.as_mut().unwrap()
    }

    #[test]
    fn images_deadline_and_added_tolerations_may_change() {
        let old = pod();
        let mut new = old.clone();
        spec(&mut new).containers[0].image = Some("busybox:2".into());
        spec(&mut new).init_containers.as_mut().unwrap()[0].image = Some("busybox:3".into());
        spec(&mut new).active_deadline_seconds = Some(50);
        spec(&mut new).tolerations = Some(vec![Toleration { key: Some("k".into()), ..Default::default() }]);
        new.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
        assert_eq!(validate_pod_update(&new, &old), vec![]);
    }

    #[test]
    fn anything_else_is_forbidden_in_the_api_servers_words() {
        let old = pod();
        let mut new = old.clone();
        spec(&mut new).restart_policy = Some("Never".into());
        let errs = validate_pod_update(&new, &old);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].path, "spec");
        assert!(errs[0].to_string().starts_with(&format!("spec: Forbidden: {POD_UPDATE_FORBIDDEN}\n")), "{}", errs[0]);
        assert!(errs[0].to_string().contains("spec.restartPolicy"));
    }

    #[test]
    fn the_deadline_may_only_go_down() {
        let old = pod();
        let mut new = old.clone();
        spec(&mut new).active_deadline_seconds = Some(200);
        let errs = validate_pod_update(&new, &old);
        assert_eq!(
            errs[0].to_string(),
            "spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"
        );
        spec(&mut new).active_deadline_seconds = None;
        let errs = validate_pod_update(&new, &old);
        assert_eq!(
            errs[0].to_string(),
            "spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value"
        );
    }

    #[test]
    fn containers_may_not_be_added_and_identity_is_immutable() {
        let old = pod();
        let mut new = old.clone();
        let extra = new.spec.as_ref().unwrap().containers[0].clone();
        spec(&mut new).containers.push(k8s_openapi::api::core::v1::Container { name: "two".into(), ..extra });
        let errs = validate_pod_update(&new, &old);
        assert!(
            errs.iter()
                .any(|e| e.to_string() == "spec.containers: Forbidden: pod updates may not add or remove containers")
        );
        let mut new = old.clone();
        new.metadata.uid = Some("other".into());
        let errs = validate_pod_update(&new, &old);
        assert_eq!(errs[0].to_string(), "metadata.uid: Invalid value: \"other\": field is immutable");
    }
}
