//! The ladder (after the original Baler scale-test plan): for each step,
//! publish topology for the new points, offer readings for a warm-up and a
//! soak, then judge the step (`step` runs one; `verdict` holds the rules) and
//! rewrite the result file. Stops at the first step that does not pass unless
//! `continue_on_fail`; the ceiling is the highest pass below the first failure.
//!
//! Before step 1 every stack passes the one-reading check: one reading (a
//! canary) published through the real transport must be acknowledged *and*
//! reach storage — a broker acknowledges publishes its ACL denies. Then the
//! floor: the carrier's bare round trip, one message at a time
//! (`floor.rs`), which every ack latency is shown beside.
//!
//! Plugins, one instance per role: the producer owns the model and the
//! encoding adapter on a thread of its own; the counting adapter (stored
//! counts, stats) and the canary adapter each have their own instance and
//! their own database connection, so a slow probe or count never delays the
//! canary poll; the probe set has its own too.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use plugin_runtime::adapter_types::TransportPlan;
use plugin_runtime::{ProbeSet, Runtime, TargetAdapter, ValueModel};

use crate::budgets::Budgets;
use crate::clock::utc_now;
use crate::error::Error;
use crate::hardware;
use crate::live_safety;
use crate::load_source::{LoadSource, Local};
use crate::results::*;
use crate::services::{Scoped, StackServices};
use crate::stack::StackDriver;
use crate::transport::{BrokerCounters, CarrierOptions};

#[cfg(test)]
mod climb_tests;
pub mod config;
#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod fake_workers;
mod floor;
mod reading_check;
mod session;
pub(crate) mod step;

pub use config::{Fault, FaultKind, LadderConfig};
use reading_check::reading_check;
pub(crate) use session::Session;

fn user_error(e: plugin_runtime::PluginError) -> anyhow::Error {
    crate::catalog::user_error(e)
}

/// The run: its session opened (plugins, carrier, storage counter, load
/// source), then the climb.
pub async fn run(
    cfg: &LadderConfig,
    rt: &Runtime,
    stack: &mut dyn StackDriver,
    services: Arc<StackServices>,
    budgets: &Budgets,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<RunResult> {
    // Live-safety baseline first: before anything of ours loads the host.
    let watch = live_safety::Watch::start(cfg.live.clone())?;
    let (session, plugins_used, sys) = open_session(cfg, rt, &*stack, &services, watch).await?;
    let result = new_result(cfg, &*stack, plugins_used);
    climb(Climb { cfg, stack, services: &services, budgets, stop, sys }, session, result).await
}

/// What the climb runs with, its session aside.
pub(crate) struct Climb<'a> {
    pub cfg: &'a LadderConfig,
    pub stack: &'a mut dyn StackDriver,
    pub services: &'a Arc<StackServices>,
    pub budgets: &'a Budgets,
    pub stop: Arc<AtomicBool>,
    /// The broker's own counters, where it has them.
    pub sys: Option<Box<dyn BrokerCounters>>,
}

/// The plugins (the model's and the target's checked against the stack's
/// services), the carrier, the storage counter and where the load comes
/// from: what lives across the steps. Also the plugins used (by their
/// sha256) and the broker's counters.
async fn open_session(
    cfg: &LadderConfig,
    rt: &Runtime,
    stack: &dyn StackDriver,
    services: &Arc<StackServices>,
    watch: live_safety::Watch,
) -> anyhow::Result<(Session, BTreeMap<String, String>, Option<Box<dyn BrokerCounters>>)> {
    // Plugins.
    let model_plugin = crate::catalog::load(rt, &cfg.model)?;
    let target_plugin = crate::catalog::load(rt, &cfg.target)?;
    let mut model = ValueModel::instantiate(rt, &model_plugin)?;
    model.configure(&cfg.model_params).map_err(user_error)?;
    let period_ms = model.sample_period_ms()?;
    let adapter = |role: &'static str| -> anyhow::Result<(TargetAdapter, plugin_runtime::adapter_types::Plan)> {
        let mut a = TargetAdapter::instantiate(rt, &target_plugin, Scoped::shared(services, role))?;
        let plan = a
            .configure(&crate::credentials::with_password(&cfg.target_params, cfg.target_password.as_ref()))
            .map_err(user_error)?;
        Ok((a, plan))
    };
    let (encoder, plan) = adapter("encoder")?;
    // The plan names the services it needs; the stack must have every one.
    let provided = stack.services();
    for name in &plan.services {
        if !provided.iter().any(|e| &e.name == name) {
            return Err(Error::MissingService {
                target: cfg.target.clone(),
                what: format!("a service named `{name}`"),
                stack: stack.kind().into(),
                has: stack.describe_services(),
            }
            .into());
        }
    }
    // HTTP: headers and judging on an adapter instance of their own.
    let http_rules: Option<Arc<dyn crate::transport::http::IngestRules>> = match plan.transport {
        TransportPlan::Http => {
            let rules = crate::transport::http::AdapterRules(Arc::new(Mutex::new(adapter("ingest")?.0)));
            if !crate::transport::http::IngestRules::judged_by_adapter(&rules) {
                tracing::warn!("{}", crate::transport::http::NO_HTTP_INGEST);
            }
            Some(Arc::new(rules))
        }
        _ => None,
    };
    let carrier_opts = CarrierOptions {
        connections: cfg.connections,
        inflight: cfg.inflight,
        mqtt_user: cfg.mqtt_user.clone(),
        mqtt_password: cfg.mqtt_password.clone(),
        mqtt_version: cfg.mqtt_version,
        http_window: cfg.http_window,
        http_rules,
        client_id_prefix: None,
        worker: false,
    };
    let carrier = crate::transport::carrier_for(&cfg.target, &plan.transport, stack, &carrier_opts).await?;
    let counter = Arc::new(Mutex::new(adapter("counter")?.0));
    let canary = Arc::new(Mutex::new(adapter("canary")?.0));
    let mut plugins_used = BTreeMap::new();
    plugins_used.insert(format!("model:{}", cfg.model), model_plugin.sha256.clone());
    plugins_used.insert(format!("target:{}", cfg.target), target_plugin.sha256.clone());
    let probe_set = match &cfg.probes {
        Some(spec) => {
            let p = crate::catalog::load(rt, spec)?;
            plugins_used.insert(format!("probes:{spec}"), p.sha256.clone());
            Some(ProbeSet::instantiate(rt, &p, Scoped::shared(services, "probes"))?)
        }
        None => None,
    };

    let jetstream = match &plan.transport {
        TransportPlan::NatsJetstream(jp) => Some((jp.stream_name.as_str(), jp.max_msgs)),
        _ => None,
    };
    let mut durability_settings = stack.settings();
    if let TransportPlan::NatsJetstream(jp) = &plan.transport {
        durability_settings.insert("jetstream.storage".into(), jp.storage.clone());
        durability_settings.insert("jetstream.replicas".into(), jp.replicas.to_string());
    }
    let count = crate::storage::count_for(&cfg.target, &plan.storage, &counter, stack, services, jetstream).await?;
    {
        let q = counter.clone();
        tokio::task::spawn_blocking(move || q.lock().unwrap().preflight())
            .await?
            .context("the target is not ready for a ladder")?;
    }
    let sys = carrier.broker_counters();
    // Where the readings come from, once for the whole run.
    let load: Arc<dyn LoadSource> =
        if cfg.workers.is_empty() { Arc::new(Local) } else { Arc::new(start_workers(cfg, stack).await?) };

    let session = Session {
        model: Some(Box::new(model)),
        encoder: Some(Box::new(encoder)),
        counter,
        canary,
        probe_set,
        addresses: Vec::new(),
        tags: Default::default(),
        period_ms,
        carrier,
        count,
        next_canary_seq: 0,
        watch,
        load,
        durability_settings,
    };

    Ok((session, plugins_used, sys))
}

/// The result file's run, before any step.
fn new_result(cfg: &LadderConfig, stack: &dyn StackDriver, plugins_used: BTreeMap<String, String>) -> RunResult {
    let mut commits = BTreeMap::new();
    if let Some(c) = hardware::git_commit(&cfg.repo_dir) {
        commits.insert("scalebench".to_string(), c);
    }
    let caps = stack.caps();
    RunResult {
        schema_version: SCHEMA_VERSION,
        run_id: cfg.run_id.clone(),
        started_utc: utc_now(),
        finished_utc: None,
        command_line: cfg.command_line.clone(),
        target: cfg.target.clone(),
        model: cfg.model.clone(),
        probes: cfg.probes.clone().unwrap_or_else(|| "none".into()),
        stack: stack.kind().into(),
        interval_s: cfg.interval.as_secs_f64(),
        warmup_s: cfg.warmup.as_secs_f64(),
        soak_s: cfg.soak.as_secs_f64(),
        hardware: crate::results::Hardware::describe(&cfg.results_dir),
        commits,
        plugins: plugins_used,
        caps,
        steps: Vec::new(),
        max_passing_points: None,
        ended_because: "running".into(),
        prefill: cfg.prefill.clone(),
        floor: None,
        tls: crate::tls::negotiated(),
        plan: cfg.plan.clone(),
    }
}

/// The climb: the one-reading check, the floor, then each step in turn,
/// the result file rewritten after each, up to the first step that does
/// not pass (or every step with `continue_on_fail`); the ceiling is the
/// highest pass below the first failure.
pub(crate) async fn climb(c: Climb<'_>, mut session: Session, mut result: RunResult) -> anyhow::Result<RunResult> {
    let Climb { cfg, stack, services, budgets, stop, sys } = c;
    let path = RunResult::path_in(&cfg.results_dir, &cfg.run_id);

    // One reading must reach storage before any step is measured.
    if let Err(e) = reading_check(&mut session, &stop).await {
        result.ended_because = format!("refused before step 1: {}", e.to_string().lines().next().unwrap_or_default());
        result.finished_utc = Some(utc_now());
        result.save(&path)?;
        if let Some(sys) = sys {
            sys.stop();
        }
        return Err(e.into());
    }
    // The carrier's bare round trip: the floor every ack latency stands beside.
    let floor = floor::measure_floor(&mut session, &stop).await;
    tracing::info!("floor: {}", floor.line());
    result.floor = Some(floor);
    result.save(&path).with_context(|| format!("cannot write {}", path.display()))?;
    tracing::info!("results: {}", path.display());

    let nproc = result.hardware.nproc.max(1);
    let progress = crate::progress::Progress::for_stderr().with_metrics(cfg.metrics.clone());
    for (i, &points) in cfg.steps.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        progress.step(
            i + 1,
            cfg.steps.len(),
            points,
            cfg.interval.as_secs_f64(),
            (cfg.warmup + cfg.soak).as_secs_f64(),
        );
        let env = step::Env {
            cfg,
            stack: &mut *stack,
            services,
            budgets,
            sys: sys.as_deref(),
            stop: &stop,
            nproc,
            progress: &progress,
        };
        let step = step::run(env, &mut session, points).await;
        let step = match step {
            Ok(s) => s,
            Err(e) => {
                result.ended_because = format!("error in step {}: {e:#}", points);
                result.finished_utc = Some(utc_now());
                result.save(&path)?;
                if let Some(sys) = sys {
                    sys.stop();
                }
                return Err(e);
            }
        };
        let status = step.status;
        progress.step_done(
            status,
            &format!(
                "step {} points: {}{}",
                crate::format::thousands(points),
                crate::results::Status::words(status),
                if step.reasons.is_empty() { String::new() } else { format!(" - {}", step.reasons.join("; ")) }
            ),
        );
        result.steps.push(step);
        result.max_passing_points = ceiling(result.steps.iter().map(|s| (s.points, s.status)));
        result.save(&path)?;
        if status == Status::Interrupted {
            result.ended_because = "interrupted".into();
            break;
        }
        if !status.passed() && !cfg.continue_on_fail {
            result.ended_because = format!("step {points} did not pass");
            break;
        }
    }
    if result.ended_because == "running" {
        result.ended_because = if stop.load(Ordering::Relaxed) { "interrupted".into() } else { "completed".into() };
    }
    result.finished_utc = Some(utc_now());
    result.tls = crate::tls::negotiated();
    result.save(&path)?;
    if let Some(sys) = sys {
        sys.stop();
    }
    Ok(result)
}

pub use crate::results::ceiling_of as ceiling;

/// A distributed run's workers, connected and initialised: the same plugin
/// bytes and params, the stack's services (the ones the isolation guard
/// checked), this run's connection options.
async fn start_workers(
    cfg: &LadderConfig,
    stack: &dyn StackDriver,
) -> anyhow::Result<crate::distributed::coordinator::Workers> {
    use crate::distributed::{coordinator, wire, worker};
    let template = coordinator::InitTemplate {
        run_id: cfg.run_id.clone(),
        model: (cfg.model.clone(), crate::catalog::bytes(&cfg.model)?),
        model_params: cfg.model_params.clone(),
        target: (cfg.target.clone(), crate::catalog::bytes(&cfg.target)?),
        target_params: crate::credentials::with_password(&cfg.target_params, cfg.target_password.as_ref()),
        seed: cfg.seed,
        services: stack
            .services()
            .into_iter()
            .map(|e| wire::Service { name: e.name, kind: worker::kind_name(e.kind).into(), address: e.address })
            .collect(),
        connections: cfg.connections,
        inflight: cfg.inflight,
        http_window: cfg.http_window,
        mqtt_user: cfg.mqtt_user.clone(),
        mqtt_password: cfg.mqtt_password.clone(),
        mqtt_version: cfg.mqtt_version,
    };
    let urls = cfg.workers.clone();
    tokio::task::spawn_blocking(move || {
        let w = coordinator::Workers::connect(&urls, std::time::Duration::from_secs(60))?;
        w.init(&template)?;
        let named: Vec<&str> = w.list.iter().map(|w| w.url.as_str()).collect();
        tracing::info!("workers: {} ready ({})", w.len(), named.join(", "));
        Ok(w)
    })
    .await?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_is_the_highest_pass_below_the_first_failure() {
        use Status::*;
        assert_eq!(ceiling([(1, Pass), (2, Pass), (3, Fail), (4, Pass)]), Some(2));
        assert_eq!(ceiling([(1, Fail), (2, Pass)]), None);
        assert_eq!(ceiling([(1, Pass), (2, Inconclusive), (3, Pass)]), Some(3));
        assert_eq!(ceiling([]), None);
        assert_eq!(ceiling([(1, Pass), (2, PassUnwatched), (3, Fail)]), Some(2));
    }
}
