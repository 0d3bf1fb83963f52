//! A CA made for one run and thrown away with it, and the certificates a
//! built-in TLS service needs: a server certificate for 127.0.0.1 and
//! localhost, and a client certificate for mutual TLS. PEM files in a
//! directory the caller owns; nothing is installed anywhere else.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};

/// The files of a throwaway PKI, and its CA to issue more server
/// certificates with (a Docker stack's services are named by their service
/// names inside their network).
#[derive(Debug, Clone)]
pub struct ThrowawayPki {
    /// The CA certificate: what clients trust (`--tls-ca`).
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    issuer: std::sync::Arc<Issuer>,
}

/// The CA's certificate and key, in memory only (never written).
struct Issuer {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("throwaway CA")
    }
}

/// A certificate and its key, PEM.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

fn issue(names: Vec<String>, usage: ExtendedKeyUsagePurpose, issuer: &Issuer) -> Result<Issued, PkiError> {
    let mut p = CertificateParams::new(names.clone())?;
    p.distinguished_name.push(DnType::CommonName, names[0].clone());
    p.extended_key_usages = vec![usage];
    let key = KeyPair::generate()?;
    let cert = p.signed_by(&key, &issuer.cert, &issuer.key)?;
    Ok(Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

impl ThrowawayPki {
    /// A server certificate for `names` (and 127.0.0.1 and localhost),
    /// signed by this CA; kept in memory for the caller to hand on.
    pub fn server_for(&self, names: &[String]) -> Result<Issued, PkiError> {
        let mut all = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        for n in names {
            if !all.contains(n) {
                all.push(n.clone());
            }
        }
        issue(all, ExtendedKeyUsagePurpose::ServerAuth, &self.issuer)
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.issuer.cert.pem()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("cannot make the run's throwaway certificates: {0}\nhint: report this")]
    Make(#[from] rcgen::Error),
    #[error(
        "cannot write the run's throwaway certificates into {dir}: {source}\nhint: give the run a writable directory"
    )]
    Write { dir: String, source: std::io::Error },
}

/// Make a CA and its server and client certificates under `dir`.
pub fn make(dir: &Path) -> Result<ThrowawayPki, PkiError> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "scalebench throwaway CA");
    ca_params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_key = KeyPair::generate()?;
    let ca = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer { cert: ca, key: ca_key };
    let server = issue(vec!["127.0.0.1".into(), "localhost".into()], ExtendedKeyUsagePurpose::ServerAuth, &issuer)?;
    let client = issue(vec!["scalebench".into()], ExtendedKeyUsagePurpose::ClientAuth, &issuer)?;
    let pki = ThrowawayPki {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client.key"),
        issuer: std::sync::Arc::new(issuer),
    };
    let write = |p: &Path, text: &str| {
        std::fs::write(p, text).map_err(|source| PkiError::Write { dir: dir.display().to_string(), source })
    };
    std::fs::create_dir_all(dir).map_err(|source| PkiError::Write { dir: dir.display().to_string(), source })?;
    write(&pki.ca, &pki.ca_pem())?;
    write(&pki.server_cert, &server.cert_pem)?;
    write(&pki.server_key, &server.key_pem)?;
    write(&pki.client_cert, &client.cert_pem)?;
    write(&pki.client_key, &client.key_pem)?;
    Ok(pki)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_throwaway_ca_signs_a_server_certificate_rustls_accepts_for_127_0_0_1() {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
        let dir = tempfile::tempdir().unwrap();
        let pki = super::make(dir.path()).unwrap();
        let config =
            crate::tls::build(&crate::tls::TlsSettings { ca: Some(pki.ca.clone()), ..Default::default() }).unwrap();
        let cert = CertificateDer::from_pem_file(&pki.server_cert).unwrap();
        let verifier = config.crypto_provider().clone();
        let roots = {
            let mut r = rustls::RootCertStore::empty();
            r.add(CertificateDer::from_pem_file(&pki.ca).unwrap()).unwrap();
            std::sync::Arc::new(r)
        };
        let v = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, verifier).build().unwrap();
        use rustls::client::danger::ServerCertVerifier;
        let name = ServerName::try_from("127.0.0.1").unwrap();
        assert!(v.verify_server_cert(&cert, &[], &name, &[], UnixTime::now()).is_ok());
        let other = ServerName::try_from("broker.example").unwrap();
        assert!(v.verify_server_cert(&cert, &[], &other, &[], UnixTime::now()).is_err());
    }
}
