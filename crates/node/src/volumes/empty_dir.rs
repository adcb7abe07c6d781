//! `emptyDir` volumes: a directory under the pod's that any user of the containers may write
//! (the kubelet's `setupDir`), with a tmpfs mounted on it for `medium: Memory` (`setupTmpfs`).

use super::mount_points;
use super::os_error::path_error;
use super::ownership;
use k8s_openapi::api::core::v1::EmptyDirVolumeSource;
use podwright_api::quantity::Quantity;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Sets the volume up at `dir` (idempotent: a tmpfs already there stays, with its files), and
/// when it is new gives it to the pod's `fs_group`, as the kubelet does once, at set-up. With
/// `shared`, the directory is made a shared mount, as the kubelet's root directory is, so that
/// containers can mount it with `HostToContainer` or `Bidirectional` propagation.
pub fn set_up(dir: &Path, source: &EmptyDirVolumeSource, shared: bool, fs_group: Option<u32>) -> Result<(), String> {
    // Once made, the directory is the containers': its mode is not made again.
    let mut new = !dir.exists();
    if new {
        make_dir(dir)?;
    }
    if source.medium.as_deref() == Some("Memory") {
        new |= ensure_tmpfs(dir, tmpfs_size(source))?;
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

/// The tmpfs's size: the volume's `sizeLimit`, so that writes past it fail (`ENOSPC`) as with
/// the kubelet's `SizeMemoryBackedVolumes`. Without one the kernel's default applies (half the
/// node's memory) where the kubelet gives the node's allocatable memory, or the pod's memory
/// limit when every container has one (`calculateEmptyDirMemorySize`); what is written there
/// counts against the writing container's memory limit either way.
fn tmpfs_size(source: &EmptyDirVolumeSource) -> Option<u64> {
    let limit = Quantity::parse(&source.size_limit.as_ref()?.0).ok()?;
    u64::try_from(limit.value()).ok().filter(|&bytes| bytes > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

    #[test]
    fn the_tmpfs_is_as_large_as_the_size_limit() {
        let source = |limit: Option<&str>| EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: limit.map(|l| ApiQuantity(l.into())),
            ..Default::default()
        };
        assert_eq!(tmpfs_size(&source(Some("1Mi"))), Some(1 << 20));
        assert_eq!(tmpfs_size(&source(Some("1.5M"))), Some(1_500_000));
        assert_eq!(tmpfs_size(&source(Some("0"))), None);
        assert_eq!(tmpfs_size(&source(None)), None);
    }

    #[test]
    fn a_directory_on_disk_is_world_writable() {
        let dir = std::env::temp_dir().join(format!("pw-emptydir-{}", std::process::id())).join("v");
        set_up(&dir, &EmptyDirVolumeSource::default(), false, None).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o7777, 0o777);
        // Again: nothing changes, nothing fails.
        fs::write(dir.join("kept"), "x").unwrap();
        set_up(&dir, &EmptyDirVolumeSource::default(), false, None).unwrap();
        assert!(dir.join("kept").exists());
        fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }

    /// Changes groups for real, so it needs root, as podwright itself does.
    #[test]
    fn a_new_volume_is_given_to_the_fs_group_once() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("pw-emptydir-group-{}", std::process::id())).join("v");
        set_up(&dir, &EmptyDirVolumeSource::default(), false, Some(3456)).unwrap();
        let meta = fs::metadata(&dir).unwrap();
        assert_eq!((meta.mode() & 0o7777, meta.gid()), (0o2777, 3456));
        // What the containers made of it later stays theirs.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o2770)).unwrap();
        set_up(&dir, &EmptyDirVolumeSource::default(), false, Some(3456)).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o7777, 0o2770);
        fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }
}
