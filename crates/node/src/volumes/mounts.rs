//! The CRI mounts that put a pod's volumes into one of its containers, per its `volumeMounts`.

use crate::layout;
use k8s_openapi::api::core::v1::{Container, Pod};
use podwright_runtime::cri_api::Mount;
use std::path::Path;

pub fn container_mounts(pod: &Pod, c: &Container, root: &Path) -> Vec<Mount> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    c.volume_mounts
        .iter()
        .flatten()
        .filter_map(|m| {
            let v = volumes?.iter().find(|v| v.name == m.name)?;
            v.empty_dir.as_ref()?;
            let mut host = layout::empty_dir(root, uid, &v.name);
            if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                host = host.join(sub);
                let _ = std::fs::create_dir_all(&host);
            }
            Some(Mount {
                container_path: m.mount_path.clone(),
                host_path: host.to_string_lossy().into_owned(),
                readonly: m.read_only.unwrap_or(false),
                ..Default::default()
            })
        })
        .collect()
}
