//! The node's client credentials: the kubeconfig it talks to the API server with, made by TLS
//! bootstrap when missing or expired (`pkg/kubelet/certificate/bootstrap/bootstrap.go`), and
//! the client certificate renewed before it expires (client-go's certificate manager).
//!
//! As the kubelet does, the key and certificate live in one PEM file under
//! `<root>/pki/kubelet-client-<time>.pem`, `kubelet-client-current.pem` links to the newest, and
//! the kubeconfig that bootstrap writes names that link (see [`crate::certificates`]).

use crate::ClusterError;
use crate::certificates::{CertificateStore, CurrentCertificate};
use crate::csr::{self, CertificateRequest, RequestName};
use kube::client::ConfigExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use podwright_runtime::Clock;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The key of a certificate being asked for, kept until the request succeeds so that a
/// restart asks again with the same key (and so finds the same CSR) instead of a new one.
const PENDING_KEY: &str = "kubelet-client.key.tmp";

/// Where the node's credentials are.
#[derive(Debug, Clone)]
pub struct CredentialPaths {
    /// `--kubeconfig`: read when valid, written by bootstrap.
    pub kubeconfig: PathBuf,
    /// `--bootstrap-kubeconfig`: the credentials that may ask for a node certificate.
    pub bootstrap: Option<PathBuf>,
    /// `<root>/pki`.
    pub pki: PathBuf,
}

/// What the node talks to the API server with.
pub struct NodeCredentials {
    pub config: kube::Config,
    /// The TLS the node's clients connect with (read once for all of them).
    pub tls: rustls::ClientConfig,
    /// With `rotateCertificates`: the client certificate `tls` presents, renewed in place.
    pub identity: Option<Arc<CurrentCertificate>>,
}

/// The node's credentials: the kubeconfig's, after bootstrapping one if it is missing or its
/// certificate has expired. With `rotate`, the client certificate is the newest under
/// `<root>/pki` that has not expired (a renewal's, as the kubelet's certificate store prefers
/// it), else the kubeconfig's.
pub async fn node_credentials(
    paths: &CredentialPaths,
    node: &str,
    clock: Clock,
    rotate: bool,
) -> Result<NodeCredentials, ClusterError> {
    let config = client_config(paths, node, clock).await?;
    let mut tls = config.rustls_client_config()?;
    if !rotate {
        return Ok(NodeCredentials { config, tls, identity: None });
    }
    let renewed = CertificateStore::client(&paths.pki)
        .current()
        .ok()
        .flatten()
        .filter(|c| c.validity().is_some_and(|(_, not_after)| not_after > clock.now()));
    let current = match renewed {
        Some(current) => current,
        // The kubeconfig's own certificate and key, as kube-rs read them.
        None => match tls.client_auth_cert_resolver.resolve(&[], &[]) {
            Some(key) => {
                let current = CurrentCertificate::default();
                current.set_key(key)?;
                current
            }
            None => {
                tracing::warn!(kubeconfig = %paths.kubeconfig.display(), "rotateCertificates: the kubeconfig has no client certificate to renew");
                return Ok(NodeCredentials { config, tls, identity: None });
            }
        },
    };
    let identity = Arc::new(current);
    tls.client_auth_cert_resolver = identity.clone();
    // A resumed TLS session carries the certificate of the handshake it resumes: after a
    // renewal, the API server would go on seeing the old one.
    tls.resumption = rustls::client::Resumption::disabled();
    Ok(NodeCredentials { config, tls, identity: Some(identity) })
}

/// The client configuration of the kubeconfig, after bootstrapping one if it is missing or its
/// certificate has expired.
async fn client_config(paths: &CredentialPaths, node: &str, clock: Clock) -> Result<kube::Config, ClusterError> {
    if !kubeconfig_usable(&paths.kubeconfig, clock)? {
        let Some(bootstrap) = &paths.bootstrap else {
            return Err(ClusterError::Credentials(format!(
                "{}: missing or its client certificate has expired, and no --bootstrap-kubeconfig to ask for one",
                paths.kubeconfig.display()
            )));
        };
        bootstrap_kubeconfig(paths, bootstrap, node).await?;
    }
    load(&paths.kubeconfig).await
}

/// The kubeconfig's configuration.
pub async fn load(path: &Path) -> Result<kube::Config, ClusterError> {
    let kubeconfig =
        Kubeconfig::read_from(path).map_err(|e| ClusterError::Credentials(format!("{}: {e}", path.display())))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| ClusterError::Credentials(format!("{}: {e}", path.display())))
}

/// Whether the kubeconfig exists and, if it names a client certificate, that one has not
/// expired (`isClientConfigStillValid`).
fn kubeconfig_usable(path: &Path, clock: Clock) -> Result<bool, ClusterError> {
    if !path.exists() {
        return Ok(false);
    }
    let kubeconfig =
        Kubeconfig::read_from(path).map_err(|e| ClusterError::Credentials(format!("{}: {e}", path.display())))?;
    let Some(cert) =
        kubeconfig.auth_infos.first().and_then(|a| a.auth_info.as_ref()).and_then(|a| a.client_certificate.clone())
    else {
        return Ok(true);
    };
    let cert = resolve(path, Path::new(&cert));
    Ok(std::fs::read(&cert)
        .ok()
        .and_then(|pem| csr::validity(&pem))
        .is_some_and(|(_, not_after)| not_after > clock.now()))
}

/// A path of a kubeconfig, relative to the kubeconfig's directory.
fn resolve(kubeconfig: &Path, p: &Path) -> PathBuf {
    match kubeconfig.parent() {
        Some(dir) if p.is_relative() => dir.join(p),
        _ => p.to_path_buf(),
    }
}

/// TLS bootstrap: a node client certificate asked for with the bootstrap credentials, then a
/// kubeconfig with the bootstrap's server and CA that uses it.
async fn bootstrap_kubeconfig(paths: &CredentialPaths, bootstrap: &Path, node: &str) -> Result<(), ClusterError> {
    tracing::info!(bootstrap = %bootstrap.display(), "asking the API server for a node client certificate");
    let config = load(bootstrap).await?;
    let client = kube::Client::try_from(config.clone()).map_err(ClusterError::Api)?;
    let key = pending_key(&paths.pki)?;
    let cert =
        csr::request_certificate(&client, &key, &CertificateRequest::client(node), RequestName::Digested).await?;
    let store = CertificateStore::client(&paths.pki);
    store.store(&cert, &key)?;
    let _ = std::fs::remove_file(paths.pki.join(PENDING_KEY));
    write_kubeconfig(&paths.kubeconfig, &config, &store.current_path())
}

/// The key of the pending request: the one a previous start made, or a new one written
/// before it is used.
fn pending_key(pki: &Path) -> Result<rcgen::KeyPair, ClusterError> {
    let path = pki.join(PENDING_KEY);
    if let Ok(pem) = std::fs::read_to_string(&path)
        && let Ok(key) = rcgen::KeyPair::from_pem(&pem)
    {
        return Ok(key);
    }
    let key = rcgen::KeyPair::generate().map_err(|e| ClusterError::Credentials(e.to_string()))?;
    write_private(&path, &key.serialize_pem())?;
    Ok(key)
}

/// The kubelet's kubeconfig: the bootstrap's server and CA, the node's certificate and key.
fn write_kubeconfig(path: &Path, bootstrap: &kube::Config, cert: &Path) -> Result<(), ClusterError> {
    use base64::Engine;
    let ca = bootstrap
        .root_cert
        .as_ref()
        .map(|certs| {
            let pem: String = certs
                .iter()
                .map(|der| {
                    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
                    let lines: Vec<&str> =
                        b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap_or_default()).collect();
                    format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", lines.join("\n"))
                })
                .collect();
            format!("    certificate-authority-data: {}\n", base64::engine::general_purpose::STANDARD.encode(pem))
        })
        .unwrap_or_default();
    let cert = cert.display();
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n{ca}    server: {server}\n  name: default-cluster\ncontexts:\n- context:\n    cluster: default-cluster\n    namespace: default\n    user: default-auth\n  name: default-context\ncurrent-context: default-context\npreferences: {{}}\nusers:\n- name: default-auth\n  user:\n    client-certificate: {cert}\n    client-key: {cert}\n",
        server = bootstrap.cluster_url,
    );
    write_private(path, &text)
}

/// Writes a file only root may read (the server's helper: atomically, its directory made).
fn write_private(path: &Path, text: &str) -> Result<(), ClusterError> {
    podwright_server::secure::write_private(path, text).map_err(|e| ClusterError::Credentials(e.to_string()))
}
