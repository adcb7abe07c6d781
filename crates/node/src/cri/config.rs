//! Builds the CRI sandbox and container configs for a pod, as the kubelet's
//! `generatePodSandboxConfig` / `generateContainerConfig` do for what podwright supports.

use crate::cri::env::{Env, EnvSources, container_env, expand};
use crate::cri::{hosts, labels, security};
use crate::layout;
use crate::volumes::mounts;
use k8s_openapi::api::core::v1::{Container, Pod};
use podwright_api::quantity::Quantity;
use podwright_planner::pod::SpecContainer;
use podwright_runtime::ImageUser;
use podwright_runtime::cri_api::{
    ContainerConfig, ContainerMetadata, DnsConfig, ImageSpec, KeyValue, LinuxContainerConfig, LinuxContainerResources,
    LinuxPodSandboxConfig, Mount, PodSandboxConfig, PodSandboxMetadata,
};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

fn meta(pod: &Pod) -> (&str, &str, &str) {
    let m = &pod.metadata;
    (
        m.name.as_deref().unwrap_or_default(),
        m.namespace.as_deref().unwrap_or("default"),
        m.uid.as_deref().unwrap_or_default(),
    )
}

/// The labels that select everything of one pod in the runtime.
pub fn pod_selector(uid: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(labels::POD_UID.to_string(), uid.to_string())])
}

/// The labels that select everything podwright made in the runtime.
pub fn managed_selector() -> BTreeMap<String, String> {
    BTreeMap::from([(labels::MANAGED.to_string(), "true".to_string())])
}

fn pod_labels(pod: &Pod, root: &Path) -> HashMap<String, String> {
    let (name, ns, uid) = meta(pod);
    let mut l: HashMap<String, String> = pod.metadata.labels.clone().unwrap_or_default().into_iter().collect();
    l.insert(labels::POD_NAME.into(), name.into());
    l.insert(labels::POD_NAMESPACE.into(), ns.into());
    l.insert(labels::POD_UID.into(), uid.into());
    l.insert(labels::MANAGED.into(), "true".into());
    l.insert(labels::ROOT_DIR.into(), root.display().to_string());
    l
}

/// The sandbox config; `hostname` from [`hosts::kernel_hostname`], `dns` from
/// [`crate::cri::dns::pod_dns`].
pub fn sandbox_config(pod: &Pod, root: &Path, attempt: u32, hostname: String, dns: DnsConfig) -> PodSandboxConfig {
    let (name, ns, uid) = meta(pod);
    PodSandboxConfig {
        metadata: Some(PodSandboxMetadata { name: name.into(), uid: uid.into(), namespace: ns.into(), attempt }),
        hostname,
        log_directory: layout::log_directory(root, uid).to_string_lossy().into_owned(),
        labels: pod_labels(pod, root),
        annotations: pod.metadata.annotations.clone().unwrap_or_default().into_iter().collect(),
        dns_config: Some(dns),
        linux: Some(LinuxPodSandboxConfig {
            security_context: Some(security::sandbox_security(pod)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// CFS quota and memory limit from the container's limits (cgroupfs, 100 ms period).
fn linux_resources(c: &Container) -> Option<LinuxContainerResources> {
    let limits = c.resources.as_ref()?.limits.as_ref()?;
    let mut r = LinuxContainerResources::default();
    let quantity = |name: &str| limits.get(name).and_then(|q| Quantity::parse(&q.0).ok());
    if let Some(m) = quantity("memory") {
        r.memory_limit_in_bytes = i64::try_from(m.value()).unwrap_or(i64::MAX);
    }
    if let Some(cpu) = quantity("cpu") {
        r.cpu_period = 100_000;
        r.cpu_quota = i64::try_from(cpu.milli_value() * 100).unwrap_or(i64::MAX).max(1_000);
    }
    Some(r)
}

/// A container's config, and the `InvalidEnvironmentVariableNames` warnings of its `envFrom`;
/// `image_user` is who the image runs as (CRI `ImageStatus`).
/// Err: why it cannot be created (`CreateContainerConfigError`), in the kubelet's words.
pub fn container_config(
    src: &EnvSources,
    sc: &SpecContainer,
    image_user: &ImageUser,
    restart_count: i32,
    sandbox_id: &str,
    root: &Path,
) -> Result<(ContainerConfig, Vec<String>), String> {
    let pod = src.pod;
    let c = sc.container;
    let (_, _, uid) = meta(pod);
    let Env { vars: env, skipped } = container_env(src, c)?;
    let expand_all = |v: &Option<Vec<String>>| v.iter().flatten().map(|s| expand(s, &env)).collect::<Vec<_>>();

    let mut lbl = pod_labels(pod, root);
    lbl.retain(|k, _| k.starts_with("io.kubernetes.") || k.starts_with("podwright.io/"));
    lbl.insert(labels::CONTAINER_NAME.into(), c.name.clone());
    lbl.insert(labels::CONTAINER_KIND.into(), sc.kind.as_label().into());
    lbl.insert(labels::SANDBOX_ID.into(), sandbox_id.into());

    let annotations = HashMap::from([
        (labels::CONTAINER_HASH.to_string(), sc.hash()),
        (labels::RESTART_COUNT.to_string(), restart_count.to_string()),
        (labels::TERMINATION_GRACE.to_string(), podwright_planner::pod::grace_period_secs(pod).to_string()),
        (
            labels::TERMINATION_MESSAGE_PATH.to_string(),
            c.termination_message_path.clone().unwrap_or_else(|| "/dev/termination-log".into()),
        ),
        (
            labels::TERMINATION_MESSAGE_POLICY.to_string(),
            c.termination_message_policy.clone().unwrap_or_else(|| "File".into()),
        ),
    ]);

    let mut mounts = mounts::container_mounts(pod, c, root, &env)?;
    let pod_ip = src.pod_ips.first().map(String::as_str).unwrap_or_default();
    if hosts::wants_hosts_file(c, pod_ip) {
        mounts.push(hosts::hosts_mount(root, uid));
    }
    let message_path = c.termination_message_path.clone().unwrap_or_else(|| "/dev/termination-log".into());
    if !message_path.is_empty() {
        let host = layout::termination_message(root, uid, &c.name, restart_count);
        mounts.push(Mount {
            container_path: message_path,
            host_path: host.to_string_lossy().into_owned(),
            ..Default::default()
        });
    }

    security::verify_run_as_non_root(pod, c, image_user)?;
    let security_context = security::container_security(pod, c, image_user, root)?;

    let config = ContainerConfig {
        metadata: Some(ContainerMetadata { name: c.name.clone(), attempt: restart_count.max(0) as u32 }),
        image: Some(ImageSpec { image: sc.image().to_string(), ..Default::default() }),
        command: expand_all(&c.command),
        args: expand_all(&c.args),
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs: env.into_iter().map(|(key, value)| KeyValue { key, value }).collect(),
        mounts,
        labels: lbl,
        annotations,
        log_path: layout::container_log_relative(&c.name, restart_count),
        linux: Some(LinuxContainerConfig { resources: linux_resources(c), security_context: Some(security_context) }),
        ..Default::default()
    };
    Ok((config, skipped))
}
