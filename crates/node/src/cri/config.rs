//! Builds the CRI sandbox and container configs for a pod, as the kubelet's
//! `generatePodSandboxConfig` / `generateContainerConfig` do for what podwright supports.

use crate::cri::env::{Env, EnvSources, container_env, expand};
use crate::cri::labels;
use crate::layout;
use crate::volumes::mounts;
use k8s_openapi::api::core::v1::{Container, Pod};
use podwright_api::quantity::Quantity;
use podwright_planner::pod::SpecContainer;
use podwright_runtime::cri_api::{
    ContainerConfig, ContainerMetadata, DnsConfig, ImageSpec, KeyValue, LinuxContainerConfig, LinuxContainerResources,
    Mount, PodSandboxConfig, PodSandboxMetadata,
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

/// The kernel takes at most 63 characters (64 bytes with the terminating NUL).
const HOSTNAME_MAX_LEN: usize = 63;

/// `spec.hostname`, else the pod's name, cut to 63 characters without a trailing `-` or `.`
/// (the kubelet's `truncatePodHostnameIfNeeded`): a longer pod name is valid, and the pod runs.
fn hostname(pod: &Pod) -> String {
    let spec_hostname = pod.spec.as_ref().and_then(|s| s.hostname.as_deref()).filter(|h| !h.is_empty());
    let name = spec_hostname.unwrap_or_else(|| meta(pod).0);
    if name.len() <= HOSTNAME_MAX_LEN {
        return name.to_string();
    }
    // Names are ASCII (DNS subdomains), so cutting at a byte index cuts at a character.
    name[..HOSTNAME_MAX_LEN].trim_end_matches(['-', '.']).to_string()
}

/// The sandbox config; `dns` from [`crate::cri::dns::pod_dns`] (`None`: the host's resolv.conf).
pub fn sandbox_config(pod: &Pod, root: &Path, attempt: u32, dns: Option<DnsConfig>) -> PodSandboxConfig {
    let (name, ns, uid) = meta(pod);
    PodSandboxConfig {
        metadata: Some(PodSandboxMetadata { name: name.into(), uid: uid.into(), namespace: ns.into(), attempt }),
        hostname: hostname(pod),
        log_directory: layout::log_directory(root, uid).to_string_lossy().into_owned(),
        labels: pod_labels(pod, root),
        annotations: pod.metadata.annotations.clone().unwrap_or_default().into_iter().collect(),
        dns_config: dns,
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

/// A container's config, and the `InvalidEnvironmentVariableNames` warnings of its `envFrom`.
/// Err: why it cannot be created (`CreateContainerConfigError`), in the kubelet's words.
pub fn container_config(
    src: &EnvSources,
    sc: &SpecContainer,
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
    let message_path = c.termination_message_path.clone().unwrap_or_else(|| "/dev/termination-log".into());
    if !message_path.is_empty() {
        let host = layout::termination_message(root, uid, &c.name, restart_count);
        mounts.push(Mount {
            container_path: message_path,
            host_path: host.to_string_lossy().into_owned(),
            ..Default::default()
        });
    }

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
        linux: Some(LinuxContainerConfig { resources: linux_resources(c), security_context: None }),
        ..Default::default()
    };
    Ok((config, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        let name = "p".repeat(70) + "-q";
        serde_json::from_value(serde_json::json!({"metadata": {"name": name, "uid": "u"}, "spec": spec})).unwrap()
    }

    #[test]
    fn rule_14_a_long_pod_name_gives_a_hostname_cut_to_63_characters() {
        let cut = |name: &str| {
            let mut p = pod(serde_json::json!({"containers": []}));
            p.metadata.name = Some(name.into());
            hostname(&p)
        };
        assert_eq!(cut(&"a".repeat(63)), "a".repeat(63));
        assert_eq!(cut(&"a".repeat(80)), "a".repeat(63));
        // Cut, then every trailing '-' and '.' goes.
        assert_eq!(cut(&format!("{}-.-b", "a".repeat(60))), "a".repeat(60));
        assert_eq!(cut(&format!("{}.b.c", "a".repeat(62))), "a".repeat(62));
        let named = pod(serde_json::json!({"hostname": "short", "containers": []}));
        assert_eq!(hostname(&named), "short");
        assert_eq!(sandbox_config(&pod(serde_json::json!({})), Path::new("/r"), 0, None).hostname, "p".repeat(63));
    }
}
