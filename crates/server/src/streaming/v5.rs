//! exec and attach over WebSocket, subprotocol `v5.channel.k8s.io` (kubectl 1.30+), served on
//! a SPDY `v4.channel.k8s.io` session with the runtime, as the API server's
//! `StreamTranslatorHandler` serves it on the kubelet. containerd 1.6 speaks v4 at most, and v4
//! over WebSocket cannot say that stdin has ended; SPDY can (FIN on the stdin stream), which is
//! what lets `kubectl cp` into a pod and `exec -i` with piped input finish.
//!
//! The channels (apimachinery `wsstream`): each binary message starts with its channel, 0 stdin,
//! 1 stdout, 2 stderr, 3 error (one `Status`, then the close), 4 resize (`TerminalSize` JSON);
//! v5 adds 255, whose message `[255, n]` closes channel n.

use super::spdy::{self, Decoder, Frame};
use super::websocket::{self, Message, Outbox, Reader};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::sync::mpsc;

/// The subprotocol served, and the one asked of the runtime.
pub const PROTOCOL: &str = "v5.channel.k8s.io";
pub const UPSTREAM_PROTOCOL: &str = "v4.channel.k8s.io";

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// The largest DATA frame sent upstream; kubectl's stdin messages are smaller.
const MAX_DATA: usize = 64 * 1024;

/// How long the client may take, once the status is out, to read the rest and close (the API
/// server's `finishTimeout`): closing at once would let the kernel drop output still queued.
const FINISH_LIMIT: Duration = Duration::from_secs(15 * 60);

/// What the session carries: the options the runtime was given for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streams {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// The SPDY stream ids of a session, in the order client-go's v4 opens them (`v2.go` and
/// `v3.go` `createStreams`): error, stdin, stdout, stderr, then resize with a TTY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ids {
    error: u32,
    stdin: Option<u32>,
    stdout: Option<u32>,
    stderr: Option<u32>,
    resize: Option<u32>,
}

impl Ids {
    /// The ids, and the SYN_STREAM frames that open them.
    fn open(s: Streams) -> (Ids, Vec<Frame>) {
        let mut frames = Vec::new();
        let mut next = |wanted: bool, kind: &str| {
            wanted.then(|| {
                let stream = 2 * frames.len() as u32 + 1;
                let headers = vec![("streamtype".to_string(), kind.to_string())];
                frames.push(Frame::SynStream { stream, fin: false, headers });
                stream
            })
        };
        let error = next(true, "error").unwrap_or(1);
        let stdin = next(s.stdin, "stdin");
        let stdout = next(s.stdout, "stdout");
        let stderr = next(s.stderr, "stderr");
        let resize = next(s.tty, "resize");
        (Ids { error, stdin, stdout, stderr, resize }, frames)
    }

    /// The stream a client channel writes to.
    fn input(&self, channel: u8) -> Option<u32> {
        match channel {
            STDIN => self.stdin,
            RESIZE => self.resize,
            _ => None,
        }
    }

    /// The client channel a stream's output goes to.
    fn output(&self, stream: u32) -> Option<u8> {
        if Some(stream) == self.stdout {
            Some(STDOUT)
        } else if Some(stream) == self.stderr {
            Some(STDERR)
        } else {
            None
        }
    }
}

/// Serves one exec or attach between the upgraded `client` (WebSocket, v5) and `upstream`
/// (SPDY, v4), until the runtime has reported the end and the client has closed, or until
/// either side goes away.
pub async fn run<C, U>(client: C, upstream: U, streams: Streams)
where
    C: AsyncRead + AsyncWrite + Send + 'static,
    U: AsyncRead + AsyncWrite + Send + 'static,
{
    let (client_r, client_w) = tokio::io::split(client);
    let (upstream_r, upstream_w) = tokio::io::split(upstream);
    let outbox = Outbox::spawn(client_w);
    // The client waits for a first message, on the lowest channel it reads.
    let ready = if streams.stdout {
        STDOUT
    } else if streams.stderr {
        STDERR
    } else {
        ERROR
    };
    outbox.binary(&[ready]).await;

    let (ids, opening) = Ids::open(streams);
    let to_upstream = spdy::spawn_writer(upstream_w);
    for frame in opening {
        let _ = to_upstream.send(frame).await;
    }
    let mut from_client = tokio::spawn(client_to_upstream(
        Reader::new(BufReader::new(client_r)),
        outbox.clone(),
        to_upstream.clone(),
        ids,
    ));
    let status = tokio::select! {
        status = upstream_to_client(upstream_r, &outbox, &to_upstream, ids) => status,
        _ = &mut from_client => {
            tracing::debug!("the exec or attach client went away");
            let _ = to_upstream.send(Frame::GoAway { last_good: 0, status: spdy::GOAWAY_OK }).await;
            return;
        }
    };
    outbox.binary(&[&[ERROR][..], &status].concat()).await;
    outbox.close(websocket::NORMAL_CLOSURE).await;
    let _ = to_upstream.send(Frame::GoAway { last_good: 0, status: spdy::GOAWAY_OK }).await;
    drop(to_upstream);
    if tokio::time::timeout(FINISH_LIMIT, &mut from_client).await.is_err() {
        from_client.abort();
    }
}

/// The client's messages, as SPDY frames on the streams they belong to, until it closes.
async fn client_to_upstream<R: AsyncRead + Unpin>(
    mut messages: Reader<R>,
    outbox: Outbox,
    to_upstream: mpsc::Sender<Frame>,
    ids: Ids,
) {
    let mut closed = Vec::new();
    loop {
        let message = match messages.next().await {
            Ok(Some(m)) => m,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(%e, "v5 stream: reading the client");
                outbox.close(websocket::PROTOCOL_ERROR).await;
                return;
            }
        };
        let frames = match message {
            Message::Binary(m) => match m.split_first() {
                Some((&CLOSE, [channel, ..])) => match ids.input(*channel) {
                    Some(stream) if !closed.contains(&stream) => {
                        closed.push(stream);
                        vec![Frame::Data { stream, fin: true, data: Vec::new() }]
                    }
                    _ => Vec::new(),
                },
                Some((&channel, data)) => match ids.input(channel) {
                    Some(stream) if !closed.contains(&stream) => {
                        data.chunks(MAX_DATA).map(|d| Frame::Data { stream, fin: false, data: d.to_vec() }).collect()
                    }
                    _ => Vec::new(),
                },
                None => Vec::new(),
            },
            Message::Ping(payload) => {
                outbox.pong(&payload).await;
                Vec::new()
            }
            Message::Pong => Vec::new(),
            Message::Text(_) => {
                outbox.close(websocket::UNSUPPORTED_DATA).await;
                return;
            }
            Message::Close(_) => {
                outbox.close(websocket::NORMAL_CLOSURE).await;
                return;
            }
        };
        for frame in frames {
            // After the runtime's end the frames have nowhere to go; the client's close ends this.
            let _ = to_upstream.send(frame).await;
        }
    }
}

/// The runtime's output to the client, until stdout, stderr and the error stream have ended
/// (client-go's v4 waits for the same); returns the `Status` for the error channel.
async fn upstream_to_client<R: AsyncRead + Unpin>(
    upstream: R,
    outbox: &Outbox,
    to_upstream: &mpsc::Sender<Frame>,
    ids: Ids,
) -> Vec<u8> {
    let mut upstream = BufReader::new(upstream);
    let mut decoder = Decoder::default();
    let mut open: Vec<u32> = [Some(ids.error), ids.stdout, ids.stderr].into_iter().flatten().collect();
    let mut status = Vec::new();
    let mut broken = None;
    while !open.is_empty() {
        let frame = match decoder.read(&mut upstream).await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(e) => {
                broken = Some(e.to_string());
                break;
            }
        };
        match frame {
            Frame::Data { stream, fin, data } => {
                if stream == ids.error {
                    status.extend_from_slice(&data);
                } else if let Some(channel) = ids.output(stream)
                    && !data.is_empty()
                {
                    outbox.binary(&[&[channel][..], &data].concat()).await;
                }
                if fin {
                    open.retain(|s| *s != stream);
                }
            }
            Frame::SynReply { stream, fin: true, .. } | Frame::RstStream { stream, .. } => {
                open.retain(|s| *s != stream);
            }
            Frame::Ping { id } => {
                let _ = to_upstream.send(Frame::Ping { id }).await;
            }
            Frame::GoAway { .. } => break,
            Frame::SynStream { stream, .. } => {
                // The streaming server opens no streams of its own.
                let _ = to_upstream.send(Frame::RstStream { stream, status: spdy::CANCEL }).await;
            }
            Frame::SynReply { .. } | Frame::Ignored { .. } => {}
        }
    }
    if !status.is_empty() {
        // v4's error stream carries the same `Status` v5's error channel does.
        return status;
    }
    let status = match broken {
        // client-go reads an error stream that ended empty as success.
        None => serde_json::json!({"metadata": {}, "status": "Success"}),
        Some(e) => serde_json::json!({
            "metadata": {},
            "status": "Failure",
            "message": format!("error reading from the container runtime's stream: {e}"),
            "reason": "InternalError",
            "code": 500,
        }),
    };
    status.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::streaming::spdy::Encoder;
    use crate::streaming::websocket::tests::{client_binary, client_frame};
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    fn streams(stdin: bool, tty: bool) -> Streams {
        Streams { stdin, stdout: true, stderr: !tty, tty }
    }

    #[test]
    fn streams_open_in_client_gos_order() {
        let (ids, frames) = Ids::open(streams(true, true));
        assert_eq!(ids, Ids { error: 1, stdin: Some(3), stdout: Some(5), stderr: None, resize: Some(7) });
        let kinds: Vec<_> = frames
            .iter()
            .map(|f| match f {
                Frame::SynStream { stream, headers, .. } => (*stream, headers[0].0.as_str(), headers[0].1.as_str()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (1, "streamtype", "error"),
                (3, "streamtype", "stdin"),
                (5, "streamtype", "stdout"),
                (7, "streamtype", "resize")
            ]
        );
        let (ids, _) = Ids::open(Streams { stdin: false, stdout: false, stderr: true, tty: false });
        assert_eq!(ids, Ids { error: 1, stdin: None, stdout: None, stderr: Some(3), resize: None });
    }

    /// The runtime's side, as far as a test plays it: decodes what the translator sends.
    struct Runtime {
        io: DuplexStream,
        decoder: Decoder,
        encoder: Encoder,
    }

    impl Runtime {
        async fn next(&mut self) -> Frame {
            self.decoder.read(&mut self.io).await.unwrap().expect("a frame")
        }

        async fn send(&mut self, frames: &[Frame]) {
            let mut bytes = Vec::new();
            for f in frames {
                self.encoder.encode(f, &mut bytes).unwrap();
            }
            self.io.write_all(&bytes).await.unwrap();
        }
    }

    /// Reads one unmasked server frame: opcode and payload.
    async fn server_message(kubectl: &mut DuplexStream) -> (u8, Vec<u8>) {
        let mut head = [0u8; 2];
        kubectl.read_exact(&mut head).await.unwrap();
        let len = match head[1] {
            126 => kubectl.read_u16().await.unwrap() as usize,
            n => n as usize,
        };
        let mut payload = vec![0u8; len];
        kubectl.read_exact(&mut payload).await.unwrap();
        (head[0] & 0x0F, payload)
    }

    fn data(stream: u32, fin: bool, data: &[u8]) -> Frame {
        Frame::Data { stream, fin, data: data.to_vec() }
    }

    #[tokio::test]
    async fn stdin_and_its_end_reach_the_runtime_and_the_status_ends_the_session() {
        let (client, mut kubectl) = tokio::io::duplex(1 << 20);
        let (upstream, io) = tokio::io::duplex(1 << 20);
        let session = tokio::spawn(run(client, upstream, streams(true, false)));
        let mut runtime = Runtime { io, decoder: Decoder::default(), encoder: Encoder::default() };

        assert_eq!(server_message(&mut kubectl).await, (0x2, vec![STDOUT]));
        let opened: Vec<u32> = [runtime.next().await, runtime.next().await, runtime.next().await, runtime.next().await]
            .iter()
            .map(|f| match f {
                Frame::SynStream { stream, .. } => *stream,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(opened, [1, 3, 5, 7]);
        let replies: Vec<Frame> =
            opened.iter().map(|&stream| Frame::SynReply { stream, fin: false, headers: Vec::new() }).collect();
        runtime.send(&replies).await;

        // stdin, a resize without a TTY (dropped), then v5's close of stdin.
        let mut sent = client_binary(b"\x00abc\n");
        sent.extend(client_binary(b"\x04{\"Width\":90,\"Height\":30}"));
        sent.extend(client_frame(true, 0x9, b"hb", [3, 3, 3, 3]));
        sent.extend(client_binary(&[CLOSE, STDIN]));
        kubectl.write_all(&sent).await.unwrap();
        assert_eq!(runtime.next().await, data(3, false, b"abc\n"));
        assert_eq!(runtime.next().await, data(3, true, b""));
        assert_eq!(server_message(&mut kubectl).await, (0xA, b"hb".to_vec()));

        let status = br#"{"metadata":{},"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"7"}]}}"#;
        runtime
            .send(&[
                data(5, false, b"abc\n"),
                data(7, false, b"err\n"),
                data(7, true, b""),
                data(5, true, b""),
                data(1, false, status),
                Frame::RstStream { stream: 1, status: spdy::CANCEL },
            ])
            .await;
        assert_eq!(server_message(&mut kubectl).await, (0x2, b"\x01abc\n".to_vec()));
        assert_eq!(server_message(&mut kubectl).await, (0x2, b"\x02err\n".to_vec()));
        assert_eq!(server_message(&mut kubectl).await, (0x2, [&[ERROR][..], status].concat()));
        assert_eq!(server_message(&mut kubectl).await, (0x8, 1000u16.to_be_bytes().to_vec()));
        assert_eq!(runtime.next().await, Frame::GoAway { last_good: 0, status: spdy::GOAWAY_OK });

        kubectl.write_all(&client_frame(true, 0x8, &1000u16.to_be_bytes(), [7; 4])).await.unwrap();
        session.await.unwrap();
    }

    #[tokio::test]
    async fn resizes_go_to_the_resize_stream_and_an_empty_error_stream_is_success() {
        let (client, mut kubectl) = tokio::io::duplex(1 << 20);
        let (upstream, io) = tokio::io::duplex(1 << 20);
        let session = tokio::spawn(run(client, upstream, streams(true, true)));
        let mut runtime = Runtime { io, decoder: Decoder::default(), encoder: Encoder::default() };
        server_message(&mut kubectl).await;
        for _ in 0..4 {
            runtime.next().await;
        }
        kubectl.write_all(&client_binary(b"\x04{\"Width\":90,\"Height\":30}")).await.unwrap();
        assert_eq!(runtime.next().await, data(7, false, br#"{"Width":90,"Height":30}"#));

        runtime.send(&[data(5, true, b"bye\r\n"), data(1, true, b"")]).await;
        assert_eq!(server_message(&mut kubectl).await, (0x2, b"\x01bye\r\n".to_vec()));
        let (_, status) = server_message(&mut kubectl).await;
        assert_eq!(status, [&[ERROR][..], br#"{"metadata":{},"status":"Success"}"#].concat());
        drop(kubectl);
        session.await.unwrap();
    }

    #[tokio::test]
    async fn a_client_that_goes_away_ends_the_runtimes_session() {
        let (client, kubectl) = tokio::io::duplex(1 << 20);
        let (upstream, io) = tokio::io::duplex(1 << 20);
        let session = tokio::spawn(run(client, upstream, streams(false, false)));
        let mut runtime = Runtime { io, decoder: Decoder::default(), encoder: Encoder::default() };
        for _ in 0..3 {
            runtime.next().await;
        }
        drop(kubectl);
        assert_eq!(runtime.next().await, Frame::GoAway { last_good: 0, status: spdy::GOAWAY_OK });
        session.await.unwrap();
        assert_eq!(runtime.decoder.read(&mut runtime.io).await.unwrap(), None);
    }
}
