//! Prefill as one operation, its plugins loaded by name: what `scalebench
//! prefill`, `run --prefill-days`, `scalebench storage` and `bench prefill`
//! share (the spec from a command's words, where history goes, the load
//! with a progress bar, the local stack a prefill writes into).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context as _;
use local_stack::{LocalStack, StackOptions};

use super::{Destination, Progress, Report, Spec};
use crate::catalog::PluginLimits;
use crate::services::{Scoped, StackServices};

/// The spec from the command line's words.
pub fn spec(
    model: &str,
    model_params: &str,
    target: &str,
    target_params: &str,
    points: u32,
    days: f64,
    interval_ms: u64,
    seed: u64,
) -> Spec {
    Spec {
        points,
        days,
        interval_ms,
        seed,
        end_ms: None,
        model_name: model.to_string(),
        model_params: model_params.to_string(),
        target_name: target.to_string(),
        target_params: target_params.to_string(),
    }
}

/// The stack's services as prefill needs them: by name, and as the host
/// services the adapter's own calls go through.
pub fn destination(
    databases: BTreeMap<String, String>,
    http: BTreeMap<String, String>,
    results_dir: &Path,
) -> anyhow::Result<(Destination, Arc<StackServices>)> {
    let services = Arc::new(StackServices::new(databases.clone(), http.clone())?);
    Ok((Destination { databases, http, jobs_dir: results_dir.join("prefill-jobs") }, services))
}

/// Load the model and adapter, then prefill into `dest` with a progress bar.
/// `target_params` are the adapter's params with any password added.
pub fn prefill_with(
    limits: &PluginLimits,
    spec: &Spec,
    target_params: &str,
    dest: &Destination,
    services: &Arc<StackServices>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Report> {
    let rt = crate::catalog::runtime(limits)?;
    let mut model = plugin_runtime::ValueModel::instantiate(&rt, &crate::catalog::load(&rt, &spec.model_name)?)?;
    model.configure(&spec.model_params).map_err(crate::catalog::user_error)?;
    let target = crate::catalog::load(&rt, &spec.target_name)?;
    let mut more = |role: &'static str| -> anyhow::Result<plugin_runtime::TargetAdapter> {
        let mut a = plugin_runtime::TargetAdapter::instantiate(&rt, &target, Scoped::shared(services, role))?;
        a.configure(target_params).map_err(crate::catalog::user_error)?;
        Ok(a)
    };
    let mut adapter = more("prefill")?;
    let progress = Arc::new(Progress::default());
    let bar_stop = Arc::new(AtomicBool::new(false));
    let bar: std::cell::RefCell<Option<std::thread::JoinHandle<()>>> = Default::default();
    let on_start = |r: &Report| {
        let left = r.rows_total.saturating_sub(r.rows_before);
        if r.rows_before > 0 || r.resumed {
            tracing::info!(
                "prefill: resuming {}: {} of {} rows were written by an earlier run",
                r.destination,
                r.rows_before,
                r.rows_total
            );
        }
        if left == 0 || r.rows_before >= r.rows_total {
            tracing::info!(
                "prefill: this history is already complete in {} ({} rows): nothing to add",
                r.destination,
                r.rows_total
            );
        } else {
            tracing::info!(
                "prefill: {} points x {} intervals of {} s ({} .. {}) into {}",
                r.points,
                r.intervals_total,
                r.interval_s,
                r.start_utc,
                r.end_utc,
                r.destination
            );
        }
        *bar.borrow_mut() = Some(super::progress_bar(r.rows_total, r.rows_before, progress.clone(), bar_stop.clone()));
    };
    let result = super::run(spec, &mut model, &mut adapter, &mut more, dest, stop, progress.clone(), &on_start);
    bar_stop.store(true, Ordering::Relaxed);
    if let Some(b) = bar.borrow_mut().take() {
        let _ = b.join();
    }
    let r = result?;
    tracing::info!(
        "prefill: {} rows added in {:.1} s ({:.0} rows/s){}{}; {} of {} rows of this history are stored",
        r.rows_added,
        r.duration_s,
        r.rows_per_s,
        if r.rows_already_stored > 0 {
            format!(", {} readings were already stored and left alone", r.rows_already_stored)
        } else {
            String::new()
        },
        if r.interrupted { ", interrupted" } else { "" },
        r.rows_before + r.rows_added + r.rows_already_stored,
        r.rows_total
    );
    Ok(r)
}

/// Start the local stack (mosquitto, PostgreSQL, historian) in `run_dir`.
///
/// Boxed at the crate's edge: see `crate::future`.
pub fn start_local(
    run_dir: &std::path::Path,
    base_port: u16,
) -> crate::future::BoxFuture<'_, anyhow::Result<LocalStack>> {
    Box::pin(start_local_here(run_dir, base_port))
}

async fn start_local_here(run_dir: &std::path::Path, base_port: u16) -> anyhow::Result<LocalStack> {
    let mut so = StackOptions::new(run_dir).with_base_port(base_port);
    so.historian.bin = Some(std::env::current_exe()?);
    so.historian.leading_args = vec!["reference-historian".into()];
    tracing::info!(
        "starting the local stack in {} (mqtt {}, postgres {})",
        run_dir.display(),
        so.mqtt_port,
        so.pg_port
    );
    LocalStack::start(so).await.context("cannot start the local stack")
}
