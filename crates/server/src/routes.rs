//! The API's route table: every path and method of the local API to its handler, over the
//! shared [`ApiServer`]. The handlers import the state, never the router, so that the router is
//! the one module that knows them all.

use crate::errors::{ApiError, ApiResult};
use crate::mirror::node_uid;
use crate::resources::Resource;
use crate::server::ApiServer;
use crate::{api, discovery, openapi, usage};
use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// `/healthz` and `/readyz`: OK, or 500 naming the failing check as the API server words it
/// (its etcd check is the store's here: whether its last commit succeeded). `/livez` leaves
/// it out, as the API server's does: a restart does not make a full disk any emptier.
async fn health(State(api): State<ApiServer>) -> Response {
    match api.store().health() {
        Ok(()) => "ok".into_response(),
        Err(why) => (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("[+]ping ok\n[-]store failed: {why}\nhealthz check failed\n"),
        )
            .into_response(),
    }
}

impl ApiServer {
    /// Every route of the API.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/api", get(discovery::api))
            .route("/api/v1", get(discovery::api_v1))
            .route("/apis", get(discovery::apis))
            .route("/apis/node.k8s.io", get(discovery::node_group_versions))
            .route("/apis/node.k8s.io/v1", get(discovery::node_v1))
            .route("/apis/node.k8s.io/v1/{resource}", get(api::node_list).post(api::node_create))
            .route(
                "/apis/node.k8s.io/v1/{resource}/{name}",
                get(api::node_get).put(api::node_replace).patch(api::node_patch).delete(api::node_delete),
            )
            .route("/version", get(discovery::version))
            .route("/openapi/v2", get(openapi::v2))
            .route("/swagger-2.0.0.pb-v1", get(openapi::v2_protobuf_legacy))
            .route("/openapi/v3", get(openapi::v3_index))
            .route("/openapi/v3/api/v1", get(openapi::v3_group))
            .route("/healthz", get(health))
            .route("/readyz", get(health))
            .route("/livez", get(|| async { "ok" }))
            .route("/api/v1/nodes", get(usage::list_nodes))
            .route("/api/v1/nodes/{name}", get(usage::get_node))
            .route("/api/v1/nodes/{name}/proxy/{*path}", get(usage::node_proxy))
            .route("/stats/summary", get(usage::summary))
            .route("/metrics/resource", get(usage::resource_metrics))
            .route("/apis/metrics.k8s.io", get(usage::group))
            .route("/apis/metrics.k8s.io/v1beta1", get(usage::resource_list))
            .route("/apis/metrics.k8s.io/v1beta1/pods", get(usage::list_all_pods))
            .route("/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods", get(usage::list_pods))
            .route("/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/{name}", get(usage::get_pod))
            .route("/apis/metrics.k8s.io/v1beta1/nodes", get(usage::list_node_metrics))
            .route("/apis/metrics.k8s.io/v1beta1/nodes/{name}", get(usage::get_node_metrics))
            .route("/api/v1/{resource}", get(api::list_all).post(api::create_cluster))
            .route(
                "/api/v1/namespaces/{name}",
                get(api::get_namespace)
                    .put(api::replace_namespace)
                    .patch(api::patch_namespace)
                    .delete(api::delete_namespace),
            )
            .route("/api/v1/namespaces/{ns}/{resource}", get(api::list).post(api::create))
            .route(
                "/api/v1/namespaces/{ns}/{resource}/{name}",
                get(api::get).put(api::replace).patch(api::patch).delete(api::delete),
            )
            .route(
                "/api/v1/namespaces/{ns}/{resource}/{name}/{sub}",
                get(api::sub_get).post(api::sub_post).put(api::sub_put).patch(api::sub_patch),
            )
            .route("/podwright/v1/namespaces/{ns}/pods/{name}/timeline", get(timeline))
            .fallback(|| async { ApiError::no_such_path() })
            .with_state(self.clone())
    }
}

/// A pod's timeline as one HTML page (`podwright timeline POD`).
async fn timeline(State(s): State<ApiServer>, Path((ns, name)): Path<(String, String)>) -> ApiResult<Response> {
    let pod = s.store().get(Resource::Pods, &ns, &name)?;
    let uid = node_uid(&pod);
    let html = s.sink().render_pod(uid).ok_or_else(|| ApiError::not_found(Resource::Pods, &name))?;
    Ok(([(axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response())
}
