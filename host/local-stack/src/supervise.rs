//! Supervision of the local stack: crash injection ([`LocalStack::kill`]),
//! detection of exits and pid changes, restart as at start, and the
//! cumulative health of every service.

use std::time::{Duration, Instant};

use crate::{guard, health, process, LocalStack, Service, ServiceHealth, StackError};

impl LocalStack {
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
}
