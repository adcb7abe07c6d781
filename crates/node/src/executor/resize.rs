//! In-place resize of running containers and of the pod cgroup (the kubelet's
//! `doPodResizeAction`): the pod cgroup grown, the containers given their allocation through
//! CRI `UpdateContainerResources`, the pod cgroup shrunk; nothing done when the pod, or a
//! container whose memory limit goes down, would get less memory than it uses.

use super::{Executor, PodSync};
use crate::cri::config::linux_resources;
use crate::cri::labels;
use crate::pod_cgroup::{Step, resource_config};
use k8s_openapi::api::core::v1::Pod;
use podwright_planner::{ResizeTarget, pod, resize};
use podwright_runtime::cri_api::LinuxContainerResources;
use std::collections::BTreeMap;

/// A container to update: its name, its instance and the settings it is to have.
struct Update {
    name: String,
    id: String,
    resources: LinuxContainerResources,
    /// Its memory limit goes down.
    lowers_memory: bool,
    /// Any of its limits goes down.
    shrinks: bool,
}

impl Executor {
    /// Resizes `targets`, containers of the allocated pod, and the pod cgroup; the error is the
    /// kubelet's message, for `PodResizeInProgress`.
    pub(super) async fn resize(&self, sync: &PodSync<'_>, targets: &[ResizeTarget]) -> Result<(), String> {
        let pod = sync.pod;
        let cgroups = self.configs.cgroups.as_deref();
        let config = resource_config(pod);
        let pod_over = match (cgroups, config.memory_limit) {
            (Some(cgroups), Some(limit)) => cgroups
                .memory_usage(pod)
                .filter(|usage| *usage >= limit)
                .map(|usage| format!("attempting to set pod memory limit ({limit}) below current usage ({usage})")),
            _ => None,
        };
        // The pod as its running containers and cgroup were given it: what each had before.
        let actuated = &sync.observed.resize.actuated;
        let given = resize::allocated_pod(pod, actuated);
        let mut updates: Vec<Update> = targets
            .iter()
            .filter_map(|t| {
                let sc = pod::find(pod, t.kind, t.index)?;
                let resources = linux_resources(pod, sc.container);
                let before = pod::find(&given, t.kind, t.index)
                    .filter(|g| actuated.contains_key(g.name()))
                    .map(|g| linux_resources(&given, g.container));
                let lowers_memory =
                    before.as_ref().is_some_and(|b| resources.memory_limit_in_bytes < b.memory_limit_in_bytes);
                let shrinks = lowers_memory || before.is_some_and(|b| resources.cpu_quota < b.cpu_quota);
                Some(Update { name: sc.name().to_string(), id: t.id.clone(), resources, lowers_memory, shrinks })
            })
            .collect();
        let mut over: Vec<String> = pod_over.into_iter().collect();
        over.extend(self.containers_over_memory(pod, &updates).await);
        match over.as_slice() {
            [] => {}
            // utilerrors.NewAggregate: one error as it is, several in brackets.
            [one] => return Err(format!("cannot decrease memory limits: {one}")),
            all => return Err(format!("cannot decrease memory limits: [{}]", all.join(", "))),
        }
        let failed = |e: std::io::Error| format!("failed to set pod cgroup config: {e}");
        if let Some(cgroups) = cgroups {
            cgroups.resize(pod, &config, Step::Grow).map_err(failed)?;
        }
        // Decreases before increases, as the kubelet orders them: the room one container gives
        // up is there for the next.
        updates.sort_by_key(|u| !u.shrinks);
        for u in updates {
            self.ctx
                .runtime
                .update_container_resources(&u.id, &u.resources)
                .await
                .map_err(|e| format!("failed to update container resources: {e}"))?;
        }
        if let Some(cgroups) = cgroups {
            cgroups.resize(pod, &config, Step::Shrink).map_err(failed)?;
        }
        Ok(())
    }

    /// The kubelet's best effort against an OOM kill: a container's memory limit is not lowered
    /// below what it uses now (CRI `ListContainerStats`); one error for each such container.
    /// Stats the runtime cannot give let the resize go on, as the kubelet's do.
    async fn containers_over_memory(&self, pod: &Pod, updates: &[Update]) -> Vec<String> {
        if !updates.iter().any(|u| u.lowers_memory) {
            return Vec::new();
        }
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let stats = match self.ctx.runtime.list_container_stats(&labels::pod_selector(uid)).await {
            Ok(stats) => stats,
            Err(e) => {
                tracing::debug!(%e, "could not read the containers' memory usage before a resize");
                return Vec::new();
            }
        };
        let usage: BTreeMap<&str, u64> = stats
            .iter()
            .filter_map(|s| {
                let id = s.attributes.as_ref()?.id.as_str();
                let memory = s.memory.as_ref()?;
                let bytes = memory.usage_bytes.as_ref().or(memory.working_set_bytes.as_ref())?.value;
                Some((id, bytes))
            })
            .collect();
        updates
            .iter()
            .filter(|u| u.lowers_memory)
            .filter_map(|u| {
                let used = *usage.get(u.id.as_str())?;
                let limit = u.resources.memory_limit_in_bytes;
                (limit > 0 && i128::from(used) >= i128::from(limit)).then(|| {
                    format!(
                        "attempting to set container {:?} memory limit ({limit}) below current usage ({used})",
                        u.name
                    )
                })
            })
            .collect()
    }
}
