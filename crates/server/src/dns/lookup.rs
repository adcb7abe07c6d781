//! Which answer a name gets: the cluster domain's names from the Services in the store, as
//! CoreDNS's kubernetes plugin answers them, every other name from the host's nameservers.

use super::message::{TYPE_A, TYPE_ANY};
use crate::store::meta_str;
use std::collections::HashSet;
use std::net::Ipv4Addr;

/// A Service as the cluster DNS sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRecord {
    pub namespace: String,
    pub name: String,
    /// `None` for a headless service (`clusterIP: None`) or one without an IPv4 cluster IP.
    pub cluster_ip: Option<Ipv4Addr>,
}

impl ServiceRecord {
    /// From a stored Service object.
    pub fn from_object(obj: &serde_json::Value) -> Option<ServiceRecord> {
        Some(ServiceRecord {
            namespace: meta_str(obj, "namespace")?.to_string(),
            name: meta_str(obj, "name")?.to_string(),
            cluster_ip: obj.pointer("/spec/clusterIP").and_then(|v| v.as_str()).and_then(|s| s.parse().ok()),
        })
    }
}

/// What to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// NOERROR with these A records (none: the name exists, without records of that type).
    Records(Vec<Ipv4Addr>),
    NxDomain,
    /// Not a cluster name: ask the host's nameservers.
    Forward,
}

/// The answer for `labels` (lower case) of type `qtype` in the cluster `domain`.
///
/// - `<svc>.<ns>.svc.<domain>`: the service's cluster IP for A (and ANY); no records for AAAA
///   and other types (IPv4-only services). A headless service has no cluster IP and, as
///   endpoints are not tracked, is NXDOMAIN for now; so are names of pods (`*.pod.<domain>`).
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
pub fn lookup(labels: &[String], qtype: u16, domain: &[String], services: &[ServiceRecord]) -> Lookup {
    let Some(inside) = labels.len().checked_sub(domain.len()).filter(|&n| labels[n..] == *domain).map(|n| &labels[..n])
    else {
        return Lookup::Forward;
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
        [name, ns, svc] if svc == "svc" => {
            match services.iter().find(|r| r.name == *name && r.namespace == *ns).and_then(|r| r.cluster_ip) {
                Some(ip) if qtype == TYPE_A || qtype == TYPE_ANY => Lookup::Records(vec![ip]),
                Some(_) => no_records(),
                None => Lookup::NxDomain,
            }
        }
        _ => Lookup::NxDomain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AAAA: u16 = 28;
    const TXT: u16 = 16;

    fn labels(name: &str) -> Vec<String> {
        name.split('.').filter(|l| !l.is_empty()).map(str::to_string).collect()
    }

    fn services() -> Vec<ServiceRecord> {
        let svc = |ns: &str, name: &str, ip: Option<&str>| ServiceRecord {
            namespace: ns.into(),
            name: name.into(),
            cluster_ip: ip.map(|i| i.parse().unwrap()),
        };
        vec![
            svc("default", "myservice", Some("10.96.0.10")),
            svc("shop", "mydb", Some("10.96.0.11")),
            svc("shop", "headless", None),
        ]
    }

    fn ask(name: &str, qtype: u16) -> Lookup {
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
}
