//! The node's certificate signing requests (`certificates.k8s.io/v1`, the only version API
//! servers from 1.22 serve), as client-go's `csr.RequestCertificate` and the kubelet's
//! bootstrap make them.

use crate::ClusterError;
use base64::Engine;
use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestSpec};
use kube::api::{Api, PostParams};
use rcgen::PublicKeyData;
use std::time::Duration;

/// The signer that issues kubelets' client certificates.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The usages of a kubelet client certificate, in the kubelet's order. Newer kubelets leave
/// out "key encipherment" for keys that are not RSA, but the 1.20 approver requires it (and
/// later ones still accept it).
pub const CLIENT_USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];
/// The signer that issues kubelets' serving certificates (`serverTLSBootstrap`).
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// The usages of a kubelet serving certificate.
pub const SERVING_USAGES: [&str; 3] = ["digital signature", "key encipherment", "server auth"];
/// How long the kubelet waits for its request to be approved and signed.
const WAIT: Duration = Duration::from_secs(3600);

/// The node's identity: CN `system:node:<name>`, O `system:nodes`.
pub fn subject(node: &str) -> (String, &'static str) {
    (format!("system:node:{node}"), "system:nodes")
}

/// The kubelet's name for a request: `node-csr-` and the SHA-512/256 of the public key, the
/// subject and the usages, each base64url-encoded and followed by `|` (so that a restart with
/// the same key finds its own request: `digestedName`).
pub fn digested_name(public_key_der: &[u8], common_name: &str, organization: &str, usages: &[&str]) -> String {
    let encode = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA512_256);
    for part in [public_key_der, common_name.as_bytes(), organization.as_bytes()]
        .into_iter()
        .chain(usages.iter().map(|u| u.as_bytes()))
    {
        ctx.update(encode(part).as_bytes());
        ctx.update(b"|");
    }
    format!("node-csr-{}", encode(ctx.finish().as_ref()))
}

/// What a node asks a signer for.
#[derive(Debug, Clone)]
pub struct CertificateRequest {
    pub node: String,
    pub signer: &'static str,
    pub usages: &'static [&'static str],
    /// The subject alternative names of a serving certificate: the node's host names…
    pub dns_names: Vec<String>,
    /// …and addresses.
    pub ips: Vec<std::net::IpAddr>,
}

impl CertificateRequest {
    /// A client certificate for node `node`.
    pub fn client(node: &str) -> CertificateRequest {
        CertificateRequest {
            node: node.to_string(),
            signer: CLIENT_SIGNER,
            usages: &CLIENT_USAGES,
            dns_names: Vec::new(),
            ips: Vec::new(),
        }
    }

    /// A serving certificate for node `node`, valid for its names and addresses.
    pub fn serving(node: &str, dns_names: Vec<String>, ips: Vec<std::net::IpAddr>) -> CertificateRequest {
        CertificateRequest { node: node.to_string(), signer: SERVING_SIGNER, usages: &SERVING_USAGES, dns_names, ips }
    }

    /// The PEM request, signed with `key`.
    fn pem(&self, key: &rcgen::KeyPair) -> Result<String, ClusterError> {
        let (cn, o) = subject(&self.node);
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::OrganizationName, o);
        params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        for name in &self.dns_names {
            let name = name
                .clone()
                .try_into()
                .map_err(|e| ClusterError::Credentials(format!("{name}: not a DNS name for a certificate: {e}")))?;
            params.subject_alt_names.push(rcgen::SanType::DnsName(name));
        }
        params.subject_alt_names.extend(self.ips.iter().map(|ip| rcgen::SanType::IpAddress(*ip)));
        params
            .serialize_request(key)
            .and_then(|r| r.pem())
            .map_err(|e| ClusterError::Credentials(format!("cannot make the certificate request: {e}")))
    }
}

/// How a request is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestName {
    /// TLS bootstrap's `node-csr-<digest>`: a restart with the same key finds its request.
    Digested,
    /// A renewal's: `csr-` and a suffix the API server chooses (client-go's certificate
    /// manager).
    Generated,
}

/// Asks for a certificate for `key` and waits until it is approved and issued; returns the
/// certificate (PEM). A digested request that exists already (made by a start that did not live
/// to see it signed) is waited for instead.
pub async fn request_certificate(
    client: &kube::Client,
    key: &rcgen::KeyPair,
    request: &CertificateRequest,
    naming: RequestName,
) -> Result<String, ClusterError> {
    let (cn, o) = subject(&request.node);
    let mut metadata = kube::api::ObjectMeta::default();
    match naming {
        RequestName::Digested => {
            metadata.name = Some(digested_name(&key.subject_public_key_info(), &cn, o, request.usages));
        }
        RequestName::Generated => metadata.generate_name = Some("csr-".to_string()),
    }
    let csr = CertificateSigningRequest {
        metadata,
        spec: CertificateSigningRequestSpec {
            request: ByteString(request.pem(key)?.into_bytes()),
            signer_name: request.signer.to_string(),
            usages: Some(request.usages.iter().map(|u| u.to_string()).collect()),
            ..Default::default()
        },
        status: None,
    };
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let name = match api.create(&PostParams::default(), &csr).await {
        Ok(created) => {
            let name = created.metadata.name.unwrap_or_default();
            tracing::info!(csr = name, signer = request.signer, "certificate signing request created");
            name
        }
        Err(kube::Error::Api(s)) if s.code == 409 && naming == RequestName::Digested => {
            let name = csr.metadata.name.unwrap_or_default();
            tracing::info!(csr = name, "waiting for the existing request");
            name
        }
        Err(e) => return Err(ClusterError::Api(e)),
    };
    let issued = tokio::time::timeout(WAIT, kube::runtime::wait::await_condition(api, &name, decided))
        .await
        .map_err(|_| {
            ClusterError::Credentials(format!("certificate signing request {name} was not signed within an hour"))
        })?
        .map_err(|e| ClusterError::Credentials(format!("waiting for certificate signing request {name}: {e}")))?;
    let status = issued.and_then(|c| c.status).unwrap_or_default();
    if let Some(c) = status.conditions.iter().flatten().find(|c| c.type_ == "Denied" || c.type_ == "Failed") {
        return Err(ClusterError::Credentials(format!(
            "certificate signing request {name} is {}: {}",
            c.type_,
            c.message.as_deref().or(c.reason.as_deref()).unwrap_or("no reason given")
        )));
    }
    let cert = status.certificate.map(|b| b.0).unwrap_or_default();
    String::from_utf8(cert).map_err(|_| ClusterError::Credentials(format!("{name}: the issued certificate is not PEM")))
}

/// Approved and issued, or denied or failed: the request is decided.
fn decided(csr: Option<&CertificateSigningRequest>) -> bool {
    let Some(status) = csr.and_then(|c| c.status.as_ref()) else {
        return false;
    };
    let refused = status.conditions.iter().flatten().any(|c| c.type_ == "Denied" || c.type_ == "Failed");
    refused || status.certificate.as_ref().is_some_and(|c| !c.0.is_empty())
}

/// The first certificate's validity (not before, not after) in a PEM file.
pub fn validity(pem: &[u8]) -> Option<(Timestamp, Timestamp)> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).ok()?;
    validity_of_der(&pem.contents)
}

/// A certificate's validity (not before, not after).
pub fn validity_of_der(der: &[u8]) -> Option<(Timestamp, Timestamp)> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let v = cert.validity();
    Some((
        Timestamp::from_second(v.not_before.timestamp()).ok()?,
        Timestamp::from_second(v.not_after.timestamp()).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_depends_on_key_subject_and_usages() {
        let a = digested_name(b"key", "system:node:a", "system:nodes", &CLIENT_USAGES);
        assert!(a.starts_with("node-csr-"), "{a}");
        // 32 bytes of SHA-512/256, unpadded base64url.
        assert_eq!(a.len(), "node-csr-".len() + 43);
        assert_eq!(a, digested_name(b"key", "system:node:a", "system:nodes", &CLIENT_USAGES));
        assert_ne!(a, digested_name(b"key2", "system:node:a", "system:nodes", &CLIENT_USAGES));
        assert_ne!(a, digested_name(b"key", "system:node:b", "system:nodes", &CLIENT_USAGES));
        // The delimiter keeps shifted boundaries apart.
        assert_ne!(
            digested_name(b"key", "system:node:ab", "c", &[]),
            digested_name(b"key", "system:node:a", "bc", &[])
        );
    }

    #[test]
    fn the_request_names_the_node() {
        use x509_parser::prelude::FromDer;
        let key = rcgen::KeyPair::generate().unwrap();
        let pem = CertificateRequest::client("n1").pem(&key).unwrap();
        let der = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap().1.contents;
        let (_, req) = x509_parser::certification_request::X509CertificationRequest::from_der(&der).unwrap();
        let subject = req.certification_request_info.subject.to_string();
        assert!(subject.contains("CN=system:node:n1"), "{subject}");
        assert!(subject.contains("O=system:nodes"), "{subject}");
        assert!(req.requested_extensions().is_none_or(|mut e| e.next().is_none()), "a client request has no names");
    }

    #[test]
    fn a_serving_request_names_the_node_s_host_names_and_addresses() {
        use x509_parser::extensions::{GeneralName, ParsedExtension};
        use x509_parser::prelude::FromDer;
        let key = rcgen::KeyPair::generate().unwrap();
        let ip: std::net::IpAddr = "10.0.0.7".parse().unwrap();
        let pem = CertificateRequest::serving("n1", vec!["n1".into()], vec![ip]).pem(&key).unwrap();
        let der = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap().1.contents;
        let (_, req) = x509_parser::certification_request::X509CertificationRequest::from_der(&der).unwrap();
        let names: Vec<String> = req
            .requested_extensions()
            .into_iter()
            .flatten()
            .filter_map(|e| match e {
                ParsedExtension::SubjectAlternativeName(san) => Some(san),
                _ => None,
            })
            .flat_map(|san| san.general_names.iter())
            .map(|n| match n {
                GeneralName::DNSName(d) => format!("DNS:{d}"),
                GeneralName::IPAddress(b) => format!("IP:{b:?}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(names, ["DNS:n1", "IP:[10, 0, 0, 7]"]);
    }
}
