//! ServiceAccounts as a cluster keeps them: a `default` one in every namespace (the controller
//! manager's serviceaccount controller, `pkg/controller/serviceaccount`), and new pods admitted
//! by the API server's ServiceAccount admission plugin (`plugin/pkg/admission/serviceaccount`):
//! a pod naming none runs as `default`, the one it names must exist, and a pod without
//! imagePullSecrets of its own gets its ServiceAccount's.
//!
//! Not done here: the API token the plugin mounts (a `kube-api-access-*` projected volume; there
//! is no token issuer), and the deprecated `kubernetes.io/enforce-mountable-secrets` check.

use crate::resources::Resource;
use crate::store::Store;
use k8s_openapi::api::core::v1::{LocalObjectReference, Pod, PodSpec, ServiceAccount};
use serde::Deserialize;
use serde_json::json;

/// The ServiceAccount of pods that name none, made in every namespace.
pub const DEFAULT: &str = "default";

/// Makes namespace `ns`'s `default` ServiceAccount unless it has one.
pub fn ensure_default(store: &Store, ns: &str) {
    let obj = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEFAULT, "namespace": ns}});
    match store.create(Resource::ServiceAccounts, obj) {
        Err(e) if e.reason != "AlreadyExists" => {
            tracing::warn!(namespace = ns, error = %e.message, "could not make the default service account")
        }
        _ => {}
    }
}

/// `spec.serviceAccount` is the deprecated alias of `spec.serviceAccountName`: taken when the
/// name is not given, and always written as the name, as the API server converts a PodSpec
/// in and out.
pub fn align_deprecated_alias(spec: &mut PodSpec) {
    let given = |n: &mut Option<String>| n.take().filter(|n| !n.is_empty());
    let name = given(&mut spec.service_account_name).or_else(|| given(&mut spec.service_account));
    spec.service_account = name.clone();
    spec.service_account_name = name;
}

/// The ServiceAccount admission of a new pod of namespace `ns` (not of a mirror pod, which the
/// plugin leaves as it is; the local API takes none from clients). `Err` is why the pod is
/// forbidden.
pub fn admit(store: &Store, ns: &str, pod: &mut Pod) -> Result<(), String> {
    let spec = pod.spec.get_or_insert_default();
    align_deprecated_alias(spec);
    let name = spec.service_account_name.get_or_insert_with(|| DEFAULT.to_string()).clone();
    let account = store
        .get(Resource::ServiceAccounts, ns, &name)
        .ok()
        .and_then(|obj| ServiceAccount::deserialize(obj.as_ref()).ok())
        .ok_or_else(|| format!("error looking up service account {ns}/{name}: serviceaccount \"{name}\" not found"))?;
    if spec.image_pull_secrets.as_ref().is_none_or(Vec::is_empty) {
        let copied: Vec<LocalObjectReference> = account
            .image_pull_secrets
            .unwrap_or_default()
            .into_iter()
            .map(|r| LocalObjectReference { name: r.name })
            .collect();
        spec.image_pull_secrets = (!copied.is_empty()).then_some(copied);
    }
    align_deprecated_alias(spec);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use podwright_runtime::Clock;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn store_with(account: serde_json::Value) -> Store {
        let store = Store::new(Clock::new());
        ensure_default(&store, "ns");
        store.create(Resource::ServiceAccounts, account).unwrap();
        store
    }

    #[test]
    fn a_pod_naming_none_runs_as_default_under_both_names() {
        let store = Store::new(Clock::new());
        ensure_default(&store, "ns");
        ensure_default(&store, "ns");
        let mut p = pod(json!({"containers": []}));
        admit(&store, "ns", &mut p).unwrap();
        let spec = p.spec.unwrap();
        assert_eq!(spec.service_account_name.as_deref(), Some("default"));
        assert_eq!(spec.service_account.as_deref(), Some("default"));
        assert_eq!(spec.image_pull_secrets, None);
    }

    #[test]
    fn the_deprecated_name_counts_when_the_new_one_is_missing() {
        let store = store_with(json!({"metadata": {"name": "old", "namespace": "ns"}}));
        let mut p = pod(json!({"serviceAccount": "old", "containers": []}));
        admit(&store, "ns", &mut p).unwrap();
        assert_eq!(p.spec.as_ref().unwrap().service_account_name.as_deref(), Some("old"));
        // The new name wins over the old one.
        let mut p = pod(json!({"serviceAccount": "missing", "serviceAccountName": "old", "containers": []}));
        admit(&store, "ns", &mut p).unwrap();
        assert_eq!(p.spec.unwrap().service_account.as_deref(), Some("old"));
    }

    #[test]
    fn a_missing_service_account_is_refused_in_the_plugins_words() {
        let store = Store::new(Clock::new());
        let mut p = pod(json!({"serviceAccountName": "foo", "containers": []}));
        let why = admit(&store, "ns", &mut p).unwrap_err();
        assert_eq!(why, "error looking up service account ns/foo: serviceaccount \"foo\" not found");
        // Not even `default` exists in a namespace the controller has not seen.
        let why = admit(&store, "other", &mut pod(json!({"containers": []}))).unwrap_err();
        assert_eq!(why, "error looking up service account other/default: serviceaccount \"default\" not found");
    }

    #[test]
    fn pull_secrets_are_copied_only_to_a_pod_without_its_own() {
        let store = store_with(json!({"metadata": {"name": "puller", "namespace": "ns"},
            "imagePullSecrets": [{"name": "reg-a"}, {"name": "reg-b"}]}));
        let mut p = pod(json!({"serviceAccountName": "puller", "containers": []}));
        admit(&store, "ns", &mut p).unwrap();
        let names: Vec<String> = p.spec.unwrap().image_pull_secrets.unwrap().into_iter().map(|r| r.name).collect();
        assert_eq!(names, ["reg-a", "reg-b"]);

        let mut p =
            pod(json!({"serviceAccountName": "puller", "imagePullSecrets": [{"name": "own"}], "containers": []}));
        admit(&store, "ns", &mut p).unwrap();
        let names: Vec<String> = p.spec.unwrap().image_pull_secrets.unwrap().into_iter().map(|r| r.name).collect();
        assert_eq!(names, ["own"]);
    }
}
