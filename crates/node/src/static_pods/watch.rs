//! Noticing changes of the static-pod path: inotify on it, as the kubelet's file source watches
//! its directory, with the periodic relist as the safety net for whatever inotify cannot tell
//! (a path that does not exist yet, a queue overflow, a file replaced under a watched file).

use std::collections::BTreeSet;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Created, written, chmod-ed, renamed or removed entries, and the path itself going.
const MASK: u32 = libc::IN_CREATE
    | libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;

/// Events that end the watch: it is set up again on the path before the next wait.
const WATCH_GONE: u32 = libc::IN_IGNORED | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_UNMOUNT;

/// A file renamed into place, removed, chmod-ed or closed by its writer is whole: the path is
/// read at once. A file written in place (created or modified, not yet closed) may be half a
/// manifest: the path is read once its writer closes it, or once its events pause this long
/// (an editor that keeps it open), or at the latest after [`SETTLE_MAX`].
const SETTLE: Duration = Duration::from_millis(100);
const SETTLE_MAX: Duration = Duration::from_secs(1);

/// The entries being written in place that the path's reader would read: created or modified,
/// and not yet closed, removed or renamed away.
#[derive(Debug, Default)]
struct OpenWrites(BTreeSet<Vec<u8>>);

impl OpenWrites {
    /// Takes one event on entry `name` of the directory `dir`.
    fn note(&mut self, dir: &Path, mask: u32, name: &[u8]) {
        // Dot files are never read; directories are not manifests.
        if name.is_empty() || name.starts_with(b".") || mask & libc::IN_ISDIR != 0 {
            return;
        }
        if mask & (libc::IN_CLOSE_WRITE | libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_MOVED_TO) != 0 {
            self.0.remove(name);
        } else if mask & libc::IN_MODIFY != 0 || (mask & libc::IN_CREATE != 0 && !is_symlink(dir, name)) {
            // A symlink is made whole: no write or close of it follows.
            self.0.insert(name.to_vec());
        }
    }

    fn any(&self) -> bool {
        !self.0.is_empty()
    }
}

fn is_symlink(dir: &Path, name: &[u8]) -> bool {
    std::fs::symlink_metadata(dir.join(OsStr::from_bytes(name))).is_ok_and(|m| m.file_type().is_symlink())
}

/// Waits for the next change of a path.
pub(crate) struct DirWatch {
    path: PathBuf,
    period: Duration,
    inotify: Option<AsyncFd<OwnedFd>>,
}

impl DirWatch {
    /// Watches `path` from now on; `period` bounds every wait.
    pub fn new(path: &Path, period: Duration) -> Self {
        let mut w = DirWatch { path: path.to_path_buf(), period, inotify: None };
        w.arm();
        w
    }

    /// Sets the watch up unless it is: a path that does not exist yet is watched once it does.
    fn arm(&mut self) {
        if self.inotify.is_some() {
            return;
        }
        match watch(&self.path) {
            Ok(fd) => self.inotify = Some(fd),
            Err(e) => {
                tracing::debug!(%e, path = %self.path.display(), "cannot watch the static pod path; reading it periodically")
            }
        }
    }

    /// Resolves when the path has changed (at once for whole files, once a file written in
    /// place has been closed or its events have settled), or after the period.
    pub async fn changed(&mut self) {
        self.arm();
        let Some(fd) = &self.inotify else {
            tokio::time::sleep(self.period).await;
            return;
        };
        let mut writes = OpenWrites::default();
        let first = tokio::select! {
            _ = tokio::time::sleep(self.period) => return,
            r = next_events(fd, &self.path, &mut writes) => r,
        };
        let mut gone = first.unwrap_or_else(|e| {
            tracing::warn!(%e, path = %self.path.display(), "watching the static pod path failed; watching it again");
            true
        });
        let latest = tokio::time::sleep(SETTLE_MAX);
        tokio::pin!(latest);
        while !gone && writes.any() {
            tokio::select! {
                _ = &mut latest => break,
                r = tokio::time::timeout(SETTLE, next_events(fd, &self.path, &mut writes)) => match r {
                    Err(_quiet) => break,
                    Ok(r) => gone = r.unwrap_or(true),
                },
            }
        }
        if gone {
            self.inotify = None;
        }
    }
}

/// An inotify descriptor watching `path`, non-blocking and registered with tokio.
fn watch(path: &Path) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: inotify_init1(2) takes flags and returns a new descriptor or -1.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor inotify_init1 just returned, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: an open inotify descriptor and a NUL-terminated path that outlives the call.
    let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c_path.as_ptr(), MASK) };
    if wd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the OwnedFd stays open, and the same descriptor, for the AsyncFd's life.
    unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(io::Error::from)
}

/// Waits for events and takes every one queued into `writes`; returns whether the watch has
/// ended.
async fn next_events(fd: &AsyncFd<OwnedFd>, dir: &Path, writes: &mut OpenWrites) -> io::Result<bool> {
    // Room for many events with names (each at most 16 + NAME_MAX + 1 bytes).
    let mut buf = [0u8; 8192];
    loop {
        let mut guard = fd.readable().await?;
        let read = guard.try_io(|inner| {
            // SAFETY: reads at most buf.len() bytes into buf, which lives across the call.
            let n = unsafe { libc::read(inner.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
        });
        match read {
            Ok(Ok(n)) => {
                let mut gone = false;
                for (mask, name) in events(&buf[..n]) {
                    gone |= mask & WATCH_GONE != 0;
                    writes.note(dir, mask, name);
                }
                return Ok(gone);
            }
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => continue,
        }
    }
}

/// The mask and entry name of each `struct inotify_event` in `buf`: wd, mask, cookie, len
/// (4 bytes each), then `len` bytes of name padded with NULs.
fn events(buf: &[u8]) -> impl Iterator<Item = (u32, &[u8])> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let header = buf.get(at..at + 16)?;
        let word = |i: usize| u32::from_ne_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
        let len = word(12) as usize;
        let name = buf.get(at + 16..at + 16 + len)?;
        at += 16 + len;
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        Some((word(4), &name[..end]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("podwright-dirwatch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A file written into the directory wakes the wait long before the (hour-long) period.
    #[tokio::test]
    async fn a_new_file_ends_the_wait() {
        let dir = temp_dir("new");
        let mut w = DirWatch::new(&dir, Duration::from_secs(3600));
        std::fs::write(dir.join("pod.yaml"), "x").unwrap();
        // A hang guard, not a timing assertion: without the event this would wait an hour.
        tokio::time::timeout(Duration::from_secs(30), w.changed()).await.expect("the write was noticed");
        assert!(w.inotify.is_some(), "the directory is still watched");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The directory removed and made again: the watch ends and is set up on the new one.
    #[tokio::test]
    async fn a_removed_directory_is_watched_again_once_it_is_back() {
        let dir = temp_dir("gone");
        let mut w = DirWatch::new(&dir, Duration::from_secs(3600));
        std::fs::remove_dir_all(&dir).unwrap();
        tokio::time::timeout(Duration::from_secs(30), w.changed()).await.expect("the removal was noticed");
        assert!(w.inotify.is_none(), "the watch of the removed directory has ended");
        std::fs::create_dir_all(&dir).unwrap();
        w.arm();
        assert!(w.inotify.is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Virtual time: how long `changed` took, with the period an hour.
    // DirWatch sleeps on tokio's clock (paused here), so that is the clock to read.
    #[allow(clippy::disallowed_methods)]
    async fn virtual_wait(w: &mut DirWatch) -> Duration {
        let t0 = tokio::time::Instant::now();
        w.changed().await;
        t0.elapsed()
    }

    /// A manifest renamed into place is read at once: no settling wait, so that a static pod
    /// starts as soon as its file lands.
    #[tokio::test(start_paused = true)]
    async fn a_file_renamed_into_place_ends_the_wait_at_once() {
        let dir = temp_dir("renamed");
        let mut w = DirWatch::new(&dir, Duration::from_secs(3600));
        std::fs::write(dir.join(".pod.yaml.tmp"), "x").unwrap();
        std::fs::rename(dir.join(".pod.yaml.tmp"), dir.join("pod.yaml")).unwrap();
        assert_eq!(virtual_wait(&mut w).await, Duration::ZERO, "read without waiting for the events to settle");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file written and closed is whole: read at once as well.
    #[tokio::test(start_paused = true)]
    async fn a_file_closed_by_its_writer_ends_the_wait_at_once() {
        let dir = temp_dir("closed");
        let mut w = DirWatch::new(&dir, Duration::from_secs(3600));
        std::fs::write(dir.join("pod.yaml"), "x").unwrap();
        assert_eq!(virtual_wait(&mut w).await, Duration::ZERO);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file still open for writing may be half a manifest: it is read only once its events
    /// have settled, not at its first write.
    #[tokio::test(start_paused = true)]
    async fn a_file_still_being_written_is_read_once_its_events_settle() {
        use std::io::Write;
        let dir = temp_dir("open");
        let mut w = DirWatch::new(&dir, Duration::from_secs(3600));
        let mut f = std::fs::File::create(dir.join("pod.yaml")).unwrap();
        f.write_all(b"apiVersion: v1\n").unwrap();
        let waited = virtual_wait(&mut w).await;
        assert!((SETTLE..SETTLE_MAX).contains(&waited), "{waited:?}");
        // Its close is a change of its own, read at once.
        drop(f);
        assert_eq!(virtual_wait(&mut w).await, Duration::ZERO);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn open_writes_end_with_a_close_a_removal_or_a_rename() {
        let dir = temp_dir("writes");
        let mut writes = OpenWrites::default();
        writes.note(&dir, libc::IN_CREATE, b"a.yaml");
        writes.note(&dir, libc::IN_MODIFY, b"b.yaml");
        assert!(writes.any());
        writes.note(&dir, libc::IN_CLOSE_WRITE, b"a.yaml");
        writes.note(&dir, libc::IN_MOVED_FROM, b"b.yaml");
        assert!(!writes.any());
        // Never read, so never waited for: dot files and directories.
        writes.note(&dir, libc::IN_MODIFY, b".a.yaml.swp");
        writes.note(&dir, libc::IN_CREATE | libc::IN_ISDIR, b"sub");
        assert!(!writes.any());
        // A symlink is whole when it is made.
        std::os::unix::fs::symlink("/dev/null", dir.join("link.yaml")).unwrap();
        writes.note(&dir, libc::IN_CREATE, b"link.yaml");
        assert!(!writes.any());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn masks_walks_events_with_names() {
        let mut buf = vec![];
        for (mask, name) in [(libc::IN_CREATE, &b"a.yaml\0\0"[..]), (libc::IN_IGNORED, &b""[..])] {
            buf.extend(1i32.to_ne_bytes());
            buf.extend(mask.to_ne_bytes());
            buf.extend(0u32.to_ne_bytes());
            buf.extend((name.len() as u32).to_ne_bytes());
            buf.extend(name);
        }
        assert_eq!(events(&buf).map(|(mask, _)| mask).collect::<Vec<_>>(), [libc::IN_CREATE, libc::IN_IGNORED]);
        assert_eq!(events(&buf).map(|(_, name)| name).collect::<Vec<_>>(), [&b"a.yaml"[..], b""]);
    }
}
