//! `podwright serve --kubeconfig`: the node of a cluster. The API server gives the pods bound
//! to this node and takes their statuses, events, the Node and its Lease, and reaches the
//! node's kubelet port (`--address`, `--port`) for logs, exec, attach and port-forward; no
//! local API is served. SIGTERM stops the agent and leaves the pods running, as for `serve`.

use crate::exit;
use crate::serve::{ServeArgs, Settings, connect_runtime, fail};
use crate::signals::StopSignals;
use podwright_cluster::certificates::{CertificateStore, CurrentCertificate};
use podwright_cluster::credentials::CredentialPaths;
use podwright_cluster::kubelet_port::KubeletPort;
use podwright_cluster::node_status::NodeIdentity;
use podwright_cluster::{ClusterSettings, join};
use podwright_containerd::EmbeddedRuntime;
use podwright_node::cri::dns::{ClusterDns, HOST_RESOLV_CONF, ResolvConf};
use podwright_node::downward::{host_ip, host_name};
use podwright_node::log_rotation;
use podwright_node::static_pods::StaticPodSource;
use podwright_node::{Metrics, Node, PodCgroups};
use podwright_runtime::{Clock, Runtime};
use podwright_server::kubelet::AuthSettings;
use podwright_server::secure::{KubeletTls, TlsListener};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpListener;

/// The kubelet's port unless given.
const KUBELET_PORT: u16 = 10250;

/// Joins the cluster, then runs the pods it binds to this node until a signal.
pub(crate) async fn join_and_run(args: &ServeArgs, settings: Settings) -> Result<(), u8> {
    refuse_local_api_flags(args).map_err(|e| fail(exit::INVALID, e))?;
    let root = &args.runtime.root_dir;
    std::fs::create_dir_all(root).map_err(|e| fail(exit::FAILED, format!("{}: {e}", root.display())))?;
    let kubeconfig = args.kubeconfig.clone().unwrap_or_default();
    let name = args.hostname_override.clone().map(|h| h.to_lowercase()).unwrap_or_else(host_name);
    let identity = NodeIdentity {
        name: name.clone(),
        ip: args.node_ip.map(|ip| ip.to_string()).or_else(host_ip),
        port: args.port.or(settings.config.port).unwrap_or(KUBELET_PORT),
        root: root.clone(),
        version: podwright_api::KUBERNETES_VERSION.to_string(),
    };
    let credentials =
        CredentialPaths { kubeconfig, bootstrap: args.bootstrap_kubeconfig.clone(), pki: root.join("pki") };
    let port = kubelet_port(args, &settings, &identity, &credentials.pki).await.map_err(|e| fail(exit::FAILED, e))?;
    let rotate_certificates = settings.config.rotate_certificates();
    let runtime: Arc<dyn Runtime> =
        Arc::new(connect_runtime(&args.runtime).await.map_err(|e| fail(exit::NO_RUNTIME, e))?);
    let clock = Clock::system();
    let mut joined = join(ClusterSettings { identity, credentials, rotate_certificates }, runtime.as_ref(), clock)
        .await
        .map_err(|e| fail(exit::FAILED, e))?;
    // What the runtime holds of pods the API server no longer binds here (deleted while the
    // node was down) and of static pods no longer in their path goes before anything starts.
    let static_pods =
        settings.static_pod_path.clone().map(|p| StaticPodSource::new(p, &name, settings.file_check_frequency));
    let bound = joined.take_stock(static_pods).await.map_err(|e| fail(exit::FAILED, e))?;
    let metrics = Arc::new(Metrics::default());
    let mut node = Node::new(runtime.clone(), root).clock(clock).metrics(metrics.clone());
    if let Some(cgroups) = PodCgroups::of_host(root) {
        node = node.cgroups(cgroups);
    }
    node.remove_orphans(&bound).await;
    node = node
        .image_pulls(settings.config.image_pulls)
        .image_gc(settings.config.image_gc)
        .image_verification(settings.config.image_verification.clone())
        .cluster_dns(cluster_dns(&settings));
    if let Some(max) = settings.config.max_container_restart_period {
        node = node.max_container_restart_period(max);
    }
    if let Some(plugins) = settings.credential_plugins {
        node = node.credential_plugins(plugins);
    }
    let embedded = args.runtime.runtime_endpoint.is_none().then(|| EmbeddedRuntime::new(root));
    tokio::spawn(log_rotation::rotate_logs(metrics.instrument(runtime.clone(), clock), clock, settings.log_policy));
    eprintln!("podwright: node {name} joined the cluster");
    let mut stop_signals = StopSignals::listen();
    let (listener, auth, serving) = port;
    let port = KubeletPort { listener, auth, metrics, serving };
    tokio::select! {
        () = joined.run(node, runtime, embedded, port) => Ok(()),
        _ = stop_signals.received() => Ok(()),
    }
}

/// The kubelet port's listener, bound before the node joins (a port in use stops the start
/// at once), with its TLS and authentication settings: the serving certificate given
/// (`--tls-cert-file` and `--tls-private-key-file`, else `tlsCertFile` and
/// `tlsPrivateKeyFile`), the cluster's (`serverTLSBootstrap`, returned to be renewed), or a
/// self-signed one for the node's name and addresses, and client certificates checked against
/// `authentication.x509.clientCAFile`.
async fn kubelet_port(
    args: &ServeArgs,
    settings: &Settings,
    identity: &NodeIdentity,
    pki: &Path,
) -> Result<(TlsListener, AuthSettings, Option<Arc<CurrentCertificate>>), String> {
    let config = &settings.config;
    let auth = config.kubelet_auth()?;
    let address = args.address.or(config.address).unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let given = match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(cert), Some(key)) => Some((cert.as_path(), key.as_path())),
        _ => config.tls_cert_file.as_deref().zip(config.tls_private_key_file.as_deref()),
    };
    let names = [identity.name.clone(), "localhost".to_string()];
    let mut ips: Vec<IpAddr> = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
    ips.extend(identity.ip.as_deref().and_then(|ip| ip.parse::<IpAddr>().ok()));
    if !address.is_unspecified() && !ips.contains(&address) {
        ips.push(address);
    }
    ips.dedup();
    let client_ca = config.client_ca_file();
    if client_ca.is_none() {
        eprintln!(
            "podwright: no authentication.x509.clientCAFile in --config: the kubelet port accepts no client certificate, so the API server's requests (kubectl logs, exec, port-forward) get 401"
        );
    }
    let (tls, serving) = if config.server_tls_bootstrap() {
        if args.tls_cert_file.is_some() {
            return Err("--tls-cert-file: Invalid value: the config's serverTLSBootstrap asks the cluster for the kubelet port's certificate".into());
        }
        // The certificate an earlier start was issued serves until it is renewed.
        let serving = Arc::new(
            CertificateStore::serving(pki)
                .current()
                .unwrap_or_else(|e| {
                    eprintln!("podwright: the kubelet port's stored serving certificate: {e}; asking for a new one");
                    None
                })
                .unwrap_or_default(),
        );
        (KubeletTls::with_certificates(serving.clone(), client_ca), Some(serving))
    } else {
        (KubeletTls::load_or_create(&identity.root, given, &names, &ips, client_ca), None)
    };
    let tls = tls.map_err(|e| e.to_string())?;
    let addr = SocketAddr::new(address, identity.port);
    let tcp = TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr} (the kubelet port): {e}"))?;
    Ok((tls.listener(tcp), auth, serving))
}

/// The flags of the local API, which a node of a cluster does not serve: refused rather than
/// ignored.
fn refuse_local_api_flags(args: &ServeArgs) -> Result<(), String> {
    if args.tls {
        return Err("--tls is for the local API, which a node of a cluster (--kubeconfig) does not serve; its kubelet port always serves TLS (--tls-cert-file and --tls-private-key-file give its certificate)".into());
    }
    Ok(())
}

/// The cluster's DNS servers from the config (`clusterDNS`); without them pods resolve as the
/// host does, with the kubelet's `MissingClusterDNS` event for `ClusterFirst` ones.
fn cluster_dns(settings: &Settings) -> ClusterDns {
    let host = ResolvConf::read(Path::new(HOST_RESOLV_CONF)).unwrap_or_else(|e| {
        eprintln!("podwright: {HOST_RESOLV_CONF}: {e}; pods search only the cluster domains");
        ResolvConf::default()
    });
    let servers = settings.config.cluster_dns.clone().unwrap_or_default();
    ClusterDns { servers, domain: settings.config.cluster_domain().to_string(), host }
}
