//! [`Instrumented`]: the hook that counts and times every runtime call into the node's
//! [`Metrics`] (the kubelet's instrumented CRI services); [`Metrics::instrument`] puts it on a
//! runtime.

use crate::metrics::Metrics;
use podwright_runtime::{Clock, Hook, RuntimeOperation, RuntimeResult};
use std::sync::Arc;

/// Records each call as `kubelet_runtime_operations_*`, timed on the engine's clock.
pub(crate) struct Instrumented {
    metrics: Arc<Metrics>,
    clock: Clock,
}

impl Instrumented {
    pub(crate) fn new(metrics: Arc<Metrics>, clock: Clock) -> Self {
        Instrumented { metrics, clock }
    }
}

impl Hook for Instrumented {
    async fn around<T: Send>(
        &self,
        op: RuntimeOperation,
        _image: Option<&str>,
        call: impl Future<Output = RuntimeResult<T>> + Send,
    ) -> RuntimeResult<T> {
        let start = self.clock.now();
        let result = call.await;
        let took = self.clock.now().duration_since(start).unsigned_abs();
        self.metrics.runtime_operation(op, took, result.is_err());
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podwright_runtime::FakeRuntime;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn every_call_is_counted_and_timed_and_failures_are_errors() {
        let clock = Clock::new();
        let fake = FakeRuntime::new(clock);
        fake.set_latency(Duration::from_millis(20));
        let metrics = Arc::new(Metrics::default());
        let rt = metrics.instrument(fake, clock);
        rt.version().await.unwrap();
        assert!(rt.start_container("no-such-container").await.is_err());
        assert!(rt.image_status("localhost/busybox:1.36").await.unwrap().is_none());
        // Forwarded, not left to the trait's default (the fake cannot reopen logs).
        assert!(rt.reopen_container_log("c").await.is_err());
        let text = metrics.render();
        let has = |line: &str| text.lines().any(|l| l == line);
        assert!(has("kubelet_runtime_operations_total{operation_type=\"version\"} 1"), "{text}");
        assert!(has("kubelet_runtime_operations_total{operation_type=\"start_container\"} 1"), "{text}");
        assert!(has("kubelet_runtime_operations_errors_total{operation_type=\"start_container\"} 1"), "{text}");
        assert!(!text.contains("kubelet_runtime_operations_errors_total{operation_type=\"version\"}"), "{text}");
        assert!(has("kubelet_runtime_operations_total{operation_type=\"reopen_container_log\"} 1"), "{text}");
        // 20 ms of virtual latency: above the 0.0125 bound, within 0.03125.
        assert!(has("kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"version\",le=\"0.0125\"} 0"));
        assert!(has("kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"version\",le=\"0.03125\"} 1"));
        assert!(has("kubelet_runtime_operations_duration_seconds_sum{operation_type=\"image_status\"} 0.02"), "{text}");
    }
}
