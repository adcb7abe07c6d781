//! `exec`, `attach` and `portforward`: proxied to the runtime's streaming server.

use crate::errors::{ApiError, ApiResult};
use crate::server::ApiServer;
use axum::response::Response;

pub async fn proxy(
    _s: &ApiServer,
    _ns: &str,
    _name: &str,
    sub: &str,
    _req: axum::extract::Request,
) -> ApiResult<Response> {
    Err(ApiError::bad_request(format!("pods/{sub} is not served yet")))
}
