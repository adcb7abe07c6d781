//! `pods/{name}/exec`, `attach` and `portforward`: the API server's and the kubelet's parts in
//! one. The request is checked against the pod as the API server does (`streamLocation` in
//! `pkg/registry/core/pod/strategy.go`); the container or sandbox is found and the runtime asked
//! for a streaming URL as the kubelet does (`GetExec`, `GetAttach`, `GetPortForward`); then the
//! client is served on that URL in one of three ways, by the protocol it asks for:
//!
//! - SPDY, and the WebSocket subprotocols containerd 1.6 speaks itself (`v4.channel.k8s.io`,
//!   `channel.k8s.io` and their base64 forms): the client's upgrade is replayed to the URL and
//!   the two connections are spliced byte for byte, as apimachinery's `UpgradeAwareHandler` does.
//! - WebSocket `v5.channel.k8s.io` (exec and attach from kubectl 1.30 on), which containerd 1.6
//!   does not speak: translated to a SPDY v4 session with the runtime ([`v5`]), as the API
//!   server's `StreamTranslatorHandler` does.
//! - WebSocket `SPDY/3.1+portforward.k8s.io` (port-forward from kubectl 1.31 on): the SPDY
//!   session inside the WebSocket messages is carried to a SPDY upgrade of the URL ([`tunnel`]),
//!   as the API server's `TunnelingHandler` does.
//!
//! A WebSocket offer with none of these is refused before any runtime call; kubectl would then
//! retry over SPDY. Nothing containerd would refuse is ever sent to it: its refusal of a
//! WebSocket upgrade leaks two goroutines there per attempt.
//!
//! Two servers take these requests, over the same [`serve`]: the local API ([`proxy`], the pod
//! from its store) and the kubelet port of a cluster node ([`kubelet_stream`], the kubelet's
//! paths and query as the API server sends them, and its plain-text refusals).

mod spdy;
mod tunnel;
mod v5;
mod websocket;

use crate::errors::{ApiError, ApiResult, KubeletError};
use crate::host::PodHost;
use crate::logs::{container_spec, container_status, pick_container};
use crate::request::truthy;
use crate::resources::Resource;
use crate::server::ApiServer;
use axum::body::Body;
use axum::extract::Query;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use podwright_runtime::cri_api::{AttachRequest, ExecRequest, PodSandboxState};
use serde_json::Value;

/// The subresource asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Exec,
    Attach,
    PortForward,
}

impl Kind {
    fn parse(sub: &str) -> ApiResult<Kind> {
        match sub {
            "exec" => Ok(Kind::Exec),
            "attach" => Ok(Kind::Attach),
            "portforward" => Ok(Kind::PortForward),
            _ => Err(ApiError::no_such_path()),
        }
    }

    /// The WebSocket subprotocols containerd 1.6's streaming server accepts for this kind
    /// (`remotecommand/websocket.go`, `portforward/websocket.go`).
    fn runtime_websocket_protocols(self) -> &'static [&'static str] {
        match self {
            Kind::Exec | Kind::Attach => {
                &["channel.k8s.io", "base64.channel.k8s.io", "v4.channel.k8s.io", "v4.base64.channel.k8s.io"]
            }
            Kind::PortForward => &["v4.channel.k8s.io", "v4.base64.channel.k8s.io"],
        }
    }

    /// The subprotocol podwright serves itself for this kind.
    fn own_websocket_protocol(self) -> &'static str {
        match self {
            Kind::Exec | Kind::Attach => v5::PROTOCOL,
            Kind::PortForward => tunnel::PROTOCOL,
        }
    }

    /// How a WebSocket offer is served: by the first offered subprotocol served at all, as
    /// apimachinery's `wsstream` handshake picks; the runtime's own default when none is offered.
    fn websocket_service(self, offered: &[String]) -> Option<Service> {
        if offered.is_empty() {
            return Some(Service::Splice);
        }
        offered.iter().find_map(|p| {
            if p == self.own_websocket_protocol() {
                Some(if self == Kind::PortForward { Service::Tunnel } else { Service::V5 })
            } else {
                self.runtime_websocket_protocols().contains(&p.as_str()).then_some(Service::Splice)
            }
        })
    }
}

/// How an upgrade is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Service {
    /// Replayed to the runtime and spliced byte for byte.
    Splice,
    /// WebSocket `v5.channel.k8s.io`, translated to SPDY v4.
    V5,
    /// WebSocket `SPDY/3.1+portforward.k8s.io`, unwrapped to SPDY.
    Tunnel,
}

/// `PodExecOptions`, `PodAttachOptions` and `PodPortForwardOptions` from the query.
#[derive(Debug, Default, PartialEq, Eq)]
struct StreamOptions {
    command: Vec<String>,
    container: Option<String>,
    stdin: bool,
    stdout: bool,
    stderr: bool,
    tty: bool,
    ports: Vec<i32>,
}

/// Which server's query a stream request comes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// The API server's `PodExecOptions` and the like: `container`, `stdin`, `stdout`,
    /// `stderr`, `tty`, `ports`.
    Api,
    /// What the API server sends the kubelet (`streamParams`): `input`, `output`, `error`,
    /// `tty`, `port`; the container is in the path.
    Kubelet,
}

impl StreamOptions {
    fn parse(uri: &Uri, dialect: Dialect) -> ApiResult<StreamOptions> {
        let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))?;
        let (stdin, stdout, stderr, ports) = match dialect {
            Dialect::Api => ("stdin", "stdout", "stderr", "ports"),
            Dialect::Kubelet => ("input", "output", "error", "port"),
        };
        let mut o = StreamOptions::default();
        for (k, v) in pairs {
            let k = k.as_str();
            if k == "command" {
                o.command.push(v);
            } else if k == "container" && dialect == Dialect::Api {
                o.container = Some(v).filter(|c| !c.is_empty());
            } else if k == stdin {
                o.stdin = truthy(&v);
            } else if k == stdout {
                o.stdout = truthy(&v);
            } else if k == stderr {
                o.stderr = truthy(&v);
            } else if k == "tty" {
                o.tty = truthy(&v);
            } else if k == ports {
                for p in v.split(',') {
                    let port = p.trim().parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                        ApiError::bad_request(format!("{ports}: Invalid value: {p:?}: must be between 1 and 65535"))
                    })?;
                    o.ports.push(i32::from(port));
                }
            }
        }
        Ok(o)
    }

    /// The kubelet's `remotecommandserver.NewOptions`: a TTY merges stderr into stdout, and a
    /// stream with nothing to carry is refused.
    fn streams(&mut self) -> Result<(), KubeletError> {
        if self.tty {
            self.stderr = false;
        }
        if !self.stdin && !self.stdout && !self.stderr {
            return Err(KubeletError::new(
                StatusCode::BAD_REQUEST,
                "you must specify at least 1 of stdin, stdout, stderr",
            ));
        }
        Ok(())
    }

    /// What attach gives the runtime: the container's own TTY, which cannot change after its
    /// start, and no stderr beside it (the kubelet's `GetAttach`).
    fn attach_to(&mut self, tty: bool) {
        self.tty = tty;
        self.stderr &= !tty;
    }
}

/// The upgrade a request asks for.
#[derive(Debug, PartialEq, Eq)]
enum Upgrade {
    /// `Upgrade: websocket`, with the subprotocols offered in the client's order.
    WebSocket(Vec<String>),
    /// Anything else, SPDY/3.1 in practice: passed through as it is.
    Other,
}

impl Upgrade {
    fn of(headers: &HeaderMap) -> Option<Upgrade> {
        let connection_upgrade = headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
        let upgrade = headers.get(header::UPGRADE).and_then(|v| v.to_str().ok())?;
        if !connection_upgrade {
            return None;
        }
        if !upgrade.trim().eq_ignore_ascii_case("websocket") {
            return Some(Upgrade::Other);
        }
        let offered = headers
            .get_all(header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        Some(Upgrade::WebSocket(offered))
    }
}

/// The kubelet's pod "full name", which its messages quote.
fn full_name(ns: &str, name: &str) -> String {
    format!("{name}_{ns}")
}

/// The runtime's id of the running container `name`, from `containerID` (`containerd://<id>`).
fn running_container_id(pod: &Value, name: &str) -> Option<String> {
    let status = container_status(pod, name)?;
    status.pointer("/state/running")?;
    let id = status.get("containerID")?.as_str()?;
    let id = id.split_once("://").map_or(id, |(_, id)| id);
    (!id.is_empty()).then(|| id.to_string())
}

/// The container's spec `tty`, which decides attach's TTY (it cannot change after the start).
fn spec_tty(pod: &Value, name: &str) -> bool {
    container_spec(pod, name).and_then(|c| c.get("tty")?.as_bool()).unwrap_or(false)
}

/// `GET|POST /api/v1/namespaces/{ns}/pods/{name}/{exec|attach|portforward}`.
pub async fn proxy(s: &ApiServer, ns: &str, name: &str, sub: &str, req: axum::extract::Request) -> ApiResult<Response> {
    let kind = Kind::parse(sub)?;
    let options = StreamOptions::parse(req.uri(), Dialect::Api)?;
    let Some(upgrade) = Upgrade::of(req.headers()) else {
        return Err(ApiError::bad_request("Upgrade request required"));
    };
    let pod = s.store().get(Resource::Pods, ns, name)?;
    let container = match kind {
        Kind::Exec | Kind::Attach => Some(pick_container(&pod, options.container.as_deref(), name)?),
        Kind::PortForward => None,
    };
    let target = Target { ns, name, pod: &pod, container: container.as_deref() };
    serve(s, target, kind, options, upgrade, req).await
}

/// What the kubelet port's `/exec`, `/attach` and `/portForward` name: the pod, with its UID
/// when the path has one, and for exec and attach the container (none for port-forward).
pub(crate) struct KubeletStream<'a> {
    pub kind: Kind,
    pub ns: &'a str,
    pub name: &'a str,
    pub uid: Option<&'a str>,
    pub container: Option<&'a str>,
}

/// The kubelet's `getExec`, `getAttach` and `getPortForward`: the query's options, the pod by
/// name (its UID, when given, must match for port-forward), then the stream as for the API.
pub(crate) async fn kubelet_stream(
    host: &dyn PodHost,
    stream: KubeletStream<'_>,
    req: axum::extract::Request,
) -> Result<Response, KubeletError> {
    let kind = stream.kind;
    let mut options = StreamOptions::parse(req.uri(), Dialect::Kubelet)?;
    if kind != Kind::PortForward {
        options.streams()?;
    }
    let Some(pod) = host.pod(stream.ns, stream.name) else {
        return Err(KubeletError::not_found("pod does not exist"));
    };
    if kind == Kind::PortForward && stream.uid.is_some_and(|uid| Some(uid) != crate::store::meta_str(&pod, "uid")) {
        return Err(KubeletError::not_found("pod not found"));
    }
    let Some(upgrade) = Upgrade::of(req.headers()) else {
        return Err(KubeletError::new(StatusCode::BAD_REQUEST, "Upgrade request required"));
    };
    let target = Target { ns: stream.ns, name: stream.name, pod: &pod, container: stream.container };
    Ok(serve(host, target, kind, options, upgrade, req).await?)
}

/// The pod a stream is for, found and checked by the server that was asked.
struct Target<'a> {
    ns: &'a str,
    name: &'a str,
    pod: &'a Value,
    /// For exec and attach.
    container: Option<&'a str>,
}

/// Serves an upgrade for `target`: the runtime's URL for it, then the client served on that URL
/// in the protocol it asked for.
async fn serve(
    host: &dyn PodHost,
    target: Target<'_>,
    kind: Kind,
    mut options: StreamOptions,
    upgrade: Upgrade,
    req: axum::extract::Request,
) -> ApiResult<Response> {
    let Target { ns, name, pod, container } = target;
    let service = match &upgrade {
        Upgrade::Other => Service::Splice,
        Upgrade::WebSocket(offered) => {
            let Some(service) = kind.websocket_service(offered) else {
                let mut served = vec![kind.own_websocket_protocol()];
                served.extend(kind.runtime_websocket_protocols());
                return Err(ApiError::bad_request(format!(
                    "unable to negotiate protocol: client supports {offered:?}, server accepts {served:?}"
                )));
            };
            service
        }
    };
    // A handshake podwright could not answer is refused before the runtime spends a token on it.
    let key = match service {
        Service::Splice => None,
        Service::V5 | Service::Tunnel => Some(websocket_key(req.headers())?),
    };
    let url = match container {
        None => port_forward_url(host, ns, name, pod, &options.ports).await,
        Some(container) => match options.streams() {
            Ok(()) => {
                if kind == Kind::Attach {
                    options.attach_to(spec_tty(pod, container));
                }
                container_url(host, ns, name, pod, kind, container, &options).await
            }
            Err(refused) => Err(refused),
        },
    };
    let url = match url {
        Ok(url) => url,
        Err(refused) => return Ok(refused.into_response()),
    };
    Ok(match (service, key) {
        (Service::V5, Some(key)) => {
            let streams =
                v5::Streams { stdin: options.stdin, stdout: options.stdout, stderr: options.stderr, tty: options.tty };
            let session = move |client, upstream| v5::run(client, upstream, streams);
            serve_websocket(&url, req, &key, v5::PROTOCOL, v5::UPSTREAM_PROTOCOL, session).await
        }
        (Service::Tunnel, Some(key)) => {
            serve_websocket(&url, req, &key, tunnel::PROTOCOL, tunnel::UPSTREAM_PROTOCOL, tunnel::run).await
        }
        _ => forward(&url, req).await,
    })
}

/// The client's `Sec-WebSocket-Key`, from a handshake of the version RFC 6455 defines.
fn websocket_key(headers: &HeaderMap) -> ApiResult<String> {
    let version = headers.get(header::SEC_WEBSOCKET_VERSION).and_then(|v| v.to_str().ok());
    let key = headers.get(header::SEC_WEBSOCKET_KEY).and_then(|k| k.to_str().ok());
    match (version, key) {
        (Some("13"), Some(key)) if !key.trim().is_empty() => Ok(key.to_string()),
        _ => Err(ApiError::bad_request("a WebSocket upgrade needs Sec-WebSocket-Key and Sec-WebSocket-Version: 13")),
    }
}

/// The kubelet's `GetExec` and `GetAttach`: the running container, then the runtime's URL.
async fn container_url(
    host: &dyn PodHost,
    ns: &str,
    name: &str,
    pod: &Value,
    kind: Kind,
    container: &str,
    o: &StreamOptions,
) -> Result<String, KubeletError> {
    let id = running_container_id(pod, container);
    let url = match kind {
        Kind::Exec => {
            let Some(container_id) = id else {
                return Err(KubeletError::internal(format!("container not found ({container:?})")));
            };
            let request = ExecRequest {
                container_id,
                cmd: o.command.clone(),
                tty: o.tty,
                stdin: o.stdin,
                stdout: o.stdout,
                stderr: o.stderr,
            };
            host.runtime().exec(&request).await
        }
        _ => {
            let Some(container_id) = id else {
                return Err(KubeletError::internal(format!(
                    "container {container} not found in pod {}",
                    full_name(ns, name)
                )));
            };
            let request =
                AttachRequest { container_id, stdin: o.stdin, tty: o.tty, stdout: o.stdout, stderr: o.stderr };
            host.runtime().attach(&request).await
        }
    };
    Ok(url?)
}

/// The kubelet's `GetPortForward`: the pod's ready sandbox, then the runtime's URL.
async fn port_forward_url(
    host: &dyn PodHost,
    ns: &str,
    name: &str,
    pod: &Value,
    ports: &[i32],
) -> Result<String, KubeletError> {
    let not_found = || KubeletError::internal(format!("pod not found ({:?})", full_name(ns, name)));
    let uid = crate::mirror::node_uid(pod);
    let selector = podwright_node::cri::labels::pod_selector(uid);
    let sandboxes = host.runtime().list_pod_sandboxes(&selector).await?;
    let sandbox = sandboxes
        .into_iter()
        .filter(|sb| sb.state == PodSandboxState::SandboxReady as i32)
        .max_by_key(|sb| sb.created_at)
        .ok_or_else(not_found)?;
    Ok(host.runtime().port_forward(&sandbox.id, ports).await?)
}

/// Request headers that stay between kubectl and us: the runtime's URL is its own
/// authority, and its token is the only credential it takes.
const NOT_FORWARDED: [header::HeaderName; 6] = [
    header::HOST,
    header::AUTHORIZATION,
    header::PROXY_AUTHORIZATION,
    header::COOKIE,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
];

/// Replays the client's upgrade to the runtime's `url`; on a `101` relays its head and splices
/// the two connections until both ends close; otherwise relays the runtime's answer.
async fn forward(url: &str, mut req: axum::extract::Request) -> Response {
    let (mut head, upstream) = match upgrade_upstream(url, req.method(), req.headers()).await {
        Ok(upgraded) => upgraded,
        Err(answer) => return answer,
    };
    let client = hyper::upgrade::on(&mut req);
    tokio::spawn(splice(client, upstream));
    head.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(head, Body::empty())
}

/// Serves a WebSocket upgrade with `session` on a SPDY upgrade of the runtime's `url` to
/// `upstream_protocol`: answers `101` with `protocol` once the runtime has answered `101`, and
/// relays the runtime's answer when it has not.
async fn serve_websocket<S, F>(
    url: &str,
    mut req: axum::extract::Request,
    key: &str,
    protocol: &'static str,
    upstream_protocol: &'static str,
    session: S,
) -> Response
where
    S: FnOnce(TokioIo<Upgraded>, TokioIo<Upgraded>) -> F + Send + 'static,
    F: Future<Output = ()> + Send,
{
    let mut spdy = HeaderMap::new();
    spdy.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    spdy.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
    spdy.insert(STREAM_PROTOCOL_VERSION, HeaderValue::from_static(upstream_protocol));
    let upstream = match upgrade_upstream(url, &Method::POST, &spdy).await {
        Ok((_, upstream)) => upstream,
        Err(answer) => return answer,
    };
    let client = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match client.await {
            Ok(client) => {
                tracing::debug!(protocol, "WebSocket stream opened");
                session(TokioIo::new(client), TokioIo::new(upstream)).await;
                tracing::debug!(protocol, "WebSocket stream closed");
            }
            Err(e) => tracing::debug!(%e, "the client did not complete the upgrade"),
        }
    });
    let mut answer = Response::new(Body::empty());
    *answer.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = answer.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(&websocket::accept_key(key)) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    headers.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(protocol));
    answer
}

/// The header a SPDY upgrade names its protocols in.
const STREAM_PROTOCOL_VERSION: header::HeaderName = header::HeaderName::from_static("x-stream-protocol-version");

/// Sends an upgrade to the runtime's `url`. On its `101`, the head and the upgraded connection;
/// otherwise the answer to relay (the runtime's own, or ours when it cannot be reached).
async fn upgrade_upstream(
    url: &str,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(axum::http::response::Parts, Upgraded), Response> {
    let upstream = match connect(url, method, headers).await {
        Ok(resp) => resp,
        Err(message) => {
            tracing::debug!(url, %message, "streaming server unreachable");
            return Err(KubeletError::internal(message).into_response());
        }
    };
    let (head, body) = upstream.into_parts();
    if head.status != StatusCode::SWITCHING_PROTOCOLS {
        return Err(Response::from_parts(head, Body::new(body)));
    }
    let mut upstream = Response::from_parts(head, ());
    match hyper::upgrade::on(&mut upstream).await {
        Ok(upgraded) => Ok((upstream.into_parts().0, upgraded)),
        Err(e) => Err(KubeletError::internal(format!("error upgrading connection: {e}")).into_response()),
    }
}

/// Sends the upgrade request to the streaming server at `url` (`http://127.0.0.1:<port>/exec/<token>`).
async fn connect(
    url: &str,
    method: &Method,
    headers: &HeaderMap,
) -> Result<hyper::Response<hyper::body::Incoming>, String> {
    let uri: Uri = url.parse().map_err(|e| format!("invalid streaming URL {url:?}: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!(
            "the runtime's streaming server at {url} is not plain HTTP; podwright reaches it on loopback only (containerd: enable_tls_streaming = false)"
        ));
    }
    let authority = uri.authority().ok_or_else(|| format!("streaming URL {url:?} has no host"))?.clone();
    let addr = format!("{}:{}", authority.host(), authority.port_u16().unwrap_or(80));
    let tcp = tokio::net::TcpStream::connect(&addr).await.map_err(|e| format!("dial {addr}: {e}"))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.map_err(|e| format!("dial {addr}: {e}"))?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(%e, "streaming server connection");
        }
    });
    // containerd keys the session on the token in the path alone: the query sent to it is
    // ignored, so the URL goes as the runtime returned it.
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut builder = hyper::Request::builder().method(method.clone()).uri(target);
    for (k, v) in headers.iter().filter(|(k, _)| !NOT_FORWARDED.contains(k)) {
        builder = builder.header(k, v);
    }
    let host = HeaderValue::from_str(authority.as_str()).map_err(|e| e.to_string())?;
    let request = builder.header(header::HOST, host).body(Body::empty()).map_err(|e| e.to_string())?;
    sender.send_request(request).await.map_err(|e| format!("error sending request: {e}"))
}

/// Copies bytes both ways, passing each half-close on, until both directions are done.
async fn splice(client: OnUpgrade, upstream: Upgraded) {
    let client = match client.await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(%e, "the client did not complete the upgrade");
            return;
        }
    };
    let (mut client, mut upstream) = (TokioIo::new(client), TokioIo::new(upstream));
    match tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        Ok((sent, received)) => tracing::debug!(sent, received, "stream closed"),
        Err(e) => tracing::debug!(%e, "stream ended"),
    }
}

/// A malformed frame from the other side.
fn invalid(message: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message.into())
}

/// Fills `head` with the next frame's header; false when the connection ended between frames.
async fn read_head<R: tokio::io::AsyncRead + Unpin>(r: &mut R, head: &mut [u8]) -> std::io::Result<bool> {
    use tokio::io::AsyncReadExt;
    if r.read(&mut head[..1]).await? == 0 {
        return Ok(false);
    }
    r.read_exact(&mut head[1..]).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(protocols: &[&str]) -> Vec<String> {
        protocols.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn websocket_offers_are_served_by_the_first_protocol_served_at_all() {
        // kubectl 1.30+.
        assert_eq!(Kind::Exec.websocket_service(&offer(&["v5.channel.k8s.io"])), Some(Service::V5));
        assert_eq!(Kind::Attach.websocket_service(&offer(&["v5.channel.k8s.io"])), Some(Service::V5));
        assert_eq!(
            Kind::PortForward.websocket_service(&offer(&["SPDY/3.1+portforward.k8s.io"])),
            Some(Service::Tunnel)
        );
        // Other clients, in their order: what containerd speaks goes to containerd.
        let both = offer(&["v4.channel.k8s.io", "v5.channel.k8s.io"]);
        assert_eq!(Kind::Exec.websocket_service(&both), Some(Service::Splice));
        let both = offer(&["v5.channel.k8s.io", "v4.channel.k8s.io"]);
        assert_eq!(Kind::Exec.websocket_service(&both), Some(Service::V5));
        assert_eq!(Kind::Exec.websocket_service(&[]), Some(Service::Splice));
        assert_eq!(Kind::PortForward.websocket_service(&offer(&["v4.channel.k8s.io"])), Some(Service::Splice));
        // Nothing served: refused before any runtime call.
        assert_eq!(Kind::PortForward.websocket_service(&offer(&["v5.channel.k8s.io"])), None);
        assert_eq!(Kind::Exec.websocket_service(&offer(&["SPDY/3.1+portforward.k8s.io"])), None);
        assert_eq!(Kind::Exec.websocket_service(&offer(&["v6.channel.k8s.io"])), None);
    }

    #[test]
    fn a_websocket_handshake_needs_its_key_and_version_13() {
        let mut headers = HeaderMap::new();
        headers.insert(header::SEC_WEBSOCKET_KEY, HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="));
        assert!(websocket_key(&headers).is_err());
        headers.insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("8"));
        assert!(websocket_key(&headers).is_err());
        headers.insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
        assert_eq!(websocket_key(&headers).unwrap(), "dGhlIHNhbXBsZSBub25jZQ==");
    }

    #[test]
    fn attach_takes_the_containers_tty_and_drops_stderr_beside_it() {
        let mut o = StreamOptions { stdin: true, stdout: true, stderr: true, ..Default::default() };
        o.streams().unwrap();
        o.attach_to(true);
        assert_eq!((o.tty, o.stdout, o.stderr), (true, true, false));
    }
}
