//! Lifecycle hook handlers (`exec`, `httpGet`, `sleep`) for `postStart` and `preStop`, with the
//! kubelet's failure texts. Bounding a hook by the grace period is the caller's business.

use crate::events::{EventSink, EventType};
use crate::logs::Output;
use crate::probes::http_get::{self, Request};
use crate::probes::tls::HTTP_RESPONSE_TO_HTTPS;
use jiff::SignedDuration;
use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod};
use podwright_planner::pod::display_name;
use podwright_runtime::{Clock, RuntimeService};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// Exec and HTTP hooks have no timeout of their own.
const UNBOUNDED: Duration = Duration::from_secs(365 * 24 * 3600);

/// Where a hook runs.
pub struct HookTarget<'a> {
    pub runtime: &'a dyn RuntimeService,
    pub events: &'a dyn EventSink,
    pub clock: Clock,
    pub pod: &'a Pod,
    pub container: &'a Container,
    pub container_id: &'a str,
    pub pod_ip: &'a str,
    /// Where an exec hook's output goes for a person to read (`run`'s terminal), if anywhere.
    pub output: Option<&'a UnboundedSender<Output>>,
}

pub use podwright_api::Hook;

impl HookTarget<'_> {
    fn show_output(&self, hook: Hook, stdout: &[u8], stderr: &[u8]) {
        let Some(sink) = self.output else { return };
        let text = String::from_utf8_lossy(&[stdout, stderr].concat()).into_owned();
        if text.is_empty() {
            return;
        }
        let _ = sink.send(Output::Hook { container: self.container.name.clone(), hook: hook.as_str(), text });
    }
}

/// Runs the container's `hook`, `handler`, to its end; `Err` carries the message the kubelet
/// logs.
pub async fn run(t: &HookTarget<'_>, hook: Hook, handler: &LifecycleHandler) -> Result<(), String> {
    let (c, pod) = (&t.container.name, display_name(t.pod));
    if let Some(exec) = &handler.exec {
        // Run as written: the kubelet expands `$(VAR)` in probes, never in hooks.
        let cmd = exec.command.as_deref().unwrap_or_default();
        let result = t.runtime.exec_sync(t.container_id, cmd, Duration::ZERO).await;
        if let Ok(r) = &result {
            t.show_output(hook, &r.stdout, &r.stderr);
        }
        let error = match result {
            Ok(r) if r.exit_code == 0 => return Ok(()),
            Ok(r) => {
                let output = String::from_utf8_lossy(&[r.stdout, r.stderr.clone()].concat()).into_owned();
                let stderr = String::from_utf8_lossy(&r.stderr).into_owned();
                let error = format!("command '{}' exited with {}: {stderr}", cmd.join(" "), r.exit_code);
                (error, output)
            }
            Err(e) => (e.to_string(), String::new()),
        };
        return Err(format!(
            "Exec lifecycle hook ([{}]) for Container {c:?} in Pod {pod:?} failed - error: {}, message: {:?}",
            cmd.join(" "),
            error.0,
            error.1
        ));
    }
    if let Some(action) = &handler.http_get {
        let path = action.path.clone().unwrap_or_default();
        let fail =
            |e: String| format!("HTTP lifecycle hook ({path}) for Container {c:?} in Pod {pod:?} failed - error: {e}");
        let req = Request::for_hook(action, t.container, t.pod_ip).map_err(fail)?;
        // Any answer will do: the kubelet does not look at the status code of a hook's GET.
        return match http_get::get(&req, UNBOUNDED).await {
            Ok(_) => Ok(()),
            // Hooks predate `scheme`: the kubelet retries an HTTPS hook answered in plain HTTP.
            Err(e) if req.https && e.ends_with(HTTP_RESPONSE_TO_HTTPS) => {
                let mut plain = Request { https: false, ..req };
                plain.headers.retain(|(k, _)| !k.eq_ignore_ascii_case("authorization"));
                http_get::get(&plain, UNBOUNDED).await.map_err(|_| fail(e))?;
                let host = format!("{}:{}", plain.host, plain.port);
                let message =
                    format!("request to HTTPS lifecycle hook {host} got HTTP response, retry with HTTP succeeded");
                t.events.record(t.pod, None, EventType::Warning, "LifecycleHTTPFallback", message, t.clock.now());
                Ok(())
            }
            Err(e) => Err(fail(e)),
        };
    }
    if let Some(sleep) = &handler.sleep {
        t.clock.sleep_until(t.clock.now() + SignedDuration::from_secs(sleep.seconds)).await;
        return Ok(());
    }
    Err(format!("Cannot run handler: invalid handler for Container {c:?} in Pod {pod:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventLog;
    use podwright_runtime::FakeRuntime;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn an_https_hook_answered_in_plain_http_is_retried_over_http() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let mut requests = vec![];
            for _ in 0..2 {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                requests.push(buf[..n].to_vec());
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await.unwrap();
            }
            requests
        });
        let clock = Clock::new();
        let runtime = FakeRuntime::new(clock);
        let events = EventLog::default();
        let pod: Pod = serde_json::from_value(serde_json::json!({"metadata": {"name": "p", "uid": "u"}})).unwrap();
        let container: Container = serde_json::from_value(serde_json::json!({"name": "c"})).unwrap();
        let handler: LifecycleHandler = serde_json::from_value(serde_json::json!({"httpGet": {
            "host": "127.0.0.1", "port": port, "path": "/hook", "scheme": "HTTPS",
            "httpHeaders": [{"name": "Authorization", "value": "secret"}],
        }}))
        .unwrap();
        let target = HookTarget {
            runtime: runtime.as_ref(),
            events: &events,
            clock,
            pod: &pod,
            container: &container,
            container_id: "id",
            pod_ip: "10.0.0.9",
            output: None,
        };
        assert_eq!(run(&target, Hook::PostStart, &handler).await, Ok(()));
        let requests = server.await.unwrap();
        // The first connection got a TLS hello; the retry is plain HTTP without the credentials.
        assert_eq!(requests[0][0], 0x16, "a TLS handshake record");
        let retry = String::from_utf8_lossy(&requests[1]);
        assert!(retry.starts_with("GET /hook HTTP/1.1\r\n") && !retry.contains("secret"), "{retry}");
        let fallback = events.snapshot().into_iter().find(|e| e.reason.as_deref() == Some("LifecycleHTTPFallback"));
        let message = fallback.expect("a LifecycleHTTPFallback event").message.unwrap();
        assert_eq!(
            message,
            format!("request to HTTPS lifecycle hook 127.0.0.1:{port} got HTTP response, retry with HTTP succeeded")
        );
    }
}
