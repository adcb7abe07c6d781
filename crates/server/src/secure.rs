//! Serving beyond loopback: TLS with a certificate generated under the root directory (or
//! given), and a bearer token every request must carry (401 otherwise), both written into the
//! kubeconfig. Also the kubelet port's TLS ([`KubeletTls`]): its own serving certificate, and
//! client certificates verified against the cluster's client CA.

use crate::errors::ApiError;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;

/// How long a client gets to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a TLS daemon serves with and writes into its kubeconfig.
pub struct Security {
    pub token: String,
    /// The serving certificate in PEM: kubectl trusts it as its certificate authority.
    pub cert_pem: String,
    tls: Arc<rustls::ServerConfig>,
}

#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Tls(String),
}

fn read(path: &Path) -> Result<String, SecurityError> {
    std::fs::read_to_string(path).map_err(|source| SecurityError::Io { path: path.into(), source })
}

/// A file only its owner may read (keys, the token, a kubeconfig holding the token).
pub fn write_private(path: &Path, text: &str) -> Result<(), SecurityError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| SecurityError::Io { path: path.into(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    // Written aside and renamed: a reader (or a crash) never sees half a key or kubeconfig.
    let tmp = path.with_extension("writing");
    let mut f =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp).map_err(io)?;
    std::io::Write::write_all(&mut f, text.as_bytes()).and_then(|()| f.sync_all()).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// A self-signed serving certificate for the node's names and addresses.
fn generate(names: &[String], ips: &[IpAddr]) -> Result<(String, String), SecurityError> {
    let mut sans: Vec<String> = names.to_vec();
    sans.extend(ips.iter().map(IpAddr::to_string));
    let key = rcgen::KeyPair::generate().map_err(|e| SecurityError::Tls(e.to_string()))?;
    let mut params = rcgen::CertificateParams::new(sans).map_err(|e| SecurityError::Tls(e.to_string()))?;
    params.distinguished_name.push(rcgen::DnType::CommonName, "podwright");
    let cert = params.self_signed(&key).map_err(|e| SecurityError::Tls(e.to_string()))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The serving certificate and key in PEM: the files `given`, or `default` (made self-signed for
/// `names` and `ips` on first use); and the certificate's path, for errors.
fn serving_pair(
    given: Option<(&Path, &Path)>,
    default: (PathBuf, PathBuf),
    names: &[String],
    ips: &[IpAddr],
) -> Result<(String, String, PathBuf), SecurityError> {
    let (cert_path, key_path) = match given {
        Some((c, k)) => (c.to_path_buf(), k.to_path_buf()),
        None => default,
    };
    if given.is_none() && !(cert_path.exists() && key_path.exists()) {
        let (cert, key) = generate(names, ips)?;
        write_private(&key_path, &key)?;
        write_private(&cert_path, &cert)?;
    }
    Ok((read(&cert_path)?, read(&key_path)?, cert_path))
}

impl Security {
    /// The certificate and key given, or those under `<root>/pki` (made on first use), and the
    /// token in `<root>/pki/token` (made on first use).
    pub fn load_or_create(
        root: &Path,
        given: Option<(&Path, &Path)>,
        names: &[String],
        ips: &[IpAddr],
    ) -> Result<Security, SecurityError> {
        let pki = root.join("pki");
        let default = (pki.join("serving.crt"), pki.join("serving.key"));
        let (cert_pem, key_pem, cert_path) = serving_pair(given, default, names, ips)?;
        let token_path = pki.join("token");
        if !token_path.exists() {
            let token = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
            write_private(&token_path, &token)?;
        }
        let token = read(&token_path)?.trim().to_string();
        let tls = certified_key(&cert_pem, &key_pem)
            .and_then(|key| server_config(Arc::new(rustls::sign::SingleCertAndKey::from(key)), None))
            .map_err(|e| SecurityError::Tls(format!("{}: {e}", cert_path.display())))?;
        Ok(Security { token, cert_pem, tls: Arc::new(tls) })
    }

    /// The kubeconfig's cluster and user entries for this daemon.
    pub fn kubeconfig(&self, server: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.cert_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: podwright\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\ncontexts:\n- name: podwright\n  context:\n    cluster: podwright\n    user: podwright\n    namespace: default\ncurrent-context: podwright\nusers:\n- name: podwright\n  user:\n    token: {}\n",
            self.token
        )
    }

    /// A listener that completes each connection's TLS handshake.
    pub fn listener(&self, tcp: TcpListener) -> TlsListener {
        TlsListener::new(tcp, TlsAcceptor::from(self.tls.clone()))
    }
}

/// The kubelet port's TLS: its serving certificate, and the client certificates it accepts.
pub struct KubeletTls {
    tls: Arc<rustls::ServerConfig>,
}

impl KubeletTls {
    /// The certificate and key given (`tlsCertFile`, `tlsPrivateKeyFile`), or a self-signed pair
    /// under `<root>/pki/kubelet.crt|.key` (made on first use for `names` and `ips`), as the
    /// kubelet makes its own. With `client_ca` (`authentication.x509.clientCAFile`), a client
    /// certificate is asked for, and one given must chain to it; a client may also give none.
    pub fn load_or_create(
        root: &Path,
        given: Option<(&Path, &Path)>,
        names: &[String],
        ips: &[IpAddr],
        client_ca: Option<&Path>,
    ) -> Result<KubeletTls, SecurityError> {
        let pki = root.join("pki");
        let default = (pki.join("kubelet.crt"), pki.join("kubelet.key"));
        let (cert_pem, key_pem, cert_path) = serving_pair(given, default, names, ips)?;
        let key = certified_key(&cert_pem, &key_pem)
            .map_err(|e| SecurityError::Tls(format!("{}: {e}", cert_path.display())))?;
        KubeletTls::with_certificates(Arc::new(rustls::sign::SingleCertAndKey::from(key)), client_ca)
    }

    /// Serving whatever certificate `certificates` gives each handshake (`serverTLSBootstrap`:
    /// the one the cluster issued, renewed in place; none yet fails the handshake).
    pub fn with_certificates(
        certificates: Arc<dyn rustls::server::ResolvesServerCert>,
        client_ca: Option<&Path>,
    ) -> Result<KubeletTls, SecurityError> {
        let roots = match client_ca {
            None => None,
            Some(path) => {
                let pem = read(path)?;
                Some(client_roots(&pem).map_err(|e| SecurityError::Tls(format!("{}: {e}", path.display())))?)
            }
        };
        let tls = server_config(certificates, roots).map_err(SecurityError::Tls)?;
        Ok(KubeletTls { tls: Arc::new(tls) })
    }

    /// A listener that completes each connection's TLS handshake.
    pub fn listener(&self, tcp: TcpListener) -> TlsListener {
        TlsListener::new(tcp, TlsAcceptor::from(self.tls.clone()))
    }
}

/// The certificate authorities of a PEM bundle.
fn client_roots(pem: &str) -> Result<rustls::RootCertStore, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots.add(cert.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    }
    if roots.is_empty() {
        return Err("no certificate in the file".into());
    }
    Ok(roots)
}

/// A certificate chain and its key, as TLS presents them.
fn certified_key(cert_pem: &str, key_pem: &str) -> Result<rustls::sign::CertifiedKey, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(cert_pem.as_bytes()).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| e.to_string())?;
    rustls::sign::CertifiedKey::from_der(certs, key, &rustls::crypto::ring::default_provider())
        .map_err(|e| e.to_string())
}

fn server_config(
    certificates: Arc<dyn rustls::server::ResolvesServerCert>,
    client_roots: Option<rustls::RootCertStore>,
) -> Result<rustls::ServerConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match client_roots {
        None => builder.with_no_client_auth(),
        Some(roots) => {
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| e.to_string())?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    Ok(builder.with_cert_resolver(certificates))
}

/// TCP connections with TLS on them, for `axum::serve`. Handshakes run side by side: a client
/// that connects and says nothing holds up no other.
pub struct TlsListener {
    ready: tokio::sync::mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: std::io::Result<SocketAddr>,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> TlsListener {
        let local = tcp.local_addr();
        let (tx, ready) = tokio::sync::mpsc::channel(64);
        let accepting = tokio::spawn(async move {
            loop {
                let Ok((tcp, addr)) = tcp.accept().await else {
                    // Out of file descriptors and the like: do not spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, addr)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%e, %addr, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%addr, "TLS handshake timed out"),
                    }
                });
            }
        });
        TlsListener { ready, local, accepting }
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accepting task cannot end while the listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        match &self.local {
            Ok(addr) => Ok(*addr),
            Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
        }
    }
}

/// Who is at the other end of a TLS connection: its address, and the client certificate it
/// gave, which the handshake verified (the first of its chain, DER).
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    pub certificate: Option<Arc<[u8]>>,
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TlsListener>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, TlsListener>) -> Self {
        let certificate =
            stream.io().get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| Arc::from(&c[..]));
        Peer { addr: *stream.remote_addr(), certificate }
    }
}

/// Middleware: every request must carry `Authorization: Bearer <token>`.
pub async fn require_token(token: Arc<str>, req: Request, next: Next) -> Response {
    let given = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let ok =
        given.and_then(|v| v.strip_prefix("Bearer ")).is_some_and(|t| constant_time_eq(t.as_bytes(), token.as_bytes()));
    if ok { next.run(req).await } else { ApiError::unauthorized().into_response() }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_material_is_kept_and_reused() {
        let root = std::env::temp_dir().join(format!("podwright-pki-{}", std::process::id()));
        let names = ["node1".to_string(), "localhost".to_string()];
        let ips = ["127.0.0.1".parse().unwrap()];
        let a = Security::load_or_create(&root, None, &names, &ips).unwrap();
        let b = Security::load_or_create(&root, None, &names, &ips).unwrap();
        assert_eq!(a.token, b.token);
        assert_eq!(a.token.len(), 64);
        assert_eq!(a.cert_pem, b.cert_pem);
        let kc = a.kubeconfig("https://127.0.0.1:1");
        assert!(kc.contains(&format!("token: {}", a.token)) && kc.contains("certificate-authority-data: "));
        let mode = std::fs::metadata(root.join("pki/token")).unwrap().permissions();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
