//! A runtime wrapper that counts the calls podwright makes and, on request, records when each
//! one started and ended (the timeline of a run).
// A benchmark measures real time on purpose.
#![allow(clippy::disallowed_methods)]

use podwright_runtime::{Decorated, Hook, RuntimeOperation, RuntimeResult};
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A runtime whose calls its [`Counter`] counts.
pub type Counted = Decorated<Counter>;

/// One runtime call: what, when it was issued and when it returned.
#[derive(Debug, Clone)]
pub struct Span {
    pub op: &'static str,
    /// The image it asked about or pulled (image calls only).
    pub image: Option<String>,
    pub start: Instant,
    pub end: Instant,
}

/// Whether a call changes the runtime's state (an "action") or only reads it.
#[derive(Clone, Copy)]
enum Kind {
    Action,
    Read,
}

impl Kind {
    fn of(op: RuntimeOperation) -> Kind {
        use RuntimeOperation as Op;
        match op {
            Op::RunPodSandbox
            | Op::StopPodSandbox
            | Op::RemovePodSandbox
            | Op::CreateContainer
            | Op::StartContainer
            | Op::StopContainer
            | Op::RemoveContainer
            | Op::ReopenContainerLog
            | Op::ExecSync
            | Op::Exec
            | Op::Attach
            | Op::PortForward
            | Op::PullImage
            | Op::RemoveImage
            | Op::UpdateContainerResources
            | Op::UpdateRuntimeConfig => Kind::Action,
            Op::Version
            | Op::Status
            | Op::PodSandboxStatus
            | Op::ListPodSandbox
            | Op::ListContainerStats
            | Op::ContainerStatus
            | Op::ListContainers
            | Op::ImageStatus
            | Op::ListImages
            | Op::ImageFsInfo => Kind::Read,
        }
    }
}

pub struct Counter {
    actions: AtomicU64,
    reads: AtomicU64,
    timeline: Option<Mutex<Vec<Span>>>,
}

impl Counter {
    /// Counts only (cheap), or counts and records every call's span.
    pub fn new(record: bool) -> Counter {
        Counter { actions: AtomicU64::new(0), reads: AtomicU64::new(0), timeline: record.then(Default::default) }
    }

    /// State-changing calls so far: sandbox run/stop/remove, container create/start/stop/remove,
    /// pulls (and execs).
    pub fn actions(&self) -> u64 {
        self.actions.load(Ordering::Relaxed)
    }

    /// Read-only calls so far: statuses, lists, image status, version.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The recorded spans since the last call, oldest first.
    pub fn take_timeline(&self) -> Vec<Span> {
        self.timeline
            .as_ref()
            .map(|t| std::mem::take(&mut *t.lock().unwrap_or_else(|e| e.into_inner())))
            .unwrap_or_default()
    }
}

impl Hook for Counter {
    async fn around<T: Send>(
        &self,
        op: RuntimeOperation,
        image: Option<&str>,
        call: impl Future<Output = RuntimeResult<T>> + Send,
    ) -> RuntimeResult<T> {
        match Kind::of(op) {
            Kind::Action => self.actions.fetch_add(1, Ordering::Relaxed),
            Kind::Read => self.reads.fetch_add(1, Ordering::Relaxed),
        };
        let Some(timeline) = &self.timeline else { return call.await };
        let start = Instant::now();
        let out = call.await;
        let span = Span { op: op.method(), image: image.map(str::to_string), start, end: Instant::now() };
        timeline.lock().unwrap_or_else(|e| e.into_inner()).push(span);
        out
    }
}
