//! The built-in local stacks as drivers: mosquitto + PostgreSQL + the
//! reference historian, or a nats-server cluster, as child processes of
//! scalebench (the `local-stack` crate) on guarded 2xxxx loopback ports,
//! supervised: a process that dies is brought back and the exit recorded.

use std::collections::BTreeMap;
use std::path::PathBuf;

use local_stack::nats::NatsCluster;
use local_stack::{LocalStack, Service};

use super::{Endpoint, ProcSample, ServiceKind, StackDriver};
use crate::future::BoxFuture;
use crate::results::ServiceHealth;

fn totals(list: Vec<local_stack::ServiceHealth>) -> BTreeMap<String, ServiceHealth> {
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
        .collect()
}

impl StackDriver for LocalStack {
    fn kind(&self) -> &'static str {
        "local"
    }
    fn services(&self) -> Vec<Endpoint> {
        vec![
            Endpoint {
                name: "broker".into(),
                kind: ServiceKind::Mqtt,
                address: format!(
                    "{}://{}:{}",
                    if self.tls_ca().is_some() { "mqtts" } else { "mqtt" },
                    self.mqtt_host(),
                    self.mqtt_port()
                ),
            },
            Endpoint { name: "postgres".into(), kind: ServiceKind::Postgres, address: self.postgres_conn() },
        ]
    }
    fn supervise(&mut self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(LocalStack::supervise(self))
    }
    fn health_totals(&mut self) -> Option<BTreeMap<String, ServiceHealth>> {
        Some(totals(self.health()))
    }
    fn sample_processes(&mut self) -> Vec<ProcSample> {
        LocalStack::sample_processes(self)
            .into_iter()
            .map(|p| ProcSample::new(p.service.to_string(), p.cpu_seconds, p.rss_bytes, p.at))
            .collect()
    }
    fn signal_names(&self) -> Vec<String> {
        ["postgres", "mosquitto", "reference-historian"].map(String::from).to_vec()
    }
    fn signal(&mut self, service: &str, signal: i32) -> Result<(), String> {
        let svc = match service {
            "mosquitto" | "broker" => Service::Mosquitto,
            "postgres" | "postgresql" => Service::Postgres,
            "reference-historian" | "historian" => Service::Historian,
            other => {
                return Err(format!(
                    "the local stack has no service `{other}` (it has mosquitto, postgres, reference-historian)"
                ))
            }
        };
        self.kill(svc, signal).map_err(|e| e.to_string())
    }
    fn data_dir(&self) -> Option<PathBuf> {
        Some(self.paths().run_dir.clone())
    }
    fn caps(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("cpu".to_string(), "none (local processes, uncapped)".to_string())])
    }
    fn stop(self: Box<Self>) {
        tracing::info!("stopping the local stack");
        tokio::task::block_in_place(|| LocalStack::stop(*self));
    }
}

impl StackDriver for NatsCluster {
    fn kind(&self) -> &'static str {
        "local-nats"
    }
    fn services(&self) -> Vec<Endpoint> {
        vec![Endpoint { name: "nats".into(), kind: ServiceKind::Nats, address: self.client_urls().join(",") }]
    }
    fn supervise(&mut self) -> BoxFuture<'_, Vec<String>> {
        // On this worker thread, not a blocking-pool one: a child dies with
        // the thread that spawned it, and pool threads come and go.
        let events = NatsCluster::supervise(self);
        Box::pin(async move { events })
    }
    fn health_totals(&mut self) -> Option<BTreeMap<String, ServiceHealth>> {
        Some(totals(self.health()))
    }
    fn sample_processes(&mut self) -> Vec<ProcSample> {
        NatsCluster::sample_processes(self)
            .into_iter()
            .map(|p| ProcSample::new(format!("nats-{}", p.node), p.cpu_seconds, p.rss_bytes, p.at))
            .collect()
    }
    fn signal_names(&self) -> Vec<String> {
        (0..self.node_count()).map(|i| format!("nats-{i}")).collect()
    }
    fn settings(&self) -> BTreeMap<String, String> {
        NatsCluster::settings(self)
    }
    fn signal(&mut self, service: &str, signal: i32) -> Result<(), String> {
        let i: usize =
            service.strip_prefix("nats-").and_then(|n| n.parse().ok()).filter(|i| *i < self.node_count()).ok_or_else(
                || {
                    format!(
                        "the local NATS stack has no service `{service}` (it has nats-0 … nats-{})",
                        self.node_count() - 1
                    )
                },
            )?;
        self.kill(i, signal).map_err(|e| e.to_string())
    }
    fn data_dir(&self) -> Option<PathBuf> {
        Some(self.store_dir(0))
    }
    fn caps(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("cpu".to_string(), "none (local processes, uncapped)".to_string())])
    }
    fn stop(self: Box<Self>) {
        tracing::info!("stopping the local NATS stack");
        tokio::task::block_in_place(|| NatsCluster::stop(*self));
    }
}

/// The local Haystack server (the test server) of HTTP targets, as the one
/// HTTP service the adapter's plan names.
pub struct LocalHaystack {
    pub server: local_stack::haystack::HaystackServer,
    /// The service name the plan uses ("api").
    pub service: String,
}

impl StackDriver for LocalHaystack {
    fn kind(&self) -> &'static str {
        "local"
    }
    fn services(&self) -> Vec<Endpoint> {
        vec![Endpoint { name: self.service.clone(), kind: ServiceKind::Http, address: self.server.base_url() }]
    }
    fn supervise(&mut self) -> BoxFuture<'_, Vec<String>> {
        // On this worker thread: a child dies with the thread that spawned it.
        let events = self.server.supervise();
        Box::pin(async move { events })
    }
    fn health_totals(&mut self) -> Option<BTreeMap<String, ServiceHealth>> {
        Some(totals(vec![self.server.health()]))
    }
    fn sample_processes(&mut self) -> Vec<ProcSample> {
        self.server
            .sample()
            .into_iter()
            .map(|p| ProcSample::new(local_stack::haystack::NAME.to_string(), p.cpu_seconds, p.rss_bytes, p.at))
            .collect()
    }
    fn signal_names(&self) -> Vec<String> {
        vec![local_stack::haystack::NAME.to_string()]
    }
    fn signal(&mut self, service: &str, signal: i32) -> Result<(), String> {
        if service != local_stack::haystack::NAME && service != self.service {
            return Err(format!(
                "the local Haystack stack has no service `{service}` (it has {})",
                local_stack::haystack::NAME
            ));
        }
        self.server.kill(signal).map_err(|e| e.to_string())
    }
    fn data_dir(&self) -> Option<PathBuf> {
        Some(self.server.data_dir())
    }
    fn caps(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("cpu".to_string(), "none (local processes, uncapped)".to_string())])
    }
    fn stop(self: Box<Self>) {
        tracing::info!("stopping the local Haystack server");
        tokio::task::block_in_place(|| self.server.stop());
    }
}
