//! The sandbox's port mappings, as the kubelet's `generatePodSandboxConfig` makes them
//! (`MakePortMappings` for each of the pod's `containers`). The runtime hands those with a
//! `hostPort` to the CNI portmap plugin, which forwards the host's port to the pod, and removes
//! the forwarding when the sandbox's network is torn down.

use k8s_openapi::api::core::v1::{Container, Pod};
use podwright_runtime::cri_api::{PortMapping, Protocol};
use std::collections::HashSet;
use std::net::Ipv6Addr;

/// Every port of the pod's containers, init containers aside as the kubelet leaves them out.
/// Ports without a `hostPort` go too (0): the runtime maps only the others.
pub fn port_mappings(pod: &Pod) -> Vec<PortMapping> {
    pod.spec.iter().flat_map(|s| &s.containers).flat_map(container_mappings).collect()
}

/// One container's ports; a port whose name (or, unnamed, whose family, protocol, host IP and
/// ports) came before in the same container is left out, as `MakePortMappings` does.
fn container_mappings(c: &Container) -> Vec<PortMapping> {
    let mut names = HashSet::new();
    let mut out = Vec::new();
    for p in c.ports.iter().flatten() {
        let protocol = p.protocol.as_deref().unwrap_or_default();
        let host_ip = p.host_ip.as_deref().unwrap_or_default();
        let host_port = p.host_port.unwrap_or(0);
        let name = match p.name.as_deref().filter(|n| !n.is_empty()) {
            Some(name) => name.to_string(),
            None => {
                let family = match host_ip {
                    "" => "any",
                    ip if ip.parse::<Ipv6Addr>().is_ok_and(|ip| ip.to_ipv4_mapped().is_none()) => "v6",
                    _ => "v4",
                };
                format!("{family}-{protocol}-{host_ip}:{}:{host_port}", p.container_port)
            }
        };
        if !names.insert(name) {
            continue;
        }
        out.push(PortMapping {
            protocol: runtime_protocol(protocol) as i32,
            container_port: p.container_port,
            host_port,
            host_ip: host_ip.to_string(),
        });
    }
    out
}

/// `toRuntimeProtocol`: TCP for anything it does not know.
fn runtime_protocol(protocol: &str) -> Protocol {
    match protocol {
        "UDP" => Protocol::Udp,
        "SCTP" => Protocol::Sctp,
        _ => Protocol::Tcp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn mapping(protocol: Protocol, container_port: i32, host_port: i32, host_ip: &str) -> PortMapping {
        PortMapping { protocol: protocol as i32, container_port, host_port, host_ip: host_ip.into() }
    }

    #[test]
    fn every_port_of_the_containers_with_its_host_port_protocol_and_host_ip() {
        let p = pod(serde_json::json!({
            "initContainers": [{"name": "i", "ports": [{"containerPort": 53, "hostPort": 5353}]}],
            "containers": [
                {"name": "a", "ports": [
                    {"containerPort": 80, "hostPort": 8080, "protocol": "TCP"},
                    {"containerPort": 53, "hostPort": 5353, "protocol": "UDP", "hostIP": "127.0.0.1"},
                    {"containerPort": 9000, "protocol": "TCP"},
                ]},
                {"name": "b", "ports": [{"containerPort": 2905, "hostPort": 2905, "protocol": "SCTP"}]},
                {"name": "c"},
            ],
        }));
        assert_eq!(
            port_mappings(&p),
            [
                mapping(Protocol::Tcp, 80, 8080, ""),
                mapping(Protocol::Udp, 53, 5353, "127.0.0.1"),
                // Without a host port: the runtime maps nothing for it.
                mapping(Protocol::Tcp, 9000, 0, ""),
                mapping(Protocol::Sctp, 2905, 2905, ""),
            ]
        );
    }

    #[test]
    fn a_port_repeated_in_one_container_is_mapped_once() {
        let p = pod(serde_json::json!({
            "containers": [
                {"name": "a", "ports": [
                    {"containerPort": 80, "hostPort": 8080, "protocol": "TCP"},
                    {"containerPort": 80, "hostPort": 8080, "protocol": "TCP"},
                    // Another family of host IP is another port.
                    {"containerPort": 80, "hostPort": 8080, "protocol": "TCP", "hostIP": "::1"},
                    {"name": "web", "containerPort": 81, "hostPort": 8081, "protocol": "TCP"},
                    {"name": "web", "containerPort": 82, "hostPort": 8082, "protocol": "TCP"},
                ]},
                // Across containers nothing is left out (validation refuses host port clashes).
                {"name": "b", "ports": [{"name": "web", "containerPort": 83, "protocol": "TCP"}]},
            ],
        }));
        assert_eq!(
            port_mappings(&p),
            [
                mapping(Protocol::Tcp, 80, 8080, ""),
                mapping(Protocol::Tcp, 80, 8080, "::1"),
                mapping(Protocol::Tcp, 81, 8081, ""),
                mapping(Protocol::Tcp, 83, 0, ""),
            ]
        );
    }
}
