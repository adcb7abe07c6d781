//! Builds the CRI sandbox and container configs for a pod, as the kubelet's
//! `generatePodSandboxConfig` / `generateContainerConfig` do for what podwright supports.

use crate::cri::env::{Env, EnvSources, container_env};
use crate::cri::{hosts, labels, ports, security};
use crate::layout;
use crate::pod_cgroup::{CPU_PERIOD, milli_cpu_to_quota, milli_cpu_to_shares};
use crate::volumes::mounts;
use k8s_openapi::api::core::v1::{Container, Pod};
use podwright_api::expansion::expand;
use podwright_api::pod_resources;
use podwright_planner::pod::SpecContainer;
use podwright_runtime::ImageUser;
use podwright_runtime::cri_api::{
    ContainerConfig, ContainerMetadata, DnsConfig, ImageSpec, KeyValue, LinuxContainerConfig, LinuxContainerResources,
    LinuxPodSandboxConfig, Mount, PodSandboxConfig, PodSandboxMetadata,
};
use std::collections::HashMap;
use std::path::Path;

fn meta(pod: &Pod) -> (&str, &str, &str) {
    let m = &pod.metadata;
    (
        m.name.as_deref().unwrap_or_default(),
        m.namespace.as_deref().unwrap_or("default"),
        m.uid.as_deref().unwrap_or_default(),
    )
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
        port_mappings: ports::port_mappings(pod),
        linux: Some(LinuxPodSandboxConfig {
            security_context: Some(security::sandbox_security(pod)),
            sysctls: security::sysctls(pod),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The kubelet's `calculateLinuxResources` (cgroupfs): cpu shares from the CPU request (or
/// the limit when there is no request), CFS quota from the CPU limit over a 100 ms period, and
/// the memory limit. A container without a CPU or memory limit of its own in a pod with
/// pod-level resources gets the pod's (`getCPULimit`, `getMemoryLimit`).
pub fn linux_resources(pod: &Pod, c: &Container) -> LinuxContainerResources {
    let limit = |name: &str| pod_resources::container_limit(pod.spec.as_ref(), c, name).unwrap_or_default().value;
    let cpu_limit = limit("cpu");
    let cpu_request = pod_resources::container_requests(c).get("cpu").map_or(cpu_limit, |q| q.value);
    LinuxContainerResources {
        cpu_shares: milli_cpu_to_shares(cpu_request.milli_value()),
        cpu_period: CPU_PERIOD,
        cpu_quota: milli_cpu_to_quota(cpu_limit.milli_value()),
        memory_limit_in_bytes: i64::try_from(limit("memory").value()).unwrap_or(i64::MAX),
        ..Default::default()
    }
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
    from_runtime: &mounts::FromRuntime,
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

    let mut mounts = mounts::container_mounts(pod, c, root, &env, from_runtime)?;
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
        // As the kubelet passes them: the runtime keeps stdin open for attach (and closes it
        // after the first attach with stdinOnce), and a TTY merges stderr into stdout.
        stdin: c.stdin.unwrap_or_default(),
        stdin_once: c.stdin_once.unwrap_or_default(),
        tty: c.tty.unwrap_or_default(),
        linux: Some(LinuxContainerConfig {
            resources: Some(linux_resources(pod, c)),
            security_context: Some(security_context),
        }),
        ..Default::default()
    };
    Ok((config, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volumes::FromRuntime;
    use serde_json::json;

    /// A pod as the API server stores it: parsed and defaulted.
    fn defaulted(spec: &str) -> Pod {
        let yaml = format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: web, namespace: ns, uid: u1}}\nspec:\n{spec}");
        let mut pod = podwright_api::parse_manifests("p.yaml", &yaml).unwrap().remove(0);
        podwright_api::apply_defaults(&mut pod);
        pod
    }

    #[test]
    fn the_sandbox_maps_the_containers_ports_and_joins_the_hosts_network_when_asked() {
        use podwright_runtime::cri_api::{NamespaceMode, PortMapping, Protocol};
        let network = |c: &PodSandboxConfig| {
            let linux = c.linux.as_ref().unwrap();
            linux.security_context.as_ref().unwrap().namespace_options.as_ref().unwrap().network
        };
        let own = defaulted("  containers:\n  - {name: a, image: b, ports: [{containerPort: 80, hostPort: 8080}]}\n");
        let config = sandbox_config(&own, Path::new("/r"), 0, "web".into(), DnsConfig::default());
        assert_eq!(network(&config), NamespaceMode::Pod as i32);
        assert_eq!(
            config.port_mappings,
            [PortMapping {
                protocol: Protocol::Tcp as i32,
                container_port: 80,
                host_port: 8080,
                host_ip: String::new()
            }]
        );

        // On the host's network the ports left without a hostPort default to theirs.
        let host = defaulted(
            "  hostNetwork: true\n  containers:\n  - {name: a, image: b, ports: [{containerPort: 53, protocol: UDP}]}\n",
        );
        let hostname = hosts::kernel_hostname(&host, "cluster.local").unwrap();
        let config = sandbox_config(&host, Path::new("/r"), 0, hostname, DnsConfig::default());
        assert_eq!(network(&config), NamespaceMode::Node as i32);
        assert_eq!(config.hostname, "");
        assert_eq!(
            config.port_mappings,
            [PortMapping { protocol: Protocol::Udp as i32, container_port: 53, host_port: 53, host_ip: String::new() }]
        );
    }

    /// `stdin`, `stdinOnce` and `tty` reach the runtime as the kubelet's
    /// `generateContainerConfig` passes them; left out, each is false.
    #[test]
    fn stdin_stdin_once_and_tty_go_to_the_runtime() {
        let pod = defaulted(
            "  containers:\n  - {name: shell, image: b, stdin: true, stdinOnce: true, tty: true}\n  - {name: quiet, image: b}\n  - {name: open, image: b, stdin: true}\n",
        );
        let flags: Vec<_> = podwright_planner::pod::all_containers(&pod)
            .map(|sc| {
                let (config, _) = container_config(
                    &EnvSources::bare(&pod),
                    &sc,
                    &ImageUser::Uid(0),
                    0,
                    "sb",
                    Path::new("/r"),
                    &FromRuntime::default(),
                )
                .unwrap();
                (config.stdin, config.stdin_once, config.tty)
            })
            .collect();
        assert_eq!(flags, [(true, true, true), (false, false, false), (true, false, false)]);
    }

    /// (case, resources, cpu shares, cpu quota, memory limit): the kubelet's
    /// `TestCalculateLinuxResources` and `MilliCPUToShares`/`milliCPUToQuota` rules.
    #[test]
    fn requests_and_limits_become_shares_quota_and_memory_limit() {
        let table = [
            ("nothing: least shares, no quota", json!({}), 2, 0, 0),
            (
                "request and limits",
                json!({"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "128Mi"}}),
                1024,
                200_000,
                134_217_728,
            ),
            ("no request: shares from the limit", json!({"limits": {"cpu": "2"}}), 2048, 200_000, 0),
            ("request only: no quota", json!({"requests": {"cpu": "1"}}), 1024, 0, 0),
            ("0.1 is 100m", json!({"requests": {"cpu": "0.1"}, "limits": {"cpu": "100m"}}), 102, 10_000, 0),
            (
                "tiny: least shares and least quota",
                json!({"requests": {"cpu": "1m"}, "limits": {"cpu": "5m"}}),
                2,
                1_000,
                0,
            ),
            (
                "a zero request is the least shares",
                json!({"requests": {"cpu": "0"}, "limits": {"cpu": "1"}}),
                2,
                100_000,
                0,
            ),
            ("most shares", json!({"requests": {"cpu": "1000"}}), 262_144, 0, 0),
            ("memory by value", json!({"limits": {"memory": "1G"}}), 2, 0, 1_000_000_000),
        ];
        for (case, resources, shares, quota, memory) in table {
            let c = Container {
                name: "c".into(),
                resources: Some(serde_json::from_value(resources).unwrap()),
                ..Default::default()
            };
            let r = linux_resources(&Pod::default(), &c);
            assert_eq!((r.cpu_shares, r.cpu_quota, r.memory_limit_in_bytes), (shares, quota, memory), "{case}");
            assert_eq!(r.cpu_period, 100_000, "{case}");
        }
    }
    /// Under pod-level limits a container without a limit of its own gets the pod's, as the
    /// kubelet's `getCPULimit` / `getMemoryLimit` pass it to the runtime; its CPU shares then come
    /// from that limit when it requests no CPU.
    #[test]
    fn a_container_without_a_limit_takes_the_pod_level_limit() {
        let pod = defaulted(
            "  resources: {limits: {cpu: 500m, memory: 128Mi}}\n  containers:\n  - {name: bare, image: b}\n  - {name: own, image: b, resources: {requests: {cpu: 100m}, limits: {cpu: 200m, memory: 64Mi}}}\n  - {name: asks, image: b, resources: {requests: {cpu: 250m}}}\n",
        );
        let spec = pod.spec.as_ref().unwrap();
        let got: Vec<_> = spec
            .containers
            .iter()
            .map(|c| {
                let r = linux_resources(&pod, c);
                (c.name.as_str(), r.cpu_shares, r.cpu_quota, r.memory_limit_in_bytes)
            })
            .collect();
        assert_eq!(
            got,
            [("bare", 512, 50_000, 128 << 20), ("own", 102, 20_000, 64 << 20), ("asks", 256, 50_000, 128 << 20)]
        );
        // Without pod-level resources nothing is inherited.
        let alone = defaulted("  containers:\n  - {name: bare, image: b}\n");
        let r = linux_resources(&alone, &alone.spec.as_ref().unwrap().containers[0]);
        assert_eq!((r.cpu_shares, r.cpu_quota, r.memory_limit_in_bytes), (2, 0, 0));
    }
}
