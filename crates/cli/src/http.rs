//! `GET`s of `podwright serve`'s API on the node, on hyper's HTTP/1.1 client: plain TCP, one
//! request per connection, the whole body read.

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use std::time::Duration;
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
    let stream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(format!("no connection within {}s", CONNECT_TIMEOUT.as_secs())),
    };
    let request = hyper::Request::get(format!("{}{path}", server.prefix))
        .header(hyper::header::HOST, format!("{}:{}", server.host, server.port))
        .header(hyper::header::ACCEPT, accept)
        .header(hyper::header::USER_AGENT, concat!("podwright/", env!("CARGO_PKG_VERSION")))
        .header(hyper::header::CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let exchange = async {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        // The connection is driven beside the request, and ends with it.
        let (response, _) = tokio::join!(
            async {
                let response = sender.send_request(request).await?;
                let status = response.status().as_u16();
                let body = response.into_body().collect().await?.to_bytes().to_vec();
                Ok::<_, hyper::Error>(Response { status, body })
            },
            connection
        );
        response
    };
    match tokio::time::timeout(RESPONSE_TIMEOUT, exchange).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {}s", RESPONSE_TIMEOUT.as_secs())),
    }
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

    /// Serves `answer` (raw bytes) to one connection, after reading its request.
    async fn answering(answer: &'static [u8]) -> Server {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf).await;
            let _ = conn.write_all(answer).await;
        });
        Server::parse(&format!("http://127.0.0.1:{port}")).unwrap()
    }

    #[tokio::test]
    async fn bodies_are_read_by_length_by_chunks_or_to_the_end() {
        let by_length = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\ncontent-length: 5\r\n\r\nhello";
        let got = get(&answering(by_length).await, "/", "text/html").await;
        assert_eq!(got, Ok(Response { status: 200, body: b"hello".to_vec() }));
        let chunked =
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nnot \r\n5;x=y\r\nfound\r\n0\r\n\r\n";
        let got = get(&answering(chunked).await, "/", "text/html").await;
        assert_eq!(got, Ok(Response { status: 404, body: b"not found".to_vec() }));
        let to_close = b"HTTP/1.0 200 OK\r\n\r\nall of it";
        let got = get(&answering(to_close).await, "/", "text/html").await;
        assert_eq!(got, Ok(Response { status: 200, body: b"all of it".to_vec() }));
    }

    #[tokio::test]
    async fn a_cut_or_foreign_answer_is_an_error() {
        for raw in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno end",
        ] {
            let got = get(&answering(raw).await, "/", "text/html").await;
            assert!(got.is_err(), "{}: {got:?}", String::from_utf8_lossy(raw));
        }
    }
}
