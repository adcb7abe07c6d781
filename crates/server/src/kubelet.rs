//! The kubelet port of a cluster node (`--port`, 10250 by default): what the API server asks of
//! a node for `kubectl logs`, `exec`, `attach` and `port-forward`, and what tools and metrics
//! servers read (`pkg/kubelet/server/server.go`).
//!
//! | path | method | served by |
//! |---|---|---|
//! | `/containerLogs/{ns}/{pod}/{container}` | GET | [`crate::logs`], the local API's `pods/log` |
//! | `/exec/{ns}/{pod}[/{uid}]/{container}`, `/attach/...` | GET, POST | [`crate::streaming`], the local API's `pods/exec` and `pods/attach` |
//! | `/portForward/{ns}/{pod}[/{uid}]` | GET, POST | [`crate::streaming`], the local API's `pods/portforward` |
//! | `/pods` | GET | a v1 `PodList` of the node's pods |
//! | `/stats/summary`, `/metrics/resource` | GET | [`crate::usage`] |
//! | `/metrics` | GET | [`crate::metrics`] |
//! | `/healthz` | GET | `ok` |
//!
//! Every request, whatever its path, is first authenticated and authorized ([`auth`]): an
//! anonymous one gets 401 unless anonymous requests are allowed. It is served over TLS only
//! ([`crate::secure::KubeletTls`]), whose handshake verifies client certificates. The pods come
//! from a [`PodHost`]: in cluster mode, the node's pod workers.

pub mod auth;

use crate::errors::KubeletError;
use crate::host::PodHost;
use crate::secure::{Peer, TlsListener};
use crate::streaming::{Kind, KubeletStream};
use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use podwright_node::Metrics;
use podwright_node::usage::UsageCollector;
use serde_json::json;
use std::sync::Arc;

pub use auth::{Attributes, Auth, AuthSettings, Authorization, Reviews, User};

/// One endpoint of the kubelet port, from its path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Endpoint {
    ContainerLogs {
        ns: String,
        name: String,
        container: String,
    },
    /// exec and attach with their container, port-forward without.
    Stream {
        kind: Kind,
        ns: String,
        name: String,
        uid: Option<String>,
        container: Option<String>,
    },
    Pods,
    Summary,
    Metrics,
    ResourceMetrics,
    Healthz,
}

impl Endpoint {
    /// The endpoint `path` names, or the kubelet's 404 (no such path) or 405 (a method the
    /// path does not take).
    fn parse(method: &Method, path: &str) -> Result<Endpoint, KubeletError> {
        let segments: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
        if segments.iter().skip(1).any(|s| s.is_empty()) {
            return Err(not_found());
        }
        let owned = |s: &str| s.to_string();
        let (endpoint, streaming) = match segments.as_slice() {
            ["containerLogs", ns, name, container] => {
                (Endpoint::ContainerLogs { ns: owned(ns), name: owned(name), container: owned(container) }, false)
            }
            [sub @ ("exec" | "attach"), ns, name, rest @ ..] if matches!(rest.len(), 1 | 2) => {
                let kind = if *sub == "exec" { Kind::Exec } else { Kind::Attach };
                let (uid, container) = match rest {
                    [container] => (None, container),
                    [uid, container] => (Some(owned(uid)), container),
                    _ => return Err(not_found()),
                };
                let (ns, name, container) = (owned(ns), owned(name), Some(owned(container)));
                (Endpoint::Stream { kind, ns, name, uid, container }, true)
            }
            ["portForward", ns, name, uid @ ..] if uid.len() <= 1 => {
                let uid = uid.first().map(|u| owned(u));
                (
                    Endpoint::Stream {
                        kind: Kind::PortForward,
                        ns: owned(ns),
                        name: owned(name),
                        uid,
                        container: None,
                    },
                    true,
                )
            }
            ["pods"] => (Endpoint::Pods, false),
            ["stats", "summary"] => (Endpoint::Summary, false),
            ["metrics"] => (Endpoint::Metrics, false),
            ["metrics", "resource"] => (Endpoint::ResourceMetrics, false),
            ["healthz"] => (Endpoint::Healthz, false),
            _ => return Err(not_found()),
        };
        let allowed = *method == Method::GET || (streaming && *method == Method::POST);
        if allowed {
            Ok(endpoint)
        } else {
            Err(KubeletError::new(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed"))
        }
    }
}

fn not_found() -> KubeletError {
    KubeletError::not_found("404 page not found")
}

struct Shared {
    host: Arc<dyn PodHost>,
    usage: Arc<UsageCollector>,
    metrics: Arc<Metrics>,
    auth: Auth,
}

/// The kubelet port's handlers over the node's pods. Cheap to clone.
#[derive(Clone)]
pub struct KubeletServer(Arc<Shared>);

impl KubeletServer {
    pub fn new(host: Arc<dyn PodHost>, usage: Arc<UsageCollector>, metrics: Arc<Metrics>, auth: Auth) -> Self {
        KubeletServer(Arc::new(Shared { host, usage, metrics, auth }))
    }

    /// Every path goes to one handler, which authenticates and authorizes before it serves.
    pub fn router(&self) -> Router {
        Router::new().fallback(handle).with_state(self.clone())
    }

    /// Serves the port until the listener fails.
    pub async fn serve(self, listener: TlsListener) -> std::io::Result<()> {
        axum::serve(listener, self.router().into_make_service_with_connect_info::<Peer>()).await
    }
}

async fn handle(State(k): State<KubeletServer>, req: Request) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    let answer = authorized(&k, req).await.unwrap_or_else(IntoResponse::into_response);
    tracing::debug!(%method, path, status = answer.status().as_u16(), "kubelet port");
    answer
}

async fn authorized(k: &KubeletServer, req: Request) -> Result<Response, KubeletError> {
    let peer = req.extensions().get::<ConnectInfo<Peer>>().map(|c| &c.0);
    let cert = peer.and_then(|p| p.certificate.as_deref());
    let user = k.0.auth.authenticate(cert, req.headers()).await?;
    let attrs = Attributes::of(req.method(), req.uri().path());
    k.0.auth.authorize(&user, &attrs).await?;
    serve(k, req).await
}

async fn serve(k: &KubeletServer, req: Request) -> Result<Response, KubeletError> {
    let host = &k.0.host;
    match Endpoint::parse(req.method(), req.uri().path())? {
        Endpoint::ContainerLogs { ns, name, container } => {
            crate::logs::container_logs(host.clone(), &ns, &name, &container, req.uri()).await
        }
        Endpoint::Stream { kind, ns, name, uid, container } => {
            let stream =
                KubeletStream { kind, ns: &ns, name: &name, uid: uid.as_deref(), container: container.as_deref() };
            crate::streaming::kubelet_stream(&**host, stream, req).await
        }
        Endpoint::Pods => {
            let items: Vec<_> = host.pods().iter().map(|p| (**p).clone()).collect();
            let list = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items});
            Ok(axum::Json(list).into_response())
        }
        Endpoint::Summary => Ok(crate::usage::summary_of(&k.0.usage).await?),
        Endpoint::ResourceMetrics => Ok(crate::usage::resource_metrics_of(&k.0.usage).await),
        Endpoint::Metrics => Ok(crate::metrics::page(&k.0.metrics).into_response()),
        Endpoint::Healthz => Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok").into_response()),
    }
}

#[cfg(test)]
mod tests;
