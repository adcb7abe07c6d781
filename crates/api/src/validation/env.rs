//! Environment variables: names, `valueFrom` sources and `envFrom`.

use k8s_openapi::api::core::v1::{EnvFromSource, EnvVar, EnvVarSource, FileKeySelector, PodSpec};

use super::containers::VolumeMap;
use super::volumes::validate_local_descending_path;
use super::{Errors, str_or_empty};
use crate::field_error::{FieldError, FieldPath};
use crate::formats::{is_config_map_key, is_dns1123_label, is_relaxed_env_var_name, name_is_dns_subdomain};

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

pub(super) fn validate_env(vars: &[EnvVar], path: &FieldPath, errs: &mut Errors) {
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
    if let Some(s) = &from.file_key_ref {
        sources += 1;
        validate_file_key_selector(s, &path.child("fileKeyRef"), errs);
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

/// `validateFileKeySelector`: a key as an environment variable's name may be (EnvFiles is beta,
/// with the relaxed names), a path inside the volume, a volume named as volumes are.
fn validate_file_key_selector(s: &FileKeySelector, path: &FieldPath, errs: &mut Errors) {
    if s.key.is_empty() {
        errs.push(FieldError::required(path.child("key"), ""));
    } else {
        for msg in is_relaxed_env_var_name(&s.key) {
            errs.push(FieldError::invalid(path.child("key"), &s.key, msg));
        }
    }
    if s.path.is_empty() {
        errs.push(FieldError::required(path.child("path"), ""));
    } else {
        validate_local_descending_path(&s.path, &path.child("path"), errs);
    }
    if s.volume_name.is_empty() {
        errs.push(FieldError::required(path.child("volumeName"), ""));
    } else {
        for msg in is_dns1123_label(&s.volume_name) {
            errs.push(FieldError::invalid(path.child("volumeName"), &s.volume_name, msg));
        }
    }
}

/// `validateFileKeyRefVolumes`: the volume a `fileKeyRef` reads must be one of the pod's, and an
/// emptyDir (what an init container can write the file into).
pub(super) fn validate_file_key_ref_volumes(
    spec: &PodSpec,
    volumes: &VolumeMap<'_>,
    path: &FieldPath,
    errs: &mut Errors,
) {
    let lists =
        [("initContainers", spec.init_containers.as_deref().unwrap_or_default()), ("containers", &spec.containers)];
    for (list, containers) in lists {
        for (i, c) in containers.iter().enumerate() {
            for (j, ev) in c.env.iter().flatten().enumerate() {
                let Some(r) = ev.value_from.as_ref().and_then(|f| f.file_key_ref.as_ref()) else { continue };
                if r.volume_name.is_empty() {
                    continue;
                }
                let p = path
                    .child(list)
                    .index(i)
                    .child("env")
                    .index(j)
                    .child("valueFrom")
                    .child("fileKeyRef")
                    .child("volumeName");
                match volumes.get(r.volume_name.as_str()) {
                    None => errs.push(FieldError::not_found(p, &r.volume_name)),
                    Some(v) if v.empty_dir.is_none() => errs.push(FieldError::invalid(
                        p,
                        &r.volume_name,
                        "referenced volume must be an emptyDir volume",
                    )),
                    Some(_) => {}
                }
            }
        }
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

pub(super) fn validate_env_from(sources: &[EnvFromSource], path: &FieldPath, errs: &mut Errors) {
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
