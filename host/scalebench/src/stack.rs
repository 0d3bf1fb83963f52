//! The stack a run drives: the built-in local stack (mosquitto, PostgreSQL
//! and the reference historian as child processes, see the `local-stack`
//! crate) or an external one that someone else runs (`--stack external`).

use std::collections::BTreeMap;

use local_stack::{LocalStack, ProcessSample, Service};

use crate::results::ServiceHealth;

pub struct External {
    pub mqtt_host: String,
    pub mqtt_port: u16,
    pub pg_conn: String,
}

pub enum Stack {
    Local(LocalStack),
    External(External),
}

impl Stack {
    pub fn mqtt(&self) -> (String, u16) {
        match self {
            Stack::Local(s) => (s.mqtt_host().to_string(), s.mqtt_port()),
            Stack::External(e) => (e.mqtt_host.clone(), e.mqtt_port),
        }
    }

    pub fn pg_conn(&self) -> String {
        match self {
            Stack::Local(s) => s.postgres_conn(),
            Stack::External(e) => e.pg_conn.clone(),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Stack::Local(_) => "local",
            Stack::External(_) => "external",
        }
    }

    /// CPU seconds and RSS per service (local stacks only).
    pub fn sample_processes(&self) -> Vec<ProcessSample> {
        match self {
            Stack::Local(s) => s.sample_processes(),
            Stack::External(_) => Vec::new(),
        }
    }

    /// Is every service still running? A service that died counts as a
    /// restart-worthy failure of the step.
    pub fn health(&mut self) -> BTreeMap<String, ServiceHealth> {
        let mut out = BTreeMap::new();
        if let Stack::Local(s) = self {
            for svc in [Service::Postgres, Service::Mosquitto, Service::Historian] {
                let running = s.is_running(svc);
                out.insert(
                    svc.to_string(),
                    ServiceHealth { restarts: 0, oom_kills: 0, state: if running { "running".into() } else { "exited".into() } },
                );
            }
        }
        out
    }
}

/// Parse `mqtt://host:port` (or `host:port`).
pub fn parse_mqtt_url(url: &str) -> Result<(String, u16), String> {
    let rest = url.strip_prefix("mqtt://").or_else(|| url.strip_prefix("tcp://")).unwrap_or(url);
    let rest = rest.trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| format!("bad port in MQTT URL {url:?}"))?),
        None => (rest, 1883),
    };
    if host.is_empty() {
        return Err(format!("no host in MQTT URL {url:?}; expected mqtt://host:port"));
    }
    Ok((host.to_string(), port))
}
