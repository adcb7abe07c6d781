//! Watches: one JSON event per line on a chunked response, from a resourceVersion (or with
//! the current objects first), with bookmarks and `timeoutSeconds`, as client-go expects
//! (apiserver `pkg/endpoints/handlers/watch.go`).

use crate::errors::{ApiError, ApiResult};
use crate::persist::EventRows;
use crate::request::Params;
use crate::resources::Resource;
use crate::selectors::Filter;
use crate::server::ApiServer;
use crate::store::{Change, meta_str, object_rv, parsed_events};
use crate::table::{self, Include};
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::error::SendTimeoutError;
use tokio::sync::{broadcast, mpsc};

/// How often an idle watch that allows bookmarks gets one (the API server sends them about
/// once a minute).
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

/// The events a watch holds that its client has not taken yet.
const BUFFERED_EVENTS: usize = 64;

/// How long a change waits for room among a watch's [`BUFFERED_EVENTS`] before the watch ends.
const SLOW_WATCHER_WAIT: Duration = Duration::from_millis(250);

/// An event as one line of the stream.
fn line(event: &Value) -> Bytes {
    let mut line = event.to_string();
    line.push('\n');
    Bytes::from(line)
}

struct Watch {
    server: ApiServer,
    resource: Resource,
    ns: Option<String>,
    filter: Filter,
    table: Option<Include>,
    /// Whether the Table column definitions have been sent (only the first event has them).
    sent_columns: bool,
    out: mpsc::Sender<Result<Bytes, std::convert::Infallible>>,
}

impl Watch {
    fn wanted(&self, c: &Change) -> bool {
        c.resource == self.resource
            && self.ns.as_deref().is_none_or(|ns| meta_str(&c.object, "namespace") == Some(ns))
            && self.filter.matches(&c.object)
    }

    fn render(&mut self, kind: &str, obj: &Value, rv: u64) -> Value {
        let object = match self.table {
            Some(include) => {
                let with_columns = !self.sent_columns;
                self.sent_columns = true;
                table::table(self.resource, &[obj], rv, self.server.now(), include, with_columns)
            }
            None => obj.clone(),
        };
        json!({"type": kind, "object": object})
    }

    /// Sends one line; false once the client is gone.
    async fn send(&mut self, event: Value) -> bool {
        self.out.send(Ok(line(&event))).await.is_ok()
    }

    /// Sends a change as it happens; false once the client is gone, or when it has not made
    /// room for the change within [`SLOW_WATCHER_WAIT`]: the watch then ends, as the API
    /// server's watch cache ends an unresponsive watcher's, and the client watches again from
    /// the last resourceVersion it read.
    async fn change(&mut self, c: &Change) -> bool {
        if !self.wanted(c) {
            return true;
        }
        let ev = self.render(c.kind.as_str(), &c.object, c.rv);
        match self.out.send_timeout(Ok(line(&ev)), SLOW_WATCHER_WAIT).await {
            Ok(()) => true,
            Err(SendTimeoutError::Timeout(_)) => {
                tracing::debug!(resource = self.resource.plural(), "ending a watch whose client does not read");
                false
            }
            Err(SendTimeoutError::Closed(_)) => false,
        }
    }

    /// Sends every event of `rows` the watch wants as ADDED, on a thread that may block; false
    /// once the client is gone or does not read (as [`Watch::change`]), or after an ERROR when
    /// the file could not be read. Events written after `rv` (read from a later page) are left
    /// to the changes that follow, which have them.
    fn send_rows(&mut self, rows: EventRows, rv: u64) -> bool {
        let runtime = tokio::runtime::Handle::current();
        for event in parsed_events(rows) {
            // The line to send, and whether more may follow it.
            let (ev, more) = match event {
                Ok(event) if !self.filter.matches(&event) || object_rv(&event) > Some(rv) => continue,
                Ok(event) => (self.render("ADDED", &event, rv), true),
                Err(e) => {
                    tracing::error!(e = %e.message, "a watch's events could not be read");
                    (json!({"type": "ERROR", "object": e.status()}), false)
                }
            };
            if runtime.block_on(self.out.send_timeout(Ok(line(&ev)), SLOW_WATCHER_WAIT)).is_err() || !more {
                return false;
            }
        }
        true
    }

    async fn bookmark(&mut self, rv: u64, initial_end: bool) -> bool {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let ev = json!({"type": "BOOKMARK", "object": {"kind": self.resource.kind(), "apiVersion": self.resource.api_version(), "metadata": meta}});
        self.send(ev).await
    }
}

/// The objects a watch begins with, when it is asked to.
enum Initial {
    Objects(Vec<Arc<Value>>),
    /// Events, read from the store's file as they are sent: all at once they would take some
    /// 5 KiB of memory each.
    Rows(EventRows),
}

/// Starts a watch and answers with its stream.
pub fn serve(
    server: ApiServer,
    resource: Resource,
    ns: Option<String>,
    filter: Filter,
    p: &Params,
    table: Option<Include>,
) -> ApiResult<Response> {
    let from: Option<u64> = match p.resource_version.as_deref() {
        None | Some("" | "0") => None,
        Some(rv) => Some(rv.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?),
    };
    let initial = from.is_none() || p.initial_events();
    let bookmarks = p.bookmarks();
    let initial_end_bookmark = p.initial_events() && bookmarks;
    let timeout = p.timeout_seconds.map(Duration::from_secs);
    let (out, rx) = mpsc::channel(BUFFERED_EVENTS);
    let mut w = Watch { server: server.clone(), resource, ns, filter, table, sent_columns: false, out };
    // Taken now, so that nothing changed between this request and the stream is missed.
    let event_rows =
        if initial && resource == Resource::Events { server.store().event_rows(w.ns.as_deref()) } else { None };
    let started = match event_rows {
        Some(rows) => rows.and_then(|rows| {
            let rv = rows.rv;
            server.store().watch(Some(rv)).map(|(backlog, rx)| (Initial::Rows(rows), rv, backlog, rx))
        }),
        None if initial => server.store().try_list(resource, w.ns.as_deref()).and_then(|(items, rv)| {
            server.store().watch(Some(rv)).map(|(backlog, rx)| (Initial::Objects(items), rv, backlog, rx))
        }),
        None => {
            let from = from.unwrap_or_default();
            server.store().watch(Some(from)).map(|(backlog, rx)| (Initial::Objects(vec![]), from, backlog, rx))
        }
    };
    tokio::spawn(async move {
        let (initial, mut rv, backlog, mut changes) = match started {
            Ok(s) => s,
            Err(e) => {
                let _ = w.send(json!({"type": "ERROR", "object": e.status()})).await;
                return;
            }
        };
        match initial {
            Initial::Objects(items) => {
                for obj in &items {
                    if !w.filter.matches(obj) {
                        continue;
                    }
                    let ev = w.render("ADDED", obj, rv);
                    if !w.send(ev).await {
                        return;
                    }
                }
            }
            Initial::Rows(rows) => {
                let sent = tokio::task::spawn_blocking(move || {
                    let sent = w.send_rows(rows, rv);
                    (w, sent)
                });
                match sent.await {
                    Ok((back, true)) => w = back,
                    _ => return,
                }
            }
        }
        if initial_end_bookmark && !w.bookmark(rv, true).await {
            return;
        }
        for c in &backlog {
            rv = c.rv;
            if !w.change(c).await {
                return;
            }
        }
        run(&mut w, &mut changes, rv, bookmarks, timeout).await;
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    Ok(([(header::CONTENT_TYPE, "application/json")], Body::from_stream(stream)).into_response())
}

async fn run(
    w: &mut Watch,
    changes: &mut broadcast::Receiver<Change>,
    mut rv: u64,
    bookmarks: bool,
    timeout: Option<Duration>,
) {
    let timeout = tokio::time::sleep(timeout.unwrap_or(Duration::MAX / 4));
    tokio::pin!(timeout);
    let mut ticks = tokio::time::interval(BOOKMARK_EVERY);
    ticks.tick().await;
    loop {
        tokio::select! {
            c = changes.recv() => match c {
                Ok(c) => {
                    if c.rv <= rv { continue; }
                    rv = c.rv;
                    if !w.change(&c).await { return; }
                }
                // Fell behind: end, and the client lists again.
                Err(_) => return,
            },
            _ = ticks.tick(), if bookmarks => {
                if !w.bookmark(rv, false).await { return; }
            }
            _ = w.out.closed() => return,
            _ = &mut timeout => return,
        }
    }
}
