//! What a study records (study.json): every row's numbers, the servers and
//! host around them, the hypotheses' verdicts and the charts.

use serde::{Deserialize, Serialize};

use super::plan::Plan;
use crate::results::Hardware;

/// One throughput row. Core rows fill the delivery and aggregate columns
/// (fan-out counted); JetStream rows fill `stored` and count acked unique
/// writes as `published`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ThroughputRow {
    pub name: String,
    /// "core" or "jetstream".
    pub kind: String,
    /// e.g. "core pub/sub", "jetstream file r=3, async acks (window 256)".
    pub mode: String,
    pub storage: Option<String>,
    pub replicas: Option<u32>,
    /// "fire-and-forget", "async acks, window 256 per publisher", "sync, one ack at a time".
    pub publish: String,
    pub publishers: u32,
    pub subscribers: u32,
    pub payload_bytes: usize,
    /// Messages the row set out to publish.
    pub planned: u64,
    /// Core: messages sent (flushed). JetStream: messages acknowledged.
    pub published: u64,
    /// Core: deliveries across all subscribers (fan-out: up to published × subscribers).
    pub delivered: u64,
    pub expected_deliveries: u64,
    /// JetStream: the stream's message count after the row (warm-up excluded).
    pub stored: Option<u64>,
    pub pub_seconds: f64,
    pub sub_seconds: f64,
    /// Unique messages per second (JetStream: acked durable writes per second).
    pub pub_msgs_per_s: f64,
    pub pub_mib_per_s: f64,
    /// Deliveries per second across subscribers (fan-out counted).
    pub sub_msgs_per_s: Option<f64>,
    pub sub_mib_per_s: Option<f64>,
    /// (published + deliveries) / the longer of pub and sub time: fan-out
    /// counted; never compare it with JetStream writes.
    pub aggregate_msgs_per_s: Option<f64>,
    /// Rate of each publisher alone (spread, not delay).
    pub per_publisher_msgs_per_s: Vec<f64>,
    /// Publish or ack errors.
    pub errors: u64,
    pub first_error: Option<String>,
    /// The row hit its time cap before publishing everything.
    pub capped: bool,
    /// Why the row did not run (then every rate is 0).
    pub skipped: Option<String>,
    /// Which servers the connections landed on, and other remarks.
    pub note: String,
}

/// One delay row (ping or flood), in milliseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DelayRow {
    pub name: String,
    /// "ping" or "flood".
    pub kind: String,
    pub publishers: u32,
    pub payload_bytes: usize,
    /// Messages sent.
    pub count: u64,
    /// Delays recorded (messages that arrived).
    pub received: u64,
    pub min_ms: f64,
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub seconds: f64,
    pub error: Option<String>,
    pub note: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HostLoad {
    pub at_utc: String,
    /// /proc/loadavg as read.
    pub loadavg: String,
    pub load_1m: f64,
}

/// The /varz counters of one server at one instant.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct VarzSnapshot {
    pub monitor_url: String,
    pub server_name: String,
    pub version: String,
    pub connections: u64,
    pub routes: u64,
    pub in_msgs: u64,
    pub out_msgs: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
    /// CPU % as nats-server reports it.
    pub cpu: f64,
    pub mem_bytes: u64,
    pub cores: u64,
    pub slow_consumers: u64,
    pub jetstream: bool,
    pub error: Option<String>,
}

/// A server as a client sees it (INFO).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerIdent {
    pub url: String,
    pub server_name: String,
    pub version: String,
    pub cluster: Option<String>,
    pub jetstream: bool,
}

/// CPU and memory of one local node over the whole study.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerProcess {
    pub node: String,
    pub pid: u32,
    pub cpu_seconds: f64,
    /// CPU seconds / wall seconds × 100 over the measured part.
    pub cpu_percent: f64,
    pub rss_bytes_after: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Target {
    /// "local" (started by the study) or "external" (`--url`).
    pub kind: String,
    pub nodes: Option<usize>,
    pub client_urls: Vec<String>,
    pub monitor_urls: Vec<String>,
    /// `nats-server --version` of the local binary.
    pub server_binary: Option<String>,
    /// Where JetStream stored its files (local).
    pub store_dir: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hypothesis {
    pub id: String,
    pub statement: String,
    /// "supported", "not supported" or "not tested".
    pub verdict: String,
    pub evidence: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChartFile {
    /// Path relative to the run directory (charts/x.svg).
    pub file: String,
    pub title: String,
}

/// Everything a study run wrote into study.json.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StudyResult {
    pub schema: String,
    pub run_id: String,
    pub started_utc: String,
    pub finished_utc: String,
    pub wall_seconds: f64,
    /// "completed", "interrupted", or the error that stopped it.
    pub ended_because: String,
    pub command_line: Vec<String>,
    pub scalebench_version: String,
    pub scalebench_commit: Option<String>,
    pub client_library: String,
    pub target: Target,
    pub plan: Plan,
    pub hardware: Hardware,
    pub servers: Vec<ServerIdent>,
    pub host_before: HostLoad,
    pub host_after: HostLoad,
    pub varz_before: Vec<VarzSnapshot>,
    pub varz_after: Vec<VarzSnapshot>,
    pub server_processes: Vec<ServerProcess>,
    pub throughput: Vec<ThroughputRow>,
    pub delay: Vec<DelayRow>,
    pub hypotheses: Vec<Hypothesis>,
    pub charts: Vec<ChartFile>,
    pub notes: Vec<String>,
}

pub const SCHEMA: &str = "scalebench.study.nats/1";
pub const CLIENT_LIBRARY: &str = "async-nats 0.49 (Rust, tokio; 2 worker threads)";
