//! The stack a run drives: the built-in local stacks (mosquitto +
//! PostgreSQL + the reference historian, or a NATS JetStream cluster; child
//! processes from the `local-stack` crate) or an external one that someone
//! else runs (`--stack external`).

use std::collections::BTreeMap;
use std::time::Instant;

use local_stack::nats::NatsCluster;
use local_stack::{LocalStack, Service};

use crate::results::ServiceHealth;

/// CPU seconds and RSS of one service (or node) at one instant.
#[derive(Debug, Clone)]
pub struct ProcSample {
    pub name: String,
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    pub at: Instant,
}

pub struct External {
    pub mqtt_host: String,
    pub mqtt_port: u16,
    pub pg_conn: String,
}

#[allow(clippy::large_enum_variant)] // one per run; boxing buys nothing
pub enum Stack {
    Local(LocalStack),
    External(External),
    Nats(NatsCluster),
    ExternalNats(String),
}

impl Stack {
    pub fn mqtt(&self) -> Option<(String, u16)> {
        match self {
            Stack::Local(s) => Some((s.mqtt_host().to_string(), s.mqtt_port())),
            Stack::External(e) => Some((e.mqtt_host.clone(), e.mqtt_port)),
            _ => None,
        }
    }

    pub fn pg_conn(&self) -> Option<String> {
        match self {
            Stack::Local(s) => Some(s.postgres_conn()),
            Stack::External(e) => Some(e.pg_conn.clone()),
            _ => None,
        }
    }

    /// Comma-separated nats:// URLs.
    pub fn nats_urls(&self) -> Option<String> {
        match self {
            Stack::Nats(c) => Some(c.client_urls().join(",")),
            Stack::ExternalNats(u) => Some(u.clone()),
            _ => None,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Stack::Local(_) => "local",
            Stack::Nats(_) => "local-nats",
            Stack::External(_) | Stack::ExternalNats(_) => "external",
        }
    }

    /// CPU seconds and RSS per service (local stacks only).
    pub fn sample_processes(&self) -> Vec<ProcSample> {
        match self {
            Stack::Local(s) => s
                .sample_processes()
                .into_iter()
                .map(|p| ProcSample { name: p.service.to_string(), cpu_seconds: p.cpu_seconds, rss_bytes: p.rss_bytes, at: p.at })
                .collect(),
            Stack::Nats(c) => c
                .sample_processes()
                .into_iter()
                .map(|p| ProcSample { name: format!("nats-{}", p.node), cpu_seconds: p.cpu_seconds, rss_bytes: p.rss_bytes, at: p.at })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Is every service still running?
    pub fn health(&mut self) -> BTreeMap<String, ServiceHealth> {
        let mut out = BTreeMap::new();
        let state = |running: bool| ServiceHealth { restarts: 0, oom_kills: 0, state: if running { "running".into() } else { "exited".into() } };
        match self {
            Stack::Local(s) => {
                for svc in [Service::Postgres, Service::Mosquitto, Service::Historian] {
                    out.insert(svc.to_string(), state(s.is_running(svc)));
                }
            }
            Stack::Nats(c) => {
                for i in 0..c.node_count() {
                    out.insert(format!("nats-{i}"), state(c.is_running(i)));
                }
            }
            _ => {}
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
