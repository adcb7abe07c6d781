//! Noticing changes of the static-pod path: inotify on it, as the kubelet's file source watches
//! its directory, with the periodic relist as the safety net for whatever inotify cannot tell
//! (a path that does not exist yet, a queue overflow, a file replaced under a watched file).

use std::ffi::CString;
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

/// A save is several events (create, write, close; or write and rename): the path is read
/// once they pause this long, or at the latest after [`SETTLE_MAX`].
const SETTLE: Duration = Duration::from_millis(100);
const SETTLE_MAX: Duration = Duration::from_secs(1);

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

    /// Resolves when the path has changed (once the change's events have settled), or after the
    /// period.
    pub async fn changed(&mut self) {
        self.arm();
        let Some(fd) = &self.inotify else {
            tokio::time::sleep(self.period).await;
            return;
        };
        let first = tokio::select! {
            _ = tokio::time::sleep(self.period) => return,
            r = next_events(fd) => r,
        };
        let mut gone = first.unwrap_or_else(|e| {
            tracing::warn!(%e, path = %self.path.display(), "watching the static pod path failed; watching it again");
            true
        });
        let latest = tokio::time::sleep(SETTLE_MAX);
        tokio::pin!(latest);
        while !gone {
            tokio::select! {
                _ = &mut latest => break,
                r = tokio::time::timeout(SETTLE, next_events(fd)) => match r {
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

/// Waits for events and takes every one queued; returns whether the watch has ended.
async fn next_events(fd: &AsyncFd<OwnedFd>) -> io::Result<bool> {
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
            Ok(Ok(n)) => return Ok(masks(&buf[..n]).any(|m| m & WATCH_GONE != 0)),
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => continue,
        }
    }
}

/// The masks of the `struct inotify_event`s in `buf`: wd, mask, cookie, len (4 bytes each),
/// then `len` bytes of name.
fn masks(buf: &[u8]) -> impl Iterator<Item = u32> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let header = buf.get(at..at + 16)?;
        let word = |i: usize| u32::from_ne_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
        at += 16 + word(12) as usize;
        Some(word(4))
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
        assert_eq!(masks(&buf).collect::<Vec<_>>(), [libc::IN_CREATE, libc::IN_IGNORED]);
    }
}
