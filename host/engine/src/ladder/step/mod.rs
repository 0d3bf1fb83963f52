//! One step of the ladder, in named phases:
//!
//! 1. **topology** — tags for the new points, acknowledged before any load;
//! 2. **offer** — the producer offers readings for the warm-up and soak, up to
//!    the load's wall-clock end, while this task samples every
//!    `sample_every` (rates, lag, CPU/RSS, disk, live-safety), supervises the
//!    stack (any exit is detected from the processes and brought back),
//!    injects calibration faults and times the probes at mid-soak;
//! 3. **drain** — the transport's last acks, every canary stored (or the
//!    drain timeout), then stored counts stable over several reads;
//! 4. **count** — stored vs acked per second of payload ts, and the rates on
//!    the wall clock (acks by second of arrival, the storage's own write
//!    counter over the soak);
//! 5. **assemble** — the step result, what could not be measured, and the
//!    verdict.
//!
//! Every wait has a deadline: a broker that stops acknowledging or a dead
//! SUT ends the step with a reason, never a hang.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use plugin_runtime::types::Window;
use plugin_runtime::ProbeSet;

use super::{FaultKind, LadderConfig, Session};
use crate::budgets::Budgets;
use crate::canary::{self, Seen};
use crate::clock::utc_now;
use crate::hardware;
use crate::loadgen::{self, LoadSpec, Plugins, ProducerLive, ProducerReport};
use crate::progress::{Phase, Tick};
use crate::results::*;
use crate::services::StackServices;
use crate::stack::{health_delta, ProcSample, StackDriver};
use crate::transport::{AckCounts, BrokerCounters, Transport};
use crate::verdict;

/// What a step borrows from the run.
mod assemble;
mod count;
mod drain;
mod faults;
#[cfg(test)]
mod honesty;
mod offer;
pub(crate) mod store_watch;
#[cfg(test)]
mod tests;
mod topology;

use assemble::assemble;
use count::{count, Counted};
use drain::{drain, Drained};
use offer::{generator_memory, offer, Offered};
use topology::send_topology;

pub struct Env<'a> {
    pub cfg: &'a LadderConfig,
    pub stack: &'a mut dyn StackDriver,
    pub services: &'a Arc<StackServices>,
    pub budgets: &'a Budgets,
    pub sys: Option<&'a dyn BrokerCounters>,
    pub stop: &'a Arc<AtomicBool>,
    pub nproc: u32,
    /// Where the phases and samples are shown (a bar, or plain lines).
    pub progress: &'a crate::progress::Progress,
}

/// Drain: counts must hold still over this many reads, 1 s apart, before
/// the drain ends (several commit intervals of any sane ingester).
const STABLE_READS: u32 = 3;
/// Longest a sample waits for the SUT (a storage counter, a round trip):
/// a frozen service must not hold up the step's loop, which injects and
/// lifts faults on time. A sample that does not answer is not measured.
const SAMPLE_WAIT: Duration = Duration::from_secs(2);

/// The storage's own write counter, or None if it does not answer in time.
async fn sample_written(session: &Session) -> Option<(f64, String)> {
    tokio::time::timeout(SAMPLE_WAIT, session.count.rows_written()).await.ok().flatten()
}

/// The adapter failed as a plugin inside the transport (HTTP `headers` or
/// `judge`): the step ends on that error, which names the plugin and the call.
fn transport_fault(live: &crate::transport::Live) -> anyhow::Result<()> {
    match live.plugin_fault.lock().unwrap().take() {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Length of the windows the slowest accepted rate is taken over.
const SLOWEST_WINDOW_S: i64 = 5;

pub(crate) async fn run(mut env: Env<'_>, session: &mut Session, points: u64) -> anyhow::Result<StepResult> {
    let started_utc = utc_now();
    let step_started = Instant::now();
    let health_before = env.stack.health_totals();
    session.watch.reset();

    let own = session.carrier.open().await?;
    // Every other producer learns the step's points and opens its
    // connections; their counts join this process's at the drain.
    let load = session.load.clone();
    tokio::task::spawn_blocking(move || load.prepare(points)).await??;
    let transport = session.load.clone().gather(own);
    let new_points = points.saturating_sub(session.tags.len() as u64);
    env.progress.phase(Phase::Topology, &format!("tags of {} new points", crate::format::thousands(new_points)));
    let topology = send_topology(&env, session, &*transport, points).await?;
    let mut offered = offer(&mut env, session, &*transport, points).await?;
    env.progress.phase(Phase::Drain, "last acks, every canary stored, stored counts stable");
    let live = transport.live().clone();
    let drained = drain(&env, session, transport, &offered).await;
    for service in offered.frozen.drain(..) {
        tracing::info!("  fault: SIGCONT {service} (end of step)");
        let _ = env.stack.signal(&service, libc::SIGCONT);
    }
    let drained = drained?;
    transport_fault(&live)?;
    offered.cpu_s += session.load.merge_reports(&mut offered.report);
    // One last look at the processes: an exit late in the load or during the
    // drain counts like any other.
    for event in env.stack.supervise_now().await {
        env.progress.println(&format!("  stack: {event}"));
    }
    let health_after = env.stack.health_totals();
    env.progress.phase(Phase::Count, "stored vs acked, second by second");
    let counted = count(&env, session, &offered, &drained).await?;
    let (mut step, mut ctx) =
        assemble(&env, session, points, topology, offered, drained, counted, started_utc, step_started).await;
    match (health_before, health_after) {
        (Some(b), Some(a)) => step.containers = health_delta(&b, &a),
        _ => ctx.health_unwatched = true,
    }
    let notes = session.load.notes();
    (ctx.workers_unjudged, ctx.workers_bound, step.workers) = (notes.unjudged, notes.bound, notes.figures);
    step.lag.p95_limit_s = Some(verdict::MAX_P95_LAG_S);
    let (status, reasons) = verdict::decide(&step, &ctx);
    step.status = status;
    step.reasons = reasons;
    Ok(step)
}
