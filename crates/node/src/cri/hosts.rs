//! A pod's host name and domain, as the kubelet gives them (`GeneratePodHostNameAndDomain`,
//! `GetNodenameForKernel`), and the `/etc/hosts` the kubelet writes for its containers
//! (`makeHostsMount`, `managedHostsFileContent`, `nodeHostsFileContent`,
//! `hostsEntriesFromHostAliases`).
//!
//! The file lives in the pod's directory and is bind-mounted over each container's
//! `/etc/hosts`; containerd then leaves out the copy of the host's file it mounts there
//! otherwise (it skips any path the container config already mounts).

use crate::layout;
use k8s_openapi::api::core::v1::{Container, HostAlias, Pod};
use podwright_planner::pod::host_network;
use podwright_runtime::cri_api::Mount;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Where the file goes in every container, and the node's own that a pod on the host's network
/// gets a copy of.
const ETC_HOSTS: &str = "/etc/hosts";

/// The kernel takes at most 63 characters (64 bytes with the terminating NUL).
const HOSTNAME_MAX_LEN: usize = 63;
/// The kubelet's bound for an FQDN as the kernel's host name.
const FQDN_MAX_LEN: usize = 64;

const MANAGED_HOSTS_HEADER: &str = "# Kubernetes-managed hosts file.\n";
const MANAGED_HOSTS_HEADER_WITH_HOST_NETWORK: &str = "# Kubernetes-managed hosts file (host network).\n";

/// `spec.hostnameOverride`, else `spec.hostname`, else the pod's name, cut to 63 characters
/// without a trailing `-` or `.` (the kubelet's `truncatePodHostnameIfNeeded`): a longer pod
/// name is valid, and the pod runs.
pub fn hostname(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    let spec_hostname =
        hostname_override(pod).or_else(|| spec.and_then(|s| s.hostname.as_deref()).filter(|h| !h.is_empty()));
    let name = spec_hostname.unwrap_or_else(|| pod.metadata.name.as_deref().unwrap_or_default());
    if name.len() <= HOSTNAME_MAX_LEN {
        return name.to_string();
    }
    // Names are ASCII (DNS subdomains), so cutting at a byte index cuts at a character.
    name[..HOSTNAME_MAX_LEN].trim_end_matches(['-', '.']).to_string()
}

/// `spec.hostnameOverride` (KEP-4762): the whole host name, with no domain of the pod's.
fn hostname_override(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.hostname_override.as_deref()
}

/// The pod's domain when it sets `subdomain`: `<subdomain>.<namespace>.svc.<cluster domain>`;
/// none with a `hostnameOverride`, which names the host whole.
pub fn domain(pod: &Pod, cluster_domain: &str) -> Option<String> {
    if hostname_override(pod).is_some() {
        return None;
    }
    let subdomain = pod.spec.as_ref()?.subdomain.as_deref().filter(|s| !s.is_empty())?;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    Some(format!("{subdomain}.{namespace}.svc.{cluster_domain}"))
}

/// The sandbox's host name: the FQDN with `setHostnameAsFQDN` and a domain, else the host
/// name; the kubelet's error when the FQDN does not fit the kernel's field. None (empty) on the
/// host's network: the pod shares the node's UTS namespace and so its host name.
pub fn kernel_hostname(pod: &Pod, cluster_domain: &str) -> Result<String, String> {
    if host_network(pod) {
        return Ok(String::new());
    }
    let hostname = hostname(pod);
    let as_fqdn = pod.spec.as_ref().and_then(|s| s.set_hostname_as_fqdn).unwrap_or(false);
    let Some(domain) = domain(pod, cluster_domain).filter(|_| as_fqdn) else { return Ok(hostname) };
    let fqdn = format!("{hostname}.{domain}");
    if fqdn.len() > FQDN_MAX_LEN {
        return Err(format!(
            "failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long ({FQDN_MAX_LEN} characters is the max, {} characters requested)",
            fqdn.len()
        ));
    }
    Ok(fqdn)
}

/// What the kubelet writes for a pod on its own network: localhost, the pod's IPs with its
/// FQDN and host name, then the `hostAliases`, each IP's names on one line.
pub fn hosts_file(pod_ips: &[&str], hostname: &str, domain: Option<&str>, aliases: &[HostAlias]) -> String {
    let mut out = String::from(MANAGED_HOSTS_HEADER);
    out.push_str("127.0.0.1\tlocalhost\n");
    out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    out.push_str("fe00::0\tip6-localnet\n");
    out.push_str("fe00::0\tip6-mcastprefix\n");
    out.push_str("fe00::1\tip6-allnodes\n");
    out.push_str("fe00::2\tip6-allrouters\n");
    for ip in pod_ips {
        match domain {
            Some(d) => out.push_str(&format!("{ip}\t{hostname}.{d}\t{hostname}\n")),
            None => out.push_str(&format!("{ip}\t{hostname}\n")),
        }
    }
    out.push_str(&alias_entries(aliases));
    out
}

/// What the kubelet writes for a pod on the host's network: the node's hosts file, then the
/// `hostAliases`.
pub fn node_hosts_file(node_hosts: &str, aliases: &[HostAlias]) -> String {
    format!("{MANAGED_HOSTS_HEADER_WITH_HOST_NETWORK}{node_hosts}{}", alias_entries(aliases))
}

/// The `hostAliases` section, each IP's names on one line; nothing without aliases.
fn alias_entries(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for alias in aliases {
        out.push_str(&format!("{}\t{}\n", alias.ip, alias.hostnames.as_deref().unwrap_or_default().join("\t")));
    }
    out
}

/// Whether container `c` gets the pod's hosts file: once the sandbox has an IP, unless the
/// container mounts something of its own at `/etc/hosts` (`shouldMountHostsFile`, `makeMounts`).
pub fn wants_hosts_file(c: &Container, pod_ip: &str) -> bool {
    !pod_ip.is_empty() && !c.volume_mounts.iter().flatten().any(|m| m.mount_path == ETC_HOSTS)
}

/// The mount of the pod's hosts file at `/etc/hosts`, writable as the kubelet mounts it.
pub fn hosts_mount(root: &Path, uid: &str) -> Mount {
    Mount {
        container_path: ETC_HOSTS.into(),
        host_path: layout::etc_hosts(root, uid).to_string_lossy().into_owned(),
        selinux_relabel: true,
        ..Default::default()
    }
}

/// Writes the pod's hosts file afresh (`ensureHostsFile`), mode 0644 whatever the umask. A file
/// that already reads so is left alone: it is mounted in the pod's running containers, which
/// would otherwise see it empty for a moment each time another container starts.
pub fn write_hosts_file(root: &Path, pod: &Pod, pod_ip: &str, cluster_domain: &str) -> Result<(), String> {
    write_hosts_file_from(root, pod, pod_ip, cluster_domain, Path::new(ETC_HOSTS))
}

/// [`write_hosts_file`], with the node's hosts file at `node_hosts`.
fn write_hosts_file_from(
    root: &Path,
    pod: &Pod,
    pod_ip: &str,
    cluster_domain: &str,
    node_hosts: &Path,
) -> Result<(), String> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let path = layout::etc_hosts(root, uid);
    let aliases = pod.spec.as_ref().and_then(|s| s.host_aliases.as_deref()).unwrap_or_default();
    let text = if host_network(pod) {
        let node = std::fs::read_to_string(node_hosts).map_err(|e| format!("open {}: {e}", node_hosts.display()))?;
        node_hosts_file(&node, aliases)
    } else {
        hosts_file(&[pod_ip], &hostname(pod), domain(pod, cluster_domain).as_deref(), aliases)
    };
    let written = std::fs::metadata(&path).is_ok_and(|m| m.permissions().mode() & 0o777 == 0o644)
        && std::fs::read(&path).is_ok_and(|old| old == text.as_bytes());
    if written {
        return Ok(());
    }
    std::fs::write(&path, text)
        .and_then(|_| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)))
        .map_err(|e| format!("open {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        spec["containers"] = serde_json::json!([]);
        let meta = serde_json::json!({"name": "web-0", "namespace": "shop", "uid": "u"});
        serde_json::from_value(serde_json::json!({"metadata": meta, "spec": spec})).unwrap()
    }

    fn alias(ip: &str, names: &[&str]) -> HostAlias {
        HostAlias { ip: ip.into(), hostnames: Some(names.iter().map(|s| s.to_string()).collect()) }
    }

    #[test]
    fn rule_14_a_long_pod_name_gives_a_hostname_cut_to_63_characters() {
        let cut = |name: &str| {
            let mut p = pod(serde_json::json!({}));
            p.metadata.name = Some(name.into());
            hostname(&p)
        };
        assert_eq!(cut(&"a".repeat(63)), "a".repeat(63));
        assert_eq!(cut(&"a".repeat(80)), "a".repeat(63));
        // Cut, then every trailing '-' and '.' goes.
        assert_eq!(cut(&format!("{}-.-b", "a".repeat(60))), "a".repeat(60));
        assert_eq!(cut(&format!("{}.b.c", "a".repeat(62))), "a".repeat(62));
        assert_eq!(hostname(&pod(serde_json::json!({"hostname": "short"}))), "short");
    }

    #[test]
    fn a_hostname_override_is_the_whole_host_name_without_a_domain() {
        let p =
            pod(serde_json::json!({"hostname": "db", "subdomain": "cluster", "hostnameOverride": "app.example.com"}));
        assert_eq!(hostname(&p), "app.example.com");
        assert_eq!(domain(&p, "cluster.local"), None);
        assert_eq!(kernel_hostname(&p, "cluster.local").as_deref(), Ok("app.example.com"));
        assert_eq!(
            hosts_file(&["10.0.0.5"], &hostname(&p), domain(&p, "cluster.local").as_deref(), &[]).lines().last(),
            Some("10.0.0.5\tapp.example.com")
        );
        // 64 characters are valid; the kernel takes 63.
        let long = format!("{}.b", "a".repeat(62));
        assert_eq!(hostname(&pod(serde_json::json!({"hostnameOverride": long}))), "a".repeat(62));
    }

    #[test]
    fn a_subdomain_gives_the_fqdn_in_the_namespaces_service_domain() {
        let p = pod(serde_json::json!({"hostname": "db", "subdomain": "cluster"}));
        assert_eq!(domain(&p, "cluster.local").as_deref(), Some("cluster.shop.svc.cluster.local"));
        assert_eq!(domain(&pod(serde_json::json!({"hostname": "db"})), "cluster.local"), None);
        // Without setHostnameAsFQDN the kernel gets the short name.
        assert_eq!(kernel_hostname(&p, "cluster.local").as_deref(), Ok("db"));
    }

    #[test]
    fn set_hostname_as_fqdn_gives_the_kernel_the_fqdn_up_to_64_characters() {
        let fqdn = |hostname: &str, subdomain: Option<&str>| {
            let spec = serde_json::json!({"hostname": hostname, "subdomain": subdomain, "setHostnameAsFQDN": true});
            kernel_hostname(&pod(spec), "cluster.local")
        };
        assert_eq!(fqdn("db", Some("cluster")).as_deref(), Ok("db.cluster.shop.svc.cluster.local"));
        // Without a subdomain there is no FQDN to give.
        assert_eq!(fqdn("db", None).as_deref(), Ok("db"));
        // ".x.shop.svc.cluster.local" is 25 characters: 39 + 25 fit, 40 + 25 do not.
        let at_limit = "h".repeat(39);
        assert_eq!(fqdn(&at_limit, Some("x")), Ok(format!("{at_limit}.x.shop.svc.cluster.local")));
        let over = "h".repeat(40);
        assert_eq!(
            fqdn(&over, Some("x")),
            Err(format!(
                "failed to construct FQDN from pod hostname and cluster domain, FQDN {over}.x.shop.svc.cluster.local is too long (64 characters is the max, 65 characters requested)"
            ))
        );
    }

    #[test]
    fn on_the_hosts_network_the_pod_keeps_the_nodes_host_name() {
        let p = pod(serde_json::json!({"hostNetwork": true, "hostname": "db", "subdomain": "cluster"}));
        assert_eq!(kernel_hostname(&p, "cluster.local").as_deref(), Ok(""));
        // Not even a name too long for the kernel fails it: none is asked for.
        let long = pod(serde_json::json!({
            "hostNetwork": true, "hostname": "h".repeat(63), "subdomain": "x", "setHostnameAsFQDN": true,
        }));
        assert_eq!(kernel_hostname(&long, "cluster.local").as_deref(), Ok(""));
    }

    #[test]
    fn on_the_hosts_network_the_file_is_the_nodes_with_the_host_aliases() {
        // Upstream's TestNodeHostsFileContent.
        let node = "123.45.67.89\tsome.domain\n";
        assert_eq!(node_hosts_file(node, &[]), format!("# Kubernetes-managed hosts file (host network).\n{node}"));
        assert_eq!(
            node_hosts_file(node, &[alias("123.45.67.89", &["foo", "bar", "baz"]), alias("10.0.0.1", &["q"])]),
            format!(
                "# Kubernetes-managed hosts file (host network).\n{node}\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n10.0.0.1\tq\n"
            )
        );

        let root = std::env::temp_dir().join(format!("podwright-hosts-hostnet-{}", std::process::id()));
        std::fs::create_dir_all(layout::pod_dir(&root, "u")).unwrap();
        let node_hosts = root.join("node-hosts");
        std::fs::write(&node_hosts, node).unwrap();
        let p =
            pod(serde_json::json!({"hostNetwork": true, "hostAliases": [{"ip": "10.1.2.3", "hostnames": ["foo"]}]}));
        write_hosts_file_from(&root, &p, "192.0.2.2", "cluster.local", &node_hosts).unwrap();
        let text = std::fs::read_to_string(layout::etc_hosts(&root, "u")).unwrap();
        assert_eq!(text, node_hosts_file(node, &[alias("10.1.2.3", &["foo"])]));
        let missing = root.join("missing");
        assert_eq!(
            write_hosts_file_from(&root, &p, "192.0.2.2", "cluster.local", &missing),
            Err(format!("open {}: No such file or directory (os error 2)", missing.display()))
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_hosts_file_is_written_as_managed_hosts_file_content_writes_it() {
        // Upstream's TestManagedHostsFileContent.
        const LOCAL: &str = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n";
        type Case<'a> = (Vec<&'a str>, Option<&'a str>, Vec<HostAlias>, String);
        let cases: Vec<Case> = vec![
            (vec!["123.45.67.89"], None, vec![], format!("{LOCAL}123.45.67.89\tpodFoo\n")),
            (vec!["203.0.113.1"], Some("domainFoo"), vec![], format!("{LOCAL}203.0.113.1\tpodFoo.domainFoo\tpodFoo\n")),
            (
                vec!["203.0.113.1"],
                Some("domainFoo"),
                vec![alias("123.45.67.89", &["foo", "bar", "baz"])],
                format!(
                    "{LOCAL}203.0.113.1\tpodFoo.domainFoo\tpodFoo\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n"
                ),
            ),
            (
                vec!["203.0.113.1"],
                Some("domainFoo"),
                vec![alias("123.45.67.89", &["foo", "bar", "baz"]), alias("456.78.90.123", &["park", "doo", "boo"])],
                format!(
                    "{LOCAL}203.0.113.1\tpodFoo.domainFoo\tpodFoo\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n456.78.90.123\tpark\tdoo\tboo\n"
                ),
            ),
            (
                vec!["203.0.113.1", "fd00::6"],
                Some("domainFoo"),
                vec![],
                format!("{LOCAL}203.0.113.1\tpodFoo.domainFoo\tpodFoo\nfd00::6\tpodFoo.domainFoo\tpodFoo\n"),
            ),
        ];
        for (ips, domain, aliases, want) in cases {
            assert_eq!(hosts_file(&ips, "podFoo", domain, &aliases), want);
        }
    }

    #[test]
    fn every_container_gets_the_file_unless_it_mounts_its_own_or_the_pod_has_no_ip() {
        let container = |mounts: serde_json::Value| -> Container {
            serde_json::from_value(serde_json::json!({"name": "c", "volumeMounts": mounts})).unwrap()
        };
        assert!(wants_hosts_file(&container(serde_json::json!([])), "10.89.0.7"));
        assert!(wants_hosts_file(
            &container(serde_json::json!([{"name": "v", "mountPath": "/etc/hosts.d"}])),
            "10.89.0.7"
        ));
        assert!(!wants_hosts_file(
            &container(serde_json::json!([{"name": "v", "mountPath": "/etc/hosts"}])),
            "10.89.0.7"
        ));
        assert!(!wants_hosts_file(&container(serde_json::json!([])), ""));
        let m = hosts_mount(Path::new("/r"), "u");
        assert_eq!(
            (m.container_path.as_str(), m.host_path.as_str(), m.readonly),
            ("/etc/hosts", "/r/pods/u/etc-hosts", false)
        );
    }

    #[test]
    fn the_file_is_written_in_the_pods_directory_with_mode_0644() {
        let root = std::env::temp_dir().join(format!("podwright-hosts-{}", std::process::id()));
        std::fs::create_dir_all(layout::pod_dir(&root, "u")).unwrap();
        let p = pod(serde_json::json!({
            "hostname": "db", "subdomain": "cluster",
            "hostAliases": [{"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]}],
        }));
        write_hosts_file(&root, &p, "10.89.0.7", "cluster.local").unwrap();
        let path = layout::etc_hosts(&root, "u");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with(
            "10.89.0.7\tdb.cluster.shop.svc.cluster.local\tdb\n\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"
        ));
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_file_that_differs_in_content_or_mode_is_written_again() {
        let root = std::env::temp_dir().join(format!("podwright-hosts-again-{}", std::process::id()));
        std::fs::create_dir_all(layout::pod_dir(&root, "u")).unwrap();
        let p = pod(serde_json::json!({}));
        let path = layout::etc_hosts(&root, "u");
        write_hosts_file(&root, &p, "10.89.0.7", "cluster.local").unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        write_hosts_file(&root, &p, "10.89.0.7", "cluster.local").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_hosts_file(&root, &p, "10.89.0.7", "cluster.local").unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
        std::fs::write(&path, "stale").unwrap();
        write_hosts_file(&root, &p, "10.89.0.7", "cluster.local").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
