//! The `grpc` probe: one call of the standard health service, `grpc.health.v1.Health/Check`,
//! with the kubelet's result texts.

use std::time::Duration;
use tonic::codegen::http::uri::PathAndQuery;

#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    service: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckResponse {
    #[prost(int32, tag = "1")]
    status: i32,
}

/// `grpc.health.v1.HealthCheckResponse.ServingStatus`.
const STATUS_NAMES: [&str; 4] = ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"];
const SERVING: i32 = 1;

/// `Ok` when the service answers SERVING; otherwise the kubelet's failure text.
pub async fn check(host: &str, port: u16, service: &str, timeout: Duration) -> Result<(), String> {
    let addr = crate::probes::http_get::authority(host, port);
    let secs = timeout.as_secs_f64();
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| format!("failed to connect service {addr:?}: {e}"))?
        .connect_timeout(timeout)
        .timeout(timeout)
        .user_agent(crate::probes::http_get::USER_AGENT)
        .map_err(|e| e.to_string())?;
    let channel = match tokio::time::timeout(timeout, endpoint.connect()).await {
        Ok(Ok(c)) => c,
        _ => return Err(format!("timeout: failed to connect service {addr:?} within {secs}s")),
    };
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.map_err(|e| format!("timeout: failed to connect service {addr:?} within {secs}s: {e}"))?;
    let request = tonic::Request::new(HealthCheckRequest { service: service.to_string() });
    let path = PathAndQuery::from_static("/grpc.health.v1.Health/Check");
    let codec = tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default();
    match tokio::time::timeout(timeout, client.unary(request, path, codec)).await {
        Err(_) => Err(format!("timeout: health rpc did not complete within {secs}s")),
        Ok(Err(s)) if s.code() == tonic::Code::Unimplemented => Err(format!(
            "this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
            s.message()
        )),
        Ok(Err(s)) if s.code() == tonic::Code::DeadlineExceeded => {
            Err(format!("timeout: health rpc did not complete within {secs}s"))
        }
        Ok(Err(s)) => Err(format!("error: health rpc probe failed: {}", s.message())),
        Ok(Ok(resp)) if resp.get_ref().status == SERVING => Ok(()),
        Ok(Ok(resp)) => {
            let code = resp.get_ref().status;
            let name = usize::try_from(code).ok().and_then(|i| STATUS_NAMES.get(i)).copied().unwrap_or("UNKNOWN");
            Err(format!("service unhealthy (responded with {name:?})"))
        }
    }
}
