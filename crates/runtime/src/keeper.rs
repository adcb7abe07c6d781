//! Runtime calls that outlive podwright.
//!
//! containerd cancels a CRI call the moment the connection it came on closes. A podwright killed
//! in the middle of `StartContainer` therefore leaves a container exited with `StartError`
//! "context canceled", and once containerd had started its task that container may or may not
//! have run: the next podwright cannot tell whether starting it again runs it twice. A keeper
//! process holds a duplicate of the connection's socket, so that podwright's death does not
//! close the connection: containerd finishes the calls in flight and the next podwright finds
//! their results (a container created, or running, exactly once).
//!
//! The keeper is `/bin/sh` waiting for EOF on a pipe whose other end only podwright holds; after
//! that it keeps the socket [`LINGER`] longer, long enough for any call but a long image pull
//! or stop, then exits. While podwright lives, dropping the connection kills its keeper.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::process::Stdio;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

/// How long a keeper holds the connection once podwright is gone.
pub const LINGER: Duration = Duration::from_secs(60);
/// The descriptor the keeper holds the socket under.
const HELD_FD: RawFd = 3;

/// A connection to the runtime, with or without a keeper process holding its socket too.
pub struct RuntimeSocket {
    stream: UnixStream,
    // Killed when the connection is dropped; its stdin pipe ends with podwright.
    _keeper: Option<Child>,
}

impl RuntimeSocket {
    pub fn plain(stream: UnixStream) -> RuntimeSocket {
        RuntimeSocket { stream, _keeper: None }
    }

    pub fn kept(stream: UnixStream) -> io::Result<RuntimeSocket> {
        let keeper = spawn_keeper(stream.as_raw_fd())?;
        Ok(RuntimeSocket { stream, _keeper: Some(keeper) })
    }
}

fn spawn_keeper(fd: RawFd) -> io::Result<Child> {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(format!("read -r _; exec sleep {}", LINGER.as_secs()))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 gives the copy no close-on-exec flag; a socket that already is HELD_FD keeps
            // its own, so clear it.
            let r = if fd == HELD_FD { libc::fcntl(fd, libc::F_SETFD, 0) } else { libc::dup2(fd, HELD_FD) };
            if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
        });
    }
    cmd.spawn()
}

impl AsyncRead for RuntimeSocket {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for RuntimeSocket {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A read on the runtime's end that sees EOF within a moment: the connection closed.
    async fn closed(peer: &mut UnixStream) -> bool {
        let mut buf = [0u8; 1];
        matches!(tokio::time::timeout(Duration::from_millis(500), peer.read(&mut buf)).await, Ok(Ok(0)))
    }

    #[tokio::test]
    async fn a_dead_owners_connection_stays_open_while_its_keeper_lingers() {
        let (ours, mut runtime_end) = UnixStream::pair().unwrap();
        let mut socket = RuntimeSocket::kept(ours).unwrap();
        let mut keeper = socket._keeper.take().unwrap();
        // What podwright's death closes: its end of the keeper's pipe, its descriptor of the socket.
        drop(keeper.stdin.take());
        drop(socket);
        assert!(!closed(&mut runtime_end).await, "the connection closed with its owner");
        keeper.kill().await.unwrap();
        assert!(closed(&mut runtime_end).await, "the keeper's end did not close with it");
    }

    #[tokio::test]
    async fn dropping_the_connection_closes_it_keeper_and_all() {
        let (ours, mut runtime_end) = UnixStream::pair().unwrap();
        drop(RuntimeSocket::kept(ours).unwrap());
        assert!(closed(&mut runtime_end).await);
    }

    #[tokio::test]
    async fn a_plain_connection_closes_with_its_owner() {
        let (ours, mut runtime_end) = UnixStream::pair().unwrap();
        drop(RuntimeSocket::plain(ours));
        assert!(closed(&mut runtime_end).await);
    }
}
