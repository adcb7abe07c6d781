//! One probe attempt of any kind (`exec`, `httpGet`, `tcpSocket`, `grpc`) against one container
//! instance, with the kubelet's outcome texts.

use crate::probes::http_get::{self, Request};
use k8s_openapi::api::core::v1::{Container, Probe};
use podwright_api::expansion::expand;
use podwright_runtime::{RuntimeError, RuntimeService};
use std::collections::BTreeMap;
use std::time::Duration;

/// The kubelet keeps at most this much of an exec probe's output.
const MAX_OUTPUT: usize = 10 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Counts as a success; the text becomes a `ProbeWarning` event.
    Warning(String),
    /// Counts towards `failureThreshold`; the text goes into the `Unhealthy` event.
    Failure(String),
    /// The probe could not be run (runtime error): retried, and not counted when it persists.
    Error(String),
}

/// What a probe runs against.
pub struct Target<'a> {
    pub runtime: &'a dyn RuntimeService,
    pub container_id: &'a str,
    pub container: &'a Container,
    pub pod_ip: &'a str,
}

/// `timeoutSeconds`, defaulted to 1 like the API server does.
pub fn timeout(probe: &Probe) -> Duration {
    Duration::from_secs(probe.timeout_seconds.unwrap_or(1).max(1) as u64)
}

/// An exec probe's command with `$(VAR)` references to the container's `env` expanded from
/// the values as written (the kubelet's `ExpandContainerCommandOnlyStatic`): every entry counts,
/// unexpanded, and one set from `valueFrom` counts as empty. Lifecycle hooks expand nothing.
pub fn command(cmd: &[String], container: &Container) -> Vec<String> {
    let env: BTreeMap<String, String> =
        container.env.iter().flatten().map(|e| (e.name.clone(), e.value.clone().unwrap_or_default())).collect();
    cmd.iter().map(|s| expand(s, &env)).collect()
}

pub async fn attempt(t: &Target<'_>, probe: &Probe) -> Outcome {
    let timeout = timeout(probe);
    if let Some(exec) = &probe.exec {
        let cmd = command(exec.command.as_deref().unwrap_or_default(), t.container);
        return match t.runtime.exec_sync(t.container_id, &cmd, timeout).await {
            Ok(r) if r.exit_code == 0 => Outcome::Success,
            Ok(r) => {
                let mut output = [r.stdout, r.stderr].concat();
                output.truncate(MAX_OUTPUT);
                Outcome::Failure(String::from_utf8_lossy(&output).into_owned())
            }
            Err(RuntimeError::DeadlineExceeded(_)) => {
                Outcome::Failure(format!("command {:?} timed out", cmd.join(" ")))
            }
            Err(e) => Outcome::Error(e.to_string()),
        };
    }
    if let Some(action) = &probe.http_get {
        let req = match Request::new(action, t.container, t.pod_ip) {
            Ok(r) => r,
            Err(e) => return Outcome::Error(e),
        };
        return match http_get::get(&req, timeout).await {
            Ok(r) if r.redirected_away.is_some() => {
                Outcome::Warning(format!("Probe terminated redirects, Response body: {}", r.body))
            }
            Ok(r) if (200..400).contains(&r.status) => Outcome::Success,
            Ok(r) => Outcome::Failure(format!("HTTP probe failed with statuscode: {}", r.status)),
            Err(e) => Outcome::Failure(e),
        };
    }
    if let Some(action) = &probe.tcp_socket {
        let port = match http_get::resolve_port(&action.port, t.container) {
            Ok(p) => p,
            Err(e) => return Outcome::Error(e),
        };
        let host = action.host.clone().filter(|h| !h.is_empty()).unwrap_or_else(|| t.pod_ip.to_string());
        let authority = http_get::authority(&host, port);
        return match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host.as_str(), port))).await {
            Ok(Ok(_)) => Outcome::Success,
            Ok(Err(e)) => Outcome::Failure(http_get::dial_error(&authority, &e)),
            Err(_) => Outcome::Failure(http_get::dial_error(&authority, &std::io::ErrorKind::TimedOut.into())),
        };
    }
    if let Some(action) = &probe.grpc {
        let Ok(port) = u16::try_from(action.port) else {
            return Outcome::Error(format!("invalid port number: {}", action.port));
        };
        let service = action.service.as_deref().unwrap_or_default();
        return match crate::probes::grpc_health::check(t.pod_ip, port, service, timeout).await {
            Ok(()) => Outcome::Success,
            Err(e) => Outcome::Failure(e),
        };
    }
    Outcome::Error("missing probe handler".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_see_the_env_values_as_written() {
        let c: Container = serde_json::from_value(serde_json::json!({
            "name": "c",
            "env": [
                {"name": "A", "value": "a"},
                {"name": "B", "value": "$(A)b"},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            ]
        }))
        .unwrap();
        let cmd = command(&["echo".into(), "$(A) $(B) [$(IP)] $(C) $$(A)".into()], &c);
        assert_eq!(cmd, vec!["echo".to_string(), "a $(A)b [] $(C) $(A)".to_string()]);
    }
}
