//! The server side of RFC 6455 as kubectl's WebSocket streams need it: the handshake's accept
//! key, messages read from the client (masked frames, fragments, control frames between
//! fragments), and frames written back (unmasked) by one writer task fed through an [`Outbox`].

use super::{invalid, read_head};
use base64::Engine;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

const CONTINUATION: u8 = 0x0;
const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;
const PONG: u8 = 0xA;

/// Close codes (RFC 6455 section 7.4.1).
pub const NORMAL_CLOSURE: u16 = 1000;
pub const PROTOCOL_ERROR: u16 = 1002;
pub const UNSUPPORTED_DATA: u16 = 1003;

/// The largest message taken from a client: room for the largest SPDY frame (16 MiB of payload
/// and its header) in one message; kubectl's stdin and tunnel messages are 32 KiB at most.
const MAX_MESSAGE: usize = (16 << 20) + 64;

/// The `Sec-WebSocket-Accept` answer to a client's `Sec-WebSocket-Key`.
pub fn accept_key(key: &str) -> String {
    const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    let mut sha1 = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    sha1.update(key.trim().as_bytes());
    sha1.update(GUID.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(sha1.finish())
}

/// A whole message from the client.
#[derive(Debug, PartialEq, Eq)]
pub enum Message {
    Binary(Vec<u8>),
    Text(Vec<u8>),
    Ping(Vec<u8>),
    Pong,
    /// The client's close, with its status code when it gave one.
    Close(Option<u16>),
}

/// Reads the client's frames and puts fragmented messages back together.
pub struct Reader<R> {
    inner: R,
    /// The opcode and payload of a message whose last fragment has not come yet.
    partial: Option<(u8, Vec<u8>)>,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    pub fn new(inner: R) -> Self {
        Reader { inner, partial: None }
    }

    /// The next message; None when the connection ends between messages.
    pub async fn next(&mut self) -> io::Result<Option<Message>> {
        loop {
            let Some((fin, opcode, payload)) = self.frame().await? else {
                return match self.partial {
                    None => Ok(None),
                    Some(_) => Err(io::ErrorKind::UnexpectedEof.into()),
                };
            };
            match opcode {
                CLOSE => {
                    let code = payload.get(..2).map(|c| u16::from_be_bytes([c[0], c[1]]));
                    return Ok(Some(Message::Close(code)));
                }
                PING => return Ok(Some(Message::Ping(payload))),
                PONG => return Ok(Some(Message::Pong)),
                TEXT | BINARY if self.partial.is_some() => {
                    return Err(invalid("a new message began inside a fragmented one"));
                }
                TEXT | BINARY => self.partial = Some((opcode, payload)),
                CONTINUATION => {
                    let (_, so_far) = self.partial.as_mut().ok_or_else(|| invalid("a continuation with no message"))?;
                    if so_far.len() + payload.len() > MAX_MESSAGE {
                        return Err(invalid("message too large"));
                    }
                    so_far.extend_from_slice(&payload);
                }
                other => return Err(invalid(format!("unknown opcode {other:#x}"))),
            }
            if fin && let Some((opcode, payload)) = self.partial.take() {
                return Ok(Some(if opcode == TEXT { Message::Text(payload) } else { Message::Binary(payload) }));
            }
        }
    }

    /// One frame, unmasked: FIN, opcode and payload; None at the end of the connection.
    async fn frame(&mut self) -> io::Result<Option<(bool, u8, Vec<u8>)>> {
        let mut head = [0u8; 2];
        if !read_head(&mut self.inner, &mut head).await? {
            return Ok(None);
        }
        let (fin, rsv, opcode) = (head[0] & 0x80 != 0, head[0] & 0x70, head[0] & 0x0F);
        if rsv != 0 {
            return Err(invalid("reserved bits set without a negotiated extension"));
        }
        if head[1] & 0x80 == 0 {
            return Err(invalid("an unmasked frame from the client"));
        }
        let len = match head[1] & 0x7F {
            126 => u64::from(self.inner.read_u16().await?),
            127 => self.inner.read_u64().await?,
            n => u64::from(n),
        };
        let control = opcode & 0x8 != 0;
        if control && (!fin || len > 125) {
            return Err(invalid("a fragmented or oversized control frame"));
        }
        let len = usize::try_from(len).ok().filter(|l| *l <= MAX_MESSAGE).ok_or_else(|| invalid("frame too large"))?;
        let mut mask = [0u8; 4];
        self.inner.read_exact(&mut mask).await?;
        let mut payload = vec![0u8; len];
        self.inner.read_exact(&mut payload).await?;
        apply_mask(&mut payload, mask);
        Ok(Some((fin, opcode, payload)))
    }
}

/// XORs `data` with the masking key (the operation is its own inverse).
fn apply_mask(data: &mut [u8], mask: [u8; 4]) {
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= mask[i % 4];
    }
}

/// An unmasked frame, as a server sends it, in one piece (FIN set).
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 10);
    out.push(0x80 | opcode);
    match payload.len() {
        n @ 0..=125 => out.push(n as u8),
        n @ 126..=0xFFFF => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

/// The sending side of one connection: frames queued here are written in order by the task
/// [`Outbox::spawn`] starts, whole, even when the queueing side is cancelled. Nothing is sent
/// after the close frame.
#[derive(Clone)]
pub struct Outbox {
    frames: mpsc::Sender<Vec<u8>>,
    closed: Arc<AtomicBool>,
}

impl Outbox {
    /// Starts the writer on `w`; it shuts `w` down once the close frame is out, or when every
    /// `Outbox` is gone.
    pub fn spawn<W: AsyncWrite + Unpin + Send + 'static>(mut w: W) -> Outbox {
        let (frames, mut queued) = mpsc::channel::<Vec<u8>>(16);
        tokio::spawn(async move {
            while let Some(frame) = queued.recv().await {
                let last = frame.first() == Some(&(0x80 | CLOSE));
                if let Err(e) = w.write_all(&frame).await {
                    tracing::debug!(%e, "writing to the WebSocket client");
                    return;
                }
                if last {
                    break;
                }
            }
            let _ = w.shutdown().await;
        });
        Outbox { frames, closed: Arc::new(AtomicBool::new(false)) }
    }

    /// Queues a binary message; false once the connection is closing or gone.
    pub async fn binary(&self, payload: &[u8]) -> bool {
        self.send(frame(BINARY, payload)).await
    }

    /// Answers a ping.
    pub async fn pong(&self, payload: &[u8]) -> bool {
        self.send(frame(PONG, payload)).await
    }

    /// Queues the close frame, unless one was already queued.
    pub async fn close(&self, code: u16) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            let _ = self.frames.send(frame(CLOSE, &code.to_be_bytes())).await;
        }
    }

    async fn send(&self, frame: Vec<u8>) -> bool {
        !self.closed.load(Ordering::SeqCst) && self.frames.send(frame).await.is_ok()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A frame as a client sends it: masked, FIN as given.
    pub(crate) fn client_frame(fin: bool, opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
        let mut out = frame(opcode, payload);
        if !fin {
            out[0] &= 0x7F;
        }
        let header = out.len() - payload.len();
        out[1] |= 0x80;
        let mut masked = payload.to_vec();
        apply_mask(&mut masked, mask);
        out.truncate(header);
        out.extend_from_slice(&mask);
        out.extend_from_slice(&masked);
        out
    }

    /// A whole binary message from a client.
    pub(crate) fn client_binary(payload: &[u8]) -> Vec<u8> {
        client_frame(true, BINARY, payload, [0x37, 0xFA, 0x21, 0x3D])
    }

    async fn read_all(bytes: &[u8]) -> Vec<io::Result<Option<Message>>> {
        let mut reader = Reader::new(bytes);
        let mut out = Vec::new();
        loop {
            let m = reader.next().await;
            let end = !matches!(m, Ok(Some(_)));
            out.push(m);
            if end {
                return out;
            }
        }
    }

    #[test]
    fn the_accept_key_is_rfc_6455s_example() {
        // RFC 6455 section 1.3.
        assert_eq!(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[tokio::test]
    async fn masked_frames_are_unmasked() {
        // RFC 6455 section 5.7: a masked "Hello".
        let bytes = [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58];
        let mut reader = Reader::new(&bytes[..]);
        assert_eq!(reader.next().await.unwrap(), Some(Message::Text(b"Hello".to_vec())));
        assert_eq!(reader.next().await.unwrap(), None);
    }

    #[tokio::test]
    async fn unmasked_client_frames_are_refused() {
        let bytes = [0x82, 0x01, 0x00];
        assert!(Reader::new(&bytes[..]).next().await.is_err());
    }

    #[tokio::test]
    async fn fragments_are_joined_around_control_frames() {
        let mask = [1, 2, 3, 4];
        let mut bytes = client_frame(false, BINARY, b"\x00abc", mask);
        bytes.extend(client_frame(true, PING, b"are you there", mask));
        bytes.extend(client_frame(false, CONTINUATION, b"def", mask));
        bytes.extend(client_frame(true, CONTINUATION, b"ghi", mask));
        bytes.extend(client_frame(true, CLOSE, &1000u16.to_be_bytes(), mask));
        let got: Vec<_> = read_all(&bytes).await.into_iter().map(|m| m.unwrap()).collect();
        assert_eq!(
            got,
            [
                Some(Message::Ping(b"are you there".to_vec())),
                Some(Message::Binary(b"\x00abcdefghi".to_vec())),
                Some(Message::Close(Some(1000))),
                None
            ]
        );
    }

    #[tokio::test]
    async fn broken_fragment_sequences_are_refused() {
        let mask = [9, 8, 7, 6];
        let stray = client_frame(true, CONTINUATION, b"x", mask);
        assert!(read_all(&stray).await[0].is_err());
        let mut interleaved = client_frame(false, TEXT, b"a", mask);
        interleaved.extend(client_frame(true, BINARY, b"b", mask));
        assert!(read_all(&interleaved).await[0].is_err());
        let fragmented_ping = client_frame(false, PING, b"p", mask);
        assert!(read_all(&fragmented_ping).await[0].is_err());
        let cut = client_frame(false, BINARY, b"half", mask);
        assert_eq!(read_all(&cut).await[0].as_ref().unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[tokio::test]
    async fn lengths_take_7_16_and_64_bits() {
        for len in [0usize, 125, 126, 65535, 65536, 200_000] {
            let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let bytes = client_frame(true, BINARY, &payload, [0xA, 0xB, 0xC, 0xD]);
            let header = match len {
                0..=125 => 2,
                126..=65535 => 4,
                _ => 10,
            };
            assert_eq!(bytes.len(), header + 4 + len);
            let mut reader = Reader::new(&bytes[..]);
            assert_eq!(reader.next().await.unwrap(), Some(Message::Binary(payload.clone())), "{len}");
            // The server's own frames use the same length forms, unmasked.
            let ours = frame(BINARY, &payload);
            assert_eq!((ours.len(), &ours[header..]), (header + len, &payload[..]));
            assert_eq!(ours[1] & 0x80, 0);
        }
    }

    #[tokio::test]
    async fn the_outbox_stops_after_the_close_frame() {
        let (ours, mut theirs) = tokio::io::duplex(1 << 16);
        let outbox = Outbox::spawn(ours);
        assert!(outbox.binary(b"\x01hi").await);
        assert!(outbox.pong(b"p").await);
        outbox.close(NORMAL_CLOSURE).await;
        outbox.close(PROTOCOL_ERROR).await;
        assert!(!outbox.binary(b"late").await);
        let mut got = Vec::new();
        theirs.read_to_end(&mut got).await.unwrap();
        let mut expected = frame(BINARY, b"\x01hi");
        expected.extend(frame(PONG, b"p"));
        expected.extend([0x88, 0x02, 0x03, 0xE8]);
        assert_eq!(got, expected);
    }
}
