//! In-place resize of running containers (the kubelet's `doPodResizeAction`): the pod cgroup
//! grown, the containers given their allocation through CRI `UpdateContainerResources`, the pod
//! cgroup shrunk; nothing done when the pod would get less memory than it uses.

use super::{Executor, PodSync};
use crate::cri::config::linux_resources;
use crate::pod_cgroup::{Step, resource_config};
use podwright_planner::{ResizeTarget, pod};

impl Executor {
    /// Resizes `targets`, containers of the allocated pod; the error is the kubelet's message,
    /// for `PodResizeInProgress`.
    pub(super) async fn resize(&self, sync: &PodSync<'_>, targets: &[ResizeTarget]) -> Result<(), String> {
        let pod = sync.pod;
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let cgroups = self.configs.cgroups.as_deref();
        let config = resource_config(pod);
        if let (Some(cgroups), Some(limit)) = (cgroups, config.memory_limit)
            && cgroups.memory_usage(pod).is_some_and(|usage| usage >= limit)
        {
            return Err(format!(
                "aborting attempt to set pod memory limit less than current memory usage for pod {name}"
            ));
        }
        let failed = |e: std::io::Error| format!("failed to set pod cgroup config: {e}");
        if let Some(cgroups) = cgroups {
            cgroups.resize(pod, &config, Step::Grow).map_err(failed)?;
        }
        // Decreases before increases, as the kubelet orders them: the room one container gives
        // up is there for the next.
        let mut updates: Vec<_> = targets
            .iter()
            .filter_map(|t| {
                let sc = pod::find(pod, t.kind, t.index)?;
                let actuated = sync.observed.resize.actuated.get(sc.name());
                let resources = linux_resources(pod, sc.container);
                let before = actuated.map(|a| {
                    let c = k8s_openapi::api::core::v1::Container { resources: Some(a.clone()), ..Default::default() };
                    linux_resources(pod, &c)
                });
                let shrinks = before.is_some_and(|b| {
                    resources.memory_limit_in_bytes < b.memory_limit_in_bytes || resources.cpu_quota < b.cpu_quota
                });
                Some((!shrinks, t.id.clone(), resources))
            })
            .collect();
        updates.sort_by_key(|(grows, ..)| *grows);
        for (_, id, resources) in updates {
            self.ctx
                .runtime
                .update_container_resources(&id, &resources)
                .await
                .map_err(|e| format!("failed to update container resources: {e}"))?;
        }
        if let Some(cgroups) = cgroups {
            cgroups.resize(pod, &config, Step::Shrink).map_err(failed)?;
        }
        Ok(())
    }
}
