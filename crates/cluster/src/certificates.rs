//! The node's certificates, kept current as client-go's certificate manager keeps a kubelet's
//! (`k8s.io/client-go/util/certificate`): the client certificate it talks to the API server with
//! (`rotateCertificates`) and its kubelet port's serving certificate (`serverTLSBootstrap`).
//! Each is asked for again, with a new key, once 70 to 90 % of its life has passed: a random
//! point in that span, so that a cluster's nodes do not all ask at once.
//!
//! They live as the kubelet keeps them: `<root>/pki/kubelet-<client|server>-<time>.pem`
//! (certificate, then key), with `kubelet-<client|server>-current.pem` linking to the newest.
//! In memory, a [`CurrentCertificate`] gives the newest to every TLS handshake from then on.

use crate::ClusterError;
use crate::csr::{self, CertificateRequest, RequestName};
use jiff::Timestamp;
use podwright_runtime::Clock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The first wait after a failed renewal, doubled after each failure up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(2);
const RETRY_MAX: Duration = Duration::from_secs(300);

/// One kind of certificate's files under `<root>/pki`.
#[derive(Debug, Clone)]
pub struct CertificateStore {
    pki: PathBuf,
    /// `kubelet-client` or `kubelet-server`.
    prefix: &'static str,
}

impl CertificateStore {
    /// The node's client certificates.
    pub fn client(pki: &Path) -> CertificateStore {
        CertificateStore { pki: pki.to_path_buf(), prefix: "kubelet-client" }
    }

    /// The kubelet port's serving certificates.
    pub fn serving(pki: &Path) -> CertificateStore {
        CertificateStore { pki: pki.to_path_buf(), prefix: "kubelet-server" }
    }

    /// The link to the newest certificate and key.
    pub fn current_path(&self) -> PathBuf {
        self.pki.join(format!("{}-current.pem", self.prefix))
    }

    /// The newest certificate and key (PEM), if there is one.
    pub fn load(&self) -> Option<String> {
        std::fs::read_to_string(self.current_path()).ok()
    }

    /// The newest certificate and key, ready for TLS, if there is one.
    pub fn current(&self) -> Result<Option<CurrentCertificate>, ClusterError> {
        self.load().map(|pem| CurrentCertificate::new(&pem)).transpose()
    }

    /// Writes `<prefix>-<time>.pem` (certificate, then key) and points the current link at it;
    /// returns what was written.
    pub fn store(&self, cert_pem: &str, key: &rcgen::KeyPair) -> Result<String, ClusterError> {
        let stamp = csr::validity(cert_pem.as_bytes())
            .map(|(from, _)| from)
            .unwrap_or(Timestamp::UNIX_EPOCH)
            .strftime("%Y-%m-%d-%H-%M-%S")
            .to_string();
        let name = format!("{}-{stamp}.pem", self.prefix);
        let pair = format!("{}\n{}", cert_pem.trim_end(), key.serialize_pem());
        podwright_server::secure::write_private(&self.pki.join(&name), &pair)
            .map_err(|e| ClusterError::Credentials(e.to_string()))?;
        let link = self.current_path();
        let tmp = link.with_extension("pem.tmp");
        let _ = std::fs::remove_file(&tmp);
        let io = |p: &Path, e: std::io::Error| ClusterError::Credentials(format!("{}: {e}", p.display()));
        std::os::unix::fs::symlink(&name, &tmp).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &link).map_err(|e| io(&link, e))?;
        Ok(pair)
    }
}

/// A certificate and its key as TLS uses them, with the certificate's validity.
#[derive(Debug)]
struct Pair {
    key: Arc<CertifiedKey>,
    validity: (Timestamp, Timestamp),
}

/// The newest certificate and key of one kind: what the next TLS handshake presents. Empty
/// until a serving certificate is first issued (a handshake then fails, as the kubelet's does).
#[derive(Debug, Default)]
pub struct CurrentCertificate {
    pair: RwLock<Option<Pair>>,
}

impl CurrentCertificate {
    /// Holding the certificate and key of `pem` (certificates first, then the key).
    pub fn new(pem: &str) -> Result<CurrentCertificate, ClusterError> {
        let current = CurrentCertificate::default();
        current.set(pem)?;
        Ok(current)
    }

    /// From now on, the certificate and key of `pem`.
    pub fn set(&self, pem: &str) -> Result<(), ClusterError> {
        let invalid = |e: String| ClusterError::Credentials(format!("a certificate and key: {e}"));
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| invalid(e.to_string()))?;
        let key = PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| invalid(e.to_string()))?;
        let provider = rustls::crypto::ring::default_provider();
        self.set_key(Arc::new(CertifiedKey::from_der(certs, key, &provider).map_err(|e| invalid(e.to_string()))?))
    }

    /// From now on, `key`.
    pub fn set_key(&self, key: Arc<CertifiedKey>) -> Result<(), ClusterError> {
        let validity = key.cert.first().and_then(|c| csr::validity_of_der(c)).ok_or_else(|| {
            ClusterError::Credentials("a certificate and key: the certificate is missing or does not parse".into())
        })?;
        *self.pair.write().unwrap_or_else(|e| e.into_inner()) = Some(Pair { key, validity });
        Ok(())
    }

    /// The current certificate's not-before and not-after times.
    pub fn validity(&self) -> Option<(Timestamp, Timestamp)> {
        self.pair.read().unwrap_or_else(|e| e.into_inner()).as_ref().map(|p| p.validity)
    }

    fn key(&self) -> Option<Arc<CertifiedKey>> {
        self.pair.read().unwrap_or_else(|e| e.into_inner()).as_ref().map(|p| p.key.clone())
    }
}

impl rustls::client::ResolvesClientCert for CurrentCertificate {
    fn resolve(&self, _: &[&[u8]], _: &[rustls::SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        self.key()
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl rustls::server::ResolvesServerCert for CurrentCertificate {
    fn resolve(&self, _: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let key = self.key();
        if key.is_none() {
            tracing::warn!("a TLS client was refused: no serving certificate has been issued to the kubelet port yet");
        }
        key
    }
}

/// When a certificate valid from `not_before` to `not_after` is asked for again: after
/// 70 % of its life and `jitter` (0 to 1) of a further 20 % (client-go's
/// `nextRotationDeadline`).
pub fn renewal_deadline(not_before: Timestamp, not_after: Timestamp, jitter: f64) -> Timestamp {
    let life = not_after.duration_since(not_before).as_secs_f64().max(0.0);
    let fraction = 0.7 + 0.2 * jitter.clamp(0.0, 1.0);
    not_before + jiff::SignedDuration::from_secs_f64(life * fraction)
}

/// A random number from 0 to 1.
fn random_fraction() -> f64 {
    let mut bytes = [0u8; 4];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes);
    f64::from(u32::from_le_bytes(bytes)) / f64::from(u32::MAX)
}

/// One certificate kept current: where it is stored, what TLS reads it from, and what is asked
/// for again.
pub struct Renewal {
    pub store: CertificateStore,
    pub current: Arc<CurrentCertificate>,
    pub request: CertificateRequest,
}

impl Renewal {
    /// Asks for a new certificate at each renewal deadline (at once when there is none), and
    /// calls `renewed` after each one is in use; runs until dropped. `client` asks; `fallback`,
    /// when given, asks instead once the current certificate has expired (the bootstrap
    /// credentials, as the kubelet falls back to them).
    pub async fn keep_renewed(
        self,
        client: kube::Client,
        fallback: Option<PathBuf>,
        clock: Clock,
        renewed: impl Fn() + Send,
    ) {
        loop {
            if let Some((from, to)) = self.current.validity() {
                let deadline = renewal_deadline(from, to, random_fraction());
                tracing::info!(certificate = self.store.prefix, %deadline, expires = %to, "certificate renewal scheduled");
                clock.sleep_until(deadline).await;
            }
            let mut wait = RETRY_FIRST;
            loop {
                let expired = self.current.validity().is_some_and(|(_, to)| to <= clock.now());
                let asked = match (&fallback, expired) {
                    (Some(bootstrap), true) => match bootstrap_client(bootstrap).await {
                        Ok(c) => self.renew(&c).await,
                        Err(e) => Err(e),
                    },
                    _ => self.renew(&client).await,
                };
                match asked {
                    Ok(()) => break,
                    Err(e) => {
                        tracing::warn!(certificate = self.store.prefix, %e, "certificate not renewed; trying again")
                    }
                }
                clock.sleep_until(clock.now() + wait).await;
                wait = (wait * 2).min(RETRY_MAX);
            }
            renewed();
        }
    }

    /// A new key, its certificate asked for and stored, and then in use.
    async fn renew(&self, client: &kube::Client) -> Result<(), ClusterError> {
        let key = rcgen::KeyPair::generate().map_err(|e| ClusterError::Credentials(e.to_string()))?;
        let cert = csr::request_certificate(client, &key, &self.request, RequestName::Generated).await?;
        let pair = self.store.store(&cert, &key)?;
        self.current.set(&pair)?;
        tracing::info!(certificate = self.store.prefix, path = %self.store.current_path().display(), "certificate renewed");
        Ok(())
    }
}

async fn bootstrap_client(kubeconfig: &Path) -> Result<kube::Client, ClusterError> {
    let config = crate::credentials::load(kubeconfig).await?;
    kube::Client::try_from(config).map_err(ClusterError::Api)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn renewal_falls_between_seventy_and_ninety_percent_of_the_life() {
        let (from, to) = (t("2026-01-01T00:00:00Z"), t("2026-01-11T00:00:00Z"));
        assert_eq!(renewal_deadline(from, to, 0.0), t("2026-01-08T00:00:00Z"));
        assert_eq!(renewal_deadline(from, to, 1.0), t("2026-01-10T00:00:00Z"));
        assert_eq!(renewal_deadline(from, to, 0.5), t("2026-01-09T00:00:00Z"));
        // A certificate that ends before it starts is renewed at once.
        assert_eq!(renewal_deadline(to, from, 0.5), to);
        for _ in 0..100 {
            let d = renewal_deadline(from, to, random_fraction());
            assert!(d >= t("2026-01-08T00:00:00Z") && d <= t("2026-01-10T00:00:00Z"), "{d}");
        }
    }

    fn issued(key: &rcgen::KeyPair) -> String {
        let mut params = rcgen::CertificateParams::new(vec!["n1".to_string()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2026, 1, 1);
        params.not_after = rcgen::date_time_ymd(2027, 1, 1);
        params.self_signed(key).unwrap().pem()
    }

    #[test]
    fn a_stored_certificate_becomes_current_on_disk_and_in_memory() {
        let dir = std::env::temp_dir().join(format!("podwright-certs-{}", std::process::id()));
        let store = CertificateStore::serving(&dir);
        assert!(store.load().is_none());
        let key = rcgen::KeyPair::generate().unwrap();
        let pair = store.store(&issued(&key), &key).unwrap();
        assert_eq!(store.load().as_deref(), Some(pair.as_str()));
        let link = std::fs::read_link(store.current_path()).unwrap();
        assert_eq!(link, Path::new("kubelet-server-2026-01-01-00-00-00.pem"));
        let current = CurrentCertificate::new(&pair).unwrap();
        assert_eq!(current.validity(), Some((t("2026-01-01T00:00:00Z"), t("2027-01-01T00:00:00Z"))));
        // A key that is not the certificate's is refused, and the current pair stays.
        let other = rcgen::KeyPair::generate().unwrap();
        let mismatched = format!("{}\n{}", issued(&key), other.serialize_pem());
        assert!(current.set(&mismatched).is_err());
        assert!(current.key().is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn until_a_certificate_is_issued_there_is_none_to_present() {
        let current = CurrentCertificate::default();
        assert!(current.key().is_none());
        assert!(current.validity().is_none());
    }
}
