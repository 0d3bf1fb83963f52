//! A Haystack HTTP server as a supervised child process on a guarded 2xxxx
//! loopback port: the stand-in SUT of Haystack targets (the test server,
//! `haystack-testserver`; see docs/haystack-test-server.md). Started with
//! `--ready-file`, waited for until it has written its port; an exit is
//! recorded and the server started again (its in-memory history is then
//! gone, which the step sees as loss).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::health::{self, Tracker};
use crate::process::{self, ServiceProc};
use crate::{guard, log_tail, ProcessSample, Service, ServiceHealth, StackError};

/// Tag for the process helpers (they only use it in messages).
const PROC_TAG: Service = Service::Historian;
/// The service's name in results, health and `--kill`.
pub const NAME: &str = "haystack";

#[derive(Debug, Clone)]
pub struct HaystackOptions {
    pub run_dir: PathBuf,
    /// The program and the arguments that come before the server's own
    /// (`scalebench haystack-testserver`).
    pub program: PathBuf,
    pub leading_args: Vec<String>,
    /// First port to try (2xxxx).
    pub base_port: u16,
    /// SCRAM user and the file holding its password; None = no auth.
    pub auth: Option<(String, PathBuf)>,
    pub extra_args: Vec<String>,
    pub ready_timeout: Duration,
    /// HTTPS only, with this certificate (None: plain HTTP).
    pub tls: Option<crate::StackTls>,
}

pub struct HaystackServer {
    opts: HaystackOptions,
    port: u16,
    log: PathBuf,
    ready_file: PathBuf,
    proc: Option<ServiceProc>,
    tracker: Tracker,
}

impl HaystackServer {
    /// Pick a free guarded port, start the server and wait until it is ready.
    pub fn start(opts: HaystackOptions) -> Result<HaystackServer, StackError> {
        let port = (opts.base_port.max(20000)..=29999).find(|p| guard::claim_free(*p)).ok_or_else(|| {
            StackError::InvalidOptions {
                problem: "no free port in 2xxxx for the Haystack server".into(),
                hint: "pass another --base-port".into(),
            }
        })?;
        guard::check_port(PROC_TAG, port)?;
        let dir = opts.run_dir.join("haystack");
        std::fs::create_dir_all(&dir).map_err(|e| {
            StackError::io(format!("cannot create {}", dir.display()), e, "choose a writable run directory")
        })?;
        let mut s = HaystackServer {
            log: dir.join("haystack.log"),
            ready_file: dir.join("ready"),
            opts,
            port,
            proc: None,
            tracker: Tracker::new(NAME),
        };
        s.spawn_and_wait()?;
        Ok(s)
    }

    fn spawn_and_wait(&mut self) -> Result<(), StackError> {
        let _ = std::fs::remove_file(&self.ready_file);
        let mut cmd = Command::new(&self.opts.program);
        cmd.args(&self.opts.leading_args)
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .arg("--ready-file")
            .arg(&self.ready_file);
        if let Some((user, file)) = &self.opts.auth {
            cmd.args(["--user", user]).arg("--password-file").arg(file);
        }
        if let Some(t) = &self.opts.tls {
            cmd.arg("--tls-cert").arg(&t.cert).arg("--tls-key").arg(&t.key);
        }
        cmd.args(&self.opts.extra_args);
        let p = process::spawn(PROC_TAG, cmd, &self.log, None)?;
        let pid = p.pid();
        self.proc = Some(p);
        let deadline = Instant::now() + self.opts.ready_timeout;
        while !self.ready_file.exists() {
            if let Some(status) = self.proc.as_mut().and_then(|p| p.exit_status()) {
                return Err(StackError::io(
                    format!("the Haystack server exited while starting ({status})"),
                    std::io::Error::other(format!(
                        "last lines of {}:\n{}",
                        self.log.display(),
                        log_tail(&self.log, 20)
                    )),
                    format!("read {}", self.log.display()),
                ));
            }
            if Instant::now() >= deadline {
                return Err(StackError::io(
                    format!("the Haystack server was not ready within {:?}", self.opts.ready_timeout),
                    std::io::Error::new(std::io::ErrorKind::TimedOut, log_tail(&self.log, 20)),
                    format!("read {}", self.log.display()),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.tracker.started(pid);
        Ok(())
    }

    /// `http://127.0.0.1:<port>` (`https://` with TLS).
    pub fn base_url(&self) -> String {
        let scheme = if self.opts.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    pub fn log_path(&self) -> &std::path::Path {
        &self.log
    }

    pub fn data_dir(&self) -> PathBuf {
        self.opts.run_dir.clone()
    }

    /// Bring the server back if it exited; one line per event.
    pub fn supervise(&mut self) -> Vec<String> {
        let Some(p) = self.proc.as_mut() else { return Vec::new() };
        let desc = match p.try_status() {
            Ok(None) => return Vec::new(),
            Ok(Some(status)) => self.tracker.exited(Some(status), ""),
            Err(e) => self.tracker.exited(None, &format!("ended (cannot be waited for: {e})")),
        };
        if let Some(mut p) = self.proc.take() {
            p.stop(libc::SIGKILL, Duration::from_secs(2));
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while guard::port_free(self.port).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.tracker.health.restarts += 1;
        match self.spawn_and_wait() {
            Ok(()) => vec![format!("{NAME}: {desc}; restarted")],
            Err(e) => vec![format!("{NAME}: {desc}; restart failed: {}", health::one_line(&e))],
        }
    }

    pub fn health(&mut self) -> ServiceHealth {
        let pid = self.proc.as_ref().map(|p| p.pid());
        let running = self.proc.as_mut().is_some_and(|p| p.exit_status().is_none());
        self.tracker.snapshot(running, pid)
    }

    pub fn sample(&self) -> Option<ProcessSample> {
        self.proc.as_ref().map(|p| process::sample_group(PROC_TAG, p.pid()))
    }

    /// Send `signal` without telling the supervisor (the crash hook).
    pub fn kill(&mut self, signal: i32) -> Result<(), StackError> {
        let pid = self.proc.as_ref().map(|p| p.pid()).ok_or_else(|| StackError::InvalidOptions {
            problem: "the Haystack server is not running".into(),
            hint: "wait for the supervisor to bring it back".into(),
        })?;
        process::signal_service(pid, signal).map_err(|e| {
            StackError::io(
                format!("cannot send signal {signal} to the Haystack server (pid {pid})"),
                e,
                "run as the user that started it",
            )
        })
    }

    pub fn stop(mut self) {
        if let Some(mut p) = self.proc.take() {
            p.stop(libc::SIGTERM, Duration::from_secs(5));
        }
    }
}
