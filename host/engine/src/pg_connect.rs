//! Opening a connection to a SUT's PostgreSQL, plain or TLS, from a
//! connection string as libpq takes it. `sslmode=require`, `verify-ca` and
//! `verify-full` mean TLS, and scalebench verifies the server's certificate
//! in full for all three (there is no unverified TLS); `sslrootcert=FILE`
//! names the CA for this database, else `--tls-ca`, else the system's
//! roots. `disable`, `prefer` and no sslmode connect without TLS, as before.
//! The client certificate, when `--tls-cert`/`--tls-key` are given, is the
//! process's ([`crate::tls`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

/// A parsed connection string and the CA it names.
#[derive(Debug, Clone)]
pub struct PgTarget {
    pub config: postgres::Config,
    /// `sslrootcert=FILE`.
    pub root_cert: Option<PathBuf>,
}

impl PgTarget {
    /// TLS is asked for (sslmode require, verify-ca or verify-full).
    pub fn tls(&self) -> bool {
        self.config.get_ssl_mode() == postgres::config::SslMode::Require
    }

    /// Connect, with TLS when the string asks for it.
    pub fn connect(&self) -> Result<postgres::Client, String> {
        if !self.tls() {
            return self.config.connect(postgres::NoTls).map_err(|e| explain(&e));
        }
        let config = config_for(self.root_cert.as_ref())?;
        let client = self
            .config
            .connect(tokio_postgres_rustls::MakeRustlsConnect::new(config.clone()))
            .map_err(|e| explain(&e))?;
        self.record_negotiated(config);
        Ok(client)
    }

    /// Note what TLS this database negotiates (the result's `tls.postgres`):
    /// the driver keeps its stream to itself, so one more handshake after
    /// PostgreSQL's SSLRequest, with the same configuration, once a process.
    fn record_negotiated(&self, config: rustls::ClientConfig) {
        use std::io::{Read as _, Write as _};
        if crate::tls::negotiated().contains_key("postgres") {
            return;
        }
        let (Some(postgres::config::Host::Tcp(host)), Some(port)) =
            (self.config.get_hosts().first(), self.config.get_ports().first())
        else {
            return;
        };
        let handshake = || -> std::io::Result<()> {
            let mut tcp = std::net::TcpStream::connect((host.as_str(), *port))?;
            tcp.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
            // SSLRequest: length 8, code 80877103.
            tcp.write_all(&[0, 0, 0, 8, 4, 210, 22, 47])?;
            let mut answer = [0u8; 1];
            tcp.read_exact(&mut answer)?;
            if answer[0] != b'S' {
                return Ok(());
            }
            let name = rustls::pki_types::ServerName::try_from(host.clone()).map_err(std::io::Error::other)?;
            let mut conn = rustls::ClientConnection::new(Arc::new(config), name).map_err(std::io::Error::other)?;
            while conn.is_handshaking() {
                conn.complete_io(&mut tcp)?;
            }
            crate::tls::record("postgres", &conn);
            Ok(())
        };
        let _ = handshake();
    }
}

/// Parse `conn` (key=value words or a `postgresql://` URL).
pub fn parse(conn: &str) -> Result<PgTarget, String> {
    let mut root_cert = None;
    let mut rewritten = String::with_capacity(conn.len());
    if conn.starts_with("postgres://") || conn.starts_with("postgresql://") {
        let (base, query) = conn.split_once('?').unwrap_or((conn, ""));
        rewritten.push_str(base);
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("sslrootcert", v)) => root_cert = Some(PathBuf::from(v)),
                Some(("sslmode", "verify-ca" | "verify-full")) => kept.push("sslmode=require".to_string()),
                _ => kept.push(pair.to_string()),
            }
        }
        if !kept.is_empty() {
            rewritten.push('?');
            rewritten.push_str(&kept.join("&"));
        }
    } else {
        for word in conn.split_whitespace() {
            match word.split_once('=') {
                Some(("sslrootcert", v)) => root_cert = Some(PathBuf::from(v.trim_matches('\''))),
                Some(("sslmode", "verify-ca" | "verify-full")) => rewritten.push_str("sslmode=require "),
                _ => {
                    rewritten.push_str(word);
                    rewritten.push(' ');
                }
            }
        }
    }
    let config = postgres::Config::from_str(rewritten.trim()).map_err(|e| {
        format!("the connection string is not valid: {e}\nhint: give key=value words (host=… port=… user=… dbname=… sslmode=…) or a postgresql:// URL")
    })?;
    Ok(PgTarget { config, root_cert })
}

/// Parse and connect in one go.
pub fn connect(conn: &str) -> Result<postgres::Client, String> {
    parse(conn)?.connect()
}

/// The client configuration for a database: the process's, or one with
/// `sslrootcert` as its CA (and the process's client certificate).
fn config_for(root: Option<&PathBuf>) -> Result<rustls::ClientConfig, String> {
    static BY_ROOT: Mutex<Option<HashMap<PathBuf, Arc<rustls::ClientConfig>>>> = Mutex::new(None);
    let process = crate::tls::client().map_err(|e| e.to_string())?;
    let Some(root) = root else { return Ok((*process.config).clone()) };
    let mut map = BY_ROOT.lock().unwrap();
    let map = map.get_or_insert_with(HashMap::new);
    if let Some(c) = map.get(root) {
        return Ok((**c).clone());
    }
    let settings = crate::tls::TlsSettings { ca: Some(root.clone()), ..process.settings.clone() };
    let c = Arc::new(crate::tls::build(&settings).map_err(|e| e.to_string().replace("--tls-ca", "sslrootcert"))?);
    map.insert(root.clone(), c.clone());
    Ok((*c).clone())
}

/// A connection error in the user's words: a TLS failure explained, a
/// server that refuses plain connections named.
pub fn explain(e: &postgres::Error) -> String {
    if let Some(t) = crate::tls::explain(e, "sslmode=disable") {
        return t;
    }
    let text = pg_error(e);
    if text.contains("no pg_hba.conf entry") && text.contains("no encryption") {
        return format!("{text}\nhint: this server accepts only TLS connections: add sslmode=require (or verify-full) to the connection string, with --tls-ca for its CA");
    }
    if text.contains("server does not support TLS") || text.contains("does not support SSL") {
        return format!("{text}\nhint: the server has no TLS: drop sslmode=require, or turn ssl on at the server");
    }
    text
}

/// A PostgreSQL error as one line: the server's message with its detail,
/// hint and position when it sent them.
pub fn pg_error(e: &postgres::Error) -> String {
    use std::error::Error as _;
    if let Some(db) = e.as_db_error() {
        let mut s = format!("{}: {} (SQLSTATE {})", db.severity(), db.message(), db.code().code());
        if let Some(d) = db.detail() {
            s += &format!("; detail: {d}");
        }
        if let Some(h) = db.hint() {
            s += &format!("; hint: {h}");
        }
        if let Some(postgres::error::ErrorPosition::Original(p)) = db.position() {
            s += &format!("; at character {p}");
        }
        return s;
    }
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let t = inner.to_string();
        if !s.contains(&t) {
            s += &format!(": {t}");
        }
        src = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_modes_mean_tls_and_sslrootcert_is_taken_apart() {
        let t = parse("host=127.0.0.1 port=5 user=u sslmode=verify-full sslrootcert=/ca.pem").unwrap();
        assert!(t.tls());
        assert_eq!(t.root_cert.as_deref(), Some(std::path::Path::new("/ca.pem")));
        let t = parse("postgresql://u@127.0.0.1:5/db?sslmode=verify-ca&sslrootcert=/x.pem&connect_timeout=3").unwrap();
        assert!(t.tls());
        assert_eq!(t.config.get_connect_timeout(), Some(&std::time::Duration::from_secs(3)));
        assert!(!parse("host=127.0.0.1 sslmode=prefer").unwrap().tls());
        assert!(!parse("host=127.0.0.1").unwrap().tls());
        assert!(parse("host=127.0.0.1 sslmode=bogus").is_err());
    }
}
