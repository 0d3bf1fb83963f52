//! `scalebench study nats`: the NATS messaging study this project started from (core NATS vs
//! JetStream, publisher counts, payload sizes, ping vs flood delay,
//! hypotheses H1–H5) against a local nats-server cluster it starts (or an
//! external one, `--url`). Writes `results/<utc-run-id>/study.json`,
//! `report.md` and `charts/*.svg`.
//!
//! What each row measures (all clients are tasks of this process, every
//! publisher and subscriber on a connection of its own):
//! - core pub/sub: P publishers send N messages in total fire-and-forget
//!   (each its share, then a flush); S subscribers on one subject each
//!   receive every message. Publish rate = N / time to the last publisher's
//!   flush; delivery rate = deliveries (N × S, fan-out counted) / time to the
//!   last delivery; aggregate = (N + deliveries) / the longer of the two.
//!   Connections are spread over the nodes (publisher k on node k mod n,
//!   subscriber k on node k+1 mod n); a warm-up makes sure every subscriber
//!   hears every publisher before the clock starts.
//! - JetStream: a throwaway stream (file or memory, replicas 1 or 3) per
//!   row; P publishers publish N messages in total and count acks. `async`
//!   keeps at most [`ACK_WINDOW`] acks outstanding per publisher; `sync`
//!   waits for each ack before the next publish. Rate = acked / time to the
//!   last ack: unique durable writes, never set beside fan-out counts. The
//!   stream's message count afterwards is recorded as `stored`.
//! - ping: publish one message, wait until the subscriber has it, repeat;
//!   delay = publish call → delivery to the subscriber task, one monotonic
//!   clock (same process). Publisher on node 0, subscriber on the last node
//!   (one route hop in a cluster).
//! - flood: publishers send N messages while the subscriber holds off; then
//!   it drains. Delay per message = publish call → drained: burst queueing
//!   time, not a round trip.
//!
//! Every loop is bounded by a count and by a time cap per row.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use bytes::Bytes;
use futures_util::StreamExt;
use local_stack::nats::{NatsCluster, NatsOptions};
use serde::{Deserialize, Serialize};

use crate::cli::UsageError;
use crate::clock::utc_now;
use crate::results::Hardware;

use super::report;

/// Outstanding JetStream acks allowed per publisher in `async` rows.
pub const ACK_WINDOW: usize = 256;

/// `scalebench study nats`.
#[derive(Debug, Clone, clap::Args)]
pub struct StudyNatsArgs {
    /// Small rows (20k core msgs, 5k JetStream msgs, 300 pings): the whole
    /// study in well under 3 minutes on 2 cores.
    #[arg(long)]
    pub quick: bool,
    /// Nodes of the local nats-server cluster: 3 makes replicas=3 real; 1 runs
    /// standalone JetStream and skips the replicas=3 rows.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Results go to <results-dir>/<utc-run-id>/.
    #[arg(long, default_value = "results")]
    pub results_dir: PathBuf,
    /// An external cluster instead of a local one: comma-separated nats://
    /// URLs. Only throwaway subjects (bench.*) and streams
    /// (SCALEBENCH_STUDY_*) are used; nothing else is touched.
    #[arg(long)]
    pub url: Option<String>,
    /// Monitoring base URLs of the external cluster (comma-separated
    /// http://host:port) for /varz before and after; without them /varz is
    /// not recorded.
    #[arg(long, requires = "url")]
    pub monitor_url: Option<String>,
}

impl StudyNatsArgs {
    /// Defaults as on the command line, results under `results_dir`.
    pub fn new(results_dir: impl Into<PathBuf>) -> Self {
        StudyNatsArgs { quick: false, nodes: 3, results_dir: results_dir.into(), url: None, monitor_url: None }
    }
}

// ---- the plan ---------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoreSpec {
    pub name: String,
    pub publishers: u32,
    pub subscribers: u32,
    pub messages: u64,
    pub payload_bytes: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JsSpec {
    pub name: String,
    /// "file" or "memory".
    pub storage: String,
    pub replicas: u32,
    pub publishers: u32,
    pub messages: u64,
    pub payload_bytes: usize,
    /// Wait for each ack before the next publish (else a window of [`ACK_WINDOW`]).
    pub sync: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FloodSpec {
    pub name: String,
    pub publishers: u32,
    pub messages: u64,
    pub payload_bytes: usize,
}

/// Every row the study runs, with its sizes and bounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub quick: bool,
    pub core: Vec<CoreSpec>,
    pub jetstream: Vec<JsSpec>,
    pub ping_count: u64,
    pub ping_payload_bytes: usize,
    pub floods: Vec<FloodSpec>,
    pub ack_window: usize,
    /// No row publishes longer than this.
    pub row_time_cap_s: f64,
    /// A subscriber that hears nothing for this long after the publishers
    /// finished is done.
    pub idle_timeout_s: f64,
}

fn human(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(100_000) {
        crate::format::compact(n as f64)
    } else if n >= 1_000 && n.is_multiple_of(100) {
        let k = n as f64 / 1000.0;
        format!("{}k", if k.fract() == 0.0 { format!("{k:.0}") } else { format!("{k}") })
    } else {
        n.to_string()
    }
}

fn size_name(b: usize) -> String {
    if b >= 1024 && b.is_multiple_of(1024) {
        format!("{}k", b / 1024)
    } else {
        b.to_string()
    }
}

impl Plan {
    pub fn new(quick: bool) -> Plan {
        let core = |p: u32, s: u32, m: u64, b: usize| CoreSpec {
            name: format!("core-{p}p{s}s-{}-{}", human(m), size_name(b)),
            publishers: p,
            subscribers: s,
            messages: m,
            payload_bytes: b,
        };
        let js = |storage: &str, r: u32, p: u32, m: u64, b: usize, sync: bool| JsSpec {
            name: format!(
                "js-{}-r{r}-{p}p-{}-{}{}",
                if storage == "memory" { "mem" } else { "file" },
                human(m),
                size_name(b),
                if sync { "-sync" } else { "" }
            ),
            storage: storage.into(),
            replicas: r,
            publishers: p,
            messages: m,
            payload_bytes: b,
            sync,
        };
        let flood = |p: u32, m: u64, b: usize| FloodSpec {
            name: format!("flood-{p}p-{}-{}", human(m), size_name(b)),
            publishers: p,
            messages: m,
            payload_bytes: b,
        };
        let (c, c_big, j, j4, j_sync) =
            if quick { (20_000, 20_000, 5_000, 5_000, 1_000) } else { (100_000, 200_000, 20_000, 50_000, 2_000) };
        Plan {
            quick,
            core: vec![core(1, 1, c, 128), core(4, 4, c_big, 128), core(8, 8, c_big, 128), core(4, 4, c, 1024)],
            jetstream: vec![
                js("file", 3, 1, j_sync, 128, true),
                js("file", 3, 1, j, 128, false),
                js("file", 3, 4, j4, 128, false),
                js("file", 3, 1, j, 1024, false),
                js("file", 3, 4, j, 1024, false),
                js("file", 1, 1, j, 128, false),
                js("file", 1, 4, j4, 128, false),
                js("memory", 1, 1, j, 128, false),
                js("memory", 1, 4, j4, 128, false),
                js("memory", 3, 1, j, 128, false),
                js("memory", 3, 4, j4, 128, false),
            ],
            ping_count: if quick { 300 } else { 1_000 },
            ping_payload_bytes: 128,
            floods: if quick {
                vec![flood(1, 5_000, 128), flood(4, 5_000, 1024)]
            } else {
                vec![flood(1, 5_000, 128), flood(4, 10_000, 128), flood(4, 5_000, 1024)]
            },
            ack_window: ACK_WINDOW,
            row_time_cap_s: if quick { 20.0 } else { 60.0 },
            idle_timeout_s: 2.0,
        }
    }
}

// ---- results ----------------------------------------------------------------

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

// ---- entry points -----------------------------------------------------------

/// Run the study and print where its results are.
pub fn run(args: StudyNatsArgs) -> anyhow::Result<()> {
    let dir = run_study(args)?;
    println!("study written to {}", dir.display());
    println!("  report: {}", dir.join("report.md").display());
    println!("  data:   {}", dir.join("study.json").display());
    Ok(())
}

fn split_urls(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect()
}

/// Run the study; returns the run directory (`<results-dir>/<run-id>`).
/// Starts the local cluster on the calling thread (its children die with
/// that thread: call it from a long-lived thread, not `spawn_blocking`).
pub fn run_study(args: StudyNatsArgs) -> anyhow::Result<PathBuf> {
    let external = args.url.as_deref().map(split_urls);
    if let Some(urls) = &external {
        if urls.is_empty() || urls.iter().any(|u| !u.starts_with("nats://")) {
            return Err(UsageError(format!(
                "--url wants comma-separated nats://host:port URLs, got {:?}",
                args.url.as_deref().unwrap_or("")
            ))
            .into());
        }
    } else if !(1..=7).contains(&args.nodes) {
        return Err(UsageError(format!(
            "--nodes {} is out of range: use 1 (standalone) or 3 (replicas=3)",
            args.nodes
        ))
        .into());
    }
    let monitors = args.monitor_url.as_deref().map(split_urls).unwrap_or_default();
    if monitors.iter().any(|u| !u.starts_with("http://")) {
        return Err(UsageError("--monitor-url wants comma-separated http://host:port URLs".into()).into());
    }

    let plan = Plan::new(args.quick);
    let run_id = crate::results::run_id_now();
    let mut out_dir = args.results_dir.join(&run_id);
    for k in 2..100 {
        if !out_dir.exists() {
            break;
        }
        out_dir = args.results_dir.join(format!("{run_id}-{k}"));
    }
    std::fs::create_dir_all(out_dir.join("charts")).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let started = Instant::now();
    let started_utc = utc_now();
    let host_before = host_load();
    let hardware = crate::hardware::describe(&out_dir);
    eprintln!("study nats: results go to {}", out_dir.display());

    // The target: a local cluster (started here, on this thread) or --url.
    let mut notes = Vec::new();
    let store_tmp;
    let mut cluster: Option<NatsCluster> = None;
    let target = match &external {
        Some(urls) => {
            store_tmp = None;
            Target {
                kind: "external".into(),
                nodes: None,
                client_urls: urls.clone(),
                monitor_urls: monitors.clone(),
                server_binary: None,
                store_dir: None,
            }
        }
        None => {
            let tmp = tempfile::Builder::new()
                .prefix("scalebench-study-nats-")
                .tempdir_in(store_parent())
                .context("cannot create a directory for the NATS stores")?;
            eprintln!("study nats: starting {} nats-server node(s) on 127.0.0.1 …", args.nodes);
            let c = NatsCluster::start(NatsOptions::new(tmp.path(), args.nodes)).map_err(|e| anyhow!("{e}"))?;
            let t = Target {
                kind: "local".into(),
                nodes: Some(args.nodes),
                client_urls: c.client_urls(),
                monitor_urls: c.monitor_urls(),
                server_binary: local_stack::nats::server_version(Some(c.bin())).ok(),
                store_dir: Some(
                    c.store_dir(0).parent().and_then(Path::parent).unwrap_or(tmp.path()).display().to_string(),
                ),
            };
            cluster = Some(c);
            store_tmp = Some(tmp);
            t
        }
    };
    let local_nodes = target.nodes;
    let tag = run_tag(&run_id);

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let varz_before = rt.block_on(snapshot_varz(&target.monitor_urls));
    let proc_before = cluster.as_ref().map(|c| c.sample_processes()).unwrap_or_default();
    let measure_start = Instant::now();

    let mut collected = Collected::default();
    let interrupted = rt.block_on(async {
        tokio::select! {
            r = measure(&target.client_urls, &plan, &tag, local_nodes, &mut collected) => { if let Err(e) = r { collected.fatal = Some(format!("{e:#}")); } false }
            _ = tokio::signal::ctrl_c() => true,
        }
    });
    let measure_wall = measure_start.elapsed().as_secs_f64();
    let varz_after = rt.block_on(snapshot_varz(&target.monitor_urls));
    let proc_after = cluster.as_ref().map(|c| c.sample_processes()).unwrap_or_default();
    let host_after = host_load();
    drop(rt);

    let server_processes: Vec<ServerProcess> = proc_after
        .iter()
        .map(|a| {
            let before =
                proc_before.iter().find(|b| b.node == a.node && b.pid == a.pid).map(|b| b.cpu_seconds).unwrap_or(0.0);
            let cpu = a.cpu_seconds - before;
            ServerProcess {
                node: a.name.clone(),
                pid: a.pid,
                cpu_seconds: cpu,
                cpu_percent: if measure_wall > 0.0 { cpu / measure_wall * 100.0 } else { 0.0 },
                rss_bytes_after: a.rss_bytes,
            }
        })
        .collect();

    if let Some(c) = cluster.take() {
        let logs = out_dir.join("logs");
        let _ = std::fs::create_dir_all(&logs);
        for i in 0..c.node_count() {
            let _ = std::fs::copy(c.log_path(i), logs.join(format!("nats-n{i}.log")));
        }
        c.stop();
        notes.push("nats-server logs of the local nodes are under logs/.".into());
    }
    drop(store_tmp);

    let ended_because = if interrupted {
        "interrupted".to_string()
    } else if let Some(e) = &collected.fatal {
        format!("error: {e}")
    } else {
        "completed".to_string()
    };
    let mut result = StudyResult {
        schema: SCHEMA.into(),
        run_id: out_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or(run_id),
        started_utc,
        finished_utc: utc_now(),
        wall_seconds: started.elapsed().as_secs_f64(),
        ended_because,
        command_line: std::env::args().collect(),
        scalebench_version: env!("CARGO_PKG_VERSION").into(),
        scalebench_commit: crate::hardware::git_commit(Path::new(env!("CARGO_MANIFEST_DIR"))),
        client_library: CLIENT_LIBRARY.into(),
        target,
        plan,
        hardware,
        servers: collected.servers,
        host_before,
        host_after,
        varz_before,
        varz_after,
        server_processes,
        throughput: collected.throughput,
        delay: collected.delay,
        hypotheses: Vec::new(),
        charts: Vec::new(),
        notes,
    };
    result.hypotheses = report::evaluate_hypotheses(&result);
    result.charts = report::write_charts(&result, &out_dir)?;
    let json = serde_json::to_string_pretty(&result)?;
    write_atomic(&out_dir.join("study.json"), json.as_bytes())?;
    write_atomic(&out_dir.join("report.md"), report::markdown(&result).as_bytes())?;
    eprintln!("study nats: {} in {:.1} s", result.ended_because, result.wall_seconds);
    if interrupted {
        return Err(crate::cli::Interrupted.into());
    }
    if let Some(e) = collected.fatal {
        return Err(anyhow!("the study stopped early ({e}); what was measured is in {}", out_dir.display()));
    }
    Ok(out_dir)
}

/// JetStream stores go to /var/tmp (disk) when it exists: /tmp may be tmpfs,
/// which would make "file" storage RAM.
fn store_parent() -> PathBuf {
    let var_tmp = Path::new("/var/tmp");
    if var_tmp.is_dir() {
        var_tmp.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    crate::atomic_file::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// A token for subjects and stream names: the run id's digits plus the pid.
fn run_tag(run_id: &str) -> String {
    let digits: String = run_id.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    format!("{digits}{}", std::process::id())
}

fn host_load() -> HostLoad {
    let raw = std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    let load_1m = raw.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
    HostLoad { at_utc: utc_now(), loadavg: raw, load_1m }
}

async fn snapshot_varz(monitors: &[String]) -> Vec<VarzSnapshot> {
    let monitors = monitors.to_vec();
    tokio::task::spawn_blocking(move || {
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(3)).build();
        monitors
            .iter()
            .map(|base| {
                let url = format!("{}/varz", base.trim_end_matches('/'));
                let got = agent
                    .get(&url)
                    .call()
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.into_string().map_err(|e| e.to_string()))
                    .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).map_err(|e| e.to_string()));
                match got {
                    Ok(v) => varz_snapshot(base, &v),
                    Err(e) => VarzSnapshot { monitor_url: base.clone(), error: Some(e), ..Default::default() },
                }
            })
            .collect()
    })
    .await
    .unwrap_or_default()
}

fn varz_snapshot(base: &str, v: &serde_json::Value) -> VarzSnapshot {
    let u = |k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
    VarzSnapshot {
        monitor_url: base.into(),
        server_name: v.get("server_name").and_then(|x| x.as_str()).unwrap_or("").into(),
        version: v.get("version").and_then(|x| x.as_str()).unwrap_or("").into(),
        connections: u("connections"),
        routes: u("routes"),
        in_msgs: u("in_msgs"),
        out_msgs: u("out_msgs"),
        in_bytes: u("in_bytes"),
        out_bytes: u("out_bytes"),
        cpu: v.get("cpu").and_then(|x| x.as_f64()).unwrap_or(0.0),
        mem_bytes: u("mem"),
        cores: u("cores"),
        slow_consumers: u("slow_consumers"),
        jetstream: v.get("jetstream").and_then(|j| j.get("config")).is_some(),
        error: None,
    }
}

// ---- measuring --------------------------------------------------------------

#[derive(Default)]
struct Collected {
    servers: Vec<ServerIdent>,
    throughput: Vec<ThroughputRow>,
    delay: Vec<DelayRow>,
    fatal: Option<String>,
}

async fn measure(
    urls: &[String],
    plan: &Plan,
    tag: &str,
    local_nodes: Option<usize>,
    out: &mut Collected,
) -> anyhow::Result<()> {
    // Who is there: one connection per URL.
    for (i, url) in urls.iter().enumerate() {
        let c = connect(url, &format!("study-info-{i}"), 1024).await?;
        let info = c.server_info();
        out.servers.push(ServerIdent {
            url: url.clone(),
            server_name: info.server_name.clone(),
            version: info.version.clone(),
            cluster: info.cluster.clone(),
            jetstream: info.jetstream,
        });
        drop(c);
    }
    // A row that outlives this (a server gone, a client stuck) is cut off:
    // every row is bounded in time, not only in count.
    let row_bound = Duration::from_secs_f64(plan.row_time_cap_s * 2.0 + 30.0);
    let bounded = |e: tokio::time::error::Elapsed| anyhow!("the row did not finish within {row_bound:?} ({e})");
    for spec in &plan.core {
        let row = match tokio::time::timeout(row_bound, core_row(urls, tag, spec, plan))
            .await
            .map_err(bounded)
            .and_then(|r| r)
        {
            Ok(r) => r,
            Err(e) => failed_row(spec.name.clone(), "core", format!("{e:#}")),
        };
        progress(&row);
        out.throughput.push(row);
    }
    for (i, spec) in plan.jetstream.iter().enumerate() {
        let row = if local_nodes.is_some_and(|n| (spec.replicas as usize) > n) {
            let mut r = js_row_shell(spec);
            r.skipped = Some(format!(
                "replicas={} needs at least {} JetStream servers; this run has {} node(s) (--nodes {})",
                spec.replicas,
                spec.replicas,
                local_nodes.unwrap_or(0),
                local_nodes.unwrap_or(0)
            ));
            r
        } else {
            match tokio::time::timeout(row_bound, js_row(urls, tag, i, spec, plan))
                .await
                .map_err(bounded)
                .and_then(|r| r)
            {
                Ok(r) => r,
                Err(e) => {
                    let mut r = js_row_shell(spec);
                    r.errors = 1;
                    r.first_error = Some(format!("{e:#}"));
                    r
                }
            }
        };
        progress(&row);
        out.throughput.push(row);
    }
    let ping = tokio::time::timeout(row_bound, ping_row(urls, tag, plan))
        .await
        .map_err(bounded)
        .and_then(|r| r)
        .unwrap_or_else(|e| DelayRow {
            name: format!("ping-{}-{}", human(plan.ping_count), size_name(plan.ping_payload_bytes)),
            kind: "ping".into(),
            error: Some(format!("{e:#}")),
            ..Default::default()
        });
    progress_delay(&ping);
    out.delay.push(ping);
    for spec in &plan.floods {
        let row = tokio::time::timeout(row_bound, flood_row(urls, tag, spec, plan))
            .await
            .map_err(bounded)
            .and_then(|r| r)
            .unwrap_or_else(|e| DelayRow {
                name: spec.name.clone(),
                kind: "flood".into(),
                publishers: spec.publishers,
                payload_bytes: spec.payload_bytes,
                count: spec.messages,
                error: Some(format!("{e:#}")),
                ..Default::default()
            });
        progress_delay(&row);
        out.delay.push(row);
    }
    Ok(())
}

fn progress(r: &ThroughputRow) {
    if let Some(s) = &r.skipped {
        eprintln!("  {:<28} skipped: {s}", r.name);
    } else if r.kind == "core" {
        eprintln!(
            "  {:<28} pub {:>10.0} msgs/s  deliveries {:>10.0} msgs/s  ({} of {} delivered){}",
            r.name,
            r.pub_msgs_per_s,
            r.sub_msgs_per_s.unwrap_or(0.0),
            r.delivered,
            r.expected_deliveries,
            r.first_error.as_deref().map(|e| format!("  error: {e}")).unwrap_or_default()
        );
    } else {
        eprintln!(
            "  {:<28} acked {:>9.0} writes/s  ({} acked, {} stored, {} errors){}",
            r.name,
            r.pub_msgs_per_s,
            r.published,
            r.stored.map(|s| s.to_string()).unwrap_or_else(|| "?".into()),
            r.errors,
            r.first_error.as_deref().map(|e| format!("  error: {e}")).unwrap_or_default()
        );
    }
}

fn progress_delay(r: &DelayRow) {
    match &r.error {
        Some(e) => eprintln!("  {:<28} error: {e}", r.name),
        None => eprintln!(
            "  {:<28} p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms  ({} of {})",
            r.name, r.p50_ms, r.p99_ms, r.max_ms, r.received, r.count
        ),
    }
}

fn failed_row(name: String, kind: &str, error: String) -> ThroughputRow {
    ThroughputRow { name, kind: kind.into(), errors: 1, first_error: Some(error), ..Default::default() }
}

async fn connect(url: &str, name: &str, sub_capacity: usize) -> anyhow::Result<async_nats::Client> {
    async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5))
        .request_timeout(Some(Duration::from_secs(10)))
        .max_reconnects(3)
        .ignore_discovered_servers()
        .subscription_capacity(sub_capacity)
        .connect(url)
        .await
        .with_context(|| format!("cannot connect to {url}"))
}

/// Payload: byte 0 'M', bytes 1..9 sequence (LE), 9..13 publisher, the
/// rest 'x' (at least 13 bytes). A warm-up message starts with '~' and is
/// never counted.
fn payload(size: usize, publisher: u32, seq: u64) -> Bytes {
    let mut v = vec![b'x'; size.max(13)];
    v[0] = b'M';
    v[1..9].copy_from_slice(&seq.to_le_bytes());
    v[9..13].copy_from_slice(&publisher.to_le_bytes());
    Bytes::from(v)
}

fn warmup_payload(publisher: u32) -> Bytes {
    Bytes::from(format!("~warmup {publisher}"))
}

fn is_warmup(p: &[u8]) -> bool {
    p.first() == Some(&b'~')
}

fn parse_seq(p: &[u8]) -> Option<(u32, u64)> {
    if p.len() < 13 || p[0] != b'M' {
        return None;
    }
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&p[1..9]);
    let mut pb = [0u8; 4];
    pb.copy_from_slice(&p[9..13]);
    Some((u32::from_le_bytes(pb), u64::from_le_bytes(seq)))
}

/// Until every subscriber heard a warm-up from every publisher (interest
/// has reached every node); bounded to 10 s.
async fn warm_up(
    pubs: &[async_nats::Client],
    subs: &mut [async_nats::Subscriber],
    subject: &async_nats::Subject,
) -> anyhow::Result<()> {
    let mut seen = vec![vec![false; pubs.len()]; subs.len()];
    let deadline = Instant::now() + Duration::from_secs(10);
    for _round in 0..200 {
        for (k, p) in pubs.iter().enumerate() {
            p.publish(subject.clone(), warmup_payload(k as u32)).await?;
            p.flush().await?;
        }
        for (si, s) in subs.iter_mut().enumerate() {
            while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(30), s.next()).await {
                if let Some(k) = std::str::from_utf8(&m.payload)
                    .ok()
                    .and_then(|t| t.strip_prefix("~warmup "))
                    .and_then(|k| k.parse::<usize>().ok())
                {
                    if k < pubs.len() {
                        seen[si][k] = true;
                    }
                }
            }
        }
        if seen.iter().all(|r| r.iter().all(|&b| b)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            break;
        }
    }
    let missing: usize = seen.iter().map(|r| r.iter().filter(|b| !**b).count()).sum();
    Err(anyhow!("warm-up: {missing} publisher→subscriber pair(s) never heard each other within 10 s (interest did not propagate)"))
}

fn mib(bytes: f64) -> f64 {
    bytes / (1024.0 * 1024.0)
}

fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

fn node_of(urls: &[String], k: usize) -> &str {
    &urls[k % urls.len()]
}

async fn core_row(urls: &[String], tag: &str, spec: &CoreSpec, plan: &Plan) -> anyhow::Result<ThroughputRow> {
    let subject = async_nats::Subject::from(format!("bench.core.{tag}.{}", spec.name));
    let cap = (spec.messages as usize + 4096).clamp(65_536, 1 << 21);
    let mut sub_clients = Vec::new();
    let mut subs = Vec::new();
    for k in 0..spec.subscribers as usize {
        let c = connect(node_of(urls, k + 1), &format!("study-{}-sub{k}", spec.name), cap).await?;
        let s = c.subscribe(subject.clone()).await?;
        c.flush().await?;
        sub_clients.push(c);
        subs.push(s);
    }
    let mut pubs = Vec::new();
    for k in 0..spec.publishers as usize {
        pubs.push(connect(node_of(urls, k), &format!("study-{}-pub{k}", spec.name), 1024).await?);
    }
    warm_up(&pubs, &mut subs, &subject).await?;
    let landed = landed_on(&pubs, &sub_clients);

    let cap_time = Duration::from_secs_f64(plan.row_time_cap_s);
    let idle = Duration::from_secs_f64(plan.idle_timeout_s);
    let t0 = Instant::now();
    let deadline = t0 + cap_time;
    let (stop_tx, _) = tokio::sync::watch::channel(false);
    let counters: Vec<Arc<AtomicU64>> = (0..subs.len()).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let mut sub_tasks = Vec::new();
    for (k, mut s) in subs.into_iter().enumerate() {
        let counter = counters[k].clone();
        let mut stop = stop_tx.subscribe();
        let expected = spec.messages;
        sub_tasks.push(tokio::spawn(async move {
            let mut count = 0u64;
            let mut last = None;
            loop {
                tokio::select! {
                    biased;
                    m = s.next() => match m {
                        Some(m) => {
                            if !is_warmup(&m.payload) {
                                count += 1;
                                last = Some(Instant::now());
                                counter.store(count, Ordering::Relaxed);
                                if count >= expected { break; }
                            }
                        }
                        None => break,
                    },
                    _ = stop.changed() => break,
                }
            }
            (count, last)
        }));
    }
    let mut pub_tasks = Vec::new();
    for (k, p) in pubs.iter().cloned().enumerate() {
        let share =
            spec.messages / spec.publishers as u64 + u64::from((k as u64) < spec.messages % spec.publishers as u64);
        let subject = subject.clone();
        let body = payload(spec.payload_bytes, k as u32, 0);
        pub_tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let mut sent = 0u64;
            let mut capped = false;
            let mut err = None;
            for i in 0..share {
                if i % 1024 == 0 && Instant::now() > deadline {
                    capped = true;
                    break;
                }
                if let Err(e) = p.publish(subject.clone(), body.clone()).await {
                    err = Some(e.to_string());
                    break;
                }
                sent += 1;
            }
            if let Err(e) = p.flush().await {
                err.get_or_insert(e.to_string());
            }
            (sent, start.elapsed(), Instant::now(), capped, err)
        }));
    }
    let mut published = 0;
    let mut pub_end = t0;
    let mut per_pub = Vec::new();
    let mut capped = false;
    let mut errors = 0;
    let mut first_error = None;
    for t in pub_tasks {
        let (sent, took, end, c, err) = t.await?;
        published += sent;
        pub_end = pub_end.max(end);
        per_pub.push(rate(sent, took.as_secs_f64()));
        capped |= c;
        if let Some(e) = err {
            errors += 1;
            first_error.get_or_insert(e);
        }
    }
    // Wait for the deliveries: all in, or nothing new for `idle`, or the cap.
    let expected_total = published * spec.subscribers as u64;
    let mut last_total = 0;
    let mut last_change = Instant::now();
    let hard_stop = deadline + idle;
    for _ in 0..100_000 {
        let total: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        if total >= expected_total || Instant::now() > hard_stop {
            break;
        }
        if total != last_total {
            last_total = total;
            last_change = Instant::now();
        } else if last_change.elapsed() > idle {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = stop_tx.send(true);
    let mut delivered = 0;
    let mut sub_end = t0;
    for t in sub_tasks {
        let (count, last) = t.await?;
        delivered += count;
        if let Some(l) = last {
            sub_end = sub_end.max(l);
        }
    }
    for c in pubs.iter().chain(sub_clients.iter()) {
        let _ = c.drain().await;
    }
    let pub_s = (pub_end - t0).as_secs_f64();
    let sub_s = (sub_end - t0).as_secs_f64();
    let size = spec.payload_bytes as f64;
    let mut note = landed;
    if delivered < expected_total {
        note.push_str(&format!("; {} deliveries missing (slow consumer or time cap)", expected_total - delivered));
    }
    Ok(ThroughputRow {
        name: spec.name.clone(),
        kind: "core".into(),
        mode: "core pub/sub".into(),
        storage: None,
        replicas: None,
        publish: "fire-and-forget".into(),
        publishers: spec.publishers,
        subscribers: spec.subscribers,
        payload_bytes: spec.payload_bytes,
        planned: spec.messages,
        published,
        delivered,
        expected_deliveries: expected_total,
        stored: None,
        pub_seconds: pub_s,
        sub_seconds: sub_s,
        pub_msgs_per_s: rate(published, pub_s),
        pub_mib_per_s: mib(rate(published, pub_s) * size),
        sub_msgs_per_s: Some(rate(delivered, sub_s)),
        sub_mib_per_s: Some(mib(rate(delivered, sub_s) * size)),
        aggregate_msgs_per_s: Some(rate(published + delivered, pub_s.max(sub_s))),
        per_publisher_msgs_per_s: per_pub,
        errors,
        first_error,
        capped,
        skipped: None,
        note,
    })
}

/// "pubs on n0,n1; subs on n1,n2" from the connections' INFO.
fn landed_on(pubs: &[async_nats::Client], subs: &[async_nats::Client]) -> String {
    let names =
        |cs: &[async_nats::Client]| cs.iter().map(|c| c.server_info().server_name).collect::<Vec<_>>().join(",");
    if subs.is_empty() {
        format!("publishers on {}", names(pubs))
    } else {
        format!("publishers on {}; subscribers on {}", names(pubs), names(subs))
    }
}

fn js_row_shell(spec: &JsSpec) -> ThroughputRow {
    ThroughputRow {
        name: spec.name.clone(),
        kind: "jetstream".into(),
        mode: format!(
            "jetstream {} r={}, {}",
            spec.storage,
            spec.replicas,
            if spec.sync { "sync acks".to_string() } else { format!("async acks (window {ACK_WINDOW})") }
        ),
        storage: Some(spec.storage.clone()),
        replicas: Some(spec.replicas),
        publish: if spec.sync {
            "sync, one ack at a time".into()
        } else {
            format!("async acks, window {ACK_WINDOW} per publisher")
        },
        publishers: spec.publishers,
        subscribers: 0,
        payload_bytes: spec.payload_bytes,
        planned: spec.messages,
        ..Default::default()
    }
}

async fn js_row(urls: &[String], tag: &str, index: usize, spec: &JsSpec, plan: &Plan) -> anyhow::Result<ThroughputRow> {
    use async_nats::jetstream::{self, stream};
    let mut row = js_row_shell(spec);
    let stream_name = format!("SCALEBENCH_STUDY_{tag}_{index}");
    let base = format!("bench.js.{tag}.{index}");
    let admin = connect(&urls[0], &format!("study-{}-admin", spec.name), 1024).await?;
    let js = jetstream::new(admin.clone());
    let config = stream::Config {
        name: stream_name.clone(),
        subjects: vec![format!("{base}.>")],
        storage: if spec.storage == "memory" { stream::StorageType::Memory } else { stream::StorageType::File },
        num_replicas: spec.replicas as usize,
        ..Default::default()
    };
    if let Err(e) = js.create_stream(config).await {
        let msg = e.to_string();
        if msg.contains("insufficient resources") || msg.contains("replicas") {
            row.skipped = Some(format!("the target cannot place {} replicas: {msg}", spec.replicas));
            return Ok(row);
        }
        return Err(anyhow!("create stream {stream_name}: {msg}"));
    }
    let result = js_publish_phase(urls, &base, spec, plan, &mut row).await;
    // Count what the stream holds, then remove it (ours only).
    let mut stored = None;
    if let Ok(mut s) = js.get_stream(&stream_name).await {
        if let Ok(info) = s.info().await {
            stored = Some(info.state.messages);
        }
    }
    if let Err(e) = js.delete_stream(&stream_name).await {
        row.note.push_str(&format!("; could not delete stream {stream_name}: {e}"));
    }
    let _ = admin.drain().await;
    let warmups = result?;
    row.stored = stored.map(|s| s.saturating_sub(warmups));
    Ok(row)
}

/// Publishers, warm-up, the measured phase. Returns the warm-up messages
/// that landed in the stream.
async fn js_publish_phase(
    urls: &[String],
    base: &str,
    spec: &JsSpec,
    plan: &Plan,
    row: &mut ThroughputRow,
) -> anyhow::Result<u64> {
    use async_nats::jetstream;
    let mut clients = Vec::new();
    for k in 0..spec.publishers as usize {
        clients.push(connect(node_of(urls, k), &format!("study-{}-pub{k}", spec.name), 1024).await?);
    }
    row.note = landed_on(&clients, &[]);
    let contexts: Vec<jetstream::Context> = clients.iter().cloned().map(jetstream::new).collect();
    // Warm-up: one acked publish per publisher (the stream leader may still be settling).
    let warm_subject = async_nats::Subject::from(format!("{base}.w"));
    let mut warmups = 0u64;
    for (k, js) in contexts.iter().enumerate() {
        let mut last_err = String::new();
        let mut ok = false;
        for _ in 0..50 {
            match js.publish(warm_subject.clone(), warmup_payload(k as u32)).await {
                Ok(f) => match f.await {
                    Ok(_) => {
                        ok = true;
                        break;
                    }
                    Err(e) => last_err = e.to_string(),
                },
                Err(e) => last_err = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if !ok {
            return Err(anyhow!("warm-up publish of publisher {k} never acked: {last_err}"));
        }
        warmups += 1;
    }

    let subject = async_nats::Subject::from(format!("{base}.m"));
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(plan.row_time_cap_s);
    let mut tasks = Vec::new();
    for (k, js) in contexts.into_iter().enumerate() {
        let share =
            spec.messages / spec.publishers as u64 + u64::from((k as u64) < spec.messages % spec.publishers as u64);
        let subject = subject.clone();
        let body = payload(spec.payload_bytes, k as u32, 0);
        let sync = spec.sync;
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let mut acked = 0u64;
            let mut errors = 0u64;
            let mut first_err: Option<String> = None;
            let mut capped = false;
            let mut window = VecDeque::with_capacity(ACK_WINDOW);
            for i in 0..share {
                if i % 64 == 0 && Instant::now() > deadline {
                    capped = true;
                    break;
                }
                let fut = match js.publish(subject.clone(), body.clone()).await {
                    Ok(f) => f,
                    Err(e) => {
                        errors += 1;
                        first_err.get_or_insert(e.to_string());
                        continue;
                    }
                };
                if sync {
                    match fut.await {
                        Ok(_) => acked += 1,
                        Err(e) => {
                            errors += 1;
                            first_err.get_or_insert(e.to_string());
                        }
                    }
                } else {
                    window.push_back(fut);
                    if window.len() >= ACK_WINDOW {
                        if let Some(f) = window.pop_front() {
                            match f.await {
                                Ok(_) => acked += 1,
                                Err(e) => {
                                    errors += 1;
                                    first_err.get_or_insert(e.to_string());
                                }
                            }
                        }
                    }
                }
            }
            while let Some(f) = window.pop_front() {
                match f.await {
                    Ok(_) => acked += 1,
                    Err(e) => {
                        errors += 1;
                        first_err.get_or_insert(e.to_string());
                    }
                }
            }
            (acked, errors, first_err, capped, start.elapsed(), Instant::now())
        }));
    }
    let mut end = t0;
    for t in tasks {
        let (acked, errors, first_err, capped, took, fin) = t.await?;
        row.published += acked;
        row.errors += errors;
        if row.first_error.is_none() {
            row.first_error = first_err;
        }
        row.capped |= capped;
        row.per_publisher_msgs_per_s.push(rate(acked, took.as_secs_f64()));
        end = end.max(fin);
    }
    let secs = (end - t0).as_secs_f64();
    row.pub_seconds = secs;
    row.pub_msgs_per_s = rate(row.published, secs);
    row.pub_mib_per_s = mib(row.pub_msgs_per_s * spec.payload_bytes as f64);
    for c in clients {
        let _ = c.drain().await;
    }
    Ok(warmups)
}

fn delay_stats(name: &str, kind: &str, hist: &hdrhistogram::Histogram<u64>) -> DelayRow {
    let ms = |ns: u64| ns as f64 / 1e6;
    let n = hist.len();
    DelayRow {
        name: name.into(),
        kind: kind.into(),
        received: n,
        min_ms: if n > 0 { ms(hist.min()) } else { 0.0 },
        avg_ms: if n > 0 { hist.mean() / 1e6 } else { 0.0 },
        p50_ms: ms(hist.value_at_quantile(0.50)),
        p90_ms: ms(hist.value_at_quantile(0.90)),
        p99_ms: ms(hist.value_at_quantile(0.99)),
        max_ms: ms(hist.max()),
        ..Default::default()
    }
}

fn new_hist() -> anyhow::Result<hdrhistogram::Histogram<u64>> {
    // 1 ns .. 10 min, 3 significant digits.
    hdrhistogram::Histogram::<u64>::new_with_bounds(1, 600_000_000_000, 3).map_err(|e| anyhow!("histogram: {e}"))
}

async fn ping_row(urls: &[String], tag: &str, plan: &Plan) -> anyhow::Result<DelayRow> {
    let name = format!("ping-{}-{}", human(plan.ping_count), size_name(plan.ping_payload_bytes));
    let subject = async_nats::Subject::from(format!("bench.lat.{tag}.ping"));
    let sub_client = connect(&urls[urls.len() - 1], "study-ping-sub", 65_536).await?;
    let mut sub = sub_client.subscribe(subject.clone()).await?;
    sub_client.flush().await?;
    let pub_client = connect(&urls[0], "study-ping-pub", 1024).await?;
    warm_up(std::slice::from_ref(&pub_client), std::slice::from_mut(&mut sub), &subject).await?;
    let landed = format!(
        "publisher on {}, subscriber on {}",
        pub_client.server_info().server_name,
        sub_client.server_info().server_name
    );

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u64, Instant)>();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let reader = tokio::spawn(async move {
        loop {
            tokio::select! {
                m = sub.next() => match m {
                    Some(m) => {
                        let at = Instant::now();
                        if let Some((_, seq)) = parse_seq(&m.payload) {
                            if tx.send((seq, at)).is_err() { break; }
                        }
                    }
                    None => break,
                },
                _ = stop_rx.changed() => break,
            }
        }
    });
    let mut hist = new_hist()?;
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(plan.row_time_cap_s);
    let mut lost = 0u64;
    let mut sent_n = 0u64;
    for seq in 0..plan.ping_count {
        if Instant::now() > deadline {
            break;
        }
        let body = payload(plan.ping_payload_bytes, 0, seq);
        let sent = Instant::now();
        pub_client.publish(subject.clone(), body).await?;
        sent_n += 1;
        // Wait for this one (older ones that arrive late are skipped).
        let wait_until = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            match tokio::time::timeout_at(wait_until, rx.recv()).await {
                Ok(Some((s, at))) if s == seq => {
                    hist.record((at - sent).as_nanos().max(1) as u64).ok();
                    break;
                }
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => {
                    lost += 1;
                    break;
                }
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let _ = stop_tx.send(true);
    let _ = reader.await;
    let _ = pub_client.drain().await;
    let _ = sub_client.drain().await;
    let mut row = delay_stats(&name, "ping", &hist);
    row.publishers = 1;
    row.payload_bytes = plan.ping_payload_bytes;
    row.count = sent_n;
    row.seconds = secs;
    row.note = format!(
        "{landed}; sequential: next publish after this one arrived{}",
        if lost > 0 { format!("; {lost} not seen within 2 s") } else { String::new() }
    );
    Ok(row)
}

async fn flood_row(urls: &[String], tag: &str, spec: &FloodSpec, plan: &Plan) -> anyhow::Result<DelayRow> {
    let subject = async_nats::Subject::from(format!("bench.lat.{tag}.{}", spec.name));
    let cap = (spec.messages as usize + 4096).clamp(65_536, 1 << 21);
    let sub_client = connect(&urls[urls.len() - 1], &format!("study-{}-sub", spec.name), cap).await?;
    let mut sub = sub_client.subscribe(subject.clone()).await?;
    sub_client.flush().await?;
    let mut pubs = Vec::new();
    for k in 0..spec.publishers as usize {
        pubs.push(connect(node_of(urls, k), &format!("study-{}-pub{k}", spec.name), 1024).await?);
    }
    warm_up(&pubs, std::slice::from_mut(&mut sub), &subject).await?;
    let landed = landed_on(&pubs, std::slice::from_ref(&sub_client));

    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(plan.row_time_cap_s);
    let mut tasks = Vec::new();
    for (k, p) in pubs.iter().cloned().enumerate() {
        let share =
            spec.messages / spec.publishers as u64 + u64::from((k as u64) < spec.messages % spec.publishers as u64);
        let subject = subject.clone();
        let size = spec.payload_bytes;
        tasks.push(tokio::spawn(async move {
            let mut sent = Vec::with_capacity(share as usize);
            for seq in 0..share {
                if seq % 256 == 0 && Instant::now() > deadline {
                    break;
                }
                let body = payload(size, k as u32, seq);
                sent.push(Instant::now());
                if p.publish(subject.clone(), body).await.is_err() {
                    sent.pop();
                    break;
                }
            }
            let _ = p.flush().await;
            sent
        }));
    }
    let mut sent: Vec<Vec<Instant>> = Vec::new();
    for t in tasks {
        sent.push(t.await?);
    }
    let total: u64 = sent.iter().map(|v| v.len() as u64).sum();
    // Now drain: every message's delay is publish call → taken off the subscription.
    let mut hist = new_hist()?;
    let idle = Duration::from_secs_f64(plan.idle_timeout_s);
    let hard_stop = tokio::time::Instant::now() + Duration::from_secs_f64(plan.row_time_cap_s) + idle;
    let mut got = 0u64;
    while got < total {
        let wait = (tokio::time::Instant::now() + idle).min(hard_stop);
        match tokio::time::timeout_at(wait, sub.next()).await {
            Ok(Some(m)) => {
                let at = Instant::now();
                if let Some((k, seq)) = parse_seq(&m.payload) {
                    if let Some(s) = sent.get(k as usize).and_then(|v| v.get(seq as usize)) {
                        hist.record((at - *s).as_nanos().max(1) as u64).ok();
                        got += 1;
                    }
                }
            }
            _ => break,
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    for c in pubs.iter().chain(std::iter::once(&sub_client)) {
        let _ = c.drain().await;
    }
    let mut row = delay_stats(&spec.name, "flood", &hist);
    row.publishers = spec.publishers;
    row.payload_bytes = spec.payload_bytes;
    row.count = total;
    row.seconds = secs;
    row.note = format!(
        "{landed}; subscriber drained after the publishers finished{}",
        if got < total { format!("; {} not seen", total - got) } else { String::new() }
    );
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sizes() {
        assert_eq!(human(20_000), "20k");
        assert_eq!(human(1_500), "1.5k");
        assert_eq!(human(300), "300");
        assert_eq!(size_name(1024), "1k");
        assert_eq!(size_name(128), "128");
        let q = Plan::new(true);
        assert_eq!(q.core[0].name, "core-1p1s-20k-128");
        assert_eq!(q.jetstream[0].name, "js-file-r3-1p-1k-128-sync");
        assert!(q.jetstream.iter().any(|j| j.name == "js-mem-r1-4p-5k-128"));
    }

    #[test]
    fn payload_round_trips_and_is_never_a_warmup() {
        for seq in [0u64, 126, b'~' as u64, 1 << 40] {
            let p = payload(128, 3, seq);
            assert_eq!(p.len(), 128);
            assert!(!is_warmup(&p));
            assert_eq!(parse_seq(&p), Some((3, seq)));
        }
        assert!(is_warmup(&warmup_payload(2)));
        assert_eq!(parse_seq(&warmup_payload(2)), None);
    }
}
