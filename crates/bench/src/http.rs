//! `podwright serve`'s API driven from the benchmark on hyper's HTTP/1.1 client: one request per
//! connection, and a watch read event by event. Blocking: the benchmark's measuring thread (a
//! blocking thread of the runtime) waits on it.
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, CONNECTION, CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::runtime::Handle;

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

/// Sends the request on a connection of its own (`Connection: close`), with a JSON body if
/// given; the connection is driven by a task of its own until the response's body is read.
async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<hyper::Response<Incoming>, String> {
    let what = |e: &dyn std::fmt::Display| format!("{method} {path}: {e}");
    let stream = match tokio::time::timeout(REQUEST_LIMIT, TcpStream::connect(addr)).await {
        Ok(s) => s.map_err(|e| format!("{addr}: {e}"))?,
        Err(_) => return Err(format!("{addr}: no connection within {REQUEST_LIMIT:?}")),
    };
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| what(&e))?;
    tokio::spawn(connection);
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(HOST, addr.to_string())
        .header(ACCEPT, "application/json")
        .header(CONNECTION, "close");
    if body.is_some() {
        request = request.header(CONTENT_TYPE, "application/json");
    }
    let request = request.body(Full::new(Bytes::from(body.unwrap_or_default().to_owned()))).map_err(|e| what(&e))?;
    sender.send_request(request).await.map_err(|e| what(&e))
}

/// One request on its own connection, with a JSON body if given, from a task.
pub async fn exchange(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Result<Response, String> {
    let exchange = async {
        let response = send(addr, method, path, body).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.map_err(|e| format!("{method} {path}: {e}"))?;
        Ok(Response { status, body: body.to_bytes().to_vec() })
    };
    tokio::time::timeout(REQUEST_LIMIT, exchange)
        .await
        .unwrap_or_else(|_| Err(format!("{method} {path}: no answer within {REQUEST_LIMIT:?}")))
}

/// One request on its own connection, with a JSON body if given, from the measuring thread.
pub fn request(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Result<Response, String> {
    Handle::current().block_on(exchange(addr, method, path, body))
}

/// A watch: `{"type": ..., "object": ...}` events, one per line of its body.
pub struct Watch {
    body: Incoming,
    pending: Vec<u8>,
}

impl Watch {
    /// Opens the watch and returns once the API has answered it (it is then established).
    pub fn open(addr: SocketAddr, path: &str) -> Result<Watch, String> {
        let response = Handle::current().block_on(async {
            tokio::time::timeout(REQUEST_LIMIT, send(addr, "GET", path, None))
                .await
                .unwrap_or_else(|_| Err(format!("watch {path}: no answer within {REQUEST_LIMIT:?}")))
        })?;
        match response.status().as_u16() {
            200 => Ok(Watch { body: response.into_body(), pending: vec![] }),
            status => Err(format!("watch {path}: HTTP {status}")),
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
            let frame = Handle::current().block_on(async { tokio::time::timeout(left, self.body.frame()).await });
            match frame {
                Err(_) => return Ok(None),
                Ok(None) => return Err("the watch ended".into()),
                Ok(Some(Err(e))) => return Err(format!("reading the watch: {e}")),
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.pending.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}
