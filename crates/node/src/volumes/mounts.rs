//! The CRI mounts that put a pod's volumes into one of its containers, per its `volumeMounts`.

use crate::layout;
use k8s_openapi::api::core::v1::{Container, Pod, Volume, VolumeMount};
use podwright_planner::pod;
use podwright_runtime::cri_api::{Mount, MountPropagation};
use std::path::{Path, PathBuf};

pub fn container_mounts(pod: &Pod, c: &Container, root: &Path) -> Vec<Mount> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    c.volume_mounts
        .iter()
        .flatten()
        .filter_map(|m| {
            let v = volumes?.iter().find(|v| v.name == m.name)?;
            let mut host = on_node(v, root, uid)?;
            if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                host = host.join(sub);
                let _ = std::fs::create_dir_all(&host);
            }
            Some(Mount {
                container_path: m.mount_path.clone(),
                host_path: host.to_string_lossy().into_owned(),
                readonly: m.read_only.unwrap_or(false),
                propagation: propagation(m) as i32,
                ..Default::default()
            })
        })
        .collect()
}

/// Where the volume is on the node: an emptyDir's directory under the pod's, a hostPath's path.
fn on_node(v: &Volume, root: &Path, uid: &str) -> Option<PathBuf> {
    if v.empty_dir.is_some() {
        Some(layout::empty_dir(root, uid, &v.name))
    } else {
        v.host_path.as_ref().map(|h| PathBuf::from(&h.path))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let got: Vec<(String, String, bool, MountPropagation)> = container_mounts(&p, app, &root)
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
}
