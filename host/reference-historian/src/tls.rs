//! TLS for the historian's two connections, MQTT and PostgreSQL, when it is
//! given a CA (`--tls-ca FILE`): one rustls client configuration (ring),
//! server certificates always verified against that CA. The local stack's
//! own checks (readiness, the one-reading check) connect through the same
//! functions, so a TLS-only stack is reached the same way by everyone.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::CertificateDer;

pub use rustls::ClientConfig;

/// A client configuration trusting exactly the CA certificates in `ca` (PEM).
pub fn client_config(ca: &Path) -> Result<Arc<rustls::ClientConfig>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(ca)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read the CA file {}: {e}", ca.display()))?;
    if certs.is_empty() {
        return Err(format!("the CA file {} holds no certificate (PEM)", ca.display()));
    }
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        roots.add(c).map_err(|e| format!("the CA file {} holds a certificate rustls refuses: {e}", ca.display()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The MQTT transport for `tls`: TLS with that configuration, or plain TCP.
pub fn mqtt_transport(tls: Option<&Arc<rustls::ClientConfig>>) -> rumqttc::Transport {
    match tls {
        Some(c) => rumqttc::Transport::tls_with_config(rumqttc::TlsConfiguration::Rustls(c.clone())),
        None => rumqttc::Transport::tcp(),
    }
}

/// Connect to PostgreSQL over TLS (with `tls`) or plain, and drive the
/// connection on a task; `on_end` gets the error that ends it, if any.
pub async fn pg_connect(
    conn: &str,
    tls: Option<&Arc<rustls::ClientConfig>>,
    on_end: impl FnOnce(tokio_postgres::Error) + Send + 'static,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    match tls {
        Some(c) => drive(conn, tokio_postgres_rustls::MakeRustlsConnect::new((**c).clone()), on_end).await,
        None => drive(conn, tokio_postgres::NoTls, on_end).await,
    }
}

async fn drive<T>(
    conn: &str,
    tls: T,
    on_end: impl FnOnce(tokio_postgres::Error) + Send + 'static,
) -> Result<tokio_postgres::Client, tokio_postgres::Error>
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket>,
    T::Stream: Send + 'static,
{
    let (client, connection) = tokio_postgres::connect(conn, tls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            on_end(e);
        }
    });
    Ok(client)
}
