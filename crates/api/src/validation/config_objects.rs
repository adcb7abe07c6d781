//! ConfigMap, Secret and RuntimeClass validation as the API server does it
//! (`ValidateConfigMap`, `ValidateSecret` and their `...Update` in
//! `pkg/apis/core/validation/validation.go`; `ValidateRuntimeClass` in
//! `pkg/apis/node/validation/validation.go`), with the same paths, kinds and wording.
//!
//! Secrets are validated as the API server sees them: `stringData` already folded into
//! `data` and the type defaulted (see [`crate::defaults::default_secret`]).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::node::v1::RuntimeClass;

use super::go_json::unmarshal_object_error;
use super::{Errors, FieldError, FieldPath, validate_object_meta};
use crate::formats::{is_config_map_key, name_is_dns_label};

/// `MaxSecretSize`: the most bytes the values of a Secret's `data`, or of a ConfigMap's
/// `data` and `binaryData` together, may hold (1 MiB).
pub const MAX_SECRET_SIZE: usize = 1024 * 1024;

const IMMUTABLE_SET: &str = "field is immutable when `immutable` is set";
/// Shown instead of a secret value that is not valid JSON.
const REDACTED: &str = "<secret contents redacted>";

/// The secret types with rules of their own (`SecretType*`), and the keys they need.
const SERVICE_ACCOUNT_TOKEN: &str = "kubernetes.io/service-account-token";
const SERVICE_ACCOUNT_NAME_KEY: &str = "kubernetes.io/service-account.name";
const DOCKERCFG: &str = "kubernetes.io/dockercfg";
const DOCKERCFG_KEY: &str = ".dockercfg";
const DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
const BASIC_AUTH: &str = "kubernetes.io/basic-auth";
const SSH_AUTH: &str = "kubernetes.io/ssh-auth";
const SSH_AUTH_PRIVATE_KEY: &str = "ssh-privatekey";
const TLS: &str = "kubernetes.io/tls";

/// `IsConfigMapKey` for a key of the map at `path`.
fn check_key(key: &str, path: &FieldPath, errs: &mut Errors) {
    for msg in is_config_map_key(key) {
        errs.push(FieldError::invalid(path.key(key), key, msg));
    }
}

/// Validate a ConfigMap for creation; empty means valid.
pub fn validate_config_map(cm: &ConfigMap) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_object_meta(&cm.metadata, true, &FieldPath::new("metadata"), &mut errs);
    let (data_path, binary_path) = (FieldPath::new("data"), FieldPath::new("binaryData"));
    let data = cm.data.iter().flatten();
    let binary = cm.binary_data.iter().flatten();
    for (key, _) in data.clone() {
        check_key(key, &data_path, &mut errs);
        if cm.binary_data.as_ref().is_some_and(|b| b.contains_key(key)) {
            errs.push(FieldError::invalid(data_path.key(key), key, "duplicate of key present in binaryData"));
        }
    }
    for (key, _) in binary.clone() {
        check_key(key, &binary_path, &mut errs);
    }
    let total: usize = data.map(|(_, v)| v.len()).sum::<usize>() + binary.map(|(_, v)| v.0.len()).sum::<usize>();
    if total > MAX_SECRET_SIZE {
        // `field.NewPath("")`: the error is about the whole object.
        errs.push(FieldError::too_long("[]", MAX_SECRET_SIZE));
    }
    errs
}

/// Validate a new version of a ConfigMap: what [`validate_config_map`] checks, and nothing
/// of an immutable one may change.
pub fn validate_config_map_update(new: &ConfigMap, old: &ConfigMap) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if old.immutable == Some(true) {
        immutable_fields(new.immutable, &mut errs);
        if new.data != old.data {
            errs.push(FieldError::forbidden("data", IMMUTABLE_SET));
        }
        if new.binary_data != old.binary_data {
            errs.push(FieldError::forbidden("binaryData", IMMUTABLE_SET));
        }
    }
    errs.extend(validate_config_map(new));
    errs
}

fn immutable_fields(new_immutable: Option<bool>, errs: &mut Errors) {
    if new_immutable != Some(true) {
        errs.push(FieldError::forbidden("immutable", IMMUTABLE_SET));
    }
}

/// Validate a Secret for creation (after defaulting); empty means valid.
pub fn validate_secret(secret: &Secret) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_object_meta(&secret.metadata, true, &FieldPath::new("metadata"), &mut errs);
    let data_path = FieldPath::new("data");
    let empty = BTreeMap::new();
    let data = secret.data.as_ref().unwrap_or(&empty);
    for key in data.keys() {
        check_key(key, &data_path, &mut errs);
    }
    if data.values().map(|v| v.0.len()).sum::<usize>() > MAX_SECRET_SIZE {
        errs.push(FieldError::too_long(data_path.clone(), MAX_SECRET_SIZE));
    }
    type_rules(secret, data, &data_path, &mut errs);
    errs
}

/// The keys each secret type needs, and for Docker configurations that they are JSON objects.
fn type_rules(secret: &Secret, data: &BTreeMap<String, ByteString>, data_path: &FieldPath, errs: &mut Errors) {
    let required = |key: &str| FieldError::required(data_path.key(key), "");
    match secret.type_.as_deref().unwrap_or_default() {
        SERVICE_ACCOUNT_TOKEN => {
            let annotations = secret.metadata.annotations.as_ref();
            if annotations.and_then(|a| a.get(SERVICE_ACCOUNT_NAME_KEY)).is_none_or(String::is_empty) {
                let path = FieldPath::new("metadata").child("annotations").key(SERVICE_ACCOUNT_NAME_KEY);
                errs.push(FieldError::required(path, ""));
            }
        }
        kind @ (DOCKERCFG | DOCKER_CONFIG_JSON) => {
            let key = if kind == DOCKERCFG { DOCKERCFG_KEY } else { DOCKER_CONFIG_JSON_KEY };
            match data.get(key) {
                None => errs.push(required(key)),
                Some(value) => {
                    if let Some(why) = unmarshal_object_error(&value.0) {
                        errs.push(FieldError::invalid(data_path.key(key), REDACTED, why));
                    }
                }
            }
        }
        // Either may be empty, but one must be there.
        BASIC_AUTH if !data.contains_key("username") && !data.contains_key("password") => {
            errs.push(required("username"));
            errs.push(required("password"));
        }
        SSH_AUTH if data.get(SSH_AUTH_PRIVATE_KEY).is_none_or(|v| v.0.is_empty()) => {
            errs.push(required(SSH_AUTH_PRIVATE_KEY));
        }
        TLS => {
            for key in ["tls.crt", "tls.key"] {
                if !data.contains_key(key) {
                    errs.push(required(key));
                }
            }
        }
        // Opaque, empty and types of other names have no rules; the others are satisfied.
        _ => {}
    }
}

/// Validate a new version of a Secret (both defaulted): the type may not change, nothing of
/// an immutable one may change, and the new one must be valid.
pub fn validate_secret_update(new: &Secret, old: &Secret) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if new.type_ != old.type_ {
        errs.push(FieldError::invalid("type", new.type_.as_deref().unwrap_or_default(), "field is immutable"));
    }
    if old.immutable == Some(true) {
        immutable_fields(new.immutable, &mut errs);
        if new.data != old.data {
            errs.push(FieldError::forbidden("data", IMMUTABLE_SET));
        }
    }
    errs.extend(validate_secret(new));
    errs
}

/// Validate a RuntimeClass (cluster-scoped: it has no namespace). Its `overhead` and
/// `scheduling` are not checked.
pub fn validate_runtime_class(rc: &RuntimeClass) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_object_meta(&rc.metadata, false, &FieldPath::new("metadata"), &mut errs);
    for msg in name_is_dns_label(&rc.handler, false) {
        errs.push(FieldError::invalid("handler", rc.handler.as_str(), msg));
    }
    errs
}

#[cfg(test)]
mod tests;
