//! The ConfigMaps, Secrets, RuntimeClasses and Services of the local API as the node layer looks
//! them up, and the changes to them that the pods referring to them follow.

use crate::resources::Resource;
use crate::store::Store;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::node::v1::RuntimeClass;
use podwright_node::objects::Objects;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;

/// The store's ConfigMaps and Secrets.
pub struct StoreObjects(pub Arc<Store>);

impl StoreObjects {
    fn get<T: DeserializeOwned>(&self, resource: Resource, namespace: &str, name: &str) -> Option<T> {
        let obj = self.0.get(resource, namespace, name).ok()?;
        T::deserialize(obj.as_ref()).ok()
    }
}

impl Objects for StoreObjects {
    fn config_map(&self, namespace: &str, name: &str) -> Option<ConfigMap> {
        self.get(Resource::ConfigMaps, namespace, name)
    }

    fn secret(&self, namespace: &str, name: &str) -> Option<Secret> {
        self.get(Resource::Secrets, namespace, name)
    }

    fn runtime_class(&self, name: &str) -> Option<RuntimeClass> {
        self.get(Resource::RuntimeClasses, "", name)
    }

    /// The services created in the local API: their variables name the cluster IPs its DNS
    /// answers with. It has no `kubernetes` service of its own (pods read the API through the
    /// node's address), so only these.
    fn services(&self) -> Option<Vec<Service>> {
        let (services, _) = self.0.list(Resource::Services, None);
        Some(services.iter().filter_map(|s| Service::deserialize(s.as_ref()).ok()).collect())
    }
}

/// Calls `changed` after every change to a ConfigMap or Secret of `store` (and once after
/// changes were missed), until the store goes.
pub async fn follow_changes(store: Arc<Store>, changed: impl Fn()) {
    let Ok((_, mut rx)) = store.watch(None) else { return };
    drop(store);
    loop {
        match rx.recv().await {
            Ok(c) if matches!(c.resource, Resource::ConfigMaps | Resource::Secrets) => changed(),
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => changed(),
            Err(RecvError::Closed) => return,
        }
    }
}
