//! Prefill: days of history for every point, written straight into the
//! SUT's storage before step 1, so read probes run against a history of
//! realistic size. Not the live path: no broker, no ingester, no pacing.
//!
//! The target adapter describes how history goes in (`history-sink`); the
//! host writes, over connections of its own, in chunks (SQL: tiles of
//! points × intervals, see [`tiles`]; Haystack: whole intervals), and a
//! chunk counts as written only once all of it is stored:
//! - SQL targets ([`sql_copy`]): binary COPY into the adapter's table, each
//!   chunk one transaction with a progress marker in the same database;
//! - Haystack targets ([`his_write`]): the adapter's own hisWrite grids,
//!   POSTed like live readings, with a job file beside the results.
//!
//! Either way a rerun of the same job adds nothing twice, Ctrl-C finishes
//! the chunk in flight and a rerun resumes after the last stored chunk, so
//! the count of stored readings is exact.
//!
//! Values are the model's pure function of (seed, point, sample), with the
//! live generator's mapping: interval start `t` is sample `t / period`, point
//! `p` of `n` is stamped `t + p * interval / n`. History and live readings
//! of the same run join without a seam.

pub mod his_write;
pub mod operation;
pub mod sql_copy;
pub mod tiles;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use plugin_runtime::history_types::HistoryPlan;
use plugin_runtime::{TargetAdapter, ValueModel};

pub use sql_copy::{binary, connect, quote_name, MARKER_TABLE};
pub use tiles::{RowSource, Tiling, CHUNK_ROWS};

/// What to prefill.
#[derive(Debug, Clone)]
pub struct Spec {
    pub points: u32,
    pub days: f64,
    pub interval_ms: u64,
    pub seed: u64,
    /// Exclusive end of the history (ms since the epoch); `None`: the start
    /// of the current interval. A job already in the marker keeps its own.
    pub end_ms: Option<i64>,
    /// Names recorded in the report and the job key.
    pub model_name: String,
    pub model_params: String,
    pub target_name: String,
    pub target_params: String,
}

impl Spec {
    /// Everything that decides a job's readings but the target and the
    /// window: part of every job's key (a job is found again by its key).
    pub fn readings_key(&self) -> String {
        format!(
            "model={} params={} seed={} points={} interval_ms={} days={}",
            self.model_name,
            self.model_params.trim(),
            self.seed,
            self.points,
            self.interval_ms,
            self.days
        )
    }
}

pub use crate::results::PrefillReport as Report;

/// Plain-words failure with a hint.
#[derive(Debug, thiserror::Error)]
#[error("prefill: {problem}\nhint: {hint}")]
pub struct PrefillError {
    pub problem: String,
    pub hint: String,
}

fn err(problem: impl Into<String>, hint: impl Into<String>) -> anyhow::Error {
    PrefillError { problem: problem.into(), hint: hint.into() }.into()
}

/// The window of a job: (start_ms, end_ms, intervals).
pub fn window(spec: &Spec, now_ms: i64) -> (i64, i64, u64) {
    let iv = spec.interval_ms as i64;
    let end = spec.end_ms.unwrap_or(now_ms).div_euclid(iv) * iv;
    let intervals = ((spec.days * 86_400_000.0) / spec.interval_ms as f64).round().max(1.0) as u64;
    (end - intervals as i64 * iv, end, intervals)
}

fn ms_to_utc(ms: i64) -> String {
    crate::clock::format_utc(ms)
}

/// Progress shared with the caller's bar.
#[derive(Default)]
pub struct Progress {
    pub rows_done: AtomicU64,
}

/// A progress bar on stderr (drawn only on a terminal) that follows `progress`.
pub fn progress_bar(
    total: u64,
    already: u64,
    progress: Arc<Progress>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let target = if crate::logging::quiet() || crate::logging::json() {
            indicatif::ProgressDrawTarget::hidden()
        } else {
            indicatif::ProgressDrawTarget::stderr()
        };
        let bar = indicatif::ProgressBar::with_draw_target(Some(total), target);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "prefill {bar:40} {human_pos}/{human_len} rows  {per_sec}  eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        loop {
            let done = already + progress.rows_done.load(Ordering::Relaxed);
            bar.set_position(done.min(total));
            if done >= total || stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        bar.finish_and_clear();
    })
}

/// The stack's services, by the names a plan uses.
#[derive(Debug, Clone, Default)]
pub struct Destination {
    /// Database service → PostgreSQL connection string.
    pub databases: BTreeMap<String, String>,
    /// HTTP service → base URL.
    pub http: BTreeMap<String, String>,
    /// Where jobs that cannot keep their progress in the SUT keep it (HTTP
    /// targets: a file per job).
    pub jobs_dir: PathBuf,
}

/// Another instance of the target adapter, configured as the first, for a
/// role of its own (the HTTP rules, the check of an earlier job).
pub type MoreAdapters<'a> = dyn FnMut(&'static str) -> anyhow::Result<TargetAdapter> + 'a;

/// How the target takes history, or why it cannot.
pub fn plan(adapter: &mut TargetAdapter) -> anyhow::Result<HistoryPlan> {
    adapter.history_plan().map_err(crate::catalog::user_error)?.ok_or_else(|| {
        err(
            format!("target {} does not describe how to write history (it has no history-sink export)", adapter.name()),
            "use a target adapter that exports history-sink (baler and haxall do), or run without --prefill-days",
        )
    })
}

fn missing_service(kind: &str, name: &str, have: &BTreeMap<String, String>) -> anyhow::Error {
    let have: Vec<&str> = have.keys().map(String::as_str).collect();
    err(
        format!(
            "the target writes history into {kind} service `{name}`, which this stack does not have (it has: {})",
            if have.is_empty() { "none".into() } else { have.join(", ") }
        ),
        "give the service to the stack (--stack external: --pg-url, or --service NAME=URL), or check the target's params",
    )
}

/// Run one prefill job to completion or until `stop`. Blocking: call from
/// a plain thread or `block_in_place`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    spec: &Spec,
    model: &mut ValueModel,
    adapter: &mut TargetAdapter,
    more: &mut MoreAdapters<'_>,
    dest: &Destination,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
    on_start: &dyn Fn(&Report),
) -> anyhow::Result<Report> {
    match plan(adapter)? {
        HistoryPlan::SqlCopy(p) => {
            let conn = dest
                .databases
                .get(&p.database)
                .ok_or_else(|| missing_service("database", &p.database, &dest.databases))?;
            sql_copy::run(spec, model, adapter, &p, conn, stop, progress, on_start)
        }
        HistoryPlan::HisWrite(p) => {
            if !dest.http.contains_key(&p.service) {
                return Err(missing_service("HTTP", &p.service, &dest.http));
            }
            his_write::run(spec, model, adapter, more, &p, dest, stop, progress, on_start)
        }
    }
}
