//! The resolver configuration of a pod's sandbox, as the kubelet's DNS configurer gives it
//! (`pkg/kubelet/network/dns/dns.go`): with cluster DNS, a `ClusterFirst` pod asks only the
//! cluster's servers, searches its namespace's service domain first and uses `ndots:5`; without
//! it (and for `Default`) the runtime copies the host's `/etc/resolv.conf` into the sandbox.

use k8s_openapi::api::core::v1::Pod;
use podwright_runtime::cri_api::DnsConfig;
use std::net::IpAddr;

/// The kubelet's default `clusterDomain` when a node serves cluster DNS.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

/// At most this many nameservers in a resolv.conf (`MaxDNSNameservers`).
const MAX_NAMESERVERS: usize = 3;
/// At most this many search domains, in at most this many characters joined by spaces
/// (`MaxDNSSearchPathsExpanded`, `MaxDNSSearchListCharsExpanded`: ExpandedDNSConfig is GA).
const MAX_SEARCH_PATHS: usize = 32;
const MAX_SEARCH_LINE_CHARS: usize = 2048;
/// Longer search domains make some resolvers (glibc 2.28) abort, so the kubelet drops them.
const MAX_SEARCH_DOMAIN_LEN: usize = 253;

/// What a resolv.conf says, read as the kubelet reads the host's (`parseResolvConf`):
/// nameserver lines add up, the last `search` and the last `options` line win.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvConf {
    pub nameservers: Vec<String>,
    /// Without their trailing dots.
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

impl ResolvConf {
    pub fn parse(text: &str) -> ResolvConf {
        let mut conf = ResolvConf::default();
        for line in text.lines().map(str::trim).filter(|l| !l.starts_with('#')) {
            let mut fields = line.split_whitespace();
            match fields.next() {
                Some("nameserver") => conf.nameservers.extend(fields.next().map(str::to_string)),
                Some("search") => conf.searches = fields.map(|s| s.trim_end_matches('.').to_string()).collect(),
                Some("options") => conf.options = fields.map(str::to_string).collect(),
                _ => {}
            }
        }
        conf
    }

    /// The host's resolver configuration.
    pub fn read(path: &std::path::Path) -> std::io::Result<ResolvConf> {
        std::fs::read_to_string(path).map(|t| ResolvConf::parse(&t))
    }
}

/// The cluster DNS a node gives its pods: the kubelet's `clusterDNS` and `clusterDomain`, with
/// the host's resolver configuration whose search domains follow the cluster's.
#[derive(Debug, Clone)]
pub struct ClusterDns {
    pub servers: Vec<IpAddr>,
    /// Empty: no cluster search domains.
    pub domain: String,
    pub host: ResolvConf,
}

/// A pod's sandbox DNS, and the kubelet's `DNSConfigForming` warnings when limits cut it.
#[derive(Debug, Default, PartialEq)]
pub struct PodDns {
    /// `None`: the runtime copies the host's resolv.conf.
    pub config: Option<DnsConfig>,
    pub warnings: Vec<String>,
}

fn omit_duplicates(list: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in list {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// The sandbox DNS of `pod` on a node with `cluster` DNS (none for `podwright run`).
/// `ClusterFirstWithHostNet` is cluster DNS too; `ClusterFirst` on the host network and `None`
/// (which needs `dnsConfig`) are refused before a pod gets here.
pub fn pod_dns(pod: &Pod, cluster: Option<&ClusterDns>) -> PodDns {
    let policy = pod.spec.as_ref().and_then(|s| s.dns_policy.as_deref()).unwrap_or("ClusterFirst");
    let Some(cluster) = cluster.filter(|c| !c.servers.is_empty() && policy != "Default") else {
        return PodDns::default();
    };
    let mut warnings = Vec::new();
    let mut servers: Vec<String> = cluster.servers.iter().map(IpAddr::to_string).collect();
    if servers.len() > MAX_NAMESERVERS {
        servers.truncate(MAX_NAMESERVERS);
        warnings.push(format!(
            "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {}",
            servers.join(" ")
        ));
    }
    let mut searches = cluster.host.searches.clone();
    if !cluster.domain.is_empty() {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let d = &cluster.domain;
        let own = [format!("{ns}.svc.{d}"), format!("svc.{d}"), d.clone()];
        searches = omit_duplicates(own.into_iter().chain(searches));
    }
    let (searches, cut) = fit_search_limits(searches);
    if cut {
        warnings.push(format!(
            "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
            searches.join(" ")
        ));
    }
    PodDns { config: Some(DnsConfig { servers, searches, options: vec!["ndots:5".into()] }), warnings }
}

/// The kubelet's `formDNSSearchFitsLimits`: at most 32 domains, none longer than 253
/// characters, then whole domains off the end until the line fits; true when anything went.
fn fit_search_limits(mut searches: Vec<String>) -> (Vec<String>, bool) {
    let mut cut = searches.len() > MAX_SEARCH_PATHS;
    searches.truncate(MAX_SEARCH_PATHS);
    let before = searches.len();
    searches.retain(|s| s.len() <= MAX_SEARCH_DOMAIN_LEN);
    cut |= searches.len() != before;
    while searches.join(" ").len() > MAX_SEARCH_LINE_CHARS {
        searches.pop();
        cut = true;
    }
    (searches, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, policy: Option<&str>) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": ns},
            "spec": {"containers": [], "dnsPolicy": policy},
        }))
        .unwrap()
    }

    fn cluster(host: &str) -> ClusterDns {
        ClusterDns {
            servers: vec!["10.89.0.1".parse().unwrap()],
            domain: DEFAULT_CLUSTER_DOMAIN.into(),
            host: ResolvConf::parse(host),
        }
    }

    #[test]
    fn reads_resolv_conf_as_the_kubelet_does() {
        let conf = ResolvConf::parse(
            "# comment\nnameserver 10.0.0.2\nsearch old.example\nnameserver 10.0.0.3 ignored\n\
             search a.example. b.example\noptions ndots:2\noptions timeout:1 attempts:3\nnameserver\n",
        );
        assert_eq!(conf.nameservers, ["10.0.0.2", "10.0.0.3"]);
        assert_eq!(conf.searches, ["a.example", "b.example"]);
        assert_eq!(conf.options, ["timeout:1", "attempts:3"]);
    }

    #[test]
    fn cluster_first_asks_the_cluster_dns_and_searches_the_namespace_first() {
        let c = cluster("nameserver 10.255.255.53\nsearch corp.example cluster.local\noptions ndots:2\n");
        for policy in [None, Some("ClusterFirst"), Some("ClusterFirstWithHostNet")] {
            let dns = pod_dns(&pod("shop", policy), Some(&c));
            let config = dns.config.unwrap();
            assert_eq!(config.servers, ["10.89.0.1"]);
            // The host's cluster.local is a duplicate and goes; the host's options do not apply.
            assert_eq!(
                config.searches,
                ["shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"]
            );
            assert_eq!(config.options, ["ndots:5"]);
            assert!(dns.warnings.is_empty());
        }
    }

    #[test]
    fn default_policy_and_a_node_without_cluster_dns_keep_the_host_resolv_conf() {
        assert_eq!(pod_dns(&pod("default", Some("Default")), Some(&cluster(""))), PodDns::default());
        assert_eq!(pod_dns(&pod("default", None), None), PodDns::default());
    }

    #[test]
    fn an_empty_cluster_domain_searches_only_the_host_domains() {
        let mut c = cluster("search corp.example\n");
        c.domain.clear();
        assert_eq!(pod_dns(&pod("default", None), Some(&c)).config.unwrap().searches, ["corp.example"]);
    }

    #[test]
    fn limits_cut_nameservers_and_search_domains_with_the_kubelets_warning() {
        let mut c = cluster("");
        c.servers = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"].iter().map(|s| s.parse().unwrap()).collect();
        let long = "x".repeat(254);
        let hosts: Vec<String> = (0..40).map(|i| format!("d{i}.example")).collect();
        c.host.searches = std::iter::once(long).chain(hosts).collect();
        let dns = pod_dns(&pod("default", None), Some(&c));
        let config = dns.config.unwrap();
        assert_eq!(config.servers, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
        // 32 kept, then the over-long one dropped.
        assert_eq!(config.searches.len(), 31);
        assert_eq!(config.searches.last().unwrap(), "d27.example");
        assert_eq!(
            dns.warnings,
            [
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 10.0.0.1 10.0.0.2 10.0.0.3".to_string(),
                format!(
                    "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                    config.searches.join(" ")
                ),
            ]
        );
        let (fitted, cut) = fit_search_limits(vec!["a".repeat(250); 9]);
        assert_eq!((fitted.len(), cut), (8, true));
    }
}
