//! A throwaway PKI made by a test: a CA, server certificates for
//! 127.0.0.1 / localhost (and an expired one), and client certificates
//! signed by the CA or by a stranger CA. Files go in the test's directory.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};

pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
    pub pem: PathBuf,
}

/// A certificate and its key, as PEM files.
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Ca {
    pub fn new(dir: &Path, name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, format!("scalebench test CA {name}"));
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        let pem = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&pem, cert.pem()).unwrap();
        Ca { cert, key, pem }
    }

    fn issue(&self, dir: &Path, file: &str, names: &[&str], usage: ExtendedKeyUsagePurpose, expired: bool) -> Issued {
        let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        p.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or("client"));
        p.extended_key_usages = vec![usage];
        if expired {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        let issued = Issued { cert: dir.join(format!("{file}.pem")), key: dir.join(format!("{file}.key")) };
        std::fs::write(&issued.cert, cert.pem()).unwrap();
        std::fs::write(&issued.key, key.serialize_pem()).unwrap();
        issued
    }

    /// A server certificate for 127.0.0.1 and localhost.
    pub fn server(&self, dir: &Path, file: &str) -> Issued {
        self.issue(dir, file, &["127.0.0.1", "localhost"], ExtendedKeyUsagePurpose::ServerAuth, false)
    }

    /// A server certificate for 127.0.0.1 and localhost that expired in 2021.
    pub fn expired_server(&self, dir: &Path, file: &str) -> Issued {
        self.issue(dir, file, &["127.0.0.1", "localhost"], ExtendedKeyUsagePurpose::ServerAuth, true)
    }

    /// A client certificate.
    pub fn client(&self, dir: &Path, file: &str) -> Issued {
        self.issue(dir, file, &["scalebench-client"], ExtendedKeyUsagePurpose::ClientAuth, false)
    }
}
