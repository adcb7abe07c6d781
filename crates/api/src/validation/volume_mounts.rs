//! Volume mounts and volume devices of a container.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{VolumeDevice, VolumeMount};

use super::containers::VolumeMap;
use super::volumes::validate_local_descending_path;
use super::{Errors, str_or_empty};
use crate::field_error::{FieldError, FieldPath};

pub(super) fn validate_volume_mounts(
    mounts: &[VolumeMount],
    devices: &[VolumeDevice],
    volumes: &VolumeMap<'_>,
    privileged: bool,
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
        if let Some(mode) = m.mount_propagation.as_deref() {
            validate_mount_propagation(mode, privileged, &path.child("mountPropagation"), errs);
        }
        if let Some(mode) = m.recursive_read_only.as_deref() {
            validate_recursive_read_only(m, mode, &path.child("recursiveReadOnly"), errs);
        }
    }
}

/// Upstream's `validateMountRecursiveReadOnly` (reported on the list path, as propagation is).
fn validate_recursive_read_only(m: &VolumeMount, mode: &str, path: &FieldPath, errs: &mut Errors) {
    const MODES: [&str; 3] = ["Disabled", "Enabled", "IfPossible"];
    match mode {
        "Disabled" => {}
        "Enabled" | "IfPossible" => {
            if m.read_only != Some(true) {
                errs.push(FieldError::forbidden(path.clone(), "may only be specified when readOnly is true"));
            }
            if m.mount_propagation.as_deref().is_some_and(|p| p != "None") {
                errs.push(FieldError::forbidden(
                    path.clone(),
                    "may only be specified when mountPropagation is None or not specified",
                ));
            }
        }
        _ => errs.push(FieldError::not_supported(path.clone(), mode, &MODES)),
    }
}

/// Upstream's `validateMountPropagation` (reported on the list path too).
fn validate_mount_propagation(mode: &str, privileged: bool, path: &FieldPath, errs: &mut Errors) {
    const MODES: [&str; 3] = ["Bidirectional", "HostToContainer", "None"];
    if !MODES.contains(&mode) {
        errs.push(FieldError::not_supported(path.clone(), mode, &MODES));
    }
    if mode == "Bidirectional" && !privileged {
        errs.push(FieldError::forbidden(
            path.clone(),
            "Bidirectional mount propagation is available only to privileged containers",
        ));
    }
}

pub(super) fn validate_volume_devices(
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
