//! The READY, STATUS, RESTARTS and AGE columns of `kubectl get pods`,
//! computed from a Pod object exactly as the API server's table printer does
//! (`pkg/printers/internalversion/printers.go` `printPod`, the sidecar-aware
//! version of Kubernetes 1.29+), with kubectl's human durations
//! (`apimachinery/pkg/util/duration.HumanDuration`).

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::container_kind::is_sidecar;

/// Pod `status.reason` set by the node lifecycle controller for pods on an
/// unreachable node.
pub const NODE_UNREACHABLE_POD_REASON: &str = "NodeLost";

/// The computed columns for one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSummary {
    /// STATUS, e.g. `Running`, `Init:0/2`, `CrashLoopBackOff`.
    pub status: String,
    /// READY, e.g. `1/2` (sidecars count as containers).
    pub ready: String,
    /// RESTARTS, e.g. `3` or `3 (12s ago)`.
    pub restarts: String,
    /// The number in RESTARTS.
    pub restart_count: i32,
    /// AGE, from `metadata.creationTimestamp` (`<unknown>` if unset).
    pub age: String,
}

/// `duration.HumanDuration`: a short approximation with 2–3 significant
/// figures (`12s`, `3m4s`, `15m`, `5h3m`, `2d4h`, `3y12d`).
pub fn human_duration(d: SignedDuration) -> String {
    // Go's time.Duration is nanoseconds; int(d.Seconds()) truncates toward zero.
    let seconds = d.as_secs();
    if seconds < -1 {
        return "<invalid>".to_string();
    } else if seconds < 0 {
        return "0s".to_string();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        format!("{hours}h{m}m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        format!("{}d{}h", hours / 24, h)
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        format!("{}y{}d", hours / 24 / 365, dy)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

/// `translateTimestampSince`: `<unknown>` for an unset time, otherwise the
/// human duration from `ts` to `now`.
pub fn translate_timestamp_since(ts: Option<&Time>, now: Timestamp) -> String {
    match ts {
        None => "<unknown>".to_string(),
        Some(t) => human_duration(now.duration_since(t.0)),
    }
}

fn later(current: &mut Option<Timestamp>, candidate: Option<&Time>) {
    if let Some(t) = candidate
        && current.is_none_or(|c| c < t.0)
    {
        *current = Some(t.0);
    }
}

fn last_termination(cs: &ContainerStatus) -> Option<&Time> {
    cs.last_state.as_ref().and_then(|s| s.terminated.as_ref()).and_then(|t| t.finished_at.as_ref())
}

fn condition_true(conditions: &[PodCondition], type_: &str, first_only: bool) -> bool {
    if first_only {
        // isPodInitializedConditionTrue: the first condition of the type decides.
        conditions.iter().find(|c| c.type_ == type_).is_some_and(|c| c.status == "True")
    } else {
        // hasPodReadyCondition: any condition of the type that is True.
        conditions.iter().any(|c| c.type_ == type_ && c.status == "True")
    }
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

/// Compute kubectl's columns for `pod` as seen at `now`.
pub fn summarize(pod: &Pod, now: Timestamp) -> PodSummary {
    let default_status = PodStatus::default();
    let status = pod.status.as_ref().unwrap_or(&default_status);
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let spec = pod.spec.as_ref();
    let containers: &[Container] = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    let init_containers: &[Container] = spec.and_then(|s| s.init_containers.as_deref()).unwrap_or_default();

    let phase = status.phase.as_deref().unwrap_or_default();
    let mut reason = non_empty(&status.reason).unwrap_or(phase).to_string();
    if conditions.iter().any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("SchedulingGated")) {
        reason = "SchedulingGated".to_string();
    }

    let mut total = containers.len();
    total += init_containers.iter().filter(|c| is_sidecar(c)).count();
    let sidecar_named = |name: &str| init_containers.iter().any(|c| c.name == name && is_sidecar(c));

    let mut ready = 0usize;
    let mut restarts: i32 = 0;
    let mut sidecar_restarts: i32 = 0;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_sidecar_restart: Option<Timestamp> = None;

    let mut initializing = false;
    for (i, cs) in status.init_container_statuses.as_deref().unwrap_or_default().iter().enumerate() {
        restarts = restarts.saturating_add(cs.restart_count);
        later(&mut last_restart, last_termination(cs));
        let sidecar = sidecar_named(&cs.name);
        if sidecar {
            sidecar_restarts = sidecar_restarts.saturating_add(cs.restart_count);
            later(&mut last_sidecar_restart, last_termination(cs));
        }
        let state = cs.state.as_ref();
        let terminated = state.and_then(|s| s.terminated.as_ref());
        let waiting = state.and_then(|s| s.waiting.as_ref());
        if terminated.is_some_and(|t| t.exit_code == 0) {
            continue;
        }
        if sidecar && cs.started == Some(true) {
            if cs.ready {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            // initialization failed
            reason = match non_empty(&t.reason) {
                Some(r) => format!("Init:{r}"),
                None => match t.signal.filter(|s| *s != 0) {
                    Some(sig) => format!("Init:Signal:{sig}"),
                    None => format!("Init:ExitCode:{}", t.exit_code),
                },
            };
        } else if let Some(r) = waiting.and_then(|w| non_empty(&w.reason)).filter(|r| *r != "PodInitializing") {
            reason = format!("Init:{r}");
        } else {
            reason = format!("Init:{}/{}", i, init_containers.len());
        }
        initializing = true;
        break;
    }

    if !initializing || condition_true(conditions, "Initialized", true) {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for cs in status.container_statuses.as_deref().unwrap_or_default().iter().rev() {
            restarts = restarts.saturating_add(cs.restart_count);
            later(&mut last_restart, last_termination(cs));
            let state = cs.state.as_ref();
            let terminated = state.and_then(|s| s.terminated.as_ref());
            let waiting_reason = state.and_then(|s| s.waiting.as_ref()).and_then(|w| non_empty(&w.reason));
            if let Some(r) = waiting_reason {
                reason = r.to_string();
            } else if let Some(t) = terminated {
                reason = match non_empty(&t.reason) {
                    Some(r) => r.to_string(),
                    None => match t.signal.filter(|s| *s != 0) {
                        Some(sig) => format!("Signal:{sig}"),
                        None => format!("ExitCode:{}", t.exit_code),
                    },
                };
            } else if cs.ready && state.is_some_and(|s| s.running.is_some()) {
                has_running = true;
                ready += 1;
            }
        }
        // back to "Running" if a container still runs
        if reason == "Completed" && has_running {
            reason =
                if condition_true(conditions, "Ready", false) { "Running".to_string() } else { "NotReady".to_string() };
        }
    }

    if pod.metadata.deletion_timestamp.is_some() {
        if status.reason.as_deref() == Some(NODE_UNREACHABLE_POD_REASON) {
            reason = "Unknown".to_string();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".to_string();
        }
    }

    let restarts_str = match last_restart {
        Some(t) if restarts != 0 => {
            format!("{restarts} ({} ago)", human_duration(now.duration_since(t)))
        }
        _ => restarts.to_string(),
    };

    PodSummary {
        status: reason,
        ready: format!("{ready}/{total}"),
        restarts: restarts_str,
        restart_count: restarts,
        age: translate_timestamp_since(pod.metadata.creation_timestamp.as_ref(), now),
    }
}

#[cfg(test)]
mod tests;
