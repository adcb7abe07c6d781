//! Keeping the embedded containerd up under a long-running podwright (`serve`): when it exits
//! (killed, crashed), it is started again on the same root, where it finds its containers, and
//! the CRI client's event subscription and the node's relist pick up from there.

use crate::EmbeddedRuntime;
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// How long to wait before trying again when containerd cannot be started.
const RETRY: Duration = Duration::from_secs(2);

impl EmbeddedRuntime {
    /// Runs forever: waits for the containerd under this root to exit and starts it again.
    pub async fn keep_running(self) {
        loop {
            match self.ensure_running().await {
                Ok(outcome) => {
                    if outcome.started {
                        tracing::warn!(pid = outcome.pid, "started the embedded containerd again");
                    }
                    if let Err(e) = exited(outcome.pid).await {
                        tracing::warn!(%e, pid = outcome.pid, "cannot watch the embedded containerd; it is not kept running");
                        return;
                    }
                    tracing::warn!(pid = outcome.pid, log = %self.log_path().display(), "the embedded containerd exited");
                }
                Err(e) => {
                    tracing::warn!(%e, "could not start the embedded containerd; trying again");
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }
}

/// Resolves when process `pid` (not necessarily our child) has exited: its pidfd turns
/// readable (Linux 5.3+).
async fn exited(pid: u32) -> std::io::Result<()> {
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        // Gone already: it has exited.
        return if e.raw_os_error() == Some(libc::ESRCH) { Ok(()) } else { Err(e) };
    }
    // SAFETY: a descriptor pidfd_open just returned, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: the OwnedFd stays open, and the same descriptor, for the AsyncFd's life.
    let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(std::io::Error::from)?;
    let _ready = fd.readable().await?;
    Ok(())
}
