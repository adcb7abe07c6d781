//! Pod validation as the API server does it on create
//! (`pkg/apis/core/validation/validation.go` `ValidatePodCreate`), with the
//! same field paths, error kinds, wording and order. Run it on a defaulted
//! pod (see [`crate::defaults::apply_defaults`]).
//!
//! Feature-gated behaviour follows the defaults of Kubernetes 1.33 (the API
//! version this crate is built against): sidecars allowed, relaxed
//! environment variable names, zero-second sleep hooks allowed.
//!
//! Not covered (accepted without checks): label/annotation syntax, resource
//! quantities and requests-vs-limits, security contexts, affinity,
//! tolerations, topology spread, most network-storage volume sources,
//! mount propagation, resize policies, OS-specific rules.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvFromSource, EnvVar, EnvVarSource, ExecAction, GRPCAction, HTTPGetAction, KeyToPath,
    Lifecycle, LifecycleHandler, Pod, PodSpec, Probe, SleepAction, TCPSocketAction, Volume, VolumeDevice, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub use crate::field_error::{ErrorKind, FieldError, FieldPath, InvalidPod};
use crate::formats::{
    inclusive_range_error, is_config_map_key, is_dns1123_label, is_http_header_name, is_relaxed_env_var_name,
    is_valid_port_name, is_valid_port_num, name_is_dns_label, name_is_dns_subdomain,
};
use crate::volume_sources::volume_sources;

const INIT_FORBIDDEN: &str = "may not be set for init containers without restartPolicy=Always";
const IS_NEGATIVE: &str = "must be greater than or equal to 0";
const FILE_MODE_ERROR: &str = "must be a number between 0 and 0777 (octal), both inclusive";

type Errors = Vec<FieldError>;

/// Validate a (defaulted) pod for creation. Returns every error found, in
/// the order the API server reports them; empty means valid.
pub fn validate_pod(pod: &Pod) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_object_meta(&pod.metadata, &FieldPath::new("metadata"), &mut errs);

    let empty = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&empty);
    let spec_path = FieldPath::new("spec");
    validate_pod_spec(spec, &spec_path, &mut errs);

    // validateContainersOnlyForPod
    for (list, field) in [
        (spec.containers.as_slice(), "containers"),
        (spec.init_containers.as_deref().unwrap_or_default(), "initContainers"),
    ] {
        for (i, c) in list.iter().enumerate() {
            let image = c.image.as_deref().unwrap_or_default();
            if image.len() != image.trim().len() {
                errs.push(FieldError::invalid(
                    spec_path.child(field).index(i).child("image"),
                    image,
                    "must not have leading or trailing whitespace",
                ));
            }
        }
    }

    // ValidatePodCreate
    if spec.ephemeral_containers.as_ref().is_some_and(|e| !e.is_empty()) {
        errs.push(FieldError::forbidden(spec_path.child("ephemeralContainers"), "cannot be set on create"));
    }
    if spec.node_name.as_deref().is_some_and(|n| !n.is_empty())
        && spec.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty())
    {
        errs.push(FieldError::forbidden(
            spec_path.child("nodeName"),
            "cannot be set until all schedulingGates have been cleared",
        ));
    }
    errs
}

/// Validate, and wrap any errors in an [`InvalidPod`] (kubectl's message).
pub fn check_pod(pod: &Pod) -> Result<(), InvalidPod> {
    let errs = validate_pod(pod);
    if errs.is_empty() { Ok(()) } else { Err(InvalidPod::new(pod.metadata.name.clone().unwrap_or_default(), errs)) }
}

fn str_or_empty(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or_default()
}

fn validate_object_meta(meta: &ObjectMeta, path: &FieldPath, errs: &mut Errors) {
    let generate_name = str_or_empty(&meta.generate_name);
    if !generate_name.is_empty() {
        for msg in name_is_dns_subdomain(generate_name, true) {
            errs.push(FieldError::invalid(path.child("generateName"), generate_name, msg));
        }
    }
    let name = str_or_empty(&meta.name);
    if name.is_empty() {
        errs.push(FieldError::required(path.child("name"), "name or generateName is required"));
    } else {
        for msg in name_is_dns_subdomain(name, false) {
            errs.push(FieldError::invalid(path.child("name"), name, msg));
        }
    }
    let namespace = str_or_empty(&meta.namespace);
    if namespace.is_empty() {
        errs.push(FieldError::required(path.child("namespace"), ""));
    } else {
        for msg in name_is_dns_label(namespace, false) {
            errs.push(FieldError::invalid(path.child("namespace"), namespace, msg));
        }
    }
}

fn validate_pod_spec(spec: &PodSpec, path: &FieldPath, errs: &mut Errors) {
    let grace = spec.termination_grace_period_seconds;
    match grace {
        None => errs.push(FieldError::required(path.child("terminationGracePeriodSeconds"), "")),
        // Upstream coerces negative values at admission; this agent rejects them.
        Some(g) if g < 0 => errs.push(FieldError::invalid(path.child("terminationGracePeriodSeconds"), g, IS_NEGATIVE)),
        Some(_) => {}
    }

    let volumes = validate_volumes(spec.volumes.as_deref().unwrap_or_default(), &path.child("volumes"), errs);
    validate_containers(&spec.containers, &volumes, grace, &path.child("containers"), errs);
    validate_init_containers(
        spec.init_containers.as_deref().unwrap_or_default(),
        &spec.containers,
        &volumes,
        grace,
        &path.child("initContainers"),
        errs,
    );

    // restartPolicy
    let restart = str_or_empty(&spec.restart_policy);
    match restart {
        "Always" | "OnFailure" | "Never" => {}
        "" => errs.push(FieldError::required(path.child("restartPolicy"), "")),
        other => {
            errs.push(FieldError::not_supported(path.child("restartPolicy"), other, &["Always", "OnFailure", "Never"]))
        }
    }

    // dnsPolicy and dnsConfig
    let dns_policy = str_or_empty(&spec.dns_policy);
    match dns_policy {
        "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None" => {}
        "" => errs.push(FieldError::required(path.child("dnsPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            path.child("dnsPolicy"),
            other,
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        )),
    }
    if dns_policy == "None" {
        match &spec.dns_config {
            None => errs.push(FieldError::required(
                path.child("dnsConfig"),
                "must provide `dnsConfig` when `dnsPolicy` is None",
            )),
            Some(c) if c.nameservers.as_ref().is_none_or(|n| n.is_empty()) => errs.push(FieldError::required(
                path.child("dnsConfig").child("nameservers"),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            )),
            Some(_) => {}
        }
    }

    for (field, value) in [("serviceAccountName", &spec.service_account_name), ("nodeName", &spec.node_name)] {
        let v = str_or_empty(value);
        if !v.is_empty() {
            for msg in name_is_dns_subdomain(v, false) {
                errs.push(FieldError::invalid(path.child(field), v, msg));
            }
        }
    }

    if let Some(v) = spec.active_deadline_seconds
        && !(1..=i64::from(i32::MAX)).contains(&v)
    {
        errs.push(FieldError::invalid(
            path.child("activeDeadlineSeconds"),
            v,
            inclusive_range_error(1, i64::from(i32::MAX)),
        ));
    }

    for (field, value) in [("hostname", &spec.hostname), ("subdomain", &spec.subdomain)] {
        let v = str_or_empty(value);
        if !v.is_empty() {
            for msg in is_dns1123_label(v) {
                errs.push(FieldError::invalid(path.child(field), v, msg));
            }
        }
    }
}

// ---------------------------------------------------------------- volumes

fn validate_volumes<'a>(volumes: &'a [Volume], path: &FieldPath, errs: &mut Errors) -> BTreeMap<&'a str, &'a Volume> {
    let mut valid = BTreeMap::new();
    for (i, vol) in volumes.iter().enumerate() {
        let idx = path.index(i);
        let name_path = idx.child("name");
        let mut el = Vec::new();
        validate_volume_source(vol, &idx, &mut el);
        if vol.name.is_empty() {
            el.push(FieldError::required(name_path.clone(), ""));
        } else {
            for msg in is_dns1123_label(&vol.name) {
                el.push(FieldError::invalid(name_path.clone(), &vol.name, msg));
            }
        }
        if valid.contains_key(vol.name.as_str()) {
            el.push(FieldError::duplicate(name_path, &vol.name));
        }
        if el.is_empty() {
            valid.insert(vol.name.as_str(), vol);
        } else {
            errs.extend(el);
        }
    }
    valid
}

fn validate_volume_source(vol: &Volume, path: &FieldPath, errs: &mut Errors) {
    let sources = volume_sources(vol);
    let Some(first) = sources.first() else {
        errs.push(FieldError::required(path.clone(), "must specify a volume type"));
        return;
    };
    for extra in &sources[1..] {
        errs.push(FieldError::forbidden(path.child(extra.validation_field), "may not specify more than 1 volume type"));
    }
    // Only the first source is validated further, as upstream does.
    match first.field {
        "emptyDir" => {
            let negative = vol
                .empty_dir
                .as_ref()
                .and_then(|e| e.size_limit.as_ref())
                .is_some_and(|q| q.0.trim_start().starts_with('-'));
            if negative {
                errs.push(FieldError::forbidden(
                    path.child("emptyDir").child("sizeLimit"),
                    "SizeLimit field must be a valid resource quantity",
                ));
            }
        }
        "hostPath" => {
            if let Some(h) = &vol.host_path {
                let p = path.child("hostPath");
                if h.path.is_empty() {
                    errs.push(FieldError::required(p.child("path"), ""));
                } else {
                    validate_path_no_backsteps(&h.path, &p.child("path"), errs);
                    let t = str_or_empty(&h.type_);
                    const TYPES: [&str; 8] = [
                        "",
                        "BlockDevice",
                        "CharDevice",
                        "Directory",
                        "DirectoryOrCreate",
                        "File",
                        "FileOrCreate",
                        "Socket",
                    ];
                    if !TYPES.contains(&t) {
                        errs.push(FieldError::not_supported(p.child("type"), t, &TYPES));
                    }
                }
            }
        }
        "secret" => {
            if let Some(s) = &vol.secret {
                let p = path.child("secret");
                if str_or_empty(&s.secret_name).is_empty() {
                    errs.push(FieldError::required(p.child("secretName"), ""));
                }
                validate_file_mode(s.default_mode, &p.child("defaultMode"), errs);
                validate_items(s.items.as_deref().unwrap_or_default(), &p.child("items"), errs);
            }
        }
        "configMap" => {
            if let Some(c) = &vol.config_map {
                let p = path.child("configMap");
                if c.name.is_empty() {
                    errs.push(FieldError::required(p.child("name"), ""));
                }
                validate_file_mode(c.default_mode, &p.child("defaultMode"), errs);
                validate_items(c.items.as_deref().unwrap_or_default(), &p.child("items"), errs);
            }
        }
        "persistentVolumeClaim" => {
            if let Some(c) = &vol.persistent_volume_claim
                && c.claim_name.is_empty()
            {
                errs.push(FieldError::required(path.child("persistentVolumeClaim").child("claimName"), ""));
            }
        }
        "nfs" => {
            if let Some(n) = &vol.nfs {
                let p = path.child("nfs");
                if n.server.is_empty() {
                    errs.push(FieldError::required(p.child("server"), ""));
                }
                if n.path.is_empty() {
                    errs.push(FieldError::required(p.child("path"), ""));
                }
                if !n.path.starts_with('/') {
                    errs.push(FieldError::invalid(p.child("path"), &n.path, "must be an absolute path"));
                }
            }
        }
        "downwardAPI" => {
            if let Some(d) = &vol.downward_api {
                let p = path.child("downwardAPI");
                validate_file_mode(d.default_mode, &p.child("defaultMode"), errs);
                for item in d.items.iter().flatten() {
                    if item.path.is_empty() {
                        errs.push(FieldError::required(p.child("path"), ""));
                    }
                    validate_local_non_reserved_path(&item.path, &p.child("path"), errs);
                    if item.field_ref.is_some() && item.resource_field_ref.is_some() {
                        errs.push(FieldError::invalid(
                            p.clone(),
                            "resource",
                            "fieldRef and resourceFieldRef can not be specified simultaneously",
                        ));
                    } else if item.field_ref.is_none() && item.resource_field_ref.is_none() {
                        errs.push(FieldError::required(p.clone(), "one of fieldRef and resourceFieldRef is required"));
                    }
                    validate_file_mode(item.mode, &p.child("mode"), errs);
                }
            }
        }
        _ => {}
    }
}

fn validate_file_mode(mode: Option<i32>, path: &FieldPath, errs: &mut Errors) {
    if let Some(m) = mode
        && !(0..=0o777).contains(&m)
    {
        errs.push(FieldError::invalid(path.clone(), m, FILE_MODE_ERROR));
    }
}

fn validate_items(items: &[KeyToPath], path: &FieldPath, errs: &mut Errors) {
    for (i, kp) in items.iter().enumerate() {
        let p = path.index(i);
        if kp.key.is_empty() {
            errs.push(FieldError::required(p.child("key"), ""));
        }
        if kp.path.is_empty() {
            errs.push(FieldError::required(p.child("path"), ""));
        }
        validate_local_non_reserved_path(&kp.path, &p.child("path"), errs);
        validate_file_mode(kp.mode, &p.child("mode"), errs);
    }
}

fn validate_path_no_backsteps(target: &str, path: &FieldPath, errs: &mut Errors) {
    if target.split('/').any(|part| part == "..") {
        errs.push(FieldError::invalid(path.clone(), target, "must not contain '..'"));
    }
}

fn validate_local_descending_path(target: &str, path: &FieldPath, errs: &mut Errors) {
    if target.starts_with('/') {
        errs.push(FieldError::invalid(path.clone(), target, "must be a relative path"));
    }
    validate_path_no_backsteps(target, path, errs);
}

fn validate_local_non_reserved_path(target: &str, path: &FieldPath, errs: &mut Errors) {
    validate_local_descending_path(target, path, errs);
    if target.starts_with("..") && !target.starts_with("../") {
        errs.push(FieldError::invalid(path.clone(), target, "must not start with '..'"));
    }
}

// ------------------------------------------------------------- containers

type VolumeMap<'a> = BTreeMap<&'a str, &'a Volume>;

fn validate_containers(
    containers: &[Container],
    volumes: &VolumeMap<'_>,
    grace: Option<i64>,
    path: &FieldPath,
    errs: &mut Errors,
) {
    if containers.is_empty() {
        errs.push(FieldError::required(path.clone(), ""));
        return;
    }
    let mut names = HashSet::new();
    for (i, c) in containers.iter().enumerate() {
        let p = path.index(i);
        validate_container_common(c, volumes, &p, errs);
        if !names.insert(c.name.as_str()) {
            errs.push(FieldError::duplicate(p.child("name"), &c.name));
        }
        validate_lifecycle_and_probes(c, grace, &p, errs);
        if c.restart_policy.is_some() {
            errs.push(FieldError::forbidden(p.child("restartPolicy"), "may not be set for non-init containers"));
        }
    }
    check_host_port_conflicts(containers, path, errs);
}

/// Hooks and probes of an app container or a sidecar (regular init containers may have none).
fn validate_lifecycle_and_probes(c: &Container, grace: Option<i64>, p: &FieldPath, errs: &mut Errors) {
    if let Some(l) = &c.lifecycle {
        validate_lifecycle(l, grace, &p.child("lifecycle"), errs);
    }
    validate_probe_of(ProbeKind::Liveness, c.liveness_probe.as_ref(), grace, p, errs);
    validate_probe_of(ProbeKind::Readiness, c.readiness_probe.as_ref(), grace, p, errs);
    validate_probe_of(ProbeKind::Startup, c.startup_probe.as_ref(), grace, p, errs);
}

fn validate_init_containers(
    inits: &[Container],
    regular: &[Container],
    volumes: &VolumeMap<'_>,
    grace: Option<i64>,
    path: &FieldPath,
    errs: &mut Errors,
) {
    let mut names: HashSet<&str> = regular.iter().map(|c| c.name.as_str()).collect();
    for (i, c) in inits.iter().enumerate() {
        let p = path.index(i);
        validate_container_common(c, volumes, &p, errs);

        let mut restart_always = false;
        if let Some(policy) = &c.restart_policy {
            if policy != "Always" {
                errs.push(FieldError::not_supported(p.child("restartPolicy"), policy, &["Always"]));
            }
            restart_always = policy == "Always";
        }

        if names.contains(c.name.as_str()) {
            errs.push(FieldError::duplicate(p.child("name"), &c.name));
        } else if !c.name.is_empty() {
            names.insert(c.name.as_str());
        }

        // Init containers run one at a time, so host ports are checked per
        // container (upstream passes a one-element list, hence index 0).
        check_host_port_conflicts(std::slice::from_ref(c), path, errs);

        if restart_always {
            validate_lifecycle_and_probes(c, grace, &p, errs);
        } else {
            for (field, set) in [
                ("lifecycle", c.lifecycle.is_some()),
                ("livenessProbe", c.liveness_probe.is_some()),
                ("readinessProbe", c.readiness_probe.is_some()),
                ("startupProbe", c.startup_probe.is_some()),
            ] {
                if set {
                    errs.push(FieldError::forbidden(p.child(field), INIT_FORBIDDEN));
                }
            }
        }
    }
}

fn validate_container_common(c: &Container, volumes: &VolumeMap<'_>, path: &FieldPath, errs: &mut Errors) {
    let name_path = path.child("name");
    if c.name.is_empty() {
        errs.push(FieldError::required(name_path, ""));
    } else {
        for msg in is_dns1123_label(&c.name) {
            errs.push(FieldError::invalid(name_path.clone(), &c.name, msg));
        }
    }

    if str_or_empty(&c.image).is_empty() {
        errs.push(FieldError::required(path.child("image"), ""));
    }

    match str_or_empty(&c.termination_message_policy) {
        "File" | "FallbackToLogsOnError" => {}
        "" => errs.push(FieldError::required(path.child("terminationMessagePolicy"), "")),
        other => errs.push(FieldError::not_supported(
            path.child("terminationMessagePolicy"),
            other,
            &["File", "FallbackToLogsOnError"],
        )),
    }

    let mounts = c.volume_mounts.as_deref().unwrap_or_default();
    let devices = c.volume_devices.as_deref().unwrap_or_default();
    validate_container_ports(c.ports.as_deref().unwrap_or_default(), &path.child("ports"), errs);
    validate_env(c.env.as_deref().unwrap_or_default(), &path.child("env"), errs);
    validate_env_from(c.env_from.as_deref().unwrap_or_default(), &path.child("envFrom"), errs);
    validate_volume_mounts(mounts, devices, volumes, &path.child("volumeMounts"), errs);
    validate_volume_devices(devices, mounts, volumes, &path.child("volumeDevices"), errs);

    match str_or_empty(&c.image_pull_policy) {
        "Always" | "IfNotPresent" | "Never" => {}
        "" => errs.push(FieldError::required(path.child("imagePullPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            path.child("imagePullPolicy"),
            other,
            &["Always", "IfNotPresent", "Never"],
        )),
    }
}

fn validate_container_ports(ports: &[ContainerPort], path: &FieldPath, errs: &mut Errors) {
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let p = path.index(i);
        let name = str_or_empty(&port.name);
        if !name.is_empty() {
            let msgs = is_valid_port_name(name);
            if !msgs.is_empty() {
                for msg in msgs {
                    errs.push(FieldError::invalid(p.child("name"), name, msg));
                }
            } else if !names.insert(name) {
                errs.push(FieldError::duplicate(p.child("name"), name));
            }
        }
        if port.container_port == 0 {
            errs.push(FieldError::required(p.child("containerPort"), ""));
        } else {
            for msg in is_valid_port_num(i64::from(port.container_port)) {
                errs.push(FieldError::invalid(p.child("containerPort"), port.container_port, msg));
            }
        }
        if let Some(h) = port.host_port.filter(|h| *h != 0) {
            for msg in is_valid_port_num(i64::from(h)) {
                errs.push(FieldError::invalid(p.child("hostPort"), h, msg));
            }
        }
        match str_or_empty(&port.protocol) {
            "TCP" | "UDP" | "SCTP" => {}
            "" => errs.push(FieldError::required(p.child("protocol"), "")),
            other => errs.push(FieldError::not_supported(p.child("protocol"), other, &["SCTP", "TCP", "UDP"])),
        }
    }
}

fn check_host_port_conflicts(containers: &[Container], path: &FieldPath, errs: &mut Errors) {
    let mut seen = HashSet::new();
    for (ci, c) in containers.iter().enumerate() {
        for (pi, port) in c.ports.iter().flatten().enumerate() {
            let host_port = port.host_port.unwrap_or(0);
            if host_port == 0 {
                continue;
            }
            let key = format!("{}/{}/{}", str_or_empty(&port.protocol), str_or_empty(&port.host_ip), host_port);
            if seen.contains(&key) {
                errs.push(FieldError::duplicate(path.index(ci).child("ports").index(pi).child("hostPort"), &key));
            } else {
                seen.insert(key);
            }
        }
    }
}

// -------------------------------------------------------------------- env

const ENV_FIELD_PATHS: [&str; 9] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// Field labels the v1 downward API converter accepts.
const CONVERTIBLE_FIELD_LABELS: [&str; 14] = [
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "spec.schedulerName",
    "status.phase",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

const RESOURCE_FIELD_PATHS: [&str; 6] = [
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

fn validate_env(vars: &[EnvVar], path: &FieldPath, errs: &mut Errors) {
    for (i, ev) in vars.iter().enumerate() {
        let p = path.index(i);
        if ev.name.is_empty() {
            errs.push(FieldError::required(p.child("name"), ""));
        } else {
            for msg in is_relaxed_env_var_name(&ev.name) {
                errs.push(FieldError::invalid(p.child("name"), &ev.name, msg));
            }
        }
        if let Some(from) = &ev.value_from {
            validate_env_var_value_from(ev, from, &p.child("valueFrom"), errs);
        }
    }
}

/// `SplitMaybeSubscriptedPath`: `metadata.labels['key']` → (`metadata.labels`, `key`).
fn split_subscripted(field_path: &str) -> Option<(&str, &str)> {
    let s = field_path.strip_suffix("']")?;
    let (path, sub) = s.split_once("['")?;
    (!path.is_empty()).then_some((path, sub))
}

fn validate_env_var_value_from(ev: &EnvVar, from: &EnvVarSource, path: &FieldPath, errs: &mut Errors) {
    let mut sources = 0;
    if let Some(fr) = &from.field_ref {
        sources += 1;
        let p = path.child("fieldRef");
        let api_version = str_or_empty(&fr.api_version);
        if api_version.is_empty() {
            errs.push(FieldError::required(p.child("apiVersion"), ""));
        } else if fr.field_path.is_empty() {
            errs.push(FieldError::required(p.child("fieldPath"), ""));
        } else if api_version != "v1" {
            errs.push(FieldError::invalid(
                p.child("fieldPath"),
                &fr.field_path,
                format!("error converting fieldPath: unsupported pod version: {api_version}"),
            ));
        } else if let Some((base, _)) = split_subscripted(&fr.field_path) {
            if base != "metadata.annotations" && base != "metadata.labels" {
                errs.push(FieldError::invalid(
                    p.child("fieldPath"),
                    &fr.field_path,
                    format!("error converting fieldPath: field label does not support subscript: {}", fr.field_path),
                ));
            }
        } else {
            let label = if fr.field_path == "spec.host" { "spec.nodeName" } else { fr.field_path.as_str() };
            if !CONVERTIBLE_FIELD_LABELS.contains(&label) {
                errs.push(FieldError::invalid(
                    p.child("fieldPath"),
                    &fr.field_path,
                    format!("error converting fieldPath: field label not supported: {}", fr.field_path),
                ));
            } else if !ENV_FIELD_PATHS.contains(&label) {
                errs.push(FieldError::not_supported(p.child("fieldPath"), label, &ENV_FIELD_PATHS));
            }
        }
    }
    if let Some(rf) = &from.resource_field_ref {
        sources += 1;
        let p = path.child("resourceFieldRef");
        if rf.resource.is_empty() {
            errs.push(FieldError::required(p.child("resource"), ""));
        } else if !RESOURCE_FIELD_PATHS.contains(&rf.resource.as_str())
            && !rf.resource.starts_with("requests.hugepages-")
            && !rf.resource.starts_with("limits.hugepages-")
        {
            errs.push(FieldError::not_supported(p.child("resource"), &rf.resource, &RESOURCE_FIELD_PATHS));
        }
    }
    if let Some(s) = &from.config_map_key_ref {
        sources += 1;
        validate_key_selector(&s.name, &s.key, &path.child("configMapKeyRef"), errs);
    }
    if let Some(s) = &from.secret_key_ref {
        sources += 1;
        validate_key_selector(&s.name, &s.key, &path.child("secretKeyRef"), errs);
    }

    if sources == 0 {
        errs.push(FieldError::invalid(
            path.clone(),
            "",
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        ));
    } else if !str_or_empty(&ev.value).is_empty() {
        errs.push(FieldError::invalid(path.clone(), "", "may not be specified when `value` is not empty"));
    } else if sources > 1 {
        errs.push(FieldError::invalid(path.clone(), "", "may not have more than one field specified at a time"));
    }
}

fn validate_key_selector(name: &str, key: &str, path: &FieldPath, errs: &mut Errors) {
    for msg in name_is_dns_subdomain(name, false) {
        errs.push(FieldError::invalid(path.child("name"), name, msg));
    }
    if key.is_empty() {
        errs.push(FieldError::required(path.child("key"), ""));
    } else {
        for msg in is_config_map_key(key) {
            errs.push(FieldError::invalid(path.child("key"), key, msg));
        }
    }
}

fn validate_env_from(sources: &[EnvFromSource], path: &FieldPath, errs: &mut Errors) {
    for (i, ev) in sources.iter().enumerate() {
        let p = path.index(i);
        let prefix = str_or_empty(&ev.prefix);
        if !prefix.is_empty() {
            for msg in is_relaxed_env_var_name(prefix) {
                errs.push(FieldError::invalid(p.child("prefix"), prefix, msg));
            }
        }
        let mut n = 0;
        for (field, name) in [
            ("configMapRef", ev.config_map_ref.as_ref().map(|r| &r.name)),
            ("secretRef", ev.secret_ref.as_ref().map(|r| &r.name)),
        ] {
            let Some(name) = name else { continue };
            n += 1;
            let np = p.child(field).child("name");
            if name.is_empty() {
                errs.push(FieldError::required(np, ""));
            } else {
                for msg in name_is_dns_subdomain(name, true) {
                    errs.push(FieldError::invalid(np.clone(), name, msg));
                }
            }
        }
        if n == 0 {
            errs.push(FieldError::invalid(path.clone(), "", "must specify one of: `configMapRef` or `secretRef`"));
        } else if n > 1 {
            errs.push(FieldError::invalid(path.clone(), "", "may not have more than one field specified at a time"));
        }
    }
}

// ---------------------------------------------------------- volume mounts

fn validate_volume_mounts(
    mounts: &[VolumeMount],
    devices: &[VolumeDevice],
    volumes: &VolumeMap<'_>,
    path: &FieldPath,
    errs: &mut Errors,
) {
    let mut mount_points = HashSet::new();
    for (i, m) in mounts.iter().enumerate() {
        let p = path.index(i);
        if m.name.is_empty() {
            errs.push(FieldError::required(p.child("name"), ""));
        }
        if !volumes.contains_key(m.name.as_str()) {
            errs.push(FieldError::not_found(p.child("name"), &m.name));
        }
        if m.mount_path.is_empty() {
            errs.push(FieldError::required(p.child("mountPath"), ""));
        }
        if !mount_points.insert(m.mount_path.as_str()) {
            errs.push(FieldError::invalid(p.child("mountPath"), &m.mount_path, "must be unique"));
        }
        if devices.iter().any(|d| d.name == m.name) {
            errs.push(FieldError::invalid(p.child("name"), &m.name, "must not already exist in volumeDevices"));
        }
        if devices.iter().any(|d| d.device_path == m.mount_path) {
            errs.push(FieldError::invalid(
                p.child("mountPath"),
                &m.mount_path,
                "must not already exist as a path in volumeDevices",
            ));
        }
        let sub_path = str_or_empty(&m.sub_path);
        let sub_path_expr = str_or_empty(&m.sub_path_expr);
        if volumes.get(m.name.as_str()).is_some_and(|v| v.image.is_some()) {
            if !sub_path.is_empty() {
                errs.push(FieldError::invalid(p.child("subPath"), sub_path, "not allowed in image volume sources"));
            }
            if !sub_path_expr.is_empty() {
                errs.push(FieldError::invalid(
                    p.child("subPathExpr"),
                    sub_path_expr,
                    "not allowed in image volume sources",
                ));
            }
        }
        // (upstream reports these two on the list path, not the item path)
        if !sub_path.is_empty() {
            validate_local_descending_path(sub_path, &path.child("subPath"), errs);
        }
        if !sub_path_expr.is_empty() {
            if !sub_path.is_empty() {
                errs.push(FieldError::invalid(
                    p.child("subPathExpr"),
                    sub_path_expr,
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            validate_local_descending_path(sub_path_expr, &path.child("subPathExpr"), errs);
        }
    }
}

fn validate_volume_devices(
    devices: &[VolumeDevice],
    mounts: &[VolumeMount],
    volumes: &VolumeMap<'_>,
    path: &FieldPath,
    errs: &mut Errors,
) {
    let mut device_paths = HashSet::new();
    let mut device_names = HashSet::new();
    for (i, d) in devices.iter().enumerate() {
        let p = path.index(i);
        let matched = volumes.get(d.name.as_str());
        if d.name.is_empty() {
            errs.push(FieldError::required(p.child("name"), ""));
        }
        if device_names.contains(d.name.as_str()) {
            errs.push(FieldError::invalid(p.child("name"), &d.name, "must be unique"));
        }
        if let Some(v) = matched {
            if v.persistent_volume_claim.is_none() && v.ephemeral.is_none() {
                errs.push(FieldError::invalid(
                    p.child("name"),
                    &d.name,
                    "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode",
                ));
            }
        } else {
            errs.push(FieldError::not_found(p.child("name"), &d.name));
        }
        if d.device_path.is_empty() {
            errs.push(FieldError::required(p.child("devicePath"), ""));
        }
        if device_paths.contains(d.device_path.as_str()) {
            errs.push(FieldError::invalid(p.child("devicePath"), &d.device_path, "must be unique"));
        }
        if !d.device_path.is_empty() && d.device_path.split('/').any(|s| s == "..") {
            errs.push(FieldError::invalid(p.child("devicePath"), &d.device_path, "can not contain backsteps ('..')"));
        } else {
            device_paths.insert(d.device_path.as_str());
        }
        if mounts.iter().any(|m| m.name == d.name) {
            errs.push(FieldError::invalid(p.child("name"), &d.name, "must not already exist in volumeMounts"));
        }
        if mounts.iter().any(|m| m.mount_path == d.device_path) {
            errs.push(FieldError::invalid(
                p.child("devicePath"),
                &d.device_path,
                "must not already exist as a path in volumeMounts",
            ));
        }
        if !d.name.is_empty() {
            device_names.insert(d.name.as_str());
        }
    }
}

// ------------------------------------------------------- probes and hooks

#[derive(Clone, Copy, PartialEq, Eq)]
enum ProbeKind {
    Liveness,
    Readiness,
    Startup,
}

fn validate_probe_of(
    kind: ProbeKind,
    probe: Option<&Probe>,
    grace: Option<i64>,
    container_path: &FieldPath,
    errs: &mut Errors,
) {
    let Some(probe) = probe else { return };
    let field = match kind {
        ProbeKind::Liveness => "livenessProbe",
        ProbeKind::Readiness => "readinessProbe",
        ProbeKind::Startup => "startupProbe",
    };
    let p = container_path.child(field);
    validate_probe(probe, grace, &p, errs);
    match kind {
        ProbeKind::Liveness | ProbeKind::Startup => {
            let st = probe.success_threshold.unwrap_or(0);
            if st != 1 {
                errs.push(FieldError::invalid(p.child("successThreshold"), st, "must be 1"));
            }
        }
        ProbeKind::Readiness => {
            if let Some(g) = probe.termination_grace_period_seconds {
                errs.push(FieldError::invalid(
                    p.child("terminationGracePeriodSeconds"),
                    g,
                    "must not be set for readinessProbes",
                ));
            }
        }
    }
}

fn validate_probe(probe: &Probe, grace: Option<i64>, path: &FieldPath, errs: &mut Errors) {
    validate_handler(
        Handler {
            exec: probe.exec.as_ref(),
            http_get: probe.http_get.as_ref(),
            tcp_socket: probe.tcp_socket.as_ref(),
            grpc: probe.grpc.as_ref(),
            sleep: None,
        },
        grace,
        path,
        errs,
    );
    for (field, v) in [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ] {
        let v = v.unwrap_or(0);
        if v < 0 {
            errs.push(FieldError::invalid(path.child(field), i64::from(v), IS_NEGATIVE));
        }
    }
    if let Some(g) = probe.termination_grace_period_seconds
        && g <= 0
    {
        errs.push(FieldError::invalid(path.child("terminationGracePeriodSeconds"), g, "must be greater than 0"));
    }
}

struct Handler<'a> {
    exec: Option<&'a ExecAction>,
    http_get: Option<&'a HTTPGetAction>,
    tcp_socket: Option<&'a TCPSocketAction>,
    grpc: Option<&'a GRPCAction>,
    sleep: Option<&'a SleepAction>,
}

fn validate_handler(h: Handler<'_>, grace: Option<i64>, path: &FieldPath, errs: &mut Errors) {
    const MORE_THAN_ONE: &str = "may not specify more than 1 handler type";
    let mut n = 0;
    if let Some(exec) = h.exec {
        n += 1;
        if exec.command.as_ref().is_none_or(|c| c.is_empty()) {
            errs.push(FieldError::required(path.child("exec").child("command"), ""));
        }
    }
    if let Some(http) = h.http_get {
        let p = path.child("httpGet");
        if n > 0 {
            errs.push(FieldError::forbidden(p, MORE_THAN_ONE));
        } else {
            n += 1;
            if str_or_empty(&http.path).is_empty() {
                errs.push(FieldError::required(p.child("path"), ""));
            }
            validate_port_num_or_name(&http.port, &p.child("port"), errs);
            let scheme = str_or_empty(&http.scheme);
            if scheme != "HTTP" && scheme != "HTTPS" {
                errs.push(FieldError::not_supported(p.child("scheme"), scheme, &["HTTP", "HTTPS"]));
            }
            for header in http.http_headers.iter().flatten() {
                for msg in is_http_header_name(&header.name) {
                    errs.push(FieldError::invalid(p.child("httpHeaders"), &header.name, msg));
                }
            }
        }
    }
    if let Some(tcp) = h.tcp_socket {
        let p = path.child("tcpSocket");
        if n > 0 {
            errs.push(FieldError::forbidden(p, MORE_THAN_ONE));
        } else {
            n += 1;
            validate_port_num_or_name(&tcp.port, &p.child("port"), errs);
        }
    }
    if let Some(grpc) = h.grpc {
        let p = path.child("grpc");
        if n > 0 {
            errs.push(FieldError::forbidden(p, MORE_THAN_ONE));
        } else {
            n += 1;
            for msg in is_valid_port_num(i64::from(grpc.port)) {
                errs.push(FieldError::invalid(p.child("port"), grpc.port, msg));
            }
        }
    }
    if let Some(sleep) = h.sleep {
        let p = path.child("sleep");
        if n > 0 {
            errs.push(FieldError::forbidden(p, MORE_THAN_ONE));
        } else {
            n += 1;
            // Zero is allowed (PodLifecycleSleepActionAllowZero, on by default in 1.33).
            if let Some(g) = grace
                && (sleep.seconds < 0 || sleep.seconds > g)
            {
                errs.push(FieldError::invalid(
                    p,
                    sleep.seconds,
                    format!("must be non-negative and less than terminationGracePeriodSeconds ({g})"),
                ));
            }
        }
    }
    if n == 0 {
        errs.push(FieldError::required(path.clone(), "must specify a handler type"));
    }
}

fn validate_port_num_or_name(port: &IntOrString, path: &FieldPath, errs: &mut Errors) {
    match port {
        IntOrString::Int(n) => {
            for msg in is_valid_port_num(i64::from(*n)) {
                errs.push(FieldError::invalid(path.clone(), *n, msg));
            }
        }
        IntOrString::String(s) => {
            for msg in is_valid_port_name(s) {
                errs.push(FieldError::invalid(path.clone(), s, msg));
            }
        }
    }
}

fn validate_lifecycle(l: &Lifecycle, grace: Option<i64>, path: &FieldPath, errs: &mut Errors) {
    for (field, handler) in [("postStart", &l.post_start), ("preStop", &l.pre_stop)] {
        if let Some(h) = handler {
            validate_lifecycle_handler(h, grace, &path.child(field), errs);
        }
    }
}

fn validate_lifecycle_handler(h: &LifecycleHandler, grace: Option<i64>, path: &FieldPath, errs: &mut Errors) {
    validate_handler(
        Handler {
            exec: h.exec.as_ref(),
            http_get: h.http_get.as_ref(),
            tcp_socket: h.tcp_socket.as_ref(),
            grpc: None,
            sleep: h.sleep.as_ref(),
        },
        grace,
        path,
        errs,
    );
}

#[cfg(test)]
mod tests;
