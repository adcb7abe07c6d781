//! Port-forward over WebSocket, subprotocol `SPDY/3.1+portforward.k8s.io` (kubectl 1.31+): the
//! client's binary messages, joined, are the SPDY session it would have sent over a SPDY upgrade
//! (client-go `tools/portforward/tunneling_connection.go`). As the API server's
//! `TunnelingHandler` does, the session is carried to a SPDY upgrade of the runtime's URL
//! without being parsed: only the WebSocket framing comes off and goes on.

use super::websocket::{self, Message, Outbox, Reader};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// The subprotocol kubectl offers and the SPDY protocol behind its prefix, which the runtime is
/// asked for.
pub const PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
pub const UPSTREAM_PROTOCOL: &str = "portforward.k8s.io";

/// How much of the runtime's byte stream goes into one message.
const CHUNK: usize = 32 * 1024;

/// Carries the tunnel between the upgraded `client` and `upstream` until both directions end.
pub async fn run<C, U>(client: C, upstream: U)
where
    C: AsyncRead + AsyncWrite + Send + 'static,
    U: AsyncRead + AsyncWrite + Send + 'static,
{
    let (client_r, client_w) = tokio::io::split(client);
    let (mut upstream_r, mut upstream_w) = tokio::io::split(upstream);
    let outbox = Outbox::spawn(client_w);
    let to_upstream = async {
        let mut messages = Reader::new(BufReader::new(client_r));
        loop {
            match messages.next().await {
                Ok(Some(Message::Binary(bytes))) => {
                    if upstream_w.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
                Ok(Some(Message::Ping(payload))) => {
                    outbox.pong(&payload).await;
                }
                Ok(Some(Message::Pong)) => {}
                Ok(Some(Message::Text(_))) => {
                    outbox.close(websocket::UNSUPPORTED_DATA).await;
                    break;
                }
                Ok(Some(Message::Close(_)) | None) => {
                    outbox.close(websocket::NORMAL_CLOSURE).await;
                    break;
                }
                Err(e) => {
                    tracing::debug!(%e, "port-forward tunnel: reading the client");
                    outbox.close(websocket::PROTOCOL_ERROR).await;
                    break;
                }
            }
        }
        // The runtime's end of the session sees the client's end, and closes its side.
        let _ = upstream_w.shutdown().await;
    };
    let to_client = async {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match upstream_r.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => {
                    if !outbox.binary(&buf[..n]).await {
                        break;
                    }
                }
                Err(e) => {
                    tracing::debug!(%e, "port-forward tunnel: reading the streaming server");
                    break;
                }
            }
        }
        outbox.close(websocket::NORMAL_CLOSURE).await;
    };
    tokio::join!(to_upstream, to_client);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::streaming::websocket::tests::{client_binary, client_frame};

    #[tokio::test]
    async fn carries_bytes_both_ways_and_ends_with_a_close() {
        let (client, mut kubectl) = tokio::io::duplex(1 << 20);
        let (upstream, mut runtime) = tokio::io::duplex(1 << 20);
        let session = tokio::spawn(run(client, upstream));

        // Two messages from the client, one of them split in fragments around a ping.
        let mut sent = client_binary(b"\x80\x03\x00\x01");
        sent.extend(client_frame(false, 0x2, b"frag", [1, 2, 3, 4]));
        sent.extend(client_frame(true, 0x9, b"ping", [5, 6, 7, 8]));
        sent.extend(client_frame(true, 0x0, b"ment", [1, 1, 1, 1]));
        kubectl.write_all(&sent).await.unwrap();
        let mut got = [0u8; 12];
        runtime.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"\x80\x03\x00\x01fragment");

        // The runtime's bytes come back as one binary message; then its end closes the socket.
        runtime.write_all(b"reply").await.unwrap();
        runtime.shutdown().await.unwrap();
        drop(runtime);
        let mut back = [0u8; 13];
        kubectl.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"\x8a\x04ping\x82\x05reply");
        let mut close = [0u8; 4];
        kubectl.read_exact(&mut close).await.unwrap();
        assert_eq!(close, [0x88, 0x02, 0x03, 0xE8]);

        kubectl.write_all(&client_frame(true, 0x8, &1000u16.to_be_bytes(), [0; 4])).await.unwrap();
        session.await.unwrap();
    }
}
