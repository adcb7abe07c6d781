//! Networking on the embedded containerd: a `hostNetwork` pod in the node's network namespace
//! (its interfaces, host name, address and hosts file), a container's `hostPort` reached from
//! the host through the CNI portmap plugin and forgotten when the pod goes, and two containers
//! of one pod talking over localhost, and a new pod reached from the host at once where the host
//! remembered another link address for its address.
// Tests of the real binary: real timeouts and timings.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

const BUSYBOX: &str = "localhost/busybox:1.36";

/// The node's address as podwright finds it: the source address of the default route.
fn node_ip() -> String {
    let socket = UdpSocket::bind("0.0.0.0:0").expect("a UDP socket");
    socket.connect("8.8.8.8:53").expect("a default route");
    socket.local_addr().expect("its local address").ip().to_string()
}

/// The interface of the node's default route (`/proc/net/route`, destination 0).
fn default_interface() -> String {
    let routes = std::fs::read_to_string("/proc/net/route").expect("the node's routes");
    let line = routes.lines().skip(1).find(|l| l.split_whitespace().nth(1) == Some("00000000"));
    line.and_then(|l| l.split_whitespace().next()).expect("a default route").to_string()
}

/// The node's NAT rules that mention `port` (portmap's DNAT chains name it).
fn nat_rules_for(port: u16) -> Vec<String> {
    let out = std::process::Command::new("iptables").args(["-t", "nat", "-S"]).output().expect("iptables");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .filter(|l| l.contains(&format!("--dport {port} ")) || l.contains(&format!("--dports {port} ")))
        .map(str::to_string)
        .collect()
}

/// The pod is in the node's network namespace: it sees the node's interfaces (the pod bridge
/// and the default route's), has the node's host name, the node's address as its own (status
/// and downward API), the node's hosts file under the kubelet's header, and no cluster DNS is
/// looked for (ClusterFirst falls back to Default on the host's network).
#[test]
fn a_host_network_pod_sees_the_nodes_interfaces_and_has_its_address() {
    let pod_name = pod_name("e2e-hostnet");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {pod_name}}}
spec:
  restartPolicy: Never
  hostNetwork: true
  containers:
  - name: look
    image: {BUSYBOX}
    command: [sh, -c, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo host=$(hostname); head -1 /etc/hosts; echo ip=$POD_IP"]
    env:
    - {{name: POD_IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    let out = o.output_of("look");
    for interface in ["podwright0".to_string(), default_interface()] {
        assert!(out.contains(&interface), "the node's {interface} is visible\n{}", o.context());
    }
    let node_name = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("the node's host name");
    let ip = node_ip();
    assert!(out.contains(&format!("host={}", node_name.trim())), "{}", o.context());
    assert!(out.contains(&"# Kubernetes-managed hosts file (host network).".to_string()), "{}", o.context());
    assert!(out.contains(&format!("ip={ip}")), "{}", o.context());

    let pod = o.single_pod();
    let status = &pod["status"];
    assert_eq!(status["hostIP"], ip.as_str(), "{}", o.context());
    assert_eq!(status["podIP"], status["hostIP"], "{}", o.context());
    assert_eq!(status["podIPs"], serde_json::json!([{"ip": ip}]), "{}", o.context());
    // A pod of its own network in `run` (no cluster DNS) gets this event.
    assert!(!o.events().iter().any(|e| e["reason"] == "MissingClusterDNS"), "{}", o.context());
}

/// A container port with a `hostPort` is reached from the node, at the loopback address and at
/// the node's own, and its forwarding rules go with the pod. (Each run of the suite takes a
/// port of its own, so concurrent runs never clash.)
#[test]
fn a_host_port_is_reached_from_the_node_and_unmapped_when_the_pod_goes() {
    let pod_name = pod_name("e2e-hostport");
    let host_port = 20000 + (std::process::id() % 10000) as u16;
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {pod_name}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: {BUSYBOX}
    command: [sh, -c, "mkdir /www && echo hello-{pod_name} > /www/index.html && exec httpd -f -p 8080 -h /www"]
    ports:
    - {{containerPort: 8080, hostPort: {host_port}}}
"#
    );
    let m = Manifest::new(&manifest);
    let mut r = Running::spawn(&run_args(m.path_str(), &[]), None);
    assert!(r.wait_for_stderr("Running", Duration::from_secs(60)), "never running:\n{}", r.stderr_so_far());
    let answers: Vec<(String, String)> =
        ["127.0.0.1".to_string(), node_ip()].into_iter().map(|addr| (addr.clone(), get(&addr, host_port))).collect();
    let mapped = nat_rules_for(host_port);
    r.signal(libc::SIGINT);
    let o = r.wait_within(Duration::from_secs(60));
    for (addr, answer) in answers {
        assert!(answer.contains(&format!("hello-{pod_name}")), "GET {addr}:{host_port}: {answer:?}\n{}", o.context());
    }
    assert!(!mapped.is_empty(), "portmap's rules while the pod ran\n{}", o.context());
    assert_eq!(nat_rules_for(host_port), Vec::<String>::new(), "the rules go with the sandbox\n{}", o.context());
}

/// `GET /` from `addr:port`; the server may still be starting when the container is, so a
/// refused connection is tried again a few times. The response, or the last error.
fn get(addr: &str, port: u16) -> String {
    let mut last = String::new();
    for _ in 0..50 {
        match TcpStream::connect((addr, port)).and_then(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            s.write_all(b"GET / HTTP/1.0\r\n\r\n")?;
            let mut response = String::new();
            s.read_to_string(&mut response)?;
            Ok(response)
        }) {
            Ok(response) if !response.is_empty() => return response,
            Ok(_) => last = "an empty response".into(),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    last
}

/// Two containers of one pod share its network namespace: one listens on the loopback
/// address, the other reaches it there.
#[test]
fn two_containers_of_a_pod_talk_over_localhost() {
    let pod_name = pod_name("e2e-localhost");
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {pod_name}}}
spec:
  restartPolicy: Never
  containers:
  - name: server
    image: {BUSYBOX}
    command: [sh, -c, "echo hello-over-localhost | nc -l -p 9000 127.0.0.1 && echo served"]
  - name: client
    image: {BUSYBOX}
    command: [sh, -c, "until nc 127.0.0.1 9000 </dev/null 2>/dev/null; do sleep 0.2; done"]
"#
    );
    let o = run_manifest(&manifest, &[]);
    o.assert_code(0);
    assert_eq!(o.output_of("client"), ["hello-over-localhost"], "{}", o.context());
    assert_eq!(o.output_of("server"), ["served"], "{}", o.context());
}

/// The host may remember another link address for the address a new pod gets (an earlier pod
/// had it; CNI's bridge plugin sends no gratuitous ARP). Until that entry failed, 5 to 10 s, the
/// host's packets went to the old pod, and the first probes timed out. podwright forgets the
/// entry as the sandbox starts: with a false entry planted for each address the pod may get,
/// no probe times out.
#[test]
fn a_new_pod_is_reached_from_the_host_though_the_host_remembered_its_address_elsewhere() {
    let pod_name = pod_name("e2e-neighbour");
    // The bridge exists once a pod has run; host-local hands out the addresses after the last one
    // it reserved, in order.
    if !std::path::Path::new("/sys/class/net/podwright0").exists() {
        let first = format!(
            "{{apiVersion: v1, kind: Pod, metadata: {{name: {pod_name}-first}}, spec: {{restartPolicy: Never, containers: [{{name: c, image: {BUSYBOX}, command: [true]}}]}}}}"
        );
        run_manifest(&first, &[]).assert_code(0);
    }
    let last = std::fs::read_to_string(test_root().join("cni/networks/podwright/last_reserved_ip.0"))
        .ok()
        .and_then(|s| s.trim().parse::<std::net::Ipv4Addr>().ok())
        .map_or(1, |ip| u32::from(ip) & 0xffff);
    // Other tests' pods may take some of them meanwhile.
    let planted: Vec<String> = (last + 1..last + 33)
        .map(|n| std::net::Ipv4Addr::from(u32::from(std::net::Ipv4Addr::new(10, 89, 0, 0)) + n).to_string())
        .collect();
    const ELSEWHERE: &str = "02:00:5e:00:53:01";
    for ip in &planted {
        neigh(&["replace", ip, "dev", "podwright0", "lladdr", ELSEWHERE, "nud", "stale"]);
    }
    let o = run_manifest(
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: {pod_name}}}
spec:
  restartPolicy: Never
  containers:
  - name: web
    image: {BUSYBOX}
    command: [sh, -c, "mkdir /www && echo ok > /www/ready && httpd -p 8080 -h /www && sleep 3"]
    readinessProbe:
      httpGet: {{path: /ready, port: 8080}}
      initialDelaySeconds: 1
      periodSeconds: 1
"#
        ),
        &[],
    );
    let left: Vec<String> =
        planted.iter().filter(|ip| neigh(&["show", ip.as_str()]).contains(ELSEWHERE)).cloned().collect();
    for ip in &left {
        neigh(&["del", ip, "dev", "podwright0"]);
    }
    o.assert_code(0);
    let pod = o.single_pod();
    let pod_ip = pod["status"]["podIP"].as_str().unwrap_or_default().to_string();
    assert!(planted.contains(&pod_ip), "the pod's address {pod_ip} was not among those planted: {planted:?}");
    assert!(!left.contains(&pod_ip), "the false entry for {pod_ip} stayed\n{}", o.context());
    // (A probe in flight as the container exits may see its server gone: not a timeout.)
    let unhealthy = o.events_with_reason(&pod_name, "spec.containers{web}", "Unhealthy");
    let timed_out =
        unhealthy.iter().filter(|e| e["message"].as_str().unwrap_or_default().contains("deadline exceeded"));
    assert_eq!(timed_out.count(), 0, "{unhealthy:?}\n{}", o.context());
    assert!(o.progress(&pod_name).iter().any(|l| l.ready == "1/1"), "never ready\n{}", o.context());
}

/// `ip neigh ARGS`: its output; panics when it fails.
fn neigh(args: &[&str]) -> String {
    let out = std::process::Command::new("ip").arg("neigh").args(args).output().expect("ip (iproute2)");
    assert!(out.status.success(), "ip neigh {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}
