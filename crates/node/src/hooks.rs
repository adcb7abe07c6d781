//! Lifecycle hook handlers (`exec`, `httpGet`, `sleep`) for `postStart` and `preStop`, with the
//! kubelet's failure texts. Bounding a hook by the grace period is the caller's business.

use crate::http_get::{self, Request};
use crate::probe;
use jiff::SignedDuration;
use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod};
use podwright_planner::pod::display_name;
use podwright_runtime::{Clock, RuntimeService};
use std::time::Duration;

/// Exec and HTTP hooks have no timeout of their own.
const UNBOUNDED: Duration = Duration::from_secs(365 * 24 * 3600);

/// Where a hook runs.
pub struct HookTarget<'a> {
    pub runtime: &'a dyn RuntimeService,
    pub clock: Clock,
    pub pod: &'a Pod,
    pub container: &'a Container,
    pub container_id: &'a str,
    pub pod_ip: &'a str,
}

/// Runs the handler to its end; `Err` carries the message the kubelet logs.
pub async fn run(t: &HookTarget<'_>, handler: &LifecycleHandler) -> Result<(), String> {
    let (c, pod) = (&t.container.name, display_name(t.pod));
    if let Some(exec) = &handler.exec {
        let cmd = probe::command(exec.command.as_deref().unwrap_or_default(), t.container);
        let error = match t.runtime.exec_sync(t.container_id, &cmd, Duration::ZERO).await {
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
        let req = Request::new(action, t.container, t.pod_ip).map_err(fail)?;
        // Any answer will do: the kubelet does not look at the status code of a hook's GET.
        return http_get::get(&req, UNBOUNDED).await.map(|_| ()).map_err(fail);
    }
    if let Some(sleep) = &handler.sleep {
        t.clock.sleep_until(t.clock.now() + SignedDuration::from_secs(sleep.seconds)).await;
        return Ok(());
    }
    Err(format!("Cannot run handler: invalid handler for Container {c:?} in Pod {pod:?}"))
}
