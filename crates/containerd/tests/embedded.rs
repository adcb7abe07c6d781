//! The embedded containerd against the real thing: needs root, containerd, runc and the image
//! archives from `scripts/build-images` (scripts/test provides all of them).
//!
//! It uses its own root (`$PODWRIGHT_TEST_ROOT-embedded`) because it stops containerd at the end.
// Tests against a real containerd: real timeouts and timings.
#![allow(clippy::disallowed_methods)]

use podwright_containerd::{EmbeddedRuntime, SANDBOX_IMAGE};
use podwright_runtime::ImageService;
use std::path::PathBuf;
use std::time::Instant;

fn test_root() -> PathBuf {
    let base = std::env::var("PODWRIGHT_TEST_ROOT").unwrap_or_else(|_| "/var/lib/podwright-test".into());
    PathBuf::from(format!("{base}-embedded"))
}

/// A pipe whose write end is inheritable (no close-on-exec), like a CI job's stdout.
fn inheritable_pipe() -> (libc::c_int, libc::c_int) {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the two-element array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    (fds[0], fds[1])
}

/// Whether every write end of the pipe is closed (poll reports hang-up) within a second.
fn pipe_hung_up(read_end: libc::c_int) -> bool {
    let mut pfd = libc::pollfd { fd: read_end, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, 1000) };
    n == 1 && pfd.revents & libc::POLLHUP != 0
}

/// Stops the containerd this test started when an assertion fails before `stop`.
struct KillOnPanic(u32);

impl Drop for KillOnPanic {
    fn drop(&mut self) {
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", self.0)).unwrap_or_default();
        if std::thread::panicking() && comm.trim() == "containerd" {
            // SAFETY: kill(2) on the containerd this test started.
            unsafe { libc::kill(self.0 as libc::pid_t, libc::SIGTERM) };
        }
    }
}

fn session_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the name: state ppid pgrp session ...
    stat.rsplit_once(')')?.1.split_whitespace().nth(3)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_containerd_starts_once_is_reused_and_stops() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the embedded containerd needs root (scripts/test runs as root)");
        return;
    }
    let root = test_root();
    let runtime = EmbeddedRuntime::new(&root);
    runtime.stop().await.expect("stop a leftover containerd");
    // A cold start, images included. Without containers nothing is mounted under the root.
    if let Err(error) = std::fs::remove_dir_all(&root) {
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound, "remove {root:?}: {error}");
    }

    let (read_end, write_end) = inheritable_pipe();
    let began = Instant::now();
    // Two callers at once, as two `podwright run` started together: one starts, one reuses.
    let (a, b) = tokio::join!(runtime.ensure_running(), runtime.ensure_running());
    let (a, b) = (a.expect("first ensure_running"), b.expect("second ensure_running"));
    eprintln!("cold start + image import: {:?}; {a:?} {b:?}", began.elapsed());
    assert_eq!(a.pid, b.pid, "both callers share one containerd");
    assert!(a.started != b.started, "exactly one caller starts it: {a:?} {b:?}");
    let pid = a.pid;
    let _guard = KillOnPanic(pid);
    let mut imported = [a.imported, b.imported].concat();
    imported.sort();
    assert_eq!(imported, ["localhost/busybox-stopsignal:1.36", "localhost/busybox:1.36", "localhost/pause:3.9"]);

    // SAFETY: closing the write end we own.
    unsafe { libc::close(write_end) };
    assert!(pipe_hung_up(read_end), "containerd holds an inherited descriptor open (see ls -l /proc/{pid}/fd)");
    // SAFETY: closing the read end we own.
    unsafe { libc::close(read_end) };
    assert_eq!(session_of(pid), Some(pid), "containerd leads its own session");

    let status = runtime.status().await.expect("status");
    assert!(status.running, "{status:?}");
    assert_eq!(status.pid, Some(pid));
    assert!(status.version.as_deref().is_some_and(|v| v.starts_with("containerd ")), "{status:?}");

    let began = Instant::now();
    let again = runtime.ensure_running().await.expect("ensure_running again");
    eprintln!("warm ensure_running: {:?}", began.elapsed());
    assert_eq!(again.pid, pid);
    assert!(!again.started && again.imported.is_empty(), "{again:?}");

    // What sandbox and container creation rely on: CRI itself sees the images.
    let cri = podwright_runtime::cri::connect(&runtime.endpoint()).await.expect("connect over CRI");
    for image in ["localhost/busybox:1.36", SANDBOX_IMAGE] {
        let found = cri.image_status(image).await.expect("ImageStatus");
        assert!(found.is_some(), "CRI does not see {image}");
    }
    drop(cri);

    assert!(runtime.stop().await.expect("stop"), "it was running");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}/cmdline")).exists() || {
            // A zombie of ours until tokio reaps it: its state is Z.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z"))
        }
    );
    let status = runtime.status().await.expect("status after stop");
    assert!(!status.running && status.pid.is_none(), "{status:?}");
    assert!(!runtime.stop().await.expect("second stop"), "nothing left to stop");
}
