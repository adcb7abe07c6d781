//! `podwright serve`: the node daemon. The local Kubernetes-compatible API is the pod source
//! and the status and event sink; it runs every pod it is given until the pod is deleted.
//! SIGTERM stops the daemon and leaves the pods running (they are the runtime's).

use crate::config::{ServeConfig, read_config};
use crate::connect::connect;
use crate::signals::StopSignals;
use crate::{RuntimeArgs, exit};
use podwright_containerd::EmbeddedRuntime;
use podwright_node::PluginConfig;
use podwright_node::cri::dns::{ClusterDns, HOST_RESOLV_CONF, ResolvConf};
use podwright_node::downward::{NodeFacts, host_ip, host_name};
use podwright_node::log_rotation::{self, LogPolicy};
use podwright_node::static_pods::StaticPodSource;
use podwright_node::usage::UsageCollector;
use podwright_node::{Metrics, Node, PodCgroups, PodWorkers};
use podwright_runtime::cri::CriRuntime;
use podwright_runtime::{Clock, InFlight, Runtime};
use podwright_server::dns::{DnsServer, DnsSockets, upstream::Upstream};
use podwright_server::limits::{self, Limits};
use podwright_server::secure::{Security, write_private};
use podwright_server::transport;
use podwright_server::{ApiServer, NodeFeed, ServerConfig};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

#[derive(clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// A KubeletConfiguration-style YAML file (address, port, containerLogMaxSize,
    /// containerLogMaxFiles, clusterDNS, clusterDomain, staticPodPath, fileCheckFrequency,
    /// serializeImagePulls, maxParallelImagePulls, imageGCHighThresholdPercent,
    /// imageGCLowThresholdPercent, imageMinimumGCAge, imageMaximumGCAge,
    /// imagePullCredentialsVerificationPolicy, preloadedImagesVerificationAllowlist; with
    /// --kubeconfig also
    /// authentication, authorization, tlsCertFile, tlsPrivateKeyFile); flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The address to serve the API on (default 127.0.0.1); with --kubeconfig, the kubelet
    /// port's (default 0.0.0.0).
    #[arg(long)]
    pub address: Option<IpAddr>,
    /// The port to serve the API on (default 6443); with --kubeconfig, the kubelet port
    /// (default 10250).
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
    /// The serving certificate (PEM), with --tls-private-key-file; with --kubeconfig, the
    /// kubelet port's.
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's key (PEM), with --tls-cert-file.
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Join a cluster as its node: the kubeconfig the node talks to the API server with (pods
    /// then come from the API server, and no local API is served). Written by TLS bootstrap
    /// when missing or expired.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// A kubeconfig with a bootstrap token, used to ask the API server for the node's client
    /// certificate when --kubeconfig has none that is valid.
    #[arg(long, value_name = "FILE", requires = "kubeconfig")]
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// The node's address in the cluster (its InternalIP); the host's otherwise.
    #[arg(long, requires = "kubeconfig")]
    pub node_ip: Option<IpAddr>,
    /// The most reading requests (get, list) the local API serves at once; more are answered
    /// 429 with Retry-After, as the API server does (0: no limit). Watches, logs, exec, attach
    /// and port-forward are not counted.
    #[arg(long, value_name = "N", default_value_t = limits::DEFAULT_MAX_REQUESTS_INFLIGHT)]
    pub max_requests_inflight: usize,
    /// The most writing requests (create, update, patch, delete) the local API serves at once
    /// (0: no limit).
    #[arg(long, value_name = "N", default_value_t = limits::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT)]
    pub max_mutating_requests_inflight: usize,
    /// How long a request of the local API may take (a request's `timeout` parameter may ask
    /// for less) before it is answered 504; also how long a write may wait for a client to
    /// read. Not for watches, logs, exec, attach and port-forward.
    #[arg(long, value_name = "DURATION", default_value = "1m0s", value_parser = positive_duration)]
    pub request_timeout: Duration,
}

/// A Go duration (`1m0s`, `90s`) above zero.
fn positive_duration(text: &str) -> Result<Duration, String> {
    let d = podwright_api::go::parse_duration(text)?;
    Duration::try_from(d).ok().filter(|d| !d.is_zero()).ok_or_else(|| format!("must be greater than 0: {text}"))
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
    match start_and_serve(args).await {
        // The pods stay: they are the runtime's, and the next start finds them.
        Ok(()) => exit::SUCCEEDED,
        Err(code) => code,
    }
}

/// The node's start-up, then the API until a signal; an error has been printed and is the exit
/// code.
async fn start_and_serve(args: ServeArgs) -> Result<(), u8> {
    let settings = Settings::read(&args).map_err(|e| fail(exit::INVALID, e))?;
    if args.kubeconfig.is_some() {
        return crate::cluster::join_and_run(&args, settings).await;
    }
    refuse_cluster_fields(&args, &settings).map_err(|e| fail(exit::INVALID, e))?;
    let root = &args.runtime.root_dir;
    let listener = listen(root, settings.addr).await.map_err(|e| fail(exit::FAILED, e))?;
    let runtime = connect_runtime(&args.runtime).await.map_err(|e| fail(exit::NO_RUNTIME, e))?;
    let node_name = args.hostname_override.clone().map(|h| h.to_lowercase()).unwrap_or_else(host_name);
    let identity = ServerConfig { node_name, root: root.clone(), host_ip: host_ip() };
    let security = security(&args, &settings, &identity).map_err(|e| fail(exit::INVALID, e))?;
    let clock = Clock::system();
    let runtime: Arc<dyn Runtime> = Arc::new(runtime);
    // Every runtime call is in the node's metrics: the API's (exec, attach, port-forward) and
    // log rotation's through `counted`, the node's own through the node.
    let metrics = Arc::new(Metrics::default());
    let counted = metrics.instrument(runtime.clone(), clock);
    let (api, feed) = open_api(identity, clock, &counted).map_err(|e| fail(exit::FAILED, e))?;
    let static_pods = read_static_pods(&api, &settings);
    // What the runtime holds of pods the API does not know (deleted while podwright was down,
    // or from another run on this root) goes before anything new starts.
    let mut node = Node::new(runtime, root).clock(clock).metrics(metrics.clone());
    if let Some(cgroups) = PodCgroups::of_host(root) {
        node = node.cgroups(cgroups);
    }
    node.remove_orphans(&api.pod_uids()).await;
    spawn_housekeeping(&api, static_pods, counted, clock, settings.log_policy);
    let workers = start_node(node, &api, &settings.config, settings.credential_plugins);
    let kubeconfig = write_kubeconfig(root, settings.addr, security.as_ref()).map_err(|e| fail(exit::FAILED, e))?;
    feed_node(&workers, &api, feed);
    eprintln!(
        "podwright: serving the API on {} (node {}); KUBECONFIG={}",
        server_url(if security.is_some() { "https" } else { "http" }, settings.addr),
        api.node_name(),
        kubeconfig.display()
    );
    let limits = Limits {
        max_requests_inflight: args.max_requests_inflight,
        max_mutating_requests_inflight: args.max_mutating_requests_inflight,
        request_timeout: args.request_timeout,
    };
    serve_until_signal(listener, security, &api, metrics, limits).await;
    // The last statuses and events the workers reported are on disk before the process ends.
    if let Err(e) = api.store().flush() {
        tracing::warn!(e = %e.message, "the last changes were not written");
    }
    Ok(())
}

/// Prints a failure as every podwright command does and gives the code it exits with.
pub(crate) fn fail(code: u8, e: impl std::fmt::Display) -> u8 {
    eprintln!("podwright: {e}");
    code
}

/// What `serve` runs with: its flags over the `--config` file, validated.
pub(crate) struct Settings {
    /// For cluster DNS and the image settings.
    pub(crate) config: ServeConfig,
    addr: SocketAddr,
    pub(crate) tls: bool,
    pub(crate) log_policy: LogPolicy,
    pub(crate) file_check_frequency: Duration,
    pub(crate) credential_plugins: Option<PluginConfig>,
    pub(crate) static_pod_path: Option<PathBuf>,
}

impl Settings {
    fn read(args: &ServeArgs) -> Result<Settings, String> {
        let config = args.config.as_deref().map(read_config).transpose()?.unwrap_or_default();
        let ip = args.address.or(config.address).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let tls = args.tls || args.tls_cert_file.is_some();
        // A node of a cluster serves its kubelet port with TLS and authentication always.
        if args.kubeconfig.is_none() && !ip.is_loopback() && !tls {
            return Err(format!(
                "refusing to serve the API on {ip} without TLS and a bearer token: add --tls (or serve on a loopback address, the default 127.0.0.1)"
            ));
        }
        Ok(Settings {
            addr: SocketAddr::new(ip, args.port.or(config.port).unwrap_or(6443)),
            tls,
            log_policy: config.log_policy()?,
            file_check_frequency: config.file_check_frequency()?,
            credential_plugins: args.runtime.credential_plugins()?,
            static_pod_path: args
                .pod_manifest_path
                .clone()
                .or_else(|| config.static_pod_path.clone())
                .filter(|p| !p.as_os_str().is_empty()),
            config,
        })
    }
}

/// The config fields of a cluster node's kubelet port, refused by name: the local API has no
/// kubelet port (its TLS is --tls, --tls-cert-file and --tls-private-key-file).
fn refuse_cluster_fields(args: &ServeArgs, settings: &Settings) -> Result<(), String> {
    match settings.config.cluster_only_fields().as_slice() {
        [] => Ok(()),
        fields => Err(format!(
            "{}: {}: Forbidden: only a node of a cluster (serve --kubeconfig) honours {}, for its kubelet port",
            args.config.as_deref().unwrap_or(Path::new("--config")).display(),
            fields.join(", "),
            if fields.len() == 1 { "it" } else { "them" }
        )),
    }
}

/// Makes the root directory and binds the API's address.
async fn listen(root: &Path, addr: SocketAddr) -> Result<TcpListener, String> {
    std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
    TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))
}

/// The runtime the node and the API drive.
pub(crate) async fn connect_runtime(args: &RuntimeArgs) -> Result<CriRuntime, String> {
    // Calls in flight when serve is killed finish: the next serve resumes from their results.
    let runtime = connect(args, InFlight::Finished).await?;
    if args.runtime_endpoint.is_none() {
        // Its own containerd: started again whenever it exits, under the running pods.
        tokio::spawn(EmbeddedRuntime::new(&args.root_dir).keep_running());
    }
    Ok(runtime)
}

/// With TLS, the serving certificate (given, or made under the root directory for the node's
/// names and addresses) and the bearer token; `None` serves plain HTTP.
fn security(args: &ServeArgs, settings: &Settings, identity: &ServerConfig) -> Result<Option<Security>, String> {
    if !settings.tls {
        return Ok(None);
    }
    let given = args.tls_cert_file.as_deref().zip(args.tls_private_key_file.as_deref());
    let names = [identity.node_name.clone(), "localhost".to_string()];
    let mut ips: Vec<IpAddr> = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
    ips.extend(identity.host_ip.as_deref().and_then(|h| h.parse::<IpAddr>().ok()));
    let ip = settings.addr.ip();
    if !ip.is_unspecified() && !ips.contains(&ip) {
        ips.push(ip);
    }
    Security::load_or_create(&identity.root, given, &names, &ips).map(Some).map_err(|e| e.to_string())
}

/// The API over the store a previous run left under the root directory.
fn open_api(identity: ServerConfig, clock: Clock, counted: &Arc<dyn Runtime>) -> Result<(ApiServer, NodeFeed), String> {
    let (api, feed) = ApiServer::open(identity, clock, counted.clone()).map_err(|e| e.to_string())?;
    // `kubectl top` and the kubelet's usage endpoints, read from the runtime on each request.
    let config = api.config();
    api.serve_usage(Arc::new(UsageCollector::new(counted.clone(), clock, &config.node_name, &config.root)));
    Ok((api, feed))
}

/// The static pods' source, its first reading given to the API. The static pods are known
/// before anything is removed (the kubelet waits for every source to report once): a restart
/// finds the same UIDs in the same files and adopts their pods.
fn read_static_pods(api: &ApiServer, settings: &Settings) -> Option<StaticPodSource> {
    let mut static_pods = settings
        .static_pod_path
        .clone()
        .map(|p| StaticPodSource::new(p, api.node_name(), settings.file_check_frequency));
    api.set_static_pods(static_pods.as_mut().map(StaticPodSource::list).unwrap_or_default());
    static_pods
}

/// What goes on beside the node while serving: events expire, the store's outages become
/// events, the static pods are read again, container logs rotate.
fn spawn_housekeeping(
    api: &ApiServer,
    static_pods: Option<StaticPodSource>,
    counted: Arc<dyn Runtime>,
    clock: Clock,
    log_policy: LogPolicy,
) {
    tokio::spawn(api.clone().expire_events());
    tokio::spawn(api.clone().report_store_outages());
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
}

/// The pod workers of `node` with the API as their objects and their status and event sink,
/// the settings' image handling and cluster DNS.
fn start_node(
    mut node: Node,
    api: &ApiServer,
    config: &ServeConfig,
    credential_plugins: Option<PluginConfig>,
) -> Arc<PodWorkers> {
    let identity = api.config();
    node = node
        .events(api.sink())
        .status(api.sink())
        .objects(api.objects())
        .facts(NodeFacts::of_this_machine(identity.node_name.clone(), identity.host_ip.clone()))
        .image_pulls(config.image_pulls)
        .image_gc(config.image_gc)
        .image_verification(config.image_verification.clone());
    if let Some(max) = config.max_container_restart_period {
        node = node.max_container_restart_period(max);
    }
    if let Some(plugins) = credential_plugins {
        node = node.credential_plugins(plugins);
    }
    let workers = Arc::new(node.cluster_dns(cluster_dns(config, api)).build());
    // Pods follow their ConfigMaps and Secrets as they change.
    tokio::spawn({
        let workers = Arc::downgrade(&workers);
        api.follow_object_changes(move || {
            if let Some(w) = workers.upgrade() {
                w.objects_changed();
            }
        })
    });
    workers
}

/// Writes the kubeconfig that points kubectl at the daemon, and gives its path.
fn write_kubeconfig(root: &Path, addr: SocketAddr, security: Option<&Security>) -> Result<PathBuf, String> {
    let kubeconfig = kubeconfig_path(root);
    let body = match security {
        Some(s) => s.kubeconfig(&server_url("https", addr)),
        None => kubeconfig_text(addr),
    };
    write_private(&kubeconfig, &body).map_err(|e| format!("{}: {e}", kubeconfig.display()))?;
    Ok(kubeconfig)
}

/// The node runs the API's pods, and the API forgets a pod once the node has removed it.
fn feed_node(workers: &Arc<PodWorkers>, api: &ApiServer, feed: NodeFeed) {
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
}

/// Serves the API, behind the API server's limits, until SIGINT or SIGTERM comes.
async fn serve_until_signal(
    listener: TcpListener,
    security: Option<Security>,
    api: &ApiServer,
    metrics: Arc<Metrics>,
    limits: Limits,
) {
    let mut stop_signals = StopSignals::listen();
    // The node's metrics beside the API, behind the same token when there is one.
    let router = limits.apply(api.router().merge(podwright_server::metrics::router(metrics)));
    let server = async move {
        match security {
            Some(s) => {
                let token: Arc<str> = s.token.clone().into();
                let router = router.layer(axum::middleware::from_fn(move |req, next| {
                    podwright_server::secure::require_token(token.clone(), req, next)
                }));
                transport::serve(s.listener(listener), router, limits).await
            }
            None => transport::serve(listener, router, limits).await,
        }
    };
    tokio::select! {
        () = server => {}
        _ = stop_signals.received() => {}
    }
}
