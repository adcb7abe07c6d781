//! `pods/{name}/log` (the local API) and `/containerLogs` (the kubelet port): a container's
//! output from its CRI log files, chosen and filtered as the kubelet does (`pkg/kubelet/kubelet_pods.go` `validateContainerLogStatus`,
//! `pkg/kubelet/kuberuntime/logs/logs.go`).

use crate::errors::{ApiError, ApiResult, KubeletError};
use crate::host::PodHost;
use crate::request::is_set;
use crate::resources::Resource;
use crate::server::ApiServer;
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use jiff::{SignedDuration, Timestamp};
use podwright_runtime::cri_log;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

/// How often a follower looks for more output once it has read everything.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(100);

/// How long after its data the kubelet port ends a log's body ([`BodyEnd::Apart`]): longer than
/// the API server takes to read the response's head, which comes with the first data.
const END_GAP: Duration = Duration::from_millis(100);

/// How a log's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyEnd {
    /// With its data: one `Content-Length` body unless followed (the local API, read by kubectl).
    WithData,
    /// Chunked, the head written with the first data and the end [`END_GAP`] later (the kubelet
    /// port). The 1.20 API server relays a log to a websocket with a read loop that drops the
    /// bytes a read returns together with `io.EOF` (`wsstream`'s `messageCopy`), which its
    /// HTTP/1.1 client does when the end of the body was received with them: always for a
    /// `Content-Length` body, and for a chunked one whose last chunk came in the same read. The
    /// Go kubelet flushes each line and ends the body after, as this does.
    Apart,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogParams {
    container: Option<String>,
    follow: Option<String>,
    previous: Option<String>,
    timestamps: Option<String>,
    tail_lines: Option<i64>,
    since_seconds: Option<i64>,
    since_time: Option<String>,
    limit_bytes: Option<i64>,
    /// The kubelet's old name of `tailLines` (`all` for every line).
    tail: Option<String>,
}

/// What to print and how (`PodLogOptions`, validated as `ValidatePodLogOptions` does).
#[derive(Debug, Clone, Default)]
struct Options {
    timestamps: bool,
    tail: Option<usize>,
    since: Option<Timestamp>,
    limit: Option<usize>,
}

fn options(p: &LogParams, now: Timestamp) -> ApiResult<Options> {
    let mut errs = vec![];
    if p.tail_lines.is_some_and(|t| t < 0) {
        errs.push("tailLines: Invalid value: must be greater than or equal to 0".to_string());
    }
    if p.limit_bytes.is_some_and(|l| l < 1) {
        errs.push("limitBytes: Invalid value: must be greater than 0".to_string());
    }
    if p.since_seconds.is_some() && p.since_time.is_some() {
        errs.push("Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified".to_string());
    }
    if p.since_seconds.is_some_and(|s| s < 1) {
        errs.push("sinceSeconds: Invalid value: must be greater than 0".to_string());
    }
    if !errs.is_empty() {
        return Err(ApiError::bad_request(errs.join(", ")));
    }
    let since = match (&p.since_seconds, &p.since_time) {
        (Some(s), _) => Some(now - SignedDuration::from_secs(*s)),
        (None, Some(t)) => Some(t.parse().map_err(|_| ApiError::bad_request(format!("invalid sinceTime: {t}")))?),
        (None, None) => None,
    };
    Ok(Options {
        timestamps: is_set(&p.timestamps),
        tail: p.tail_lines.map(|t| t as usize),
        since,
        limit: p.limit_bytes.map(|l| l as usize),
    })
}

fn names(containers: Option<&Value>) -> Vec<String> {
    containers
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c.get("name")?.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// The container to show: the one named, or the only one.
pub(crate) fn pick_container(pod: &Value, asked: Option<&str>, pod_name: &str) -> ApiResult<String> {
    let apps = names(pod.pointer("/spec/containers"));
    let inits = names(pod.pointer("/spec/initContainers"));
    let ephemeral = names(pod.pointer("/spec/ephemeralContainers"));
    match asked.filter(|c| !c.is_empty()) {
        Some(c) if apps.iter().chain(&inits).chain(&ephemeral).any(|n| n == c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::bad_request(format!("container {c} is not valid for pod {pod_name}"))),
        None if apps.len() == 1 => Ok(apps[0].clone()),
        None => {
            let mut msg =
                format!("a container name must be specified for pod {pod_name}, choose one of: [{}]", apps.join(" "));
            if !inits.is_empty() {
                msg.push_str(&format!(" or one of the init containers: [{}]", inits.join(" ")));
            }
            Err(ApiError::bad_request(msg))
        }
    }
}

pub(crate) fn container_status<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    named(
        pod,
        ["/status/containerStatuses", "/status/initContainerStatuses", "/status/ephemeralContainerStatuses"],
        name,
    )
}

/// The container named `name` in the pod's spec, any list.
pub(crate) fn container_spec<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    named(pod, ["/spec/containers", "/spec/initContainers", "/spec/ephemeralContainers"], name)
}

fn named<'a>(pod: &'a Value, lists: [&str; 3], name: &str) -> Option<&'a Value> {
    lists
        .into_iter()
        .filter_map(|p| pod.pointer(p)?.as_array())
        .flatten()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(name))
}

/// The instances' log files of a container, oldest first (`<name>/<restart count>.log`).
fn instance_logs(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_str()?.strip_suffix(".log")?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// Which instance's log to show, and whether it may still grow.
fn choose(pod: &Value, container: &str, pod_name: &str, previous: bool, root: &Path) -> ApiResult<(PathBuf, bool)> {
    let uid = crate::mirror::node_uid(pod);
    let logs = instance_logs(&podwright_node::layout::log_directory(root, uid).join(container));
    let status = container_status(pod, container);
    let state = status.and_then(|s| s.get("state"));
    let running = state.and_then(|s| s.get("running")).is_some();
    let terminated = state.and_then(|s| s.get("terminated")).is_some();
    let last_terminated = status.and_then(|s| s.pointer("/lastState/terminated")).is_some();
    let newest = logs.last().cloned();
    let before_newest = logs.len().checked_sub(2).and_then(|i| logs.get(i)).cloned();
    let terminated_err = || ApiError::bad_request(format!("container {container:?} in pod {pod_name:?} is terminated"));
    if previous {
        let found = if !last_terminated {
            None
        } else if running || terminated {
            before_newest
        } else {
            newest
        };
        return found.map(|p| (p, false)).ok_or_else(|| {
            ApiError::bad_request(format!("previous terminated container {container:?} in pod {pod_name:?} not found"))
        });
    }
    if running {
        return newest.map(|p| (p, true)).ok_or_else(terminated_err);
    }
    if terminated || last_terminated {
        return newest.map(|p| (p, false)).ok_or_else(terminated_err);
    }
    let reason =
        state.and_then(|s| s.pointer("/waiting/reason")).and_then(Value::as_str).unwrap_or("ContainerCreating");
    let why = match reason {
        "ErrImagePull" => "image can't be pulled",
        "ImagePullBackOff" => "trying and failing to pull image",
        other => other,
    };
    Err(ApiError::bad_request(format!("container {container:?} in pod {pod_name:?} is waiting to start: {why}")))
}

/// One complete log entry: partial (`P`) lines joined to the full (`F`) one that ends them.
#[derive(Debug, Default)]
struct Decoder {
    pending: Vec<u8>,
    pending_time: Option<String>,
}

impl Decoder {
    /// Feeds one CRI line (without its newline); returns a complete entry (time, message).
    fn line(&mut self, line: &[u8]) -> Option<(String, Vec<u8>)> {
        let line = cri_log::Line::parse(line)?;
        let time = String::from_utf8_lossy(line.time).into_owned();
        self.pending_time.get_or_insert(time);
        self.pending.extend_from_slice(line.message.unwrap_or_default());
        if line.is_partial() {
            return None;
        }
        let mut entry = std::mem::take(&mut self.pending);
        entry.push(b'\n');
        Some((self.pending_time.take().unwrap_or_default(), entry))
    }

    /// The partial (`P`) lines no full one has ended yet, as they are, without a newline: the
    /// kubelet prints each partial line as it reads it. A container's last output without a
    /// newline (`printf abc`) has no full line after it, ever.
    fn finish(&mut self) -> Option<(String, Vec<u8>)> {
        let time = self.pending_time.take().unwrap_or_default();
        (!self.pending.is_empty()).then(|| (time, std::mem::take(&mut self.pending)))
    }
}

/// The kubelet prints timestamps as RFC 3339 with nine fraction digits.
fn render(time: &str, msg: &[u8], o: &Options, out: &mut Vec<u8>) -> bool {
    let ts: Option<Timestamp> = time.parse().ok();
    if let (Some(since), Some(ts)) = (o.since, ts)
        && ts < since
    {
        return false;
    }
    if o.timestamps {
        let shown = ts.map(|t| t.strftime("%Y-%m-%dT%H:%M:%S.%9fZ").to_string()).unwrap_or_else(|| time.to_string());
        out.extend_from_slice(shown.as_bytes());
        out.push(b' ');
    }
    out.extend_from_slice(msg);
    true
}

/// Complete lines of `buf`, leaving an unfinished one in it.
fn take_lines(buf: &mut Vec<u8>) -> Vec<Vec<u8>> {
    let Some(end) = buf.iter().rposition(|b| *b == b'\n') else { return vec![] };
    let rest = buf.split_off(end + 1);
    let done = std::mem::replace(buf, rest);
    done.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec).collect()
}

fn read_all(path: &Path, o: &Options) -> (Vec<u8>, u64) {
    let bytes = std::fs::read(path).unwrap_or_default();
    let len = bytes.len() as u64;
    let mut dec = Decoder::default();
    let mut decoded: Vec<(String, Vec<u8>)> =
        bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()).filter_map(|line| dec.line(line)).collect();
    decoded.extend(dec.finish());
    let mut entries: Vec<Vec<u8>> = vec![];
    for (time, msg) in decoded {
        let mut out = vec![];
        if render(&time, &msg, o, &mut out) {
            entries.push(out);
        }
    }
    let skip = o.tail.map_or(0, |t| entries.len().saturating_sub(t));
    let mut out: Vec<u8> = entries.into_iter().skip(skip).flatten().collect();
    if let Some(limit) = o.limit {
        out.truncate(limit);
    }
    (out, len)
}

/// `GET /api/v1/namespaces/{ns}/pods/{name}/log`: the container named in the query, or the
/// pod's only one.
pub async fn get(s: &ApiServer, ns: &str, name: &str, uri: &axum::http::Uri) -> ApiResult<Response> {
    let p = params(uri)?;
    let o = options(&p, s.now())?;
    let pod = s.store().get(Resource::Pods, ns, name)?;
    let container = pick_container(&pod, p.container.as_deref(), name)?;
    serve(Arc::new(s.clone()), &pod, ns, name, &container, &p, o, BodyEnd::WithData)
}

/// The kubelet's `GET /containerLogs/{ns}/{name}/{container}` (`getContainerLogs`): the same
/// query as `pods/log`, with `tail` as the old name of `tailLines`.
pub(crate) async fn container_logs(
    host: Arc<dyn PodHost>,
    ns: &str,
    name: &str,
    container: &str,
    uri: &axum::http::Uri,
) -> Result<Response, KubeletError> {
    let mut p = params(uri)?;
    if p.tail_lines.is_none()
        && let Some(tail) = p.tail.as_deref().filter(|t| *t != "all")
    {
        let lines = tail.parse().map_err(|_| ApiError::bad_request(format!("invalid tail: {tail}")))?;
        p.tail_lines = Some(lines);
    }
    let o = options(&p, host.now())?;
    let pod = host.pod(ns, name).ok_or_else(|| KubeletError::not_found(format!("pod {name:?} does not exist")))?;
    if container_spec(&pod, container).is_none() {
        return Err(KubeletError::not_found(format!("container {container:?} not found in pod {name:?}")));
    }
    Ok(serve(host, &pod, ns, name, container, &p, o, BodyEnd::Apart)?)
}

fn params(uri: &axum::http::Uri) -> ApiResult<LogParams> {
    axum::extract::Query::try_from_uri(uri)
        .map(|q: axum::extract::Query<LogParams>| q.0)
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

/// The container's log as asked, and then what it goes on writing while it runs if asked to
/// follow; its body ends as `end` says.
#[allow(clippy::too_many_arguments)]
fn serve(
    host: Arc<dyn PodHost>,
    pod: &Value,
    ns: &str,
    name: &str,
    container: &str,
    p: &LogParams,
    o: Options,
    end: BodyEnd,
) -> ApiResult<Response> {
    let (path, live) = choose(pod, container, name, is_set(&p.previous), host.root())?;
    let (first, offset) = read_all(&path, &o);
    let following = is_set(&p.follow) && live;
    if !following && end == BodyEnd::WithData {
        return Ok(([(header::CONTENT_TYPE, "text/plain")], first).into_response());
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    let sent = first.len();
    // Queued before the response goes: hyper writes it with the head.
    if !first.is_empty() {
        let _ = tx.try_send(Ok(Bytes::from(first)));
    }
    let (ns, name, container) = (ns.to_string(), name.to_string(), container.to_string());
    tokio::spawn(async move {
        if following {
            let mut follow = Follow { path, offset, buf: vec![], dec: Decoder::default(), o };
            if !follow.send_until_done(&*host, (&ns, &name, &container), sent, &tx).await {
                return;
            }
        }
        if end == BodyEnd::Apart {
            tokio::select! {
                _ = tokio::time::sleep(END_GAP) => {}
                _ = tx.closed() => {}
            }
        }
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    Ok(([(header::CONTENT_TYPE, "text/plain")], body).into_response())
}

/// Whether the instance whose log is `path` still runs: the container's newest log is this one
/// and its state is running.
fn instance_running(host: &dyn PodHost, ns: &str, name: &str, container: &str, path: &Path) -> bool {
    let Some(pod) = host.pod(ns, name) else { return false };
    let running = container_status(&pod, container).and_then(|st| st.pointer("/state/running")).is_some();
    running && path.parent().map(instance_logs).and_then(|l| l.last().cloned()).as_deref() == Some(path)
}

struct Follow {
    path: PathBuf,
    offset: u64,
    buf: Vec<u8>,
    dec: Decoder,
    o: Options,
}

impl Follow {
    /// Sends what the instance writes until it stops running or the limit is reached (`sent`
    /// bytes went before); false when the client went away.
    async fn send_until_done(
        &mut self,
        host: &dyn PodHost,
        (ns, name, container): (&str, &str, &str),
        mut sent: usize,
        tx: &tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
    ) -> bool {
        loop {
            let still_running = instance_running(host, ns, name, container, &self.path);
            let mut chunk = self.more().await;
            if let Some(limit) = self.o.limit {
                chunk.truncate(limit.saturating_sub(sent));
            }
            sent += chunk.len();
            if !chunk.is_empty() && tx.send(Ok(Bytes::from(chunk))).await.is_err() {
                return false;
            }
            if !still_running || self.o.limit.is_some_and(|l| sent >= l) {
                return true;
            }
            tokio::select! {
                _ = tokio::time::sleep(FOLLOW_INTERVAL) => {}
                _ = tx.closed() => return false,
            }
        }
    }

    /// What was written since the last read, rendered (tail does not apply any more).
    async fn more(&mut self) -> Vec<u8> {
        let mut out = vec![];
        let Ok(mut f) = tokio::fs::File::open(&self.path).await else { return out };
        if f.seek(std::io::SeekFrom::Start(self.offset)).await.is_err() {
            return out;
        }
        let mut new = vec![];
        if let Ok(n) = f.read_to_end(&mut new).await {
            self.offset += n as u64;
            self.buf.extend_from_slice(&new);
        }
        let lines = take_lines(&mut self.buf);
        let mut decoded: Vec<(String, Vec<u8>)> = lines.iter().filter_map(|line| self.dec.line(line)).collect();
        decoded.extend(self.dec.finish());
        let o = Options { tail: None, limit: None, ..self.o.clone() };
        for (time, msg) in decoded {
            render(&time, &msg, &o, &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::HttpBody;
    use serde_json::json;

    #[test]
    fn partial_lines_join_and_timestamps_have_nine_digits() {
        let dir = std::env::temp_dir().join(format!("podwright-logs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("0.log");
        std::fs::write(
            &f,
            "2026-01-01T00:00:00.5Z stdout P hel\n2026-01-01T00:00:00.6Z stdout F lo\n2026-01-01T00:00:01Z stderr F two\n",
        )
        .unwrap();
        let (out, _) = read_all(&f, &Options::default());
        assert_eq!(String::from_utf8(out).unwrap(), "hello\ntwo\n");
        let (out, _) = read_all(&f, &Options { timestamps: true, tail: Some(1), ..Default::default() });
        assert_eq!(String::from_utf8(out).unwrap(), "2026-01-01T00:00:01.000000000Z two\n");
        let since = "2026-01-01T00:00:00.9Z".parse().ok();
        let (out, _) = read_all(&f, &Options { since, limit: Some(2), ..Default::default() });
        assert_eq!(String::from_utf8(out).unwrap(), "tw");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_last_partial_line_is_printed_without_a_newline() {
        // `printf abc` in a container that then exits: containerd writes a P line and no F one.
        let dir = std::env::temp_dir().join(format!("podwright-logs-partial-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("0.log");
        std::fs::write(&f, "2026-01-01T00:00:00.5Z stdout F one\n2026-01-01T00:00:01Z stdout P abc\n").unwrap();
        let (out, _) = read_all(&f, &Options::default());
        assert_eq!(String::from_utf8(out).unwrap(), "one\nabc");
        let (out, _) = read_all(&f, &Options { timestamps: true, tail: Some(1), ..Default::default() });
        assert_eq!(String::from_utf8(out).unwrap(), "2026-01-01T00:00:01.000000000Z abc");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn containers_are_named_as_the_kubelet_asks() {
        let pod =
            json!({"spec": {"containers": [{"name": "app"}, {"name": "side"}], "initContainers": [{"name": "i"}]}});
        let e = pick_container(&pod, None, "web").unwrap_err();
        assert_eq!(
            e.message,
            "a container name must be specified for pod web, choose one of: [app side] or one of the init containers: [i]"
        );
        assert_eq!(
            pick_container(&pod, Some("nope"), "web").unwrap_err().message,
            "container nope is not valid for pod web"
        );
        assert_eq!(pick_container(&pod, Some("i"), "web").unwrap(), "i");
    }

    #[test]
    fn a_waiting_container_says_why() {
        let pod = json!({"metadata": {"uid": "none"}, "status": {"containerStatuses": [{"name": "app", "state": {"waiting": {"reason": "ErrImagePull"}}}]}});
        let e = choose(&pod, "app", "web", false, Path::new("/nonexistent")).unwrap_err();
        assert_eq!(e.message, "container \"app\" in pod \"web\" is waiting to start: image can't be pulled");
        let e = choose(&pod, "app", "web", true, Path::new("/nonexistent")).unwrap_err();
        assert_eq!(e.message, "previous terminated container \"app\" in pod \"web\" not found");
    }

    /// A node with one pod whose container `app` ran and wrote `hello`.
    struct Host {
        pod: Arc<Value>,
        root: PathBuf,
        runtime: Arc<podwright_runtime::FakeRuntime>,
    }

    impl PodHost for Host {
        fn pod(&self, _: &str, _: &str) -> Option<Arc<Value>> {
            Some(self.pod.clone())
        }
        fn pods(&self) -> Vec<Arc<Value>> {
            vec![self.pod.clone()]
        }
        fn runtime(&self) -> &dyn podwright_runtime::Runtime {
            &*self.runtime
        }
        fn root(&self) -> &Path {
            &self.root
        }
        fn now(&self) -> Timestamp {
            Timestamp::UNIX_EPOCH
        }
    }

    fn host(name: &str) -> Arc<dyn PodHost> {
        let root = std::env::temp_dir().join(format!("podwright-logs-{name}-{}", std::process::id()));
        let dir = podwright_node::layout::log_directory(&root, "u-1").join("app");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("0.log"), "2026-01-01T00:00:00Z stdout F hello\n").unwrap();
        let pod = json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
            "spec": {"containers": [{"name": "app"}]},
            "status": {"containerStatuses": [{"name": "app", "state": {"terminated": {"exitCode": 0}}}]}});
        let runtime = podwright_runtime::FakeRuntime::new(podwright_runtime::Clock::new());
        Arc::new(Host { pod: Arc::new(pod), root, runtime })
    }

    fn log_of(host: Arc<dyn PodHost>, end: BodyEnd) -> Response {
        let p = LogParams::default();
        let pod = host.pod("ns", "p").unwrap();
        serve(host, &pod, "ns", "p", "app", &p, Options::default(), end).unwrap()
    }

    #[tokio::test]
    async fn the_local_apis_log_is_one_body_with_its_length() {
        let host = host("whole");
        let answer = log_of(host.clone(), BodyEnd::WithData);
        // A body of known size: hyper gives it a Content-Length.
        assert_eq!(answer.body().size_hint().exact(), Some(6));
        let body = axum::body::to_bytes(answer.into_body(), 1024).await.unwrap();
        assert_eq!(&body[..], b"hello\n");
        std::fs::remove_dir_all(host.root()).unwrap();
    }

    // Tokio's paused clock: the instants are virtual.
    #[allow(clippy::disallowed_methods)]
    #[tokio::test(start_paused = true)]
    async fn the_kubelet_ports_log_ends_apart_from_its_data() {
        use tokio_stream::StreamExt;
        let host = host("apart");
        let answer = log_of(host.clone(), BodyEnd::Apart);
        // No known size: hyper sends it chunked, so the API server's client cannot end the
        // body with the data.
        assert_eq!(answer.body().size_hint().exact(), None);
        let mut body = answer.into_body().into_data_stream();
        let started = tokio::time::Instant::now();
        assert_eq!(&body.next().await.unwrap().unwrap()[..], b"hello\n");
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert!(body.next().await.is_none());
        assert_eq!(started.elapsed(), END_GAP);
        std::fs::remove_dir_all(host.root()).unwrap();
    }
}
