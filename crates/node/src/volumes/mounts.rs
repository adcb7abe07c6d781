//! The CRI mounts that put a pod's volumes into one of its containers, per its `volumeMounts`,
//! as the kubelet's `makeMounts` makes them.

use super::projection;
use crate::layout;
use k8s_openapi::api::core::v1::{Container, ImageVolumeSource, Pod, Volume, VolumeMount};
use podwright_api::expansion::expand_strict;
use podwright_api::go;
use podwright_planner::pod;
use podwright_runtime::cri_api::{ImageSpec, Mount, MountPropagation};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// What the runtime said that a container's mounts depend on.
#[derive(Debug, Default)]
pub struct FromRuntime {
    /// Whether the pod's runtime handler makes recursive read-only mounts.
    pub recursive_read_only: bool,
    /// The image each image volume the container mounts is, by volume name: the reference the
    /// runtime resolved it to once it was there.
    pub image_refs: BTreeMap<String, String>,
}

/// The container's volume mounts; `env` is its environment, for `subPathExpr`. Err: why the
/// container cannot be created, in the kubelet's words.
pub fn container_mounts(
    pod: &Pod,
    c: &Container,
    root: &Path,
    env: &BTreeMap<String, String>,
    runtime: &FromRuntime,
) -> Result<Vec<Mount>, String> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    let mut mounts = Vec::new();
    for m in c.volume_mounts.iter().flatten() {
        let Some(v) = volumes.iter().find(|v| v.name == m.name) else { continue };
        if let Some(image) = &v.image {
            // The runtime mounts the image itself, always read-only; validation has refused a
            // subPath of one.
            let Some(image_ref) = runtime.image_refs.get(&v.name) else {
                return Err(format!("image volume {} is not pulled", go::quote(&v.name)));
            };
            mounts.push(Mount {
                container_path: m.mount_path.clone(),
                readonly: true,
                propagation: propagation(m) as i32,
                image: Some(ImageSpec {
                    image: image_ref.clone(),
                    user_specified_image: image.reference.clone().unwrap_or_default(),
                    ..Default::default()
                }),
                ..Default::default()
            });
            continue;
        }
        let Some((host, forced_read_only)) = on_node(v, root, uid) else { continue };
        let host = match sub_path(m, env)? {
            Some(sub) => {
                let path = host.join(&sub);
                if std::fs::symlink_metadata(&path).is_err() && safe_make_dir(&host, &sub).is_err() {
                    return Err(format!(
                        "failed to create subPath directory for volumeMount {:?} of container {:?}",
                        m.name, c.name
                    ));
                }
                path
            }
            None => host,
        };
        let recursive_read_only = recursive_read_only(m, runtime.recursive_read_only)
            .map_err(|e| format!("failed to resolve recursive read-only mode: {e}"))?;
        mounts.push(Mount {
            container_path: m.mount_path.clone(),
            host_path: host.to_string_lossy().into_owned(),
            readonly: m.read_only.unwrap_or(false) || forced_read_only,
            recursive_read_only,
            propagation: propagation(m) as i32,
            ..Default::default()
        });
    }
    Ok(mounts)
}

/// The image volumes the container mounts, each once, by name.
pub fn image_volumes<'a>(pod: &'a Pod, c: &Container) -> Vec<(&'a str, &'a ImageVolumeSource)> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    volumes
        .iter()
        .filter(|v| c.volume_mounts.iter().flatten().any(|m| m.name == v.name))
        .filter_map(|v| Some((v.name.as_str(), v.image.as_ref()?)))
        .collect()
}

/// Whether the runtime named by its CRI `Version` (`containerd 2.1.9`, `cri-o 1.31.0`) mounts
/// image volumes: the CRI says of no feature for them, and a runtime from before them would
/// drop the mount's image and bind-mount an empty host path, so its release decides.
pub fn runtime_mounts_images(version: &str) -> bool {
    let mut words = version.split_whitespace();
    let (Some(name), Some(release)) = (words.next(), words.next()) else { return false };
    let mut numbers = release.trim_start_matches('v').split(|c: char| !c.is_ascii_digit());
    let (Some(Ok(major)), Some(Ok(minor))) =
        (numbers.next().map(str::parse::<u32>), numbers.next().map(str::parse::<u32>))
    else {
        return false;
    };
    match name {
        "containerd" => (major, minor) >= (2, 1),
        "cri-o" => (major, minor) >= (1, 31),
        _ => false,
    }
}

/// Whether any of the container's mounts asks for a recursive read-only mount, which only the
/// runtime can say it makes.
pub fn wants_recursive_read_only(c: &Container) -> bool {
    c.volume_mounts.iter().flatten().any(|m| matches!(m.recursive_read_only.as_deref(), Some("IfPossible" | "Enabled")))
}

/// The kubelet's `resolveRecursiveReadOnly`: `IfPossible` is recursive where the runtime can
/// make it so and plainly read-only elsewhere; `Enabled` cannot do without. Validation has
/// already required `readOnly` and private propagation for both.
fn recursive_read_only(m: &VolumeMount, supports_rro: bool) -> Result<bool, String> {
    match m.recursive_read_only.as_deref() {
        None | Some("Disabled") => Ok(false),
        Some("IfPossible") => Ok(supports_rro),
        Some("Enabled") if supports_rro => Ok(true),
        Some("Enabled") => Err(format!(
            "volume {} requested recursive read-only mode, but it is not supported by the runtime",
            go::quote(&m.name)
        )),
        Some(other) => Err(format!("unknown recursive read-only mode {}", go::quote(other))),
    }
}

/// Where the volume is on the node (an emptyDir's or an object volume's directory under the
/// pod's, a hostPath's path), and whether it is read-only whatever the mount says: ConfigMap,
/// Secret, downward API and projected volumes are (the kubelet's plugins report ReadOnly).
fn on_node(v: &Volume, root: &Path, uid: &str) -> Option<(PathBuf, bool)> {
    if v.empty_dir.is_some() {
        Some((layout::empty_dir(root, uid, &v.name), false))
    } else if let Some((plugin, _)) = projection::plugin(v) {
        Some((layout::volume_dir(root, uid, plugin, &v.name), true))
    } else {
        v.host_path.as_ref().map(|h| (PathBuf::from(&h.path), false))
    }
}

/// The kubelet's `SafeMakeDir`: makes the missing directories of `sub` under the volume at
/// `base`, each with the volume root's mode whatever the umask (0777 in an emptyDir, with the
/// set-group-ID bit under an `fsGroup`), so that the containers' users can write there as in
/// the volume itself; a symbolic link on the way may not lead out of the volume.
fn safe_make_dir(base: &Path, sub: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // A volume path not there yet (a hostPath of no type) is made as the runtime would.
    std::fs::create_dir_all(base)?;
    let mode = std::fs::metadata(base)?.permissions().mode() & 0o7777;
    let real_base = base.canonicalize()?;
    let mut current = base.to_path_buf();
    for part in sub.components() {
        let next = current.join(part);
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.is_dir() => current = next,
            Ok(m) if m.file_type().is_symlink() => {
                let resolved = next.canonicalize()?;
                if !resolved.starts_with(&real_base) || !resolved.is_dir() {
                    return Err(std::io::Error::other(format!("{} leads out of the volume", next.display())));
                }
                current = resolved;
            }
            Ok(_) => return Err(std::io::Error::other(format!("{} is not a directory", next.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&next)?;
                std::fs::set_permissions(&next, std::fs::Permissions::from_mode(mode))?;
                current = next;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The kubelet's `translateMountPropagation`: unset and `None` are private.
fn propagation(m: &VolumeMount) -> MountPropagation {
    match m.mount_propagation.as_deref() {
        Some("HostToContainer") => MountPropagation::PropagationHostToContainer,
        Some("Bidirectional") => MountPropagation::PropagationBidirectional,
        _ => MountPropagation::PropagationPrivate,
    }
}

/// Whether any container of the pod mounts volume `volume` with propagation from the node, which
/// the runtime allows only from a shared (or slave) mount.
pub fn propagates(p: &Pod, volume: &str) -> bool {
    pod::all_containers(p)
        .flat_map(|sc| sc.container.volume_mounts.iter().flatten())
        .any(|m| m.name == volume && propagation(m) != MountPropagation::PropagationPrivate)
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
        let r = container_mounts(&pod, &c, &root, &env, &FromRuntime::default());
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

    #[test]
    fn recursive_read_only_mounts_where_the_runtime_makes_them() {
        let p = pod(r#"
apiVersion: v1
kind: Pod
metadata: {name: p, uid: u1}
spec:
  volumes: [{name: d, emptyDir: {}}]
  containers:
  - name: maybe
    image: b
    volumeMounts: [{name: d, mountPath: /d, readOnly: true, recursiveReadOnly: IfPossible}]
  - name: must
    image: b
    volumeMounts: [{name: d, mountPath: /d, readOnly: true, recursiveReadOnly: Enabled}]
  - name: plain
    image: b
    volumeMounts: [{name: d, mountPath: /d, readOnly: true, recursiveReadOnly: Disabled}]
"#);
        let root = std::env::temp_dir().join(format!("pw-rro-{}", std::process::id()));
        let cs = &p.spec.as_ref().unwrap().containers;
        let rro = |c: &Container, supported| {
            container_mounts(
                &p,
                c,
                &root,
                &BTreeMap::new(),
                &FromRuntime { recursive_read_only: supported, ..Default::default() },
            )
            .map(|m| m.iter().map(|m| (m.readonly, m.recursive_read_only)).collect::<Vec<_>>())
        };
        assert_eq!(rro(&cs[0], false), Ok(vec![(true, false)]));
        assert_eq!(rro(&cs[0], true), Ok(vec![(true, true)]));
        assert_eq!(
            rro(&cs[1], false),
            Err("failed to resolve recursive read-only mode: volume \"d\" requested recursive read-only mode, \
                 but it is not supported by the runtime"
                .into())
        );
        assert_eq!(rro(&cs[1], true), Ok(vec![(true, true)]));
        assert_eq!(rro(&cs[2], true), Ok(vec![(true, false)]));
        assert_eq!(cs.iter().map(wants_recursive_read_only).collect::<Vec<_>>(), [true, true, false]);
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn a_missing_sub_path_is_made_with_the_volumes_mode_inside_the_volume() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("pw-safemkdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        for volume_mode in [0o777, 0o2770] {
            std::fs::set_permissions(&base, std::fs::Permissions::from_mode(volume_mode)).unwrap();
            safe_make_dir(&base, Path::new("a/b")).unwrap();
            assert_eq!((mode(&base.join("a")), mode(&base.join("a/b"))), (volume_mode, volume_mode));
            std::fs::remove_dir_all(base.join("a")).unwrap();
        }
        std::os::unix::fs::symlink("/tmp", base.join("out")).unwrap();
        assert!(safe_make_dir(&base, Path::new("out/x")).is_err());
        std::os::unix::fs::symlink(".", base.join("here")).unwrap();
        safe_make_dir(&base, Path::new("here/y")).unwrap();
        assert!(base.join("y").is_dir());
        std::fs::remove_dir_all(&base).unwrap();
    }

    fn pod(yaml: &str) -> Pod {
        podwright_api::parse_manifests("p.yaml", yaml).unwrap().remove(0)
    }

    const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: p, uid: u1}
spec:
  volumes:
  - {name: cache, emptyDir: {}}
  - {name: logs, hostPath: {path: /var/log, type: Directory}}
  - {name: sock, hostPath: {path: /run/app.sock}}
  initContainers:
  - name: i
    image: b
    volumeMounts: [{name: cache, mountPath: /cache, mountPropagation: HostToContainer}]
  containers:
  - name: a
    image: b
    volumeMounts:
    - {name: cache, mountPath: /cache, subPath: a}
    - {name: logs, mountPath: /logs, readOnly: true, mountPropagation: HostToContainer}
    - {name: sock, mountPath: /app.sock, mountPropagation: None}
    - {name: logs, mountPath: /all-logs, mountPropagation: Bidirectional}
"#;

    #[test]
    fn volumes_are_mounted_from_where_they_are_on_the_node() {
        let p = pod(POD);
        let root = std::env::temp_dir().join(format!("pw-mounts-{}", std::process::id()));
        let app = &p.spec.as_ref().unwrap().containers[0];
        let got: Vec<(String, String, bool, MountPropagation)> =
            container_mounts(&p, app, &root, &BTreeMap::new(), &FromRuntime::default())
                .unwrap()
                .into_iter()
                .map(|m| (m.container_path.clone(), m.host_path.clone(), m.readonly, m.propagation()))
                .collect();
        let cache = layout::empty_dir(&root, "u1", "cache").join("a").to_string_lossy().into_owned();
        assert_eq!(
            got,
            [
                ("/cache".into(), cache, false, MountPropagation::PropagationPrivate),
                ("/logs".into(), "/var/log".into(), true, MountPropagation::PropagationHostToContainer),
                ("/app.sock".into(), "/run/app.sock".into(), false, MountPropagation::PropagationPrivate),
                ("/all-logs".into(), "/var/log".into(), false, MountPropagation::PropagationBidirectional),
            ]
        );
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn a_volume_propagates_when_any_container_asks() {
        let p = pod(POD);
        assert!(propagates(&p, "cache"), "the init container's mount asks");
        assert!(propagates(&p, "logs"));
        assert!(!propagates(&p, "sock"));
    }

    #[test]
    fn runtimes_that_mount_images_by_release() {
        for yes in ["containerd 2.1.9+unknown", "containerd v2.2.0", "cri-o 1.31.0", "containerd 3.0.0"] {
            assert!(runtime_mounts_images(yes), "{yes}");
        }
        for no in ["containerd 1.6.20~ds1", "containerd 2.0.5", "cri-o 1.30.4", "other 9.9", "containerd", ""] {
            assert!(!runtime_mounts_images(no), "{no}");
        }
    }
}
