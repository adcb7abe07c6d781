//! Writes a volume's files so that a container never sees half of an update, as the kubelet's
//! `AtomicWriter` does: the files go into a new hidden directory `..<timestamp>`, the symlink
//! `..data` is switched to it by a rename, and each top-level name the container sees is a
//! symlink through `..data`. Nothing is written when the files are already as asked. With the
//! pod's `fsGroup`, a new version is given to the group before the swap, as the kubelet's
//! volume plugins do from the writer's `setPerms`.

use super::ownership;
use jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Component, Path};

/// One file of a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProjection {
    pub data: Vec<u8>,
    pub mode: u32,
}

/// A volume's files by their relative path.
pub type Payload = BTreeMap<String, FileProjection>;

const DATA_DIR: &str = "..data";
const DATA_DIR_TMP: &str = "..data_tmp";

/// Makes `dir` hold exactly `payload`, owned by group `fs_group` if given (the volume is
/// read-only to the group); returns whether anything changed. `now` names the new version's
/// directory.
pub fn write(dir: &Path, payload: &Payload, fs_group: Option<u32>, now: Timestamp) -> io::Result<bool> {
    for path in payload.keys() {
        check_path(path)?;
    }
    std::fs::create_dir_all(dir)?;
    let old = std::fs::read_link(dir.join(DATA_DIR)).ok();
    if let Some(old) = &old
        && same(&dir.join(old), payload, fs_group)?
    {
        return Ok(false);
    }
    let version = new_version_dir(dir, now)?;
    for (path, file) in payload {
        let target = dir.join(&version).join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, &file.data)?;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(file.mode & 0o7777))?;
    }
    let tmp = dir.join(DATA_DIR_TMP);
    let _ = std::fs::remove_file(&tmp);
    symlink(&version, &tmp)?;
    if let Some(gid) = fs_group {
        ownership::set_volume_ownership(dir, gid, true)?;
    }
    std::fs::rename(&tmp, dir.join(DATA_DIR))?;

    let wanted: BTreeSet<&str> = payload.keys().filter_map(|p| p.split('/').next()).collect();
    for name in &wanted {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(Path::new(DATA_DIR).join(name), &link)?;
        }
    }
    // What the old version had and the new one has not.
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with("..") && !wanted.contains(name.as_ref()) {
            std::fs::remove_file(dir.join(name.as_ref()))?;
        }
    }
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old))?;
    }
    Ok(true)
}

/// A relative path without `..` (validation has refused the others; this is the last guard
/// against writing outside the volume).
fn check_path(path: &str) -> io::Result<()> {
    let bad = path.is_empty()
        || path.starts_with("..")
        || Path::new(path).components().any(|c| !matches!(c, Component::Normal(_)));
    if bad {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("invalid path {path:?} in the volume")));
    }
    Ok(())
}

/// `..2006_01_02_15_04_05.<n>`, the kubelet's name for a version, made unique.
fn new_version_dir(dir: &Path, now: Timestamp) -> io::Result<String> {
    let stamp = now.strftime("..%Y_%m_%d_%H_%M_%S").to_string();
    for n in now.subsec_nanosecond().unsigned_abs().. {
        let name = format!("{stamp}.{n}");
        match std::fs::create_dir(dir.join(&name)) {
            Ok(()) => {
                std::fs::set_permissions(dir.join(&name), std::fs::Permissions::from_mode(0o755))?;
                return Ok(name);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!("a free name among 2^32")
}

/// Whether `version` holds exactly `payload`, modes included, and given to `fs_group`.
fn same(version: &Path, payload: &Payload, fs_group: Option<u32>) -> io::Result<bool> {
    let mut on_disk = BTreeSet::new();
    collect_files(version, "", &mut on_disk)?;
    if on_disk.len() != payload.len() || payload.keys().any(|k| !on_disk.contains(k)) {
        return Ok(false);
    }
    for (path, file) in payload {
        let target = version.join(path);
        let meta = std::fs::metadata(&target)?;
        let wanted = match fs_group {
            Some(_) => ownership::mode_with_group(file.mode & 0o7777, false, true),
            None => file.mode & 0o7777,
        };
        let owned = fs_group.is_none_or(|gid| meta.gid() == gid);
        if meta.mode() & 0o7777 != wanted || !owned || std::fs::read(&target)? != file.data {
            return Ok(false);
        }
    }
    Ok(true)
}

fn collect_files(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) -> io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if entry.file_type()?.is_dir() {
            collect_files(&entry.path(), &format!("{name}/"), out)?;
        } else {
            out.insert(name);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(data: &str, mode: u32) -> FileProjection {
        FileProjection { data: data.as_bytes().to_vec(), mode }
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn tempdir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("podwright-atomic-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn files_appear_through_the_data_symlink_and_updates_swap_it_whole() {
        let dir = tempdir("swap");
        let v1 = Payload::from([("a".into(), file("1", 0o644)), ("sub/b".into(), file("2", 0o400))]);
        assert!(write(&dir, &v1, None, t(0)).unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "1");
        assert_eq!(std::fs::read_to_string(dir.join("sub/b")).unwrap(), "2");
        assert_eq!(std::fs::read_link(dir.join("a")).unwrap(), Path::new("..data/a"));
        let first = std::fs::read_link(dir.join(DATA_DIR)).unwrap();
        assert!(first.to_string_lossy().starts_with("..2023_11_14_22_13_20."), "{first:?}");
        assert_eq!(std::fs::metadata(dir.join("sub/b")).unwrap().permissions().mode() & 0o777, 0o400);

        // The same again: nothing written.
        assert!(!write(&dir, &v1, None, t(1)).unwrap());
        assert_eq!(std::fs::read_link(dir.join(DATA_DIR)).unwrap(), first);

        // A change of content, a mode, a file gone and one added: a new version, the old removed.
        let v2 = Payload::from([("a".into(), file("one", 0o644)), ("c".into(), file("3", 0o600))]);
        assert!(write(&dir, &v2, None, t(2)).unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "one");
        assert_eq!(std::fs::read_to_string(dir.join("c")).unwrap(), "3");
        assert!(std::fs::symlink_metadata(dir.join("sub")).is_err());
        assert!(!dir.join(first).exists());
        let mut names: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(names.len(), 4, "{names:?}");
        assert_eq!(&names[2..], ["a", "c"]);
        // A mode alone changes too.
        assert!(write(&dir, &Payload::from([("a".into(), file("one", 0o600))]), None, t(3)).unwrap());
        assert_eq!(std::fs::metadata(dir.join("a")).unwrap().permissions().mode() & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn with_an_fs_group_the_files_are_the_groups_to_read_once_written() {
        let dir = tempdir("group");
        let v1 = Payload::from([("a".into(), file("1", 0o400)), ("sub/b".into(), file("2", 0o644))]);
        assert!(write(&dir, &v1, Some(2345), t(0)).unwrap());
        let meta = |p: &str| std::fs::metadata(dir.join(p)).unwrap();
        assert_eq!((meta("a").mode() & 0o7777, meta("a").gid()), (0o440, 2345));
        assert_eq!((meta("sub/b").mode() & 0o7777, meta("sub/b").gid()), (0o644, 2345));
        assert_eq!((meta("sub").mode() & 0o7777, meta("sub").gid()), (0o2755, 2345));
        assert_eq!(meta(".").gid(), 2345);
        // Already so: nothing written again.
        assert!(!write(&dir, &v1, Some(2345), t(1)).unwrap());
        // Files of another group are rewritten.
        assert!(write(&dir, &v1, Some(2346), t(2)).unwrap());
        assert_eq!(meta("a").gid(), 2346);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refuses_paths_that_leave_the_volume() {
        let dir = tempdir("escape");
        for bad in ["../x", "/etc/x", "a/../../x", "..data/x", ""] {
            assert!(write(&dir, &Payload::from([(bad.into(), file("x", 0o644))]), None, t(0)).is_err(), "{bad}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
