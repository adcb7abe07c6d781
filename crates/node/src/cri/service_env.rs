//! The environment variables that tell a container where the Services are, as the kubelet's
//! `getServiceEnvVarMap` (`pkg/kubelet/kubelet_pods.go`) and `envvars.FromServices`
//! (`pkg/kubelet/envvars`) make them: `{NAME}_SERVICE_HOST`, `{NAME}_SERVICE_PORT`,
//! `{NAME}_SERVICE_PORT_{PORT NAME}` and Docker's links (`{NAME}_PORT`,
//! `{NAME}_PORT_{port}_{PROTO}[_PROTO|_PORT|_ADDR]`).

use k8s_openapi::api::core::v1::Service;
use std::collections::BTreeMap;

/// Where the services every pod gets are, whatever its `enableServiceLinks` (the kubelet's
/// `masterServiceNamespace` and `masterServices`): the API server's own, read by in-cluster
/// clients.
const MASTER_NAMESPACE: &str = "default";
const MASTER_SERVICES: [&str; 1] = ["kubernetes"];

/// The service variables of a pod in `namespace`, from every Service the node knows: the
/// master services, and with `enable_links` every service of the pod's namespace (which wins
/// over a master service of the same name). A service without a cluster IP (headless, `None`)
/// gives none.
pub fn service_env(services: &[Service], namespace: &str, enable_links: bool) -> BTreeMap<String, String> {
    let mut chosen: BTreeMap<&str, &Service> = BTreeMap::new();
    for service in services.iter().filter(|s| cluster_ip(s).is_some()) {
        let name = service.metadata.name.as_deref().unwrap_or_default();
        let ns = service.metadata.namespace.as_deref().unwrap_or_default();
        if ns == MASTER_NAMESPACE && MASTER_SERVICES.contains(&name) {
            chosen.entry(name).or_insert(service);
        } else if ns == namespace && enable_links {
            chosen.insert(name, service);
        }
    }
    let mut env = BTreeMap::new();
    for (name, service) in chosen {
        add_service(&mut env, name, service);
    }
    env
}

/// The service's cluster IP, unless it has none (`IsServiceIPSet`).
fn cluster_ip(service: &Service) -> Option<&str> {
    let ip = service.spec.as_ref()?.cluster_ip.as_deref()?;
    (!ip.is_empty() && ip != "None").then_some(ip)
}

/// `envvars.FromServices` for one service.
fn add_service(env: &mut BTreeMap<String, String>, name: &str, service: &Service) {
    let (Some(ip), Some(ports)) = (cluster_ip(service), service.spec.as_ref().and_then(|s| s.ports.as_deref())) else {
        return;
    };
    // Validation gives a service with a cluster IP at least one port.
    let Some(first) = ports.first() else { return };
    let prefix = variable_name(name);
    env.insert(format!("{prefix}_SERVICE_HOST"), ip.to_string());
    let port_var = format!("{prefix}_SERVICE_PORT");
    // Only the first port may be unnamed.
    for p in ports.iter().filter(|p| p.name.as_deref().is_some_and(|n| !n.is_empty())) {
        env.insert(format!("{port_var}_{}", variable_name(p.name.as_deref().unwrap_or_default())), p.port.to_string());
    }
    env.insert(port_var, first.port.to_string());
    for (i, p) in ports.iter().enumerate() {
        let protocol = p.protocol.as_deref().filter(|p| !p.is_empty()).unwrap_or("TCP");
        let lower = protocol.to_lowercase();
        let host_port = if ip.contains(':') { format!("[{ip}]:{}", p.port) } else { format!("{ip}:{}", p.port) };
        let url = format!("{lower}://{host_port}");
        if i == 0 {
            // Docker's links name the first port on its own.
            env.insert(format!("{prefix}_PORT"), url.clone());
        }
        let port_prefix = format!("{prefix}_PORT_{}_{}", p.port, protocol.to_uppercase());
        env.insert(format!("{port_prefix}_PROTO"), lower);
        env.insert(format!("{port_prefix}_PORT"), p.port.to_string());
        env.insert(format!("{port_prefix}_ADDR"), ip.to_string());
        env.insert(port_prefix, url);
    }
}

/// A service or port name as a variable name: upper case, `-` as `_` (`makeEnvVariableName`).
fn variable_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(ns: &str, name: &str, cluster_ip: &str, ports: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"namespace": ns, "name": name},
            "spec": {"clusterIP": cluster_ip, "ports": ports},
        }))
        .unwrap()
    }

    fn vars(env: &BTreeMap<String, String>) -> Vec<(&str, &str)> {
        env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    #[test]
    fn an_unnamed_port_gives_the_host_the_port_and_dockers_links() {
        let s = service("ns", "fooservice", "10.0.0.11", json!([{"port": 8765}]));
        assert_eq!(
            vars(&service_env(&[s], "ns", true)),
            [
                ("FOOSERVICE_PORT", "tcp://10.0.0.11:8765"),
                ("FOOSERVICE_PORT_8765_TCP", "tcp://10.0.0.11:8765"),
                ("FOOSERVICE_PORT_8765_TCP_ADDR", "10.0.0.11"),
                ("FOOSERVICE_PORT_8765_TCP_PORT", "8765"),
                ("FOOSERVICE_PORT_8765_TCP_PROTO", "tcp"),
                ("FOOSERVICE_SERVICE_HOST", "10.0.0.11"),
                ("FOOSERVICE_SERVICE_PORT", "8765"),
            ]
        );
    }

    #[test]
    fn named_ports_each_get_a_service_port_and_links_the_first_is_the_services_port() {
        let ports = json!([
            {"name": "http-alt", "port": 8080, "protocol": "TCP"},
            {"name": "dns", "port": 53, "protocol": "UDP"},
        ]);
        let env = service_env(&[service("ns", "my-svc", "10.0.0.2", ports)], "ns", true);
        assert_eq!(env["MY_SVC_SERVICE_PORT"], "8080");
        assert_eq!(env["MY_SVC_SERVICE_PORT_HTTP_ALT"], "8080");
        assert_eq!(env["MY_SVC_SERVICE_PORT_DNS"], "53");
        assert_eq!(env["MY_SVC_PORT"], "tcp://10.0.0.2:8080");
        assert_eq!(env["MY_SVC_PORT_53_UDP"], "udp://10.0.0.2:53");
        assert_eq!(env["MY_SVC_PORT_53_UDP_PROTO"], "udp");
        assert_eq!(env["MY_SVC_PORT_8080_TCP_ADDR"], "10.0.0.2");
        assert_eq!(env.len(), 2 + 2 + 1 + 2 * 4);
    }

    #[test]
    fn an_ipv6_cluster_ip_is_bracketed_in_urls() {
        let env = service_env(&[service("ns", "v6", "fd00::10", json!([{"port": 80}]))], "ns", true);
        assert_eq!(env["V6_PORT"], "tcp://[fd00::10]:80");
        assert_eq!(env["V6_SERVICE_HOST"], "fd00::10");
    }

    #[test]
    fn headless_services_and_other_namespaces_give_nothing() {
        let services = [
            service("ns", "headless", "None", json!([{"port": 80}])),
            service("ns", "pending", "", json!([{"port": 80}])),
            service("other", "elsewhere", "10.0.0.3", json!([{"port": 80}])),
        ];
        assert!(service_env(&services, "ns", true).is_empty());
    }

    #[test]
    fn the_api_servers_service_is_given_even_without_service_links() {
        let services = [
            service("default", "kubernetes", "10.96.0.1", json!([{"name": "https", "port": 443}])),
            service("ns", "app", "10.0.0.4", json!([{"port": 80}])),
        ];
        let without = service_env(&services, "ns", false);
        assert_eq!(without["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
        assert_eq!(without["KUBERNETES_SERVICE_PORT_HTTPS"], "443");
        assert!(!without.contains_key("APP_SERVICE_HOST"));
        assert_eq!(service_env(&services, "ns", true)["APP_SERVICE_HOST"], "10.0.0.4");
    }

    #[test]
    fn a_namespaces_own_service_wins_over_the_master_service_of_its_name() {
        for order in [[0, 1], [1, 0]] {
            let both = [
                service("default", "kubernetes", "10.96.0.1", json!([{"port": 443}])),
                service("ns", "kubernetes", "10.0.0.5", json!([{"port": 80}])),
            ];
            let services: Vec<Service> = order.iter().map(|&i| both[i].clone()).collect();
            assert_eq!(service_env(&services, "ns", true)["KUBERNETES_SERVICE_HOST"], "10.0.0.5");
            assert_eq!(service_env(&services, "ns", false)["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
        }
    }
}
