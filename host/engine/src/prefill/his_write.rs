//! Prefill of Haystack targets (`his-write` plans): history goes in as live
//! readings do, as the adapter's own messages over the host's HTTP
//! transport: first the adapter's topology (the records; it leaves out
//! those the server holds), then `encode` of past readings,
//! `readings-per-request` consecutive readings of one point at a time, so
//! each request is one point's plain hisWrite grid. Every message must be
//! acknowledged (2xx and the adapter's `judge`); one that is not stops the
//! job with the server's answer.
//!
//! A Haystack server has no transaction to hold a progress marker, so the
//! job keeps its window and progress in a file (`<results>/prefill-jobs/`),
//! advanced only after every message of a chunk is acknowledged:
//! - a rerun of a finished job writes nothing;
//! - Ctrl-C finishes the chunk in flight; a rerun resumes after it. A chunk
//!   cut short (a second Ctrl-C, an error) is written again whole, which
//!   adds nothing twice: hisWrite keeps one reading per (point, timestamp);
//! - before trusting a file the host asks the server, through the adapter's
//!   own `stored` count, for the first and the last interval the file says
//!   are written; a server that lost them (restarted, emptied, another
//!   server on the same address) gets a new job, never a silent gap.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use plugin_runtime::history_types::HisWritePlan;
use plugin_runtime::types::{Readings, TagInfo, Window};
use plugin_runtime::{TargetAdapter, ValueModel, POINTS_PER_CALL};
use serde::{Deserialize, Serialize};

use super::{err, ms_to_utc, window, Destination, MoreAdapters, Progress, Report, Spec, CHUNK_ROWS};
use crate::loadgen::{check_encoded, split_encoded};
use crate::transport::http::{AdapterRules, HttpConfig, HttpTransport};
use crate::transport::Transport as _;
use crate::transport::{AckCounts, Carries, Message};

/// Readings asked of the model and the adapter per call.
const READINGS_PER_CALL: u64 = 1 << 16;
/// Connections and requests in flight per connection: enough to keep a
/// server busy, few enough not to bury it (prefill is not a load test).
const CONNECTIONS: u32 = 2;
const WINDOW: usize = 8;
/// Longest wait for the answers of one chunk after its last request.
const CHUNK_DRAIN: Duration = Duration::from_secs(600);

/// A job's window and progress, kept in its file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct JobFile {
    key: String,
    start_ms: i64,
    end_ms: i64,
    intervals_total: u64,
    intervals_done: u64,
    rows_written: u64,
}

/// The job's key: what decides which readings it writes, and where.
fn job_key(spec: &Spec, plan: &HisWritePlan, base: &str) -> String {
    format!(
        "{} ({base}) target={} params={} {}",
        plan.service,
        spec.target_name,
        spec.target_params.trim(),
        spec.readings_key()
    )
}

/// The job's file: named by a 64-bit FNV-1a hash of its key (stable across
/// builds, unlike std's hasher); the key inside it is compared in full.
fn job_path(dir: &Path, key: &str) -> PathBuf {
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    dir.join(format!("{h:016x}.json"))
}

fn save(path: &Path, job: &JobFile) -> anyhow::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| {
            err(
                format!("cannot create {}: {e}", d.display()),
                "check the results directory (--results-dir) is writable",
            )
        })?;
    }
    let text = serde_json::to_string_pretty(job)? + "\n";
    crate::atomic_file::write(path, text.as_bytes()).map_err(|e| {
        err(
            format!("cannot write the job file {}: {e}", path.display()),
            "check the results directory (--results-dir) is writable",
        )
    })
}

fn load(path: &Path, key: &str) -> Option<JobFile> {
    let text = std::fs::read_to_string(path).ok()?;
    let job: JobFile = serde_json::from_str(&text).ok()?;
    (job.key == key && job.intervals_done <= job.intervals_total).then_some(job)
}

/// The model's tags for every point, asked in slices.
fn all_tags(model: &mut ValueModel, spec: &Spec) -> anyhow::Result<Vec<TagInfo>> {
    let mut tags = Vec::with_capacity(spec.points as usize);
    let mut first = 0u32;
    while first < spec.points {
        let count = (spec.points - first).min(POINTS_PER_CALL as u32);
        tags.extend(model.tags(spec.seed, first, count)?);
        first += count;
    }
    Ok(tags)
}

/// Does the server still hold what `job` says is written? Asked through the
/// adapter's own count, on an instance that knows only the first and the
/// last point: both must be stored in the job's first interval and in the
/// last one written.
fn server_holds(
    checker: &mut TargetAdapter,
    tags: &[TagInfo],
    job: &JobFile,
    interval_ms: u64,
) -> anyhow::Result<bool> {
    if job.intervals_done == 0 {
        return Ok(true);
    }
    let mut probe: Vec<TagInfo> = vec![tags[0].clone()];
    if tags.len() > 1 {
        probe.push(tags[tags.len() - 1].clone());
    }
    checker.addresses(&probe).map_err(crate::catalog::user_error)?;
    let want = probe.len() as u64;
    for k in [0, job.intervals_done - 1] {
        let start_ms = job.start_ms + (k * interval_ms) as i64;
        let w = Window { start_ms, end_ms: start_ms + interval_ms as i64 };
        let got: u64 = match checker.stored(w) {
            Ok(per) => per.iter().map(|s| s.count).sum(),
            Err(e) => {
                return Err(err(
                    format!("asking the server for the history an earlier run wrote: {e}"),
                    "check the server is up",
                ))
            }
        };
        if got < want {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What the producer hands the writer: messages, then where the job stands.
enum Work {
    Topology(Vec<Message>),
    Chunk { messages: Vec<Message>, rows: u64, done_after: u64 },
}

/// Run one hisWrite job to completion or until `stop`. Blocking.
///
/// Long on purpose: one job's loop: the resume point, the batch in flight, its answer and the progress share its state.
#[allow(clippy::too_many_arguments)]
pub fn run(
    spec: &Spec,
    model: &mut ValueModel,
    adapter: &mut TargetAdapter,
    more: &mut MoreAdapters<'_>,
    plan: &HisWritePlan,
    dest: &Destination,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
    on_start: &dyn Fn(&Report),
) -> anyhow::Result<Report> {
    let base = dest.http[&plan.service].clone();
    let per_request = plan.readings_per_request.max(1) as u64;
    let key = job_key(spec, plan, &base);
    let path = job_path(&dest.jobs_dir, &key);

    let tags = all_tags(model, spec)?;
    let n = tags.len() as u64;
    let addresses: Vec<Arc<str>> = {
        let mut interned: HashMap<String, Arc<str>> = HashMap::new();
        adapter
            .addresses(&tags)
            .map_err(crate::catalog::user_error)?
            .into_iter()
            .map(|a| interned.entry(a.clone()).or_insert_with(|| Arc::from(a.as_str())).clone())
            .collect()
    };

    let now = crate::clock::now_ms();
    let fresh = || {
        let (s, e, t) = window(spec, now);
        JobFile { key: key.clone(), start_ms: s, end_ms: e, intervals_total: t, intervals_done: 0, rows_written: 0 }
    };
    let mut note = None;
    let job = match load(&path, &key) {
        Some(j) if j.intervals_done > 0 => {
            let mut checker = more("prefill-check")?;
            if server_holds(&mut checker, &tags, &j, spec.interval_ms)? {
                j
            } else {
                note = Some(format!(
                    "the server no longer holds the history an earlier prefill wrote ({}): writing it afresh",
                    path.display()
                ));
                fresh()
            }
        }
        Some(j) => j,
        None => fresh(),
    };
    if let Some(n) = &note {
        tracing::info!("prefill: {n}");
    }
    save(&path, &job)?;

    let mut report = Report {
        target: spec.target_name.clone(),
        model: spec.model_name.clone(),
        destination: format!("{} / hisWrite ({base})", plan.service),
        points: n,
        interval_s: spec.interval_ms as f64 / 1000.0,
        days: spec.days,
        start_ms: job.start_ms,
        end_ms: job.end_ms,
        start_utc: ms_to_utc(job.start_ms),
        end_utc: ms_to_utc(job.end_ms),
        intervals_total: job.intervals_total,
        rows_total: job.intervals_total * n,
        rows_before: job.rows_written,
        resumed: job.intervals_done > 0,
        ..Default::default()
    };
    on_start(&report);

    // The writer: its own runtime, the host's HTTP transport with the
    // adapter's rules on an instance of their own.
    let rules = Arc::new(AdapterRules(Arc::new(Mutex::new(more("prefill-ingest")?))));
    let cfg = HttpConfig {
        bases: dest.http.clone(),
        connections: CONNECTIONS,
        window: WINDOW,
        request_timeout: Duration::from_secs(120),
        channel_batches: 64,
        rules,
    };
    let (tx, rx) = sync_channel::<Work>(2);
    let writer_job = job.clone();
    let writer_progress = progress.clone();
    let writer = std::thread::Builder::new()
        .name("prefill-http".into())
        .spawn(move || write_all(cfg, rx, writer_job, &path, &writer_progress))?;

    let t0 = Instant::now();
    let produced = (|| -> anyhow::Result<()> {
        let topology = adapter.topology(&tags).map_err(crate::catalog::user_error)?;
        let topology = topology
            .into_iter()
            .map(|m| Message {
                address: Arc::from(m.address.as_str()),
                payload: bytes::Bytes::from(m.payload),
                carries: Carries::Topology,
                intended_ns: crate::clock::now_ns(),
            })
            .collect();
        if tx.send(Work::Topology(topology)).is_err() {
            return Ok(()); // the writer stopped; its error is reported below
        }
        drop(tags);
        let period_ms = model.sample_period_ms()?.max(1);
        let per_chunk = (CHUNK_ROWS / n.max(1)).max(1);
        let mut k = job.intervals_done;
        while k < job.intervals_total && !stop.load(Ordering::Relaxed) {
            let count = per_chunk.min(job.intervals_total - k);
            let messages =
                chunk_messages(model, adapter, spec, &addresses, job.start_ms, period_ms, per_request, k, count)?;
            if tx.send(Work::Chunk { messages, rows: count * n, done_after: k + count }).is_err() {
                return Ok(());
            }
            k += count;
        }
        Ok(())
    })();
    drop(tx);
    let written = writer.join().map_err(|_| anyhow::anyhow!("the prefill writer stopped unexpectedly"))?;
    let (added, chunks, intervals_done) = written?;
    produced?;
    report.duration_s = t0.elapsed().as_secs_f64();
    report.rows_added = added;
    report.chunks = chunks;
    report.rows_per_s = if report.duration_s > 0.0 { added as f64 / report.duration_s } else { 0.0 };
    report.complete = intervals_done >= job.intervals_total;
    report.interrupted = stop.load(Ordering::Relaxed) && !report.complete;
    Ok(report)
}

/// Messages of intervals [first, first+count) of every point: runs of
/// `per_request` consecutive readings of one point, point after point.
#[allow(clippy::too_many_arguments)]
fn chunk_messages(
    model: &mut ValueModel,
    adapter: &mut TargetAdapter,
    spec: &Spec,
    addresses: &[Arc<str>],
    start_ms: i64,
    period_ms: u64,
    per_request: u64,
    first: u64,
    count: u64,
) -> anyhow::Result<Vec<Message>> {
    let n = addresses.len() as u64;
    let iv = spec.interval_ms;
    let mut out = Vec::new();
    let mut run = first;
    while run < first + count {
        let len = per_request.min(first + count - run);
        // Points per call: about READINGS_PER_CALL readings, at most a slice.
        let block = (READINGS_PER_CALL / len).clamp(1, POINTS_PER_CALL as u64);
        let mut b0 = 0u64;
        while b0 < n {
            let b = block.min(n - b0);
            // values[j][i]: interval run+j of point b0+i.
            let mut values = Vec::with_capacity(len as usize);
            for j in 0..len {
                let t = start_ms + ((run + j) * iv) as i64;
                values.push(model.sample(spec.seed, b0 as u32, b as u32, t as u64 / period_ms)?);
            }
            let total = (b * len) as usize;
            let mut readings = Readings {
                points: Vec::with_capacity(total),
                values: Vec::with_capacity(total),
                ts_ms: Vec::with_capacity(total),
            };
            for i in 0..b {
                let p = b0 + i;
                for (j, vals) in values.iter().enumerate() {
                    let t = start_ms + ((run + j as u64) * iv) as i64;
                    readings.points.push(p as u32);
                    readings.values.push(vals[i as usize]);
                    readings.ts_ms.push(t + ((p * iv) / n) as i64);
                }
            }
            let enc = adapter.encode(&readings).map_err(crate::catalog::user_error)?;
            check_encoded(adapter.name(), &enc, addresses.len(), readings.points.len())
                .map_err(crate::catalog::user_error)?;
            split_encoded(enc, &readings, addresses, |_| crate::clock::now_ns(), |_, m, _| out.push(m));
            b0 += b;
        }
        run += len;
    }
    Ok(out)
}

/// Post every piece of work; advance the job file after each chunk is
/// acknowledged whole. Returns (rows written, chunks, intervals done).
fn write_all(
    cfg: HttpConfig,
    rx: Receiver<Work>,
    mut job: JobFile,
    path: &Path,
    progress: &Progress,
) -> anyhow::Result<(u64, u64, u64)> {
    let rt = crate::async_runtime::with_workers(1)?;
    let (mut added, mut chunks) = (0u64, 0u64);
    for work in rx {
        let (messages, what) = match work {
            Work::Topology(m) => (m, None),
            Work::Chunk { messages, rows, done_after } => (messages, Some((rows, done_after))),
        };
        let counts = rt.block_on(post_all(&cfg, messages))?;
        let sent_readings = counts.readings_published;
        check_all_acked(&counts, what.is_none())?;
        if let Some((rows, done_after)) = what {
            debug_assert_eq!(rows, sent_readings);
            job.intervals_done = done_after;
            job.rows_written += rows;
            save(path, &job)?;
            added += rows;
            chunks += 1;
            progress.rows_done.fetch_add(rows, Ordering::Relaxed);
        }
    }
    Ok((added, chunks, job.intervals_done))
}

/// POST `messages` through a transport of their own and wait for every answer.
async fn post_all(cfg: &HttpConfig, messages: Vec<Message>) -> anyhow::Result<AckCounts> {
    let transport = HttpTransport::start(cfg);
    let senders = transport.senders();
    let per = messages.len().div_ceil(senders.len().max(1)).max(1);
    let mut it = messages.into_iter();
    for s in &senders {
        let batch: Vec<Message> = it.by_ref().take(per).collect();
        if !batch.is_empty() && s.send(batch).await.is_err() {
            break;
        }
    }
    drop(senders);
    Ok(transport.finish(CHUNK_DRAIN).await)
}

/// Every message acknowledged, or an error that says what the server said.
fn check_all_acked(c: &AckCounts, topology: bool) -> anyhow::Result<()> {
    let what = if topology { "the records (topology)" } else { "history" };
    let unacked = c.published.saturating_sub(c.acked_msgs);
    if unacked == 0 && c.errors == 0 && c.readings_rejected == 0 {
        return Ok(());
    }
    let first = c.error_samples.first().cloned().unwrap_or_else(|| "no answer".into());
    Err(err(
        format!(
            "writing {what}: {unacked} of {} requests were not acknowledged ({} readings refused, {} errors, {} lost in flight); first: {first}",
            c.published, c.readings_rejected, c.errors, c.lost_in_flight
        ),
        "check the server's log; what was acknowledged is kept, and running the same command again resumes after the last chunk written whole",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_files_are_keyed_by_everything_that_decides_the_readings() {
        let spec = Spec {
            points: 10,
            days: 0.5,
            interval_ms: 5000,
            seed: 1,
            end_ms: None,
            model_name: "plant-shaped".into(),
            model_params: "{}".into(),
            target_name: "haxall".into(),
            target_params: "{}".into(),
        };
        let plan = HisWritePlan { service: "api".into(), readings_per_request: 250 };
        let a = job_key(&spec, &plan, "http://127.0.0.1:1");
        let mut other = spec.clone();
        other.seed = 2;
        assert_ne!(a, job_key(&other, &plan, "http://127.0.0.1:1"));
        assert_ne!(a, job_key(&spec, &plan, "http://127.0.0.1:2"), "another server is another job");
        let dir = tempfile::tempdir().unwrap();
        let path = job_path(dir.path(), &a);
        assert_eq!(path, job_path(dir.path(), &a));
        let job = JobFile {
            key: a.clone(),
            start_ms: 0,
            end_ms: 5000,
            intervals_total: 1,
            intervals_done: 1,
            rows_written: 10,
        };
        save(&path, &job).unwrap();
        assert_eq!(load(&path, &a), Some(job));
        assert_eq!(load(&path, "another key"), None, "a file of another job is not this one's");
    }
}
