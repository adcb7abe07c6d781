//! A container's environment: its `envFrom` and `env` entries resolved from the pod, the node,
//! ConfigMaps and Secrets, `$(VAR)` references expanded, and the Services' variables, as the
//! kubelet's `makeEnvironmentVariables` does.

use super::env_file;
use super::service_env::service_env;
use crate::downward::{NodeFacts, field_value, resource_value};
use crate::layout;
use crate::objects::{FixedObjects, Objects};
use k8s_openapi::api::core::v1::{Container, EnvVar, FileKeySelector, Pod};
use podwright_api::annotations::is_static;
use podwright_api::expansion::expand_over;
use podwright_api::formats::is_env_var_name;
use podwright_api::go;
use std::collections::BTreeMap;
use std::path::Path;

/// What a container's environment is made from besides its own spec.
pub struct EnvSources<'a> {
    pub pod: &'a Pod,
    /// The pod's IPs, as the runtime gave them to its sandbox.
    pub pod_ips: &'a [String],
    pub node: &'a NodeFacts,
    pub objects: &'a dyn Objects,
    /// podwright's root directory, where the pod's emptyDirs are (`fileKeyRef`); None: no
    /// volumes to read.
    pub root: Option<&'a Path>,
}

impl<'a> EnvSources<'a> {
    /// The pod's own fields only: no objects, and a node that says nothing of itself.
    pub fn bare(pod: &'a Pod) -> Self {
        static NONE: FixedObjects = FixedObjects::empty();
        static UNKNOWN: NodeFacts = NodeFacts::UNKNOWN;
        EnvSources { pod, pod_ips: &[], node: &UNKNOWN, objects: &NONE, root: None }
    }
}

/// A container's environment, and the warnings the kubelet gives as events while making it.
#[derive(Debug, Default, PartialEq)]
pub struct Env {
    pub vars: BTreeMap<String, String>,
    /// `InvalidEnvironmentVariableNames` messages.
    pub skipped: Vec<String>,
}

/// ConfigMaps and Secrets as the environment reads them, each looked up once per container
/// (the kubelet's `makeEnvironmentVariables` keeps the same per-call maps).
struct Lookups<'a> {
    objects: &'a dyn Objects,
    ns: &'a str,
    seen: BTreeMap<(Kind, String), Option<BTreeMap<String, String>>>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    ConfigMap,
    Secret,
}

impl Kind {
    /// As envFrom's skipped-keys warning names the source.
    fn source(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configMap",
            Kind::Secret => "secret",
        }
    }

    /// As the kubelet's "couldn't find key" message names the kind.
    fn kind(self) -> &'static str {
        match self {
            Kind::ConfigMap => "ConfigMap",
            Kind::Secret => "Secret",
        }
    }

    fn not_found(self, name: &str) -> String {
        let resource = match self {
            Kind::ConfigMap => "configmap",
            Kind::Secret => "secret",
        };
        format!("{resource} {} not found", go::quote(name))
    }
}

impl Lookups<'_> {
    /// The object's data as text; `Ok(None)` when an optional one is missing.
    fn data(
        &mut self,
        kind: Kind,
        name: &str,
        optional: Option<bool>,
    ) -> Result<Option<&BTreeMap<String, String>>, String> {
        let (objects, ns) = (self.objects, self.ns);
        let found = self.seen.entry((kind, name.to_string())).or_insert_with(|| match kind {
            Kind::ConfigMap => objects.config_map(ns, name).map(|cm| cm.data.unwrap_or_default()),
            // Secret values are bytes; the environment takes them as text.
            Kind::Secret => objects.secret(ns, name).map(|s| {
                s.data.into_iter().flatten().map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned())).collect()
            }),
        });
        match found {
            Some(data) => Ok(Some(data)),
            None if optional == Some(true) => Ok(None),
            None => Err(kind.not_found(name)),
        }
    }

    /// One key of the object; `Ok(None)` when optional and missing.
    fn key(&mut self, kind: Kind, name: &str, key: &str, optional: Option<bool>) -> Result<Option<String>, String> {
        let ns = self.ns;
        let Some(data) = self.data(kind, name, optional)? else { return Ok(None) };
        match data.get(key) {
            Some(v) => Ok(Some(v.clone())),
            None if optional == Some(true) => Ok(None),
            None => Err(format!("couldn't find key {key} in {} {ns}/{name}", kind.kind())),
        }
    }
}

/// The container's environment as the kubelet's `makeEnvironmentVariables` makes it: every
/// `envFrom` source in order, then every `env` entry, a later one replacing an earlier of the
/// same name; a value sees only the variables before it, then the Services' variables, which
/// the container gets unless it sets their names itself. Err: why the container cannot be
/// created (`CreateContainerConfigError`), in the kubelet's words.
pub fn container_env(src: &EnvSources, c: &Container) -> Result<Env, String> {
    let ns = src.pod.metadata.namespace.as_deref().unwrap_or("default");
    let services = pod_service_env(src.pod, src.objects)?;
    let mut lookups = Lookups { objects: src.objects, ns, seen: BTreeMap::new() };
    let mut env = Env::default();
    for from in c.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or_default();
        let (kind, name, optional) = match (&from.config_map_ref, &from.secret_ref) {
            (Some(r), _) => (Kind::ConfigMap, &r.name, r.optional),
            (None, Some(r)) => (Kind::Secret, &r.name, r.optional),
            (None, None) => continue,
        };
        let Some(data) = lookups.data(kind, name, optional)? else { continue };
        let mut invalid = Vec::new();
        for (k, v) in data {
            let k = format!("{prefix}{k}");
            if is_env_var_name(&k).is_empty() {
                env.vars.insert(k, v.clone());
            } else {
                invalid.push(k);
            }
        }
        if !invalid.is_empty() {
            invalid.sort();
            env.skipped.push(format!(
                "Keys [{}] from the EnvFrom {} {ns}/{name} were skipped since they are considered invalid environment variable names.",
                invalid.join(", "),
                kind.source()
            ));
        }
    }
    for var in c.env.iter().flatten() {
        if let Some(v) = env_value(src, &mut lookups, c, var, &env.vars, &services)? {
            env.vars.insert(var.name.clone(), v);
        }
    }
    for (k, v) in services {
        env.vars.entry(k).or_insert(v);
    }
    Ok(env)
}

/// The Services' variables for the pod's containers. A pod from the API server waits for the
/// Services' first reading, so that no container misses `KUBERNETES_SERVICE_HOST` (which
/// in-cluster clients read) for a node that has just started; a static pod does not.
fn pod_service_env(pod: &Pod, objects: &dyn Objects) -> Result<BTreeMap<String, String>, String> {
    let services = match objects.services() {
        Some(services) => services,
        None if is_static(pod) => Vec::new(),
        None => return Err("services have not yet been read at least once, cannot construct envvars".into()),
    };
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let links = pod.spec.as_ref().and_then(|s| s.enable_service_links).unwrap_or(true);
    Ok(service_env(&services, ns, links))
}

/// The value of an `env` entry: literal (with earlier variables expanded), or from its source;
/// `None` when an optional source has nothing. An entry with neither is set to "" (the kubelet
/// takes an empty `value` as none).
fn env_value(
    src: &EnvSources,
    lookups: &mut Lookups,
    c: &Container,
    var: &EnvVar,
    env: &BTreeMap<String, String>,
    services: &BTreeMap<String, String>,
) -> Result<Option<String>, String> {
    let value = var.value.as_deref().unwrap_or_default();
    let Some(from) = var.value_from.as_ref().filter(|_| value.is_empty()) else {
        return Ok(Some(expand_over(value, env, services)));
    };
    if let Some(f) = &from.field_ref {
        return field_value(src.pod, &f.field_path, src.pod_ips, src.node).map(Some);
    }
    if let Some(r) = &from.resource_field_ref {
        return resource_value(src.pod, c, r, src.node).map(Some);
    }
    if let Some(r) = &from.config_map_key_ref {
        return lookups.key(Kind::ConfigMap, &r.name, &r.key, r.optional);
    }
    if let Some(r) = &from.secret_key_ref {
        return lookups.key(Kind::Secret, &r.name, &r.key, r.optional);
    }
    if let Some(r) = &from.file_key_ref {
        return file_key_value(src, r);
    }
    Ok(Some(String::new()))
}

/// A `fileKeyRef`'s value from the env file in the pod's emptyDir, as the kubelet reads it: a
/// file that cannot be read or parsed stops the container whether or not the reference is
/// optional (the reason goes to the log only); a key the file does not assign, or assigns
/// the empty string, is skipped when optional.
fn file_key_value(src: &EnvSources, r: &FileKeySelector) -> Result<Option<String>, String> {
    let volumes = src.pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    let missing = || format!("cannot find the volume {} referenced by FileKeyRef", go::quote(&r.volume_name));
    let root = src.root.ok_or_else(missing)?;
    if !volumes.iter().any(|v| v.name == r.volume_name && v.empty_dir.is_some()) {
        return Err(missing());
    }
    let uid = src.pod.metadata.uid.as_deref().unwrap_or_default();
    let dir = layout::empty_dir(root, uid, &r.volume_name);
    let unreadable = |e: String| {
        tracing::error!(uid, volume = %r.volume_name, path = %r.path, error = %e, "Failed to parse env file");
        "couldn't parse env file".to_string()
    };
    let file = env_file::secure_join(&dir, &r.path).map_err(|e| unreadable(e.to_string()))?;
    match env_file::value_of(&file, &r.key).map_err(unreadable)? {
        Some(v) if !v.is_empty() => Ok(Some(v)),
        _ if r.optional == Some(true) => Ok(None),
        _ => Err(format!(
            "environment variable key {} not found in file {}",
            go::quote(&r.key),
            go::quote(&file.to_string_lossy())
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::FixedObjects;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {"containers": []}}),
        )
        .unwrap()
    }

    fn objects() -> FixedObjects {
        let cm = serde_json::from_value(json!({"metadata": {"name": "cfg", "namespace": "ns"},
            "data": {"color": "blue", "1bad": "x", "size": "$(COLOR)"}}))
        .unwrap();
        let secret = serde_json::from_value(json!({"metadata": {"name": "creds", "namespace": "ns"},
            "data": {"password": "czNjcjN0", "bad key": "eA=="}}))
        .unwrap();
        FixedObjects::new([cm], [secret])
    }

    fn env_of(c: serde_json::Value) -> Result<Env, String> {
        let c: Container = serde_json::from_value(c).unwrap();
        let node = NodeFacts { name: "n".into(), ..Default::default() };
        let src =
            EnvSources { pod: &pod(), pod_ips: &["10.0.0.1".into()], node: &node, objects: &objects(), root: None };
        container_env(&src, &c)
    }

    fn get<'a>(env: &'a Env, k: &str) -> Option<&'a str> {
        env.vars.get(k).map(String::as_str)
    }

    #[test]
    fn rule_14_an_env_entry_without_a_value_is_set_to_the_empty_string() {
        let env = env_of(json!({"name": "c", "env": [
            {"name": "EMPTY"},
            {"name": "BLANK", "value": ""},
            {"name": "NAME", "value": "", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
            {"name": "USES", "value": "[$(EMPTY)]"},
        ]}))
        .unwrap();
        assert_eq!(
            (get(&env, "EMPTY"), get(&env, "BLANK"), get(&env, "NAME"), get(&env, "USES")),
            (Some(""), Some(""), Some("u"), Some("[]"))
        );
    }

    #[test]
    fn env_from_first_then_env_in_order_each_value_seeing_only_what_came_before() {
        let env = env_of(json!({"name": "c",
        "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CM_"}, {"secretRef": {"name": "creds"}}],
        "env": [
            {"name": "EARLY", "value": "$(LATE)"},
            {"name": "LATE", "value": "late"},
            {"name": "CM_color", "value": "red"},
            {"name": "BOTH", "value": "$(CM_color)/$(password)"},
            {"name": "KEY", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "size"}}},
            {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
        ]}))
        .unwrap();
        assert_eq!(get(&env, "EARLY"), Some("$(LATE)"));
        assert_eq!(get(&env, "CM_color"), Some("red"));
        assert_eq!(get(&env, "BOTH"), Some("red/s3cr3t"));
        // A referenced value is taken as it is, never expanded.
        assert_eq!(get(&env, "KEY"), Some("$(COLOR)"));
        assert_eq!(get(&env, "PW"), Some("s3cr3t"));
        // The prefix makes "1bad" valid; the secret's "bad key" is skipped, with the event.
        assert_eq!(get(&env, "CM_1bad"), Some("x"));
        assert_eq!(
            env.skipped,
            [
                "Keys [bad key] from the EnvFrom secret ns/creds were skipped since they are considered invalid environment variable names."
            ]
        );
    }

    #[test]
    fn missing_objects_and_keys_in_the_kubelets_words_unless_optional() {
        let err = |from: serde_json::Value| env_of(json!({"name": "c", "env": [{"name": "V", "valueFrom": from}]}));
        assert_eq!(
            err(json!({"configMapKeyRef": {"name": "nope", "key": "k"}})).unwrap_err(),
            "configmap \"nope\" not found"
        );
        assert_eq!(
            err(json!({"configMapKeyRef": {"name": "cfg", "key": "k"}})).unwrap_err(),
            "couldn't find key k in ConfigMap ns/cfg"
        );
        assert_eq!(
            err(json!({"secretKeyRef": {"name": "nope", "key": "k"}})).unwrap_err(),
            "secret \"nope\" not found"
        );
        assert_eq!(
            err(json!({"secretKeyRef": {"name": "creds", "key": "k"}})).unwrap_err(),
            "couldn't find key k in Secret ns/creds"
        );
        let optional = err(json!({"configMapKeyRef": {"name": "nope", "key": "k", "optional": true}})).unwrap();
        assert_eq!(get(&optional, "V"), None);
        let optional = err(json!({"secretKeyRef": {"name": "creds", "key": "k", "optional": true}})).unwrap();
        assert_eq!(get(&optional, "V"), None);
        let from = |r: serde_json::Value| env_of(json!({"name": "c", "envFrom": [r]}));
        assert_eq!(from(json!({"configMapRef": {"name": "nope"}})).unwrap_err(), "configmap \"nope\" not found");
        assert_eq!(from(json!({"secretRef": {"name": "nope"}})).unwrap_err(), "secret \"nope\" not found");
        assert!(from(json!({"secretRef": {"name": "nope", "optional": true}})).unwrap().vars.is_empty());
    }

    #[test]
    fn a_file_key_ref_reads_the_env_file_in_the_pods_empty_dir() {
        let root = std::env::temp_dir().join(format!("pw-filekeyref-{}", std::process::id()));
        let dir = layout::empty_dir(&root, "u", "config");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/app.env"), "DB='db:5432'\nEMPTY=''\n").unwrap();
        std::fs::write(dir.join("bad.env"), "DB=unquoted\n").unwrap();
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"containers": [], "volumes": [{"name": "config", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/"}}]}}))
        .unwrap();
        let node = NodeFacts::default();
        let env = |volume: &str, path: &str, key: &str, optional: Option<bool>| {
            let c: Container = serde_json::from_value(json!({"name": "c", "env": [{"name": "V", "valueFrom":
                {"fileKeyRef": {"volumeName": volume, "path": path, "key": key, "optional": optional}}}]}))
            .unwrap();
            let src = EnvSources { pod: &pod, pod_ips: &[], node: &node, objects: &objects(), root: Some(&root) };
            container_env(&src, &c).map(|e| e.vars.get("V").cloned())
        };
        assert_eq!(env("config", "sub/app.env", "DB", None), Ok(Some("db:5432".into())));
        let file = dir.join("sub/app.env");
        let not_found = |key: &str| Err(format!("environment variable key \"{key}\" not found in file {:?}", file));
        assert_eq!(env("config", "sub/app.env", "NOPE", None), not_found("NOPE"));
        // An empty value counts as none, as the kubelet reads it.
        assert_eq!(env("config", "sub/app.env", "EMPTY", Some(false)), not_found("EMPTY"));
        assert_eq!(env("config", "sub/app.env", "NOPE", Some(true)), Ok(None));
        // A file that cannot be read or parsed stops the container, optional or not.
        assert_eq!(env("config", "missing.env", "DB", Some(true)), Err("couldn't parse env file".into()));
        assert_eq!(env("config", "bad.env", "DB", None), Err("couldn't parse env file".into()));
        let no_volume = Err("cannot find the volume \"h\" referenced by FileKeyRef".to_string());
        assert_eq!(env("h", "app.env", "DB", None), no_volume);
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Objects with Services, or with Services not read yet (`None`).
    struct WithServices(Option<Vec<k8s_openapi::api::core::v1::Service>>);

    impl Objects for WithServices {
        fn config_map(&self, _: &str, _: &str) -> Option<k8s_openapi::api::core::v1::ConfigMap> {
            None
        }
        fn secret(&self, _: &str, _: &str) -> Option<k8s_openapi::api::core::v1::Secret> {
            None
        }
        fn runtime_class(&self, _: &str) -> Option<k8s_openapi::api::node::v1::RuntimeClass> {
            None
        }
        fn services(&self) -> Option<Vec<k8s_openapi::api::core::v1::Service>> {
            self.0.clone()
        }
    }

    fn with_services(pod: &Pod, objects: &WithServices, c: serde_json::Value) -> Result<Env, String> {
        let c: Container = serde_json::from_value(c).unwrap();
        let mut src = EnvSources::bare(pod);
        src.objects = objects;
        container_env(&src, &c)
    }

    fn fooservice() -> WithServices {
        let s = serde_json::from_value(json!({"metadata": {"name": "fooservice", "namespace": "ns"},
            "spec": {"clusterIP": "10.0.0.11", "ports": [{"port": 8765}]}}))
        .unwrap();
        WithServices(Some(vec![s]))
    }

    #[test]
    fn services_variables_are_added_seen_by_values_and_give_way_to_the_containers_own() {
        let c = json!({"name": "c", "env": [
            {"name": "FOOSERVICE_SERVICE_PORT", "value": "mine"},
            {"name": "URL", "value": "http://$(FOOSERVICE_SERVICE_HOST):$(FOOSERVICE_SERVICE_PORT)"},
        ]});
        let env = with_services(&pod(), &fooservice(), c).unwrap();
        assert_eq!(get(&env, "FOOSERVICE_SERVICE_HOST"), Some("10.0.0.11"));
        assert_eq!(get(&env, "FOOSERVICE_PORT_8765_TCP_PROTO"), Some("tcp"));
        assert_eq!(get(&env, "FOOSERVICE_SERVICE_PORT"), Some("mine"));
        assert_eq!(get(&env, "URL"), Some("http://10.0.0.11:mine"));
    }

    #[test]
    fn enable_service_links_false_leaves_the_namespaces_services_out() {
        let mut p = pod();
        p.spec.as_mut().unwrap().enable_service_links = Some(false);
        let env = with_services(&p, &fooservice(), json!({"name": "c"})).unwrap();
        assert_eq!(env, Env::default());
    }

    #[test]
    fn an_api_pod_waits_for_the_services_first_reading_a_static_pod_does_not() {
        let unread = WithServices(None);
        assert_eq!(
            with_services(&pod(), &unread, json!({"name": "c"})).unwrap_err(),
            "services have not yet been read at least once, cannot construct envvars"
        );
        let mut p = pod();
        p.metadata.annotations =
            Some([(podwright_api::annotations::CONFIG_SOURCE.to_string(), "file".to_string())].into());
        assert_eq!(with_services(&p, &unread, json!({"name": "c"})).unwrap(), Env::default());
    }
}
