//! `scalebench run`: the main job. Starts (or connects to) the stack, runs
//! the ladder, prints the results table, and tears the stack down on
//! success, failure or Ctrl-C. Results already measured are always kept.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context as _;

use crate::budgets::Budgets;
use crate::cli::{LadderFlags, PluginOptions, RunArgs, StackKind};
use crate::ladder::{self, Fault, FaultKind, LadderConfig};
use crate::services::StackServices;
use crate::stack::{self, ServiceKind, StackDriver};
use crate::throwaway_ca::ThrowawayPki;

/// The default ladder: the original Baler scale-test plan's, with smaller first steps on small hosts.
pub fn default_steps(nproc: usize) -> Vec<u64> {
    let mut s = vec![10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000];
    if nproc < 4 {
        s.splice(0..0, [1_000, 2_500, 5_000]);
    }
    s
}

use crate::error::usage;

/// The faults of a run, in order: the named crash flags, `--kill`,
/// `--freeze` (clap has parsed each), then the kills' repeats.
fn faults(args: &RunArgs) -> anyhow::Result<Vec<Fault>> {
    let f = &args.faults;
    let mut out = Vec::new();
    for (service, after) in [
        ("reference-historian", f.kill_historian_after),
        ("postgres", f.kill_postgres_after),
        ("nats-1", f.kill_nats_node_after),
    ] {
        if let Some(after) = after {
            let service = if service == "nats-1" && args.stack.nodes < 2 { "nats-0" } else { service };
            out.push(Fault { service: service.into(), after, kind: FaultKind::Kill });
        }
    }
    out.extend(f.kill.iter().cloned());
    out.extend(f.freeze.iter().cloned());
    if !out.is_empty() && args.stack.kind == StackKind::External {
        return Err(usage("--kill, --freeze and the crash-test flags need a stack scalebench runs (--stack local or docker): an external stack's processes are not its own".into()));
    }
    // Crash cycles: each kill again, one interval later, N times.
    let cycles = f.kill_cycles.max(1);
    let kills: Vec<Fault> = out.iter().filter(|f| matches!(f.kind, FaultKind::Kill)).cloned().collect();
    for k in kills {
        for c in 2..=cycles {
            out.push(Fault { service: k.service.clone(), after: k.after * c, kind: FaultKind::Kill });
        }
    }
    Ok(out)
}

/// The probe set a target gets without --probes, by where it stores: a
/// historian's SQL is read by historian-sql, an HTTP server (a Haystack
/// server) by haystack, and a stream (NATS) has no reads of its own to time.
pub fn default_probes(plan: &plugin_runtime::adapter_types::Plan) -> Option<&'static str> {
    use plugin_runtime::adapter_types::{StoragePlan, TransportPlan};
    match (&plan.transport, &plan.storage) {
        (TransportPlan::NatsJetstream(_) | TransportPlan::NatsCore, _) | (_, StoragePlan::Jetstream(_)) => None,
        (_, StoragePlan::Sql(_)) => Some("historian-sql"),
        (_, StoragePlan::Http(_)) => Some("haystack"),
    }
}

/// Probe params that read from the target's own HTTP service: when the
/// probe set takes a `service` and the user named none, it is the service
/// the target stores to (a Haystack server called `haxall` is probed as
/// `haxall`, not as the set's default).
fn follow_services(
    rt: &plugin_runtime::Runtime,
    spec: &str,
    params: &str,
    storage: &plugin_runtime::adapter_types::StoragePlan,
) -> anyhow::Result<String> {
    let plugin_runtime::adapter_types::StoragePlan::Http(service) = storage else { return Ok(params.to_string()) };
    let mut given: serde_json::Map<String, serde_json::Value> = match serde_json::from_str(params) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => return Ok(params.to_string()), // the probe set says what is wrong with it
    };
    if given.contains_key("service") {
        return Ok(params.to_string());
    }
    let plugin = crate::catalog::load(rt, spec)?;
    let info = plugin_runtime::ProbeSet::instantiate(rt, &plugin, Arc::new(Quiet))?.info;
    let schema: serde_json::Value = serde_json::from_str(&info.params_schema).unwrap_or_default();
    if schema["properties"].get("service").is_none() {
        return Ok(params.to_string());
    }
    given.insert("service".into(), serde_json::Value::String(service.clone()));
    Ok(serde_json::Value::Object(given).to_string())
}

/// No services and no log lines: the probe set's `setup` runs here only to
/// learn its probes' names, before any stack exists, and what it would say
/// about the missing server is noise.
struct Quiet;
impl plugin_runtime::HostServices for Quiet {
    fn log(&self, _: &str, _: plugin_runtime::types::LogLevel, _: &str) {}
}

/// The budgets of the run's probe set (by the set's name), checked: every
/// probe of the set has a budget, and every budget names a probe of the
/// set: a typo is an error before anything starts.
fn check_budgets(rt: &plugin_runtime::Runtime, cfg: &LadderConfig, all: &Budgets) -> anyhow::Result<Budgets> {
    let Some(spec) = &cfg.probes else { return Ok(all.clone()) };
    let plugin = crate::catalog::load(rt, spec)?;
    let mut model = plugin_runtime::ValueModel::instantiate(rt, &crate::catalog::load(rt, &cfg.model)?)?;
    model.configure(&cfg.model_params).map_err(crate::commands::gen::user_error)?;
    let first = cfg.steps.first().copied().unwrap_or(1).min(1000) as u32;
    let tags = model.tags(cfg.seed, 0, first)?;
    let mut ps = plugin_runtime::ProbeSet::instantiate(rt, &plugin, Arc::new(Quiet))?;
    let file = all.path.display().to_string();
    let budgets = all.for_set(&ps.info.name).ok_or_else(|| crate::error::Error::Budgets {
        problem: format!("{file} has no budgets for probe set `{}` (it has budgets for: {})", ps.info.name, all.set_names().collect::<Vec<_>>().join(", ")),
        hint: format!("add \"{}\": {{...}} under \"probe_sets\" (mark each budget \"source\": \"provisional\" until measured), or run with --probes none", ps.info.name),
    })?;
    let budgets = &budgets;
    // Only the probes' names are needed here, before any stack runs: no login.
    let probes = ps
        .setup(&crate::credentials::without_login(&cfg.probe_params), &tags)
        .map_err(crate::commands::gen::user_error)?;
    let names: Vec<&str> = probes.iter().map(|p| p.name.as_str()).collect();
    if let Some(missing) = names.iter().find(|n| budgets.get(n).is_none()) {
        return Err(crate::error::Error::Budgets {
            problem: format!("probe `{missing}` of probe set {spec} has no budget in {file}"),
            hint: format!("add a budget for `{missing}` (mark it \"source\": \"provisional\" until measured)"),
        }
        .into());
    }
    if let Some(extra) = budgets.names().find(|b| !names.contains(b)) {
        return Err(crate::error::Error::Budgets {
            problem: format!(
                "{file} has a budget for `{extra}`, which probe set {spec} does not have (its probes: {})",
                names.join(", ")
            ),
            hint: "fix the name in the budgets file, or pass the budgets of this probe set with --budgets".into(),
        }
        .into());
    }
    Ok(budgets.clone())
}

/// `scalebench run`, in its phases: the flags checked, the ladder's
/// configuration, the plugins loaded (bad ones fail before any process
/// starts), the isolation guard, then the session on a runtime.
pub fn run(opts: &PluginOptions, args: RunArgs) -> anyhow::Result<()> {
    check_flags(&args)?;
    let budgets = Budgets::resolve(args.plugins.budgets.as_deref())?;
    let mut cfg = ladder_config(&args)?;
    let built_in_tls = crate::commands::stack_start::built_in_tls(&args, &cfg.run_id)?;
    cfg.faults = faults(&args)?;
    let workers = parse_workers(&args.workers, &cfg.run_id)?;
    check_prefill_days(&args)?;
    let plugin_rt = crate::catalog::runtime(&opts.limits())?;
    let plan = load_plugins(&plugin_rt, &args, &mut cfg)?;
    let budgets = check_budgets(&plugin_rt, &cfg, &budgets)?;
    guard_external(&args)?;
    let session = Session { opts, args: &args, cfg, plan, plugin_rt, budgets, workers, built_in_tls };
    crate::async_runtime::two_threads()?.block_on(session.run())
}

fn check_flags(args: &RunArgs) -> anyhow::Result<()> {
    crate::commands::stack_start::check_built_in_tls(args)?;
    if !args.stack.tls {
        super::install_access(&args.access)?;
    }
    let LadderFlags { interval, soak, sample_every, .. } = args.ladder;
    if interval.is_zero() || soak.is_zero() || sample_every.is_zero() {
        return Err(usage("--interval, --soak and --sample-every must be above zero".into()));
    }
    if !args.external.watch.is_empty() && args.stack.kind != StackKind::External {
        return Err(usage(
            "--watch is for --stack external: scalebench already watches the stacks it runs itself".into(),
        ));
    }
    Ok(())
}

fn check_prefill_days(args: &RunArgs) -> anyhow::Result<()> {
    if let Some(d) = args.ladder.prefill_days {
        if !(d > 0.0 && d <= 3660.0) {
            return Err(usage(format!(
                "--prefill-days {d}: give a number of days above 0 (fractions allowed, e.g. 0.125 for 3 hours)"
            )));
        }
    }
    Ok(())
}

/// What the run asks, from its flags: a fresh run id in the results
/// directory (made here), credentials read (never from the params).
fn ladder_config(args: &RunArgs) -> anyhow::Result<LadderConfig> {
    let nproc = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let (plugins, ladder, live) = (&args.plugins, &args.ladder, &args.live);
    let steps = ladder.steps.clone().unwrap_or_else(|| default_steps(nproc));
    let LadderFlags { interval, warmup, soak, sample_every, drain_timeout, .. } = *ladder;
    // Without --probes the set follows the target's storage (once its plan
    // is known, in `load_plugins`).
    let probes = match plugins.probes.as_deref() {
        Some("none") | None => None,
        Some(other) => Some(other.to_string()),
    };
    crate::credentials::refuse_in_params("--target-params", &plugins.target_params).map_err(usage)?;
    crate::credentials::refuse_in_params("--probe-params", &plugins.probe_params).map_err(usage)?;
    let target_password = crate::credentials::load(plugins.credentials_file.as_deref())?;
    let repo_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let results_dir = args.output.results_dir.clone();
    std::fs::create_dir_all(&results_dir).with_context(|| format!("cannot create {}", results_dir.display()))?;
    let run_id = crate::results::fresh_run_id(&results_dir, "-ladder.json");
    Ok(LadderConfig {
        steps,
        interval,
        warmup,
        soak,
        sample_every,
        continue_on_fail: ladder.continue_on_fail,
        seed: ladder.seed,
        connections: ladder.connections,
        inflight: ladder.inflight,
        mqtt_user: ladder.mqtt_user.clone(),
        mqtt_password: std::env::var("SCALEBENCH_MQTT_PASSWORD").ok(),
        mqtt_version: ladder.mqtt_version.level(),
        http_window: ladder.http_concurrency.max(1),
        target_password,
        model: plugins.model.clone(),
        model_params: plugins.model_params.clone(),
        target: plugins.target.clone(),
        target_params: plugins.target_params.clone(),
        probes,
        probe_params: plugins.probe_params.clone(),
        probe_warm_runs: plugins.probe_warm_runs,
        drain_timeout,
        results_dir,
        run_id,
        // A worker URL's token is not kept in the result.
        command_line: std::env::args().map(|a| crate::distributed::token::redact(&a)).collect(),
        plan: args.resolved_plan.clone(),
        min_disk_free_bytes: (ladder.min_disk_free_gb * 1e9) as u64,
        repo_dir,
        faults: Vec::new(),
        live: crate::live_safety::Config {
            url: live.live_url.clone(),
            latency_factor: live.live_latency_factor,
            load_factor: live
                .live_load_factor
                .or_else(|| std::env::var("SCALEBENCH_LIVE_LOAD_FACTOR").ok().and_then(|v| v.trim().parse().ok()))
                .unwrap_or(1.5),
        },
        prefill: None,
        workers: Vec::new(),
        metrics: None,
    })
}

/// Every plugin loaded once (bad ones fail before any process starts);
/// the target's plan, which decides the stack; the probe set the target's
/// storage implies when `--probes` is not given.
fn load_plugins(
    plugin_rt: &plugin_runtime::Runtime,
    args: &RunArgs,
    cfg: &mut LadderConfig,
) -> anyhow::Result<plugin_runtime::adapter_types::Plan> {
    for spec in [&cfg.model, &cfg.target].into_iter().chain(cfg.probes.as_ref()) {
        crate::catalog::load(plugin_rt, spec)?;
    }
    let plan = {
        let p = crate::catalog::load(plugin_rt, &cfg.target)?;
        let mut a = plugin_runtime::TargetAdapter::instantiate(plugin_rt, &p, Arc::new(plugin_runtime::NoServices))?;
        a.configure(&crate::credentials::with_password(&cfg.target_params, cfg.target_password.as_ref()))
            .map_err(crate::commands::gen::user_error)?
    };
    if args.plugins.probes.is_none() {
        cfg.probes = default_probes(&plan).map(String::from);
    }
    if let Some(spec) = &cfg.probes {
        cfg.probe_params = follow_services(plugin_rt, spec, &cfg.probe_params, &plan.storage)?;
    }
    Ok(plan)
}

/// The isolation guard, for external stacks too: never a live install by accident.
fn guard_external(args: &RunArgs) -> anyhow::Result<()> {
    if args.stack.kind != StackKind::External {
        return Ok(());
    }
    let (ext, live_host) = (&args.external, &args.live.live_host);
    if let Some(u) = &ext.mqtt_url {
        let (h, p) = stack::parse_mqtt_url(u).map_err(usage)?;
        crate::guard::check_endpoint("MQTT broker", &h, p, live_host)?;
    }
    if let Some(pg) = &ext.pg_url {
        crate::guard::check_pg(pg, live_host)?;
    }
    if let Some(n) = &ext.nats_url {
        crate::guard::check_nats_urls(n, live_host)?;
    }
    for svc in &ext.service {
        let url = svc.split_once('=').map(|(_, u)| u).unwrap_or(svc);
        let (h, p) = stack::url_host_port(url).map_err(usage)?;
        crate::guard::check_endpoint("HTTP service", &h, p, live_host)?;
    }
    Ok(())
}

/// Everything checked: what the run holds while its stack is up.
struct Session<'a> {
    opts: &'a PluginOptions,
    args: &'a RunArgs,
    cfg: LadderConfig,
    plan: plugin_runtime::adapter_types::Plan,
    plugin_rt: plugin_runtime::Runtime,
    budgets: Budgets,
    workers: Option<Workers>,
    built_in_tls: Option<ThrowawayPki>,
}

impl Session<'_> {
    /// The stack up, the workers started, history prefilled, the ladder run;
    /// the stack down whatever happened; then the table, report and gates.
    async fn run(mut self) -> anyhow::Result<()> {
        let stop = stop_on_ctrl_c();
        if let Some(addr) = self.args.output.metrics_listen {
            let m = crate::live_metrics::LiveMetrics::new(&self.cfg.target);
            let bound = crate::live_metrics::server::serve(addr, m.clone()).await?;
            tracing::info!("metrics: http://{bound}/metrics");
            self.cfg.metrics = Some(m);
        }
        let (args, run_id) = (self.args, self.cfg.run_id.clone());
        let mut stack: Box<dyn StackDriver> = crate::commands::stack_start::start(
            args,
            &self.plan,
            &self.cfg.target,
            &run_id,
            self.built_in_tls.as_ref(),
        )
        .await?;
        let swarm = match self.start_workers().await {
            Ok(swarm) => swarm,
            Err(e) => {
                stack.stop();
                return Err(e);
            }
        };
        let result = self.prefill_and_ladder(&mut *stack, &stop).await;
        if let Some(s) = swarm {
            s.remove().await;
        }
        stack.stop();
        // A run dir we made ourselves goes away after a clean run; after an
        // error it stays, for its logs.
        if args.stack.run_dir.is_none() {
            let dir = crate::commands::stack_start::temporary_run_dir(&run_id);
            if result.is_ok() {
                let _ = std::fs::remove_dir_all(&dir);
            } else if dir.exists() {
                tracing::info!("the stack's files and logs are kept in {}", dir.display());
            }
        }
        self.show(&result?, &stop)
    }

    /// A distributed run: workers someone started, or a Swarm service of ours.
    async fn start_workers(&mut self) -> anyhow::Result<Option<StartedWorkers>> {
        match &self.workers {
            Some(Workers::Urls(urls)) => {
                self.cfg.workers = urls.clone();
                Ok(None)
            }
            #[cfg(feature = "docker")]
            Some(Workers::Start(spec)) => {
                let service = spec.start(std::time::Duration::from_secs(120)).await?;
                tracing::info!("workers: Swarm service {} ({} workers)", service.name, service.urls.len());
                self.cfg.workers = service.urls.clone();
                Ok(Some(service))
            }
            None => Ok(None),
        }
    }

    /// History before step 1 (for the ladder's largest step, into the
    /// service the target's history plan names), then the ladder.
    async fn prefill_and_ladder(
        &mut self,
        stack: &mut dyn StackDriver,
        stop: &Arc<AtomicBool>,
    ) -> anyhow::Result<crate::results::RunResult> {
        let endpoints = stack.services();
        let by_kind = |k: ServiceKind| -> std::collections::BTreeMap<String, String> {
            endpoints.iter().filter(|e| e.kind == k).map(|e| (e.name.clone(), e.address.clone())).collect()
        };
        let services = Arc::new(StackServices::new(by_kind(ServiceKind::Postgres), by_kind(ServiceKind::Http))?);
        let cfg = &mut self.cfg;
        if let Some(days) = self.args.ladder.prefill_days {
            let points = cfg.steps.iter().copied().max().unwrap_or(1) as u32;
            let spec = crate::prefill::operation::spec(
                &cfg.model,
                &cfg.model_params,
                &cfg.target,
                &cfg.target_params,
                points,
                days,
                cfg.interval.as_millis() as u64,
                cfg.seed,
            );
            let params = crate::credentials::with_password(&cfg.target_params, cfg.target_password.as_ref());
            let (dest, prefill_services) = crate::prefill::operation::destination(
                by_kind(ServiceKind::Postgres),
                by_kind(ServiceKind::Http),
                &cfg.results_dir,
            )?;
            let limits = self.opts.limits();
            let report = tokio::task::block_in_place(|| {
                crate::prefill::operation::prefill_with(&limits, &spec, &params, &dest, &prefill_services, stop.clone())
            })?;
            cfg.prefill = Some(report);
            if stop.load(Ordering::Relaxed) {
                let p = cfg.prefill.as_ref();
                return Err(anyhow::Error::from(crate::error::PrefillInterrupted {
                    written: p.map(|r| r.rows_before + r.rows_added + r.rows_already_stored).unwrap_or(0),
                    total: p.map(|r| r.rows_total).unwrap_or(0),
                }));
            }
        }
        ladder::run(cfg, &ladder::Plugins(&self.plugin_rt), stack, services, &self.budgets, stop.clone()).await
    }

    /// The results table on stdout, the report if asked, then CI's gates.
    fn show(&self, result: &crate::results::RunResult, stop: &AtomicBool) -> anyhow::Result<()> {
        let cfg = &self.cfg;
        println!("{}", crate::commands::table::render(std::slice::from_ref(result)));
        if self.args.output.report {
            let dir = cfg.results_dir.join(format!("{}-report", cfg.run_id));
            let w = crate::report::write(std::slice::from_ref(result), &dir)?;
            tracing::info!("report: {} and {}", w.html.display(), w.markdown.display());
        }
        tracing::info!("results: {}", crate::results::RunResult::path_in(&cfg.results_dir, &cfg.run_id).display());
        if stop.load(Ordering::Relaxed) {
            return Err(crate::cli::Interrupted.into());
        }
        gate(&self.args.output, result)
    }
}

/// Ctrl-C sets the flag the run polls: the current measurement finishes,
/// results are kept, the stack stops. A second Ctrl-C quits at once.
fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            tracing::info!("\ninterrupted: finishing the current measurement, keeping results, stopping the stack (Ctrl-C again to quit at once)");
            flag.store(true, Ordering::Relaxed);
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
    stop
}

/// `--junit` and `--require-ceiling`: the run's verdicts for CI.
fn gate(output: &crate::cli::RunOutput, result: &crate::results::RunResult) -> anyhow::Result<()> {
    if let Some(path) = &output.junit {
        crate::gates::write_junit(&crate::gates::run_junit(result, output.require_ceiling), path)?;
        tracing::info!("junit: {}", path.display());
    }
    match output.require_ceiling.and_then(|p| crate::gates::ceiling_breach(result, p)) {
        None => Ok(()),
        Some(breach) => Err(crate::gates::GateFailed {
            what: "--require-ceiling".into(),
            breaches: vec![breach],
            hint: "the result file is written; see the table above for the reason each step stopped".into(),
        }
        .into()),
    }
}

/// Where a distributed run's workers come from.
enum Workers {
    Urls(Vec<String>),
    #[cfg(feature = "docker")]
    Start(crate::distributed::swarm::SwarmWorkers),
}

/// The Swarm service of workers a run started, removed after it.
#[cfg(feature = "docker")]
type StartedWorkers = crate::distributed::swarm::Service;
/// A build without the Docker API starts no workers (`--workers N` says so).
#[cfg(not(feature = "docker"))]
enum StartedWorkers {}
#[cfg(not(feature = "docker"))]
impl StartedWorkers {
    async fn remove(self) {
        match self {}
    }
}

fn parse_workers(w: &crate::cli::WorkerFlags, run_id: &str) -> anyhow::Result<Option<Workers>> {
    let Some(spec) = w.workers.as_deref().map(str::trim) else { return Ok(None) };
    if let Ok(n) = spec.parse::<u32>() {
        if n == 0 {
            return Err(usage("--workers 0: give a number of workers (1 or more), or their URLs".to_string()));
        }
        if w.worker_cpus.is_nan() || w.worker_cpus <= 0.0 {
            return Err(usage(format!("--worker-cpus {}: give a number of CPUs above 0, e.g. 0.5", w.worker_cpus)));
        }
        let memory_bytes =
            crate::stack::compose::parse_bytes(&w.worker_memory).filter(|b| *b > 0).ok_or_else(|| {
                usage(format!("--worker-memory {}: give an amount of memory such as 512m or 2g", w.worker_memory))
            })?;
        let crate::cli::WorkerEngine::Swarm = w.engine;
        #[cfg(not(feature = "docker"))]
        {
            let _ = (memory_bytes, run_id);
            return Err(crate::error::left_out("Starting workers on Docker Swarm (`--workers N`)"));
        }
        #[cfg(feature = "docker")]
        return Ok(Some(Workers::Start(crate::distributed::swarm::SwarmWorkers {
            workers: n,
            image: w.worker_image.clone(),
            cpus: w.worker_cpus,
            memory_bytes,
            first_port: w.worker_port,
            run_id: run_id.to_string(),
            // A token for this run's workers only.
            token: crate::distributed::token::generate()?,
        })));
    }
    let urls: Vec<String> = spec.split(',').map(|u| u.trim().to_string()).filter(|u| !u.is_empty()).collect();
    if let Some(bad) = urls.iter().find(|u| !u.starts_with("http://")) {
        return Err(usage(format!(
            "--workers: `{bad}` is neither a number of workers nor a worker's URL (http://host:port, comma-separated)"
        )));
    }
    Ok(Some(Workers::Urls(urls)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_ladder_starts_lower_on_small_hosts() {
        assert_eq!(default_steps(2)[0], 1_000);
        assert_eq!(default_steps(8)[0], 10_000);
    }
}
