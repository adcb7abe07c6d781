//! The local API under clients that ask too much, as the API server limits them: more requests
//! at once than allowed (429 with `Retry-After`), a body over 3 MiB (413), a request that takes
//! too long (504), and a watch whose client stops reading (dropped, its memory with it). Over
//! real connections on the loopback, through `transport::serve`.
// Timeouts of a real server, over real connections, in real time.
#![allow(clippy::disallowed_methods)]

use podwright_runtime::{Clock, FakeRuntime};
use podwright_server::limits::Limits;
use podwright_server::{ApiServer, ServerConfig, transport};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{Instant, timeout};

const LIMIT: usize = 3 * 1024 * 1024;

async fn serve(limits: Limits) -> (ApiServer, SocketAddr) {
    let clock = Clock::new();
    let config = ServerConfig { node_name: "n".into(), root: "/nonexistent".into(), host_ip: None };
    let api = ApiServer::new(config, clock, FakeRuntime::new(clock)).0;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(transport::serve(listener, limits.apply(api.router()), limits));
    (api, addr)
}

fn limits(reading: usize, writing: usize, request_timeout: Duration) -> Limits {
    Limits { max_requests_inflight: reading, max_mutating_requests_inflight: writing, request_timeout }
}

/// A response as it came: status, headers (lowercase names) and body (de-chunked).
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
}

/// Reads one response from `conn`: its head, then a body of its Content-Length or chunked.
async fn read_reply(conn: &mut TcpStream) -> Reply {
    let mut raw = Vec::new();
    let head_end = loop {
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let mut buf = [0; 4096];
        let n = conn.read(&mut buf).await.unwrap();
        assert!(n > 0, "the connection closed before a response: {}", String::from_utf8_lossy(&raw));
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8(raw[..head_end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(": ")).map(|(n, v)| (n.to_ascii_lowercase(), v.to_string())).collect();
    let mut rest = raw[head_end..].to_vec();
    let length = headers.iter().find(|(n, _)| n == "content-length").map(|(_, v)| v.parse::<usize>().unwrap());
    let body = match length {
        Some(length) => {
            while rest.len() < length {
                let mut buf = [0; 4096];
                let n = conn.read(&mut buf).await.unwrap();
                assert!(n > 0);
                rest.extend_from_slice(&buf[..n]);
            }
            rest[..length].to_vec()
        }
        None => {
            while !rest.ends_with(b"0\r\n\r\n") {
                let mut buf = [0; 4096];
                let n = conn.read(&mut buf).await.unwrap();
                assert!(n > 0);
                rest.extend_from_slice(&buf[..n]);
            }
            dechunk(&rest)
        }
    };
    Reply { status, headers, body }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..line_end]).unwrap(), 16).unwrap();
        raw = &raw[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

/// One whole request on a connection of its own.
async fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Reply {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(body).await.unwrap();
    timeout(Duration::from_secs(10), read_reply(&mut conn)).await.expect("no response within 10 s")
}

/// A request whose body is announced as `length` bytes but only begun: its handler waits for
/// the rest, holding its place among the requests in flight.
async fn unfinished(addr: SocketAddr, path: &str, length: usize) -> TcpStream {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n{{"
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn
}

fn config_map(name: &str, bytes: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
        "data": {"k": "x".repeat(bytes)}}))
    .unwrap()
}

const CONFIG_MAPS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn writes_beyond_the_limit_are_told_to_retry_and_reads_and_streams_are_not_counted_with_them() {
    let (_api, addr) = serve(limits(400, 1, Duration::from_secs(30))).await;
    // The one writing seat, held by a body still on its way.
    let body = config_map("slow", 10);
    let mut slow = unfinished(addr, CONFIG_MAPS, body.len()).await;
    // Its handler has started once the seat is taken: wait until a write is refused.
    let deadline = Instant::now() + Duration::from_secs(5);
    let refused = loop {
        let reply = request(addr, "POST", CONFIG_MAPS, &config_map("other", 10)).await;
        if reply.status == 429 || Instant::now() > deadline {
            break reply;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(refused.status, 429, "{}", String::from_utf8_lossy(&refused.body));
    assert_eq!(refused.header("retry-after"), Some("1"));
    let status = refused.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["message"], "Too many requests, please try again later.");
    assert_eq!(status["code"], 429);
    assert_eq!(status["details"]["retryAfterSeconds"], 1);
    // Deletes and patches are writes too; lists are not.
    assert_eq!(request(addr, "DELETE", &format!("{CONFIG_MAPS}/x"), b"").await.status, 429);
    assert_eq!(request(addr, "GET", CONFIG_MAPS, b"").await.status, 200);
    // exec and attach are long-running: not counted (a plain POST is no upgrade, so the
    // handler's 400, not 429).
    let exec = request(addr, "POST", "/api/v1/namespaces/default/pods/web/exec?command=true", b"").await;
    assert_eq!(exec.status, 400, "{}", String::from_utf8_lossy(&exec.body));
    // The rest of the body: the seat is free again.
    slow.write_all(&body[1..]).await.unwrap();
    assert_eq!(read_reply(&mut slow).await.status, 201);
    assert_eq!(request(addr, "POST", CONFIG_MAPS, &config_map("third", 10)).await.status, 201);
}

#[tokio::test]
async fn watches_take_no_reading_seat() {
    let (_api, addr) = serve(limits(1, 1, Duration::from_secs(30))).await;
    let mut watches = Vec::new();
    for _ in 0..3 {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        conn.write_all(format!("GET {CONFIG_MAPS}?watch=true HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
        let mut head = [0; 12];
        conn.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        watches.push(conn);
    }
    assert_eq!(request(addr, "GET", CONFIG_MAPS, b"").await.status, 200);
}

#[tokio::test]
async fn a_body_over_3_mib_is_refused_with_413() {
    let (api, addr) = serve(Limits::default()).await;
    // Announced too large: refused before any of it is read.
    let mut conn = unfinished(addr, CONFIG_MAPS, LIMIT + 1).await;
    let reply = timeout(Duration::from_secs(5), read_reply(&mut conn)).await.expect("not refused at once");
    assert_eq!(reply.status, 413);
    let status = reply.json();
    assert_eq!(status["reason"], "RequestEntityTooLarge");
    assert_eq!(status["message"], format!("Request entity too large: limit is {LIMIT}"));
    assert_eq!(status["code"], 413);

    // Chunked, without a length: refused once the bytes pass the limit.
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let head = format!("POST {CONFIG_MAPS} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    conn.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; 64 * 1024];
    let (mut read, mut write) = conn.into_split();
    let writer = tokio::spawn(async move {
        for _ in 0..=LIMIT / chunk.len() {
            let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
            if write.write_all(&framed).await.is_err() {
                break;
            }
        }
        write
    });
    let mut raw = Vec::new();
    timeout(Duration::from_secs(10), read.read_to_end(&mut raw)).await.expect("no reply").unwrap();
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 413 "), "{text}");
    assert!(text.contains(&format!("\"message\":\"Request entity too large: limit is {LIMIT}\"")), "{text}");
    drop(writer.await.unwrap());

    // 3 MiB exactly is read and decoded: a ConfigMap that large is the ConfigMap's own error.
    let mut exact = config_map("big", LIMIT);
    let over = exact.len() - LIMIT;
    exact = config_map("big", LIMIT - over);
    assert_eq!(exact.len(), LIMIT);
    let reply = request(addr, "POST", CONFIG_MAPS, &exact).await;
    assert_eq!(reply.status, 422, "{}", String::from_utf8_lossy(&reply.body));
    assert!(api.store().list(podwright_server::resources::Resource::ConfigMaps, Some("default")).0.is_empty());
}

#[tokio::test]
async fn a_request_that_takes_too_long_is_answered_504() {
    let (_api, addr) = serve(limits(400, 200, Duration::from_secs(1))).await;
    let started = Instant::now();
    let mut conn = unfinished(addr, CONFIG_MAPS, 100).await;
    let reply = timeout(Duration::from_secs(5), read_reply(&mut conn)).await.expect("no 504 within 5 s");
    assert_eq!(reply.status, 504);
    assert!(started.elapsed() >= Duration::from_secs(1));
    let status = reply.json();
    assert_eq!(status["reason"], "Timeout");
    assert_eq!(status["message"], "Timeout: request did not complete within the allotted timeout");
    assert_eq!(status["code"], 504);

    // A request may ask for less than the server's timeout, not more.
    let (_api, addr) = serve(limits(400, 200, Duration::from_secs(30))).await;
    let started = Instant::now();
    let mut conn = unfinished(addr, &format!("{CONFIG_MAPS}?timeout=300ms"), 100).await;
    let reply = timeout(Duration::from_secs(5), read_reply(&mut conn)).await.expect("no 504 within 5 s");
    assert_eq!(reply.status, 504);
    assert!(started.elapsed() < Duration::from_secs(5));
    let bad = request(addr, "GET", &format!("{CONFIG_MAPS}?timeout=soon"), b"").await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["message"], "invalid timeout specified in the request URL - time: invalid duration \"soon\"");
}

#[tokio::test]
async fn a_watch_whose_client_stops_reading_is_dropped_and_others_go_on() {
    let stall = Duration::from_secs(2);
    let (_api, addr) = serve(limits(400, 200, stall)).await;
    assert_eq!(request(addr, "POST", CONFIG_MAPS, &config_map("big", 10)).await.status, 201);
    let watch = format!("GET {CONFIG_MAPS}?watch=true&resourceVersion=0 HTTP/1.1\r\nHost: x\r\n\r\n");
    // A client that reads the response's head and nothing after, with a small receive buffer.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut idle = socket.connect(addr).await.unwrap();
    idle.write_all(watch.as_bytes()).await.unwrap();
    let mut head = [0; 12];
    idle.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    // A client that reads everything.
    let mut reader = TcpStream::connect(addr).await.unwrap();
    reader.write_all(watch.as_bytes()).await.unwrap();
    let reading = tokio::spawn(async move {
        let mut seen = Vec::new();
        let mut buf = vec![0; 1 << 16];
        let needle = b"\"resourceVersion\"";
        loop {
            let n = reader.read(&mut buf).await.unwrap();
            assert!(n > 0, "the reading client's watch ended");
            seen.extend_from_slice(&buf[..n]);
            // The last update's value ends the test.
            if seen.windows(6).any(|w| w == b"last!\"") {
                return seen.windows(needle.len()).filter(|w| w == needle).count();
            }
        }
    });
    // 150 updates of 100 kB each: 15 MB of events, far more than the idle client's buffers and
    // the server's hold for one watch.
    let updates = 150;
    for i in 0..updates {
        let value = if i == updates - 1 { "last!".to_string() } else { format!("{i}{}", "x".repeat(100_000)) };
        let patch = serde_json::to_vec(&json!({"data": {"k": value}})).unwrap();
        let mut conn = TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "PATCH {CONFIG_MAPS}/big HTTP/1.1\r\nHost: x\r\nContent-Type: application/merge-patch+json\r\nContent-Length: {}\r\n\r\n",
            patch.len()
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(&patch).await.unwrap();
        assert_eq!(read_reply(&mut conn).await.status, 200);
    }
    let objects = timeout(Duration::from_secs(20), reading).await.expect("the reading client fell behind").unwrap();
    assert!(objects > updates, "the reading client saw {objects} objects");
    // The idle client's connection is closed once its writes have waited the request timeout:
    // what it then reads is what was already in the socket, with no end of stream after it.
    tokio::time::sleep(stall + Duration::from_secs(1)).await;
    let mut rest = Vec::new();
    let read = timeout(Duration::from_secs(10), idle.read_to_end(&mut rest)).await.expect("the idle watch stayed open");
    // A reset is a close too.
    if let Err(e) = read {
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset);
    }
    assert!(!rest.ends_with(b"0\r\n\r\n"), "the idle watch ended as if complete");
    assert!(rest.len() < 10_000_000, "the idle client got {} bytes", rest.len());
}
