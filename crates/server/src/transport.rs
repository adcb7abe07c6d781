//! The local API's connections: HTTP/1.1 (with the upgrades of exec, attach and port-forward)
//! on whatever a listener accepts, plain TCP or TLS, with bounds on what one client can hold.
//! A client has the API server's 32 s to send a request's headers; a connection buffers at
//! most [`MAX_BUFFER_BYTES`] of what it has not yet written; and a write that the client does
//! not take for the request timeout fails and closes the connection, so a client that stops
//! reading (a watch's, a large list's) holds neither memory nor a task for longer than that.

use crate::limits::Limits;
use axum::Router;
use axum::serve::Listener;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How long a client may take to send a request's headers (the API server's
/// `ReadHeaderTimeout`).
const READ_HEADER_TIMEOUT: Duration = Duration::from_secs(32);

/// The most a connection buffers of a response the client has not read, and of a request's
/// headers: what hyper needs to write a watch event or a list efficiently, far below its
/// 400 KiB default, since a node may have a thousand watches open.
pub const MAX_BUFFER_BYTES: usize = 64 * 1024;

/// Serves `router` on every connection `listener` accepts, until the process ends.
pub async fn serve<L: Listener>(mut listener: L, router: Router, limits: Limits) {
    loop {
        let (io, _) = listener.accept().await;
        let service = TowerToHyperService::new(router.clone());
        let io = TokioIo::new(WriteStallLimit::new(io, limits.request_timeout));
        tokio::spawn(async move {
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(READ_HEADER_TIMEOUT)
                .max_buf_size(MAX_BUFFER_BYTES)
                .serve_connection(io, service)
                .with_upgrades()
                .await;
            if let Err(e) = served {
                tracing::debug!(%e, "a connection to the API ended");
            }
        });
    }
}

/// A connection whose writes fail once they have waited `limit` for the client to read.
struct WriteStallLimit<I> {
    io: I,
    limit: Duration,
    /// When the write now waiting gives up.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<I> WriteStallLimit<I> {
    fn new(io: I, limit: Duration) -> Self {
        WriteStallLimit { io, limit, stalled: None }
    }

    /// `progress` as it is, unless it has been pending for the whole limit.
    fn bound<T>(&mut self, cx: &mut Context<'_>, progress: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if progress.is_ready() {
            self.stalled = None;
            return progress;
        }
        let limit = self.limit;
        let stalled = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {limit:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for WriteStallLimit<I> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for WriteStallLimit<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let progress = Pin::new(&mut self.io).poll_write(cx, buf);
        self.bound(cx, progress)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let progress = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.bound(cx, progress)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let progress = Pin::new(&mut self.io).poll_flush(cx);
        self.bound(cx, progress)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let progress = Pin::new(&mut self.io).poll_shutdown(cx);
        self.bound(cx, progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    // Tokio's paused clock: the instants are virtual.
    #[allow(clippy::disallowed_methods)]
    #[tokio::test(start_paused = true)]
    async fn a_write_nobody_reads_fails_after_the_limit() {
        let (near, _far) = tokio::io::duplex(16);
        let mut conn = WriteStallLimit::new(near, Duration::from_secs(60));
        conn.write_all(&[0; 16]).await.unwrap();
        let started = tokio::time::Instant::now();
        let e = conn.write_all(&[0; 1]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_reads_resets_the_wait() {
        use tokio::io::AsyncReadExt;
        let (near, mut far) = tokio::io::duplex(16);
        let mut conn = WriteStallLimit::new(near, Duration::from_secs(60));
        let reader = tokio::spawn(async move {
            let mut buf = [0; 16];
            let mut total = 0;
            // Reads a little every 40 s: each write waits less than the limit.
            while total < 64 {
                tokio::time::sleep(Duration::from_secs(40)).await;
                total += far.read(&mut buf).await.unwrap();
            }
        });
        conn.write_all(&[0; 64]).await.unwrap();
        reader.await.unwrap();
    }
}
