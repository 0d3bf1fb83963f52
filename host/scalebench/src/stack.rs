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

    /// Bring back any service that exited (local stacks supervise their
    /// processes, as a container runtime would); one line per event.
    pub async fn supervise(&mut self) -> Vec<String> {
        match self {
            Stack::Local(s) => s.supervise().await,
            // On this worker thread, not a blocking-pool one: a child dies with
            // the thread that spawned it, and pool threads come and go.
            Stack::Nats(c) => c.supervise(),
            _ => Vec::new(),
        }
    }

    /// Restarts, exits and OOM kills per service since the stack started,
    /// read from the processes themselves. None: this stack's processes are
    /// not visible to scalebench (external), so they are unmeasured.
    pub fn health_totals(&mut self) -> Option<BTreeMap<String, ServiceHealth>> {
        let list = match self {
            Stack::Local(s) => s.health(),
            Stack::Nats(c) => c.health(),
            _ => return None,
        };
        Some(
            list.into_iter()
                .map(|h| {
                    let state = if h.running { "running".to_string() } else { "exited".to_string() };
                    (
                        h.service.clone(),
                        ServiceHealth {
                            restarts: h.restarts,
                            oom_kills: h.oom_kills.unwrap_or(0),
                            oom_measured: h.oom_kills.is_some(),
                            exits: h.exits,
                            state,
                        },
                    )
                })
                .collect(),
        )
    }

    /// Send `signal` to a service of a local stack by name ("mosquitto",
    /// "postgres", "reference-historian", "nats-1"), without telling its
    /// supervisor: a kill is then detected, not declared.
    pub fn signal(&mut self, service: &str, signal: i32) -> Result<(), String> {
        match self {
            Stack::Local(s) => {
                let svc = match service {
                    "mosquitto" | "broker" => Service::Mosquitto,
                    "postgres" | "postgresql" => Service::Postgres,
                    "reference-historian" | "historian" => Service::Historian,
                    other => return Err(format!("the local stack has no service `{other}` (it has mosquitto, postgres, reference-historian)")),
                };
                s.kill(svc, signal).map_err(|e| e.to_string())
            }
            Stack::Nats(c) => {
                let i: usize = service
                    .strip_prefix("nats-")
                    .and_then(|n| n.parse().ok())
                    .filter(|i| *i < c.node_count())
                    .ok_or_else(|| format!("the local NATS stack has no service `{service}` (it has nats-0 … nats-{})", c.node_count() - 1))?;
                c.kill(i, signal).map_err(|e| e.to_string())
            }
            _ => Err(format!("cannot signal `{service}`: an external stack's processes are not scalebench's")),
        }
    }

    /// Where the stack keeps its data (watched for free space), if it is ours.
    pub fn data_dir(&self) -> Option<std::path::PathBuf> {
        match self {
            Stack::Local(s) => Some(s.paths().run_dir.clone()),
            Stack::Nats(c) => Some(c.store_dir(0)),
            _ => None,
        }
    }
}

/// What happened to each service between two health readings.
pub fn health_delta(before: &BTreeMap<String, ServiceHealth>, after: &BTreeMap<String, ServiceHealth>) -> BTreeMap<String, ServiceHealth> {
    after
        .iter()
        .map(|(name, a)| {
            let b = before.get(name).cloned().unwrap_or_default();
            (
                name.clone(),
                ServiceHealth {
                    restarts: a.restarts.saturating_sub(b.restarts),
                    oom_kills: a.oom_kills.saturating_sub(b.oom_kills),
                    oom_measured: a.oom_measured,
                    exits: a.exits.iter().skip(b.exits.len()).cloned().collect(),
                    state: a.state.clone(),
                },
            )
        })
        .collect()
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
