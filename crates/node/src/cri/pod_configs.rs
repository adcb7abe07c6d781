//! [`PodConfigs`]: what the CRI configs of a pod's sandbox and containers are made from (the
//! node's DNS, its facts for the downward API, the ConfigMaps, Secrets and RuntimeClasses pods
//! refer to, the pod cgroups), and the files that go with them (hosts files, volume contents).

use crate::cri::config as cri_config;
use crate::cri::dns::{self, ClusterDns, PodDns};
use crate::cri::env::EnvSources;
use crate::cri::hosts;
use crate::downward::NodeFacts;
use crate::objects::Objects;
use crate::pod_cgroup::PodCgroups;
use crate::runtime_class;
use crate::volumes::{self, SetUpError};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use podwright_planner::pod::SpecContainer;
use podwright_runtime::ImageUser;
use podwright_runtime::cri_api::{ContainerConfig, DnsConfig, PodSandboxConfig};
use std::path::PathBuf;
use std::sync::Arc;

pub(crate) struct PodConfigs {
    /// podwright's root directory (see [`crate::layout`]).
    pub root: PathBuf,
    /// The pods' DNS and the cluster domain of their FQDNs.
    pub dns: ClusterDns,
    /// What the downward API says of the node.
    pub facts: Arc<NodeFacts>,
    /// The ConfigMaps, Secrets and RuntimeClasses pods refer to.
    pub objects: Arc<dyn Objects>,
    /// The pod-level cgroups, when the node makes them.
    pub cgroups: Option<Arc<PodCgroups>>,
}

impl PodConfigs {
    /// The pod's resolver configuration, with the kubelet's events about it.
    pub fn dns(&self, pod: &Pod) -> PodDns {
        dns::pod_dns(pod, &self.dns)
    }

    /// The sandbox config of the pod's `attempt`th sandbox, under the pod's cgroup when the
    /// node makes them. Err: the pod's host name cannot be made.
    pub fn sandbox(&self, pod: &Pod, attempt: u32, dns: DnsConfig) -> Result<PodSandboxConfig, String> {
        let hostname = hosts::kernel_hostname(pod, &self.dns.domain)?;
        let mut config = cri_config::sandbox_config(pod, &self.root, attempt, hostname, dns);
        if let Some(cgroups) = &self.cgroups {
            config.linux.get_or_insert_default().cgroup_parent = cgroups.parent(pod);
        }
        Ok(config)
    }

    /// The runtime handler of the pod's RuntimeClass (empty: the runtime's default).
    pub fn runtime_handler(&self, pod: &Pod) -> Result<String, runtime_class::NotFound> {
        runtime_class::runtime_handler(self.objects.as_ref(), pod)
    }

    /// Writes the pod's hosts file for a container that gets the kubelet's one.
    pub fn hosts_file(&self, pod: &Pod, sc: &SpecContainer<'_>, ip: &str) -> Result<(), String> {
        if hosts::wants_hosts_file(sc.container, ip) {
            hosts::write_hosts_file(&self.root, pod, ip, &self.dns.domain)?;
        }
        Ok(())
    }

    /// The container's config, and the messages of the environment variables left out for
    /// their names; `from_runtime`: what its mounts need from the runtime. Err: a source of its
    /// environment or mounts is missing or invalid.
    #[allow(clippy::too_many_arguments)]
    pub fn container(
        &self,
        pod: &Pod,
        sc: &SpecContainer<'_>,
        pod_ips: &[String],
        image_user: &ImageUser,
        restart_count: i32,
        sandbox_id: &str,
        from_runtime: &volumes::mounts::FromRuntime,
    ) -> Result<(ContainerConfig, Vec<String>), String> {
        let src =
            EnvSources { pod, pod_ips, node: &self.facts, objects: self.objects.as_ref(), root: Some(&self.root) };
        cri_config::container_config(&src, sc, image_user, restart_count, sandbox_id, &self.root, from_runtime)
    }

    /// Writes the pod's ConfigMap, Secret, downward API and projected volumes as their sources
    /// are now; returns what could not be written.
    pub fn project_volumes(&self, pod: &Pod, now: Timestamp) -> Vec<SetUpError> {
        let src = volumes::projection::Sources { pod, node: &self.facts, objects: self.objects.as_ref() };
        volumes::project(&self.root, &src, now)
    }
}
