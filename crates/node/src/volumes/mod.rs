//! Pod volumes on the host: `emptyDir` directories that live as long as the pod, and the mounts
//! that put them into containers.

pub mod mounts;

use crate::layout;
use k8s_openapi::api::core::v1::Pod;
use std::io;
use std::path::Path;

/// Creates every `emptyDir` of the pod (idempotent): the sandbox is not "ready" for
/// containers until its volumes are.
pub fn prepare(root: &Path, pod: &Pod) -> io::Result<()> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        if v.empty_dir.is_some() {
            let dir = layout::empty_dir(root, uid, &v.name);
            std::fs::create_dir_all(&dir)?;
            // Containers may run as any user; an emptyDir is world-writable like the kubelet's.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))?;
        }
    }
    Ok(())
}

/// Removes the pod's directory (volumes and logs) once the pod is gone.
pub fn cleanup(root: &Path, uid: &str) -> io::Result<()> {
    match std::fs::remove_dir_all(layout::pod_dir(root, uid)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
