//! Volumes: names, sources, file modes and the paths of projected items.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{KeyToPath, Volume};

use super::{Errors, FILE_MODE_ERROR, str_or_empty};
use crate::field_error::{FieldError, FieldPath};
use crate::formats::is_dns1123_label;
use crate::volume_sources::volume_sources;

pub(super) fn validate_volumes<'a>(
    volumes: &'a [Volume],
    path: &FieldPath,
    errs: &mut Errors,
) -> BTreeMap<&'a str, &'a Volume> {
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
        "image" => {
            if let Some(i) = &vol.image {
                let p = path.child("image");
                if str_or_empty(&i.reference).is_empty() {
                    errs.push(FieldError::required(p.child("reference"), ""));
                }
                super::containers::validate_pull_policy(&i.pull_policy, &p.child("pullPolicy"), errs);
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

pub(super) fn validate_local_descending_path(target: &str, path: &FieldPath, errs: &mut Errors) {
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
