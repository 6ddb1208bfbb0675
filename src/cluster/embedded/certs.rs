//! Certificates for the embedded control plane, made the way envtest makes them: a serving CA
//! signing the apiserver's certificate, a client CA signing the admin user's certificate
//! (`CN=admin, O=system:masters`), and a service-account signing pair.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};

use crate::host::write_private;

/// Paths of every certificate and key the control plane uses, all inside one directory.
#[derive(Debug, Clone)]
pub struct CertPaths {
    /// The directory holding everything below (`--cert-dir` of the apiserver).
    pub dir: PathBuf,
    /// CA that signed the apiserver's serving certificate (clients trust it).
    pub serving_ca: PathBuf,
    /// The apiserver's serving certificate (`apiserver.crt`).
    pub serving_cert: PathBuf,
    /// Its key (`apiserver.key`).
    pub serving_key: PathBuf,
    /// CA that signs client certificates (`--client-ca-file`).
    pub client_ca: PathBuf,
    /// The admin user's client certificate.
    pub admin_cert: PathBuf,
    /// Its key.
    pub admin_key: PathBuf,
    /// Public half of the service-account signing pair.
    pub sa_public: PathBuf,
    /// Private half of the service-account signing pair.
    pub sa_private: PathBuf,
}

/// Errors while making certificates.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen refused the parameters.
    #[error("failed to generate {what}")]
    Generate {
        /// Which certificate or key.
        what: &'static str,
        /// The cause.
        #[source]
        source: rcgen::Error,
    },
    /// A file could not be written.
    #[error("failed to write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn gen_err(what: &'static str) -> impl Fn(rcgen::Error) -> CertError {
    move |source| CertError::Generate { what, source }
}

fn ca_params(common_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// Generates every certificate into `dir` (created if missing); keys are written with mode 0600.
pub fn generate(dir: &Path) -> Result<CertPaths, CertError> {
    std::fs::create_dir_all(dir).map_err(|source| CertError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let paths = CertPaths {
        dir: dir.to_path_buf(),
        serving_ca: dir.join("serving-ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        client_ca: dir.join("client-ca.crt"),
        admin_cert: dir.join("admin.crt"),
        admin_key: dir.join("admin.key"),
        sa_public: dir.join("sa.pub"),
        sa_private: dir.join("sa.key"),
    };

    let (serving_ca, serving_cert, serving_key) = serving_pair(
        "grove-conformance serving CA",
        "kube-apiserver",
        &[std::net::Ipv4Addr::new(10, 0, 0, 1)],
    )?;

    let client_ca_key = KeyPair::generate().map_err(gen_err("client CA key"))?;
    let client_ca =
        CertifiedIssuer::self_signed(ca_params("grove-conformance client CA"), client_ca_key)
            .map_err(gen_err("client CA"))?;
    let mut admin = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "admin");
    dn.push(DnType::OrganizationName, "system:masters");
    admin.distinguished_name = dn;
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_key = KeyPair::generate().map_err(gen_err("admin key"))?;
    let admin_cert = admin
        .signed_by(&admin_key, &client_ca)
        .map_err(gen_err("admin certificate"))?;

    let sa_key = KeyPair::generate().map_err(gen_err("service-account key"))?;

    write(&paths.serving_ca, &serving_ca.pem(), false)?;
    write(&paths.serving_cert, &serving_cert.pem(), false)?;
    write(&paths.serving_key, &serving_key.serialize_pem(), true)?;
    write(&paths.client_ca, &client_ca.pem(), false)?;
    write(&paths.admin_cert, &admin_cert.pem(), false)?;
    write(&paths.admin_key, &admin_key.serialize_pem(), true)?;
    write(&paths.sa_public, &sa_key.public_key_pem(), false)?;
    write(&paths.sa_private, &sa_key.serialize_pem(), true)?;

    Ok(paths)
}

/// A CA and a serving certificate signed by it, for `localhost`, 127.0.0.1 and `extra_ips`.
fn serving_pair(
    ca_name: &str,
    common_name: &str,
    extra_ips: &[std::net::Ipv4Addr],
) -> Result<
    (
        CertifiedIssuer<'static, KeyPair>,
        rcgen::Certificate,
        KeyPair,
    ),
    CertError,
> {
    let ca_key = KeyPair::generate().map_err(gen_err("serving CA key"))?;
    let ca =
        CertifiedIssuer::self_signed(ca_params(ca_name), ca_key).map_err(gen_err("serving CA"))?;
    let mut params = CertificateParams::new(vec!["localhost".to_string()])
        .map_err(gen_err("serving certificate"))?;
    for ip in std::iter::once(&std::net::Ipv4Addr::LOCALHOST).chain(extra_ips) {
        params
            .subject_alt_names
            .push(SanType::IpAddress((*ip).into()));
    }
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().map_err(gen_err("serving key"))?;
    let cert = params
        .signed_by(&key, &ca)
        .map_err(gen_err("serving certificate"))?;
    Ok((ca, cert, key))
}

fn write(path: &Path, text: &str, private: bool) -> Result<(), CertError> {
    let result = if private {
        write_private(path, text.as_bytes())
    } else {
        std::fs::write(path, text)
    };
    result.map_err(|source| CertError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// A serving certificate made by [`generate_serving`].
#[derive(Debug, Clone)]
pub struct ServingPair {
    /// PEM of the CA that signed it (what clients must trust).
    pub ca_pem: String,
}

/// A CA and a serving certificate for `localhost` and 127.0.0.1 (a webhook server on
/// loopback), written into `dir` as controller-runtime expects them: `tls.crt`, `tls.key`
/// (mode 0600) and `ca.crt`.
pub fn generate_serving(dir: &Path, common_name: &str) -> Result<ServingPair, CertError> {
    std::fs::create_dir_all(dir).map_err(|source| CertError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let (ca, cert, key) = serving_pair(&format!("{common_name} CA"), common_name, &[])?;
    write(&dir.join("tls.crt"), &cert.pem(), false)?;
    write(&dir.join("tls.key"), &key.serialize_pem(), true)?;
    write(&dir.join("ca.crt"), &ca.pem(), false)?;
    Ok(ServingPair { ca_pem: ca.pem() })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn keys_are_private_and_certificates_are_pem() {
        let dir = tempfile::tempdir().unwrap();
        let paths = generate(dir.path()).unwrap();
        for key in [&paths.serving_key, &paths.admin_key, &paths.sa_private] {
            let mode = std::fs::metadata(key).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{} has mode {mode:o}", key.display());
        }
        let key = std::fs::read_to_string(&paths.admin_key).unwrap();
        assert!(key.contains("PRIVATE KEY"));
        let cert = std::fs::read_to_string(&paths.serving_cert).unwrap();
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
    }
}
