//! Builds the CRI sandbox and container configs for a pod, as the kubelet's
//! `generatePodSandboxConfig` / `generateContainerConfig` do for what podwright supports.

use crate::cri::labels;
use crate::layout;
use k8s_openapi::api::core::v1::{Container, EnvVar, Pod};
use podwright_planner::pod::SpecContainer;
use podwright_runtime::cri_api::{
    ContainerConfig, ContainerMetadata, ImageSpec, KeyValue, LinuxContainerConfig, LinuxContainerResources, Mount,
    PodSandboxConfig, PodSandboxMetadata,
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

fn pod_labels(pod: &Pod) -> HashMap<String, String> {
    let (name, ns, uid) = meta(pod);
    let mut l: HashMap<String, String> = pod.metadata.labels.clone().unwrap_or_default().into_iter().collect();
    l.insert(labels::POD_NAME.into(), name.into());
    l.insert(labels::POD_NAMESPACE.into(), ns.into());
    l.insert(labels::POD_UID.into(), uid.into());
    l.insert(labels::MANAGED.into(), "true".into());
    l
}

pub fn sandbox_config(pod: &Pod, root: &Path, attempt: u32) -> PodSandboxConfig {
    let (name, ns, uid) = meta(pod);
    let spec = pod.spec.as_ref();
    PodSandboxConfig {
        metadata: Some(PodSandboxMetadata { name: name.into(), uid: uid.into(), namespace: ns.into(), attempt }),
        hostname: spec.and_then(|s| s.hostname.clone()).unwrap_or_else(|| name.to_string()),
        log_directory: layout::log_directory(root, uid).to_string_lossy().into_owned(),
        labels: pod_labels(pod),
        annotations: pod.metadata.annotations.clone().unwrap_or_default().into_iter().collect(),
        ..Default::default()
    }
}

/// Expands `$(VAR)` references from `env`; `$$` escapes; unknown references stay as written.
pub fn expand(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let var = &inner[..end];
                    match env.get(var) {
                        Some(v) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(var);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = inner;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The value of an `env` entry: literal (with earlier variables expanded) or from the pod's
/// own fields.
fn env_value(pod: &Pod, pod_ip: &str, var: &EnvVar, env: &BTreeMap<String, String>) -> Option<String> {
    if let Some(v) = &var.value {
        return Some(expand(v, env));
    }
    let field = var.value_from.as_ref()?.field_ref.as_ref()?;
    let (name, ns, uid) = meta(pod);
    Some(match field.field_path.as_str() {
        "metadata.name" => name.into(),
        "metadata.namespace" => ns.into(),
        "metadata.uid" => uid.into(),
        "status.podIP" => pod_ip.into(),
        "spec.nodeName" | "status.hostIP" => String::new(),
        "spec.serviceAccountName" => pod.spec.as_ref()?.service_account_name.clone().unwrap_or_default(),
        _ => return None,
    })
}

pub fn container_env(pod: &Pod, c: &Container, pod_ip: &str) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for var in c.env.iter().flatten() {
        if let Some(v) = env_value(pod, pod_ip, var, &env) {
            env.insert(var.name.clone(), v);
        }
    }
    env
}

fn memory_bytes(q: &str) -> Option<i64> {
    let units: [(&str, i64); 12] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("Pi", 1 << 50),
        ("Ei", 1 << 60),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("P", 1_000_000_000_000_000),
        ("E", 1_000_000_000_000_000_000),
    ];
    for (suffix, mult) in units {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<f64>().ok().map(|n| (n * mult as f64) as i64);
        }
    }
    q.parse::<f64>().ok().map(|n| n as i64)
}

fn cpu_millis(q: &str) -> Option<i64> {
    match q.strip_suffix('m') {
        Some(m) => m.parse().ok(),
        None => q.parse::<f64>().ok().map(|c| (c * 1000.0) as i64),
    }
}

/// CFS quota and memory limit from the container's limits (cgroupfs, 100 ms period).
fn linux_resources(c: &Container) -> Option<LinuxContainerResources> {
    let limits = c.resources.as_ref()?.limits.as_ref()?;
    let mut r = LinuxContainerResources::default();
    if let Some(m) = limits.get("memory").and_then(|q| memory_bytes(&q.0)) {
        r.memory_limit_in_bytes = m;
    }
    if let Some(milli) = limits.get("cpu").and_then(|q| cpu_millis(&q.0)) {
        r.cpu_period = 100_000;
        r.cpu_quota = (milli * 100).max(1_000);
    }
    Some(r)
}

pub fn container_config(
    pod: &Pod,
    sc: &SpecContainer,
    restart_count: i32,
    sandbox_id: &str,
    pod_ip: &str,
    root: &Path,
) -> ContainerConfig {
    let c = sc.container;
    let (_, _, uid) = meta(pod);
    let env = container_env(pod, c, pod_ip);
    let expand_all = |v: &Option<Vec<String>>| v.iter().flatten().map(|s| expand(s, &env)).collect::<Vec<_>>();

    let mut lbl = pod_labels(pod);
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

    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    let mounts = c
        .volume_mounts
        .iter()
        .flatten()
        .filter_map(|m| {
            let v = volumes?.iter().find(|v| v.name == m.name)?;
            v.empty_dir.as_ref()?;
            let mut host = layout::empty_dir(root, uid, &v.name);
            if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                host = host.join(sub);
                let _ = std::fs::create_dir_all(&host);
            }
            Some(Mount {
                container_path: m.mount_path.clone(),
                host_path: host.to_string_lossy().into_owned(),
                readonly: m.read_only.unwrap_or(false),
                ..Default::default()
            })
        })
        .collect::<Vec<_>>();
    let mut mounts = mounts;
    let message_path = c.termination_message_path.clone().unwrap_or_else(|| "/dev/termination-log".into());
    if !message_path.is_empty() {
        let host = layout::termination_message(root, uid, &c.name, restart_count);
        mounts.push(Mount {
            container_path: message_path,
            host_path: host.to_string_lossy().into_owned(),
            ..Default::default()
        });
    }

    ContainerConfig {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_references_like_the_kubelet() {
        let env = BTreeMap::from([("A".to_string(), "x".to_string())]);
        assert_eq!(expand("$(A)-$(B)", &env), "x-$(B)");
        assert_eq!(expand("$$(A) $", &env), "$(A) $");
        assert_eq!(expand("a$(A", &env), "a$(A");
    }

    #[test]
    fn quantities() {
        assert_eq!(memory_bytes("16Mi"), Some(16 << 20));
        assert_eq!(memory_bytes("1G"), Some(1_000_000_000));
        assert_eq!(cpu_millis("250m"), Some(250));
        assert_eq!(cpu_millis("1.5"), Some(1500));
    }
}
