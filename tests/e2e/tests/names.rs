//! Host names and name resolution seen from inside a container, on real containerd: the
//! kubelet's `/etc/hosts` (the pod's IP with its FQDN, `hostAliases`), `hostname` and
//! `hostname -f`, and `/etc/resolv.conf` per `dnsPolicy` with `dnsConfig` appended.
//! `podwright run` has no cluster DNS, as a kubelet without `clusterDNS`.
// Tests of the real binary: real timeouts.
#![allow(clippy::disallowed_methods)]

use podwright_e2e::*;

const BUSYBOX: &str = "localhost/busybox:1.36";

/// Prints the container's view: /etc/hosts, a marker, /etc/resolv.conf, a marker, the host
/// name, the FQDN and `$HOSTNAME`, then the pod's IP (from the downward API: the final status
/// has none, the sandbox being gone).
const SHOW: &str = r#"
    command: [sh, -c, 'cat /etc/hosts; echo ---; cat /etc/resolv.conf; echo ---; hostname; hostname -f; echo "HOSTNAME=$HOSTNAME"; echo "$POD_IP"']
    env: [{name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]"#;

/// What `SHOW` printed, in its parts.
struct Seen {
    hosts: Vec<String>,
    resolv: Vec<String>,
    names: Vec<String>,
    ip: String,
}

fn seen(o: &Outcome, container: &str) -> Seen {
    let lines = o.output_of(container);
    let mut parts = lines.split(|l| l == "---").map(<[String]>::to_vec);
    let (Some(hosts), Some(resolv), Some(mut names), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        panic!("{container} printed {lines:#?}\n{}", o.context());
    };
    let ip = names.pop().filter(|ip| !ip.is_empty()).unwrap_or_else(|| panic!("no pod IP\n{}", o.context()));
    Seen { hosts, resolv, names, ip }
}

/// The host's resolv.conf as the kubelet reads it: its nameservers, last search line and
/// last options line.
fn host_resolv_conf() -> (Vec<String>, Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let (mut servers, mut searches, mut options) = (vec![], vec![], vec![]);
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with('#')) {
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("nameserver") => servers.extend(fields.next().map(str::to_string)),
            Some("search") => searches = fields.map(|s| s.strip_suffix('.').unwrap_or(s).to_string()).collect(),
            Some("options") => options = fields.map(str::to_string).collect(),
            _ => {}
        }
    }
    (servers, searches, options)
}

fn nameservers(resolv: &[String]) -> Vec<String> {
    resolv.iter().filter_map(|l| l.strip_prefix("nameserver ")).map(str::to_string).collect()
}

const LOCALHOST: [&str; 7] = [
    "# Kubernetes-managed hosts file.",
    "127.0.0.1\tlocalhost",
    "::1\tlocalhost ip6-localhost ip6-loopback",
    "fe00::0\tip6-localnet",
    "fe00::0\tip6-mcastprefix",
    "fe00::1\tip6-allnodes",
    "fe00::2\tip6-allrouters",
];

#[test]
fn host_aliases_and_subdomain_give_the_kubelets_etc_hosts_and_fqdn() {
    let pod = pod_name("names-aliases");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}, namespace: shop}}
spec:
  restartPolicy: Never
  hostname: db-0
  subdomain: db
  hostAliases:
  - {{ip: 10.1.2.3, hostnames: [foo.local, bar.local]}}
  - {{ip: "2001:db8::5", hostnames: [six.local]}}
  initContainers:
  - name: write-hosts
    image: {BUSYBOX}
    command: [sh, -c, 'echo "192.0.2.1 mine.local" > /work/hosts']
    volumeMounts: [{{name: work, mountPath: /work}}]
  containers:
  - name: app
    image: {BUSYBOX}
{SHOW}
  - name: own-hosts
    image: {BUSYBOX}
    command: [sh, -c, 'cat /etc/hosts']
    volumeMounts: [{{name: work, mountPath: /etc/hosts, subPath: hosts}}]
  volumes: [{{name: work, emptyDir: {{}}}}]
"#
        ),
        &[],
    );
    o.assert_code(0);
    let p = o.pod(&pod);
    let seen = seen(&o, "app");
    let ip = &seen.ip;
    let mut want: Vec<String> = LOCALHOST.iter().map(|s| s.to_string()).collect();
    want.extend([
        format!("{ip}\tdb-0.db.shop.svc.cluster.local\tdb-0"),
        String::new(),
        "# Entries added by HostAliases.".into(),
        "10.1.2.3\tfoo.local\tbar.local".into(),
        "2001:db8::5\tsix.local".into(),
    ]);
    assert_eq!(seen.hosts, want, "{}", o.context());
    assert_eq!(seen.names, ["db-0", "db-0.db.shop.svc.cluster.local", "HOSTNAME=db-0"], "{}", o.context());
    // A container that mounts its own /etc/hosts keeps it.
    assert_eq!(o.output_of("own-hosts"), ["192.0.2.1 mine.local"], "{}", o.context());
    // No cluster DNS: ClusterFirst falls back to the host's resolver, with the kubelet's event.
    let (servers, _, _) = host_resolv_conf();
    assert_eq!(nameservers(&seen.resolv), servers.iter().take(3).cloned().collect::<Vec<_>>(), "{}", o.context());
    let missing: Vec<_> = o
        .events()
        .into_iter()
        .filter(|e| e["reason"] == "MissingClusterDNS" && e["involvedObject"]["name"] == pod.as_str())
        .collect();
    assert_eq!(missing.len(), 1, "{}", o.context());
    assert_eq!(missing[0]["type"], "Warning");
    assert_eq!(
        missing[0]["message"],
        format!(
            "pod: \"{pod}_shop({})\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.",
            uid(&p)
        )
    );
    assert_nothing_left(&p);
}

#[test]
fn dns_policy_none_gives_only_dns_config_and_fqdn_as_hostname() {
    let pod = pod_name("names-none");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  hostname: web
  subdomain: front
  setHostnameAsFQDN: true
  dnsPolicy: None
  dnsConfig:
    nameservers: [192.0.2.53, "2001:db8::53", 192.0.2.53]
    searches: [a.example, b.example.]
    options: [{{name: ndots, value: "2"}}, {{name: edns0}}, {{name: ndots, value: "3"}}]
  containers:
  - name: app
    image: {BUSYBOX}
{SHOW}
"#
        ),
        &[],
    );
    o.assert_code(0);
    let p = o.pod(&pod);
    let seen = seen(&o, "app");
    assert_eq!(
        seen.resolv,
        ["search a.example b.example.", "nameserver 192.0.2.53", "nameserver 2001:db8::53", "options ndots:3 edns0"],
        "{}",
        o.context()
    );
    let fqdn = "web.front.default.svc.cluster.local";
    assert_eq!(seen.names, [fqdn.to_string(), fqdn.to_string(), format!("HOSTNAME={fqdn}")], "{}", o.context());
    assert_eq!(seen.hosts.last(), Some(&format!("{}\t{fqdn}\tweb", seen.ip)), "{}", o.context());
    let warnings = o.warnings();
    assert!(warnings.is_empty(), "{warnings:#?}\n{}", o.context());
    assert_nothing_left(&p);
}

#[test]
fn default_gives_the_hosts_resolver_with_dns_config_appended() {
    let pod = pod_name("names-default");
    let o = run_manifest(
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  restartPolicy: Never
  dnsPolicy: Default
  dnsConfig:
    nameservers: [192.0.2.53]
    searches: [extra.example]
    options: [{{name: ndots, value: "3"}}]
  containers:
  - name: app
    image: {BUSYBOX}
{SHOW}
"#
        ),
        &[],
    );
    o.assert_code(0);
    let p = o.pod(&pod);
    let seen = seen(&o, "app");
    let (mut servers, mut searches, options) = host_resolv_conf();
    servers.retain(|s| s != "192.0.2.53");
    servers.push("192.0.2.53".into());
    servers.truncate(3);
    assert_eq!(nameservers(&seen.resolv), servers, "{}", o.context());
    searches.push("extra.example".into());
    assert_eq!(seen.resolv.first(), Some(&format!("search {}", searches.join(" "))), "{}", o.context());
    // The pod's ndots wins over any of the host's; the host's other options stay.
    let mut want_options: Vec<String> = options.into_iter().filter(|o| !o.starts_with("ndots")).collect();
    let seen_options: Vec<String> = seen
        .resolv
        .iter()
        .find_map(|l| l.strip_prefix("options "))
        .map(|l| l.split(' ').map(str::to_string).collect())
        .unwrap_or_default();
    want_options.push("ndots:3".into());
    let mut sorted = seen_options.clone();
    sorted.sort();
    want_options.sort();
    assert_eq!(sorted, want_options, "{}", o.context());
    // The pod's own name, no domain.
    assert_eq!(seen.names, [pod.clone(), pod.clone(), format!("HOSTNAME={pod}")], "{}", o.context());
    let warnings = o.warnings();
    assert!(warnings.is_empty(), "{warnings:#?}\n{}", o.context());
    assert_nothing_left(&p);
}
