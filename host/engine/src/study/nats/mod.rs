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
//!
//! One concept per file: `plan` (the rows to run), `record` (what
//! study.json holds), `measure` (running the rows in order), `client`
//! (connections, payloads, warm-up), `core_rows`, `jetstream` and `delay`
//! (one kind of row each). This module holds the command's arguments and
//! its entry points.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use local_stack::nats::{NatsCluster, NatsOptions};

use crate::clock::utc_now;
use crate::error::UsageError;

/// Outstanding JetStream acks allowed per publisher in `async` rows.
pub use scalebench_results::study::ACK_WINDOW;

pub use super::nats_args::StudyNatsArgs;

mod client;
mod core_rows;
mod delay;
mod jetstream;
mod measure;
pub use scalebench_results::study::{plan, record};

pub use plan::{CoreSpec, FloodSpec, JsSpec, Plan};
pub use record::{
    ChartFile, DelayRow, HostLoad, Hypothesis, ServerIdent, ServerProcess, StudyResult, Target, ThroughputRow,
    VarzSnapshot, CLIENT_LIBRARY, SCHEMA,
};

use measure::{measure, Collected};

fn split_urls(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect()
}

/// Run the study; returns the run directory (`<results-dir>/<run-id>`).
/// Starts the local cluster on the calling thread (its children die with
/// that thread: call it from a long-lived thread, not `spawn_blocking`).
/// What draws the study's report from its record, in the results
/// directory: the hypotheses' verdicts and the charts go into the record
/// (written as study.json after it), report.md beside it. The report crate
/// provides it; the engine draws nothing itself.
pub type StudyReport<'a> = &'a dyn Fn(&mut StudyResult, &Path) -> anyhow::Result<()>;

/// Long on purpose: the study's script: the servers up, the rows measured, the record written, the servers down whatever happened; each row kind is a file of its own.
pub fn run_study(args: StudyNatsArgs, report: StudyReport) -> anyhow::Result<PathBuf> {
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
    let hardware = crate::results::Hardware::describe(&out_dir);
    tracing::info!("study nats: results go to {}", out_dir.display());

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
            tracing::info!("study nats: starting {} nats-server node(s) on 127.0.0.1 …", args.nodes);
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

    let rt = crate::async_runtime::two_threads()?;
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
    report(&mut result, &out_dir)?;
    let json = serde_json::to_string_pretty(&result)?;
    write_atomic(&out_dir.join("study.json"), json.as_bytes())?;
    tracing::info!("study nats: {} in {:.1} s", result.ended_because, result.wall_seconds);
    if interrupted {
        return Err(crate::error::Interrupted.into());
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
