//! `/metrics/resource`: the Summary's CPU and memory in the Prometheus text format, as the
//! kubelet's resource metrics collector writes them (`pkg/kubelet/metrics/collectors/
//! resource_metrics.go`): cumulative CPU in core-seconds, working sets in bytes, each sample
//! stamped with the time it was read, and whether the read failed.

use super::summary::{CpuStats, MemoryStats, Summary};
use crate::metrics::header;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::fmt::Write;

/// The families, in the order Go's registry writes them (by name), with their type and help.
const CONTAINER_CPU: (&str, &str, &str) = (
    "container_cpu_usage_seconds_total",
    "counter",
    "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
);
const CONTAINER_MEMORY: (&str, &str, &str) =
    ("container_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the container in bytes");
const CONTAINER_START: (&str, &str, &str) =
    ("container_start_time_seconds", "gauge", "[STABLE] Start time of the container since unix epoch in seconds");
const NODE_CPU: (&str, &str, &str) =
    ("node_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the node in core-seconds");
const NODE_MEMORY: (&str, &str, &str) =
    ("node_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the node in bytes");
const POD_CPU: (&str, &str, &str) =
    ("pod_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds");
const POD_MEMORY: (&str, &str, &str) =
    ("pod_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the pod in bytes");
const SCRAPE_ERROR: (&str, &str, &str) =
    ("resource_scrape_error", "gauge", "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise");
/// The older name of `resource_scrape_error`, still written for scrapers that read it.
const SCRAPE_ERROR_OLD: (&str, &str, &str) = (
    "scrape_error",
    "gauge",
    "[ALPHA] (Deprecated since 1.29.0) 1 if there was an error while getting container metrics, 0 otherwise",
);

/// One series: its labels (already written, sorted by name) and its sample.
type Series = Vec<(String, String)>;

/// The text of `/metrics/resource` for `summary`, or for a failed read (`None`).
pub fn render(summary: Option<&Summary>) -> String {
    let mut out = String::with_capacity(4096);
    if let Some(s) = summary {
        let mut container_cpu = Series::new();
        let mut container_memory = Series::new();
        let mut container_start = Series::new();
        let mut pod_cpu = Series::new();
        let mut pod_memory = Series::new();
        let mut pods: Vec<_> = s.pods.iter().collect();
        pods.sort_by(|a, b| (&a.pod_ref.namespace, &a.pod_ref.name).cmp(&(&b.pod_ref.namespace, &b.pod_ref.name)));
        for pod in &pods {
            let (ns, name) = (escape(&pod.pod_ref.namespace), escape(&pod.pod_ref.name));
            for c in &pod.containers {
                let labels = format!("container=\"{}\",namespace=\"{ns}\",pod=\"{name}\"", escape(&c.name));
                let start = c.start_time.0.as_nanosecond() as f64 / 1e9;
                if start > 0.0 {
                    container_start.push((labels.clone(), go_float(start)));
                }
                push_cpu(&mut container_cpu, &labels, c.cpu.as_ref());
                push_memory(&mut container_memory, &labels, c.memory.as_ref());
            }
            let labels = format!("namespace=\"{ns}\",pod=\"{name}\"");
            push_cpu(&mut pod_cpu, &labels, pod.cpu.as_ref());
            push_memory(&mut pod_memory, &labels, pod.memory.as_ref());
        }
        let mut node_cpu = Series::new();
        let mut node_memory = Series::new();
        push_cpu(&mut node_cpu, "", s.node.cpu.as_ref());
        push_memory(&mut node_memory, "", s.node.memory.as_ref());
        for (family, mut series) in [
            (CONTAINER_CPU, container_cpu),
            (CONTAINER_MEMORY, container_memory),
            (CONTAINER_START, container_start),
            (NODE_CPU, node_cpu),
            (NODE_MEMORY, node_memory),
            (POD_CPU, pod_cpu),
            (POD_MEMORY, pod_memory),
        ] {
            series.sort();
            write_family(&mut out, family, &series);
        }
    }
    let failed = if summary.is_some() { "0" } else { "1" };
    for family in [SCRAPE_ERROR, SCRAPE_ERROR_OLD] {
        write_family(&mut out, family, &[(String::new(), failed.to_string())]);
    }
    out
}

fn push_cpu(series: &mut Series, labels: &str, cpu: Option<&CpuStats>) {
    if let Some(cpu) = cpu
        && let Some(ns) = cpu.usage_core_nano_seconds
    {
        series.push((labels.to_string(), stamped(ns as f64 / 1e9, &cpu.time)));
    }
}

fn push_memory(series: &mut Series, labels: &str, memory: Option<&MemoryStats>) {
    if let Some(m) = memory
        && let Some(bytes) = m.working_set_bytes
    {
        series.push((labels.to_string(), stamped(bytes as f64, &m.time)));
    }
}

/// A sample with the time it was read, in milliseconds.
fn stamped(value: f64, at: &Time) -> String {
    format!("{} {}", go_float(value), at.0.as_millisecond())
}

fn write_family(out: &mut String, (name, kind, help): (&str, &str, &str), series: &[(String, String)]) {
    if series.is_empty() {
        return;
    }
    header(out, name, kind, help);
    for (labels, sample) in series {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {sample}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {sample}");
        }
    }
}

/// A label value as the text format quotes it.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// `f` as Go's `strconv.FormatFloat(f, 'g', -1, 64)` writes it, which the Prometheus client
/// uses: the shortest digits that read back the same, in exponent form when the exponent is
/// below -4 or 6 and up (`1.2e+06`, `123456`, `1e-05`).
pub(crate) fn go_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return "0".to_string();
    }
    // Rust's `{:e}` and `{}` write the same shortest digits: `1.2345e6`, `0.001`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    format!("{f}")
}
