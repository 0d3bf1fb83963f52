//! The stack's PostgreSQL: `initdb` once, then `postgres` on its loopback
//! port, durable (fsync, synchronous_commit, full_page_writes on), trust
//! auth, database `scalebench` created if missing; as user `postgres` when
//! running as root.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::{self, RunAs};
use crate::{is_root, log_tail, which, LocalStack, Service, StackError, HOST};

impl LocalStack {
    pub(crate) async fn start_postgres(&mut self) -> Result<(), StackError> {
        let bin = pg_bin_dir(self.opts.pg_bin_dir.as_deref())?;
        let run_as = postgres_user()?;
        let p = self.paths.clone();
        if let Some(r) = run_as {
            make_traversable(&p.run_dir)?;
            for d in [&p.pg_dir, &p.pg_sock] {
                std::fs::create_dir_all(d).map_err(|e| {
                    StackError::io(format!("cannot create {}", d.display()), e, "choose a writable run directory")
                })?;
                std::os::unix::fs::chown(d, Some(r.uid), Some(r.gid)).map_err(|e| {
                    StackError::io(
                        format!("cannot chown {} to postgres", d.display()),
                        e,
                        "run as root or as a user that may run postgres",
                    )
                })?;
            }
        } else {
            std::fs::create_dir_all(&p.pg_sock).map_err(|e| {
                StackError::io(format!("cannot create {}", p.pg_sock.display()), e, "choose a writable run directory")
            })?;
        }

        if !p.pg_data.join("PG_VERSION").exists() {
            let log = p.logs.join("initdb.log");
            let mut cmd = Command::new(bin.join("initdb"));
            cmd.arg("-D").arg(&p.pg_data).args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"]);
            let mut initdb = process::spawn(Service::Postgres, cmd, &log, run_as)?;
            let deadline = Instant::now() + Duration::from_secs(120);
            let status = loop {
                if let Some(s) = initdb.child.try_wait().ok().flatten() {
                    break s;
                }
                if Instant::now() > deadline {
                    initdb.stop(libc::SIGKILL, Duration::from_secs(1));
                    return Err(StackError::Exited {
                        service: Service::Postgres,
                        phase: "running initdb (killed after 120 s)".into(),
                        status: "timeout".into(),
                        log: log.clone(),
                        tail: log_tail(&log, 20),
                    });
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            if !status.success() {
                return Err(StackError::Exited {
                    service: Service::Postgres,
                    phase: "running initdb".into(),
                    status: status.to_string(),
                    log: log.clone(),
                    tail: log_tail(&log, 20),
                });
            }
        }

        let log = p.log(Service::Postgres);
        let mut cmd = Command::new(bin.join("postgres"));
        cmd.arg("-D")
            .arg(&p.pg_data)
            .arg("-p")
            .arg(self.opts.pg_port.to_string())
            .args(["-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", p.pg_sock.display()))
            .args(["-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "full_page_writes=on"])
            .args(["-c", "max_connections=50", "-c", "logging_collector=off"]);
        if let Some(t) = &self.opts.tls {
            for (flag, value) in tls_settings(t, &p, run_as)? {
                cmd.arg("-c").arg(format!("{flag}={value}"));
            }
        }
        self.postgres = Some(process::spawn(Service::Postgres, cmd, &log, run_as)?);

        // Ready = a real connection to the `postgres` database works.
        let admin = format!(
            "host={HOST} port={} user=postgres dbname=postgres connect_timeout=2{}",
            self.opts.pg_port,
            self.sslmode()
        );
        let tls = self.client_tls()?;
        let client = self
            .wait_ready(Service::Postgres, self.opts.pg_port, || async {
                let c = reference_historian::tls::pg_connect(&admin, tls.as_ref(), |_| {})
                    .await
                    .map_err(|e| e.to_string())?;
                c.simple_query("SELECT 1").await.map_err(|e| e.to_string())?;
                Ok(c)
            })
            .await?;
        let exists = client
            .query_opt("SELECT 1 FROM pg_database WHERE datname = 'scalebench'", &[])
            .await
            .map_err(|e| pg_err("look up database scalebench", e))?
            .is_some();
        if !exists {
            client
                .batch_execute("CREATE DATABASE scalebench")
                .await
                .map_err(|e| pg_err("create database scalebench", e))?;
        }
        Ok(())
    }

    pub(crate) async fn connect_pg(&self) -> Result<tokio_postgres::Client, StackError> {
        reference_historian::tls::pg_connect(&self.postgres_conn(), self.client_tls()?.as_ref(), |_| {})
            .await
            .map_err(|e| pg_err("connect to database scalebench", e))
    }
}

/// PostgreSQL settings of a TLS-only stack: `ssl=on` with the stack's
/// certificate, and a pg_hba of our own that takes TCP connections only over
/// TLS (`hostssl`; the unix socket stays for local administration).
/// PostgreSQL wants its key owned by the user it runs as, mode 0600: the
/// certificate and key are copied into `pg/` for it.
fn tls_settings(
    t: &crate::StackTls,
    p: &crate::StackPaths,
    run_as: Option<RunAs>,
) -> Result<Vec<(&'static str, String)>, StackError> {
    use std::os::unix::fs::PermissionsExt as _;
    let io = |what: String, e: std::io::Error| StackError::io(what, e, "choose a writable run directory");
    let cert = p.pg_dir.join("server.pem");
    let key = p.pg_dir.join("server.key");
    let hba = p.pg_dir.join("pg_hba_tls.conf");
    std::fs::copy(&t.cert, &cert)
        .map_err(|e| io(format!("cannot copy {} to {}", t.cert.display(), cert.display()), e))?;
    std::fs::copy(&t.key, &key).map_err(|e| io(format!("cannot copy {} to {}", t.key.display(), key.display()), e))?;
    std::fs::write(&hba, "# written by local-stack: a TLS-only stack\nlocal all all trust\nhostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\n")
        .map_err(|e| io(format!("cannot write {}", hba.display()), e))?;
    for f in [&cert, &key, &hba] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| io(format!("cannot set the mode of {}", f.display()), e))?;
        if let Some(r) = run_as {
            std::os::unix::fs::chown(f, Some(r.uid), Some(r.gid))
                .map_err(|e| io(format!("cannot chown {} to postgres", f.display()), e))?;
        }
    }
    Ok(vec![
        ("ssl", "on".into()),
        ("ssl_cert_file", cert.display().to_string()),
        ("ssl_key_file", key.display().to_string()),
        ("hba_file", hba.display().to_string()),
    ])
}

pub(crate) fn pg_err(context: &str, source: tokio_postgres::Error) -> StackError {
    StackError::Postgres {
        context: context.into(),
        source,
        hint: "read the PostgreSQL log under run_dir/logs/postgres.log".into(),
    }
}

/// When root: the `postgres` user (initdb and postgres refuse to run as root).
fn postgres_user() -> Result<Option<RunAs>, StackError> {
    if !is_root() {
        return Ok(None);
    }
    let name = std::ffi::CString::new("postgres").expect("static name");
    // SAFETY: getpwnam returns a pointer into static storage or null; read at once.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return Err(StackError::NotFound {
            what: "user `postgres`".into(),
            looked: "the password database".into(),
            hint: "PostgreSQL refuses to run as root; install the postgresql package (it creates the user) or run as a non-root user".into(),
        });
    }
    // SAFETY: non-null pointer from getpwnam.
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    Ok(Some(RunAs { uid, gid }))
}

/// Let other users (postgres) traverse `dir` and check its ancestors allow it.
fn make_traversable(dir: &Path) -> Result<(), StackError> {
    use std::os::unix::fs::PermissionsExt;
    let hint = "put the run directory under /var/tmp or /tmp (paths the postgres user can reach)";
    let meta = std::fs::metadata(dir).map_err(|e| StackError::io(format!("cannot stat {}", dir.display()), e, hint))?;
    let mode = meta.permissions().mode();
    if mode & 0o001 == 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o011))
            .map_err(|e| StackError::io(format!("cannot chmod o+x {}", dir.display()), e, hint))?;
    }
    let abs =
        std::fs::canonicalize(dir).map_err(|e| StackError::io(format!("cannot resolve {}", dir.display()), e, hint))?;
    for anc in abs.ancestors().skip(1) {
        if let Ok(m) = std::fs::metadata(anc) {
            if m.permissions().mode() & 0o001 == 0 {
                return Err(StackError::InvalidOptions {
                    problem: format!(
                        "the postgres user cannot reach {} ({} is not searchable by others)",
                        dir.display(),
                        anc.display()
                    ),
                    hint: hint.into(),
                });
            }
        }
    }
    Ok(())
}

fn pg_bin_dir(given: Option<&Path>) -> Result<PathBuf, StackError> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    match given {
        Some(p) => candidates.push(p.to_path_buf()),
        None => {
            let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
                .into_iter()
                .flatten()
                .filter_map(|e| {
                    let e = e.ok()?;
                    let v = e.file_name().to_str()?.parse::<u32>().ok()?;
                    Some((v, e.path().join("bin")))
                })
                .collect();
            versions.sort();
            candidates.extend(versions.into_iter().rev().map(|(_, p)| p));
            if let Some(p) = which("initdb").and_then(|p| p.parent().map(Path::to_path_buf)) {
                candidates.push(p);
            }
        }
    }
    candidates.iter().find(|d| d.join("initdb").is_file() && d.join("postgres").is_file()).cloned().ok_or_else(|| {
        StackError::NotFound {
            what: "PostgreSQL server binaries (initdb, postgres)".into(),
            looked: if candidates.is_empty() {
                "/usr/lib/postgresql/*/bin, PATH".into()
            } else {
                candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            },
            hint: "install them: apt-get install postgresql (server binaries land in /usr/lib/postgresql/<v>/bin)"
                .into(),
        }
    })
}
