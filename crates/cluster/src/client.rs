//! The node's API clients: kube-rs's client over a connection stack of our own, so that a
//! renewed client certificate is used at once. Each TLS handshake asks the
//! [`crate::certificates::CurrentCertificate`] for the certificate it presents, and [`Connections::close_all`]
//! closes every open connection after a renewal: the API server checks a client certificate
//! once per connection, and a connection kept alive would otherwise go on with the old one
//! until it expires (the kubelet's `updateTransport` closes its connections the same way).

use crate::ClusterError;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use kube::client::ConfigExt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// The connections a node's clients have open, closable together.
#[derive(Debug, Default)]
pub struct Connections {
    /// Cancelled to close every connection made while it was current.
    generation: Mutex<CancellationToken>,
}

impl Connections {
    /// Closes every open connection; requests under way fail (and are retried by their
    /// callers, as after any lost connection), new ones connect again.
    pub fn close_all(&self) {
        let mut current = self.generation.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *current).cancel();
    }

    fn current(&self) -> CancellationToken {
        self.generation.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A client for the API server of `config` over `tls` (the node's credentials, its renewed
/// client certificate presented), its connections among `connections`.
pub fn node_client(
    config: &kube::Config,
    tls: rustls::ClientConfig,
    connections: Arc<Connections>,
) -> Result<kube::Client, ClusterError> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let tcp = ClosableConnector { inner: http, connections };
    let mut https = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = name
            .clone()
            .try_into()
            .map_err(|e| ClusterError::Credentials(format!("tls-server-name {name:?}: not a server name: {e}")))?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let mut timed = hyper_timeout::TimeoutConnector::new(https.enable_http1().wrap_connector(tcp));
    timed.set_connect_timeout(config.connect_timeout);
    timed.set_read_timeout(config.read_timeout);
    timed.set_write_timeout(config.write_timeout);
    let http: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Builder::new(hyper_util::rt::TokioExecutor::new()).build(timed);
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .map_err(tower::BoxError::from)
        .service(http);
    Ok(kube::Client::new(service, config.default_namespace.clone()))
}

/// TCP connections that [`Connections::close_all`] closes.
#[derive(Clone)]
struct ClosableConnector {
    inner: HttpConnector,
    connections: Arc<Connections>,
}

impl tower::Service<http::Uri> for ClosableConnector {
    type Response = Closable<<HttpConnector as tower::Service<http::Uri>>::Response>;
    type Error = <HttpConnector as tower::Service<http::Uri>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let closed = Box::pin(self.connections.current().cancelled_owned());
        let connecting = self.inner.call(uri);
        Box::pin(async move { Ok(Closable { io: connecting.await?, closed }) })
    }
}

/// A connection that fails its reads and writes once closed.
struct Closable<T> {
    io: T,
    closed: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<T> Closable<T> {
    /// Whether the connection has been closed; if not, `cx` is woken when it is.
    fn poll_closed(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        self.closed.as_mut().poll(cx).map(|()| {
            io::Error::new(io::ErrorKind::ConnectionAborted, "connection closed: the client certificate was renewed")
        })
    }
}

impl<T: Read + Unpin> Read for Closable<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Poll::Ready(e) = this.poll_closed(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for Closable<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Poll::Ready(e) = this.poll_closed(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl<T: Connection> Connection for Closable<T> {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper_util::rt::TokioIo;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn closing_fails_a_pending_read_and_spares_later_connections() {
        let connections = Connections::default();
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut old = Closable { io: TokioIo::new(ours), closed: Box::pin(connections.current().cancelled_owned()) };
        let reading = tokio::spawn(async move {
            let mut buf = [0u8; 8];
            let n = futures_util::future::poll_fn(|cx| {
                let mut read = hyper::rt::ReadBuf::new(&mut buf);
                Pin::new(&mut old).poll_read(cx, read.unfilled()).map_ok(|()| read.filled().len())
            })
            .await;
            (n.map_err(|e| e.kind()), old)
        });
        tokio::task::yield_now().await;
        connections.close_all();
        let (read, mut old) = reading.await.unwrap();
        assert_eq!(read, Err(io::ErrorKind::ConnectionAborted));
        let written = futures_util::future::poll_fn(|cx| Pin::new(&mut old).poll_write(cx, b"x")).await;
        assert!(written.is_err(), "a closed connection takes no more writes");

        let (ours, mut theirs2) = tokio::io::duplex(64);
        let mut new = Closable { io: TokioIo::new(ours), closed: Box::pin(connections.current().cancelled_owned()) };
        theirs2.write_all(b"hi").await.unwrap();
        let mut buf = [0u8; 8];
        let n = futures_util::future::poll_fn(|cx| {
            let mut read = hyper::rt::ReadBuf::new(&mut buf);
            Pin::new(&mut new).poll_read(cx, read.unfilled()).map_ok(|()| read.filled().len())
        })
        .await
        .unwrap();
        assert_eq!(&buf[..n], b"hi");
        theirs.shutdown().await.unwrap();
    }
}
