//! Which answer a name gets: the cluster domain's names from the Services in the store, as
//! CoreDNS's kubernetes plugin answers them, the reverse names of their cluster IPs, and every
//! other name from the host's nameservers.

use crate::store::meta_str;
use hickory_proto::rr::RecordType;
use std::collections::HashSet;
use std::net::Ipv4Addr;

/// A Service as the cluster DNS sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRecord {
    pub namespace: String,
    pub name: String,
    /// `None` for a headless service (`clusterIP: None`) or one without an IPv4 cluster IP.
    pub cluster_ip: Option<Ipv4Addr>,
    pub ports: Vec<ServicePort>,
}

/// A Service's port, for SRV records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    /// Empty for the one port of a service that need not name it.
    pub name: String,
    /// `tcp`, `udp` or `sctp`, in lower case as SRV names write it.
    pub protocol: String,
    pub port: u16,
}

impl ServiceRecord {
    /// From a stored Service object.
    pub fn from_object(obj: &serde_json::Value) -> Option<ServiceRecord> {
        let ports = obj.pointer("/spec/ports").and_then(|p| p.as_array()).map(Vec::as_slice).unwrap_or_default();
        Some(ServiceRecord {
            namespace: meta_str(obj, "namespace")?.to_string(),
            name: meta_str(obj, "name")?.to_string(),
            cluster_ip: obj.pointer("/spec/clusterIP").and_then(|v| v.as_str()).and_then(|s| s.parse().ok()),
            ports: ports
                .iter()
                .filter_map(|p| {
                    Some(ServicePort {
                        name: p["name"].as_str().unwrap_or_default().to_ascii_lowercase(),
                        protocol: p["protocol"].as_str().unwrap_or("TCP").to_ascii_lowercase(),
                        port: p["port"].as_u64()?.try_into().ok()?,
                    })
                })
                .collect(),
        })
    }

    /// The service's name in the cluster `domain`, as labels.
    fn labels(&self, domain: &[String]) -> Vec<String> {
        [self.name.clone(), self.namespace.clone(), "svc".into()].into_iter().chain(domain.iter().cloned()).collect()
    }
}

/// What to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// NOERROR with these A records (none: the name exists, without records of that type).
    Records(Vec<Ipv4Addr>),
    /// NOERROR with an SRV record for each of `ports` of the service named `target` (labels),
    /// whose address `ip` goes in the additional section.
    Srv {
        target: Vec<String>,
        ip: Ipv4Addr,
        ports: Vec<u16>,
    },
    /// NOERROR with a PTR record to this service name (labels).
    Ptr(Vec<String>),
    NxDomain,
    /// Not a cluster name: ask the host's nameservers.
    Forward,
}

/// The answer for `labels` (lower case) of type `qtype` in the cluster `domain`.
///
/// - `<svc>.<ns>.svc.<domain>`: the service's cluster IP for A (and ANY); an SRV record for
///   each of its ports, to `<svc>.<ns>.svc.<domain>`, for SRV; no records for AAAA and other
///   types (IPv4-only services). A headless service has no cluster IP and, as endpoints are
///   not tracked, is NXDOMAIN for now; so are names of pods (`*.pod.<domain>`).
/// - `_<port>._<proto>.<svc>.<ns>.svc.<domain>`: the same for the service's port of that name
///   and protocol (the underscores may be left out, as CoreDNS allows); NXDOMAIN without one.
/// - The domain itself, `svc.<domain>` and `<ns>.svc.<domain>` of a namespace with services
///   exist without records.
/// - `<svc>.svc.<domain>` and `<svc>.<domain>`, where some namespace has a service `<svc>`,
///   exist without records. CoreDNS says NXDOMAIN here, and busybox's nslookup (1.28 and
///   later) fails on it: it looks a dotless name up in every search domain at once, and exits 1
///   if any of them is an error, so `nslookup myservice` in a pod whose search list is
///   `default.svc.cluster.local svc.cluster.local cluster.local` would never succeed. These
///   are exactly the names that search list makes of a service's name; answering them with no
///   records leaves every resolver's result unchanged.
/// - Every other name of the domain is NXDOMAIN.
/// - PTR of `<d>.<c>.<b>.<a>.in-addr.arpa` where `<a>.<b>.<c>.<d>` is a service's cluster IP:
///   the service's name (CoreDNS's default `kubernetes cluster.local in-addr.arpa ip6.arpa`
///   with `fallthrough`); other reverse names are forwarded.
pub fn lookup(labels: &[String], qtype: RecordType, domain: &[String], services: &[ServiceRecord]) -> Lookup {
    let Some(inside) = labels.len().checked_sub(domain.len()).filter(|&n| labels[n..] == *domain).map(|n| &labels[..n])
    else {
        return reverse(labels, qtype, domain, services);
    };
    let no_records = || Lookup::Records(Vec::new());
    let names_a_service = |s: &str| services.iter().any(|r| r.name == s);
    match inside {
        [] => no_records(),
        [name] if name == "svc" || names_a_service(name) => no_records(),
        [ns, svc] if svc == "svc" => {
            let namespaces: HashSet<&str> = services.iter().map(|r| r.namespace.as_str()).collect();
            if namespaces.contains(ns.as_str()) || names_a_service(ns) { no_records() } else { Lookup::NxDomain }
        }
        [name, ns, svc] if svc == "svc" => service(services, name, ns, None, qtype, domain),
        [port, protocol, name, ns, svc] if svc == "svc" => {
            let strip = |l: &str| l.strip_prefix('_').unwrap_or(l).to_string();
            service(services, name, ns, Some((strip(port), strip(protocol))), qtype, domain)
        }
        _ => Lookup::NxDomain,
    }
}

/// The answer for the service `name` in `ns`, or for its port named `port` (name, protocol).
fn service(
    services: &[ServiceRecord],
    name: &str,
    ns: &str,
    port: Option<(String, String)>,
    qtype: RecordType,
    domain: &[String],
) -> Lookup {
    let Some((record, ip)) =
        services.iter().find(|r| r.name == name && r.namespace == ns).and_then(|r| Some((r, r.cluster_ip?)))
    else {
        return Lookup::NxDomain;
    };
    let ports: Vec<u16> = record
        .ports
        .iter()
        .filter(|p| port.as_ref().is_none_or(|(name, protocol)| p.name == *name && p.protocol == *protocol))
        .map(|p| p.port)
        .collect();
    match qtype {
        _ if port.is_some() && ports.is_empty() => Lookup::NxDomain,
        RecordType::A | RecordType::ANY => Lookup::Records(vec![ip]),
        RecordType::SRV if !ports.is_empty() => Lookup::Srv { target: record.labels(domain), ip, ports },
        _ => Lookup::Records(Vec::new()),
    }
}

/// A PTR query for a service's cluster IP gets its name; every other name outside the cluster
/// domain is forwarded.
fn reverse(labels: &[String], qtype: RecordType, domain: &[String], services: &[ServiceRecord]) -> Lookup {
    let ip = match labels {
        [d, c, b, a, in_addr, arpa] if qtype == RecordType::PTR && in_addr == "in-addr" && arpa == "arpa" => {
            format!("{a}.{b}.{c}.{d}").parse::<Ipv4Addr>().ok()
        }
        _ => None,
    };
    match ip.and_then(|ip| services.iter().find(|r| r.cluster_ip == Some(ip))) {
        Some(record) => Lookup::Ptr(record.labels(domain)),
        None => Lookup::Forward,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPE_A: RecordType = RecordType::A;
    const TYPE_ANY: RecordType = RecordType::ANY;
    const AAAA: RecordType = RecordType::AAAA;
    const TXT: RecordType = RecordType::TXT;

    fn labels(name: &str) -> Vec<String> {
        name.split('.').filter(|l| !l.is_empty()).map(str::to_string).collect()
    }

    fn services() -> Vec<ServiceRecord> {
        let svc = |ns: &str, name: &str, ip: Option<&str>| ServiceRecord {
            namespace: ns.into(),
            name: name.into(),
            cluster_ip: ip.map(|i| i.parse().unwrap()),
            ports: Vec::new(),
        };
        vec![
            svc("default", "myservice", Some("10.96.0.10")),
            svc("shop", "mydb", Some("10.96.0.11")),
            svc("shop", "headless", None),
        ]
    }

    fn ask(name: &str, qtype: RecordType) -> Lookup {
        lookup(&labels(name), qtype, &labels("cluster.local"), &services())
    }

    #[test]
    fn a_service_name_resolves_to_its_cluster_ip_for_a_only() {
        let ip = |s: &str| Lookup::Records(vec![s.parse().unwrap()]);
        assert_eq!(ask("myservice.default.svc.cluster.local", TYPE_A), ip("10.96.0.10"));
        assert_eq!(ask("mydb.shop.svc.cluster.local", TYPE_ANY), ip("10.96.0.11"));
        assert_eq!(ask("mydb.shop.svc.cluster.local", AAAA), Lookup::Records(vec![]));
        assert_eq!(ask("mydb.shop.svc.cluster.local", TXT), Lookup::Records(vec![]));
    }

    #[test]
    fn a_missing_or_headless_service_and_other_cluster_names_are_nxdomain() {
        for name in [
            "mydb.default.svc.cluster.local",
            "myservice.shop.svc.cluster.local",
            "headless.shop.svc.cluster.local",
            "x.mydb.shop.svc.cluster.local",
            "10-89-0-5.default.pod.cluster.local",
            "nobody.svc.cluster.local",
            "nobody.cluster.local",
            "default.pod.cluster.local",
        ] {
            assert_eq!(ask(name, TYPE_A), Lookup::NxDomain, "{name}");
            assert_eq!(ask(name, AAAA), Lookup::NxDomain, "{name}");
        }
        // Without any service, the search list's names of one are NXDOMAIN as in CoreDNS.
        let none = |n: &str| lookup(&labels(n), TYPE_A, &labels("cluster.local"), &[]);
        assert_eq!(none("myservice.svc.cluster.local"), Lookup::NxDomain);
        assert_eq!(none("myservice.cluster.local"), Lookup::NxDomain);
        assert_eq!(none("myservice.default.svc.cluster.local"), Lookup::NxDomain);
    }

    #[test]
    fn the_domain_its_namespaces_and_a_search_lists_names_of_a_service_exist_without_records() {
        for name in [
            "cluster.local",
            "svc.cluster.local",
            "shop.svc.cluster.local",
            "myservice.svc.cluster.local",
            "myservice.cluster.local",
            "mydb.cluster.local",
        ] {
            assert_eq!(ask(name, TYPE_A), Lookup::Records(vec![]), "{name}");
        }
    }

    #[test]
    fn names_outside_the_cluster_domain_are_forwarded() {
        for name in ["example.com", "local", "cluster.local.example.com", "myservice", "10.0.96.10.in-addr.arpa"] {
            assert_eq!(ask(name, TYPE_A), Lookup::Forward, "{name}");
        }
        // Another cluster domain.
        assert_eq!(
            lookup(&labels("myservice.default.svc.k8s.test"), TYPE_A, &labels("k8s.test"), &services()),
            Lookup::Records(vec!["10.96.0.10".parse().unwrap()])
        );
        assert_eq!(ask("myservice.default.svc.k8s.test", TYPE_A), Lookup::Forward);
    }

    #[test]
    fn reads_stored_services() {
        let obj =
            serde_json::json!({"metadata": {"name": "mydb", "namespace": "shop"}, "spec": {"clusterIP": "10.96.0.11"}});
        let headless =
            serde_json::json!({"metadata": {"name": "h", "namespace": "shop"}, "spec": {"clusterIP": "None"}});
        let record = ServiceRecord::from_object(&obj).unwrap();
        assert_eq!((record.namespace.as_str(), record.name.as_str()), ("shop", "mydb"));
        assert_eq!(record.cluster_ip, Some("10.96.0.11".parse().unwrap()));
        assert_eq!(ServiceRecord::from_object(&headless).unwrap().cluster_ip, None);
    }

    fn with_ports() -> Vec<ServiceRecord> {
        let port =
            |name: &str, protocol: &str, port| ServicePort { name: name.into(), protocol: protocol.into(), port };
        let mut web = services();
        web[1].ports = vec![port("sql", "tcp", 5432), port("metrics", "tcp", 9187), port("sql", "udp", 5433)];
        web
    }

    #[test]
    fn srv_records_name_a_services_ports_as_coredns_does() {
        let ask = |name: &str, qtype| lookup(&labels(name), qtype, &labels("cluster.local"), &with_ports());
        let srv = |ports: Vec<u16>| Lookup::Srv {
            target: labels("mydb.shop.svc.cluster.local"),
            ip: "10.96.0.11".parse().unwrap(),
            ports,
        };
        assert_eq!(ask("_sql._tcp.mydb.shop.svc.cluster.local", RecordType::SRV), srv(vec![5432]));
        assert_eq!(ask("sql.udp.mydb.shop.svc.cluster.local", RecordType::SRV), srv(vec![5433]));
        assert_eq!(ask("mydb.shop.svc.cluster.local", RecordType::SRV), srv(vec![5432, 9187, 5433]));
        // The port's name also has the service's address, and no other records.
        assert_eq!(
            ask("_metrics._tcp.mydb.shop.svc.cluster.local", TYPE_A),
            Lookup::Records(vec!["10.96.0.11".parse().unwrap()])
        );
        assert_eq!(ask("_metrics._tcp.mydb.shop.svc.cluster.local", AAAA), Lookup::Records(vec![]));
        for name in ["_http._tcp.mydb.shop.svc.cluster.local", "_sql._sctp.mydb.shop.svc.cluster.local"] {
            assert_eq!(ask(name, RecordType::SRV), Lookup::NxDomain, "{name}");
            assert_eq!(ask(name, TYPE_A), Lookup::NxDomain, "{name}");
        }
        // A service without ports has no SRV records; a headless one is NXDOMAIN like its A.
        assert_eq!(ask("myservice.default.svc.cluster.local", RecordType::SRV), Lookup::Records(vec![]));
        assert_eq!(ask("headless.shop.svc.cluster.local", RecordType::SRV), Lookup::NxDomain);
    }

    #[test]
    fn a_cluster_ips_reverse_name_points_at_its_service_and_other_reverse_names_are_forwarded() {
        assert_eq!(ask("11.0.96.10.in-addr.arpa", RecordType::PTR), Lookup::Ptr(labels("mydb.shop.svc.cluster.local")));
        assert_eq!(ask("11.0.96.10.in-addr.arpa", TYPE_A), Lookup::Forward);
        for name in
            ["12.0.96.10.in-addr.arpa", "0.96.10.in-addr.arpa", "x.0.96.10.in-addr.arpa", "1.0.0.127.in-addr.arpa"]
        {
            assert_eq!(ask(name, RecordType::PTR), Lookup::Forward, "{name}");
        }
    }

    #[test]
    fn reads_a_services_ports_with_their_protocols() {
        let obj = serde_json::json!({"metadata": {"name": "mydb", "namespace": "shop"},
            "spec": {"clusterIP": "10.96.0.11", "ports": [{"name": "SQL", "port": 5432}, {"port": 53, "protocol": "UDP"}, {"port": 70000}]}});
        let ports = ServiceRecord::from_object(&obj).unwrap().ports;
        let port =
            |name: &str, protocol: &str, port| ServicePort { name: name.into(), protocol: protocol.into(), port };
        assert_eq!(ports, [port("sql", "tcp", 5432), port("", "udp", 53)]);
    }
}
