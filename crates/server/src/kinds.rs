//! What each kind needs on create and update besides storing: typed decoding with the
//! request's field validation, the API server's defaults, and validation (pods, ConfigMaps and
//! Secrets through podwright-api's admission, the same as `podwright run`).

use crate::errors::{ApiError, ApiResult};
use crate::request::{FieldValidation, decode};
use crate::resources::Resource;
use crate::store::{Store, meta_str};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::node::v1::RuntimeClass;
use podwright_api::annotations::CONFIG_MIRROR;
use podwright_api::init_container_annotations::annotation_path;
use podwright_api::runtime_class_admission::admit_runtime_class_of;
use podwright_api::validation::validate_pod_update;
use podwright_api::{ConfigObject, FieldError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::net::Ipv4Addr;

/// An object ready to store, the warnings for the client, and for pods the typed pod.
pub struct Prepared {
    pub object: Value,
    pub warnings: Vec<String>,
    pub pod: Option<Pod>,
}

/// Decodes `input` as the resource's type and encodes it again: unknown fields are dropped
/// (or refused), and the object has its kind and apiVersion.
fn normalize(resource: Resource, input: &Value, v: FieldValidation, is_patch: bool) -> ApiResult<(Value, Vec<String>)> {
    let kind = resource.kind();
    let (mut out, w) = match resource {
        Resource::Pods => decode::<Pod>(input, kind, v, is_patch)?,
        Resource::Events => decode::<Event>(input, kind, v, is_patch)?,
        Resource::ConfigMaps => decode::<ConfigMap>(input, kind, v, is_patch)?,
        Resource::Secrets => decode::<Secret>(input, kind, v, is_patch)?,
        Resource::Services => decode::<Service>(input, kind, v, is_patch)?,
        Resource::ServiceAccounts => decode::<ServiceAccount>(input, kind, v, is_patch)?,
        Resource::Namespaces => decode::<Namespace>(input, kind, v, is_patch)?,
        Resource::RuntimeClasses => decode::<RuntimeClass>(input, kind, v, is_patch)?,
    };
    out["kind"] = json!(kind);
    out["apiVersion"] = json!(resource.api_version());
    Ok((out, w))
}

fn check_name(resource: Resource, obj: &Value) -> ApiResult<()> {
    let name = meta_str(obj, "name").unwrap_or_default();
    let mut errs = vec![];
    if name.is_empty() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
    } else {
        let problems = if resource == Resource::Namespaces {
            podwright_api::formats::name_is_dns_label(name, false)
        } else {
            podwright_api::formats::name_is_dns_subdomain(name, false)
        };
        for p in problems {
            errs.push(FieldError::invalid("metadata.name", name, p));
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(ApiError::invalid(resource, name, &errs)) }
}

/// `generateName`: the prefix and five random characters (apiserver `names.SimpleNameGenerator`).
fn generate_name(obj: &mut Value) {
    if meta_str(obj, "name").is_some_and(|n| !n.is_empty()) {
        return;
    }
    let Some(prefix) = meta_str(obj, "generateName").map(str::to_string) else { return };
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let random = uuid::Uuid::new_v4();
    let suffix: String =
        random.as_bytes()[..5].iter().map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char).collect();
    obj["metadata"]["name"] = json!(format!("{prefix}{suffix}"));
}

/// A new object for `resource` in namespace `ns` (ignored for cluster-scoped resources).
pub fn prepare_create(
    store: &Store,
    resource: Resource,
    ns: &str,
    input: Value,
    v: FieldValidation,
    node_name: &str,
) -> ApiResult<Prepared> {
    let (mut obj, mut warnings) = normalize(resource, &input, v, false)?;
    if resource.namespaced() {
        match meta_str(&obj, "namespace") {
            Some(given) if !given.is_empty() && given != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => obj["metadata"]["namespace"] = json!(ns),
        }
        store.get(Resource::Namespaces, "", ns).map_err(|_| ApiError::not_found(Resource::Namespaces, ns))?;
    }
    // Admission refusals name the object as the request did: a generated name is not made yet.
    let requested_name =
        [meta_str(&obj, "name"), meta_str(&obj, "generateName")].into_iter().flatten().find(|n| !n.is_empty());
    let requested_name = requested_name.unwrap_or_default().to_string();
    generate_name(&mut obj);
    if !matches!(resource, Resource::ConfigMaps | Resource::Secrets | Resource::RuntimeClasses) {
        // Validated whole below, the name with the rest.
        check_name(resource, &obj)?;
    }
    let mut pod = None;
    match resource {
        Resource::Pods => {
            let mut p: Pod = typed(&obj)?;
            let name = p.metadata.name.clone().unwrap_or_default();
            if annotation(&p, CONFIG_MIRROR).is_some() {
                // Only the node makes mirror pods, from its static pod files.
                let field = annotation_path(CONFIG_MIRROR);
                let err = FieldError::forbidden(field, "mirror pods are made by the node from its static pod files");
                return Err(ApiError::invalid(resource, &name, &[err]));
            }
            // Admission plugins run before validation.
            crate::service_accounts::admit(store, ns, &mut p)
                .map_err(|why| ApiError::forbidden(resource, &requested_name, &why))?;
            warnings
                .extend(podwright_api::admit_pod(&mut p).map_err(|e| ApiError::invalid(resource, &name, &e.errors))?);
            // The API server's RuntimeClass admission: the class must exist, and its overhead
            // becomes the pod's.
            let class_of = |class: &str| typed(store.get(Resource::RuntimeClasses, "", class).ok()?.as_ref()).ok();
            admit_runtime_class_of(&mut p, class_of)
                .map_err(|refusal| ApiError::forbidden(resource, &requested_name, &refusal.to_string()))?;
            let spec = p.spec.get_or_insert_default();
            if spec.node_name.as_deref().is_none_or(str::is_empty) {
                spec.node_name = Some(node_name.to_string());
            }
            p.status =
                Some(k8s_openapi::api::core::v1::PodStatus { phase: Some("Pending".into()), ..Default::default() });
            p.metadata.generation = Some(1);
            obj = untyped(&p)?;
            pod = Some(p);
        }
        Resource::Namespaces => {
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
            obj["status"] = json!({"phase": "Active"});
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = obj["metadata"]["name"].clone();
        }
        Resource::ConfigMaps => obj = config_object::<ConfigMap>(resource, &obj, None)?,
        Resource::Secrets => obj = config_object::<Secret>(resource, &obj, None)?,
        Resource::RuntimeClasses => obj = runtime_class(&obj, None)?,
        Resource::Services => default_service(store, &mut obj)?,
        Resource::ServiceAccounts | Resource::Events => {}
    }
    Ok(Prepared { object: obj, warnings, pod })
}

fn typed<T: DeserializeOwned>(obj: &Value) -> ApiResult<T> {
    T::deserialize(obj).map_err(|e| ApiError::internal(e.to_string()))
}

fn untyped<T: Serialize>(t: &T) -> ApiResult<Value> {
    serde_json::to_value(t).map_err(|e| ApiError::internal(e.to_string()))
}

/// A ConfigMap or Secret as the API server takes it: its own defaults (a Secret's write-only
/// `stringData` folded into `data`, its type), then validated, against `old`, the stored
/// version, on update (an immutable one may not change).
fn config_object<T: ConfigObject + DeserializeOwned + Serialize>(
    resource: Resource,
    obj: &Value,
    old: Option<&Value>,
) -> ApiResult<Value> {
    let mut new: T = typed(obj)?;
    new.apply_defaults();
    let errs = match old {
        Some(old) => new.validate_update(&typed(old)?),
        None => new.validate(),
    };
    if !errs.is_empty() {
        return Err(ApiError::invalid(resource, new.metadata().name.as_deref().unwrap_or_default(), &errs));
    }
    untyped(&new)
}

/// A RuntimeClass validated as the API server does (`ValidateRuntimeClass`), and on update
/// with its handler unchanged (`ValidateRuntimeClassUpdate`).
fn runtime_class(obj: &Value, old: Option<&Value>) -> ApiResult<Value> {
    let new: RuntimeClass = typed(obj)?;
    let name = new.metadata.name.clone().unwrap_or_default();
    let mut errs = podwright_api::admit_runtime_class(&new).err().map(|e| e.errors).unwrap_or_default();
    if let Some(old) = old.map(typed::<RuntimeClass>).transpose()?
        && old.handler != new.handler
    {
        errs.push(FieldError::invalid("handler", new.handler.as_str(), "field is immutable"));
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid(Resource::RuntimeClasses, &name, &errs));
    }
    untyped(&new)
}

/// The first address of the service range (10.96.0.0/12) not yet taken; .1 is the API's own.
fn allocate_cluster_ip(store: &Store) -> ApiResult<String> {
    let (services, _) = store.list(Resource::Services, None);
    let taken: std::collections::HashSet<&str> =
        services.iter().filter_map(|s| s.pointer("/spec/clusterIP").and_then(Value::as_str)).collect();
    let base = u32::from(Ipv4Addr::new(10, 96, 0, 0));
    (10..(1u32 << 20))
        .map(|i| Ipv4Addr::from(base + i).to_string())
        .find(|ip| !taken.contains(ip.as_str()))
        .ok_or_else(|| ApiError::internal("the service IP range is full"))
}

fn default_service(store: &Store, obj: &mut Value) -> ApiResult<()> {
    let spec = &mut obj["spec"];
    if spec.get("type").is_none_or(Value::is_null) {
        spec["type"] = json!("ClusterIP");
    }
    if spec.get("sessionAffinity").is_none_or(Value::is_null) {
        spec["sessionAffinity"] = json!("None");
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            if p.get("protocol").is_none_or(Value::is_null) {
                p["protocol"] = json!("TCP");
            }
            if p.get("targetPort").is_none_or(Value::is_null) {
                p["targetPort"] = p["port"].clone();
            }
        }
    }
    let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
    if !headless && spec.get("clusterIP").and_then(Value::as_str).is_none_or(str::is_empty) {
        let ip = allocate_cluster_ip(store)?;
        obj["spec"]["clusterIP"] = json!(ip);
        obj["spec"]["clusterIPs"] = json!([ip]);
    }
    obj["spec"]["ipFamilies"] = json!(["IPv4"]);
    obj["spec"]["ipFamilyPolicy"] = json!("SingleStack");
    obj["spec"]["internalTrafficPolicy"] = json!("Cluster");
    obj["status"] = json!({"loadBalancer": {}});
    Ok(())
}

/// A new version of a stored object (PUT or the result of a patch). For pods only what the
/// API server allows may change, and the status is kept (it has its own subresource).
pub fn prepare_update(
    resource: Resource,
    old: &Value,
    input: Value,
    v: FieldValidation,
    is_patch: bool,
) -> ApiResult<Prepared> {
    let name = meta_str(old, "name").unwrap_or_default().to_string();
    if let Some(rv) = meta_str(&input, "resourceVersion").filter(|rv| !rv.is_empty())
        && Some(rv) != meta_str(old, "resourceVersion")
    {
        return Err(ApiError::conflict(resource, &name));
    }
    let (mut obj, warnings) = normalize(resource, &input, v, is_patch)?;
    // Identity comes from the stored object; a different one is an error for pods below.
    if resource != Resource::Pods {
        for f in ["namespace", "uid", "creationTimestamp"] {
            obj["metadata"][f] = old["metadata"][f].clone();
        }
    }
    let mut pod = None;
    match resource {
        Resource::Pods => {
            let mut new: Pod = typed(&obj)?;
            let old_pod: Pod = typed(old)?;
            if new.metadata.namespace.is_none() {
                new.metadata.namespace = old_pod.metadata.namespace.clone();
            }
            for keep in [&mut new.metadata.uid] {
                if keep.is_none() {
                    *keep = old_pod.metadata.uid.clone();
                }
            }
            if new.metadata.creation_timestamp.is_none() {
                new.metadata.creation_timestamp = old_pod.metadata.creation_timestamp.clone();
            }
            // Set by the API server, not by clients.
            new.metadata.deletion_timestamp = old_pod.metadata.deletion_timestamp.clone();
            new.metadata.deletion_grace_period_seconds = old_pod.metadata.deletion_grace_period_seconds;
            new.metadata.generation = old_pod.metadata.generation;
            podwright_api::apply_defaults(&mut new);
            if let Some(spec) = new.spec.as_mut() {
                crate::service_accounts::align_deprecated_alias(spec);
            }
            let mut errs = validate_pod_update(&new, &old_pod);
            errs.extend(mirror_annotation_update(&new, &old_pod));
            if !errs.is_empty() {
                return Err(ApiError::invalid(resource, &name, &errs));
            }
            if new.spec != old_pod.spec {
                new.metadata.generation = Some(old_pod.metadata.generation.unwrap_or(1) + 1);
            }
            new.status = old_pod.status.clone();
            obj = untyped(&new)?;
            pod = Some(new);
        }
        Resource::ConfigMaps => obj = config_object::<ConfigMap>(resource, &obj, Some(old))?,
        Resource::Secrets => obj = config_object::<Secret>(resource, &obj, Some(old))?,
        Resource::RuntimeClasses => obj = runtime_class(&obj, Some(old))?,
        Resource::Services => {
            obj["spec"]["clusterIP"] = old["spec"]["clusterIP"].clone();
            obj["spec"]["clusterIPs"] = old["spec"]["clusterIPs"].clone();
        }
        Resource::Namespaces => obj["status"] = old["status"].clone(),
        Resource::ServiceAccounts | Resource::Events => {}
    }
    Ok(Prepared { object: obj, warnings, pod })
}

/// A pod written through its `resize` subresource (`ResizeStrategy`): only its containers'
/// resources and resize policies are taken from `input`, checked as `ValidatePodResize` does;
/// the generation moves on when the spec changed.
pub fn prepare_resize(old: &Value, input: Value, v: FieldValidation, is_patch: bool) -> ApiResult<Prepared> {
    let name = meta_str(old, "name").unwrap_or_default().to_string();
    if let Some(rv) = meta_str(&input, "resourceVersion").filter(|rv| !rv.is_empty())
        && Some(rv) != meta_str(old, "resourceVersion")
    {
        return Err(ApiError::conflict(Resource::Pods, &name));
    }
    let (obj, warnings) = normalize(Resource::Pods, &input, v, is_patch)?;
    let asked: Pod = typed(&obj)?;
    let old_pod: Pod = typed(old)?;
    let mut new = podwright_api::validation::resize_update(&asked, &old_pod);
    podwright_api::apply_defaults(&mut new);
    let errs = podwright_api::validation::validate_pod_resize(&new, &old_pod, podwright_planner::qos::qos_class);
    if !errs.is_empty() {
        return Err(ApiError::invalid(Resource::Pods, &name, &errs));
    }
    if new.spec != old_pod.spec {
        new.metadata.generation = Some(old_pod.metadata.generation.unwrap_or(1) + 1);
    }
    Ok(Prepared { object: untyped(&new)?, warnings, pod: Some(new) })
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// The mirror pod annotation may not be added, changed or removed
/// (`ValidatePodSpecificAnnotationUpdates`): a mirror stays the mirror of its static pod, and a
/// pod of the API never becomes one.
fn mirror_annotation_update(new: &Pod, old: &Pod) -> Option<FieldError> {
    let field = annotation_path(CONFIG_MIRROR);
    match (annotation(old, CONFIG_MIRROR), annotation(new, CONFIG_MIRROR)) {
        (Some(o), Some(n)) if o == n => None,
        (None, None) => None,
        (Some(_), _) => Some(FieldError::forbidden(field, "may not remove or update mirror pod annotation")),
        (None, Some(_)) => Some(FieldError::forbidden(field, "may not add mirror pod annotation")),
    }
}
