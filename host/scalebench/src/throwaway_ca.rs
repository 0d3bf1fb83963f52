//! A CA made for one run and thrown away with it, and the certificates a
//! built-in TLS service needs: a server certificate for 127.0.0.1 and
//! localhost, and a client certificate for mutual TLS. PEM files in a
//! directory the caller owns; nothing is installed anywhere else.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};

/// The files of a throwaway PKI.
#[derive(Debug, Clone)]
pub struct ThrowawayPki {
    /// The CA certificate: what clients trust (`--tls-ca`).
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
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
    let issue = |names: Vec<String>, usage: ExtendedKeyUsagePurpose| -> Result<(String, String), PkiError> {
        let mut p = CertificateParams::new(names.clone())?;
        p.distinguished_name.push(DnType::CommonName, names[0].clone());
        p.extended_key_usages = vec![usage];
        let key = KeyPair::generate()?;
        let cert = p.signed_by(&key, &ca, &ca_key)?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let (server_pem, server_key) =
        issue(vec!["127.0.0.1".into(), "localhost".into()], ExtendedKeyUsagePurpose::ServerAuth)?;
    let (client_pem, client_key) = issue(vec!["scalebench".into()], ExtendedKeyUsagePurpose::ClientAuth)?;
    let pki = ThrowawayPki {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client.key"),
    };
    let write = |p: &Path, text: &str| {
        std::fs::write(p, text).map_err(|source| PkiError::Write { dir: dir.display().to_string(), source })
    };
    std::fs::create_dir_all(dir).map_err(|source| PkiError::Write { dir: dir.display().to_string(), source })?;
    write(&pki.ca, &ca.pem())?;
    write(&pki.server_cert, &server_pem)?;
    write(&pki.server_key, &server_key)?;
    write(&pki.client_cert, &client_pem)?;
    write(&pki.client_key, &client_key)?;
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
