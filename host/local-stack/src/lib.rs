//! The local stack: mosquitto, PostgreSQL and the reference historian as
//! child processes on loopback ports of their own (2xxxx), without Docker.
//!
//! ```no_run
//! # async fn demo() -> Result<(), local_stack::StackError> {
//! use local_stack::{LocalStack, Service, StackOptions};
//! let mut opts = StackOptions::new("/var/tmp/scalebench-run");   // ports 21883 / 25432
//! opts.historian.drop_one_in = Some(50);                          // calibration fault
//! let mut stack = LocalStack::start(opts).await?;                 // guards, start, readiness, one-reading check
//! println!("{}:{} {}", stack.mqtt_host(), stack.mqtt_port(), stack.postgres_conn());
//! let before = stack.sample_processes();                          // CPU seconds + RSS per service
//! let stats = stack.historian_stats()?;                           // {"received", "stored", "dropped", …}
//! stack.kill(Service::Postgres, libc::SIGKILL)?;                 // crash test …
//! let events = stack.supervise().await;                           // … detected and repaired (call every ~200 ms)
//! let health = stack.health();                                    // exits, restarts, OOM kills per service
//! stack.stop();                                                    // also done on Drop
//! # Ok(()) }
//! ```
//!
//! # What `start` does
//! 1. Guards ([`guard`]): every port must be in 20000-29999, not a live default
//!    port (1883, 5432, 4222, …) and free; else a [`StackError`] with a `hint:`.
//! 2. PostgreSQL: `initdb` into `run_dir/pg/data` (once; as user `postgres`
//!    when running as root, with `run_dir/pg` chowned to it), then `postgres`
//!    on 127.0.0.1:`pg_port`, unix socket in `run_dir/pg/sock`, `fsync`,
//!    `synchronous_commit` and `full_page_writes` explicitly on, trust auth;
//!    database `scalebench` created if missing.
//! 3. mosquitto with `run_dir/mosquitto/mosquitto.conf`: listener on
//!    127.0.0.1:`mqtt_port`, anonymous, persistence on,
//!    `max_queued_messages` 200,000, `max_inflight_messages` 50,000 (the
//!    historian's ack channel is sized above it), `sys_interval 1`.
//! 4. The historian binary with `--stats-file run_dir/historian/stats.json`.
//! 5. Readiness: each service must accept connections within
//!    `ready_timeout`; then one reading published with QoS 1 to
//!    `fbf/scale/_stack/ready` must appear in `point_history` within
//!    `check_timeout` (re-published every 2 s while the historian subscribes);
//!    its row is deleted afterwards. The check reading counts in the
//!    historian's stats (received/stored) like any other.
//!
//! A stack that fails to start tears down what it started.
//!
//! # Files under `run_dir`
//! `pg/data`, `pg/sock`, `mosquitto/mosquitto.conf`, `mosquitto/acl` (with
//! [`StackOptions::mosquitto_acl_file`]), `mosquitto/data/`,
//! `historian/stats.json`, `logs/{initdb,postgres,mosquitto,historian}.log`.
//! When running as root, `run_dir` gets o+x so that the `postgres` user can
//! reach `run_dir/pg`.
//!
//! # Supervision
//! [`LocalStack::supervise`] looks at every service (one `try_wait` each):
//! a leader process that exited, or a pid that changed, is recorded in the
//! service's [`ServiceHealth`] from its real exit status ("killed by signal 9
//! (SIGKILL)", "exited with status 1", "OOM-killed" when its memory cgroup
//! counted an OOM kill), and the service is started again as at start
//! (PostgreSQL after its leftover backends are killed). [`LocalStack::kill`]
//! signals a service without telling the supervisor, so crash tests see the
//! restart detected, not declared. [`LocalStack::health`] is cumulative.
//! Restarted children carry `PR_SET_PDEATHSIG` too: call `supervise` from a
//! long-lived thread, as `start`.
//!
//! # Teardown
//! [`LocalStack::stop`] and `Drop`: historian (SIGTERM), mosquitto (SIGTERM),
//! PostgreSQL (SIGINT, fast shutdown); each gets a few seconds, then its whole
//! process group is SIGKILLed. Every child runs in its own process group and
//! carries `PR_SET_PDEATHSIG=SIGKILL`, so it dies with the thread that spawned
//! it even if this process is killed: start the stack from a long-lived thread
//! (the main thread or a tokio runtime worker), not from `spawn_blocking`.
//! `stop` and `kill_historian` block (they wait for processes to exit).
//!
//! # NATS
//! [`nats::NatsCluster`] starts nats-server with JetStream, one node or a
//! loopback cluster, under the same rules (guarded 2xxxx ports, process
//! groups, teardown on Drop).
//!
//! # Source files
//! One service per file: `postgres.rs`, `mosquitto.rs` and `historian.rs`
//! (start, readiness and their own helpers), as `nats.rs` and `haystack.rs`;
//! `reading_check.rs` (the one-reading check) and `supervise.rs` (crash
//! injection, restart, health). This file holds the options, the paths and
//! the stack's start and stop.

pub mod error;
pub mod guard;
pub mod haystack;
pub mod health;
pub mod nats;
mod process;

mod historian;
mod mosquitto;
mod postgres;
mod reading_check;
mod supervise;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use error::StackError;
pub use health::ServiceHealth;
pub use historian::{find_historian_bin, HistorianOptions};
pub use process::{log_tail, pid_alive, tree_usage, ForeignProcess, ProcUsage, ProcessSample};
pub use reference_historian::Stats as HistorianStats;

use health::Tracker;
use process::ServiceProc;

/// A service of the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Service {
    Postgres,
    Mosquitto,
    Historian,
}

impl Service {
    /// Every service, in start order.
    pub const ALL: [Service; 3] = [Service::Postgres, Service::Mosquitto, Service::Historian];

    fn index(self) -> usize {
        match self {
            Service::Postgres => 0,
            Service::Mosquitto => 1,
            Service::Historian => 2,
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Service::Postgres => "postgres",
            Service::Mosquitto => "mosquitto",
            Service::Historian => "reference-historian",
        })
    }
}

/// Everything [`LocalStack::start`] needs.
#[derive(Debug, Clone)]
pub struct StackOptions {
    /// Everything goes under it (created if missing).
    pub run_dir: PathBuf,
    /// MQTT listener on 127.0.0.1 (default 21883).
    pub mqtt_port: u16,
    /// PostgreSQL on 127.0.0.1 (default 25432).
    pub pg_port: u16,
    pub historian: HistorianOptions,
    /// mosquitto binary; `None` = PATH, then /usr/sbin/mosquitto.
    pub mosquitto_bin: Option<PathBuf>,
    /// Directory holding initdb and postgres; `None` = newest /usr/lib/postgresql/*/bin, then PATH.
    pub pg_bin_dir: Option<PathBuf>,
    /// mosquitto `max_queued_messages` (per client; default 200,000).
    pub max_queued_messages: u32,
    /// mosquitto `max_inflight_messages` (default 50,000, at most 65,535; 0 = unlimited,
    /// which the historian's flow control does not cover, see its docs).
    pub max_inflight_messages: u32,
    /// mosquitto `sys_interval` seconds ($SYS counters; default 1).
    pub sys_interval_s: u32,
    /// Bound on each service's wait to accept connections (default 30 s).
    pub ready_timeout: Duration,
    /// Bound on the one-reading check (default 15 s, plus the historian's delay).
    pub check_timeout: Duration,
    /// Run the one-reading check (default true).
    pub reading_check: bool,
    /// A mosquitto ACL file (`topic …` / `user …` lines). Copied to
    /// `run_dir/mosquitto/acl` at start and named by `acl_file` in the
    /// generated mosquitto.conf. Anonymous clients (the one-reading check, the
    /// historian) are bound by the lines before any `user` line, so they need
    /// `topic readwrite fbf/#`; add `topic read $SYS/#` to keep the broker's
    /// counters readable. `None` (default) = no ACL, everything allowed.
    pub mosquitto_acl_file: Option<PathBuf>,
    /// Extra mosquitto listeners with TLS, beside the plain one the
    /// historian and the one-reading check use (default none).
    pub mqtt_tls_listeners: Vec<TlsListener>,
    /// The whole stack TLS-only (default off): mosquitto's listener and
    /// PostgreSQL take only TLS with this server certificate, and the
    /// historian and the stack's own checks connect over TLS, trusting `ca`.
    pub tls: Option<StackTls>,
}

/// The certificates of a TLS-only stack (PEM files).
#[derive(Debug, Clone)]
pub struct StackTls {
    /// What clients trust.
    pub ca: PathBuf,
    /// The servers' certificate (for 127.0.0.1) and its key.
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A mosquitto listener on 127.0.0.1 that speaks only TLS.
#[derive(Debug, Clone)]
pub struct TlsListener {
    pub port: u16,
    /// The server's certificate chain and key (PEM).
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Clients must present a certificate signed by this CA (mutual TLS);
    /// None: no client certificate asked for.
    pub client_ca: Option<PathBuf>,
}

impl StackOptions {
    /// Defaults: mqtt 21883, postgres 25432.
    pub fn new(run_dir: impl Into<PathBuf>) -> Self {
        StackOptions {
            run_dir: run_dir.into(),
            mqtt_port: 21883,
            pg_port: 25432,
            historian: HistorianOptions::default(),
            mosquitto_bin: None,
            pg_bin_dir: None,
            max_queued_messages: 200_000,
            max_inflight_messages: 50_000,
            sys_interval_s: 1,
            ready_timeout: Duration::from_secs(30),
            check_timeout: Duration::from_secs(15),
            reading_check: true,
            mosquitto_acl_file: None,
            mqtt_tls_listeners: Vec::new(),
            tls: None,
        }
    }

    /// mqtt = `base`, postgres = `base + 1` (`base + 2` is kept for nats).
    pub fn with_base_port(mut self, base: u16) -> Self {
        self.mqtt_port = base;
        self.pg_port = base.saturating_add(1);
        self
    }

    /// Free 2xxxx ports picked at random; for tests and parallel stacks.
    pub fn for_tests(run_dir: impl Into<PathBuf>) -> Result<Self, StackError> {
        let ports = guard::pick_free_ports(2)?;
        let mut o = StackOptions::new(run_dir);
        o.mqtt_port = ports[0];
        o.pg_port = ports[1];
        Ok(o)
    }

    fn validate(&self) -> Result<(), StackError> {
        if self.historian.drop_one_in == Some(0) || self.historian.drop_one_in == Some(1) {
            return Err(StackError::InvalidOptions {
                problem: "drop_one_in must be at least 2 (1 would drop every reading, including the readiness check)"
                    .into(),
                hint: "use --drop-one-in 2 or more, or leave it off".into(),
            });
        }
        if self.max_inflight_messages > 65_535 {
            return Err(StackError::InvalidOptions {
                problem: format!(
                    "max_inflight_messages {} is above mosquitto's limit of 65535",
                    self.max_inflight_messages
                ),
                hint: "use 65535 or less (50000 is the default)".into(),
            });
        }
        if self.run_dir.as_os_str().is_empty() {
            return Err(StackError::InvalidOptions {
                problem: "run_dir is empty".into(),
                hint: "give the stack a directory of its own, e.g. under /var/tmp".into(),
            });
        }
        Ok(())
    }
}

/// Paths under the run directory.
#[derive(Debug, Clone)]
pub struct StackPaths {
    pub run_dir: PathBuf,
    pub pg_dir: PathBuf,
    pub pg_data: PathBuf,
    pub pg_sock: PathBuf,
    pub mosquitto_dir: PathBuf,
    pub mosquitto_conf: PathBuf,
    /// The stack's own copy of [`StackOptions::mosquitto_acl_file`].
    pub mosquitto_acl: PathBuf,
    pub stats_file: PathBuf,
    pub logs: PathBuf,
}

impl StackPaths {
    fn new(run_dir: &Path) -> Self {
        StackPaths {
            run_dir: run_dir.to_path_buf(),
            pg_dir: run_dir.join("pg"),
            pg_data: run_dir.join("pg/data"),
            pg_sock: run_dir.join("pg/sock"),
            mosquitto_dir: run_dir.join("mosquitto"),
            mosquitto_conf: run_dir.join("mosquitto/mosquitto.conf"),
            mosquitto_acl: run_dir.join("mosquitto/acl"),
            stats_file: run_dir.join("historian/stats.json"),
            logs: run_dir.join("logs"),
        }
    }

    pub fn log(&self, service: Service) -> PathBuf {
        self.logs.join(format!("{service}.log"))
    }
}

/// A running local stack. Stops everything on [`stop`](Self::stop) and on Drop.
pub struct LocalStack {
    opts: StackOptions,
    paths: StackPaths,
    historian_bin: PathBuf,
    postgres: Option<ServiceProc>,
    mosquitto: Option<ServiceProc>,
    historian: Option<ServiceProc>,
    /// Supervision records, indexed by [`Service::index`].
    trackers: [Tracker; 3],
}

const HOST: &str = "127.0.0.1";

impl LocalStack {
    /// Guard, start every service, wait for readiness and run the
    /// one-reading check. On error, whatever was started is stopped.
    pub async fn start(mut opts: StackOptions) -> Result<LocalStack, StackError> {
        opts.validate()?;
        // PostgreSQL resolves a relative socket directory from its own data
        // directory: every path handed to a service is absolute.
        opts.run_dir = std::path::absolute(&opts.run_dir).map_err(|e| StackError::InvalidOptions {
            problem: format!("cannot resolve the run directory {}: {e}", opts.run_dir.display()),
            hint: "give --run-dir as an absolute path".into(),
        })?;
        guard::check_ports(&[(Service::Mosquitto, opts.mqtt_port), (Service::Postgres, opts.pg_port)])?;
        let historian_bin = match &opts.historian.bin {
            Some(p) if p.is_file() => p.clone(),
            Some(p) => {
                return Err(StackError::NotFound {
                    what: "reference-historian binary".into(),
                    looked: p.display().to_string(),
                    hint: "build it: cargo build --release -p reference-historian".into(),
                })
            }
            None => find_historian_bin()?,
        };
        let paths = StackPaths::new(&opts.run_dir);
        let mut stack = LocalStack {
            opts,
            paths,
            historian_bin,
            postgres: None,
            mosquitto: None,
            historian: None,
            trackers: Service::ALL.map(|s| Tracker::new(s.to_string())),
        };
        // On any error `stack` is dropped here, which stops what was started.
        stack.start_all().await?;
        Ok(stack)
    }

    async fn start_all(&mut self) -> Result<(), StackError> {
        for d in [
            &self.paths.run_dir,
            &self.paths.logs,
            &self.paths.mosquitto_dir.join("data"),
            &self.paths.run_dir.join("historian"),
        ] {
            std::fs::create_dir_all(d).map_err(|e| {
                StackError::io(format!("cannot create {}", d.display()), e, "choose a writable run directory")
            })?;
        }
        if let Some(acl) = &self.opts.mosquitto_acl_file {
            // A copy of our own: the stack never depends on the caller's file afterwards.
            std::fs::copy(acl, &self.paths.mosquitto_acl).map_err(|e| {
                StackError::io(
                    format!("cannot copy the mosquitto ACL file {} into the run directory", acl.display()),
                    e,
                    "check that the ACL file exists and is readable",
                )
            })?;
        }
        for service in Service::ALL {
            self.start_service(service).await?;
            self.mark_started(service);
        }
        if self.opts.reading_check {
            self.reading_check().await?;
        }
        Ok(())
    }

    /// Wait until `probe` succeeds, the service exits, or `ready_timeout`.
    async fn wait_ready<T, F, Fut>(&mut self, service: Service, port: u16, mut probe: F) -> Result<T, StackError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, String>>,
    {
        let deadline = Instant::now() + self.opts.ready_timeout;
        let mut last_error;
        loop {
            if let Some(e) = self.proc_mut(service).and_then(|p| p.exited_error("starting")) {
                return Err(e);
            }
            match tokio::time::timeout(Duration::from_secs(3), probe()).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => last_error = e,
                Err(_) => last_error = "probe timed out".into(),
            }
            if Instant::now() > deadline {
                let log = self.paths.log(service);
                return Err(StackError::NotReady {
                    service,
                    port,
                    waited: self.opts.ready_timeout,
                    last_error,
                    tail: log_tail(&log, 20),
                    log,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn proc_mut(&mut self, service: Service) -> Option<&mut ServiceProc> {
        match service {
            Service::Postgres => self.postgres.as_mut(),
            Service::Mosquitto => self.mosquitto.as_mut(),
            Service::Historian => self.historian.as_mut(),
        }
    }

    fn proc_ref(&self, service: Service) -> Option<&ServiceProc> {
        match service {
            Service::Postgres => self.postgres.as_ref(),
            Service::Mosquitto => self.mosquitto.as_ref(),
            Service::Historian => self.historian.as_ref(),
        }
    }

    // ---- accessors --------------------------------------------------------

    pub fn mqtt_host(&self) -> &str {
        HOST
    }

    pub fn mqtt_port(&self) -> u16 {
        self.opts.mqtt_port
    }

    pub fn pg_port(&self) -> u16 {
        self.opts.pg_port
    }

    /// tokio-postgres connection string of database `scalebench`
    /// (`sslmode=require` on a TLS-only stack: verify with [`Self::tls_ca`]).
    pub fn postgres_conn(&self) -> String {
        format!("host={HOST} port={} user=postgres dbname=scalebench{}", self.opts.pg_port, self.sslmode())
    }

    /// The CA a client of this stack trusts; None: the stack is plain.
    pub fn tls_ca(&self) -> Option<&Path> {
        self.opts.tls.as_ref().map(|t| t.ca.as_path())
    }

    fn sslmode(&self) -> &'static str {
        if self.opts.tls.is_some() {
            " sslmode=require"
        } else {
            ""
        }
    }

    /// The client TLS configuration of the stack's own connections.
    fn client_tls(&self) -> Result<Option<std::sync::Arc<reference_historian::tls::ClientConfig>>, StackError> {
        self.tls_ca()
            .map(|ca| {
                reference_historian::tls::client_config(ca).map_err(|problem| StackError::InvalidOptions {
                    problem,
                    hint: "give the stack a readable PEM CA file".into(),
                })
            })
            .transpose()
    }

    pub fn options(&self) -> &StackOptions {
        &self.opts
    }

    pub fn paths(&self) -> &StackPaths {
        &self.paths
    }

    /// Pid of a service's leader process, if it is running.
    pub fn pid(&self, service: Service) -> Option<u32> {
        self.proc_ref(service).map(|p| p.pid())
    }

    /// (service, pid) of every started service.
    pub fn pids(&self) -> Vec<(Service, u32)> {
        [Service::Postgres, Service::Mosquitto, Service::Historian]
            .into_iter()
            .filter_map(|s| self.pid(s).map(|p| (s, p)))
            .collect()
    }

    /// Pids of every live process of the stack (including PostgreSQL backends).
    pub fn all_pids(&self) -> Vec<u32> {
        self.pids().into_iter().flat_map(|(_, leader)| process::service_pids(leader)).collect()
    }

    /// CPU seconds and RSS of every running service (its whole process group).
    pub fn sample_processes(&self) -> Vec<ProcessSample> {
        self.pids().into_iter().map(|(s, pid)| process::sample_group(s, pid)).collect()
    }

    /// Is this service's leader process running?
    pub fn is_running(&mut self, service: Service) -> bool {
        self.proc_mut(service).is_some_and(|p| p.exit_status().is_none())
    }

    /// Start one service (its process and readiness), as at start.
    async fn start_service(&mut self, service: Service) -> Result<(), StackError> {
        match service {
            Service::Postgres => self.start_postgres().await,
            Service::Mosquitto => self.start_mosquitto().await,
            Service::Historian => self.spawn_historian().await,
        }
    }

    /// Record that `service` is up; returns its pid.
    fn mark_started(&mut self, service: Service) -> Option<u32> {
        let pid = self.proc_ref(service).map(|p| p.pid())?;
        self.trackers[service.index()].started(pid);
        Some(pid)
    }

    /// Stop everything: historian, mosquitto, PostgreSQL (in that order).
    /// Blocks until the processes are gone (a few seconds at most each).
    pub fn stop(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        if let Some(mut h) = self.historian.take() {
            h.stop(libc::SIGTERM, Duration::from_secs(5));
        }
        if let Some(mut m) = self.mosquitto.take() {
            m.stop(libc::SIGTERM, Duration::from_secs(5));
        }
        if let Some(mut p) = self.postgres.take() {
            // SIGINT = fast shutdown (SIGTERM would wait for clients).
            p.stop(libc::SIGINT, Duration::from_secs(10));
        }
    }
}

impl Drop for LocalStack {
    fn drop(&mut self) {
        self.stop_all();
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
}
