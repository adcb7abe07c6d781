//! The node's metrics, rendered in the Prometheus text format (version 0.0.4) for `/metrics`.
//! Names, labels, help texts and buckets are the kubelet's (`pkg/kubelet/metrics`) where the
//! kubelet has the metric; `podwright_container_transition_seconds` is podwright's own.
//!
//! Every series is a fixed set of atomics picked by enums rather than by label strings, so that
//! recording never locks or allocates. Families come out sorted by name and series by label
//! values, as the Go client writes them; a labelled series shows once it has something to show,
//! as a Go vector's child appears once it is used.

mod instrumented;

use instrumented::Instrumented;
use podwright_planner::{ContainerKind, RunState, StartFailureReason};
use podwright_runtime::{Clock, Decorated, Runtime, RuntimeOperation};
use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The `Content-Type` of [`Metrics::render`]'s text (the Go client's `FmtText`).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The Go client's `DefBuckets`.
const DEFAULT_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// The kubelet's `podStartupDurationBuckets`.
const POD_START_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0, 300.0, 360.0, 480.0,
    600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];
/// `ExponentialBuckets(0.005, 2.5, 14)`, each bound the product of the one before and 2.5 as
/// the Go client computes it (so the `le` labels match the kubelet's to the digit).
const RUNTIME_BUCKETS: &[f64] = &[
    0.005,
    0.0125,
    0.03125,
    0.078125,
    0.1953125,
    0.48828125,
    1.220703125,
    3.0517578125,
    7.62939453125,
    19.073486328125,
    47.6837158203125,
    119.20928955078125,
    298.0232238769531,
    745.0580596923828,
];

/// What started a pod worker's pass: the kubelet's `SyncPodType`, the `operation_type` of
/// `kubelet_pod_worker_duration_seconds`.
/// Declared in the order the series are written (by label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// The pod's first pass.
    Create,
    /// Any pass once deletion was asked for.
    Kill,
    /// Any other pass (a container changed, a planned time came, the relist).
    Sync,
    /// The first pass with a new version of the pod.
    Update,
}

impl PassKind {
    const ALL: [PassKind; 4] = [PassKind::Create, PassKind::Kill, PassKind::Sync, PassKind::Update];

    fn label(self) -> &'static str {
        match self {
            PassKind::Create => "create",
            PassKind::Update => "update",
            PassKind::Kill => "kill",
            PassKind::Sync => "sync",
        }
    }
}

/// `container_type` of the started-container counters: `container` or `init_container`
/// (sidecars are init containers).
fn container_type(kind: ContainerKind) -> usize {
    match kind {
        ContainerKind::App => 0,
        ContainerKind::Init | ContainerKind::Sidecar => 1,
    }
}
const CONTAINER_TYPES: [&str; 2] = ["container", "init_container"];

/// `container_state` of `kubelet_running_containers` (the kubelet's container states).
fn state_index(state: RunState) -> usize {
    match state {
        RunState::Created => 0,
        RunState::Exited => 1,
        RunState::Running => 2,
        RunState::Unknown => 3,
    }
}
const STATES: [&str; 4] = ["created", "exited", "running", "unknown"];

/// `code` of `kubelet_started_containers_errors_total`: the start error's name, by name.
fn code_index(reason: StartFailureReason) -> usize {
    match reason {
        StartFailureReason::CreateContainerConfigError => 0,
        StartFailureReason::CreateContainerError => 1,
        StartFailureReason::ErrImageNeverPull => 2,
        StartFailureReason::ErrImagePull => 3,
        StartFailureReason::ImageInspectError => 4,
        StartFailureReason::InvalidImageName => 5,
        StartFailureReason::PostStartHookError => 6,
        StartFailureReason::RunContainerError => 7,
    }
}
const CODES: [StartFailureReason; 8] = [
    StartFailureReason::CreateContainerConfigError,
    StartFailureReason::CreateContainerError,
    StartFailureReason::ErrImageNeverPull,
    StartFailureReason::ErrImagePull,
    StartFailureReason::ImageInspectError,
    StartFailureReason::InvalidImageName,
    StartFailureReason::PostStartHookError,
    StartFailureReason::RunContainerError,
];

/// Observations counted into fixed buckets, with their sum.
struct Histogram {
    bounds: &'static [f64],
    /// Observations per bucket, not cumulative; the last counts those above every bound. The
    /// count is their total, so a render's buckets and count always agree.
    counts: Box<[AtomicU64]>,
    sum_nanos: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_nanos: AtomicU64::new(0),
        }
    }

    fn observe(&self, took: Duration) {
        let secs = took.as_secs_f64();
        // A bucket counts observations up to and including its bound (`le`).
        let i = self.bounds.partition_point(|&b| b < secs);
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_nanos.fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Relaxed)).sum()
    }

    /// The series' lines; `labels` are the series' own (`name="value",...`), or empty.
    fn write(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (bound, n) in self.bounds.iter().zip(self.counts.iter()) {
            cumulative += n.load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {cumulative}");
        }
        cumulative += self.counts[self.bounds.len()].load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {cumulative}");
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let sum = self.sum_nanos.load(Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(out, "{name}_count{braces} {cumulative}");
    }
}

/// The node's metrics: one per node, shared by its pod workers, its executor and the runtime
/// they call (see [`crate::PodWorkers::metrics`]). Recording is a few atomic additions.
pub struct Metrics {
    running_pods: AtomicI64,
    running_containers: [AtomicI64; 4],
    pod_start: Histogram,
    pod_worker: [Histogram; 4],
    started: [AtomicU64; 2],
    /// By container type, then code.
    start_errors: [[AtomicU64; 8]; 2],
    runtime_ops: [Histogram; RuntimeOperation::ALL.len()],
    runtime_errors: [AtomicU64; RuntimeOperation::ALL.len()],
    transitions: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            running_pods: AtomicI64::new(0),
            running_containers: Default::default(),
            pod_start: Histogram::new(POD_START_BUCKETS),
            pod_worker: std::array::from_fn(|_| Histogram::new(DEFAULT_BUCKETS)),
            started: Default::default(),
            start_errors: Default::default(),
            runtime_ops: std::array::from_fn(|_| Histogram::new(RUNTIME_BUCKETS)),
            runtime_errors: Default::default(),
            transitions: Histogram::new(DEFAULT_BUCKETS),
        }
    }
}

/// `# HELP` and `# TYPE` of a family.
pub(crate) fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

impl Metrics {
    /// `runtime`, with every call recorded here (`kubelet_runtime_operations_*`), timed on
    /// `clock`. The node does this to the runtime it is given; a mode instruments the runtime
    /// it calls itself (the API's exec, attach and port-forward, log rotation) with the node's
    /// metrics (see [`crate::Node::metrics`]).
    pub fn instrument(self: &Arc<Self>, runtime: Arc<dyn Runtime>, clock: Clock) -> Arc<dyn Runtime> {
        Arc::new(Decorated::new(runtime, Instrumented::new(self.clone(), clock)))
    }

    /// One pass of a pod worker: observe, plan, act.
    pub(crate) fn pass(&self, kind: PassKind, took: Duration) {
        self.pod_worker[kind as usize].observe(took);
    }

    /// A pod reached phase Running, `took` after its worker first saw it.
    pub(crate) fn pod_started(&self, took: Duration) {
        self.pod_start.observe(took);
    }

    /// A container start is attempted (counted before it can fail, as the kubelet does).
    pub(crate) fn container_starting(&self, kind: ContainerKind) {
        self.started[container_type(kind)].fetch_add(1, Relaxed);
    }

    pub(crate) fn container_start_failed(&self, kind: ContainerKind, reason: StartFailureReason) {
        self.start_errors[container_type(kind)][code_index(reason)].fetch_add(1, Relaxed);
    }

    /// From a container's exit being seen to the pod's next container started.
    pub(crate) fn transition(&self, took: Duration) {
        self.transitions.observe(took);
    }

    /// One call of the runtime's.
    pub(crate) fn runtime_operation(&self, op: RuntimeOperation, took: Duration, failed: bool) {
        self.runtime_ops[op as usize].observe(took);
        if failed {
            self.runtime_errors[op as usize].fetch_add(1, Relaxed);
        }
    }

    /// Every metric in the Prometheus text format (see [`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        let name = "kubelet_pod_start_duration_seconds";
        header(
            &mut out,
            name,
            "histogram",
            "[ALPHA] Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
        );
        self.pod_start.write(&mut out, name, "");

        let name = "kubelet_pod_worker_duration_seconds";
        let used: Vec<_> = PassKind::ALL.iter().zip(&self.pod_worker).filter(|(_, h)| h.count() > 0).collect();
        if !used.is_empty() {
            header(
                &mut out,
                name,
                "histogram",
                "[ALPHA] Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
            );
            for (kind, h) in used {
                h.write(&mut out, name, &format!("operation_type=\"{}\"", kind.label()));
            }
        }

        let name = "kubelet_running_containers";
        header(&mut out, name, "gauge", "[ALPHA] Number of containers currently running");
        for (state, n) in STATES.iter().zip(&self.running_containers) {
            let _ = writeln!(out, "{name}{{container_state=\"{state}\"}} {}", n.load(Relaxed));
        }
        let name = "kubelet_running_pods";
        header(&mut out, name, "gauge", "[ALPHA] Number of pods that have a running pod sandbox");
        let _ = writeln!(out, "{name} {}", self.running_pods.load(Relaxed));

        let name = "kubelet_runtime_operations_duration_seconds";
        let used: Vec<_> = RuntimeOperation::ALL.iter().zip(&self.runtime_ops).filter(|(_, h)| h.count() > 0).collect();
        if !used.is_empty() {
            header(
                &mut out,
                name,
                "histogram",
                "[ALPHA] Duration in seconds of runtime operations. Broken down by operation type.",
            );
            for (op, h) in &used {
                h.write(&mut out, name, &format!("operation_type=\"{}\"", op.label()));
            }
        }
        let errors: Vec<_> = RuntimeOperation::ALL
            .iter()
            .zip(&self.runtime_errors)
            .map(|(op, n)| (op, n.load(Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let name = "kubelet_runtime_operations_errors_total";
        if !errors.is_empty() {
            header(
                &mut out,
                name,
                "counter",
                "[ALPHA] Cumulative number of runtime operation errors by operation type.",
            );
            for (op, n) in errors {
                let _ = writeln!(out, "{name}{{operation_type=\"{}\"}} {n}", op.label());
            }
        }
        let name = "kubelet_runtime_operations_total";
        if !used.is_empty() {
            header(&mut out, name, "counter", "[ALPHA] Cumulative number of runtime operations by operation type.");
            for (op, h) in used {
                let _ = writeln!(out, "{name}{{operation_type=\"{}\"}} {}", op.label(), h.count());
            }
        }

        let name = "kubelet_started_containers_errors_total";
        let mut errors = vec![];
        for (code, by_type) in CODES.iter().enumerate() {
            for (t, ty) in CONTAINER_TYPES.iter().enumerate() {
                let n = self.start_errors[t][code].load(Relaxed);
                if n > 0 {
                    errors.push((by_type.as_str(), ty, n));
                }
            }
        }
        if !errors.is_empty() {
            header(&mut out, name, "counter", "[ALPHA] Cumulative number of errors when starting containers");
            for (code, ty, n) in errors {
                let _ = writeln!(out, "{name}{{code=\"{code}\",container_type=\"{ty}\"}} {n}");
            }
        }
        let name = "kubelet_started_containers_total";
        let started: Vec<_> = CONTAINER_TYPES
            .iter()
            .zip(&self.started)
            .map(|(t, n)| (t, n.load(Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect();
        if !started.is_empty() {
            header(&mut out, name, "counter", "[ALPHA] Cumulative number of containers started");
            for (ty, n) in started {
                let _ = writeln!(out, "{name}{{container_type=\"{ty}\"}} {n}");
            }
        }

        let name = "podwright_container_transition_seconds";
        header(
            &mut out,
            name,
            "histogram",
            "Duration in seconds from a pod's init container being seen to have completed to the pod's next container started (the next init container, or the first app container)",
        );
        self.transitions.write(&mut out, name, "");
        out
    }
}

/// One pod's part in the node-wide gauges (`kubelet_running_pods`,
/// `kubelet_running_containers`): what its worker saw last. It takes its part back when
/// dropped with the worker, so the gauges count the pods that have a worker.
pub(crate) struct PodGauges {
    metrics: Arc<Metrics>,
    sandbox_running: bool,
    containers: [i64; 4],
}

impl PodGauges {
    pub(crate) fn new(metrics: Arc<Metrics>) -> Self {
        PodGauges { metrics, sandbox_running: false, containers: [0; 4] }
    }

    /// The pod as just observed: whether its sandbox runs, and its containers' states.
    pub(crate) fn set(&mut self, sandbox_running: bool, states: impl IntoIterator<Item = RunState>) {
        let mut now = [0; 4];
        for s in states {
            now[state_index(s)] += 1;
        }
        for ((gauge, was), is) in self.metrics.running_containers.iter().zip(&self.containers).zip(&now) {
            if is != was {
                gauge.fetch_add(is - was, Relaxed);
            }
        }
        if sandbox_running != self.sandbox_running {
            self.metrics.running_pods.fetch_add(if sandbox_running { 1 } else { -1 }, Relaxed);
        }
        self.containers = now;
        self.sandbox_running = sandbox_running;
    }
}

impl Drop for PodGauges {
    fn drop(&mut self) {
        self.set(false, []);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The lines of `text` that start with `prefix`.
    fn lines<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
        text.lines().filter(|l| l.starts_with(prefix)).collect()
    }

    #[test]
    fn runtime_buckets_are_the_go_clients_exponential_buckets() {
        let mut bound = 0.005_f64;
        for b in RUNTIME_BUCKETS {
            assert_eq!(*b, bound);
            bound *= 2.5;
        }
        assert_eq!(RUNTIME_BUCKETS.len(), 14);
    }

    #[test]
    fn series_are_indexed_and_written_in_label_order() {
        for (i, k) in PassKind::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i);
        }
        assert!(PassKind::ALL.windows(2).all(|w| w[0].label() < w[1].label()));
        for (i, op) in RuntimeOperation::ALL.iter().enumerate() {
            assert_eq!(*op as usize, i);
        }
        assert!(RuntimeOperation::ALL.windows(2).all(|w| w[0].label() < w[1].label()));
        for (i, code) in CODES.iter().enumerate() {
            assert_eq!(code_index(*code), i);
        }
        assert!(CODES.windows(2).all(|w| w[0].as_str() < w[1].as_str()));
        assert!(STATES.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_bucket_counts_up_to_and_including_its_bound_and_renders_cumulatively() {
        let h = Histogram::new(&[0.01, 0.1, 1.0]);
        for d in [ms(5), ms(10), ms(11), ms(100), ms(2000)] {
            h.observe(d);
        }
        let mut out = String::new();
        h.write(&mut out, "x", "op=\"a\"");
        assert_eq!(
            out,
            "x_bucket{op=\"a\",le=\"0.01\"} 2\n\
             x_bucket{op=\"a\",le=\"0.1\"} 4\n\
             x_bucket{op=\"a\",le=\"1\"} 4\n\
             x_bucket{op=\"a\",le=\"+Inf\"} 5\n\
             x_sum{op=\"a\"} 2.126\n\
             x_count{op=\"a\"} 5\n"
        );
        let mut out = String::new();
        Histogram::new(&[1.0]).write(&mut out, "y", "");
        assert_eq!(out, "y_bucket{le=\"1\"} 0\ny_bucket{le=\"+Inf\"} 0\ny_sum 0\ny_count 0\n");
    }

    #[test]
    fn renders_the_kubelets_families_with_used_series_only() {
        let m = Metrics::default();
        m.pass(PassKind::Create, ms(20));
        m.pass(PassKind::Sync, ms(3));
        m.pass(PassKind::Sync, ms(4));
        m.runtime_operation(RuntimeOperation::RunPodSandbox, ms(100), false);
        m.runtime_operation(RuntimeOperation::CreateContainer, ms(7), true);
        m.container_starting(ContainerKind::Init);
        m.container_starting(ContainerKind::Sidecar);
        m.container_starting(ContainerKind::App);
        m.container_start_failed(ContainerKind::App, StartFailureReason::ErrImagePull);
        m.pod_started(Duration::from_millis(1500));
        let text = m.render();

        let families = lines(&text, "# TYPE");
        assert_eq!(
            families,
            [
                "# TYPE kubelet_pod_start_duration_seconds histogram",
                "# TYPE kubelet_pod_worker_duration_seconds histogram",
                "# TYPE kubelet_running_containers gauge",
                "# TYPE kubelet_running_pods gauge",
                "# TYPE kubelet_runtime_operations_duration_seconds histogram",
                "# TYPE kubelet_runtime_operations_errors_total counter",
                "# TYPE kubelet_runtime_operations_total counter",
                "# TYPE kubelet_started_containers_errors_total counter",
                "# TYPE kubelet_started_containers_total counter",
                "# TYPE podwright_container_transition_seconds histogram",
            ]
        );
        assert!(text.contains("# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox\n"));
        assert_eq!(
            lines(&text, "kubelet_pod_worker_duration_seconds_count"),
            [
                "kubelet_pod_worker_duration_seconds_count{operation_type=\"create\"} 1",
                "kubelet_pod_worker_duration_seconds_count{operation_type=\"sync\"} 2",
            ]
        );
        assert_eq!(
            lines(&text, "kubelet_runtime_operations_total"),
            [
                "kubelet_runtime_operations_total{operation_type=\"create_container\"} 1",
                "kubelet_runtime_operations_total{operation_type=\"run_podsandbox\"} 1",
            ]
        );
        assert_eq!(
            lines(&text, "kubelet_runtime_operations_errors_total{"),
            ["kubelet_runtime_operations_errors_total{operation_type=\"create_container\"} 1"]
        );
        assert!(text.contains(
            "kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"run_podsandbox\",le=\"0.078125\"} 0\n\
             kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"run_podsandbox\",le=\"0.1953125\"} 1\n"
        ));
        assert_eq!(
            lines(&text, "kubelet_started_containers"),
            [
                "kubelet_started_containers_errors_total{code=\"ErrImagePull\",container_type=\"container\"} 1",
                "kubelet_started_containers_total{container_type=\"container\"} 1",
                "kubelet_started_containers_total{container_type=\"init_container\"} 2",
            ]
        );
        assert!(text.contains("kubelet_pod_start_duration_seconds_bucket{le=\"1\"} 0\n"));
        assert!(text.contains("kubelet_pod_start_duration_seconds_bucket{le=\"2\"} 1\n"));
        assert!(text.contains("podwright_container_transition_seconds_count 0\n"));
    }

    #[test]
    fn an_unused_node_renders_no_labelled_counters() {
        let text = Metrics::default().render();
        assert!(!text.contains("operation_type"), "{text}");
        assert!(!text.contains("kubelet_started_containers"), "{text}");
        assert!(text.contains("kubelet_running_pods 0\n"));
    }

    #[test]
    fn pod_gauges_follow_the_last_observation_and_leave_with_the_pod() {
        let m = Arc::new(Metrics::default());
        let gauge = |state: &str| {
            let text = m.render();
            let prefix = format!("kubelet_running_containers{{container_state=\"{state}\"}} ");
            text.lines().find_map(|l| l.strip_prefix(prefix.as_str())?.parse::<i64>().ok()).unwrap()
        };
        let pods = || m.running_pods.load(Relaxed);
        let mut a = PodGauges::new(m.clone());
        let mut b = PodGauges::new(m.clone());
        a.set(true, [RunState::Exited, RunState::Running]);
        b.set(true, [RunState::Created]);
        assert_eq!((pods(), gauge("running"), gauge("exited"), gauge("created")), (2, 1, 1, 1));
        b.set(true, [RunState::Running]);
        a.set(false, [RunState::Exited, RunState::Exited]);
        assert_eq!((pods(), gauge("running"), gauge("exited"), gauge("created")), (1, 1, 2, 0));
        drop(a);
        assert_eq!((pods(), gauge("running"), gauge("exited")), (1, 1, 0));
        drop(b);
        assert_eq!((pods(), gauge("running")), (0, 0));
    }
}
