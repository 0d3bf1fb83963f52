//! `--stack docker --tls`: the Docker stack TLS-only, as `--stack local
//! --tls` makes the local one. The run's throwaway CA issues one server
//! certificate for every service name of the project (what the services
//! call each other inside their network) and for 127.0.0.1 (what
//! scalebench calls them through the published ports). The files reach each
//! container through the engine's archive upload before it starts: no bind
//! mount of a host path, no image built for TLS. Then, by service kind:
//! mosquitto's one listener speaks only TLS; PostgreSQL runs `ssl=on` with a
//! `hostssl`-only pg_hba; nats-server's client port speaks only TLS; the
//! Haystack test server speaks HTTPS; the reference historian trusts the CA
//! and connects to both of its services over TLS. A service scalebench does
//! not know how to make TLS-only is refused before anything starts.

use super::compose::{Project, ServiceSpec};
use crate::throwaway_ca::ThrowawayPki;

/// A project `--tls` cannot make TLS-only: what and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{problem}\nhint: {hint}")]
pub struct Refused {
    pub problem: String,
    pub hint: String,
}

/// Where the certificates are in every container.
const DIR: &str = "/scale-tls";
/// PostgreSQL's copy: its image's entrypoint hands /run/postgresql to the
/// postgres user, who must own a key of mode 0600.
const PG_DIR: &str = "/run/postgresql/scale-tls";
/// The broker's configuration: the image's own, its one listener TLS-only.
const MOSQUITTO_CONF: &str = include_str!("../../../../compose/images/mosquitto/mosquitto.conf");

/// What makes a project's containers TLS-only: the files each is given.
#[derive(Debug, Clone)]
pub struct DockerTls {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

/// What one service is, as far as TLS goes.
enum Role {
    Broker,
    Postgres,
    Nats,
    HaystackTestServer,
    Historian,
}

fn role(s: &ServiceSpec) -> Option<Role> {
    match s.labels.get("scale.kind").map(String::as_str) {
        Some("mqtt") => Some(Role::Broker),
        Some("postgres") => Some(Role::Postgres),
        Some("nats") => Some(Role::Nats),
        Some("http") if s.image.contains("haystack") => Some(Role::HaystackTestServer),
        None if s.image.contains("historian") => Some(Role::Historian),
        _ => None,
    }
}

impl DockerTls {
    /// Issue the project's server certificate, and make every service
    /// TLS-only (its command), or refuse the project naming the service
    /// that cannot be.
    pub fn apply(pki: &ThrowawayPki, project: &mut Project) -> Result<DockerTls, Refused> {
        if let Some(s) = project.services.iter().find(|s| role(s).is_none()) {
            return Err(Refused {
                problem: format!(
                    "--tls: scalebench does not know how to make service `{}` (image {}) of {} TLS-only",
                    s.name,
                    s.image,
                    project.file.display()
                ),
                hint: "--stack docker --tls makes the built-in compose files' services TLS-only (mosquitto, PostgreSQL, nats-server, the Haystack test server, the reference historian); run your own TLS set-up and point --stack external at it".into(),
            });
        }
        let names: Vec<String> = project.services.iter().map(|s| s.name.clone()).collect();
        let server =
            pki.server_for(&names).map_err(|e| Refused { problem: e.to_string(), hint: "report this".into() })?;
        for s in &mut project.services {
            let role = role(s).expect("checked above");
            let args = s.command.get_or_insert_with(Vec::new);
            match role {
                Role::Broker => *args = vec!["mosquitto".into(), "-c".into(), format!("{DIR}/mosquitto.conf")],
                Role::Postgres => {
                    for setting in [
                        "ssl=on".to_string(),
                        format!("ssl_cert_file={PG_DIR}/server.pem"),
                        format!("ssl_key_file={PG_DIR}/server.key"),
                        format!("hba_file={PG_DIR}/pg_hba.conf"),
                    ] {
                        args.extend(["-c".to_string(), setting]);
                    }
                }
                Role::Nats => args.extend(
                    ["--tls", "--tlscert", &format!("{DIR}/server.pem"), "--tlskey", &format!("{DIR}/server.key")]
                        .map(String::from),
                ),
                Role::HaystackTestServer => args.extend(
                    ["--tls-cert", &format!("{DIR}/server.pem"), "--tls-key", &format!("{DIR}/server.key")]
                        .map(String::from),
                ),
                Role::Historian => {
                    // Its PostgreSQL connection string asks for TLS too.
                    if let Some(i) = args.iter().position(|a| a == "--pg") {
                        if let Some(conn) = args.get_mut(i + 1) {
                            conn.push_str(" sslmode=require");
                        }
                    }
                    args.extend(["--tls-ca".to_string(), format!("{DIR}/ca.pem")]);
                }
            }
        }
        Ok(DockerTls { ca_pem: pki.ca_pem(), cert_pem: server.cert_pem, key_pem: server.key_pem })
    }

    /// The files `service` is given, as a tar archive to unpack at `/`.
    pub fn archive(&self, service: &ServiceSpec) -> Vec<u8> {
        let mut files: Vec<(String, &[u8], u32)> = vec![
            (format!("{DIR}/ca.pem"), self.ca_pem.as_bytes(), 0o644),
            (format!("{DIR}/server.pem"), self.cert_pem.as_bytes(), 0o644),
            (format!("{DIR}/server.key"), self.key_pem.as_bytes(), 0o600),
        ];
        let conf;
        let hba = "# written by scalebench: a TLS-only stack\nlocal all all trust\nhostssl all all 0.0.0.0/0 trust\nhostssl all all ::/0 trust\n";
        match role(service) {
            Some(Role::Broker) => {
                conf = broker_conf(&format!("{DIR}/server.pem"), &format!("{DIR}/server.key"));
                files.push((format!("{DIR}/mosquitto.conf"), conf.as_bytes(), 0o644));
            }
            Some(Role::Postgres) => {
                files.push((format!("{PG_DIR}/server.pem"), self.cert_pem.as_bytes(), 0o600));
                files.push((format!("{PG_DIR}/server.key"), self.key_pem.as_bytes(), 0o600));
                files.push((format!("{PG_DIR}/pg_hba.conf"), hba.as_bytes(), 0o600));
            }
            _ => {}
        }
        tar_of(&files)
    }
}

/// The image's broker configuration with its one listener TLS-only.
fn broker_conf(cert: &str, key: &str) -> String {
    format!("{MOSQUITTO_CONF}\n# --tls: the one listener above speaks only TLS\ncertfile {cert}\nkeyfile {key}\n")
}

/// A tar archive of `files` (path without the leading `/`, owned by root),
/// with their directories.
fn tar_of(files: &[(String, &[u8], u32)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut dirs: Vec<String> = Vec::new();
    for (path, _, _) in files {
        // Every ancestor directory, parents first.
        let parents: Vec<&std::path::Path> =
            std::path::Path::new(path.trim_start_matches('/')).ancestors().skip(1).collect();
        for d in parents.into_iter().rev().filter(|d| !d.as_os_str().is_empty()) {
            let d = d.display().to_string();
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
    }
    for d in &dirs {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        h.set_cksum();
        b.append_data(&mut h, format!("{d}/"), std::io::empty()).expect("tar into memory");
    }
    for (path, data, mode) in files {
        let mut h = tar::Header::new_gnu();
        h.set_mode(*mode);
        h.set_size(data.len() as u64);
        h.set_cksum();
        b.append_data(&mut h, path.trim_start_matches('/'), *data).expect("tar into memory");
    }
    b.into_inner().expect("tar into memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(file: &str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        let env_file = dir.path().join("env");
        let compose = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../compose").join(file);
        super::super::compose::load(&compose, &Default::default(), &env_file, None, &Default::default(), None, 2)
            .unwrap()
    }

    fn pki() -> (tempfile::TempDir, ThrowawayPki) {
        let dir = tempfile::tempdir().unwrap();
        let pki = crate::throwaway_ca::make(dir.path()).unwrap();
        (dir, pki)
    }

    #[test]
    fn every_service_of_the_historian_stack_is_made_tls_only() {
        let (_d, pki) = pki();
        let mut p = project("historian.yml");
        let tls = DockerTls::apply(&pki, &mut p).unwrap();
        let svc = |n: &str| p.services.iter().find(|s| s.name == n).unwrap().clone();
        assert_eq!(svc("mosquitto").command.unwrap(), ["mosquitto", "-c", "/scale-tls/mosquitto.conf"]);
        let pg = svc("postgres").command.unwrap().join(" ");
        assert!(pg.contains("-c ssl=on") && pg.contains("hba_file=/run/postgresql/scale-tls/pg_hba.conf"), "{pg}");
        let hist = svc("historian").command.unwrap();
        let conn = &hist[hist.iter().position(|a| a == "--pg").unwrap() + 1];
        assert!(conn.ends_with("sslmode=require"), "{conn}");
        assert!(hist.windows(2).any(|w| w == ["--tls-ca", "/scale-tls/ca.pem"]), "{hist:?}");
        // The broker's files: its configuration's one listener is TLS-only.
        let mut a = tar::Archive::new(std::io::Cursor::new(tls.archive(&svc("mosquitto"))));
        let mut conf = String::new();
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            if e.path().unwrap().ends_with("mosquitto.conf") {
                std::io::Read::read_to_string(&mut e, &mut conf).unwrap();
            }
        }
        assert_eq!(conf.lines().filter(|l| l.starts_with("listener ")).count(), 1, "{conf}");
        assert!(conf.contains("certfile /scale-tls/server.pem"), "{conf}");
        // PostgreSQL's key is its own copy, mode 0600; its pg_hba takes TCP only over TLS.
        let mut a = tar::Archive::new(std::io::Cursor::new(tls.archive(&svc("postgres"))));
        let mut seen = Vec::new();
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            let path = e.path().unwrap().display().to_string();
            if path == "run/postgresql/scale-tls/server.key" {
                assert_eq!(e.header().mode().unwrap(), 0o600);
            }
            if path.ends_with("pg_hba.conf") {
                let mut hba = String::new();
                std::io::Read::read_to_string(&mut e, &mut hba).unwrap();
                assert!(hba.lines().filter(|l| l.starts_with("host")).all(|l| l.starts_with("hostssl")), "{hba}");
            }
            seen.push(path);
        }
        assert!(seen.contains(&"run/postgresql/scale-tls/server.key".to_string()), "{seen:?}");
    }

    #[test]
    fn the_server_certificate_names_every_service_and_the_published_address() {
        use rustls::client::danger::ServerCertVerifier;
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
        let (_d, pki) = pki();
        let mut p = project("nats-3.yml");
        let tls = DockerTls::apply(&pki, &mut p).unwrap();
        let cert = CertificateDer::from_pem_slice(tls.cert_pem.as_bytes()).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(pki.ca_pem().as_bytes()).unwrap()).unwrap();
        let v = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            std::sync::Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        for name in ["nats-0", "nats-1", "nats-2", "127.0.0.1", "localhost"] {
            let n = ServerName::try_from(name).unwrap();
            assert!(v.verify_server_cert(&cert, &[], &n, &[], UnixTime::now()).is_ok(), "{name}");
        }
        let n = ServerName::try_from("postgres").unwrap();
        assert!(v.verify_server_cert(&cert, &[], &n, &[], UnixTime::now()).is_err());
        let cmd = p.services[0].command.clone().unwrap().join(" ");
        assert!(cmd.ends_with("--tls --tlscert /scale-tls/server.pem --tlskey /scale-tls/server.key"), "{cmd}");
    }

    #[test]
    fn a_service_scalebench_cannot_make_tls_only_is_refused_by_name() {
        let (_d, pki) = pki();
        // Haxall's own image serves HTTP as it was built; scalebench cannot turn it TLS-only.
        let mut p = project("haystack.yml");
        p.services[0].image = "scale-haxall:bookworm".into();
        let before = p.services[0].command.clone();
        let e = DockerTls::apply(&pki, &mut p).unwrap_err().to_string();
        assert!(e.contains("service `api` (image scale-haxall:bookworm)") && e.contains("--stack external"), "{e}");
        assert_eq!(p.services[0].command, before, "nothing is changed on a refusal");
    }
}
