//! The CRI mounts that put a pod's volumes into one of its containers, per its `volumeMounts`,
//! as the kubelet's `makeMounts` makes them.

use super::projection;
use crate::cri::env::expand_strict;
use crate::layout;
use k8s_openapi::api::core::v1::{Container, Pod, VolumeMount};
use podwright_runtime::cri_api::Mount;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// The container's volume mounts; `env` is its environment, for `subPathExpr`. Err: why the
/// container cannot be created, in the kubelet's words.
pub fn container_mounts(
    pod: &Pod,
    c: &Container,
    root: &Path,
    env: &BTreeMap<String, String>,
) -> Result<Vec<Mount>, String> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    let mut mounts = Vec::new();
    for m in c.volume_mounts.iter().flatten() {
        let Some(v) = volumes.iter().find(|v| v.name == m.name) else { continue };
        // ConfigMap, Secret, downward API and projected volumes are read-only whatever the
        // mount says (the kubelet's plugins report ReadOnly).
        let (host, forced_read_only) = if v.empty_dir.is_some() {
            (layout::empty_dir(root, uid, &v.name), false)
        } else if let Some((plugin, _)) = projection::plugin(v) {
            (layout::volume_dir(root, uid, plugin, &v.name), true)
        } else {
            continue;
        };
        let host = match sub_path(m, env)? {
            Some(sub) => {
                let path = host.join(&sub);
                if std::fs::symlink_metadata(&path).is_err() && std::fs::create_dir_all(&path).is_err() {
                    return Err(format!(
                        "failed to create subPath directory for volumeMount {:?} of container {:?}",
                        m.name, c.name
                    ));
                }
                path
            }
            None => host,
        };
        mounts.push(Mount {
            container_path: m.mount_path.clone(),
            host_path: host.to_string_lossy().into_owned(),
            readonly: m.read_only.unwrap_or(false) || forced_read_only,
            ..Default::default()
        });
    }
    Ok(mounts)
}

/// The mount's `subPath`, or its `subPathExpr` expanded from the container's environment.
fn sub_path(m: &VolumeMount, env: &BTreeMap<String, String>) -> Result<Option<PathBuf>, String> {
    let sub = match m.sub_path_expr.as_deref().filter(|s| !s.is_empty()) {
        Some(expr) => expand_strict(expr, env)?,
        None => m.sub_path.clone().unwrap_or_default(),
    };
    if sub.is_empty() {
        return Ok(None);
    }
    let path = PathBuf::from(&sub);
    if path.is_absolute() {
        return Err(format!("error SubPath `{sub}` must not be an absolute path"));
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(format!("unable to provision SubPath `{sub}`: must not contain '..'"));
    }
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mounts(volumes: serde_json::Value, mounts: serde_json::Value) -> Result<Vec<Mount>, String> {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "uid": "u"},
            "spec": {"volumes": volumes, "containers": []}}))
        .unwrap();
        let c: Container = serde_json::from_value(json!({"name": "c", "volumeMounts": mounts})).unwrap();
        let root = std::env::temp_dir().join(format!("podwright-mounts-{}", std::process::id()));
        let env = BTreeMap::from([("POD".to_string(), "p1".to_string()), ("EMPTY".to_string(), String::new())]);
        let r = container_mounts(&pod, &c, &root, &env);
        let _ = std::fs::remove_dir_all(&root);
        r
    }

    #[test]
    fn projected_kinds_are_read_only_and_sub_path_exprs_expand() {
        let m = mounts(
            json!([{"name": "cfg", "configMap": {"name": "x"}}, {"name": "scratch", "emptyDir": {}}]),
            json!([
                {"name": "cfg", "mountPath": "/etc/app"},
                {"name": "scratch", "mountPath": "/data", "subPathExpr": "logs/$(POD)"},
            ]),
        )
        .unwrap();
        assert!(m[0].readonly);
        assert!(m[0].host_path.ends_with("volumes/kubernetes.io~configmap/cfg"), "{}", m[0].host_path);
        assert!(!m[1].readonly);
        assert!(m[1].host_path.ends_with("kubernetes.io~empty-dir/scratch/logs/p1"), "{}", m[1].host_path);
    }

    #[test]
    fn bad_sub_paths_in_the_kubelets_words() {
        let vols = json!([{"name": "s", "emptyDir": {}}]);
        let one = |m: serde_json::Value| mounts(vols.clone(), json!([m])).unwrap_err();
        assert_eq!(
            one(json!({"name": "s", "mountPath": "/d", "subPathExpr": "$(NOPE)/$(EMPTY)"})),
            "missing value for EMPTY, NOPE"
        );
        assert_eq!(
            one(json!({"name": "s", "mountPath": "/d", "subPath": "/abs"})),
            "error SubPath `/abs` must not be an absolute path"
        );
        assert_eq!(
            one(json!({"name": "s", "mountPath": "/d", "subPath": "a/../../b"})),
            "unable to provision SubPath `a/../../b`: must not contain '..'"
        );
    }
}
