//! Mounts podwright makes on the node for volumes (a `medium: Memory` emptyDir's tmpfs, the
//! shared bind mount a propagating emptyDir needs), found again through the mount table
//! (`/proc/self/mountinfo`) rather than remembered, so that what a podwright killed mid-pod
//! mounted is unmounted by the next one all the same.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One line of the mount table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountPoint {
    pub path: PathBuf,
    pub fs_type: String,
    /// In a peer group (`shared:N`): mounts under it propagate to its peers.
    pub shared: bool,
}

/// The mount table of podwright's mount namespace, in mount order.
pub fn table() -> io::Result<Vec<MountPoint>> {
    Ok(parse(&std::fs::read("/proc/self/mountinfo")?))
}

/// `mountinfo`: `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw`, fields up to
/// the mount point, optional fields up to `-`, then the filesystem type.
fn parse(text: &[u8]) -> Vec<MountPoint> {
    text.split(|&b| b == b'\n')
        .filter_map(|line| {
            let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
            let mount_point = fields.get(4)?;
            let dash = fields.iter().skip(6).position(|f| *f == b"-")? + 6;
            let optional = &fields[6..dash];
            Some(MountPoint {
                path: PathBuf::from(OsStr::from_bytes(&unescape(mount_point))),
                fs_type: String::from_utf8_lossy(fields.get(dash + 1)?).into_owned(),
                shared: optional.iter().any(|f| f.starts_with(b"shared:")),
            })
        })
        .collect()
}

/// The kernel writes space, tab, newline and backslash in paths as `\ooo`.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal =
            field.get(i + 1..i + 4).filter(|d| field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') << 6 | (d[1] - b'0') << 3 | (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

/// The mount on top at `path`, if `path` is a mount point.
pub fn mounted_at<'a>(table: &'a [MountPoint], path: &Path) -> Option<&'a MountPoint> {
    table.iter().rev().find(|m| m.path == path)
}

/// The mount `path` is on: the newest mount whose mount point is `path` or above it.
fn containing<'a>(table: &'a [MountPoint], path: &Path) -> Option<&'a MountPoint> {
    // The last of the longest: the newest mount stacked there.
    table.iter().filter(|m| path.starts_with(&m.path)).max_by_key(|m| m.path.components().count())
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

fn mount(source: &Path, target: &Path, fs_type: Option<&str>, flags: libc::c_ulong, data: &str) -> io::Result<()> {
    let (source, target) = (c_path(source)?, c_path(target)?);
    let fs_type = fs_type.map(CString::new).transpose()?;
    let data = CString::new(data)?;
    // SAFETY: every pointer is a NUL-terminated string that outlives the call, or null.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fs_type.as_ref().map_or(std::ptr::null(), |t| t.as_ptr()),
            flags,
            data.as_ptr().cast(),
        )
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Mounts a tmpfs at `dir`, of `size` bytes when given (else the kernel's default, half the
/// memory), as the kubelet's `setupTmpfs` does (`mount -t tmpfs -o size=N tmpfs DIR`).
pub fn mount_tmpfs(dir: &Path, size: Option<u64>) -> io::Result<()> {
    let data = size.map(|s| format!("size={s}")).unwrap_or_default();
    mount(Path::new("tmpfs"), dir, Some("tmpfs"), 0, &data)
}

/// Makes sure `dir` is on a shared mount, as the kubelet's `MakeRShared` does for its whole root
/// directory: unless the mount it is on is shared already, `dir` is bind-mounted onto itself
/// (when it is not a mount point) and made shared.
pub fn make_shared(dir: &Path) -> io::Result<()> {
    let table = table()?;
    if containing(&table, dir).is_some_and(|m| m.shared) {
        return Ok(());
    }
    if mounted_at(&table, dir).is_none() {
        mount(dir, dir, None, libc::MS_BIND, "")?;
    }
    mount(Path::new("none"), dir, None, libc::MS_SHARED | libc::MS_REC, "")
}

/// Unmounts everything mounted at or under `dir`, the newest mounts first; a mount that is
/// still busy is detached, so that nothing of it stays in the node's mount table.
pub fn unmount_all(dir: &Path) -> io::Result<()> {
    let table = table()?;
    for m in table.iter().rev().filter(|m| m.path.starts_with(dir)) {
        let target = c_path(&m.path)?;
        // SAFETY: `target` is a NUL-terminated path that outlives the calls.
        let unmounted =
            unsafe { libc::umount2(target.as_ptr(), 0) == 0 || libc::umount2(target.as_ptr(), libc::MNT_DETACH) == 0 };
        if !unmounted {
            let e = io::Error::last_os_error();
            // Gone meanwhile (EINVAL: no longer a mount point).
            if e.raw_os_error() != Some(libc::EINVAL) && e.kind() != io::ErrorKind::NotFound {
                return Err(e);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &[u8] = b"\
22 27 0:21 / /proc rw,relatime shared:5 - proc proc rw
27 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
90 27 0:50 / /var/lib/pw/pods/u/volumes/kubernetes.io~empty-dir/with\\040space rw,relatime - tmpfs tmpfs rw,size=1024k
91 27 0:51 / /mnt/slave rw master:7 - tmpfs tmpfs rw
92 27 0:52 / /mnt/both rw shared:9 master:7 - tmpfs tmpfs rw
";

    #[test]
    fn reads_the_mount_table() {
        let t = parse(SAMPLE);
        assert_eq!(t.len(), 5);
        assert_eq!(t[1], MountPoint { path: "/".into(), fs_type: "ext4".into(), shared: true });
        assert_eq!(t[2].path, Path::new("/var/lib/pw/pods/u/volumes/kubernetes.io~empty-dir/with space"));
        assert_eq!((t[2].fs_type.as_str(), t[2].shared), ("tmpfs", false));
        // A slave only receives: not shared.
        assert!(!t[3].shared);
        assert!(t[4].shared);
        assert_eq!(unescape(b"a\\011b\\134c\\\\"), b"a\tb\\c\\\\");
    }

    #[test]
    fn finds_the_mount_a_path_is_on() {
        let t = parse(SAMPLE);
        let on = |p: &str| containing(&t, Path::new(p)).map(|m| m.path.clone());
        assert_eq!(on("/var/lib/pw/pods/u"), Some("/".into()));
        assert_eq!(on("/mnt/slave/x"), Some("/mnt/slave".into()));
        assert_eq!(on("/mnt/slaves"), Some("/".into()));
        assert!(mounted_at(&t, Path::new("/mnt/both")).is_some());
        assert!(mounted_at(&t, Path::new("/mnt")).is_none());
    }
}
