//! Where a step's readings come from, chosen once when the run's session
//! opens: this process's own producer ([`Local`]), or workers it drives
//! over HTTP (`distributed::coordinator::Workers`). The step never asks
//! which: it calls the same phases on either (OpenMessaging Benchmark's
//! `Worker` interface, with its local and distributed ensembles, plays
//! this part there), and a fast test drives the whole ladder through an
//! in-memory two-worker source (`ladder::fake::FakeWorkers`).
//!
//! In a step's order: [`LoadSource::prepare`] (the others learn the step's
//! points), [`LoadSource::gather`] (the step's transport, whose final counts
//! hold the others'), [`LoadSource::start`] at the schedule's start (this
//! process's producer offers [`LoadSource::own_share`] beside them),
//! [`LoadSource::watch`] while the load runs, then after the drain
//! [`LoadSource::merge_reports`] and [`LoadSource::notes`].

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::live_metrics::LatencySource;
use crate::loadgen::{ProducerLive, ProducerReport, Share};
use crate::results::WorkerFigures;
use crate::transport::{Live, Transport};

/// One step's load, as every producer must hear it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepLoad {
    pub points: u64,
    /// The schedule's first second (ms since the epoch).
    pub start_ms: i64,
    pub interval: Duration,
    pub warmup: Duration,
    /// Warm-up and soak.
    pub duration: Duration,
    pub sample_period_ms: u64,
}

/// What the verdict must know and the result show about the other
/// producers once the step drained.
#[derive(Debug, Clone, Default)]
pub struct SourceNotes {
    /// Why the step cannot be judged (a producer lost or refused), named.
    pub unjudged: Vec<String>,
    /// Producers that could not offer their share without the SUT holding
    /// them back (a limit of theirs, not the SUT's).
    pub bound: Vec<String>,
    /// Each producer's own figures (empty for a one-process run).
    pub figures: Vec<WorkerFigures>,
}

/// Where a step's readings come from. The blocking calls run on a blocking
/// task or a thread of their own.
pub trait LoadSource: Send + Sync {
    /// Which of the schedule's readings this process's producer offers.
    fn own_share(&self) -> Share;
    /// How long before the schedule's first second the others must hear it.
    fn notice(&self) -> Duration;
    /// Blocking: the others learn the step's points and open their connections.
    fn prepare(&self, points: u64) -> anyhow::Result<()>;
    /// The step's transport: this process's connections, whose final
    /// counts hold every other producer's too.
    fn gather(self: Arc<Self>, own: Box<dyn Transport>) -> Box<dyn Transport>;
    /// Blocking: the others start together at `load.start_ms`; why any of
    /// them was refused (it offers nothing this step).
    fn start(&self, load: &StepLoad) -> Vec<String>;
    /// Blocking, on a thread of its own while this process's producer
    /// runs: the others' live counts into the step's, until their load is
    /// over (at once where there are none).
    fn watch(&self, live: &ProducerLive, acks: &Live, stop: &AtomicBool, until: Instant);
    /// Ack latency measured elsewhere, for the live metrics endpoint.
    fn more_latency(self: Arc<Self>) -> Option<Arc<dyn LatencySource>>;
    /// After the drain: the others' producer reports added to `report`;
    /// their CPU seconds.
    fn merge_reports(&self, report: &mut ProducerReport) -> f64;
    /// After the drain: what the verdict and the result say of the others.
    fn notes(&self) -> SourceNotes;
}

/// This process offers every reading itself.
pub struct Local;

impl LoadSource for Local {
    fn own_share(&self) -> Share {
        Share::All
    }
    fn notice(&self) -> Duration {
        Duration::ZERO
    }
    fn prepare(&self, _points: u64) -> anyhow::Result<()> {
        Ok(())
    }
    fn gather(self: Arc<Self>, own: Box<dyn Transport>) -> Box<dyn Transport> {
        own
    }
    fn start(&self, _load: &StepLoad) -> Vec<String> {
        Vec::new()
    }
    fn watch(&self, _live: &ProducerLive, _acks: &Live, _stop: &AtomicBool, _until: Instant) {}
    fn more_latency(self: Arc<Self>) -> Option<Arc<dyn LatencySource>> {
        None
    }
    fn merge_reports(&self, _report: &mut ProducerReport) -> f64 {
        0.0
    }
    fn notes(&self) -> SourceNotes {
        SourceNotes::default()
    }
}
