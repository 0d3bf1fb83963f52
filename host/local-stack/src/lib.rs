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

pub mod error;
pub mod guard;
pub mod haystack;
pub mod health;
pub mod nats;
mod process;

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub use error::StackError;
pub use health::ServiceHealth;
pub use process::{log_tail, pid_alive, ForeignProcess, ProcessSample};
pub use reference_historian::Stats as HistorianStats;

use health::Tracker;
use process::{RunAs, ServiceProc};

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

/// How the historian runs.
#[derive(Debug, Clone)]
pub struct HistorianOptions {
    /// Binary; `None` = [`find_historian_bin`].
    pub bin: Option<PathBuf>,
    /// `--drop-one-in N` (N ≥ 2; N = 1 would drop the readiness check too).
    pub drop_one_in: Option<u64>,
    /// `--delay-ms D`.
    pub delay_ms: Option<u64>,
    /// MQTT client id of its persistent session.
    pub client_id: String,
    /// Further arguments, appended as given (e.g. `--batch-max 500`).
    pub extra_args: Vec<String>,
    /// Arguments put before all others: lets a multi-call binary run the
    /// historian (`scalebench reference-historian --mqtt-host ...`).
    pub leading_args: Vec<String>,
    /// `--ack-before-commit`: the UNSAFE control mode (acknowledge on
    /// arrival, one write attempt per batch); a crash of the historian or of
    /// PostgreSQL then loses acknowledged readings. Default false.
    pub ack_before_commit: bool,
    /// `--session-setting NAME=VALUE` each: `SET NAME = 'VALUE'` on the
    /// historian's ingest connection after every connect (e.g.
    /// `("synchronous_commit", "off")` for a non-durable ingest path on a
    /// durable server). Shows in table `ingest_session`.
    pub session_settings: Vec<(String, String)>,
}

impl Default for HistorianOptions {
    fn default() -> Self {
        HistorianOptions {
            bin: None,
            drop_one_in: None,
            delay_ms: None,
            client_id: "reference-historian".into(),
            extra_args: Vec::new(),
            leading_args: Vec::new(),
            ack_before_commit: false,
            session_settings: Vec::new(),
        }
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
    pub async fn start(opts: StackOptions) -> Result<LocalStack, StackError> {
        opts.validate()?;
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

    // ---- PostgreSQL -------------------------------------------------------

    async fn start_postgres(&mut self) -> Result<(), StackError> {
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
        self.postgres = Some(process::spawn(Service::Postgres, cmd, &log, run_as)?);

        // Ready = a real connection to the `postgres` database works.
        let admin = format!("host={HOST} port={} user=postgres dbname=postgres connect_timeout=2", self.opts.pg_port);
        let client = self
            .wait_ready(Service::Postgres, self.opts.pg_port, || async {
                let (c, conn) =
                    tokio_postgres::connect(&admin, tokio_postgres::NoTls).await.map_err(|e| e.to_string())?;
                tokio::spawn(conn);
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

    // ---- mosquitto --------------------------------------------------------

    async fn start_mosquitto(&mut self) -> Result<(), StackError> {
        let bin = find_mosquitto(self.opts.mosquitto_bin.as_deref())?;
        let p = self.paths.clone();
        let o = &self.opts;
        let mut conf = format!(
            "# written by local-stack; every run rewrites it\n\
             listener {port} {HOST}\n\
             allow_anonymous true\n\
             persistence true\n\
             persistence_location {data}/\n\
             max_queued_messages {queued}\n\
             max_queued_bytes 0\n\
             max_inflight_messages {inflight}\n\
             sys_interval {sys}\n\
             log_dest stderr\n\
             log_type error\nlog_type warning\nlog_type notice\nlog_type information\n\
             connection_messages true\n",
            port = o.mqtt_port,
            data = p.mosquitto_dir.join("data").display(),
            queued = o.max_queued_messages,
            inflight = o.max_inflight_messages,
            sys = o.sys_interval_s,
        );
        if o.mosquitto_acl_file.is_some() {
            conf.push_str(&format!("acl_file {}\n", p.mosquitto_acl.display()));
        }
        if is_root() {
            // Stay root: the persistence directory belongs to us.
            conf.push_str("user root\n");
        }
        std::fs::write(&p.mosquitto_conf, conf).map_err(|e| {
            StackError::io(format!("cannot write {}", p.mosquitto_conf.display()), e, "choose a writable run directory")
        })?;
        let mut cmd = Command::new(bin);
        cmd.arg("-c").arg(&p.mosquitto_conf);
        self.mosquitto = Some(process::spawn(Service::Mosquitto, cmd, &p.log(Service::Mosquitto), None)?);
        let port = self.opts.mqtt_port;
        self.wait_ready(Service::Mosquitto, port, || async move {
            tokio::net::TcpStream::connect((HOST, port)).await.map(|_| ()).map_err(|e| e.to_string())
        })
        .await
    }

    // ---- historian --------------------------------------------------------

    fn historian_command(&self) -> Command {
        let h = &self.opts.historian;
        let mut cmd = Command::new(&self.historian_bin);
        cmd.args(&h.leading_args);
        cmd.args(["--mqtt-host", HOST, "--mqtt-port", &self.opts.mqtt_port.to_string()])
            .args(["--client-id", &h.client_id])
            .args(["--pg", &self.postgres_conn()])
            .arg("--stats-file")
            .arg(&self.paths.stats_file);
        if let Some(n) = h.drop_one_in {
            cmd.args(["--drop-one-in", &n.to_string()]);
        }
        if let Some(d) = h.delay_ms {
            cmd.args(["--delay-ms", &d.to_string()]);
        }
        if h.ack_before_commit {
            cmd.arg("--ack-before-commit");
        }
        for (name, value) in &h.session_settings {
            cmd.arg("--session-setting").arg(format!("{name}={value}"));
        }
        cmd.args(&h.extra_args);
        cmd
    }

    /// Start the historian and wait until it wrote its stats file.
    async fn spawn_historian(&mut self) -> Result<(), StackError> {
        let _ = std::fs::remove_file(&self.paths.stats_file);
        let cmd = self.historian_command();
        self.historian = Some(process::spawn(Service::Historian, cmd, &self.paths.log(Service::Historian), None)?);
        let deadline = Instant::now() + self.opts.ready_timeout;
        loop {
            if let Some(e) = self.historian.as_mut().and_then(|h| h.exited_error("starting")) {
                return Err(e);
            }
            if self.paths.stats_file.exists() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let log = self.paths.log(Service::Historian);
                return Err(StackError::NotReady {
                    service: Service::Historian,
                    port: self.opts.mqtt_port,
                    waited: self.opts.ready_timeout,
                    last_error: format!("no stats file at {}", self.paths.stats_file.display()),
                    tail: log_tail(&log, 20),
                    log,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
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

    // ---- the one-reading check -------------------------------------------

    /// Publish one reading (QoS 1) and wait until it is in `point_history`;
    /// then delete it. Re-publishes every 2 s (the historian may still be
    /// subscribing; a QoS 1 publish with no subscriber is acked and dropped).
    pub async fn reading_check(&mut self) -> Result<(), StackError> {
        let nonce = format!("{}-{}", std::process::id(), chrono_ms());
        let point = format!("_stack/ready/{nonce}");
        let topic = "fbf/scale/_stack/ready";
        let hist_log = self.paths.log(Service::Historian);
        let fail =
            |detail: String| StackError::ReadingCheck { detail, tail: log_tail(&hist_log, 20), log: hist_log.clone() };

        let pg = self.connect_pg().await?;
        let mut mqtt_opts = rumqttc::MqttOptions::new(format!("scalebench-check-{nonce}"), HOST, self.opts.mqtt_port);
        mqtt_opts.set_clean_session(true).set_keep_alive(Duration::from_secs(10));
        let (client, mut eventloop) = rumqttc::AsyncClient::new(mqtt_opts, 16);
        let acks = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let acks2 = acks.clone();
        let driver = tokio::spawn(async move {
            for _ in 0..100_000 {
                match eventloop.poll().await {
                    Ok(rumqttc::Event::Incoming(rumqttc::Packet::PubAck(_))) => {
                        acks2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        });

        let delay = Duration::from_millis(self.opts.historian.delay_ms.unwrap_or(0));
        let timeout = self.opts.check_timeout + delay;
        let republish_every = Duration::from_secs(2) + delay;
        // One (point, ts) for every re-publication: copies are duplicates, never extra rows.
        let ts = chrono_ms();
        let payload = serde_json::json!({"point": point, "value": 1.0, "ts": ts}).to_string();
        let deadline = Instant::now() + timeout;
        let mut next_publish = Instant::now();
        let mut published = 0u64;
        let result = loop {
            if let Some(e) = self.historian.as_mut().and_then(|h| h.exited_error("running the one-reading check")) {
                break Err(e);
            }
            if Instant::now() >= next_publish {
                if client.try_publish(topic, rumqttc::QoS::AtLeastOnce, false, payload.clone()).is_ok() {
                    published += 1;
                }
                next_publish = Instant::now() + republish_every;
            }
            match pg.query_one("SELECT count(*) FROM point_history WHERE point = $1", &[&point]).await {
                Ok(row) if row.get::<_, i64>(0) > 0 => break Ok(()),
                Ok(_) => {}
                // The historian creates the table: it may not exist yet.
                Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => {}
                Err(e) => break Err(pg_err("poll point_history", e)),
            }
            if Instant::now() > deadline {
                let acked = acks.load(std::sync::atomic::Ordering::Relaxed);
                break Err(fail(format!(
                    "published {published} reading(s) to {topic} (broker acked {acked}), none reached point_history within {timeout:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let _ = client.try_disconnect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        driver.abort();
        result?;
        if published > 1 {
            // Let re-published copies land before deleting, so none re-creates the row.
            tokio::time::sleep(Duration::from_millis(1000) + delay).await;
        }
        pg.execute("DELETE FROM point_history WHERE point = $1", &[&point])
            .await
            .map_err(|e| pg_err("delete the check row", e))?;
        // Let the stats file (rewritten every second) show the check reading,
        // so that counters read right after start() are a settled baseline.
        let settle = Instant::now() + Duration::from_secs(3);
        while Instant::now() < settle {
            if self.historian_stats().is_ok_and(|s| s.stored + s.duplicates + s.dropped >= 1) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    async fn connect_pg(&self) -> Result<tokio_postgres::Client, StackError> {
        let (c, conn) = tokio_postgres::connect(&self.postgres_conn(), tokio_postgres::NoTls)
            .await
            .map_err(|e| pg_err("connect to database scalebench", e))?;
        tokio::spawn(conn);
        Ok(c)
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

    /// tokio-postgres connection string of database `scalebench`.
    pub fn postgres_conn(&self) -> String {
        format!("host={HOST} port={} user=postgres dbname=scalebench", self.opts.pg_port)
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

    /// The historian's counters (its stats file, rewritten every second).
    pub fn historian_stats(&self) -> Result<HistorianStats, StackError> {
        let path = &self.paths.stats_file;
        let text = std::fs::read_to_string(path)
            .map_err(|e| StackError::Stats { path: path.clone(), problem: e.to_string() })?;
        serde_json::from_str(&text).map_err(|e| StackError::Stats { path: path.clone(), problem: e.to_string() })
    }

    /// CPU seconds and RSS of every running service (its whole process group).
    pub fn sample_processes(&self) -> Vec<ProcessSample> {
        self.pids().into_iter().map(|(s, pid)| process::sample_group(s, pid)).collect()
    }

    /// Send `signal` (e.g. `libc::SIGKILL`) to the historian and wait (≤10 s,
    /// then SIGKILL) until it is gone. A deliberate stop: [`supervise`](Self::supervise)
    /// leaves the historian down until [`restart_historian`](Self::restart_historian),
    /// and then records this exit and one restart. For a crash that supervision
    /// detects and repairs by itself, use [`kill`](Self::kill).
    pub fn kill_historian(&mut self, signal: i32) -> Result<(), StackError> {
        let mut h = self.historian.take().ok_or(StackError::NotRunning {
            service: Service::Historian,
            hint: "start it with restart_historian()".into(),
        })?;
        h.stop(signal, Duration::from_secs(10));
        let t = &mut self.trackers[Service::Historian.index()];
        t.wanted = false;
        t.health.running = false;
        t.pending_exit = h.last_status().map(health::describe_exit);
        Ok(())
    }

    /// Start the historian again (stopping a running one first with SIGTERM)
    /// and wait until it wrote its stats file. Its counters start at zero.
    pub async fn restart_historian(&mut self) -> Result<(), StackError> {
        if let Some(mut h) = self.historian.take() {
            h.stop(libc::SIGTERM, Duration::from_secs(10));
            self.trackers[Service::Historian.index()].pending_exit = h.last_status().map(health::describe_exit);
        }
        self.trackers[Service::Historian.index()].wanted = true;
        self.spawn_historian().await
    }

    /// Is this service's leader process running?
    pub fn is_running(&mut self, service: Service) -> bool {
        self.proc_mut(service).is_some_and(|p| p.exit_status().is_none())
    }

    // ---- supervision ------------------------------------------------------

    /// Send `signal` to the whole service (its process group and the leader's
    /// descendants, so PostgreSQL's backends too) without telling the
    /// supervisor: the next [`supervise`](Self::supervise) finds the exit as
    /// an unexpected one, records it and starts the service again. Returns
    /// once the signal is sent; it does not wait for the process to end.
    pub fn kill(&mut self, service: Service, signal: i32) -> Result<(), StackError> {
        let pid = self.proc_ref(service).map(|p| p.pid()).ok_or_else(|| StackError::NotRunning {
            service,
            hint: "it was stopped on purpose or has not come back yet; call supervise() to bring it back".into(),
        })?;
        process::signal_service(pid, signal).map_err(|e| {
            StackError::io(
                format!("cannot send signal {signal} to {service} (pid {pid})"),
                e,
                "run the harness as the user that started the stack",
            )
        })
    }

    /// Look at every service once; for each whose leader process exited, or
    /// whose pid changed, record the exit, start it again (waiting for
    /// readiness as at start) and return one line per event, e.g.
    /// `mosquitto: killed by signal 9 (SIGKILL); restarted`. Returns nothing
    /// when nothing happened, at the cost of one `try_wait` per service: call
    /// it every few hundred milliseconds.
    ///
    /// A restart that fails leaves the service marked not running; its error
    /// is returned as an event and the next attempt comes at least 5 s later.
    /// PostgreSQL is restarted only after every leftover process of the old
    /// postmaster (backends in the data directory) is gone.
    pub async fn supervise(&mut self) -> Vec<String> {
        let mut events = Vec::new();
        for service in Service::ALL {
            let i = service.index();
            let state = self.proc_mut(service).map(|p| (p.pid(), p.try_status()));
            let exit = match state {
                Some((pid, Ok(None))) => {
                    let t = &mut self.trackers[i];
                    if t.last_pid != Some(pid) {
                        // Started again by someone else (restart_historian).
                        let desc = t.pending_exit.take().unwrap_or_else(|| "stopped and replaced".into());
                        let old = t.last_pid;
                        t.record(desc.clone());
                        t.health.restarts += 1;
                        t.started(pid);
                        let was = old.map(|p| format!(" (pid {p} → {pid})")).unwrap_or_default();
                        events.push(format!("{service}: {desc}; restarted{was}"));
                    }
                    continue;
                }
                Some((_, Ok(Some(status)))) => Some(self.trackers[i].exited(Some(status), "")),
                Some((_, Err(e))) => Some(self.trackers[i].exited(None, &format!("ended (cannot be waited for: {e})"))),
                None => {
                    let t = &self.trackers[i];
                    if !t.wanted || t.retry_after.is_some_and(|at| Instant::now() < at) {
                        continue;
                    }
                    None
                }
            };
            self.clear_leftovers(service);
            let started = match self.port_free_again(service).await {
                Ok(()) => self.start_service(service).await,
                Err(e) => Err(e),
            };
            match started {
                Ok(()) => {
                    let pid = self.mark_started(service);
                    self.trackers[i].health.restarts += 1;
                    let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
                    events.push(match exit {
                        Some(desc) => format!("{service}: {desc}; restarted{pid}"),
                        None => format!("{service}: restarted{pid} after an earlier failed restart"),
                    });
                }
                Err(e) => {
                    self.clear_leftovers(service);
                    let t = &mut self.trackers[i];
                    t.health.running = false;
                    t.retry_after = Some(Instant::now() + Duration::from_secs(5));
                    let why = health::one_line(&e);
                    events.push(match exit {
                        Some(desc) => format!("{service}: {desc}; restart failed: {why}"),
                        None => format!("{service}: restart failed again: {why}"),
                    });
                }
            }
        }
        events
    }

    /// Health of every service, cumulative since start (take differences per
    /// step). Reads each service's cgroup OOM counter.
    pub fn health(&mut self) -> Vec<ServiceHealth> {
        Service::ALL
            .into_iter()
            .map(|service| {
                let (running, pid) = match self.proc_mut(service) {
                    Some(p) => (matches!(p.try_status(), Ok(None)), Some(p.pid())),
                    None => (false, None),
                };
                self.trackers[service.index()].snapshot(running, pid)
            })
            .collect()
    }

    /// Start one service (its process and readiness), as at start.
    async fn start_service(&mut self, service: Service) -> Result<(), StackError> {
        match service {
            Service::Postgres => self.start_postgres().await,
            Service::Mosquitto => self.start_mosquitto().await,
            Service::Historian => self.spawn_historian().await,
        }
    }

    /// Before a restart: the service's port must be free again (a killed
    /// server's listening socket goes with it; something else may have taken
    /// it meanwhile, and would pass the readiness probe in its place).
    async fn port_free_again(&self, service: Service) -> Result<(), StackError> {
        let port = match service {
            Service::Postgres => self.opts.pg_port,
            Service::Mosquitto => self.opts.mqtt_port,
            Service::Historian => return Ok(()),
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match guard::port_free(port) {
                Ok(()) => return Ok(()),
                Err(detail) if Instant::now() >= deadline => {
                    return Err(StackError::PortTaken { service, port, detail })
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Record that `service` is up; returns its pid.
    fn mark_started(&mut self, service: Service) -> Option<u32> {
        let pid = self.proc_ref(service).map(|p| p.pid())?;
        self.trackers[service.index()].started(pid);
        Some(pid)
    }

    /// Drop (and reap) the service's process handle and SIGKILL whatever is
    /// left of it: its process group and, for PostgreSQL, every process in
    /// the data directory (backends of a killed postmaster live on in process
    /// groups of their own and hold its shared memory).
    fn clear_leftovers(&mut self, service: Service) {
        let old = match service {
            Service::Postgres => self.postgres.take(),
            Service::Mosquitto => self.mosquitto.take(),
            Service::Historian => self.historian.take(),
        };
        if let Some(mut p) = old {
            p.stop(libc::SIGKILL, Duration::from_secs(2));
        }
        if service == Service::Postgres {
            let pids = process::pids_with_cwd(&self.paths.pg_data);
            process::kill_and_wait(&pids, Duration::from_secs(5));
        }
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

fn pg_err(context: &str, source: tokio_postgres::Error) -> StackError {
    StackError::Postgres {
        context: context.into(),
        source,
        hint: "read the PostgreSQL log under run_dir/logs/postgres.log".into(),
    }
}

fn chrono_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
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

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
}

fn find_mosquitto(given: Option<&Path>) -> Result<PathBuf, StackError> {
    let candidates: Vec<PathBuf> = match given {
        Some(p) => vec![p.to_path_buf()],
        None => which("mosquitto").into_iter().chain([PathBuf::from("/usr/sbin/mosquitto")]).collect(),
    };
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| StackError::NotFound {
        what: "mosquitto".into(),
        looked: candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ") + " and PATH",
        hint: "install it: apt-get install mosquitto".into(),
    })
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

/// Locate the `reference-historian` binary: `$SCALEBENCH_HISTORIAN_BIN`, then
/// next to the current executable (and its parent directory, for test
/// binaries in `target/<profile>/deps`), then PATH.
pub fn find_historian_bin() -> Result<PathBuf, StackError> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("SCALEBENCH_HISTORIAN_BIN") {
        candidates.push(PathBuf::from(p));
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            candidates.push(dir.join("reference-historian"));
            if let Some(up) = dir.parent() {
                candidates.push(up.join("reference-historian"));
            }
        }
    }
    if let Some(p) = which("reference-historian") {
        candidates.push(p);
    }
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| StackError::NotFound {
        what: "reference-historian binary".into(),
        looked: candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
        hint: "build it: cargo build --release -p reference-historian (or set SCALEBENCH_HISTORIAN_BIN)".into(),
    })
}
