//! The closed sets of Kubernetes words the planner decides with: restart and pull policies, pod
//! phases, waiting and start-failure reasons, probe kinds. Typed, so that a reason the planner
//! does not know cannot slip through as a string and come out as some other reason.

use k8s_openapi::api::core::v1::{Container, Pod};

/// `spec.restartPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    /// The pod's policy; validation admits only the three values, and unset means `Always`.
    pub fn of(pod: &Pod) -> Self {
        Self::parse(pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref())).unwrap_or(RestartPolicy::Always)
    }

    /// A container's own policy, when it sets one (app and regular init containers may since
    /// 1.34, overriding the pod's; a sidecar's is `Always`).
    pub fn of_container(c: &Container) -> Option<Self> {
        Self::parse(c.restart_policy.as_deref())
    }

    fn parse(s: Option<&str>) -> Option<Self> {
        match s? {
            "Never" => Some(RestartPolicy::Never),
            "OnFailure" => Some(RestartPolicy::OnFailure),
            "Always" => Some(RestartPolicy::Always),
            _ => None,
        }
    }

    /// Whether an instance that exited with `exit_code` is replaced under this policy.
    pub fn restarts(self, exit_code: i32) -> bool {
        match self {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => exit_code != 0,
            RestartPolicy::Never => false,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::Always => "Always",
            RestartPolicy::OnFailure => "OnFailure",
            RestartPolicy::Never => "Never",
        }
    }
}

/// The action of a container's `restartPolicyRules` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleAction {
    /// `Restart`: the container is restarted, whatever its restart policy says.
    Restart,
    /// `RestartAllContainers`: every container of the pod is stopped and removed, and the pod
    /// runs again from its first init container in the same sandbox.
    RestartAllContainers,
}

impl RuleAction {
    /// The first of the container's rules whose exit codes match `exit_code` (the rules are
    /// evaluated in order), if one does.
    pub fn matching(c: &Container, exit_code: i32) -> Option<Self> {
        let rule = c.restart_policy_rules.iter().flatten().find(|r| {
            let Some(codes) = &r.exit_codes else { return false };
            let listed = codes.values.iter().flatten().any(|v| *v == exit_code);
            match codes.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            }
        })?;
        match rule.action.as_str() {
            "Restart" => Some(RuleAction::Restart),
            "RestartAllContainers" => Some(RuleAction::RestartAllContainers),
            _ => None,
        }
    }
}

/// `imagePullPolicy`: when to ask the registry for a container's image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    /// The container's policy, or Kubernetes' default for its image when unset (`Always` for
    /// `:latest` or no tag, else `IfNotPresent`).
    pub fn of(c: &Container) -> Self {
        Self::for_image(c.image.as_deref().unwrap_or_default(), c.image_pull_policy.as_deref())
    }

    /// The policy `set` for `image` (a container's or an image volume's), or the default.
    pub fn for_image(image: &str, set: Option<&str>) -> Self {
        let set = set.filter(|p| !p.is_empty());
        match set.unwrap_or_else(|| podwright_api::defaults::image_pull_policy_for(image)) {
            "Always" => PullPolicy::Always,
            "Never" => PullPolicy::Never,
            _ => PullPolicy::IfNotPresent,
        }
    }
}

/// `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Phase::Pending, Phase::Running, Phase::Succeeded, Phase::Failed].into_iter().find(|p| p.as_str() == s)
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed)
    }
}

/// Why the last attempt to start a container failed before an instance ran, or (for a failed
/// `postStart` hook) why the instance was killed: the kubelet's reason cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFailureReason {
    CreateContainerConfigError,
    CreateContainerError,
    RunContainerError,
    PostStartHookError,
    ErrImageNeverPull,
    InvalidImageName,
    ImageInspectError,
    ErrImagePull,
}

impl StartFailureReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StartFailureReason::CreateContainerConfigError => "CreateContainerConfigError",
            StartFailureReason::CreateContainerError => "CreateContainerError",
            StartFailureReason::RunContainerError => "RunContainerError",
            StartFailureReason::PostStartHookError => "PostStartHookError",
            StartFailureReason::ErrImageNeverPull => "ErrImageNeverPull",
            StartFailureReason::InvalidImageName => "InvalidImageName",
            StartFailureReason::ImageInspectError => "ImageInspectError",
            StartFailureReason::ErrImagePull => "ErrImagePull",
        }
    }
}

/// The reason of a container's `waiting` state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitingReason {
    /// The crash back-off holds a restart.
    CrashLoopBackOff,
    /// The image back-off holds a pull.
    ImagePullBackOff,
    /// The last start failed; retried after a pause or a back-off.
    StartFailed(StartFailureReason),
}

impl WaitingReason {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitingReason::CrashLoopBackOff => "CrashLoopBackOff",
            WaitingReason::ImagePullBackOff => "ImagePullBackOff",
            WaitingReason::StartFailed(r) => r.as_str(),
        }
    }
}

/// The probes whose results the planner acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    Liveness,
    Readiness,
    Startup,
}

impl ProbeKind {
    /// As in the kubelet's messages: `failed liveness probe`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Liveness => "liveness",
            ProbeKind::Readiness => "readiness",
            ProbeKind::Startup => "startup",
        }
    }

    /// As in events: `Liveness probe failed: …`.
    pub fn title(self) -> &'static str {
        match self {
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
            ProbeKind::Startup => "Startup",
        }
    }

    /// The container's probe of this kind, if it has one.
    pub fn spec(self, c: &Container) -> Option<&k8s_openapi::api::core::v1::Probe> {
        match self {
            ProbeKind::Liveness => c.liveness_probe.as_ref(),
            ProbeKind::Readiness => c.readiness_probe.as_ref(),
            ProbeKind::Startup => c.startup_probe.as_ref(),
        }
    }
}

impl std::fmt::Display for ProbeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_defaults_from_the_tag() {
        let c = |image: &str, policy: Option<&str>| Container {
            image: Some(image.into()),
            image_pull_policy: policy.map(Into::into),
            ..Default::default()
        };
        assert_eq!(PullPolicy::of(&c("busybox", None)), PullPolicy::Always);
        assert_eq!(PullPolicy::of(&c("busybox:latest", None)), PullPolicy::Always);
        assert_eq!(PullPolicy::of(&c("busybox:1.36", None)), PullPolicy::IfNotPresent);
        assert_eq!(PullPolicy::of(&c("busybox:latest", Some("Never"))), PullPolicy::Never);
    }

    #[test]
    fn phases_round_trip() {
        for p in [Phase::Pending, Phase::Running, Phase::Succeeded, Phase::Failed] {
            assert_eq!(Phase::parse(p.as_str()), Some(p));
        }
        assert_eq!(Phase::parse("Unknown"), None);
    }
}
