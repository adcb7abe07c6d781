//! The resolver configuration of a pod's sandbox, as the kubelet's DNS configurer gives it
//! (`pkg/kubelet/network/dns/dns.go` `GetPodDNS`): the pod's `dnsPolicy` picks the base (the
//! cluster's servers with its namespace's service domain searched first and `ndots:5`; the
//! host's resolv.conf for `Default`, and for `ClusterFirst` on a node without cluster DNS;
//! nothing for `None`), its `dnsConfig` is appended, and the whole is cut to the resolver's
//! limits. The runtime writes it as the sandbox's resolv.conf (copying the host's file when it
//! is empty).

use k8s_openapi::api::core::v1::{Pod, PodDNSConfig, PodDNSConfigOption};
use podwright_api::go;
use podwright_runtime::cri_api::DnsConfig;
use std::net::IpAddr;

/// The host's resolver configuration: the kubelet's default `resolvConf`.
pub const HOST_RESOLV_CONF: &str = "/etc/resolv.conf";

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
    /// Without their trailing dot.
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
                Some("search") => {
                    conf.searches = fields.map(|s| s.strip_suffix('.').unwrap_or(s).to_string()).collect()
                }
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

/// How a node gives its pods DNS: the kubelet's `clusterDNS` and `clusterDomain`, and the
/// host's resolver configuration (its `resolvConf`, read once when the node starts).
#[derive(Debug, Clone)]
pub struct ClusterDns {
    /// Empty: the node has no cluster DNS, and `ClusterFirst` pods get the host's resolver
    /// configuration with a `MissingClusterDNS` event.
    pub servers: Vec<IpAddr>,
    /// The cluster's search domains and the domain of pods' FQDNs (`subdomain`); empty: none.
    pub domain: String,
    pub host: ResolvConf,
}

impl ClusterDns {
    /// A node without cluster DNS (`podwright run`): pods' FQDNs are in the default cluster
    /// domain, and every pod resolves as the host does.
    pub fn without_servers(host: ResolvConf) -> ClusterDns {
        ClusterDns { servers: Vec::new(), domain: DEFAULT_CLUSTER_DOMAIN.into(), host }
    }
}

/// A Warning event the kubelet records on the pod while it makes the pod's DNS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsEvent {
    pub reason: &'static str,
    pub message: String,
}

/// A pod's sandbox DNS and the events making it gave.
#[derive(Debug, Default, PartialEq)]
pub struct PodDns {
    /// Everything empty: the runtime copies the host's resolv.conf.
    pub config: DnsConfig,
    pub events: Vec<DnsEvent>,
}

/// Where a pod's resolver configuration starts from (`getPodDNSType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    Cluster,
    Host,
    Empty,
}

fn base(pod: &Pod) -> Base {
    let spec = pod.spec.as_ref();
    match spec.and_then(|s| s.dns_policy.as_deref()).unwrap_or("ClusterFirst") {
        "None" => Base::Empty,
        "Default" => Base::Host,
        // On the host's network the cluster's servers need ClusterFirstWithHostNet.
        "ClusterFirst" if podwright_planner::pod::host_network(pod) => Base::Host,
        // Validation refuses any other policy; the kubelet would take it as ClusterFirst.
        _ => Base::Cluster,
    }
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

/// The sandbox DNS of `pod` on a node with `dns`, as the kubelet's `GetPodDNS` makes it: the
/// policy's base, the pod's `dnsConfig` appended, then cut to the resolver's limits.
pub fn pod_dns(pod: &Pod, dns: &ClusterDns) -> PodDns {
    let mut events = Vec::new();
    let host = || DnsConfig {
        servers: dns.host.nameservers.clone(),
        searches: dns.host.searches.clone(),
        options: dns.host.options.clone(),
    };
    let mut config = match base(pod) {
        Base::Empty => DnsConfig::default(),
        Base::Host => host(),
        Base::Cluster if !dns.servers.is_empty() => DnsConfig {
            servers: dns.servers.iter().map(IpAddr::to_string).collect(),
            searches: cluster_searches(pod, &dns.domain, &dns.host.searches),
            options: vec!["ndots:5".into()],
        },
        Base::Cluster => {
            events.push(DnsEvent { reason: "MissingClusterDNS", message: missing_cluster_dns(pod) });
            host()
        }
    };
    if let Some(own) = pod.spec.as_ref().and_then(|s| s.dns_config.as_ref()) {
        append_dns_config(&mut config, own);
    }
    if config.servers.len() > MAX_NAMESERVERS {
        config.servers.truncate(MAX_NAMESERVERS);
        events.push(DnsEvent {
            reason: "DNSConfigForming",
            message: format!(
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {}",
                config.servers.join(" ")
            ),
        });
    }
    let (searches, cut) = fit_search_limits(std::mem::take(&mut config.searches));
    config.searches = searches;
    if cut {
        events.push(DnsEvent {
            reason: "DNSConfigForming",
            message: format!(
                "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                config.searches.join(" ")
            ),
        });
    }
    PodDns { config, events }
}

/// The pod's event when the node has no cluster DNS (the kubelet records the same words
/// without the pod's name on the node).
fn missing_cluster_dns(pod: &Pod) -> String {
    format!(
        "pod: {}. kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.",
        go::quote(&podwright_planner::pod::display_name(pod))
    )
}

/// The namespace's service domain, the cluster's service domain and the cluster domain, then
/// the host's search domains (`generateSearchesForDNSClusterFirst`).
fn cluster_searches(pod: &Pod, domain: &str, host: &[String]) -> Vec<String> {
    if domain.is_empty() {
        return host.to_vec();
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let own = [format!("{ns}.svc.{domain}"), format!("svc.{domain}"), domain.to_string()];
    omit_duplicates(own.into_iter().chain(host.iter().cloned()))
}

/// `appendDNSConfig`: the pod's nameservers and search domains after the base ones, each once;
/// its options merged into the base's.
fn append_dns_config(config: &mut DnsConfig, own: &PodDNSConfig) {
    let servers = std::mem::take(&mut config.servers);
    config.servers = omit_duplicates(servers.into_iter().chain(own.nameservers.iter().flatten().cloned()));
    let searches = std::mem::take(&mut config.searches);
    config.searches = omit_duplicates(searches.into_iter().chain(own.searches.iter().flatten().cloned()));
    config.options = merge_options(&config.options, own.options.as_deref().unwrap_or_default());
}

/// `mergeDNSOptions`: one option per name, the pod's value winning, `name` or `name:value`.
/// The kubelet goes through a Go map, so its order is random; this keeps the first
/// appearance of each name.
fn merge_options(base: &[String], own: &[PodDNSConfigOption]) -> Vec<String> {
    let mut merged: Vec<(String, String)> = Vec::new();
    let mut set = |name: &str, value: &str| match merged.iter_mut().find(|(n, _)| n == name) {
        Some(entry) => entry.1 = value.to_string(),
        None => merged.push((name.to_string(), value.to_string())),
    };
    for option in base {
        let (name, value) = option.split_once(':').unwrap_or((option, ""));
        set(name, value);
    }
    for option in own {
        set(option.name.as_deref().unwrap_or_default(), option.value.as_deref().unwrap_or_default());
    }
    merged.into_iter().map(|(n, v)| if v.is_empty() { n } else { format!("{n}:{v}") }).collect()
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

    fn pod(ns: &str, spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        spec["containers"] = serde_json::json!([]);
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": ns, "uid": "u1"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn policy(ns: &str, policy: Option<&str>) -> Pod {
        pod(ns, serde_json::json!({"dnsPolicy": policy}))
    }

    fn cluster(host: &str) -> ClusterDns {
        ClusterDns {
            servers: vec!["10.89.0.1".parse().unwrap()],
            domain: DEFAULT_CLUSTER_DOMAIN.into(),
            host: ResolvConf::parse(host),
        }
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn config(servers: &[&str], searches: &[&str], options: &[&str]) -> DnsConfig {
        DnsConfig { servers: strings(servers), searches: strings(searches), options: strings(options) }
    }

    #[test]
    fn reads_resolv_conf_as_the_kubelet_does() {
        // Upstream's TestParseResolvConf, the cases it parses without an error.
        type Parsed<'a> = (&'a [&'a str], &'a [&'a str], &'a [&'a str]);
        let cases: &[(&str, Parsed)] = &[
            ("", (&[], &[], &[])),
            (" ", (&[], &[], &[])),
            ("\t\n\t", (&[], &[], &[])),
            (" #comment\n", (&[], &[], &[])),
            ("#comment\nnameserver 1.2.3.4\nsearch", (&["1.2.3.4"], &[], &[])),
            ("\tnameserver 1.2.3.4", (&["1.2.3.4"], &[], &[])),
            ("nameserver \t 1.2.3.4", (&["1.2.3.4"], &[], &[])),
            ("nameserver 1.2.3.4\nnameserver 5.6.7.8", (&["1.2.3.4", "5.6.7.8"], &[], &[])),
            ("nameserver 1.2.3.4 #comment", (&["1.2.3.4"], &[], &[])),
            ("search foo. bar", (&[], &["foo", "bar"], &[])),
            ("search foo\nsearch bar", (&[], &["bar"], &[])),
            ("#comment\nnameserver 1.2.3.4\n#comment\nsearch foo\ncomment", (&["1.2.3.4"], &["foo"], &[])),
            ("options ndots:1\noptions ndots:5 attempts:3", (&[], &[], &["ndots:5", "attempts:3"])),
            (
                "nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar\noptions ndots:5 attempts:4",
                (&["1.2.3.4", "5.6.7.8"], &["bar"], &["ndots:5", "attempts:4"]),
            ),
        ];
        for (text, (nameservers, searches, options)) in cases {
            let conf = ResolvConf::parse(text);
            assert_eq!(
                (conf.nameservers, conf.searches, conf.options),
                (strings(nameservers), strings(searches), strings(options)),
                "{text:?}"
            );
        }
    }

    #[test]
    fn the_policy_picks_the_base_as_get_pod_dns_type_does() {
        // Upstream's TestGetPodDNSType.
        let cases = [
            (Some("ClusterFirst"), false, Base::Cluster),
            (Some("ClusterFirstWithHostNet"), true, Base::Cluster),
            (Some("ClusterFirstWithHostNet"), false, Base::Cluster),
            (Some("Default"), false, Base::Host),
            (Some("Default"), true, Base::Host),
            (Some("ClusterFirst"), true, Base::Host),
            (Some("None"), false, Base::Empty),
            (None, false, Base::Cluster),
        ];
        for (dns_policy, host_network, want) in cases {
            let p = pod("default", serde_json::json!({"dnsPolicy": dns_policy, "hostNetwork": host_network}));
            assert_eq!(base(&p), want, "{dns_policy:?} hostNetwork {host_network}");
        }
    }

    #[test]
    fn cluster_first_asks_the_cluster_dns_and_searches_the_namespace_first() {
        let c = cluster("nameserver 10.255.255.53\nsearch corp.example cluster.local\noptions ndots:2\n");
        for p in [None, Some("ClusterFirst"), Some("ClusterFirstWithHostNet")] {
            let dns = pod_dns(&policy("shop", p), &c);
            // The host's cluster.local is a duplicate and goes; the host's options do not apply.
            assert_eq!(
                dns.config,
                config(
                    &["10.89.0.1"],
                    &["shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"],
                    &["ndots:5"]
                )
            );
            assert!(dns.events.is_empty());
        }
    }

    #[test]
    fn default_gives_the_hosts_resolver_configuration() {
        let c = cluster("nameserver 10.255.255.53\nsearch corp.example\noptions ndots:2 edns0\n");
        let dns = pod_dns(&policy("default", Some("Default")), &c);
        assert_eq!(
            dns,
            PodDns { config: config(&["10.255.255.53"], &["corp.example"], &["ndots:2", "edns0"]), events: vec![] }
        );
        // An empty host configuration is an empty config: the runtime copies the host's file.
        assert_eq!(pod_dns(&policy("default", Some("Default")), &cluster("")), PodDns::default());
    }

    #[test]
    fn cluster_first_without_cluster_dns_falls_back_to_default_with_the_kubelets_event() {
        let c = ClusterDns::without_servers(ResolvConf::parse("nameserver 10.255.255.53\nsearch corp.example\n"));
        for p in [None, Some("ClusterFirst"), Some("ClusterFirstWithHostNet")] {
            let dns = pod_dns(&policy("shop", p), &c);
            assert_eq!(dns.config, config(&["10.255.255.53"], &["corp.example"], &[]));
            assert_eq!(
                dns.events,
                [DnsEvent {
                    reason: "MissingClusterDNS",
                    message: "pod: \"p_shop(u1)\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.".into(),
                }]
            );
        }
        assert!(pod_dns(&policy("shop", Some("Default")), &c).events.is_empty());
    }

    #[test]
    fn an_empty_cluster_domain_searches_only_the_host_domains() {
        let mut c = cluster("search corp.example\n");
        c.domain.clear();
        assert_eq!(pod_dns(&policy("default", None), &c).config.searches, ["corp.example"]);
    }

    #[test]
    fn dns_config_is_appended_to_each_policys_base() {
        // Upstream's TestGetPodDNSCustom.
        let c = ClusterDns {
            servers: vec!["10.0.0.10".parse().unwrap()],
            domain: "kubernetes.io".into(),
            host: ResolvConf::parse("nameserver 8.8.8.8\nsearch host.domain\n"),
        };
        let own = serde_json::json!({
            "nameservers": ["10.0.0.11"],
            "searches": ["my.domain"],
            "options": [{"name": "ndots", "value": "3"}, {"name": "debug"}],
        });
        let merged_cluster = config(
            &["10.0.0.10", "10.0.0.11"],
            &["testNS.svc.kubernetes.io", "svc.kubernetes.io", "kubernetes.io", "host.domain", "my.domain"],
            &["ndots:3", "debug"],
        );
        let cases = [
            (serde_json::json!({"dnsPolicy": "None"}), DnsConfig::default()),
            (
                serde_json::json!({"dnsPolicy": "None", "dnsConfig": {
                    "nameservers": ["203.0.113.1"],
                    "searches": ["my.domain", "second.domain"],
                    "options": [{"name": "ndots", "value": "3"}, {"name": "debug"}],
                }}),
                config(&["203.0.113.1"], &["my.domain", "second.domain"], &["ndots:3", "debug"]),
            ),
            (serde_json::json!({"dnsPolicy": "ClusterFirst", "dnsConfig": own}), merged_cluster.clone()),
            (
                serde_json::json!({"dnsPolicy": "ClusterFirstWithHostNet", "hostNetwork": true, "dnsConfig": own}),
                merged_cluster,
            ),
            (
                serde_json::json!({"dnsPolicy": "Default", "dnsConfig": own}),
                config(&["8.8.8.8", "10.0.0.11"], &["host.domain", "my.domain"], &["ndots:3", "debug"]),
            ),
        ];
        for (spec, want) in cases {
            let dns = pod_dns(&pod("testNS", spec.clone()), &c);
            assert_eq!(dns.config, want, "{spec}");
            assert!(dns.events.is_empty(), "{spec}");
        }
    }

    #[test]
    fn options_merge_as_merge_dns_options_does() {
        // Upstream's TestMergeDNSOptions (in a stable order here).
        let option = |name: &str, value: Option<&str>| PodDNSConfigOption {
            name: Some(name.into()),
            value: value.map(str::to_string),
        };
        let base = strings(&["ndots:5", "debug"]);
        assert_eq!(merge_options(&base, &[]), ["ndots:5", "debug"]);
        assert_eq!(
            merge_options(&base, &[option("single-request", None), option("attempts", Some("3"))]),
            ["ndots:5", "debug", "single-request", "attempts:3"]
        );
        assert_eq!(
            merge_options(
                &base,
                &[
                    option("ndots", Some("3")),
                    option("debug", None),
                    option("single-request", None),
                    option("attempts", Some("3"))
                ]
            ),
            ["ndots:3", "debug", "single-request", "attempts:3"]
        );
        // An empty value is no value.
        assert_eq!(merge_options(&base, &[option("ndots", Some(""))]), ["ndots", "debug"]);
    }

    #[test]
    fn search_limits_as_form_dns_search_fits_limits() {
        // Upstream's TestFormDNSSearchFitsLimits with ExpandedDNSConfig.
        let mut line2048 = vec!["A".repeat(128)];
        line2048.extend(std::iter::repeat_n("A".repeat(127), 15));
        assert_eq!(line2048.join(" ").len(), 2048);
        assert_eq!(fit_search_limits(line2048.clone()), (line2048.clone(), false));
        let mut over = line2048.clone();
        over.push("B".into());
        assert_eq!(fit_search_limits(over), (line2048, true));
        let with_long = strings(&["testNS.svc.TEST", "svc.TEST", "TEST", "AAA", &"B".repeat(256), "BBB"]);
        assert_eq!(
            fit_search_limits(with_long),
            (strings(&["testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"]), true)
        );
        let numbered: Vec<String> = (1..=33).map(|i| i.to_string()).collect();
        assert_eq!(fit_search_limits(numbered[..32].to_vec()), (numbered[..32].to_vec(), false));
        assert_eq!(fit_search_limits(numbered.clone()), (numbered[..32].to_vec(), true));
    }

    #[test]
    fn limits_cut_nameservers_and_search_domains_with_the_kubelets_event() {
        let mut c = cluster("");
        c.servers = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"].iter().map(|s| s.parse().unwrap()).collect();
        let long = "x".repeat(254);
        let hosts: Vec<String> = (0..40).map(|i| format!("d{i}.example")).collect();
        c.host.searches = std::iter::once(long).chain(hosts).collect();
        let dns = pod_dns(&policy("default", None), &c);
        assert_eq!(dns.config.servers, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
        // 32 kept, then the over-long one dropped.
        assert_eq!(dns.config.searches.len(), 31);
        assert_eq!(dns.config.searches.last().unwrap(), "d27.example");
        let forming = |message: String| DnsEvent { reason: "DNSConfigForming", message };
        assert_eq!(
            dns.events,
            [
                forming("Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 10.0.0.1 10.0.0.2 10.0.0.3".into()),
                forming(format!(
                    "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                    dns.config.searches.join(" ")
                )),
            ]
        );
        // The pod's own nameservers count too.
        let p = pod(
            "default",
            serde_json::json!({"dnsPolicy": "Default", "dnsConfig": {"nameservers": ["1.1.1.1", "1.0.0.1"]}}),
        );
        let dns = pod_dns(&p, &cluster("nameserver 10.0.0.2\nnameserver 10.0.0.3\n"));
        assert_eq!(dns.config.servers, ["10.0.0.2", "10.0.0.3", "1.1.1.1"]);
        assert_eq!(dns.events.len(), 1);
        let (fitted, cut) = fit_search_limits(vec!["a".repeat(250); 9]);
        assert_eq!((fitted.len(), cut), (8, true));
    }
}
