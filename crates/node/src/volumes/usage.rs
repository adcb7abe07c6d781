//! How much disk a volume takes, measured as the kubelet's `fs.DiskUsage` does for an emptyDir
//! without project quotas: a walk of the tree adding up every inode's allocated blocks (not its
//! apparent size), each hard-linked inode once, without crossing into other filesystems.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The bytes allocated to `dir` and everything under it.
pub fn disk_usage(dir: &Path) -> io::Result<u64> {
    let top = fs::symlink_metadata(dir)?;
    let device = top.dev();
    let mut seen_links = HashSet::new();
    let mut bytes = 0u64;
    let mut pending = vec![(dir.to_path_buf(), top)];
    while let Some((path, meta)) = pending.pop() {
        if meta.dev() != device {
            continue;
        }
        if meta.nlink() > 1 && !meta.is_dir() && !seen_links.insert(meta.ino()) {
            continue;
        }
        bytes = bytes.saturating_add(meta.blocks().saturating_mul(512));
        if !meta.is_dir() {
            continue;
        }
        let entries = match fs::read_dir(&path) {
            Ok(entries) => entries,
            // Removed since it was listed.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            match entry.metadata() {
                Ok(m) => pending.push((entry.path(), m)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn counts_allocated_blocks_once_per_inode() {
        let dir = std::env::temp_dir().join(format!("pw-usage-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("sub")).unwrap();
        let empty = disk_usage(&dir).unwrap();
        let mut f = fs::File::create(dir.join("sub/data")).unwrap();
        f.write_all(&vec![1u8; 256 * 1024]).unwrap();
        f.sync_all().unwrap();
        let with_data = disk_usage(&dir).unwrap();
        assert!(with_data >= empty + 256 * 1024, "{empty} then {with_data}");
        // A hard link is the same inode; a sparse file takes what it holds, not its length.
        fs::hard_link(dir.join("sub/data"), dir.join("link")).unwrap();
        fs::File::create(dir.join("sparse")).unwrap().set_len(1 << 30).unwrap();
        let after = disk_usage(&dir).unwrap();
        assert!(after < with_data + 64 * 1024, "{with_data} then {after}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
