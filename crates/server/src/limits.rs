//! The API server's limits on what clients may ask at once and for how long, in front of every
//! handler: at most `--max-requests-inflight` reading and `--max-mutating-requests-inflight`
//! writing requests at a time, more turned away at once with 429 and `Retry-After: 1` (apiserver
//! `pkg/server/filters/maxinflight.go`); each given `--request-timeout`, or less if its
//! `timeout` parameter asks, then answered 504 (`pkg/endpoints/filters/request_deadline.go`,
//! `pkg/server/filters/timeout.go`). Long-running requests (watches, and `exec`, `attach`,
//! `portforward`, `log` and `proxy`) are neither counted nor timed, as the API server's
//! `BasicLongRunningRequestCheck` decides. A list sent as it is read (events) keeps its seat and
//! deadline until it is sent ([`Admission`]). The body limit is the handlers' (`RequestBody`).

use crate::errors::{ApiError, ApiResult};
use crate::request::truthy;
use axum::Router;
use axum::extract::Request;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What the API server's flags of the same names default to.
pub const DEFAULT_MAX_REQUESTS_INFLIGHT: usize = 400;
pub const DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT: usize = 200;
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The subresources whose requests run as long as their streams (apiserver
/// `BasicLongRunningRequestCheck`'s, as kube-apiserver configures it).
const LONG_RUNNING_SUBRESOURCES: [&str; 5] = ["attach", "exec", "proxy", "log", "portforward"];

/// How many requests the API serves at once and how long each may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Reading requests (get, list) at once; 0 for no limit.
    pub max_requests_inflight: usize,
    /// Writing requests (create, update, patch, delete) at once; 0 for no limit.
    pub max_mutating_requests_inflight: usize,
    /// The longest a request that is not long-running may take, and the longest a write to a
    /// client may wait for it to read (`transport`).
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_requests_inflight: DEFAULT_MAX_REQUESTS_INFLIGHT,
            max_mutating_requests_inflight: DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

impl Limits {
    /// `router` with these limits in front of its handlers.
    pub fn apply(&self, router: Router) -> Router {
        let gate = Arc::new(Gate {
            reading: seats(self.max_requests_inflight),
            writing: seats(self.max_mutating_requests_inflight),
            timeout: self.request_timeout,
        });
        router.layer(axum::middleware::from_fn(move |req: Request, next: Next| {
            let gate = gate.clone();
            async move { gate.admit(req, next).await }
        }))
    }
}

fn seats(limit: usize) -> Option<Arc<Semaphore>> {
    (limit > 0).then(|| Arc::new(Semaphore::new(limit)))
}

/// What the limits granted a request, for a handler whose response is sent after it returns (a
/// list sent as it is read): when the request must end, and its seat among those in flight,
/// held until the response is sent, as the API server holds it for the handler's whole run.
#[derive(Clone)]
pub struct Admission {
    pub deadline: tokio::time::Instant,
    _seat: Option<Arc<OwnedSemaphorePermit>>,
}

struct Gate {
    reading: Option<Arc<Semaphore>>,
    writing: Option<Arc<Semaphore>>,
    timeout: Duration,
}

/// The query parameters the limits read; a query that does not read as these is left to the
/// handler to refuse.
#[derive(Default, Deserialize)]
struct LimitParams {
    watch: Option<String>,
    timeout: Option<String>,
}

impl Gate {
    async fn admit(&self, mut req: Request, next: Next) -> Response {
        let params: LimitParams = axum::extract::Query::try_from_uri(req.uri()).map(|q| q.0).unwrap_or_default();
        if long_running(req.method(), req.uri().path(), &params) {
            return next.run(req).await;
        }
        let timeout = match self.timeout_of(&params) {
            Ok(t) => t,
            Err(e) => return e.into_response(),
        };
        let seats = if is_mutating(req.method()) { &self.writing } else { &self.reading };
        let seat = match seats {
            Some(seats) => match seats.clone().try_acquire_owned() {
                Ok(seat) => Some(Arc::new(seat)),
                Err(_) => return ApiError::too_many_requests().into_response(),
            },
            None => None,
        };
        // A real client over a real connection: real time, as the transport's own timeouts.
        #[allow(clippy::disallowed_methods)]
        let deadline = tokio::time::Instant::now() + timeout;
        // Held here too: a handler may drop the request's extensions (reading its body).
        req.extensions_mut().insert(Admission { deadline, _seat: seat.clone() });
        let _seat = seat;
        match tokio::time::timeout_at(deadline, next.run(req)).await {
            Ok(response) => response,
            Err(_) => ApiError::timeout().into_response(),
        }
    }

    /// The server's timeout, or the request's own `timeout` when it is shorter (and not 0).
    fn timeout_of(&self, params: &LimitParams) -> ApiResult<Duration> {
        let Some(asked) = params.timeout.as_deref().filter(|t| !t.is_empty()) else {
            return Ok(self.timeout);
        };
        let asked = podwright_api::go::parse_duration(asked)
            .map_err(|e| ApiError::bad_request(format!("invalid timeout specified in the request URL - {e}")))?;
        Ok(match Duration::try_from(asked) {
            Ok(asked) if !asked.is_zero() && asked < self.timeout => asked,
            _ => self.timeout,
        })
    }
}

/// Whether the API server counts a request among the writing ones: all but get, list and watch.
fn is_mutating(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD)
}

/// A watch (a GET of a collection with `watch`), or a request for a long-running subresource.
fn long_running(method: &Method, path: &str, params: &LimitParams) -> bool {
    let Some(parts) = resource_parts(path) else { return false };
    let watch = matches!(*method, Method::GET | Method::HEAD)
        && parts.len() == 1
        && params.watch.as_deref().is_some_and(truthy);
    watch || parts.get(2).is_some_and(|sub| LONG_RUNNING_SUBRESOURCES.contains(sub))
}

/// A resource request's path after its group and version (and namespace): the resource, then
/// the name and the subresource when given. None for other paths (discovery, `/healthz`).
fn resource_parts(path: &str) -> Option<Vec<&str>> {
    let rest = match path.strip_prefix("/api/") {
        Some(rest) => rest.split_once('/')?.1,
        None => {
            let rest = path.strip_prefix("/apis/")?;
            let (_group, rest) = rest.split_once('/')?;
            rest.split_once('/')?.1
        }
    };
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    Some(match parts.as_slice() {
        ["namespaces", _, inner @ ..] if !inner.is_empty() => inner.to_vec(),
        _ => parts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(query: &str) -> LimitParams {
        let uri: axum::http::Uri = format!("/x?{query}").parse().unwrap();
        axum::extract::Query::try_from_uri(&uri).unwrap().0
    }

    #[test]
    fn long_running_as_the_api_server_tells_it() {
        let get = Method::GET;
        assert!(long_running(&get, "/api/v1/namespaces/default/pods", &params("watch=true")));
        assert!(long_running(&get, "/api/v1/pods", &params("watch=1")));
        assert!(long_running(&get, "/apis/node.k8s.io/v1/runtimeclasses", &params("watch=true")));
        assert!(!long_running(&get, "/api/v1/namespaces/default/pods", &params("watch=false")));
        assert!(!long_running(&get, "/api/v1/namespaces/default/pods/web", &params("watch=true")));
        assert!(long_running(&get, "/api/v1/namespaces/default/pods/web/log", &params("")));
        assert!(long_running(&Method::POST, "/api/v1/namespaces/default/pods/web/exec", &params("")));
        assert!(long_running(&get, "/api/v1/namespaces/default/pods/web/portforward", &params("")));
        assert!(long_running(&get, "/api/v1/nodes/n/proxy/stats/summary", &params("")));
        assert!(!long_running(&get, "/api/v1/namespaces/default/pods/web/status", &params("")));
        assert!(!long_running(&get, "/api/v1/namespaces/web", &params("watch=true")));
        assert!(!long_running(&get, "/healthz", &params("watch=true")));
    }

    #[test]
    fn a_shorter_timeout_is_taken_a_longer_one_capped() {
        let gate = Gate { reading: None, writing: None, timeout: Duration::from_secs(60) };
        assert_eq!(gate.timeout_of(&params("timeout=5s")).unwrap(), Duration::from_secs(5));
        assert_eq!(gate.timeout_of(&params("timeout=10m")).unwrap(), Duration::from_secs(60));
        assert_eq!(gate.timeout_of(&params("timeout=0s")).unwrap(), Duration::from_secs(60));
        assert_eq!(gate.timeout_of(&params("timeout=-1s")).unwrap(), Duration::from_secs(60));
        assert_eq!(gate.timeout_of(&params("")).unwrap(), Duration::from_secs(60));
        let e = gate.timeout_of(&params("timeout=soon")).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "invalid timeout specified in the request URL - time: invalid duration \"soon\"")
        );
    }
}
