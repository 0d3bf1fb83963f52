//! The run's live figures as a Prometheus / OpenMetrics endpoint
//! (`run --metrics-listen`, `worker --metrics-listen`), so a run can be
//! watched beside the system's own dashboards.
//!
//! Nothing here measures: a scrape reads the counters the step already
//! keeps (the producer's offered, the transport's acknowledged and refused,
//! the connections' latency histograms) and what the step's last sample
//! saw (stored, lag, behind schedule, broker drops, each service's CPU and
//! memory). A figure that was not measured is absent from the scrape,
//! never 0. Every series of a step carries `step_points`; finished steps
//! keep their last values and their verdict.
//!
//! The metrics, all prefixed `scalebench_` (buckets in [`latency::BOUNDS_S`]):
//! - `readings_offered_total`, `readings_acknowledged_total`,
//!   `readings_refused_total`, `readings_stored_total` (counters);
//! - `ack_latency_intended_seconds`, `ack_latency_service_seconds`
//!   (histograms, from the soak's start as the result's figures);
//! - `step_points`, `step_phase{phase}`, `canary_lag_seconds`,
//!   `behind_schedule_seconds`, `broker_dropped_messages` (gauges);
//! - `service_cpu_cores{service}`, `service_resident_memory_bytes{service}`;
//! - `step_verdict{verdict}`: 1 for each finished step's verdict.

pub mod latency;
pub mod server;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use crate::loadgen::ProducerLive;
use crate::phase::Phase;
use crate::results::Status;
use crate::transport::{AckCounts, Live};
pub use latency::LatencyBuckets;

/// Ack latency from elsewhere (a distributed run's workers), added to the
/// step's own connections'.
pub trait LatencySource: Send + Sync {
    fn latency(&self) -> LatencyBuckets;
}

/// The live counters of one step's load.
#[derive(Clone)]
pub struct LoadSources {
    pub producer: Arc<ProducerLive>,
    pub transport: Arc<Live>,
    pub connections: Vec<Arc<Mutex<AckCounts>>>,
    pub more_latency: Option<Arc<dyn LatencySource>>,
}

/// What the step's last sample saw.
#[derive(Debug, Clone, Default)]
pub struct SampleFigures {
    /// Readings the storage wrote since the step began (its own counter).
    pub stored: Option<f64>,
    pub lag_s: Option<f64>,
    pub behind_s: f64,
    /// The broker's drop counter since the step began.
    pub broker_dropped: Option<f64>,
    /// Per service: CPU (cores, over the last sample) and resident memory.
    pub cpu_cores: BTreeMap<String, f64>,
    pub rss_bytes: BTreeMap<String, u64>,
}

/// One step's figures.
#[derive(Clone, Default)]
struct StepFigures {
    points: u64,
    phase: Option<Phase>,
    sources: Option<LoadSources>,
    offered: u64,
    acked: u64,
    refused: u64,
    latency: LatencyBuckets,
    sample: SampleFigures,
    /// The step is over: its figures no longer change.
    ended: bool,
    verdict: Option<Status>,
}

impl StepFigures {
    fn end(&mut self) {
        self.refresh();
        self.sources = None;
        self.phase = None;
        self.ended = true;
    }

    /// Read the live counters (while the load's sources are attached).
    fn refresh(&mut self) {
        if let Some(s) = &self.sources {
            self.offered = s.producer.readings_offered.load(Ordering::Relaxed);
            self.acked = s.transport.readings_acked.load(Ordering::Relaxed);
            self.refused = s.transport.readings_refused.load(Ordering::Relaxed);
            let mut l = LatencyBuckets::of_connections(&s.connections);
            if let Some(m) = &s.more_latency {
                l.add(&m.latency());
            }
            self.latency = l;
        }
    }
}

/// The run's live figures, shared by the ladder (or a worker) and the endpoint.
pub struct LiveMetrics {
    target: Mutex<String>,
    steps: Mutex<Vec<StepFigures>>,
    /// Scrapes served, and the CPU their rendering took (ns, the serving
    /// thread's own clock): what the endpoint costs (`bench generator`).
    renders: std::sync::atomic::AtomicU64,
    render_cpu_ns: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for LiveMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveMetrics").field("target", &self.target).finish_non_exhaustive()
    }
}

impl LiveMetrics {
    pub fn new(target: &str) -> Arc<LiveMetrics> {
        Arc::new(LiveMetrics {
            target: Mutex::new(target.to_string()),
            steps: Mutex::new(Vec::new()),
            renders: Default::default(),
            render_cpu_ns: Default::default(),
        })
    }

    /// The target label (a worker learns it from its coordinator).
    pub fn set_target(&self, target: &str) {
        *self.target.lock().unwrap() = target.to_string();
    }

    fn with_current(&self, f: impl FnOnce(&mut StepFigures)) {
        if let Some(s) = self.steps.lock().unwrap().last_mut() {
            if !s.ended {
                f(s);
            }
        }
    }

    /// A step of `points` starts.
    pub fn step_started(&self, points: u64) {
        let mut steps = self.steps.lock().unwrap();
        // A step that never ended (an error) stops being current.
        if let Some(s) = steps.last_mut() {
            s.end();
        }
        steps.push(StepFigures { points, phase: Some(Phase::Topology), ..Default::default() });
    }

    pub fn phase(&self, phase: Phase) {
        self.with_current(|s| s.phase = Some(phase));
    }

    /// The load starts: its counters are read at every scrape from now on.
    pub fn load_started(&self, sources: LoadSources) {
        self.with_current(|s| s.sources = Some(sources));
    }

    pub fn sample(&self, figures: SampleFigures) {
        self.with_current(|s| s.sample = figures);
    }

    /// The step's phase, if `points` is still the running step.
    pub fn phase_of(&self, points: u64, phase: Phase) {
        self.with_current(|s| {
            if s.points == points {
                s.phase = Some(phase)
            }
        });
    }

    /// The step ended with `verdict`: its figures are read one last time and kept.
    pub fn step_done(&self, verdict: Status) {
        self.with_current(|s| {
            s.end();
            s.verdict = Some(verdict);
        });
    }

    /// The step's load is over and drained, with no verdict here (a worker:
    /// its coordinator judges).
    pub fn step_ended(&self) {
        self.with_current(StepFigures::end);
    }

    /// The figures as Prometheus' text format (OpenMetrics).
    pub fn render(self: &Arc<Self>) -> String {
        let cpu0 = crate::hardware::thread_cpu_ns();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(Collect(self.clone())));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing into a String");
        self.render_cpu_ns.fetch_add(crate::hardware::thread_cpu_ns().saturating_sub(cpu0), Ordering::Relaxed);
        self.renders.fetch_add(1, Ordering::Relaxed);
        out
    }

    /// Scrapes rendered so far and the CPU seconds they took.
    pub fn render_cost(&self) -> (u64, f64) {
        (self.renders.load(Ordering::Relaxed), self.render_cpu_ns.load(Ordering::Relaxed) as f64 / 1e9)
    }
}

/// A verdict as the result file spells it (`pass`, `pass-health-not-watched`, `fail` …).
fn verdict_label(v: Status) -> String {
    serde_json::to_value(v).ok().and_then(|j| j.as_str().map(str::to_string)).unwrap_or_default()
}

#[derive(Debug)]
struct Collect(Arc<LiveMetrics>);

type Labels = Vec<(String, String)>;

/// One metric family: its name, help and type, then its series.
fn family(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    series: Vec<(Labels, Value)>,
) -> Result<(), std::fmt::Error> {
    if series.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in series {
        let e = m.encode_family(&labels)?;
        match v {
            Value::Counter(c) => ConstCounter::new(c).encode(e)?,
            Value::Gauge(g) => ConstGauge::new(g).encode(e)?,
            Value::Histogram(h) => {
                let mut e = e;
                e.encode_histogram::<prometheus_client::encoding::NoLabelSet>(h.sum_s, h.count(), &h.pairs(), None)?
            }
        }
    }
    Ok(())
}

enum Value {
    Counter(f64),
    Gauge(f64),
    Histogram(latency::Buckets),
}

impl prometheus_client::collector::Collector for Collect {
    /// Long on purpose: every metric family in the order a scrape shows them, each absent when not measured.
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut steps = self.0.steps.lock().unwrap().clone();
        for s in steps.iter_mut() {
            s.refresh();
        }
        let target = self.0.target.lock().unwrap().clone();
        let labels = |s: &StepFigures| -> Labels {
            vec![("target".into(), target.clone()), ("step_points".into(), s.points.to_string())]
        };
        let each = |f: &dyn Fn(&StepFigures) -> Option<Value>| -> Vec<(Labels, Value)> {
            steps.iter().filter_map(|s| f(s).map(|v| (labels(s), v))).collect()
        };
        use MetricType::{Counter, Gauge, Histogram};
        let loaded = |s: &StepFigures| s.sources.is_some() || s.ended;
        family(
            &mut enc,
            "scalebench_readings_offered",
            "Readings the generator handed to its connections.",
            Counter,
            each(&|s| loaded(s).then_some(Value::Counter(s.offered as f64))),
        )?;
        family(
            &mut enc,
            "scalebench_readings_acknowledged",
            "Readings the system under test acknowledged.",
            Counter,
            each(&|s| loaded(s).then_some(Value::Counter(s.acked as f64))),
        )?;
        family(
            &mut enc,
            "scalebench_readings_refused",
            "Readings in messages the system under test answered and refused.",
            Counter,
            each(&|s| loaded(s).then_some(Value::Counter(s.refused as f64))),
        )?;
        family(
            &mut enc,
            "scalebench_readings_stored",
            "Readings the storage wrote since the step began, by its own write counter (absent when it was not read).",
            Counter,
            each(&|s| s.sample.stored.map(|n| Value::Counter(n.max(0.0)))),
        )?;
        family(
            &mut enc,
            "scalebench_ack_latency_intended_seconds",
            "Acknowledgement latency from each reading's intended send time (coordinated-omission safe), from the soak's start.",
            Histogram,
            each(&|s| loaded(s).then(|| Value::Histogram(s.latency.intended.clone()))),
        )?;
        family(
            &mut enc,
            "scalebench_ack_latency_service_seconds",
            "Acknowledgement latency from the actual send (service time), from the soak's start.",
            Histogram,
            each(&|s| loaded(s).then(|| Value::Histogram(s.latency.service.clone()))),
        )?;
        family(
            &mut enc,
            "scalebench_step_points",
            "Points of the step that is running.",
            Gauge,
            each(&|s| (!s.ended).then_some(Value::Gauge(s.points as f64))),
        )?;
        let phases = [Phase::Topology, Phase::WarmUp, Phase::Soak, Phase::Probes, Phase::Drain, Phase::Count];
        let mut series = Vec::new();
        for s in steps.iter().filter(|s| s.phase.is_some()) {
            for p in phases {
                let mut l = labels(s);
                l.push(("phase".into(), p.name().into()));
                series.push((l, Value::Gauge(if s.phase == Some(p) { 1.0 } else { 0.0 })));
            }
        }
        family(&mut enc, "scalebench_step_phase", "1 for the phase the running step is in.", Gauge, series)?;
        family(
            &mut enc,
            "scalebench_canary_lag_seconds",
            "From a canary's send to its arrival in storage, at the last sample.",
            Gauge,
            each(&|s| s.sample.lag_s.map(Value::Gauge)),
        )?;
        family(
            &mut enc,
            "scalebench_behind_schedule_seconds",
            "How far the generator was behind its schedule at the last sample.",
            Gauge,
            each(&|s| loaded(s).then_some(Value::Gauge(s.sample.behind_s))),
        )?;
        family(
            &mut enc,
            "scalebench_broker_dropped_messages",
            "The broker's own count of dropped messages since the step began.",
            Gauge,
            each(&|s| s.sample.broker_dropped.map(Value::Gauge)),
        )?;
        let mut cpu = Vec::new();
        let mut rss = Vec::new();
        for s in &steps {
            for (name, c) in &s.sample.cpu_cores {
                let mut l = labels(s);
                l.push(("service".into(), name.clone()));
                cpu.push((l, Value::Gauge(*c)));
            }
            for (name, b) in &s.sample.rss_bytes {
                let mut l = labels(s);
                l.push(("service".into(), name.clone()));
                rss.push((l, Value::Gauge(*b as f64)));
            }
        }
        family(
            &mut enc,
            "scalebench_service_cpu_cores",
            "CPU of each stack service over the last sample, in cores.",
            Gauge,
            cpu,
        )?;
        family(
            &mut enc,
            "scalebench_service_resident_memory_bytes",
            "Resident memory of each stack service at the last sample.",
            Gauge,
            rss,
        )?;
        let mut verdicts = Vec::new();
        for s in &steps {
            if let Some(v) = s.verdict {
                let mut l = labels(s);
                l.push(("verdict".into(), verdict_label(v)));
                verdicts.push((l, Value::Gauge(1.0)));
            }
        }
        family(&mut enc, "scalebench_step_verdict", "1 for each finished step's verdict.", Gauge, verdicts)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::Timing;
    use crate::transport::Carries;

    fn sources() -> LoadSources {
        LoadSources {
            producer: Arc::new(ProducerLive::default()),
            transport: Arc::new(Live::default()),
            connections: vec![Arc::new(Mutex::new(AckCounts::default()))],
            more_latency: None,
        }
    }

    #[test]
    fn a_scrape_reads_the_live_counters_and_leaves_out_what_was_not_measured() {
        let m = LiveMetrics::new("baler");
        m.step_started(200);
        let text = m.render();
        assert!(text.contains("scalebench_step_points{target=\"baler\",step_points=\"200\"} 200"), "{text}");
        assert!(
            text.contains("scalebench_step_phase{target=\"baler\",step_points=\"200\",phase=\"topology\"} 1"),
            "{text}"
        );
        assert!(!text.contains("scalebench_readings_offered"), "no load yet, no counter: {text}");
        let s = sources();
        m.load_started(s.clone());
        m.phase(Phase::Soak);
        s.producer.readings_offered.store(1000, Ordering::Relaxed);
        s.transport.readings_acked.store(990, Ordering::Relaxed);
        s.transport.readings_refused.store(4, Ordering::Relaxed);
        s.connections[0].lock().unwrap().record_ack(
            Carries::Readings { n: 10, ts_s: 0 },
            Timing { intended_ns: 0, sent_ns: 1_000_000 },
            3_000_000,
        );
        m.sample(SampleFigures { stored: None, lag_s: None, behind_s: 0.5, ..Default::default() });
        let text = m.render();
        for line in [
            "scalebench_readings_offered_total{target=\"baler\",step_points=\"200\"} 1000",
            "scalebench_readings_acknowledged_total{target=\"baler\",step_points=\"200\"} 990",
            "scalebench_readings_refused_total{target=\"baler\",step_points=\"200\"} 4",
            "scalebench_ack_latency_intended_seconds_bucket{le=\"0.0025\",target=\"baler\",step_points=\"200\"} 0",
            "scalebench_ack_latency_intended_seconds_bucket{le=\"0.005\",target=\"baler\",step_points=\"200\"} 10",
            "scalebench_ack_latency_service_seconds_bucket{le=\"0.0025\",target=\"baler\",step_points=\"200\"} 10",
            "scalebench_ack_latency_intended_seconds_count{target=\"baler\",step_points=\"200\"} 10",
            "scalebench_behind_schedule_seconds{target=\"baler\",step_points=\"200\"} 0.5",
            "scalebench_step_phase{target=\"baler\",step_points=\"200\",phase=\"soak\"} 1",
        ] {
            assert!(text.contains(line), "missing {line}:\n{text}");
        }
        assert!(!text.contains("scalebench_readings_stored"), "stored not read: absent, never 0: {text}");
        assert!(!text.contains("scalebench_canary_lag_seconds"), "{text}");
        m.step_done(Status::Fail);
        s.transport.readings_acked.store(5000, Ordering::Relaxed);
        let text = m.render();
        assert!(
            text.contains("scalebench_readings_acknowledged_total{target=\"baler\",step_points=\"200\"} 990"),
            "frozen at the verdict: {text}"
        );
        assert!(
            text.contains("scalebench_step_verdict{target=\"baler\",step_points=\"200\",verdict=\"fail\"} 1"),
            "{text}"
        );
        assert!(!text.contains("scalebench_step_points{"), "no step runs: {text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
