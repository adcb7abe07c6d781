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
/// The usages of a kubelet client certificate, in the kubelet's order.
pub const CLIENT_USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];
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

/// The PEM request for the node's identity, signed with `key`.
fn request_pem(key: &rcgen::KeyPair, node: &str) -> Result<String, ClusterError> {
    let (cn, o) = subject(node);
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::OrganizationName, o);
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    params
        .serialize_request(key)
        .and_then(|r| r.pem())
        .map_err(|e| ClusterError::Credentials(format!("cannot make the certificate request: {e}")))
}

/// Asks for a client certificate for `key` and waits until it is approved and issued; returns
/// the certificate (PEM). A request of the same name that exists already (made by a start that
/// did not live to see it signed) is waited for instead.
pub async fn request_client_certificate(
    client: &kube::Client,
    key: &rcgen::KeyPair,
    node: &str,
) -> Result<String, ClusterError> {
    let (cn, o) = subject(node);
    let name = digested_name(&key.subject_public_key_info(), &cn, o, &CLIENT_USAGES);
    let csr = CertificateSigningRequest {
        metadata: kube::api::ObjectMeta { name: Some(name.clone()), ..Default::default() },
        spec: CertificateSigningRequestSpec {
            request: ByteString(request_pem(key, node)?.into_bytes()),
            signer_name: CLIENT_SIGNER.to_string(),
            usages: Some(CLIENT_USAGES.iter().map(|u| u.to_string()).collect()),
            ..Default::default()
        },
        status: None,
    };
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    match api.create(&PostParams::default(), &csr).await {
        Ok(_) => tracing::info!(csr = name, "certificate signing request created"),
        Err(kube::Error::Api(s)) if s.code == 409 => tracing::info!(csr = name, "waiting for the existing request"),
        Err(e) => return Err(ClusterError::Api(e)),
    }
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
    let cert = pem.parse_x509().ok()?;
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
        let pem = request_pem(&key, "n1").unwrap();
        let der = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap().1.contents;
        let (_, req) = x509_parser::certification_request::X509CertificationRequest::from_der(&der).unwrap();
        let subject = req.certification_request_info.subject.to_string();
        assert!(subject.contains("CN=system:node:n1"), "{subject}");
        assert!(subject.contains("O=system:nodes"), "{subject}");
    }
}
