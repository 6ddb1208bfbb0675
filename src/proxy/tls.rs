//! The proxy's TLS identity: a CA made at start and a serving certificate it signs for
//! 127.0.0.1, `localhost` and the address it listens on, kept in memory (only the CA reaches disk, in the kubeconfig).

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use super::handle::ProxyError;

/// What clients trust and what the server presents.
pub(crate) struct Identity {
    /// PEM of the CA (the kubeconfig's `certificate-authority-data`).
    pub ca_pem: String,
    /// Server configuration presenting the signed certificate.
    pub config: Arc<rustls::ServerConfig>,
}

/// Makes a fresh CA and serving certificate, and a server configuration offering only
/// HTTP/1.1: Go clients then fall back from h2, and connection handling stays one request at
/// a time per connection.
pub(crate) fn identity(listen: std::net::IpAddr) -> Result<Identity, ProxyError> {
    let certificate = |source| ProxyError::Certificate { source };
    let mut ca_params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "grove-conformance API proxy CA");
    ca_params.distinguished_name = dn;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().map_err(certificate)?;
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(certificate)?;

    let mut params = CertificateParams::new(vec!["localhost".to_string()]).map_err(certificate)?;
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    if !listen.is_loopback() {
        params.subject_alt_names.push(SanType::IpAddress(listen));
    }
    params
        .distinguished_name
        .push(DnType::CommonName, "grove-conformance API proxy");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().map_err(certificate)?;
    let cert = params.signed_by(&key, &ca).map_err(certificate)?;

    let tls = |source| ProxyError::Tls { source };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls)?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone(), ca.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(tls)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Identity {
        ca_pem: ca.pem(),
        config: Arc::new(config),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_offers_http1_only_and_a_pem_ca() {
        let identity = identity(std::net::Ipv4Addr::LOCALHOST.into()).unwrap();
        assert_eq!(identity.config.alpn_protocols, [b"http/1.1".to_vec()]);
        assert!(identity.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    }
}
