//! `scalebench plugins check FILE [--against URL …]`: the contract tests of
//! `plugin_check`, and for an adapter the parts that need a service: `judge`
//! on a real refusal and a round trip (a short step: encode, send, count)
//! against the built-in local stack its plan asks for, or the services
//! `--against` names.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use plugin_runtime::adapter_types::{Plan, StoragePlan, TransportPlan};
use plugin_runtime::{NoServices, Plugin, Runtime, ValueModel, World};

use crate::budgets::Budgets;
use crate::cli::{PluginOptions, PluginsCheckArgs};
use crate::plugin_check::{self, Report};
use crate::services::StackServices;
use crate::stack::{Endpoint, ServiceKind};

/// Points the adapter and probe checks describe (the built-in plant-shaped
/// model's), and the round trip's one step.
const POINTS: u32 = 200;
const ROUND_TRIP: [&str; 6] = ["--steps", "200", "--warmup", "2s", "--soak", "5s"];

/// Some checks failed: the report above says which and what to fix.
#[derive(Debug, thiserror::Error)]
#[error("{0} check(s) failed\nhint: change what the lines marked FAIL say, rebuild, and check again")]
pub struct ChecksFailed(pub usize);

pub fn run(opts: &PluginOptions, args: PluginsCheckArgs) -> anyhow::Result<()> {
    let rt = crate::catalog::runtime(&opts.limits())?;
    let mut report = Report::default();
    tracing::info!("checking {} against the plugin contract {}", args.plugin, plugin_runtime::CONTRACT_VERSION);
    match crate::catalog::load(&rt, &args.plugin) {
        Err(e) => plugin_check::load_refusal(&mut report, &e),
        Ok(plugin) => match plugin.world {
            World::ValueModel => plugin_check::model::check(&rt, &plugin, args.params.as_deref(), &mut report),
            World::ProbeSet => {
                let budgets = Budgets::resolve(args.budgets.as_deref())?;
                let points = model_points(&rt)?;
                let params = args.params.as_deref();
                plugin_check::probes::check(
                    plugin_check::probes::ProbeCheck {
                        rt: &rt,
                        plugin: &plugin,
                        params,
                        points: &points,
                        budgets: &budgets,
                        services: Arc::new(NoServices),
                    },
                    &mut report,
                )
            }
            World::TargetAdapter => adapter(opts, &rt, &plugin, &args, &mut report)?,
        },
    }
    print!("{}", report.render());
    match report.failures() {
        0 => Ok(()),
        n => Err(ChecksFailed(n).into()),
    }
}

/// A run's first points, as the built-in plant-shaped model describes them.
fn model_points(rt: &Runtime) -> anyhow::Result<Vec<plugin_runtime::types::TagInfo>> {
    let mut m = ValueModel::instantiate(rt, &crate::catalog::load(rt, "plant-shaped")?)?;
    let defaults = m.info.default_params.clone();
    m.configure(&defaults)?;
    Ok(m.tags(1, 0, POINTS)?)
}

fn adapter(
    opts: &PluginOptions,
    rt: &Runtime,
    plugin: &Plugin,
    args: &PluginsCheckArgs,
    report: &mut Report,
) -> anyhow::Result<()> {
    let points = model_points(rt)?;
    let params = match &args.params {
        Some(p) => p.clone(),
        None => plugin_runtime::TargetAdapter::instantiate(rt, plugin, Arc::new(NoServices))?.info.default_params,
    };
    let Some(plan) = plugin_check::adapter::check(rt, plugin, &params, &points, report) else {
        return Ok(());
    };
    if args.no_round_trip {
        report.skipped("judge and the round trip against a service: --no-round-trip");
        return Ok(());
    }
    let tokio_rt = crate::async_runtime::two_threads()?;
    let run_id = format!("check-{}", std::process::id());
    let (endpoints, stack) = if args.against.is_empty() {
        let mut run_args = run_args(&args.plugin, &params, &[], Path::new("."))?;
        run_args.stack.base_port = args.base_port;
        tracing::info!("starting the local stack the plan asks for ({})", plan.services.join(", "));
        let stack = tokio_rt
            .block_on(crate::commands::stack_start::start(&run_args, &plan, &args.plugin, &run_id, None))
            .context("cannot start the local stack to check against (or give a service with --against)")?;
        (stack.services(), Some(stack))
    } else {
        (endpoints(&args.against, &plan)?, None)
    };
    let outcome = with_services(opts, rt, plugin, args, &params, &plan, &points, &endpoints, report);
    if let Some(s) = stack {
        s.stop();
        let _ = std::fs::remove_dir_all(crate::commands::stack_start::temporary_run_dir(&run_id));
    }
    drop(tokio_rt);
    outcome
}

#[allow(clippy::too_many_arguments)]
fn with_services(
    opts: &PluginOptions,
    rt: &Runtime,
    plugin: &Plugin,
    args: &PluginsCheckArgs,
    params: &str,
    plan: &Plan,
    points: &[plugin_runtime::types::TagInfo],
    endpoints: &[Endpoint],
    report: &mut Report,
) -> anyhow::Result<()> {
    let by_kind = |k: ServiceKind| -> BTreeMap<String, String> {
        endpoints.iter().filter(|e| e.kind == k).map(|e| (e.name.clone(), e.address.clone())).collect()
    };
    if matches!(plan.transport, TransportPlan::Http) {
        let services = Arc::new(StackServices::new(by_kind(ServiceKind::Postgres), by_kind(ServiceKind::Http))?);
        if let Err(e) = plugin_check::adapter::judge_refusal(rt, plugin, params, points, services, report) {
            report.fail(format!("judge: {e}"), "a call trapped or was refused: fix the plugin so every call returns");
        }
    }
    round_trip(opts, &args.plugin, params, endpoints, report)
}

/// `--against` URLs as the external stack's services.
fn endpoints(against: &[String], plan: &Plan) -> anyhow::Result<Vec<Endpoint>> {
    let http_default = match &plan.storage {
        StoragePlan::Http(s) => s.clone(),
        _ => plan.services.first().cloned().unwrap_or_else(|| "api".into()),
    };
    against
        .iter()
        .map(|a| {
            let lower = a.to_ascii_lowercase();
            let (name, kind) = if lower.starts_with("mqtt://") || lower.starts_with("mqtts://") {
                ("broker".to_string(), ServiceKind::Mqtt)
            } else if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
                ("postgres".to_string(), ServiceKind::Postgres)
            } else if lower.starts_with("nats://") || lower.starts_with("tls://") {
                ("nats".to_string(), ServiceKind::Nats)
            } else if lower.starts_with("http://") || lower.starts_with("https://") {
                (http_default.clone(), ServiceKind::Http)
            } else if let Ok((name, url)) = crate::stack::parse_service(a) {
                return Ok(Endpoint { name, kind: ServiceKind::Http, address: url });
            } else {
                return Err(crate::commands::usage(format!(
                    "--against {a}: give mqtt://HOST:PORT, postgresql://…, nats://HOST:PORT, http://HOST:PORT or NAME=http://HOST:PORT"
                )));
            };
            Ok(Endpoint { name, kind, address: a.clone() })
        })
        .collect()
}

/// `scalebench run` arguments for one short step against `endpoints` (an
/// external stack), results into `results`.
fn run_args(target: &str, params: &str, endpoints: &[Endpoint], results: &Path) -> anyhow::Result<crate::cli::RunArgs> {
    let mut argv: Vec<String> =
        ["scalebench", "run", "--target", target, "--target-params", params, "--probes", "none"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    argv.extend(ROUND_TRIP.iter().map(|s| s.to_string()));
    argv.extend(["--results-dir".into(), results.display().to_string()]);
    if !endpoints.is_empty() {
        argv.extend(["--stack".into(), "external".into()]);
    }
    for e in endpoints {
        let (flag, value) = match e.kind {
            ServiceKind::Mqtt => ("--mqtt-url", e.address.clone()),
            ServiceKind::Postgres => ("--pg-url", e.address.clone()),
            ServiceKind::Nats => ("--nats-url", e.address.clone()),
            ServiceKind::Http => ("--service", format!("{}={}", e.name, e.address)),
        };
        argv.extend([flag.to_string(), value]);
    }
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv)?;
    match cli.command {
        crate::cli::Command::Run(a) => Ok(*a),
        _ => unreachable!("the argument vector starts with `run`"),
    }
}

/// One short step through the real transport: every reading the service
/// acknowledged is counted back by the adapter, once.
fn round_trip(
    opts: &PluginOptions,
    target: &str,
    params: &str,
    endpoints: &[Endpoint],
    report: &mut Report,
) -> anyhow::Result<()> {
    let results = tempfile::tempdir().context("cannot make a temporary results directory")?;
    let args = run_args(target, params, endpoints, results.path())?;
    tracing::info!("round trip: one step of {POINTS} points (2 s warm-up, 5 s soak) through the real transport");
    if let Err(e) = crate::commands::run::run(opts, args) {
        report.fail(
            format!("round trip: the step could not run: {e:#}"),
            "the message above names the call; `scalebench run --target FILE --steps 200` shows the same",
        );
        return Ok(());
    }
    let file = std::fs::read_dir(results.path())?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with("-ladder.json"))
        .context("the round trip wrote no result")?;
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file)?)?;
    judge_round_trip(&r["steps"][0], report);
    Ok(())
}

/// The round trip's findings from its step's result.
fn judge_round_trip(step: &serde_json::Value, report: &mut Report) {
    let (acked, stored) =
        (step["ingest"]["acked"].as_u64().unwrap_or(0), step["ingest"]["stored"].as_u64().unwrap_or(0));
    let beyond = step["ingest"]["stored_beyond_acked"].as_u64().unwrap_or(0);
    let unknown = step["outcomes"]["unknown"].as_u64().unwrap_or(0);
    let offered = step["generator"]["offered"].as_u64();
    // The check is about the adapter: the health of the stack it ran on is
    // not its concern (an external stack's is not watched here).
    let reasons: Vec<&str> = step["reasons"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).filter(|r| *r != crate::verdict::HEALTH_NOT_WATCHED).collect())
        .unwrap_or_default();
    let passed = step["status"] == "pass" || step["status"] == "pass-health-not-watched";
    report.figure(format!(
        "round trip: {} offered, {acked} acknowledged, {} counted stored by the adapter",
        offered.map(|o| o.to_string()).unwrap_or_else(|| "?".into()),
        stored + beyond
    ));
    // Stored beyond the acks is possible only for readings whose ack never
    // came (unknown); more than those is a count of one reading twice.
    if beyond > unknown {
        report.fail(
            format!(
                "count: the adapter counted {} readings stored of {acked} acknowledged ({unknown} more had no answer): it counts some more than once",
                stored + beyond
            ),
            "count each of this run's readings once (one row or record per point and timestamp, canaries excluded, windows half-open [start, end)); overcounting hides data loss",
        );
    } else if acked == 0 {
        report.fail("round trip: nothing was acknowledged", "see the step's reasons in the run output above");
    }
    report.expect(
        passed,
        format!(
            "round trip: the step passed{}",
            if reasons.is_empty() { String::new() } else { format!(" ({})", reasons.join("; ")) }
        ),
        "the reasons name what the service and the adapter disagreed on; fix the adapter's encode or count",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_above_the_acknowledged_is_named_as_overcounting() {
        let mut r = Report::default();
        let step = serde_json::json!({"status": "pass-health-not-watched", "reasons": [crate::verdict::HEALTH_NOT_WATCHED], "ingest": {"acked": 1000, "stored": 1000, "stored_beyond_acked": 1000}, "outcomes": {"unknown": 3}});
        judge_round_trip(&step, &mut r);
        assert_eq!(r.failures(), 1, "{}", r.render());
        assert!(
            r.render().contains("counted 2000 readings stored of 1000 acknowledged (3 more had no answer)"),
            "{}",
            r.render()
        );
        assert!(
            r.render().contains("ok      round trip: the step passed\n"),
            "an unwatched stack is not the adapter's fault: {}",
            r.render()
        );
        let mut ok = Report::default();
        judge_round_trip(
            &serde_json::json!({"status": "pass", "reasons": [], "ingest": {"acked": 1000, "stored": 1000}}),
            &mut ok,
        );
        assert_eq!(ok.failures(), 0, "{}", ok.render());
    }

    #[test]
    fn against_urls_become_the_external_stacks_services() {
        let plan = Plan {
            transport: TransportPlan::Http,
            storage: StoragePlan::Http("api".into()),
            services: vec!["api".into()],
        };
        let e = endpoints(&["http://127.0.0.1:28080".into(), "mqtt://127.0.0.1:21883".into()], &plan).unwrap();
        assert_eq!((e[0].name.as_str(), e[0].kind), ("api", ServiceKind::Http));
        assert_eq!((e[1].name.as_str(), e[1].kind), ("broker", ServiceKind::Mqtt));
        let err = endpoints(&["ftp://x".into()], &plan).unwrap_err();
        assert!(err.to_string().contains("--against ftp://x: give"), "{err}");
        let args = run_args("x.wasm", "{}", &e, Path::new("/tmp/r")).unwrap();
        assert_eq!(args.external.mqtt_url.as_deref(), Some("mqtt://127.0.0.1:21883"));
        assert_eq!(args.external.service, vec!["api=http://127.0.0.1:28080".to_string()]);
    }
}
