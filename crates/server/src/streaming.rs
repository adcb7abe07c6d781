//! `pods/{name}/exec`, `attach` and `portforward`: the API server's and the kubelet's parts in
//! one. The request is checked against the pod as the API server does (`streamLocation` in
//! `pkg/registry/core/pod/strategy.go`); the container or sandbox is found and the runtime asked
//! for a streaming URL as the kubelet does (`GetExec`, `GetAttach`, `GetPortForward`); then the
//! client's upgrade is replayed to that URL and the two connections are spliced byte for byte, as
//! apimachinery's `UpgradeAwareHandler` does. SPDY and WebSocket framing pass through untouched.
//!
//! containerd 1.6 speaks neither `v5.channel.k8s.io` nor `SPDY/3.1+portforward.k8s.io`, the
//! only WebSocket subprotocols kubectl 1.30+ offers. Such an offer is refused before any runtime
//! call, and kubectl retries over SPDY at once: forwarding it would only have containerd refuse it
//! too, and leak two goroutines there per attempt.

use crate::errors::{ApiError, ApiResult};
use crate::logs::{container_status, pick_container};
use crate::request::truthy;
use crate::resources::Resource;
use crate::server::ApiServer;
use crate::store::meta_str;
use axum::body::Body;
use axum::extract::Query;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use podwright_runtime::RuntimeError;
use podwright_runtime::cri_api::{AttachRequest, ExecRequest, PodSandboxState};
use serde_json::Value;

/// The subresource asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
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

impl StreamOptions {
    fn parse(uri: &Uri) -> ApiResult<StreamOptions> {
        let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))?;
        let mut o = StreamOptions::default();
        for (k, v) in pairs {
            match k.as_str() {
                "command" => o.command.push(v),
                "container" => o.container = Some(v).filter(|c| !c.is_empty()),
                "stdin" => o.stdin = truthy(&v),
                "stdout" => o.stdout = truthy(&v),
                "stderr" => o.stderr = truthy(&v),
                "tty" => o.tty = truthy(&v),
                "ports" => {
                    for p in v.split(',') {
                        let port = p.trim().parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                            ApiError::bad_request(format!("ports: Invalid value: {p:?}: must be between 1 and 65535"))
                        })?;
                        o.ports.push(i32::from(port));
                    }
                }
                _ => {}
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

/// A refusal in the kubelet's words: a plain-text body, which kubectl prints as
/// `error: unable to upgrade connection: <body>` (`streaming.WriteError` in the kubelet).
#[derive(Debug, Clone, PartialEq, Eq)]
struct KubeletError {
    code: StatusCode,
    message: String,
}

impl KubeletError {
    fn new(code: StatusCode, message: impl Into<String>) -> Self {
        KubeletError { code, message: message.into() }
    }

    fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

/// A runtime failure as the kubelet answers it: NotFound is a 404, anything else a 500.
impl From<RuntimeError> for KubeletError {
    fn from(e: RuntimeError) -> Self {
        match e {
            RuntimeError::NotFound(m) => KubeletError::new(StatusCode::NOT_FOUND, m),
            other => KubeletError::internal(other.to_string()),
        }
    }
}

impl IntoResponse for KubeletError {
    fn into_response(self) -> Response {
        (self.code, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], self.message).into_response()
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
    ["/spec/containers", "/spec/initContainers", "/spec/ephemeralContainers"]
        .into_iter()
        .filter_map(|p| pod.pointer(p)?.as_array())
        .flatten()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
        .and_then(|c| c.get("tty")?.as_bool())
        .unwrap_or(false)
}

/// `GET|POST /api/v1/namespaces/{ns}/pods/{name}/{exec|attach|portforward}`.
pub async fn proxy(s: &ApiServer, ns: &str, name: &str, sub: &str, req: axum::extract::Request) -> ApiResult<Response> {
    let kind = Kind::parse(sub)?;
    let mut options = StreamOptions::parse(req.uri())?;
    let Some(upgrade) = Upgrade::of(req.headers()) else {
        return Err(ApiError::bad_request("Upgrade request required"));
    };
    let pod = s.store().get(Resource::Pods, ns, name)?;
    let container = match kind {
        Kind::Exec | Kind::Attach => Some(pick_container(&pod, options.container.as_deref(), name)?),
        Kind::PortForward => None,
    };
    if let Upgrade::WebSocket(offered) = &upgrade {
        let served = kind.runtime_websocket_protocols();
        if !offered.is_empty() && !offered.iter().any(|p| served.contains(&p.as_str())) {
            return Err(ApiError::bad_request(format!(
                "unable to negotiate protocol: client supports {offered:?}, server accepts {served:?}"
            )));
        }
    }
    let url = match container {
        None => port_forward_url(s, ns, name, &pod, &options.ports).await,
        Some(container) => match options.streams() {
            Ok(()) => container_url(s, ns, name, &pod, kind, &container, options).await,
            Err(refused) => Err(refused),
        },
    };
    match url {
        Ok(url) => Ok(forward(&url, req).await),
        Err(refused) => Ok(refused.into_response()),
    }
}

/// The kubelet's `GetExec` and `GetAttach`: the running container, then the runtime's URL.
async fn container_url(
    s: &ApiServer,
    ns: &str,
    name: &str,
    pod: &Value,
    kind: Kind,
    container: &str,
    o: StreamOptions,
) -> Result<String, KubeletError> {
    let id = running_container_id(pod, container);
    let url = match kind {
        Kind::Exec => {
            let Some(container_id) = id else {
                return Err(KubeletError::internal(format!("container not found ({container:?})")));
            };
            let request = ExecRequest {
                container_id,
                cmd: o.command,
                tty: o.tty,
                stdin: o.stdin,
                stdout: o.stdout,
                stderr: o.stderr,
            };
            s.runtime().exec(&request).await
        }
        _ => {
            let Some(container_id) = id else {
                return Err(KubeletError::internal(format!(
                    "container {container} not found in pod {}",
                    full_name(ns, name)
                )));
            };
            let tty = spec_tty(pod, container);
            let request =
                AttachRequest { container_id, stdin: o.stdin, tty, stdout: o.stdout, stderr: o.stderr && !tty };
            s.runtime().attach(&request).await
        }
    };
    Ok(url?)
}

/// The kubelet's `GetPortForward`: the pod's ready sandbox, then the runtime's URL.
async fn port_forward_url(
    s: &ApiServer,
    ns: &str,
    name: &str,
    pod: &Value,
    ports: &[i32],
) -> Result<String, KubeletError> {
    let not_found = || KubeletError::internal(format!("pod not found ({:?})", full_name(ns, name)));
    let uid = meta_str(pod, "uid").unwrap_or_default();
    let selector = podwright_node::cri::config::pod_selector(uid);
    let sandboxes = s.runtime().list_pod_sandboxes(&selector).await?;
    let sandbox = sandboxes
        .into_iter()
        .filter(|sb| sb.state == PodSandboxState::SandboxReady as i32)
        .max_by_key(|sb| sb.created_at)
        .ok_or_else(not_found)?;
    Ok(s.runtime().port_forward(&sandbox.id, ports).await?)
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
    let upstream = match connect(url, req.method(), req.headers()).await {
        Ok(resp) => resp,
        Err(message) => {
            tracing::debug!(url, %message, "streaming server unreachable");
            return KubeletError::internal(message).into_response();
        }
    };
    let (head, body) = upstream.into_parts();
    if head.status != StatusCode::SWITCHING_PROTOCOLS {
        return Response::from_parts(head, Body::new(body));
    }
    let mut upstream = Response::from_parts(head, ());
    let upgraded = match hyper::upgrade::on(&mut upstream).await {
        Ok(u) => u,
        Err(e) => return KubeletError::internal(format!("error upgrading connection: {e}")).into_response(),
    };
    let client = hyper::upgrade::on(&mut req);
    tokio::spawn(splice(client, upgraded));
    let (mut head, ()) = upstream.into_parts();
    head.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(head, Body::empty())
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
