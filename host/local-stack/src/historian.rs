//! The stack's reference historian: its options, command line, start
//! (ready when it wrote its stats file), counters, deliberate stop and
//! restart, and where its binary is found.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process;
use crate::{health, log_tail, which, HistorianStats, LocalStack, Service, StackError, HOST};

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

impl LocalStack {
    fn historian_command(&self) -> Command {
        let h = &self.opts.historian;
        let mut cmd = Command::new(&self.historian_bin);
        cmd.args(&h.leading_args);
        cmd.args(["--mqtt-host", HOST, "--mqtt-port", &self.opts.mqtt_port.to_string()])
            .args(["--client-id", &h.client_id])
            .args(["--pg", &self.postgres_conn()])
            .arg("--stats-file")
            .arg(&self.paths.stats_file);
        if let Some(ca) = self.tls_ca() {
            cmd.arg("--tls-ca").arg(ca);
        }
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
    pub(crate) async fn spawn_historian(&mut self) -> Result<(), StackError> {
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

    /// The historian's counters (its stats file, rewritten every second).
    pub fn historian_stats(&self) -> Result<HistorianStats, StackError> {
        let path = &self.paths.stats_file;
        let text = std::fs::read_to_string(path)
            .map_err(|e| StackError::Stats { path: path.clone(), problem: e.to_string() })?;
        serde_json::from_str(&text).map_err(|e| StackError::Stats { path: path.clone(), problem: e.to_string() })
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
