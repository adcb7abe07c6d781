//! `emptyDir` volumes: a directory under the pod's that any user of the containers may write
//! (the kubelet's `setupDir`), with a tmpfs mounted on it for `medium: Memory` (`setupTmpfs`).

use super::mount_points;
use super::os_error::path_error;
use super::ownership;
use crate::pod_cgroup::resource_config;
use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Pod};
use podwright_api::quantity::Quantity;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Sets the volume up at `dir` (idempotent: a tmpfs already there stays, with its files), and
/// when it is new gives it to the pod's `fs_group`, as the kubelet does once, at set-up. With
/// `shared`, the directory is made a shared mount, as the kubelet's root directory is, so that
/// containers can mount it with `HostToContainer` or `Bidirectional` propagation.
/// A memory volume's tmpfs is sized by [`memory_size`] from `pod` and `allocatable_memory`.
pub fn set_up(
    dir: &Path,
    source: &EmptyDirVolumeSource,
    shared: bool,
    fs_group: Option<u32>,
    pod: &Pod,
    allocatable_memory: u64,
) -> Result<(), String> {
    // Once made, the directory is the containers': its mode is not made again.
    let mut new = !dir.exists();
    if new {
        make_dir(dir)?;
    }
    if source.medium.as_deref() == Some("Memory") {
        new |= ensure_tmpfs(dir, memory_size(source, pod, allocatable_memory))?;
    }
    if let Some(gid) = fs_group.filter(|_| new) {
        ownership::set_volume_ownership(dir, gid, false).map_err(|e| path_error("chown", dir, &e))?;
    }
    if shared {
        mount_points::make_shared(dir).map_err(|e| path_error("mount", dir, &e))?;
    }
    Ok(())
}

/// A tmpfs of `size` bytes (the kernel's default without) at `dir`, unless one is mounted there
/// already: setting a volume up again keeps its files. Returns whether it mounted one.
pub fn ensure_tmpfs(dir: &Path, size: Option<u64>) -> Result<bool, String> {
    fs::create_dir_all(dir).map_err(|e| path_error("mkdir", dir, &e))?;
    let table = mount_points::table().map_err(|e| path_error("open", Path::new("/proc/self/mountinfo"), &e))?;
    let mounted = mount_points::mounted_at(&table, dir).is_some_and(|m| m.fs_type == "tmpfs");
    if !mounted {
        mount_points::mount_tmpfs(dir, size).map_err(|e| path_error("mount", dir, &e))?;
    }
    Ok(!mounted)
}

/// World-writable whatever the umask: containers may run as any user.
fn make_dir(dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| path_error("mkdir", dir, &e))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).map_err(|e| path_error("chmod", dir, &e))
}

/// A memory volume's tmpfs size, as the kubelet's `calculateEmptyDirMemorySize` makes it
/// (`SizeMemoryBackedVolumes`): the node's allocatable memory, lowered to the pod's memory limit
/// (its cgroup's: set when every container has one) and then to the volume's `sizeLimit`, each
/// only when it is above zero and not above what it lowers. Writes past it fail (`ENOSPC`); what
/// is written also counts against the writing container's memory limit. None (the kernel's
/// default, half the RAM) only when the node's memory is unknown and nothing else bounds it.
fn memory_size(source: &EmptyDirVolumeSource, pod: &Pod, allocatable_memory: u64) -> Option<u64> {
    let mut size = allocatable_memory;
    let lower = |size: u64, bound: Option<u64>| match bound {
        Some(b) if b > 0 && (size == 0 || b <= size) => b,
        _ => size,
    };
    size = lower(size, resource_config(pod).memory_limit.and_then(|l| u64::try_from(l).ok()));
    size = lower(size, size_limit(source));
    (size > 0).then_some(size)
}

/// The volume's `sizeLimit` in bytes, if above zero.
fn size_limit(source: &EmptyDirVolumeSource) -> Option<u64> {
    let limit = Quantity::parse(&source.size_limit.as_ref()?.0).ok()?;
    u64::try_from(limit.value()).ok().filter(|&bytes| bytes > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

    fn pod(containers: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": containers}}))
            .unwrap()
    }

    #[test]
    fn a_memory_volume_is_sized_by_the_node_then_the_pods_limit_then_its_own() {
        let source = |limit: Option<&str>| EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: limit.map(|l| ApiQuantity(l.into())),
            ..Default::default()
        };
        let gib = 1u64 << 30;
        let limited = |mem: &str| serde_json::json!({"name": "c", "resources": {"limits": {"memory": mem}}});
        let unbounded = pod(serde_json::json!([{"name": "c"}]));
        let two = pod(serde_json::json!([limited("256Mi"), limited("256Mi")]));
        let one_of_two = pod(serde_json::json!([limited("256Mi"), {"name": "d"}]));
        assert_eq!(memory_size(&source(None), &unbounded, 8 * gib), Some(8 * gib));
        // Every container limited: the pod's cgroup limit, their sum.
        assert_eq!(memory_size(&source(None), &two, 8 * gib), Some(512 << 20));
        // One without a limit: the pod has none.
        assert_eq!(memory_size(&source(None), &one_of_two, 8 * gib), Some(8 * gib));
        assert_eq!(memory_size(&source(Some("64Mi")), &two, 8 * gib), Some(64 << 20));
        // A sizeLimit above what the pod may use does not raise it.
        assert_eq!(memory_size(&source(Some("1Gi")), &two, 8 * gib), Some(512 << 20));
        assert_eq!(memory_size(&source(Some("0")), &unbounded, 8 * gib), Some(8 * gib));
        assert_eq!(memory_size(&source(Some("1Mi")), &unbounded, 0), Some(1 << 20));
        assert_eq!(memory_size(&source(None), &unbounded, 0), None);
    }

    #[test]
    fn the_tmpfs_is_as_large_as_the_size_limit() {
        let source = |limit: Option<&str>| EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: limit.map(|l| ApiQuantity(l.into())),
            ..Default::default()
        };
        assert_eq!(size_limit(&source(Some("1Mi"))), Some(1 << 20));
        assert_eq!(size_limit(&source(Some("1.5M"))), Some(1_500_000));
        assert_eq!(size_limit(&source(Some("0"))), None);
        assert_eq!(size_limit(&source(None)), None);
    }

    #[test]
    fn a_directory_on_disk_is_world_writable() {
        let dir = std::env::temp_dir().join(format!("pw-emptydir-{}", std::process::id())).join("v");
        set_up(&dir, &EmptyDirVolumeSource::default(), false, None, &pod(serde_json::json!([])), 0).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o7777, 0o777);
        // Again: nothing changes, nothing fails.
        fs::write(dir.join("kept"), "x").unwrap();
        set_up(&dir, &EmptyDirVolumeSource::default(), false, None, &pod(serde_json::json!([])), 0).unwrap();
        assert!(dir.join("kept").exists());
        fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }

    /// Changes groups for real, so it needs root, as podwright itself does.
    #[test]
    fn a_new_volume_is_given_to_the_fs_group_once() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("pw-emptydir-group-{}", std::process::id())).join("v");
        set_up(&dir, &EmptyDirVolumeSource::default(), false, Some(3456), &pod(serde_json::json!([])), 0).unwrap();
        let meta = fs::metadata(&dir).unwrap();
        assert_eq!((meta.mode() & 0o7777, meta.gid()), (0o2777, 3456));
        // What the containers made of it later stays theirs.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o2770)).unwrap();
        set_up(&dir, &EmptyDirVolumeSource::default(), false, Some(3456), &pod(serde_json::json!([])), 0).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o7777, 0o2770);
        fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }
}
