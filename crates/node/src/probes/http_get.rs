//! The `httpGet` action of probes and lifecycle hooks: one HTTP/1.1 GET over a fresh TCP
//! connection, as the kubelet's prober makes it (its User-Agent and Accept headers, the
//! container's named ports, its redirect rule).

use k8s_openapi::api::core::v1::{Container, HTTPGetAction};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The kubelet reads at most this much of a response body.
const MAX_BODY: usize = 10 * 1024;
const MAX_HEAD: usize = 64 * 1024;
/// Go's http client follows at most 10 redirects.
const MAX_REDIRECTS: usize = 10;
pub const USER_AGENT: &str = "kube-probe/1.37";
/// The kubelet names its lifecycle hooks' requests apart from its probes' (`kube-<fragment>/`).
pub const HOOK_USER_AGENT: &str = "kube-lifecycle/1.37";

/// A port of the container by number, by numeric string, or by the name of one of its ports.
pub fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    let n = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => match s.parse::<i32>() {
            Ok(n) => n,
            Err(_) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(s.as_str()))
                .map(|p| p.container_port)
                .ok_or_else(|| format!("couldn't find port: {s} in container {}", container.name))?,
        },
    };
    u16::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| format!("invalid port number: {n}"))
}

/// `host:port`, with an IPv6 address in brackets.
pub fn authority(host: &str, port: u16) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// Where a GET goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub host: String,
    pub port: u16,
    pub path: String,
    /// `(name, value)`; a `Host` header replaces the request's host header.
    pub headers: Vec<(String, String)>,
    pub https: bool,
}

impl Request {
    /// The request an action describes; `pod_ip` is the host when the action names none.
    pub fn new(action: &HTTPGetAction, container: &Container, pod_ip: &str) -> Result<Self, String> {
        let host = action.host.clone().filter(|h| !h.is_empty()).unwrap_or_else(|| pod_ip.to_string());
        let port = resolve_port(&action.port, container)?;
        let path = action.path.clone().unwrap_or_default();
        // Go's URL formatting puts a slash between host and a relative path.
        let path = if path.starts_with('/') { path } else { format!("/{path}") };
        let headers = action.http_headers.iter().flatten().map(|h| (h.name.clone(), h.value.clone())).collect();
        let https = action.scheme.as_deref() == Some("HTTPS");
        Ok(Request { host, port, path, headers, https })
    }

    /// The request a lifecycle hook's action describes: a probe's, under the hooks' User-Agent
    /// unless the action gives one.
    pub fn for_hook(action: &HTTPGetAction, container: &Container, pod_ip: &str) -> Result<Self, String> {
        let mut req = Self::new(action, container, pod_ip)?;
        if !req.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("user-agent")) {
            req.headers.push(("User-Agent".into(), HOOK_USER_AGENT.into()));
        }
        Ok(req)
    }

    pub fn url(&self) -> String {
        format!("{}://{}{}", if self.https { "https" } else { "http" }, self.authority(), self.path)
    }

    fn authority(&self) -> String {
        authority(&self.host, self.port)
    }

    fn bytes(&self) -> Vec<u8> {
        let has = |n: &str| self.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
        let mut head = format!("GET {} HTTP/1.1\r\n", self.path);
        if !has("host") {
            head.push_str(&format!("Host: {}\r\n", self.authority()));
        }
        if !has("user-agent") {
            head.push_str(&format!("User-Agent: {USER_AGENT}\r\n"));
        }
        if !has("accept") {
            head.push_str("Accept: */*\r\n");
        }
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("Connection: close\r\n\r\n");
        head.into_bytes()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// The first 10 KiB of the body.
    pub body: String,
    /// A redirect to another host, which is not followed: the kubelet calls it a success with a
    /// warning.
    pub redirected_away: Option<String>,
}

/// Sends the GET and follows same-host redirects; `Err` is the transport error in Go's words.
pub async fn get(req: &Request, timeout: Duration) -> Result<Response, String> {
    let url = req.url();
    match tokio::time::timeout(timeout, follow(req.clone())).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(format!("Get \"{url}\": {e}")),
        Err(_) => {
            Err(format!("Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"))
        }
    }
}

async fn follow(mut req: Request) -> Result<Response, String> {
    for _ in 0..=MAX_REDIRECTS {
        let (status, location, body) = once(&req).await?;
        let Some(location) = location.filter(|_| (300..400).contains(&status)) else {
            return Ok(Response { status, body, redirected_away: None });
        };
        match redirect_target(&req, &location) {
            Some(next) => req = next,
            None => return Ok(Response { status, body, redirected_away: Some(location) }),
        }
    }
    Err("stopped after 10 redirects".into())
}

/// The request a same-host `Location` leads to; `None` when it leads elsewhere.
fn redirect_target(req: &Request, location: &str) -> Option<Request> {
    if location.starts_with('/') {
        return Some(Request { path: location.to_string(), ..req.clone() });
    }
    let (https, rest) = match location.strip_prefix("https://") {
        Some(rest) => (true, rest),
        None => (false, location.strip_prefix("http://")?),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let default_port = if https { 443 } else { 80 };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (h, p.parse().ok()?),
        _ => (authority, default_port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host == req.host).then(|| Request {
        port,
        path: if path.is_empty() { "/".into() } else { path.to_string() },
        https,
        ..req.clone()
    })
}

async fn once(req: &Request) -> Result<(u16, Option<String>, String), String> {
    let tcp = TcpStream::connect((req.host.as_str(), req.port)).await.map_err(|e| dial_error(&req.authority(), &e))?;
    if req.https {
        let tls = crate::probes::tls::connector().connect(crate::probes::tls::server_name(&req.host)?, tcp).await;
        exchange(req, tls.map_err(|e| crate::probes::tls::handshake_error(&e))?).await
    } else {
        exchange(req, tcp).await
    }
}

async fn exchange(
    req: &Request,
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
) -> Result<(u16, Option<String>, String), String> {
    stream.write_all(&req.bytes()).await.map_err(|e| e.to_string())?;
    let mut buf = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err("net/http: server response headers exceeded 65536 bytes".into());
        }
        // Reading into the heap buffer keeps no 4 KiB array in the probe's future.
        if stream.read_buf(&mut buf).await.map_err(|e| e.to_string())? == 0 {
            return Err("EOF".into());
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("net/http: malformed HTTP response {status_line:?}"))?;
    let location = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("location"))
        .map(|(_, v)| v.trim().to_string());
    let mut body = buf.split_off(head_end + 4);
    while body.len() < MAX_BODY {
        match stream.read_buf(&mut body).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    body.truncate(MAX_BODY);
    Ok((status, location, String::from_utf8_lossy(&body).into_owned()))
}

/// Go's dial error text: `dial tcp 10.0.0.5:8080: connect: connection refused`.
pub fn dial_error(authority: &str, e: &std::io::Error) -> String {
    let what = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
        std::io::ErrorKind::TimedOut => "i/o timeout".to_string(),
        _ => format!("connect: {e}"),
    };
    format!("dial tcp {authority}: {what}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    fn container(ports: serde_json::Value) -> Container {
        serde_json::from_value(serde_json::json!({"name": "c", "ports": ports})).unwrap()
    }

    #[test]
    fn ports_resolve_by_number_and_name() {
        let c = container(serde_json::json!([{"name": "http", "containerPort": 8080}]));
        assert_eq!(resolve_port(&IntOrString::Int(80), &c), Ok(80));
        assert_eq!(resolve_port(&IntOrString::String("81".into()), &c), Ok(81));
        assert_eq!(resolve_port(&IntOrString::String("http".into()), &c), Ok(8080));
        assert_eq!(
            resolve_port(&IntOrString::String("nope".into()), &c),
            Err("couldn't find port: nope in container c".into())
        );
    }

    /// A server answering each connection with the next canned response.
    async fn serve(responses: Vec<&'static str>) -> (u16, tokio::task::JoinHandle<Vec<String>>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut seen = vec![];
            for r in responses {
                let (mut s, _) = l.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                s.write_all(r.as_bytes()).await.unwrap();
            }
            seen
        });
        (port, task)
    }

    fn req(port: u16, path: &str) -> Request {
        Request {
            host: "127.0.0.1".into(),
            port,
            path: path.into(),
            headers: vec![("X-Probe".into(), "1".into())],
            https: false,
        }
    }

    #[tokio::test]
    async fn sends_the_kubelets_headers_and_reads_the_status() {
        let (port, server) = serve(vec!["HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\ndown"]).await;
        let r = get(&req(port, "/healthz"), Duration::from_secs(2)).await.unwrap();
        assert_eq!((r.status, r.body.as_str()), (503, "down"));
        let seen = server.await.unwrap();
        assert!(seen[0].starts_with("GET /healthz HTTP/1.1\r\n"), "{}", seen[0]);
        assert!(seen[0].contains("User-Agent: kube-probe/1.37\r\n") && seen[0].contains("X-Probe: 1\r\n"));
    }

    #[tokio::test]
    async fn a_hook_names_itself_kube_lifecycle() {
        let (port, server) = serve(vec!["HTTP/1.1 200 OK\r\n\r\n"]).await;
        let action = HTTPGetAction { port: IntOrString::Int(i32::from(port)), ..Default::default() };
        let hook = Request::for_hook(&action, &Container::default(), "127.0.0.1").unwrap();
        get(&hook, Duration::from_secs(2)).await.unwrap();
        let seen = server.await.unwrap();
        assert!(seen[0].contains("User-Agent: kube-lifecycle/1.37\r\n"), "{}", seen[0]);
        assert!(!seen[0].contains("kube-probe"), "{}", seen[0]);
    }

    #[tokio::test]
    async fn follows_redirects_on_the_same_host_only() {
        let (port, server) = serve(vec![
            "HTTP/1.1 302 Found\r\nLocation: /next\r\n\r\n",
            "HTTP/1.1 301 Moved\r\nLocation: http://elsewhere.example/\r\n\r\n",
        ])
        .await;
        let r = get(&req(port, "/"), Duration::from_secs(2)).await.unwrap();
        assert_eq!(r.status, 301);
        assert_eq!(r.redirected_away.as_deref(), Some("http://elsewhere.example/"));
        assert!(server.await.unwrap()[1].starts_with("GET /next "));
    }

    #[tokio::test]
    async fn refused_connections_read_like_go() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let e = get(&req(port, "/"), Duration::from_secs(2)).await.unwrap_err();
        assert_eq!(
            e,
            format!("Get \"http://127.0.0.1:{port}/\": dial tcp 127.0.0.1:{port}: connect: connection refused")
        );
    }

    #[tokio::test]
    async fn https_answered_in_plain_http_reads_like_go() {
        let (port, _server) = serve(vec!["HTTP/1.1 400 Bad Request\r\n\r\n"]).await;
        let e = get(&Request { https: true, ..req(port, "/") }, Duration::from_secs(2)).await.unwrap_err();
        assert_eq!(e, format!("Get \"https://127.0.0.1:{port}/\": http: server gave HTTP response to HTTPS client"));
    }

    #[tokio::test]
    async fn https_does_not_check_the_certificate() {
        use tokio_rustls::rustls::ServerConfig;
        use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let cert = CertificateDer::from(include_bytes!("../../tests/fixtures/probe-test-cert.der").to_vec());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            include_bytes!("../../tests/fixtures/probe-test-key.der").to_vec(),
        ));
        let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (tcp, _) = l.accept().await.unwrap();
            let mut s = acceptor.accept(tcp).await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.unwrap();
            s.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await.unwrap();
            s.shutdown().await.unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        let r = get(&Request { https: true, ..req(port, "/secure") }, Duration::from_secs(5)).await.unwrap();
        assert_eq!(r.status, 204);
        assert!(server.await.unwrap().starts_with("GET /secure HTTP/1.1\r\n"));
    }
}
