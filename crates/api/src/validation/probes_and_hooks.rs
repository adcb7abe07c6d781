//! Probes and lifecycle hooks: their handlers, ports and timings.

use k8s_openapi::api::core::v1::{
    ExecAction, GRPCAction, HTTPGetAction, Lifecycle, LifecycleHandler, Probe, SleepAction, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{Errors, IS_NEGATIVE, str_or_empty};
use crate::field_error::{FieldError, FieldPath};
use crate::formats::{is_http_header_name, is_valid_port_name, is_valid_port_num};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum ProbeKind {
    Liveness,
    Readiness,
    Startup,
}

pub(super) fn validate_probe_of(
    kind: ProbeKind,
    probe: Option<&Probe>,
    grace: Option<i64>,
    container_path: &FieldPath,
    errs: &mut Errors,
) {
    let Some(probe) = probe else { return };
    let field = match kind {
        ProbeKind::Liveness => "livenessProbe",
        ProbeKind::Readiness => "readinessProbe",
        ProbeKind::Startup => "startupProbe",
    };
    let p = container_path.child(field);
    validate_probe(probe, grace, &p, errs);
    match kind {
        ProbeKind::Liveness | ProbeKind::Startup => {
            let st = probe.success_threshold.unwrap_or(0);
            if st != 1 {
                errs.push(FieldError::invalid(p.child("successThreshold"), st, "must be 1"));
            }
        }
        ProbeKind::Readiness => {
            if let Some(g) = probe.termination_grace_period_seconds {
                errs.push(FieldError::invalid(
                    p.child("terminationGracePeriodSeconds"),
                    g,
                    "must not be set for readinessProbes",
                ));
            }
        }
    }
}

fn validate_probe(probe: &Probe, grace: Option<i64>, path: &FieldPath, errs: &mut Errors) {
    validate_handler(
        Handler {
            exec: probe.exec.as_ref(),
            http_get: probe.http_get.as_ref(),
            tcp_socket: probe.tcp_socket.as_ref(),
            grpc: probe.grpc.as_ref(),
            sleep: None,
        },
        grace,
        path,
        errs,
    );
    for (field, v) in [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ] {
        let v = v.unwrap_or(0);
        if v < 0 {
            errs.push(FieldError::invalid(path.child(field), i64::from(v), IS_NEGATIVE));
        }
    }
    if let Some(g) = probe.termination_grace_period_seconds
        && g <= 0
    {
        errs.push(FieldError::invalid(path.child("terminationGracePeriodSeconds"), g, "must be greater than 0"));
    }
}

struct Handler<'a> {
    exec: Option<&'a ExecAction>,
    http_get: Option<&'a HTTPGetAction>,
    tcp_socket: Option<&'a TCPSocketAction>,
    grpc: Option<&'a GRPCAction>,
    sleep: Option<&'a SleepAction>,
}

fn validate_handler(h: Handler<'_>, grace: Option<i64>, path: &FieldPath, errs: &mut Errors) {
    const MORE_THAN_ONE: &str = "may not specify more than 1 handler type";
    let mut n = 0;
    if let Some(exec) = h.exec {
        n += 1;
        if exec.command.as_ref().is_none_or(|c| c.is_empty()) {
            errs.push(FieldError::required(path.child("exec").child("command"), ""));
        }
    }
    if let Some(http) = h.http_get {
        let p = path.child("httpGet");
        if n > 0 {
            errs.push(FieldError::forbidden(p, MORE_THAN_ONE));
        } else {
            n += 1;
            if str_or_empty(&http.path).is_empty() {
                errs.push(FieldError::required(p.child("path"), ""));
            }
            validate_port_num_or_name(&http.port, &p.child("port"), errs);
            let scheme = str_or_empty(&http.scheme);
            if scheme != "HTTP" && scheme != "HTTPS" {
                errs.push(FieldError::not_supported(p.child("scheme"), scheme, &["HTTP", "HTTPS"]));
            }
            for header in http.http_headers.iter().flatten() {
                for msg in is_http_header_name(&header.name) {
                    errs.push(FieldError::invalid(p.child("httpHeaders"), &header.name, msg));
                }
            }
        }
    }
    if let Some(tcp) = h.tcp_socket {
        let p = path.child("tcpSocket");
        if n > 0 {
            errs.push(FieldError::forbidden(p, MORE_THAN_ONE));
        } else {
            n += 1;
            validate_port_num_or_name(&tcp.port, &p.child("port"), errs);
        }
    }
    if let Some(grpc) = h.grpc {
        let p = path.child("grpc");
        if n > 0 {
            errs.push(FieldError::forbidden(p, MORE_THAN_ONE));
        } else {
            n += 1;
            for msg in is_valid_port_num(i64::from(grpc.port)) {
                errs.push(FieldError::invalid(p.child("port"), grpc.port, msg));
            }
        }
    }
    if let Some(sleep) = h.sleep {
        let p = path.child("sleep");
        if n > 0 {
            errs.push(FieldError::forbidden(p, MORE_THAN_ONE));
        } else {
            n += 1;
            // Zero is allowed (PodLifecycleSleepActionAllowZero, on by default in 1.33).
            if let Some(g) = grace
                && (sleep.seconds < 0 || sleep.seconds > g)
            {
                errs.push(FieldError::invalid(
                    p,
                    sleep.seconds,
                    format!("must be non-negative and less than terminationGracePeriodSeconds ({g})"),
                ));
            }
        }
    }
    if n == 0 {
        errs.push(FieldError::required(path.clone(), "must specify a handler type"));
    }
}

fn validate_port_num_or_name(port: &IntOrString, path: &FieldPath, errs: &mut Errors) {
    match port {
        IntOrString::Int(n) => {
            for msg in is_valid_port_num(i64::from(*n)) {
                errs.push(FieldError::invalid(path.clone(), *n, msg));
            }
        }
        IntOrString::String(s) => {
            for msg in is_valid_port_name(s) {
                errs.push(FieldError::invalid(path.clone(), s, msg));
            }
        }
    }
}

pub(super) fn validate_lifecycle(l: &Lifecycle, grace: Option<i64>, path: &FieldPath, errs: &mut Errors) {
    for (field, handler) in [("postStart", &l.post_start), ("preStop", &l.pre_stop)] {
        if let Some(h) = handler {
            validate_lifecycle_handler(h, grace, &path.child(field), errs);
        }
    }
}

fn validate_lifecycle_handler(h: &LifecycleHandler, grace: Option<i64>, path: &FieldPath, errs: &mut Errors) {
    validate_handler(
        Handler {
            exec: h.exec.as_ref(),
            http_get: h.http_get.as_ref(),
            tcp_socket: h.tcp_socket.as_ref(),
            grpc: None,
            sleep: h.sleep.as_ref(),
        },
        grace,
        path,
        errs,
    );
}
