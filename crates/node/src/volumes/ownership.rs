//! A volume given to the pod's `fsGroup`, as the kubelet's `SetVolumeOwnership` does for the
//! volume types that manage ownership (emptyDir, configMap, secret, downwardAPI, projected;
//! never hostPath): every file and directory gets the group, read and write for it (read only
//! on a read-only volume), and directories get search for it and setgid, so that what is
//! created in them later has the group too. The kubelet applies no `fsGroupChangePolicy` to
//! these types: each change is recursive.

use k8s_openapi::api::core::v1::Pod;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// What the group may do on a writable volume (`rwMask`), on a read-only one (`roMask`), and
/// on a directory besides (`execMask`).
const RW: u32 = 0o660;
const RO: u32 = 0o440;
const EXEC: u32 = 0o110;
const SETGID: u32 = 0o2000;

/// The group owning the pod's volumes: its `fsGroup`, which validation keeps within a gid.
pub fn fs_group(pod: &Pod) -> Option<u32> {
    let group = pod.spec.as_ref()?.security_context.as_ref()?.fs_group?;
    u32::try_from(group).ok()
}

/// The mode a file of `mode` has once the volume is given to the group
/// (`changeFilePermission`).
pub fn mode_with_group(mode: u32, is_dir: bool, read_only: bool) -> u32 {
    let mask = if read_only { RO } else { RW };
    if is_dir { mode | mask | EXEC | SETGID } else { mode | mask }
}

/// Gives `dir` and everything under it to group `gid` (symlinks themselves, not what they
/// point to). As the kubelet, a file whose group or mode cannot be changed is logged and
/// passed over; only a directory that cannot be read fails.
pub fn set_volume_ownership(dir: &Path, gid: u32, read_only: bool) -> io::Result<()> {
    let meta = fs::symlink_metadata(dir)?;
    if let Err(e) = std::os::unix::fs::lchown(dir, None, Some(gid)) {
        tracing::error!(path = %dir.display(), %e, "lchown failed");
    }
    if meta.file_type().is_symlink() {
        // A symlink's mode means nothing, and chmod would change its target's.
        return Ok(());
    }
    let mode = mode_with_group(meta.mode() & 0o7777, meta.is_dir(), read_only);
    if let Err(e) = fs::set_permissions(dir, fs::Permissions::from_mode(mode)) {
        tracing::error!(path = %dir.display(), %e, "chmod failed");
    }
    if meta.is_dir() {
        for entry in fs::read_dir(dir)? {
            set_volume_ownership(&entry?.path(), gid, read_only)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mode_and_gid(p: &Path) -> (u32, u32) {
        let m = fs::symlink_metadata(p).unwrap();
        (m.mode() & 0o7777, m.gid())
    }

    /// Changes groups for real, so it needs root, as podwright itself does.
    #[test]
    fn every_file_gets_the_group_and_directories_setgid() {
        let dir = std::env::temp_dir().join(format!("pw-ownership-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("sub")).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(dir.join("sub"), fs::Permissions::from_mode(0o700)).unwrap();
        fs::write(dir.join("sub/secret"), "s").unwrap();
        fs::set_permissions(dir.join("sub/secret"), fs::Permissions::from_mode(0o400)).unwrap();
        fs::write(dir.join("exec"), "x").unwrap();
        fs::set_permissions(dir.join("exec"), fs::Permissions::from_mode(0o755)).unwrap();
        symlink("sub/secret", dir.join("link")).unwrap();

        set_volume_ownership(&dir, 4321, false).unwrap();
        assert_eq!(mode_and_gid(&dir), (0o2775, 4321));
        assert_eq!(mode_and_gid(&dir.join("sub")), (0o2770, 4321));
        assert_eq!(mode_and_gid(&dir.join("sub/secret")), (0o660, 4321));
        assert_eq!(mode_and_gid(&dir.join("exec")), (0o775, 4321));
        assert_eq!(fs::symlink_metadata(dir.join("link")).unwrap().gid(), 4321);

        // Read-only: the group may read, not write; a second pass changes nothing more.
        fs::set_permissions(dir.join("sub/secret"), fs::Permissions::from_mode(0o400)).unwrap();
        for _ in 0..2 {
            set_volume_ownership(&dir, 4321, true).unwrap();
            assert_eq!(mode_and_gid(&dir.join("sub/secret")), (0o440, 4321));
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn modes_get_the_groups_bits() {
        assert_eq!(mode_with_group(0o644, false, true), 0o644);
        assert_eq!(mode_with_group(0o600, false, true), 0o640);
        assert_eq!(mode_with_group(0o400, false, false), 0o660);
        assert_eq!(mode_with_group(0o777, true, false), 0o2777);
        assert_eq!(mode_with_group(0o755, true, true), 0o2755);
    }
}
