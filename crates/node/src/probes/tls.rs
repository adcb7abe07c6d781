//! TLS for `httpGet` with `scheme: HTTPS`. Like the kubelet's prober, podwright does not check
//! the server's certificate: a probe asks "does it answer", not "is it who it says".

use std::sync::{Arc, OnceLock};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use tokio_rustls::rustls::crypto::{CryptoProvider, ring, verify_tls12_signature, verify_tls13_signature};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{ClientConfig, DigitallySignedStruct, Error, InvalidMessage, SignatureScheme};

/// Go's error when an HTTPS request is answered in plain HTTP; the kubelet's hooks look for it.
pub const HTTP_RESPONSE_TO_HTTPS: &str = "http: server gave HTTP response to HTTPS client";

/// Accepts any certificate, but still checks that the handshake is signed by its key.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// One client configuration for the whole process.
pub fn connector() -> TlsConnector {
    static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let provider = Arc::new(ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth();
        Arc::new(config)
    });
    TlsConnector::from(config.clone())
}

/// The name sent in SNI: the host as given (an IP address is sent as none, per the RFC).
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|e| format!("invalid host name {host:?}: {e}"))
}

/// A failed handshake in Go's words where the kubelet depends on them.
pub fn handshake_error(e: &std::io::Error) -> String {
    let tls = e.get_ref().and_then(|inner| inner.downcast_ref::<Error>());
    if matches!(tls, Some(Error::InvalidMessage(InvalidMessage::InvalidContentType))) {
        HTTP_RESPONSE_TO_HTTPS.to_string()
    } else {
        e.to_string()
    }
}
