//! TLS for every connection scalebench opens to a SUT: one rustls client
//! configuration, built once per process from `--tls-ca`, `--tls-cert`,
//! `--tls-key` and `--tls-server-name`, and shared by MQTT (`mqtts://`),
//! NATS (`tls://`), HTTP (`https://`) and PostgreSQL (`sslmode=…`).
//!
//! Server certificates are always verified: against the CA bundle given, or
//! the system's roots. There is no switch that turns verification off. Key
//! material is read from files, never from flag values.
//!
//! What each connection negotiated (protocol version, cipher suite, whether
//! a client certificate was sent) is recorded here, so a result can say
//! which of its connections used TLS.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// The TLS settings of a command, as its flags give them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TlsSettings {
    /// Trusted CA bundle (PEM); None: the system's roots.
    pub ca: Option<PathBuf>,
    /// Client certificate chain (PEM): mutual TLS.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key: Option<PathBuf>,
    /// The name the server's certificate must carry, when the URL's host is
    /// an address or another name.
    pub server_name: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{flag} {path}: {detail}\nhint: {hint}")]
    File { flag: &'static str, path: String, detail: String, hint: String },
    #[error("{problem}\nhint: {hint}")]
    Setup { problem: String, hint: String },
    #[error("--tls-server-name {0:?} is not a host name or an address\nhint: give the name the server's certificate carries, e.g. --tls-server-name broker.example.com")]
    ServerName(String),
}

/// The process's client configuration.
#[derive(Debug)]
pub struct ClientTls {
    pub config: Arc<rustls::ClientConfig>,
    pub settings: TlsSettings,
}

static CLIENT: OnceLock<ClientTls> = OnceLock::new();

/// Build the configuration from `settings` and make it the process's. A
/// second call with the same settings is a no-op; with other settings it is
/// refused (one configuration per process).
pub fn install(settings: &TlsSettings) -> Result<&'static ClientTls, TlsError> {
    if let Some(c) = CLIENT.get() {
        if &c.settings == settings {
            return Ok(c);
        }
        return Err(TlsError::Setup {
            problem: "a second, different TLS configuration in one process".into(),
            hint: "give --tls-ca, --tls-cert, --tls-key and --tls-server-name once".into(),
        });
    }
    let built = ClientTls { config: Arc::new(build(settings)?), settings: settings.clone() };
    let _ = CLIENT.set(built);
    Ok(CLIENT.get().expect("just set"))
}

/// The process's configuration: the one [`install`]ed, else the system's
/// roots and no client certificate.
pub fn client() -> Result<&'static ClientTls, TlsError> {
    match CLIENT.get() {
        Some(c) => Ok(c),
        None => install(&TlsSettings::default()),
    }
}

/// Build a client configuration (exposed for tests and benchmarks that
/// compare configurations in one process).
pub fn build(s: &TlsSettings) -> Result<rustls::ClientConfig, TlsError> {
    let roots = Arc::new(roots(s.ca.as_deref())?);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let setup = |e: String| TlsError::Setup { problem: format!("TLS set-up: {e}"), hint: "check --tls-ca".into() };
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| setup(e.to_string()))?;
    let builder = match &s.server_name {
        None => builder.with_root_certificates(roots),
        Some(n) => {
            let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| setup(e.to_string()))?;
            let name = server_name(n, "")?;
            builder.dangerous().with_custom_certificate_verifier(Arc::new(NamedVerifier { inner, name }))
        }
    };
    let config = match (&s.cert, &s.key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) => {
            return Err(TlsError::Setup {
                problem: "--tls-cert was given without --tls-key".into(),
                hint: "mutual TLS needs both: --tls-cert FILE (the certificate chain, PEM) and --tls-key FILE (its private key, PEM)".into(),
            })
        }
        (None, Some(_)) => {
            return Err(TlsError::Setup {
                problem: "--tls-key was given without --tls-cert".into(),
                hint: "mutual TLS needs both: --tls-cert FILE (the certificate chain, PEM) and --tls-key FILE (its private key, PEM)".into(),
            })
        }
        (Some(cert), Some(key)) => {
            let chain = certs("--tls-cert", cert)?;
            let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::File {
                flag: "--tls-key",
                path: key.display().to_string(),
                detail: pem_problem(&e, "a private key"),
                hint: "give the client certificate's private key as a PEM file (BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)".into(),
            })?;
            builder.with_client_auth_cert(chain, key_der).map_err(|e| TlsError::File {
                flag: "--tls-key",
                path: key.display().to_string(),
                detail: format!("does not go with the certificate in {}: {e}", cert.display()),
                hint: "give the key that belongs to --tls-cert's certificate".into(),
            })?
        }
    };
    Ok(config)
}

/// `--tls-server-name`: the server's certificate is verified in full, as
/// for any connection, but against this name instead of the URL's host.
/// Every client library (MQTT, NATS, HTTP, PostgreSQL) takes the name from
/// its URL; verifying here makes the flag mean the same for all of them.
#[derive(Debug)]
struct NamedVerifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl rustls::client::danger::ServerCertVerifier for NamedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _url_host: &ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        self.inner.verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

fn roots(ca: Option<&Path>) -> Result<rustls::RootCertStore, TlsError> {
    let mut store = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            for c in certs("--tls-ca", path)? {
                store.add(c).map_err(|e| TlsError::File {
                    flag: "--tls-ca",
                    path: path.display().to_string(),
                    detail: format!("a certificate in it cannot be used as a trust anchor: {e}"),
                    hint: "give the CA certificate(s) that signed the servers' certificates, PEM".into(),
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for c in found.certs {
                let _ = store.add(c);
            }
        }
    }
    Ok(store)
}

fn certs(flag: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let file_err = |detail: String| TlsError::File {
        flag,
        path: path.display().to_string(),
        detail,
        hint: "give a PEM file of certificates (BEGIN CERTIFICATE blocks)".into(),
    };
    let iter = CertificateDer::pem_file_iter(path).map_err(|e| file_err(pem_problem(&e, "certificates")))?;
    let list: Vec<_> = iter.collect::<Result<_, _>>().map_err(|e| file_err(pem_problem(&e, "certificates")))?;
    if list.is_empty() {
        return Err(file_err("holds no certificate".into()));
    }
    Ok(list)
}

fn pem_problem(e: &rustls::pki_types::pem::Error, what: &str) -> String {
    use rustls::pki_types::pem::Error as E;
    match e {
        E::Io(io) => format!("cannot be read: {io}"),
        E::NoItemsFound => format!("holds no {what} in PEM form"),
        other => format!("is not a PEM file of {what}: {other:?}"),
    }
}

/// The name to verify the server's certificate against: `--tls-server-name`
/// when given, else the URL's host.
pub fn server_name(given: &str, url_host: &str) -> Result<ServerName<'static>, TlsError> {
    let name = if given.is_empty() { url_host } else { given };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(name.to_string()).map_err(|_| TlsError::ServerName(name.to_string()))
}

/// Open TLS over `tcp` to `host`, with the process's configuration.
pub async fn connect(
    tcp: tokio::net::TcpStream,
    host: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    connect_stream(tcp, host).await
}

/// [`connect`] over any byte stream (a socket wrapped to be measured).
pub async fn connect_stream<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    stream: S,
    host: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<S>> {
    let c = client().map_err(std::io::Error::other)?;
    let name = server_name(host, "").map_err(std::io::Error::other)?;
    tokio_rustls::TlsConnector::from(c.config.clone()).connect(name, stream).await
}

/// The HTTP connector of the ingest transport: `https://` with the
/// process's configuration, `http://` as plain TCP. When no URL is https
/// the configuration is not loaded (it would read the system's roots for
/// nothing) and an https URL met later fails as unverifiable.
pub fn https_connector(
    any_https: bool,
) -> hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector> {
    let config = match any_https.then(client) {
        Some(Ok(c)) => (*c.config).clone(),
        _ => unverifiable(),
    };
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http)
}

/// A configuration that trusts nothing: every certificate is refused.
fn unverifiable() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth()
}

/// A ureq agent (probes, plugins' HTTP calls) with the process's TLS configuration.
pub fn http_agent(builder: ureq::AgentBuilder) -> ureq::Agent {
    let config = match client() {
        Ok(c) => c.config.clone(),
        Err(_) => Arc::new(unverifiable()),
    };
    builder.tls_config(config).build()
}

/// Before any load: open TLS to `host:port` once, as `service` will, so
/// an unknown CA, a wrong name, an expired certificate or a refused client
/// certificate is reported before step 1, and record what it negotiated.
/// Under TLS 1.3 a server refuses a client certificate after the client's
/// side of the handshake is done: a short read catches its alert.
pub async fn preflight(service: &str, host: &str, port: u16, plain_scheme: &str) -> Result<(), String> {
    use tokio::io::AsyncReadExt;
    let tcp = tokio::time::timeout(std::time::Duration::from_secs(5), tokio::net::TcpStream::connect((host, port)))
        .await
        .map_err(|_| format!("no TCP connection to {host}:{port} within 5 s"))?
        .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
    let fail = |e: std::io::Error| explain(&e, plain_scheme).unwrap_or_else(|| e.to_string());
    let mut tls = tokio::time::timeout(std::time::Duration::from_secs(10), connect(tcp, host))
        .await
        .map_err(|_| format!("no TLS handshake with {host}:{port} within 10 s\nhint: is that port TLS? use {plain_scheme} for a plain one"))?
        .map_err(|e| explain_handshake(&e, plain_scheme))?;
    let mut byte = [0u8; 1];
    if let Ok(Err(e)) = tokio::time::timeout(std::time::Duration::from_millis(300), tls.read(&mut byte)).await {
        return Err(fail(e));
    }
    record(service, tls.get_ref().1);
    Ok(())
}

/// [`preflight`] for a NATS server: it speaks first (its INFO line, in
/// the clear), then the client starts TLS; what that negotiates is recorded
/// as `service`'s.
pub async fn preflight_nats(service: &str, host: &str, port: u16) -> Result<(), String> {
    use tokio::io::AsyncBufReadExt as _;
    let within = std::time::Duration::from_secs(5);
    let mut tcp = tokio::time::timeout(within, tokio::net::TcpStream::connect((host, port)))
        .await
        .map_err(|_| format!("no TCP connection to {host}:{port} within 5 s"))?
        .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
    let mut info = String::new();
    {
        let mut reader = tokio::io::BufReader::new(&mut tcp);
        tokio::time::timeout(within, reader.read_line(&mut info))
            .await
            .map_err(|_| format!("{host}:{port} sent no INFO within 5 s: is it a NATS server?"))?
            .map_err(|e| e.to_string())?;
    }
    if !info.starts_with("INFO ") {
        return Err(format!("{host}:{port} did not greet as a NATS server does (INFO …)"));
    }
    let tls = tokio::time::timeout(std::time::Duration::from_secs(10), connect(tcp, host))
        .await
        .map_err(|_| format!("no TLS handshake with {host}:{port} within 10 s"))?
        .map_err(|e| explain_handshake(&e, "nats://"))?;
    record(service, tls.get_ref().1);
    Ok(())
}

pub use crate::results::Negotiated;

static NEGOTIATED: Mutex<BTreeMap<String, Negotiated>> = Mutex::new(BTreeMap::new());

/// Note what `conn` negotiated for `service` (the first connection of each
/// service is kept: they all share one configuration).
pub fn record(service: &str, conn: &rustls::ClientConnection) {
    let n = Negotiated {
        protocol: conn.protocol_version().map(version_name).unwrap_or_else(|| "unknown".into()),
        cipher_suite: conn
            .negotiated_cipher_suite()
            .map(|s| format!("{:?}", s.suite()))
            .unwrap_or_else(|| "unknown".into()),
        client_certificate: CLIENT.get().is_some_and(|c| c.settings.cert.is_some()),
    };
    NEGOTIATED.lock().unwrap().entry(service.to_string()).or_insert(n);
}

fn version_name(v: rustls::ProtocolVersion) -> String {
    match v {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".into(),
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".into(),
        other => format!("{other:?}"),
    }
}

/// Every service's TLS so far, by service name ("mqtt", "nats", "http:api", "postgres").
pub fn negotiated() -> BTreeMap<String, Negotiated> {
    NEGOTIATED.lock().unwrap().clone()
}

/// A TLS failure in the user's words, with what to do; None when `e` is
/// not a TLS failure. `plain_scheme` is the URL scheme without TLS
/// (`mqtt://`), for the hint when the port does not speak TLS.
pub fn explain(e: &(dyn std::error::Error + 'static), plain_scheme: &str) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return Some(explain_rustls(r, plain_scheme));
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if let Some(inner) = io.get_ref() {
                if let Some(r) = inner.downcast_ref::<rustls::Error>() {
                    return Some(explain_rustls(r, plain_scheme));
                }
            }
        }
        cur = err.source();
    }
    None
}

/// A failed TLS handshake in the user's words: [`explain`], or, when the
/// server just closed or reset the connection (a plain port reads the
/// ClientHello as garbage), that the port may not speak TLS.
pub fn explain_handshake(e: &std::io::Error, plain_scheme: &str) -> String {
    use std::io::ErrorKind as K;
    if let Some(t) = explain(e, plain_scheme) {
        return t;
    }
    match e.kind() {
        K::ConnectionReset | K::UnexpectedEof | K::BrokenPipe | K::ConnectionAborted => format!(
            "the server closed the connection during the TLS handshake ({e}): the port does not speak TLS, or it refused this client\nhint: use {plain_scheme} for a plain port; otherwise check the server's TLS set-up and its log"
        ),
        _ => e.to_string(),
    }
}

fn explain_rustls(e: &rustls::Error, plain_scheme: &str) -> String {
    use rustls::{AlertDescription as A, CertificateError as C, Error as E};
    let ca_hint = "give the CA that signed the server's certificate with --tls-ca FILE (PEM)";
    match e {
        E::InvalidCertificate(c) => match c {
            C::UnknownIssuer | C::BadSignature => {
                format!("the server's certificate is not signed by a CA you trust\nhint: {ca_hint}")
            }
            C::NotValidForName | C::NotValidForNameContext { .. } => format!(
                "the server's certificate is for another name ({})\nhint: connect by the name the certificate carries, or give it with --tls-server-name NAME",
                match c {
                    C::NotValidForNameContext { expected, presented } => {
                        format!("expected {expected:?}, it carries {}", presented.join(", "))
                    }
                    _ => "it does not carry the URL's host".into(),
                }
            ),
            C::Expired | C::ExpiredContext { .. } => {
                "the server's certificate has expired\nhint: renew the server's certificate (and check this host's clock)".into()
            }
            C::NotValidYet | C::NotValidYetContext { .. } => {
                "the server's certificate is not valid yet\nhint: check this host's clock and the certificate's dates".into()
            }
            C::Revoked => "the server's certificate is revoked\nhint: give the server a certificate that is not".into(),
            other => format!("the server's certificate is refused: {other:?}\nhint: {ca_hint}"),
        },
        E::AlertReceived(A::CertificateRequired) => {
            "the server requires a client certificate (mutual TLS) and none was given\nhint: give --tls-cert FILE and --tls-key FILE".into()
        }
        E::AlertReceived(A::BadCertificate | A::UnknownCA | A::CertificateUnknown | A::UnsupportedCertificate) => {
            "the server refused the client certificate\nhint: give --tls-cert and --tls-key of a certificate signed by a CA the server trusts".into()
        }
        E::AlertReceived(A::HandshakeFailure) => format!(
            "the server ended the TLS handshake (it may require a client certificate, or share no protocol version or cipher with scalebench)\nhint: if it requires mutual TLS, give --tls-cert FILE and --tls-key FILE; if the port is not TLS, use {plain_scheme}"
        ),
        E::InvalidMessage(_) | E::InappropriateMessage { .. } | E::InappropriateHandshakeMessage { .. } => format!(
            "the server did not answer in TLS: the port does not speak TLS\nhint: use {plain_scheme} for a plain port, or point at the server's TLS port"
        ),
        other => format!("TLS failed: {other}\nhint: check the server's TLS set-up and --tls-ca / --tls-cert / --tls-key"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_without_its_key_is_refused_naming_both_flags() {
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let cert = dir.path().join("c.pem");
        std::fs::write(&cert, ca.cert.pem()).unwrap();
        let e = build(&TlsSettings { cert: Some(cert), ..Default::default() }).unwrap_err().to_string();
        assert!(e.contains("--tls-cert was given without --tls-key"), "{e}");
        assert!(e.contains("hint:"), "{e}");
    }

    #[test]
    fn a_ca_file_that_is_not_pem_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "not a certificate").unwrap();
        let e = build(&TlsSettings { ca: Some(ca.clone()), ..Default::default() }).unwrap_err().to_string();
        assert!(e.contains(&ca.display().to_string()), "{e}");
        assert!(e.contains("holds no"), "{e}");
        let missing = dir.path().join("missing.pem");
        let e = build(&TlsSettings { ca: Some(missing), ..Default::default() }).unwrap_err().to_string();
        assert!(e.contains("cannot be read"), "{e}");
    }

    #[test]
    fn a_key_that_does_not_match_its_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = rcgen::generate_simple_self_signed(vec!["a".into()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["b".into()]).unwrap();
        let (cert, key) = (dir.path().join("a.pem"), dir.path().join("b.key"));
        std::fs::write(&cert, a.cert.pem()).unwrap();
        std::fs::write(&key, b.key_pair.serialize_pem()).unwrap();
        let s = TlsSettings { cert: Some(cert), key: Some(key), ..Default::default() };
        let e = build(&s).unwrap_err().to_string();
        assert!(e.contains("does not go with the certificate"), "{e}");
    }

    #[test]
    fn the_server_name_flag_wins_over_the_urls_host() {
        assert_eq!(
            server_name("broker.example", "127.0.0.1").unwrap(),
            ServerName::try_from("broker.example").unwrap()
        );
        assert_eq!(server_name("", "127.0.0.1").unwrap(), ServerName::try_from("127.0.0.1").unwrap());
        assert!(server_name("not a name!", "x").is_err());
    }
}
