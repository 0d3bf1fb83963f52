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
use std::sync::Arc;

use anyhow::Context as _;

use crate::budgets::Budgets;
use crate::clock::utc_now;
use crate::hardware;
use crate::live_safety;
use crate::results::*;
use crate::services::StackServices;
use crate::stack::StackDriver;
use crate::transport::BrokerCounters;

#[cfg(test)]
mod climb_tests;
pub mod config;
#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod fake_workers;
mod floor;
mod parts;
mod reading_check;
mod session;
pub(crate) mod step;

pub use config::{Fault, FaultKind, LadderConfig};
pub use parts::{LocalBoxFuture, Opened, Plugins, SessionParts};
use reading_check::reading_check;
pub use session::Session;

/// The run: its session opened from `parts` (plugins, carrier, storage
/// counter, load source), then the climb.
///
/// Boxed at the crate's edge: see `crate::future`.
pub fn run<'a>(
    cfg: &'a LadderConfig,
    parts: &'a dyn SessionParts,
    stack: &'a mut dyn StackDriver,
    services: Arc<StackServices>,
    budgets: &'a Budgets,
    stop: Arc<AtomicBool>,
) -> LocalBoxFuture<'a, anyhow::Result<RunResult>> {
    Box::pin(run_here(cfg, parts, stack, services, budgets, stop))
}

async fn run_here(
    cfg: &LadderConfig,
    parts: &dyn SessionParts,
    stack: &mut dyn StackDriver,
    services: Arc<StackServices>,
    budgets: &Budgets,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<RunResult> {
    // Live-safety baseline first: before anything of ours loads the host.
    let watch = live_safety::Watch::start(cfg.live.clone())?;
    let Opened { mut session, plugins_used, sys } = parts.open(cfg, &*stack, &services, watch).await?;
    // Where the readings come from, once for the whole run.
    if !cfg.workers.is_empty() {
        session.load = parts.workers(cfg, &*stack).await?;
    }
    let result = new_result(cfg, &*stack, plugins_used);
    climb(Climb { cfg, stack, services: &services, budgets, stop, sys }, session, result).await
}

/// What the climb runs with, its session aside.
struct Climb<'a> {
    cfg: &'a LadderConfig,
    stack: &'a mut dyn StackDriver,
    services: &'a Arc<StackServices>,
    budgets: &'a Budgets,
    stop: Arc<AtomicBool>,
    /// The broker's own counters, where it has them.
    sys: Option<Box<dyn BrokerCounters>>,
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
async fn climb(c: Climb<'_>, mut session: Session, mut result: RunResult) -> anyhow::Result<RunResult> {
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
