//! The ConfigMaps and Secrets pods refer to (environment variables and volumes), the
//! RuntimeClasses they run with and the Services their environment names, wherever the mode
//! keeps them: the manifest file of `run`, the local API's store in `serve`.

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccountTokenProjection};
use k8s_openapi::api::node::v1::RuntimeClass;
use std::collections::BTreeMap;

/// Where the node looks up the objects a pod refers to, by namespace and name.
pub trait Objects: Send + Sync {
    fn config_map(&self, namespace: &str, name: &str) -> Option<ConfigMap>;
    fn secret(&self, namespace: &str, name: &str) -> Option<Secret>;
    /// A RuntimeClass, by name (they are cluster-scoped).
    fn runtime_class(&self, name: &str) -> Option<RuntimeClass>;
    /// Every Service, of every namespace, for the containers' service variables; `None` until
    /// the mode has read them once. A mode without Services (`run`) has none.
    fn services(&self) -> Option<Vec<Service>> {
        Some(Vec::new())
    }
    /// The token of the pod's service account for a projected `serviceAccountToken` source,
    /// bound to the pod; only an API server issues them (none unless the mode has one).
    fn service_account_token(&self, _pod: &Pod, _source: &ServiceAccountTokenProjection) -> Option<String> {
        None
    }
}

/// A fixed set of objects, such as a manifest file's; none by default.
#[derive(Debug, Default)]
pub struct FixedObjects {
    config_maps: BTreeMap<(String, String), ConfigMap>,
    secrets: BTreeMap<(String, String), Secret>,
    runtime_classes: BTreeMap<String, RuntimeClass>,
}

fn key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (meta.namespace.clone().unwrap_or_else(|| "default".into()), meta.name.clone().unwrap_or_default())
}

impl FixedObjects {
    /// No objects at all.
    pub const fn empty() -> Self {
        FixedObjects { config_maps: BTreeMap::new(), secrets: BTreeMap::new(), runtime_classes: BTreeMap::new() }
    }

    pub fn new(config_maps: impl IntoIterator<Item = ConfigMap>, secrets: impl IntoIterator<Item = Secret>) -> Self {
        FixedObjects {
            config_maps: config_maps.into_iter().map(|c| (key(&c.metadata), c)).collect(),
            secrets: secrets.into_iter().map(|s| (key(&s.metadata), s)).collect(),
            runtime_classes: BTreeMap::new(),
        }
    }

    /// These objects and the given RuntimeClasses.
    pub fn with_runtime_classes(mut self, classes: impl IntoIterator<Item = RuntimeClass>) -> Self {
        self.runtime_classes =
            classes.into_iter().map(|rc| (rc.metadata.name.clone().unwrap_or_default(), rc)).collect();
        self
    }
}

impl Objects for FixedObjects {
    fn config_map(&self, namespace: &str, name: &str) -> Option<ConfigMap> {
        self.config_maps.get(&(namespace.to_string(), name.to_string())).cloned()
    }

    fn secret(&self, namespace: &str, name: &str) -> Option<Secret> {
        self.secrets.get(&(namespace.to_string(), name.to_string())).cloned()
    }

    fn runtime_class(&self, name: &str) -> Option<RuntimeClass> {
        self.runtime_classes.get(name).cloned()
    }
}
