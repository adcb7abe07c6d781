//! A minimal HTTP/1.1 client for `podwright serve`'s API on the node: `GET` over plain TCP, one
//! request per connection, the whole body read (by `Content-Length`, chunked, or until the
//! server closes).

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the daemon listens: `http://HOST[:PORT][/PREFIX]`.
#[derive(Debug, PartialEq)]
pub struct Server {
    /// As in a URL: an IPv6 address keeps its brackets.
    host: String,
    port: u16,
    /// A path the API sits under, without the trailing slash (often empty).
    prefix: String,
}

impl Server {
    pub fn parse(url: &str) -> Result<Server, String> {
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some(("https", _)) => return Err(format!("{url}: https is not supported here; give an http:// URL")),
            _ => return Err(format!("{url}: not an http:// URL")),
        };
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let (host, port) = match authority.rsplit_once(':') {
            // A colon inside brackets is part of an IPv6 address, not a port.
            Some((host, port)) if !port.contains(']') => {
                (host, port.parse().map_err(|_| format!("{url}: {port:?} is not a port number"))?)
            }
            _ => (authority, 80),
        };
        if host.is_empty() {
            return Err(format!("{url}: no host"));
        }
        Ok(Server { host: host.to_string(), port, prefix: prefix.to_string() })
    }
}

/// A response: its status code and body.
#[derive(Debug, PartialEq)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// `GET path` (below the server's prefix; `path` starts with `/`).
pub async fn get(server: &Server, path: &str, accept: &str) -> Result<Response, String> {
    let address = (server.host.trim_start_matches('[').trim_end_matches(']'), server.port);
    let mut stream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(format!("no connection within {}s", CONNECT_TIMEOUT.as_secs())),
    };
    let request = format!(
        "GET {}{path} HTTP/1.1\r\nHost: {}:{}\r\nAccept: {accept}\r\nUser-Agent: podwright/{}\r\nConnection: close\r\n\r\n",
        server.prefix,
        server.host,
        server.port,
        env!("CARGO_PKG_VERSION")
    );
    let exchange = async {
        stream.write_all(request.as_bytes()).await?;
        let mut raw = vec![];
        stream.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = match tokio::time::timeout(RESPONSE_TIMEOUT, exchange).await {
        Ok(r) => r.map_err(|e| e.to_string())?,
        Err(_) => return Err(format!("no answer within {}s", RESPONSE_TIMEOUT.as_secs())),
    };
    parse_response(&raw)
}

/// A path segment with everything but unreserved characters percent-encoded.
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or("the answer is not HTTP (no end of headers)")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "the answer's headers are not text")?;
    let rest = &raw[end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = match status_line.split(' ').collect::<Vec<_>>()[..] {
        [version, code, ..] if version.starts_with("HTTP/1.") => code.parse::<u16>().ok(),
        _ => None,
    }
    .ok_or_else(|| format!("the answer is not HTTP/1.x: {status_line:?}"))?;
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse::<usize>().map_err(|_| format!("bad Content-Length {value:?}"))?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().split(',').any(|v| v.trim() == "chunked");
        }
    }
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(n) = length {
        rest.get(..n).ok_or_else(|| format!("the answer ended after {} of {n} bytes", rest.len()))?.to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Response { status, body })
}

/// The body of a chunked transfer: size lines in hex, each chunk followed by CRLF, a zero size
/// at the end.
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = vec![];
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n").ok_or("a chunk size line is cut off")?;
        let line = std::str::from_utf8(&rest[..eol]).map_err(|_| "a chunk size is not text")?;
        let hex = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(hex, 16).map_err(|_| format!("bad chunk size {hex:?}"))?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(body);
        }
        let chunk = rest.get(..size).ok_or("a chunk is cut off")?;
        body.extend_from_slice(chunk);
        rest = rest.get(size + 2..).ok_or("a chunk is cut off")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls_give_host_port_and_prefix() {
        let s = |host: &str, port, prefix: &str| Server { host: host.into(), port, prefix: prefix.into() };
        assert_eq!(Server::parse("http://127.0.0.1:6443"), Ok(s("127.0.0.1", 6443, "")));
        assert_eq!(Server::parse("http://node.local/api/"), Ok(s("node.local", 80, "/api")));
        assert_eq!(Server::parse("http://[::1]:8080/x"), Ok(s("[::1]", 8080, "/x")));
        assert_eq!(Server::parse("http://[::1]"), Ok(s("[::1]", 80, "")));
        for bad in ["https://127.0.0.1:6443", "127.0.0.1:6443", "http://:80", "http://host:port"] {
            assert!(Server::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("my-pod.v1_x~"), "my-pod.v1_x~");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn bodies_are_read_by_length_by_chunks_or_to_the_end() {
        let by_length = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\ncontent-length: 5\r\n\r\nhello";
        assert_eq!(parse_response(by_length), Ok(Response { status: 200, body: b"hello".to_vec() }));
        let chunked =
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nnot \r\n5;x=y\r\nfound\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked), Ok(Response { status: 404, body: b"not found".to_vec() }));
        let to_close = b"HTTP/1.0 200 OK\r\n\r\nall of it";
        assert_eq!(parse_response(to_close), Ok(Response { status: 200, body: b"all of it".to_vec() }));
    }

    #[test]
    fn a_cut_or_foreign_answer_is_an_error() {
        for raw in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno end",
        ] {
            assert!(parse_response(raw).is_err(), "{}", String::from_utf8_lossy(raw));
        }
    }
}
