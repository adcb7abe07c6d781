//! The files of `configMap`, `secret`, `downwardAPI` and `projected` volumes, as the kubelet's
//! volume plugins make their payloads (`MakePayload`, `CollectData`), in their words when an
//! object or key is missing.

use super::atomic_writer::{FileProjection, Payload};
use crate::downward::{NodeFacts, field_value, resource_value};
use crate::objects::Objects;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Container, DownwardAPIVolumeFile, KeyToPath, Pod, Volume};
use podwright_api::defaults::service_account;
use podwright_api::go;
use std::collections::BTreeMap;

/// The API's default file mode of these volumes (0644).
const DEFAULT_MODE: i32 = 0o644;

/// The kubelet plugin whose directory holds a volume of these kinds, and whether its files
/// live in memory (the kubelet keeps secrets and projected volumes on tmpfs); `None` for the
/// other kinds.
pub fn plugin(v: &Volume) -> Option<(&'static str, bool)> {
    if v.config_map.is_some() {
        Some(("configmap", false))
    } else if v.secret.is_some() {
        Some(("secret", true))
    } else if v.downward_api.is_some() {
        Some(("downward-api", false))
    } else if v.projected.is_some() {
        Some(("projected", true))
    } else {
        None
    }
}

/// What a volume's files are made from.
pub struct Sources<'a> {
    pub pod: &'a Pod,
    pub node: &'a NodeFacts,
    pub objects: &'a dyn Objects,
}

impl Sources<'_> {
    fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("default")
    }
}

/// The payload of volume `v` (of a kind [`plugin`] knows). Err: the kubelet's message.
pub fn payload(src: &Sources, v: &Volume) -> Result<Payload, String> {
    let mut out = Payload::new();
    if let Some(s) = &v.config_map {
        let mode = s.default_mode.unwrap_or(DEFAULT_MODE);
        object_files(src, Kind::ConfigMap, &s.name, s.items.as_deref(), mode, s.optional == Some(true), &mut out)?;
    } else if let Some(s) = &v.secret {
        let name = s.secret_name.as_deref().unwrap_or_default();
        let mode = s.default_mode.unwrap_or(DEFAULT_MODE);
        object_files(src, Kind::Secret, name, s.items.as_deref(), mode, s.optional == Some(true), &mut out)?;
    } else if let Some(s) = &v.downward_api {
        let mode = s.default_mode.unwrap_or(DEFAULT_MODE);
        downward(src, s.items.as_deref().unwrap_or_default(), mode, &mut out)?;
    } else if let Some(s) = &v.projected {
        let mode = s.default_mode.unwrap_or(DEFAULT_MODE);
        let mut errors = Vec::new();
        for source in s.sources.iter().flatten() {
            let done = if let Some(c) = &source.config_map {
                object_files(
                    src,
                    Kind::ConfigMap,
                    &c.name,
                    c.items.as_deref(),
                    mode,
                    c.optional == Some(true),
                    &mut out,
                )
            } else if let Some(c) = &source.secret {
                object_files(src, Kind::Secret, &c.name, c.items.as_deref(), mode, c.optional == Some(true), &mut out)
            } else if let Some(d) = &source.downward_api {
                downward(src, d.items.as_deref().unwrap_or_default(), mode, &mut out)
            } else if let Some(t) = &source.service_account_token {
                match src.objects.service_account_token(src.pod, t) {
                    Some(token) => {
                        out.insert(t.path.clone(), file(token.into_bytes(), mode));
                        Ok(())
                    }
                    None => Err(format!(
                        "failed to fetch token: the token of service account {} is not issued yet",
                        go::quote(service_account(src.pod))
                    )),
                }
            } else {
                Ok(())
            };
            if let Err(e) = done {
                errors.push(e);
            }
        }
        // Every source's error at once.
        if !errors.is_empty() {
            return Err(go::aggregate(errors));
        }
    }
    Ok(out)
}

fn file(data: Vec<u8>, mode: i32) -> FileProjection {
    FileProjection { data, mode: mode as u32 }
}

/// Every key of `data`, or the `items` asked for under their paths (`MakePayload`).
fn keyed(
    data: BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    mode: i32,
    optional: bool,
    missing_key: &str,
    out: &mut Payload,
) -> Result<(), String> {
    match items.filter(|i| !i.is_empty()) {
        None => {
            for (k, v) in data {
                out.insert(k, file(v, mode));
            }
        }
        Some(items) => {
            for item in items {
                match data.get(&item.key) {
                    Some(v) => {
                        out.insert(item.path.clone(), file(v.clone(), item.mode.unwrap_or(mode)));
                    }
                    None if optional => {}
                    None => return Err(format!("{missing_key}: {}", item.key)),
                }
            }
        }
    }
    Ok(())
}

/// Which object a `configMap` or `secret` source names.
#[derive(Clone, Copy)]
enum Kind {
    ConfigMap,
    Secret,
}

/// The named ConfigMap's or Secret's keys as files (`MakePayload`); an optional one that is
/// missing is an empty volume.
fn object_files(
    src: &Sources,
    kind: Kind,
    name: &str,
    items: Option<&[KeyToPath]>,
    mode: i32,
    optional: bool,
    out: &mut Payload,
) -> Result<(), String> {
    let ns = src.namespace();
    let (data, word, missing_key) = match kind {
        Kind::ConfigMap => {
            let data = src.objects.config_map(ns, name).map(|cm| {
                let mut data: BTreeMap<String, Vec<u8>> =
                    cm.binary_data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
                data.extend(cm.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.into_bytes())));
                data
            });
            (data, "configmap", "configmap references non-existent config key")
        }
        Kind::Secret => {
            let data = src
                .objects
                .secret(ns, name)
                .map(|s| s.data.unwrap_or_default().into_iter().map(|(k, ByteString(v))| (k, v)).collect());
            (data, "secret", "references non-existent secret key")
        }
    };
    let data = match data {
        Some(d) => d,
        None if optional => BTreeMap::new(),
        None => return Err(format!("{word} {} not found", go::quote(name))),
    };
    keyed(data, items, mode, optional, missing_key, out)
}

fn downward(src: &Sources, items: &[DownwardAPIVolumeFile], mode: i32, out: &mut Payload) -> Result<(), String> {
    let containers: Vec<&Container> = podwright_planner::pod::all_containers(src.pod).map(|sc| sc.container).collect();
    for item in items {
        let value = if let Some(f) = &item.field_ref {
            field_value(src.pod, &f.field_path, &[], src.node)?
        } else if let Some(r) = &item.resource_field_ref {
            // Validation requires the container's name here.
            let Some(c) = containers.first() else { continue };
            resource_value(src.pod, c, r, src.node)?
        } else {
            continue;
        };
        out.insert(item.path.clone(), file(value.into_bytes(), item.mode.unwrap_or(mode)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::FixedObjects;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web", "tier": "front"}},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": "32Mi"}}}]},
        }))
        .unwrap()
    }

    fn objects() -> FixedObjects {
        let cm = serde_json::from_value(json!({"metadata": {"name": "cfg", "namespace": "ns"},
            "data": {"a.conf": "x=1"}, "binaryData": {"logo": "AAE="}}))
        .unwrap();
        let secret =
            serde_json::from_value(json!({"metadata": {"name": "s", "namespace": "ns"}, "data": {"token": "dG9r"}}))
                .unwrap();
        FixedObjects::new([cm], [secret])
    }

    fn volume(v: serde_json::Value) -> Result<Payload, String> {
        let v: Volume = serde_json::from_value(v).unwrap();
        let node = NodeFacts::default();
        payload(&Sources { pod: &pod(), node: &node, objects: &objects() }, &v)
    }

    fn files(p: &Payload) -> Vec<(&str, &[u8], u32)> {
        p.iter().map(|(k, f)| (k.as_str(), f.data.as_slice(), f.mode)).collect()
    }

    #[test]
    fn config_map_and_secret_keys_or_items_with_modes() {
        let all = volume(json!({"name": "v", "configMap": {"name": "cfg"}})).unwrap();
        assert_eq!(files(&all), [("a.conf", &b"x=1"[..], 0o644), ("logo", &[0, 1][..], 0o644)]);
        let items = volume(json!({"name": "v", "configMap": {"name": "cfg", "defaultMode": 0o440,
            "items": [{"key": "a.conf", "path": "etc/app.conf"}, {"key": "logo", "path": "logo", "mode": 0o400}]}}))
        .unwrap();
        assert_eq!(files(&items), [("etc/app.conf", &b"x=1"[..], 0o440), ("logo", &[0, 1][..], 0o400)]);
        let s = volume(json!({"name": "v", "secret": {"secretName": "s", "defaultMode": 0o400}})).unwrap();
        assert_eq!(files(&s), [("token", &b"tok"[..], 0o400)]);
    }

    #[test]
    fn missing_objects_and_keys_in_the_kubelets_words_unless_optional() {
        assert_eq!(
            volume(json!({"name": "v", "configMap": {"name": "nope"}})).unwrap_err(),
            "configmap \"nope\" not found"
        );
        assert_eq!(
            volume(json!({"name": "v", "secret": {"secretName": "nope"}})).unwrap_err(),
            "secret \"nope\" not found"
        );
        assert_eq!(
            volume(json!({"name": "v", "configMap": {"name": "cfg", "items": [{"key": "k", "path": "k"}]}}))
                .unwrap_err(),
            "configmap references non-existent config key: k"
        );
        assert_eq!(
            volume(json!({"name": "v", "secret": {"secretName": "s", "items": [{"key": "k", "path": "k"}]}}))
                .unwrap_err(),
            "references non-existent secret key: k"
        );
        assert!(volume(json!({"name": "v", "configMap": {"name": "nope", "optional": true}})).unwrap().is_empty());
        let both = volume(json!({"name": "v", "projected": {"sources": [
            {"configMap": {"name": "nope"}}, {"secret": {"name": "gone"}}]}}));
        assert_eq!(both.unwrap_err(), "[configmap \"nope\" not found, secret \"gone\" not found]");
    }

    #[test]
    fn downward_api_and_projected_files() {
        let d = volume(json!({"name": "v", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}, "mode": 0o600},
            {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}},
        ]}}))
        .unwrap();
        assert_eq!(
            files(&d),
            [
                ("labels", &b"app=\"web\"\ntier=\"front\""[..], 0o644),
                ("mem", &b"32"[..], 0o644),
                ("name", &b"p"[..], 0o600)
            ]
        );
        let p = volume(json!({"name": "v", "projected": {"defaultMode": 0o440, "sources": [
            {"configMap": {"name": "cfg", "items": [{"key": "a.conf", "path": "a.conf"}]}},
            {"secret": {"name": "s"}},
            {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
        ]}}))
        .unwrap();
        assert_eq!(
            files(&p),
            [("a.conf", &b"x=1"[..], 0o440), ("ns", &b"ns"[..], 0o440), ("token", &b"tok"[..], 0o440)]
        );
    }
}
