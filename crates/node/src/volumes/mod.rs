//! Pod volumes on the host, made before the pod's sandbox and removed with the pod: `emptyDir`
//! directories, and the files of `configMap`, `secret`, `downwardAPI` and `projected` volumes
//! (kept up to date while the pod runs); and the mounts that put them into containers.

pub mod atomic_writer;
pub mod mounts;
pub mod projection;

use crate::layout;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use projection::Sources;
use std::io;
use std::os::unix::fs::MetadataExt;
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

/// A volume that could not be set up, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeError {
    pub volume: String,
    pub message: String,
}

impl VolumeError {
    /// The kubelet's `FailedMount` event message.
    pub fn event_message(&self) -> String {
        format!(
            "MountVolume.SetUp failed for volume {} : {}",
            podwright_api::field_error::go_quote(&self.volume),
            self.message
        )
    }
}

/// Writes the files of every `configMap`, `secret`, `downwardAPI` and `projected` volume of the
/// pod as its objects are now (only what changed: see [`atomic_writer`]). Returns the volumes
/// that could not be written; the others are written all the same.
pub fn project(root: &Path, src: &Sources, now: Timestamp) -> Vec<VolumeError> {
    let pod = src.pod;
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let mut errors = Vec::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some((plugin, in_memory)) = projection::plugin(v) else { continue };
        let dir = layout::volume_dir(root, uid, plugin, &v.name);
        let written = projection::payload(src, v).and_then(|payload| {
            let place = if in_memory { ensure_tmpfs(&dir) } else { std::fs::create_dir_all(&dir) };
            place
                .and_then(|()| atomic_writer::write(&dir, &payload, now))
                .map_err(|e| format!("cannot write the volume's files in {}: {e}", dir.display()))
        });
        match written {
            Ok(true) => tracing::debug!(uid, volume = %v.name, "volume files written"),
            Ok(false) => {}
            Err(message) => errors.push(VolumeError { volume: v.name.clone(), message }),
        }
    }
    errors
}

/// A tmpfs at `dir`, mounted unless one is: secrets never touch the disk.
fn ensure_tmpfs(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let parent = dir.parent().unwrap_or(dir);
    if std::fs::metadata(dir)?.dev() != std::fs::metadata(parent)?.dev() {
        return Ok(());
    }
    let c = |s: &str| std::ffi::CString::new(s).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e));
    let target = c(&dir.to_string_lossy())?;
    let (fstype, options) = (c("tmpfs")?, c("mode=0755")?);
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            options.as_ptr().cast(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The mount points under `dir`, deepest first, from the kernel's table of this process.
fn mounts_under(dir: &Path) -> Vec<String> {
    let prefix = format!("{}/", dir.display());
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<String> = table
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mount_path)
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    points.dedup();
    points
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape_mount_path(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Removes the pod's directory (volumes and logs) once the pod is gone, unmounting what is
/// mounted in it first (memory-backed volumes), also after a podwright that died left them.
pub fn cleanup(root: &Path, uid: &str) -> io::Result<()> {
    let dir = layout::pod_dir(root, uid);
    for point in mounts_under(&dir) {
        let target =
            std::ffi::CString::new(point.as_str()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: a NUL-terminated path that outlives the call.
        if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
            let e = io::Error::last_os_error();
            tracing::warn!(%e, point, "could not unmount a pod volume");
        }
    }
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_paths_are_unescaped_as_mountinfo_writes_them() {
        assert_eq!(unescape_mount_path("/a\\040b\\011c\\134d"), "/a b\tc\\d");
        assert_eq!(unescape_mount_path("/plain\\04"), "/plain\\04");
    }
}
