//! Pod volumes on the node, made before the pod's sandbox and removed with the pod: `emptyDir`
//! volumes that live as long as the pod (on disk, or a tmpfs), `hostPath` volumes checked against
//! their type, the files of `configMap`, `secret`, `downwardAPI` and `projected` volumes (kept up
//! to date while the pod runs), all but hostPath given to the pod's `fsGroup`, and the mounts
//! that put them into containers.

pub(crate) mod atomic_writer;
pub(crate) mod empty_dir;
pub(crate) mod host_path;
pub(crate) mod mount_points;
pub(crate) mod mounts;
mod os_error;
pub(crate) mod ownership;
pub(crate) mod projection;
pub(crate) mod usage;

pub use mounts::FromRuntime;

use crate::layout;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use podwright_api::go;
use projection::Sources;
use std::io;
use std::path::Path;

/// A volume that could not be set up, worded as the kubelet's `FailedMount` event
/// (`MountVolume.SetUp failed for volume "v" : hostPath type check failed: /x is not a file`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MountVolume.SetUp failed for volume {} : {message}", go::quote(.volume))]
pub struct SetUpError {
    pub volume: String,
    pub message: String,
}

/// Writes the files of every `configMap`, `secret`, `downwardAPI` and `projected` volume of the
/// pod as its objects are now (only what changed: see [`atomic_writer`]). Returns the volumes
/// that could not be written; the others are written all the same.
pub fn project(root: &Path, src: &Sources, now: Timestamp) -> Vec<SetUpError> {
    let pod = src.pod;
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let mut errors = Vec::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some((plugin, in_memory)) = projection::plugin(v) else { continue };
        let dir = layout::volume_dir(root, uid, plugin, &v.name);
        let written = projection::payload(src, v).and_then(|payload| {
            // Secrets never touch the disk.
            let place = if in_memory { empty_dir::ensure_tmpfs(&dir, None).map(drop) } else { Ok(()) };
            place.and_then(|()| {
                atomic_writer::write(&dir, &payload, ownership::fs_group(pod), now)
                    .map_err(|e| format!("cannot write the volume's files in {}: {e}", dir.display()))
            })
        });
        match written {
            Ok(true) => tracing::debug!(uid, volume = %v.name, "volume files written"),
            Ok(false) => {}
            Err(message) => errors.push(SetUpError { volume: v.name.clone(), message }),
        }
    }
    errors
}

/// Sets up every volume of the pod that lives on the node (idempotent): the sandbox is not
/// "ready" for containers until its volumes are. Each volume that could not be set up gives its
/// error; the others are set up all the same, as the kubelet mounts volumes one by one.
pub fn prepare(root: &Path, pod: &Pod, allocatable_memory: u64) -> Result<(), Vec<SetUpError>> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let fs_group = ownership::fs_group(pod);
    let mut errors = Vec::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let set_up = if let Some(source) = &v.empty_dir {
            let propagates = mounts::propagates(pod, &v.name);
            let dir = layout::empty_dir(root, uid, &v.name);
            empty_dir::set_up(&dir, source, propagates, fs_group, pod, allocatable_memory)
        } else if let Some(source) = &v.host_path {
            host_path::check(&source.path, source.type_.as_deref().unwrap_or_default())
        } else {
            Ok(())
        };
        if let Err(message) = set_up {
            errors.push(SetUpError { volume: v.name.clone(), message });
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

/// Removes the pod's directory (volumes and logs) once the pod is gone, unmounting first
/// whatever is mounted under it (a memory emptyDir's tmpfs), also what a podwright that died
/// mounted.
pub fn cleanup(root: &Path, uid: &str) -> io::Result<()> {
    let dir = layout::pod_dir(root, uid);
    mount_points::unmount_all(&dir)?;
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Unmounts whatever is mounted under the pod's volumes (memory emptyDirs, secret and projected
/// volumes) once nothing of the pod runs; its files on disk and its logs stay until it is removed.
pub fn tear_down(root: &Path, uid: &str) -> io::Result<()> {
    mount_points::unmount_all(&layout::pod_dir(root, uid).join("volumes"))
}

/// The UIDs of the pods that have a directory under `root`.
pub fn pods_with_files(root: &Path) -> io::Result<Vec<String>> {
    match std::fs::read_dir(layout::pods_dir(root)) {
        Ok(entries) => Ok(entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: p, uid: u1}
spec:
  containers:
  - name: a
    image: b
    volumeMounts:
    - {name: mem, mountPath: /mem}
    - {name: shared, mountPath: /shared, mountPropagation: HostToContainer}
  volumes:
  - {name: mem, emptyDir: {medium: Memory, sizeLimit: 1Mi}}
  - {name: shared, emptyDir: {}}
  - {name: plain, emptyDir: {}}
  - {name: host, hostPath: {path: /no/such/dir, type: Directory}}
"#;

    /// The mount table's lines for `dir`.
    fn mount_lines(dir: &Path) -> Vec<String> {
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let needle = format!(" {} ", dir.display());
        table.lines().filter(|l| l.contains(&needle)).map(str::to_string).collect()
    }

    /// Mounts for real, so it needs root, as podwright itself does.
    #[test]
    fn volumes_are_set_up_once_and_unmounted_with_the_pod() {
        let root = std::env::temp_dir().join(format!("pw-volumes-{}", std::process::id()));
        let pod = podwright_api::parse_manifests("p.yaml", POD).unwrap().remove(0);
        let refused = SetUpError {
            volume: "host".into(),
            message: "hostPath type check failed: /no/such/dir is not a directory".into(),
        };
        assert_eq!(
            refused.to_string(),
            "MountVolume.SetUp failed for volume \"host\" : hostPath type check failed: /no/such/dir is not a directory"
        );
        // The other volumes are set up all the same; twice, as a retry does.
        for _ in 0..2 {
            assert_eq!(prepare(&root, &pod, 1 << 30), Err(vec![refused.clone()]));
        }
        let mem = layout::empty_dir(&root, "u1", "mem");
        let lines = mount_lines(&mem);
        assert_eq!(lines.len(), 1, "one tmpfs, however often it is set up: {lines:?}");
        assert!(lines[0].contains(" - tmpfs tmpfs ") && lines[0].contains("size=1024k"), "{}", lines[0]);
        let table = mount_points::table().unwrap();
        let shared = mount_points::mounted_at(&table, &layout::empty_dir(&root, "u1", "shared"));
        assert!(shared.is_some_and(|m| m.shared), "{shared:?}");
        assert!(mount_points::mounted_at(&table, &layout::empty_dir(&root, "u1", "plain")).is_none());

        cleanup(&root, "u1").unwrap();
        let left = mount_points::table().unwrap().into_iter().filter(|m| m.path.starts_with(&root)).count();
        assert_eq!(left, 0, "mounts left under {}", root.display());
        assert!(!layout::pod_dir(&root, "u1").exists());
        assert_eq!(pods_with_files(&root).unwrap(), Vec::<String>::new());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
