//! Just enough HTTP/1.1 to drive `podwright serve`'s API from the benchmark: one request per
//! connection, and a watch read event by event. Blocking: the benchmark's measuring thread
//! waits on it.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a plain request may take.
const REQUEST_LIMIT: Duration = Duration::from_secs(30);

pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(&self) -> Result<Value, String> {
        serde_json::from_slice(&self.body).map_err(|e| format!("the reply is not JSON: {e}"))
    }
}

fn send(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Result<BufReader<TcpStream>, String> {
    let mut conn = TcpStream::connect_timeout(&addr, REQUEST_LIMIT).map_err(|e| format!("{addr}: {e}"))?;
    conn.set_read_timeout(Some(REQUEST_LIMIT)).map_err(|e| e.to_string())?;
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n");
    if let Some(b) = body {
        head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", b.len()));
    }
    head.push_str("\r\n");
    head.push_str(body.unwrap_or_default());
    conn.write_all(head.as_bytes()).map_err(|e| format!("{method} {path}: {e}"))?;
    Ok(BufReader::new(conn))
}

/// Reads the status line and the headers: the status, and whether the body is chunked.
fn read_head(conn: &mut BufReader<TcpStream>) -> Result<(u16, bool), String> {
    let mut line = String::new();
    conn.read_line(&mut line).map_err(|e| format!("reading the reply: {e}"))?;
    let status =
        line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or(format!("bad status line {line:?}"))?;
    let mut chunked = false;
    loop {
        line.clear();
        conn.read_line(&mut line).map_err(|e| format!("reading the reply: {e}"))?;
        let header = line.trim_end();
        if header.is_empty() {
            return Ok((status, chunked));
        }
        let lower = header.to_ascii_lowercase();
        chunked |= lower.starts_with("transfer-encoding:") && lower.contains("chunked");
    }
}

/// One chunk of a chunked body; empty at its end.
fn read_chunk(conn: &mut BufReader<TcpStream>) -> std::io::Result<Vec<u8>> {
    let mut line = String::new();
    conn.read_line(&mut line)?;
    let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or_default(), 16)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad chunk size {line:?}")))?;
    let mut chunk = vec![0; size + 2];
    conn.read_exact(&mut chunk)?;
    chunk.truncate(size);
    Ok(chunk)
}

/// One request on its own connection (`Connection: close`), with a JSON body if given.
pub fn request(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Result<Response, String> {
    let mut conn = send(addr, method, path, body)?;
    let (status, chunked) = read_head(&mut conn)?;
    let mut body = vec![];
    if chunked {
        loop {
            let chunk = read_chunk(&mut conn).map_err(|e| format!("{method} {path}: {e}"))?;
            if chunk.is_empty() {
                break;
            }
            body.extend(chunk);
        }
    } else {
        conn.read_to_end(&mut body).map_err(|e| format!("{method} {path}: {e}"))?;
    }
    Ok(Response { status, body })
}

/// A watch: `{"type": ..., "object": ...}` events, one per line of a chunked body.
pub struct Watch {
    conn: BufReader<TcpStream>,
    pending: Vec<u8>,
}

impl Watch {
    /// Opens the watch and returns once the API has answered it (it is then established).
    pub fn open(addr: SocketAddr, path: &str) -> Result<Watch, String> {
        let mut conn = send(addr, "GET", path, None)?;
        match read_head(&mut conn)? {
            (200, true) => Ok(Watch { conn, pending: vec![] }),
            (status, _) => Err(format!("watch {path}: HTTP {status}")),
        }
    }

    /// The next event, or None once `deadline` passes first.
    pub fn next(&mut self, deadline: Instant) -> Result<Option<Value>, String> {
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return serde_json::from_slice(&line).map(Some).map_err(|e| format!("a watch event is not JSON: {e}"));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.conn.get_ref().set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
            match read_chunk(&mut self.conn) {
                Ok(chunk) if chunk.is_empty() => return Err("the watch ended".into()),
                Ok(chunk) => self.pending.extend(chunk),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    return Ok(None);
                }
                Err(e) => return Err(format!("reading the watch: {e}")),
            }
        }
    }
}
