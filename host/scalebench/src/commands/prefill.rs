//! `scalebench prefill`: days of history for every point, written into the
//! SUT's storage through the target's history-sink (see `prefill`). Also
//! used by `run --prefill-days` before step 1.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context as _;

use super::usage;
use crate::cli::{PluginOptions, PrefillArgs, StackKind};
use crate::prefill::operation::{destination, prefill_with, spec, start_local};

pub use crate::error::PrefillInterrupted;

static SIGINT_SEEN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    if SIGINT_SEEN.swap(true, Ordering::SeqCst) {
        // Second Ctrl-C: quit now. The chunk in flight is one transaction,
        // so PostgreSQL rolls it back and the marker stays exact.
        unsafe { libc::_exit(130) };
    }
}

/// Install a Ctrl-C handler that only raises a flag; returns the flag.
fn stop_on_sigint() -> Arc<AtomicBool> {
    // SAFETY: the handler only touches an atomic and calls _exit, both async-signal-safe.
    unsafe { libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t) };
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    std::thread::spawn(move || loop {
        if SIGINT_SEEN.load(Ordering::SeqCst) {
            tracing::info!("\ninterrupted: finishing the chunk in flight (Ctrl-C again to quit at once)");
            s.store(true, Ordering::SeqCst);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    });
    stop
}

/// Does the target take readings over HTTP (a Haystack server)?
fn takes_http(opts: &PluginOptions, target: &str, params: &str) -> anyhow::Result<bool> {
    let rt = crate::catalog::runtime(&opts.limits())?;
    let mut a = plugin_runtime::TargetAdapter::instantiate(
        &rt,
        &crate::catalog::load(&rt, target)?,
        Arc::new(plugin_runtime::NoServices),
    )?;
    let plan = a.configure(params).map_err(super::gen::user_error)?;
    Ok(matches!(plan.transport, plugin_runtime::adapter_types::TransportPlan::Http))
}

pub fn run(opts: &PluginOptions, args: PrefillArgs) -> anyhow::Result<()> {
    super::install_access(&args.access)?;
    let (points, interval) = (args.points, args.interval);
    if interval.as_millis() == 0 {
        return Err(usage("--interval must be above zero".into()));
    }
    if !(args.days > 0.0 && args.days <= 3660.0) {
        return Err(usage(format!(
            "--days {}: give a number of days above 0 (fractions allowed, e.g. 0.125 for 3 hours)",
            args.days
        )));
    }
    crate::credentials::refuse_in_params("--target-params", &args.target_params).map_err(usage)?;
    let password = crate::credentials::load(args.credentials_file.as_deref())?;
    let target_params = crate::credentials::with_password(&args.target_params, password.as_ref());
    let spec = spec(
        &args.model,
        &args.model_params,
        &args.target,
        &args.target_params,
        points as u32,
        args.days,
        interval.as_millis() as u64,
        args.seed,
    );
    let stop = stop_on_sigint();
    let report = match args.stack {
        StackKind::External => {
            if args.pg_url.is_none() && args.service.is_empty() {
                return Err(usage(
                    "--stack external needs where history goes: --pg-url (a PostgreSQL connection string of the SUT's database) or --service NAME=URL (an HTTP service, e.g. api=http://127.0.0.1:28080)".into(),
                ));
            }
            let mut databases = BTreeMap::new();
            if let Some(pg) = &args.pg_url {
                crate::guard::check_pg(pg, &args.live_host)?;
                databases.insert("postgres".to_string(), pg.clone());
            }
            let mut http = BTreeMap::new();
            for s in &args.service {
                let (name, url) = crate::stack::parse_service(s).map_err(usage)?;
                let (h, p) = crate::stack::url_host_port(&url).map_err(usage)?;
                crate::guard::check_endpoint("HTTP service", &h, p, &args.live_host)?;
                http.insert(name, url);
            }
            let (dest, services) = destination(databases, http, &args.results_dir)?;
            prefill_with(&opts.limits(), &spec, &target_params, &dest, &services, stop.clone())?
        }
        StackKind::Docker => {
            return Err(usage(
                "prefill into a Docker stack is done by the run that owns it\nhint: use `scalebench run --stack docker --prefill-days D`, or `--stack external` for a stack that stays up".into(),
            ))
        }
        StackKind::Local => {
            if takes_http(opts, &args.target, &target_params)? {
                return Err(usage(format!(
                    "target {} writes to a Haystack server, and the local stack's test server keeps history in memory for one run only\n\
                     hint: use `scalebench run --target {} --prefill-days D`, or `--stack external --service api=URL` for a server that stays up",
                    args.target, args.target
                )));
            }
            let run_dir: PathBuf = args.run_dir.clone().ok_or_else(|| {
                usage(
                    "a local stack keeps its history in its run dir, which is removed after a run unless you name it\n\
                     hint: give --run-dir DIR here and the same --run-dir to `scalebench run`, or use `scalebench run --prefill-days D`"
                        .into(),
                )
            })?;
            let tokio_rt = crate::async_runtime::two_threads()?;
            let stack = tokio_rt.block_on(start_local(&run_dir, args.base_port))?;
            let r = destination(BTreeMap::from([("postgres".to_string(), stack.postgres_conn())]), BTreeMap::new(), &args.results_dir)
                .and_then(|(dest, services)| prefill_with(&opts.limits(), &spec, &target_params, &dest, &services, stop.clone()));
            tracing::info!("stopping the local stack (its data stays in {})", run_dir.display());
            stack.stop();
            r?
        }
    };
    std::fs::create_dir_all(&args.results_dir)
        .with_context(|| format!("cannot create {}", args.results_dir.display()))?;
    let path = args
        .results_dir
        .join(format!("{}-prefill.json", crate::results::fresh_run_id(&args.results_dir, "-prefill.json")));
    let json = serde_json::json!({ "schema_version": 1, "command_line": std::env::args().collect::<Vec<_>>(), "prefill": report });
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    println!(
        "prefill {}: {} rows added, {:.0} rows/s, {} of {} rows stored{}",
        report.destination,
        report.rows_added,
        report.rows_per_s,
        report.rows_before + report.rows_added + report.rows_already_stored,
        report.rows_total,
        if report.complete { " (complete)" } else { "" }
    );
    tracing::info!("results: {}", path.display());
    if report.interrupted {
        return Err(PrefillInterrupted {
            written: report.rows_before + report.rows_added + report.rows_already_stored,
            total: report.rows_total,
        }
        .into());
    }
    Ok(())
}
