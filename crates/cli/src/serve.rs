//! `podwright serve`: the node daemon. The local Kubernetes-compatible API is the pod source
//! and the status and event sink; it runs every pod it is given until the pod is deleted.
//! SIGTERM stops the daemon and leaves the pods running (they are the runtime's).

use crate::{RuntimeArgs, exit, run};
use podwright_api::quantity::Quantity;
use podwright_node::cri::dns::{ClusterDns, DEFAULT_CLUSTER_DOMAIN, HOST_RESOLV_CONF, ResolvConf};
use podwright_node::downward::{NodeFacts, host_ip};
use podwright_node::log_rotation::{self, LogPolicy};
use podwright_node::removal;
use podwright_node::static_pods::{DEFAULT_CHECK_FREQUENCY, StaticPodSource};
use podwright_node::usage::UsageCollector;
use podwright_node::{ImageGcPolicy, ImagePulls, Metrics, Node, PodCgroups};
use podwright_runtime::Clock;
use podwright_runtime::Runtime;
use podwright_server::dns::{DnsServer, DnsSockets, upstream::Upstream};
use podwright_server::secure::{Security, write_private};
use podwright_server::{ApiServer, ServerConfig};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};

#[derive(clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// A KubeletConfiguration-style YAML file (address, port, containerLogMaxSize,
    /// containerLogMaxFiles, clusterDNS, clusterDomain, staticPodPath, fileCheckFrequency,
    /// serializeImagePulls, maxParallelImagePulls, imageGCHighThresholdPercent,
    /// imageGCLowThresholdPercent, imageMinimumGCAge, imageMaximumGCAge); flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The address to serve the API on (default 127.0.0.1).
    #[arg(long)]
    pub address: Option<IpAddr>,
    /// The port to serve the API on (default 6443).
    #[arg(long)]
    pub port: Option<u16>,
    /// The node's name instead of the host name.
    #[arg(long)]
    pub hostname_override: Option<String>,
    /// A directory of static pod manifests (or one manifest file), run as the kubelet runs
    /// them; the config's staticPodPath otherwise.
    #[arg(long, value_name = "DIR")]
    pub pod_manifest_path: Option<PathBuf>,
    /// Serve HTTPS and require a bearer token (both written into the kubeconfig); needed on
    /// any address but loopback. The certificate is generated under the root directory unless
    /// given.
    #[arg(long)]
    pub tls: bool,
    /// The serving certificate (PEM), with --tls-private-key-file.
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's key (PEM), with --tls-cert-file.
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
}

/// The part of a `KubeletConfiguration` podwright honours; any other field is refused.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServeConfig {
    kind: Option<String>,
    api_version: Option<String>,
    address: Option<IpAddr>,
    port: Option<u16>,
    container_log_max_size: Option<String>,
    container_log_max_files: Option<u32>,
    /// The DNS servers pods ask; without it podwright serves cluster DNS itself.
    #[serde(rename = "clusterDNS")]
    cluster_dns: Option<Vec<IpAddr>>,
    cluster_domain: Option<String>,
    /// The static pods' directory (or file).
    static_pod_path: Option<PathBuf>,
    /// How often the static-pod path is read again without a change notice (a Go duration).
    file_check_frequency: Option<String>,
    /// One image pull at a time node-wide (true unless given).
    serialize_image_pulls: Option<bool>,
    /// At most this many image pulls at once when they are not serialized.
    max_parallel_image_pulls: Option<i64>,
    /// What the two above make, validated.
    #[serde(skip)]
    pub(crate) image_pulls: ImagePulls,
    /// Image garbage collection starts at this usage of the image filesystem (percent)…
    #[serde(rename = "imageGCHighThresholdPercent")]
    image_gc_high_threshold_percent: Option<i64>,
    /// …and frees down to this one.
    #[serde(rename = "imageGCLowThresholdPercent")]
    image_gc_low_threshold_percent: Option<i64>,
    /// Images first seen more recently are never collected for space (a Go duration).
    #[serde(rename = "imageMinimumGCAge")]
    image_minimum_gc_age: Option<String>,
    /// Images unused for longer are collected whatever the usage (a Go duration, 0 = never).
    #[serde(rename = "imageMaximumGCAge")]
    image_maximum_gc_age: Option<String>,
    /// What the four above make, validated.
    #[serde(skip)]
    pub(crate) image_gc: ImageGcPolicy,
}

pub(crate) fn read_config(path: &Path) -> Result<ServeConfig, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut c: ServeConfig = serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(k) = c.kind.as_deref().filter(|k| *k != "KubeletConfiguration") {
        return Err(format!(
            "{}: kind: Unsupported value: {k:?}: supported values: \"KubeletConfiguration\"",
            path.display()
        ));
    }
    let _ = &c.api_version;
    if c.cluster_dns.as_ref().is_none_or(Vec::is_empty) && c.cluster_domain().is_empty() {
        return Err(format!(
            "{}: clusterDomain: Required value: podwright serves cluster DNS for it unless clusterDNS is given",
            path.display()
        ));
    }
    c.image_pulls = ImagePulls::from_config(c.serialize_image_pulls, c.max_parallel_image_pulls)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    c.image_gc = ImageGcPolicy::from_config(
        c.image_gc_high_threshold_percent,
        c.image_gc_low_threshold_percent,
        c.image_minimum_gc_age.as_deref(),
        c.image_maximum_gc_age.as_deref(),
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(c)
}

impl ServeConfig {
    /// The fields given that only `serve` honours, by their configuration names.
    pub(crate) fn serve_only_fields(&self) -> Vec<&'static str> {
        let given = [
            ("address", self.address.is_some()),
            ("port", self.port.is_some()),
            ("containerLogMaxSize", self.container_log_max_size.is_some()),
            ("containerLogMaxFiles", self.container_log_max_files.is_some()),
            ("clusterDNS", self.cluster_dns.is_some()),
            ("clusterDomain", self.cluster_domain.is_some()),
            ("staticPodPath", self.static_pod_path.is_some()),
            ("fileCheckFrequency", self.file_check_frequency.is_some()),
        ];
        given.into_iter().filter(|(_, set)| *set).map(|(name, _)| name).collect()
    }

    /// Without a trailing dot; `cluster.local` unless given.
    fn cluster_domain(&self) -> &str {
        self.cluster_domain.as_deref().unwrap_or(DEFAULT_CLUSTER_DOMAIN).trim_end_matches('.')
    }

    /// `fileCheckFrequency` (`20s`, `1m30s`), 20 s unless given.
    fn file_check_frequency(&self) -> Result<Duration, String> {
        let Some(given) = &self.file_check_frequency else { return Ok(DEFAULT_CHECK_FREQUENCY) };
        podwright_api::go::parse_duration(given)
            .ok()
            .and_then(|d| Duration::try_from(d).ok())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                format!("fileCheckFrequency: Invalid value: {given:?}: must be a positive duration such as \"20s\"")
            })
    }
}

/// The cluster DNS pods are told to use: the configured servers, or podwright's own. The
/// host's resolv.conf gives the search domains pods add after the cluster's, the `Default`
/// pods' configuration, and where podwright's cluster DNS sends other names.
///
/// podwright's own answers on the pod bridge's gateway address, port 53 (resolv.conf has no
/// port): every pod reaches it through its default route whatever its IP, and nothing is
/// opened on the host's other interfaces, as a wildcard 0.0.0.0:53 would. The bridge gets
/// that address only with the first sandbox, so the sockets are bound with IP_FREEBIND and
/// work from then on. Only one node on a machine can have it; a second one (or another DNS
/// server there) has no servers to give, as a kubelet without cluster DNS, and says so. A
/// runtime given with --runtime-endpoint may have another pod network, where clusterDNS must
/// name a server its pods reach.
fn cluster_dns(config: &ServeConfig, api: &ApiServer) -> ClusterDns {
    let host = ResolvConf::read(Path::new(HOST_RESOLV_CONF)).unwrap_or_else(|e| {
        eprintln!("podwright: {HOST_RESOLV_CONF}: {e}; pods search only the cluster domains");
        ResolvConf::default()
    });
    let domain = config.cluster_domain().to_string();
    if let Some(servers) = config.cluster_dns.clone().filter(|s| !s.is_empty()) {
        return ClusterDns { servers, domain, host };
    }
    let gateway = IpAddr::V4(podwright_containerd::POD_GATEWAY);
    let sockets = match DnsSockets::bind(SocketAddr::new(gateway, 53)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "podwright: cannot serve cluster DNS on {gateway}:53: {e}; ClusterFirst pods get the host's resolv.conf (give clusterDNS in --config to use another server)"
            );
            return ClusterDns { servers: Vec::new(), domain, host };
        }
    };
    let server = DnsServer::new(api, &domain, Upstream::from_resolv_conf(&host, gateway));
    tokio::spawn(async move {
        if let Err(e) = server.serve(sockets).await {
            eprintln!("podwright: cluster DNS stopped: {e}");
        }
    });
    ClusterDns { servers: vec![gateway], domain, host }
}

/// `containerLogMaxSize` (a quantity such as `10Mi`) and `containerLogMaxFiles` (at least 2).
fn log_policy(c: &ServeConfig) -> Result<LogPolicy, String> {
    let mut policy = LogPolicy::default();
    if let Some(size) = &c.container_log_max_size {
        let q = Quantity::parse(size).map_err(|e| format!("containerLogMaxSize: Invalid value: {size:?}: {e}"))?;
        policy.max_size = u64::try_from(q.value())
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| format!("containerLogMaxSize: Invalid value: {size:?}: must be greater than 0"))?;
    }
    if let Some(files) = c.container_log_max_files {
        if files < 2 {
            return Err(format!("containerLogMaxFiles: Invalid value: {files}: must be greater than 1"));
        }
        policy.max_files = files as usize;
    }
    Ok(policy)
}

/// The URL kubectl on this machine reaches the daemon at.
fn server_url(scheme: &str, addr: SocketAddr) -> String {
    let host = if addr.ip().is_unspecified() { IpAddr::V4(Ipv4Addr::LOCALHOST) } else { addr.ip() };
    format!("{scheme}://{}", SocketAddr::new(host, addr.port()))
}

/// The kubeconfig that points kubectl at a plain-HTTP daemon.
pub fn kubeconfig_text(addr: SocketAddr) -> String {
    let server = server_url("http", addr);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: podwright\n  cluster:\n    server: {server}\ncontexts:\n- name: podwright\n  context:\n    cluster: podwright\n    user: podwright\n    namespace: default\ncurrent-context: podwright\nusers:\n- name: podwright\n  user: {{}}\n"
    )
}

pub fn kubeconfig_path(root: &Path) -> PathBuf {
    root.join("kubeconfig")
}

pub async fn serve(args: ServeArgs) -> u8 {
    let config = match args.config.as_deref().map(read_config).transpose() {
        Ok(c) => c.unwrap_or_default(),
        Err(e) => {
            eprintln!("podwright: {e}");
            return exit::INVALID;
        }
    };
    let ip = args.address.or(config.address).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let addr = SocketAddr::new(ip, args.port.or(config.port).unwrap_or(6443));
    let tls = args.tls || args.tls_cert_file.is_some();
    if !ip.is_loopback() && !tls {
        eprintln!(
            "podwright: refusing to serve the API on {ip} without TLS and a bearer token: add --tls (or serve on a loopback address, the default 127.0.0.1)"
        );
        return exit::INVALID;
    }
    let settings = log_policy(&config)
        .and_then(|logs| Ok((logs, config.file_check_frequency()?, args.runtime.credential_plugins()?)));
    let (log_policy, file_check_frequency, credential_plugins) = match settings {
        Ok(s) => s,
        Err(e) => {
            eprintln!("podwright: {e}");
            return exit::INVALID;
        }
    };
    let static_pod_path =
        args.pod_manifest_path.clone().or_else(|| config.static_pod_path.clone()).filter(|p| !p.as_os_str().is_empty());
    let root = args.runtime.root_dir.clone();
    if let Err(e) = std::fs::create_dir_all(&root) {
        eprintln!("podwright: {}: {e}", root.display());
        return exit::FAILED;
    }
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("podwright: cannot listen on {addr}: {e}");
            return exit::FAILED;
        }
    };
    // Calls in flight when serve is killed finish: the next serve resumes from their results.
    let runtime = match run::connect(&args.runtime, podwright_runtime::InFlight::Finished).await {
        Ok(r) => r,
        Err(msg) => {
            eprintln!("podwright: {msg}");
            return exit::NO_RUNTIME;
        }
    };
    if args.runtime.runtime_endpoint.is_none() {
        // Its own containerd: started again whenever it exits, under the running pods.
        tokio::spawn(podwright_containerd::EmbeddedRuntime::new(&root).keep_running());
    }
    let node_name =
        args.hostname_override.clone().map(|h| h.to_lowercase()).unwrap_or_else(podwright_node::downward::host_name);
    let host = host_ip();
    let security = if tls {
        let given = args.tls_cert_file.as_deref().zip(args.tls_private_key_file.as_deref());
        let names = [node_name.clone(), "localhost".to_string()];
        let mut ips: Vec<IpAddr> = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
        ips.extend(host.as_deref().and_then(|h| h.parse::<IpAddr>().ok()));
        if !ip.is_unspecified() && !ips.contains(&ip) {
            ips.push(ip);
        }
        match Security::load_or_create(&root, given, &names, &ips) {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("podwright: {e}");
                return exit::INVALID;
            }
        }
    } else {
        None
    };
    let clock = Clock::new();
    let runtime: Arc<dyn Runtime> = Arc::new(runtime);
    // Every runtime call is in the node's metrics: the API's (exec, attach, port-forward) and
    // log rotation's through `counted`, the node's own through the node.
    let metrics = Arc::new(Metrics::default());
    let counted = metrics.instrument(runtime.clone(), clock);
    let server_config = ServerConfig { node_name: node_name.clone(), root: root.clone(), host_ip: host.clone() };
    let (api, feed) = match ApiServer::open(server_config, clock, counted.clone()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("podwright: {e}");
            return exit::FAILED;
        }
    };
    // `kubectl top` and the kubelet's usage endpoints, read from the runtime on each request.
    api.serve_usage(Arc::new(UsageCollector::new(counted.clone(), clock, &node_name, &root)));
    // The static pods are known before anything is removed (the kubelet waits for every source
    // to report once): a restart finds the same UIDs in the same files and adopts their pods.
    let mut static_pods = static_pod_path.map(|p| StaticPodSource::new(p, &node_name, file_check_frequency));
    api.set_static_pods(static_pods.as_mut().map(StaticPodSource::list).unwrap_or_default());
    // What the runtime holds of pods the API does not know (deleted while podwright was down,
    // or from another run on this root) goes before anything new starts.
    let cgroups = PodCgroups::of_host(&root);
    remove_orphans(runtime.as_ref(), &root, cgroups.as_ref(), &api.pod_uids()).await;
    tokio::spawn(api.clone().expire_events());
    if let Some(mut source) = static_pods {
        let api = api.clone();
        tokio::spawn(async move {
            loop {
                let pods = source.next().await;
                api.set_static_pods(pods);
            }
        });
    }
    tokio::spawn(log_rotation::rotate_logs(counted, clock, log_policy));
    let mut node = Node::new(runtime, &root)
        .clock(clock)
        .metrics(metrics.clone())
        .events(api.sink())
        .status(api.sink())
        .objects(api.objects())
        .facts(NodeFacts::of_this_machine(node_name.clone(), host.clone()))
        .image_pulls(config.image_pulls)
        .image_gc(config.image_gc);
    if let Some(plugins) = credential_plugins {
        node = node.credential_plugins(plugins);
    }
    if let Some(cgroups) = cgroups {
        node = node.cgroups(cgroups);
    }
    let workers = Arc::new(node.cluster_dns(cluster_dns(&config, &api)).build());
    // Pods follow their ConfigMaps and Secrets as they change.
    tokio::spawn({
        let workers = Arc::downgrade(&workers);
        api.follow_object_changes(move || {
            if let Some(w) = workers.upgrade() {
                w.objects_changed();
            }
        })
    });
    let kubeconfig = kubeconfig_path(&root);
    let kubeconfig_body = match &security {
        Some(s) => s.kubeconfig(&server_url("https", addr)),
        None => kubeconfig_text(addr),
    };
    if let Err(e) = write_private(&kubeconfig, &kubeconfig_body) {
        eprintln!("podwright: {}: {e}", kubeconfig.display());
        return exit::FAILED;
    }
    tokio::spawn({
        let workers = workers.clone();
        async move { workers.follow(feed.source).await }
    });
    tokio::spawn({
        let (workers, api) = (workers.clone(), api.clone());
        let mut removals = feed.removals;
        async move {
            while let Some(uid) = removals.recv().await {
                workers.remove(&uid).await;
                api.pod_removed(&uid);
            }
        }
    });
    let scheme = if security.is_some() { "https" } else { "http" };
    eprintln!(
        "podwright: serving the API on {} (node {}); KUBECONFIG={}",
        server_url(scheme, addr),
        api.node_name(),
        kubeconfig.display()
    );
    let mut sigint = signal(SignalKind::interrupt()).ok();
    let mut sigterm = signal(SignalKind::terminate()).ok();
    // The node's metrics beside the API, behind the same token when there is one.
    let router = api.router().merge(podwright_server::metrics::router(metrics));
    let server = async move {
        match security {
            Some(s) => {
                let token: Arc<str> = s.token.clone().into();
                let router = router.layer(axum::middleware::from_fn(move |req, next| {
                    podwright_server::secure::require_token(token.clone(), req, next)
                }));
                axum::serve(s.listener(listener), router).await
            }
            None => axum::serve(listener, router).await,
        }
    };
    tokio::select! {
        r = server => {
            if let Err(e) = r {
                eprintln!("podwright: the API stopped: {e}");
                return exit::FAILED;
            }
        }
        _ = run::recv_signal(&mut sigint) => {}
        _ = run::recv_signal(&mut sigterm) => {}
    }
    // The pods stay: they are the runtime's, and the next start finds them.
    exit::SUCCEEDED
}

/// Stops and removes every pod in the runtime that this podwright (its root directory) made and
/// `known` does not name; other podwrights' pods on the same runtime are theirs.
async fn remove_orphans(runtime: &dyn Runtime, root: &Path, cgroups: Option<&PodCgroups>, known: &BTreeSet<String>) {
    if let Err(e) = removal::remove_managed(runtime, root, cgroups, Some(root), known).await {
        tracing::warn!(%e, "could not list the runtime's pods to remove those no longer known");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_fields_podwright_does_not_honour_are_refused() {
        let dir = std::env::temp_dir().join(format!("podwright-serve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.yaml");
        std::fs::write(&f, "kind: KubeletConfiguration\nport: 7000\n").unwrap();
        assert_eq!(read_config(&f).unwrap().port, Some(7000));
        std::fs::write(&f, "kind: KubeletConfiguration\nmaxPods: 3\n").unwrap();
        assert!(read_config(&f).unwrap_err().contains("unknown field `maxPods`"));
        std::fs::write(&f, "clusterDNS: [10.96.0.10]\nclusterDomain: k8s.test.\n").unwrap();
        let c = read_config(&f).unwrap();
        assert_eq!(
            (c.cluster_dns.as_deref(), c.cluster_domain()),
            (Some(&["10.96.0.10".parse().unwrap()][..]), "k8s.test")
        );
        std::fs::write(&f, "staticPodPath: /etc/kubernetes/manifests\nfileCheckFrequency: 1m30s\n").unwrap();
        let c = read_config(&f).unwrap();
        assert_eq!(c.static_pod_path.as_deref(), Some(Path::new("/etc/kubernetes/manifests")));
        assert_eq!(c.file_check_frequency(), Ok(Duration::from_secs(90)));
        assert_eq!(ServeConfig::default().file_check_frequency(), Ok(Duration::from_secs(20)));
        std::fs::write(&f, "fileCheckFrequency: 0s\n").unwrap();
        assert!(
            read_config(&f)
                .unwrap()
                .file_check_frequency()
                .unwrap_err()
                .starts_with("fileCheckFrequency: Invalid value: \"0s\"")
        );
        std::fs::write(&f, "clusterDomain: \"\"\n").unwrap();
        assert!(read_config(&f).unwrap_err().contains("clusterDomain: Required value"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn image_pull_settings_are_read_and_invalid_ones_refused_naming_the_field() {
        let dir = std::env::temp_dir().join(format!("podwright-serve-pulls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.yaml");
        let two = std::num::NonZeroUsize::new(2);
        for (text, pulls) in [
            ("kind: KubeletConfiguration\n", ImagePulls::Serial),
            ("serializeImagePulls: false\n", ImagePulls::Parallel { max: None }),
            ("serializeImagePulls: false\nmaxParallelImagePulls: 2\n", ImagePulls::Parallel { max: two }),
        ] {
            std::fs::write(&f, text).unwrap();
            assert_eq!(read_config(&f).unwrap().image_pulls, pulls, "{text}");
        }
        assert_eq!(ServeConfig::default().image_pulls, ImagePulls::Serial);
        for (text, error) in [
            ("maxParallelImagePulls: 2\n", "maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls"),
            (
                "serializeImagePulls: false\nmaxParallelImagePulls: 0\n",
                "maxParallelImagePulls 0 must be a positive number",
            ),
        ] {
            std::fs::write(&f, text).unwrap();
            let e = read_config(&f).unwrap_err();
            assert!(e.starts_with(&format!("{}: invalid configuration: ", f.display())) && e.contains(error), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn image_gc_settings_are_read_and_invalid_ones_refused_naming_the_file_and_field() {
        let dir = std::env::temp_dir().join(format!("podwright-serve-gc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.yaml");
        assert_eq!(ServeConfig::default().image_gc, ImageGcPolicy::default());
        std::fs::write(&f, "kind: KubeletConfiguration\n").unwrap();
        assert_eq!(read_config(&f).unwrap().image_gc, ImageGcPolicy::default());
        std::fs::write(
            &f,
            "imageGCHighThresholdPercent: 90\nimageGCLowThresholdPercent: 50\nimageMinimumGCAge: 30s\nimageMaximumGCAge: 1h\n",
        )
        .unwrap();
        let gc = read_config(&f).unwrap().image_gc;
        assert_eq!((gc.high_threshold_percent, gc.low_threshold_percent), (90, 50));
        assert_eq!((gc.min_age, gc.max_age), (Duration::from_secs(30), Duration::from_secs(3600)));
        std::fs::write(&f, "imageGCHighThresholdPercent: 50\nimageGCLowThresholdPercent: 60\n").unwrap();
        assert_eq!(
            read_config(&f).unwrap_err(),
            format!(
                "{}: invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 60 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 50",
                f.display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
