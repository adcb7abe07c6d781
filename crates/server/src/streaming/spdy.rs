//! SPDY/3.1 framing as containerd 1.6's streaming server speaks it (moby/spdystream, the same
//! code on both sides of client-go's SPDY): frames, and header blocks compressed with zlib and
//! the SPDY/3 dictionary, one zlib stream per direction for the whole session.
//!
//! Flow control is left out on purpose: spdystream parses WINDOW_UPDATE and drops it ("unhandled
//! frame type") and never holds back its own DATA, and client-go sends none either.

mod dictionary;

use super::{invalid, read_head};
use dictionary::DICTIONARY;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use std::io;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

const VERSION: u16 = 3;
const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const FLAG_FIN: u8 = 0x01;

/// RST_STREAM's CANCEL status.
pub const CANCEL: u32 = 5;
/// GOAWAY's OK status.
pub const GOAWAY_OK: u32 = 0;

/// A header block: lowercase names, values as given (several values joined by NUL).
pub type Headers = Vec<(String, String)>;

/// A frame the session acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Data {
        stream: u32,
        fin: bool,
        data: Vec<u8>,
    },
    SynStream {
        stream: u32,
        fin: bool,
        headers: Headers,
    },
    SynReply {
        stream: u32,
        fin: bool,
        headers: Headers,
    },
    RstStream {
        stream: u32,
        status: u32,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_good: u32,
        status: u32,
    },
    /// SETTINGS, HEADERS, WINDOW_UPDATE and types this client has no use for, by type number.
    Ignored {
        kind: u16,
    },
}

/// Encodes frames; holds the compressing side of the session's header zlib stream.
pub struct Encoder {
    zlib: Compress,
}

impl Default for Encoder {
    fn default() -> Self {
        let mut zlib = Compress::new(Compression::default(), true);
        zlib.set_dictionary(&DICTIONARY).expect("a fresh zlib stream takes a dictionary");
        Encoder { zlib }
    }
}

impl Encoder {
    /// Appends `frame`'s bytes to `out`.
    pub fn encode(&mut self, frame: &Frame, out: &mut Vec<u8>) -> io::Result<()> {
        match frame {
            Frame::Data { stream, fin, data } => {
                let len =
                    u32::try_from(data.len()).ok().filter(|l| *l < 1 << 24).ok_or_else(|| invalid("DATA too long"))?;
                out.extend_from_slice(&(stream & 0x7FFF_FFFF).to_be_bytes());
                out.extend_from_slice(&(u32::from(if *fin { FLAG_FIN } else { 0 }) << 24 | len).to_be_bytes());
                out.extend_from_slice(data);
            }
            Frame::SynStream { stream, fin, headers } => {
                let mut body = Vec::new();
                body.extend_from_slice(&stream.to_be_bytes());
                // No associated stream, priority 0, slot 0: what spdystream sends.
                body.extend_from_slice(&[0; 6]);
                self.compress(headers, &mut body)?;
                control(SYN_STREAM, if *fin { FLAG_FIN } else { 0 }, &body, out);
            }
            Frame::SynReply { stream, fin, headers } => {
                let mut body = stream.to_be_bytes().to_vec();
                self.compress(headers, &mut body)?;
                control(SYN_REPLY, if *fin { FLAG_FIN } else { 0 }, &body, out);
            }
            Frame::RstStream { stream, status } => control(RST_STREAM, 0, &two_words(*stream, *status), out),
            Frame::Ping { id } => control(PING, 0, &id.to_be_bytes(), out),
            Frame::GoAway { last_good, status } => control(GOAWAY, 0, &two_words(*last_good, *status), out),
            Frame::Ignored { kind } => return Err(invalid(format!("cannot encode frame type {kind}"))),
        }
        Ok(())
    }

    /// Appends `headers` as a compressed header block, flushed so that the block ends here.
    fn compress(&mut self, headers: &Headers, out: &mut Vec<u8>) -> io::Result<()> {
        let mut raw = Vec::new();
        raw.extend_from_slice(&(headers.len() as u32).to_be_bytes());
        for (name, value) in headers {
            for s in [name, value] {
                raw.extend_from_slice(&(s.len() as u32).to_be_bytes());
                raw.extend_from_slice(s.as_bytes());
            }
        }
        let start = self.zlib.total_in();
        loop {
            out.reserve(64 + raw.len());
            let done = (self.zlib.total_in() - start) as usize;
            self.zlib.compress_vec(&raw[done..], out, FlushCompress::Sync).map_err(|e| invalid(e.to_string()))?;
            // zlib has flushed everything once it stops with output space to spare.
            if (self.zlib.total_in() - start) as usize == raw.len() && out.len() < out.capacity() {
                return Ok(());
            }
        }
    }
}

/// Starts the task that encodes and writes the frames sent to the returned queue, in order and
/// whole; it shuts `w` down once every sender is gone.
pub fn spawn_writer<W: AsyncWrite + Unpin + Send + 'static>(mut w: W) -> mpsc::Sender<Frame> {
    let (frames, mut queued) = mpsc::channel::<Frame>(16);
    tokio::spawn(async move {
        let mut encoder = Encoder::default();
        let mut bytes = Vec::new();
        while let Some(frame) = queued.recv().await {
            bytes.clear();
            if let Err(e) = encoder.encode(&frame, &mut bytes) {
                tracing::debug!(%e, "encoding a SPDY frame");
                return;
            }
            if let Err(e) = w.write_all(&bytes).await {
                tracing::debug!(%e, "writing to the streaming server");
                return;
            }
        }
        let _ = w.shutdown().await;
    });
    frames
}

fn two_words(a: u32, b: u32) -> [u8; 8] {
    let mut w = [0; 8];
    w[..4].copy_from_slice(&(a & 0x7FFF_FFFF).to_be_bytes());
    w[4..].copy_from_slice(&b.to_be_bytes());
    w
}

fn control(kind: u16, flags: u8, body: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&(u32::from(flags) << 24 | body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
}

/// Decodes frames; holds the decompressing side of the session's header zlib stream.
pub struct Decoder {
    zlib: Decompress,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder { zlib: Decompress::new(true) }
    }
}

impl Decoder {
    /// The next frame from `r`; None when the connection ends between frames.
    pub async fn read<R: AsyncRead + Unpin>(&mut self, r: &mut R) -> io::Result<Option<Frame>> {
        let mut head = [0u8; 8];
        if !read_head(r, &mut head).await? {
            return Ok(None);
        }
        let flags = head[4];
        let len = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
        let mut body = vec![0u8; len];
        r.read_exact(&mut body).await?;
        let first = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let fin = flags & FLAG_FIN != 0;
        if first & 0x8000_0000 == 0 {
            return Ok(Some(Frame::Data { stream: first, fin, data: body }));
        }
        let version = (first >> 16) as u16 & 0x7FFF;
        if version != VERSION {
            return Err(invalid(format!("SPDY version {version}")));
        }
        let word = |i: usize| {
            body.get(i..i + 4)
                .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
                .ok_or_else(|| invalid("short frame"))
        };
        let frame = match first as u16 {
            SYN_STREAM => {
                let headers = self.decompress(body.get(10..).ok_or_else(|| invalid("short SYN_STREAM"))?)?;
                Frame::SynStream { stream: word(0)? & 0x7FFF_FFFF, fin, headers }
            }
            SYN_REPLY => {
                let headers = self.decompress(&body[4.min(body.len())..])?;
                Frame::SynReply { stream: word(0)? & 0x7FFF_FFFF, fin, headers }
            }
            RST_STREAM => Frame::RstStream { stream: word(0)? & 0x7FFF_FFFF, status: word(4)? },
            PING => Frame::Ping { id: word(0)? },
            GOAWAY => Frame::GoAway { last_good: word(0)? & 0x7FFF_FFFF, status: word(4)? },
            HEADERS => {
                // Unused, but its block moves the shared zlib stream on.
                self.decompress(&body[4.min(body.len())..])?;
                Frame::Ignored { kind: HEADERS }
            }
            kind => Frame::Ignored { kind },
        };
        Ok(Some(frame))
    }

    fn decompress(&mut self, block: &[u8]) -> io::Result<Headers> {
        let mut raw = Vec::with_capacity(block.len() * 4 + 64);
        let start = self.zlib.total_in();
        loop {
            let done = (self.zlib.total_in() - start) as usize;
            match self.zlib.decompress_vec(&block[done..], &mut raw, FlushDecompress::Sync) {
                Ok(Status::StreamEnd) => return Err(invalid("the header zlib stream ended")),
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.zlib.set_dictionary(&DICTIONARY).map_err(|e| invalid(e.to_string()))?;
                    continue;
                }
                Err(e) => return Err(invalid(format!("header block: {e}"))),
            }
            if (self.zlib.total_in() - start) as usize == block.len() && raw.len() < raw.capacity() {
                break;
            }
            raw.reserve(raw.capacity().max(256));
        }
        parse_block(&raw)
    }
}

/// The name-value pairs of an uncompressed header block: a count, then each name and value
/// with its 32-bit length before it.
fn parse_block(mut raw: &[u8]) -> io::Result<Headers> {
    fn take<'a>(raw: &mut &'a [u8], n: usize) -> io::Result<&'a [u8]> {
        let (taken, rest) = raw.split_at_checked(n).ok_or_else(|| invalid("short header block"))?;
        *raw = rest;
        Ok(taken)
    }
    fn length(raw: &mut &[u8]) -> io::Result<usize> {
        let w = take(raw, 4)?;
        Ok(u32::from_be_bytes([w[0], w[1], w[2], w[3]]) as usize)
    }
    fn text(raw: &mut &[u8]) -> io::Result<String> {
        let n = length(raw)?;
        Ok(String::from_utf8_lossy(take(raw, n)?).into_owned())
    }
    let count = length(&mut raw)?;
    let mut headers = Vec::new();
    for _ in 0..count {
        let name = text(&mut raw)?;
        headers.push((name, text(&mut raw)?));
    }
    Ok(headers)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Headers {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    async fn decode_all(decoder: &mut Decoder, mut bytes: &[u8]) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(f) = decoder.read(&mut bytes).await.unwrap() {
            frames.push(f);
        }
        frames
    }

    #[test]
    fn the_dictionary_is_spdy_3s() {
        assert_eq!(&DICTIONARY[..11], b"\0\0\0\x07options");
        assert!(DICTIONARY.ends_with(b"charset=utf-8charset=iso-8859-1,utf-,*,enq=0."));
        // zlib's Adler-32 of the dictionary, the DICTID a header block's zlib stream names.
        let mut zlib = Compress::new(Compression::default(), true);
        assert_eq!(zlib.set_dictionary(&DICTIONARY).unwrap(), 0xE3C6_A7C2);
    }

    #[tokio::test]
    async fn frames_round_trip_and_header_blocks_share_one_zlib_stream() {
        let frames = [
            Frame::SynStream { stream: 1, fin: false, headers: h(&[("streamtype", "error")]) },
            Frame::SynStream { stream: 3, fin: true, headers: h(&[("streamtype", "stdin"), ("port", "8080")]) },
            Frame::SynReply { stream: 1, fin: false, headers: h(&[]) },
            Frame::Data { stream: 3, fin: false, data: b"abc\n".to_vec() },
            Frame::Data { stream: 3, fin: true, data: Vec::new() },
            Frame::RstStream { stream: 5, status: CANCEL },
            Frame::Ping { id: 7 },
            Frame::GoAway { last_good: 2, status: GOAWAY_OK },
        ];
        let mut encoder = Encoder::default();
        let mut bytes = Vec::new();
        for f in &frames {
            encoder.encode(f, &mut bytes).unwrap();
        }
        assert_eq!(decode_all(&mut Decoder::default(), &bytes).await, frames);
    }

    #[test]
    fn frames_have_spdy_3s_layout() {
        let mut out = Vec::new();
        let mut encoder = Encoder::default();
        encoder.encode(&Frame::Data { stream: 5, fin: true, data: b"hi".to_vec() }, &mut out).unwrap();
        assert_eq!(out, [0, 0, 0, 5, 1, 0, 0, 2, b'h', b'i']);
        out.clear();
        encoder.encode(&Frame::Ping { id: 1 }, &mut out).unwrap();
        assert_eq!(out, [0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1]);
        out.clear();
        encoder.encode(&Frame::GoAway { last_good: 0, status: GOAWAY_OK }, &mut out).unwrap();
        assert_eq!(out, [0x80, 3, 0, 7, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.clear();
        encoder
            .encode(&Frame::SynStream { stream: 1, fin: false, headers: h(&[("streamtype", "error")]) }, &mut out)
            .unwrap();
        assert_eq!(out[..4], [0x80, 3, 0, 1]);
        assert_eq!(u32::from_be_bytes([0, out[5], out[6], out[7]]) as usize, out.len() - 8);
        assert_eq!(out[8..18], [0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        // zlib header, then FDICT's dictionary id: the block needs the SPDY dictionary.
        assert_eq!(out[18..24], [0x78, 0xBB, 0xE3, 0xC6, 0xA7, 0xC2]);
    }

    #[tokio::test]
    async fn reads_header_blocks_compressed_by_c_zlib() {
        // Two SYN_REPLY frames whose blocks C zlib compressed in one stream (Python's
        // `zlib.compressobj(level=9, zdict=DICTIONARY)`, each block ended by Z_SYNC_FLUSH, as
        // Go's compress/zlib `Flush` in spdystream ends them): no headers, then one header.
        let bytes = [
            0x80, 0x03, 0x00, 0x02, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x01, 0x78, 0xf9, 0xe3, 0xc6, 0xa7, 0xc2,
            0x02, 0xa6, 0x23, 0x06, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x80, 0x03, 0x00, 0x02, 0x00, 0x00, 0x00, 0x34,
            0x00, 0x00, 0x00, 0x03, 0x02, 0x02, 0x46, 0x20, 0x96, 0xac, 0xd0, 0x2d, 0x2e, 0x29, 0x4a, 0x4d, 0xcc, 0xd5,
            0x05, 0x66, 0xb9, 0x92, 0xfc, 0xe4, 0xfc, 0x1c, 0x5d, 0x44, 0x2a, 0x15, 0x2c, 0x33, 0xd1, 0x03, 0x9a, 0x05,
            0x2c, 0xfd, 0x72, 0xf4, 0xb2, 0x2d, 0x8a, 0xf5, 0x32, 0xf3, 0x01, 0x00, 0x00, 0x00, 0xff, 0xff,
        ];
        let frames = decode_all(&mut Decoder::default(), &bytes).await;
        let expected = [
            Frame::SynReply { stream: 1, fin: false, headers: h(&[]) },
            Frame::SynReply {
                stream: 3,
                fin: false,
                headers: h(&[("x-stream-protocol-version", "v4.channel.k8s.io")]),
            },
        ];
        assert_eq!(frames, expected);
    }

    #[tokio::test]
    async fn unknown_control_frames_are_skipped() {
        // WINDOW_UPDATE (type 9) for stream 1, delta 65536, then a PING.
        let bytes = [0x80, 3, 0, 9, 0, 0, 0, 8, 0, 0, 0, 1, 0, 1, 0, 0, 0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 2];
        let frames = decode_all(&mut Decoder::default(), &bytes).await;
        assert_eq!(frames, [Frame::Ignored { kind: 9 }, Frame::Ping { id: 2 }]);
    }
}
