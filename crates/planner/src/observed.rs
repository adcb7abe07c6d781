//! What the pod worker saw in the runtime, in the planner's terms. The node crate builds these
//! from CRI statuses and the labels podwright puts on every sandbox and container.

use crate::words::{ProbeKind, StartFailureReason};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, LinuxContainerUser};
use std::collections::{BTreeMap, BTreeSet};

/// Which list of the pod spec a container comes from, and how it behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ContainerKind {
    /// An init container without `restartPolicy`: runs to completion, one at a time.
    Init,
    /// An init container with `restartPolicy: Always`.
    Sidecar,
    /// An entry of `spec.containers`.
    App,
}

impl ContainerKind {
    pub fn as_label(self) -> &'static str {
        match self {
            ContainerKind::Init => "init",
            ContainerKind::Sidecar => "sidecar",
            ContainerKind::App => "app",
        }
    }

    pub fn from_label(s: &str) -> Option<Self> {
        match s {
            "init" => Some(ContainerKind::Init),
            "sidecar" => Some(ContainerKind::Sidecar),
            "app" => Some(ContainerKind::App),
            _ => None,
        }
    }

    pub fn is_init_list(self) -> bool {
        matches!(self, ContainerKind::Init | ContainerKind::Sidecar)
    }
}

/// The CRI container states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    Created,
    Running,
    Exited,
    Unknown,
}

impl RunState {
    /// Running, or created and about to run: something to stop.
    pub fn is_live(self) -> bool {
        matches!(self, RunState::Running | RunState::Created)
    }
}

/// One runtime instance of a container.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedContainer {
    pub id: String,
    pub name: String,
    pub kind: ContainerKind,
    /// The instance's restart count (the kubelet's CRI attempt number).
    pub restart_count: i32,
    pub state: RunState,
    pub exit_code: i32,
    /// The runtime's reason for an exited container: `Completed`, `Error`, `OOMKilled`.
    pub reason: String,
    pub message: String,
    pub created_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub image: String,
    pub image_ref: String,
    /// Hash of the fields whose change means "a new container" (name and image).
    pub hash: String,
    /// The sandbox this instance belongs to.
    pub sandbox_id: String,
    /// The identity its first process was given, as the runtime reports it (containerd 2 does;
    /// 1.6 says nothing): `containerStatuses[].user`.
    pub user: Option<LinuxContainerUser>,
    /// The paths in the container the runtime mounted recursively read-only.
    pub recursive_read_only: Vec<String>,
}

impl ObservedContainer {
    /// Its `StartContainer` was cancelled by the caller going away (podwright killed during
    /// the call) while containerd was still creating its task: containerd then leaves it exited
    /// with `StartError` "failed to create containerd task: … context canceled", or "… failed
    /// to start shim: … signal: killed" when the cancellation killed the shim it was starting
    /// for it (containerd 1.6.20). Its process never ran; an uninterrupted run would simply have
    /// started it. A cancellation after the task was created ("failed to start containerd
    /// task … context canceled") is not one: the process may have run (the crash test saw it).
    pub fn start_interrupted(&self) -> bool {
        let m = &self.message;
        let cancelled =
            m.contains("context canceled") || m.contains("failed to start shim") && m.contains("signal: killed");
        self.state == RunState::Exited
            && self.reason == "StartError"
            && m.contains("failed to create containerd task")
            && cancelled
    }

    /// The kubelet's "failed" for an init container: OOM killed, non-zero exit, or unknown.
    pub fn failed(&self) -> bool {
        match self.state {
            RunState::Exited => self.reason == "OOMKilled" || self.exit_code != 0,
            RunState::Unknown => true,
            _ => false,
        }
    }

    pub fn succeeded(&self) -> bool {
        self.state == RunState::Exited && !self.failed()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ObservedSandbox {
    pub id: String,
    pub attempt: u32,
    pub ready: bool,
    pub ip: Option<String>,
    pub created_at: Timestamp,
}

/// Why the last attempt to start a container failed before an instance ran (the kubelet's
/// reason cache): `ErrImagePull`, `CreateContainerError`, `RunContainerError`, ...
#[derive(Debug, Clone, PartialEq)]
pub struct StartFailure {
    pub reason: StartFailureReason,
    pub message: String,
    pub at: Timestamp,
}

/// The node's decision to end the pod for good, as the kubelet's eviction manager makes it (an
/// `emptyDir` over its `sizeLimit`) or its admission (a pod for another OS): the pod fails with
/// this reason and message, and what runs is stopped at once. The pod worker records it (and
/// checkpoints it) when it decides.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Eviction {
    /// `status.reason`: `Evicted` (or the admission's reason, such as `PodOSNotSupported`).
    pub reason: String,
    /// `status.message`, also the message of the `Evicted` event.
    pub message: String,
}

/// Probe results per container instance (keyed by container ID), as the prober last
/// published them. An absent entry is the kubelet's initial result: not ready, not yet
/// started, alive.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeResults {
    pub readiness: BTreeMap<String, bool>,
    /// `false`: the startup probe failed `failureThreshold` times in a row.
    pub startup: BTreeMap<String, bool>,
    /// `false`: the liveness probe failed `failureThreshold` times in a row.
    pub liveness: BTreeMap<String, bool>,
}

impl ProbeResults {
    /// The results of one kind of probe.
    pub fn of_kind_mut(&mut self, kind: ProbeKind) -> &mut BTreeMap<String, bool> {
        match kind {
            ProbeKind::Startup => &mut self.startup,
            ProbeKind::Liveness => &mut self.liveness,
            ProbeKind::Readiness => &mut self.readiness,
        }
    }

    /// The probe whose failure means the instance must be killed: liveness or startup.
    pub fn failed(&self, id: &str) -> Option<ProbeKind> {
        if self.startup.get(id) == Some(&false) {
            Some(ProbeKind::Startup)
        } else if self.liveness.get(id) == Some(&false) {
            Some(ProbeKind::Liveness)
        } else {
            None
        }
    }
}

/// Orders instances of one container from oldest to newest.
fn age_order(c: &ObservedContainer) -> (i32, Timestamp) {
    (c.restart_count, c.created_at)
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    /// The pod's newest sandbox.
    pub sandbox: Option<ObservedSandbox>,
    /// Every container instance of the pod, any sandbox.
    pub containers: Vec<ObservedContainer>,
    /// Keyed by container name.
    pub start_failures: BTreeMap<String, StartFailure>,
    pub probes: ProbeResults,
    /// When creating a sandbox last failed, if it has not succeeded since.
    pub sandbox_failure: Option<Timestamp>,
    /// By container name, the highest restart count its instances have had in this pod,
    /// instances the runtime no longer holds included (an init container's records go with
    /// their sandbox): what keeps restart counts from going down.
    pub restart_counts: BTreeMap<String, i32>,
    /// The sandbox in which every init container was seen done, as the pod worker wrote it
    /// down: initialization stays done there even once the init containers' records are gone,
    /// and while a sidecar restarts.
    pub initialized_in: Option<String>,
    /// Instances whose start was cut short by the death of the podwright that started them
    /// ([`ObservedContainer::start_interrupted`]): they never ran, so they count for nothing
    /// and are removed.
    pub interrupted: Vec<ObservedContainer>,
    /// The pod was evicted: it fails, whatever its containers say.
    pub eviction: Option<Eviction>,
    /// Containers (by name) whose preparation (`Action::PrepareContainer`) failed since they
    /// last started: not prepared again, so that a failing pull is not repeated at every pass;
    /// their start pulls and creates as usual and says why.
    pub prepare_failed: BTreeSet<String>,
    /// Its in-place resize, as the pod worker keeps it.
    pub resize: crate::resize::ResizeState,
    /// Whether the pod's runtime handler makes recursive read-only mounts, asked of the runtime
    /// only for a pod that has a mount wanting one (`false` otherwise).
    pub recursive_read_only_supported: bool,
    /// By container name, how its last instance ended when `RestartAllContainers` removed it,
    /// as the pod worker wrote it down: its `lastState` until an instance after it ends.
    pub reset_terminations: BTreeMap<String, ContainerStateTerminated>,
}

impl Observed {
    /// Whether an instance counts for its container: an init container's or a sidecar's only
    /// in the current sandbox, since a new sandbox runs every init container again whatever
    /// records of an older one are left (a removal that failed, an agent killed before it
    /// removed them: kubernetes #124002 and #137710); an app container's in any sandbox.
    /// An instance [stranded](Self::stranded) in an older sandbox counts for nothing.
    pub fn counts(&self, c: &ObservedContainer) -> bool {
        !self.stranded(c) && (!c.kind.is_init_list() || self.sandbox.as_ref().is_none_or(|s| s.id == c.sandbox_id))
    }

    /// Whether `c` was created and never started in a sandbox that is not the pod's current one
    /// (or with no sandbox left): one prepared ahead of its turn (the pipelined start), or whose
    /// creator died before starting it, when its sandbox died, and whose removal failed or has
    /// not happened yet. It can never run: the planner removes it, at every pass until that
    /// succeeds, and never starts it; the status never shows it, neither as the state nor as
    /// the last state, nor its restart count.
    pub fn stranded(&self, c: &ObservedContainer) -> bool {
        c.state == RunState::Created && self.sandbox.as_ref().is_none_or(|s| s.id != c.sandbox_id)
    }

    /// Instances of `name` that count, newest first.
    pub fn instances<'a>(&'a self, name: &str) -> Vec<&'a ObservedContainer> {
        let mut v: Vec<&ObservedContainer> =
            self.containers.iter().filter(|c| c.name == name && self.counts(c)).collect();
        v.sort_by_key(|c| std::cmp::Reverse(age_order(c)));
        v
    }

    /// The newest instance of `name` that counts.
    pub fn newest(&self, name: &str) -> Option<&ObservedContainer> {
        self.containers.iter().filter(|c| c.name == name && self.counts(c)).max_by_key(|c| age_order(c))
    }

    /// Container `name`'s restart count: the highest of its instances', whichever sandbox
    /// they are in, or that of the last instance it had when the runtime holds none any more;
    /// `None` for a container that never had one. Every instance the runtime holds counts here,
    /// so that a new one never takes the attempt of one still there.
    pub fn restart_count(&self, name: &str) -> Option<i32> {
        self.highest_restart_count(name, |_| true)
    }

    /// The restart count the status shows: [`Self::restart_count`] as if instance `hidden` (one
    /// created ahead of its turn, which says nothing yet) and the [stranded](Self::stranded)
    /// ones (which never will) were not there.
    pub fn restart_count_beside(&self, name: &str, hidden: Option<&str>) -> Option<i32> {
        self.highest_restart_count(name, |c| Some(c.id.as_str()) != hidden && !self.stranded(c))
    }

    fn highest_restart_count(&self, name: &str, shown: impl Fn(&ObservedContainer) -> bool) -> Option<i32> {
        let seen = self.containers.iter().filter(|c| c.name == name && shown(c)).map(|c| c.restart_count).max();
        seen.max(self.restart_counts.get(name).copied())
    }

    /// A start failure that happened after the newest instance was created.
    pub fn pending_failure(&self, name: &str) -> Option<&StartFailure> {
        let f = self.start_failures.get(name)?;
        match self.newest(name) {
            Some(c) if c.created_at > f.at => None,
            _ => Some(f),
        }
    }

    /// A pending failure that stopped an instance from running at all. A failed `postStart`
    /// hook is not one: that instance ran and was killed. Nor is a failed `StartContainer`
    /// that left its instance exited (containerd's `StartError`, exit code 128): the kubelet
    /// counts it as a restart. Both are restarted under the crash back-off like any exited
    /// container, and the failure only names the wait.
    pub fn failure_before_running(&self, name: &str) -> Option<&StartFailure> {
        let exited = self.newest(name).is_some_and(|c| c.state == RunState::Exited);
        self.pending_failure(name).filter(|f| match f.reason {
            StartFailureReason::PostStartHookError => false,
            StartFailureReason::RunContainerError => !exited,
            _ => true,
        })
    }

    /// Whether any container instance of the pod is running: what stopping the pod waits for.
    /// A created instance that never started (a start that failed before it took effect, an
    /// agent killed between CreateContainer and StartContainer) is not: the runtime cannot stop
    /// it (StopContainer leaves it created) and a pod being stopped starts nothing; it goes
    /// with the pod, as with the kubelet, which kills running containers only.
    pub fn any_running(&self) -> bool {
        self.containers.iter().any(|c| c.state == RunState::Running)
    }

    /// The newest exited instance of `name`: the one the crash back-off is measured from (the
    /// kubelet's `doBackOff`), also while a newer instance still runs.
    pub fn newest_exited(&self, name: &str) -> Option<&ObservedContainer> {
        self.instances(name).into_iter().find(|c| c.state == RunState::Exited)
    }
}
