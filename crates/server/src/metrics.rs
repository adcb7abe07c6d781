//! `/metrics`: the node's metrics in the Prometheus text format, as the kubelet serves them.

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use podwright_node::Metrics;
use podwright_node::metrics::CONTENT_TYPE;
use std::sync::Arc;

/// The `/metrics` route, to merge into the API's router.
pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new().route("/metrics", get(render)).with_state(metrics)
}

async fn render(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    page(&metrics)
}

/// The page of `/metrics`, for the local API and the kubelet port alike.
pub(crate) fn page(metrics: &Metrics) -> impl IntoResponse + use<> {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], metrics.render())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn serves_the_text_format() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router(Arc::new(Metrics::default()))).await });
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut reply = String::new();
        conn.read_to_string(&mut reply).await.unwrap();
        assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
        assert!(reply.contains("content-type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{reply}");
        assert!(reply.contains("\r\n\r\n# HELP kubelet_pod_start_duration_seconds "), "{reply}");
        assert!(reply.contains("\nkubelet_running_pods 0\n"), "{reply}");
    }
}
