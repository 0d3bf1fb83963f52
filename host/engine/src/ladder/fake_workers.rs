//! The fast tier's distributed run: a load source of in-process workers,
//! each its own producer (the fake model and adapter) on its own fake
//! connections to the same in-memory broker, offering its shard of the
//! schedule as a `scalebench worker` does, while the ladder's own process
//! sends only the canaries. The step is driven through the same
//! [`LoadSource`] calls as the HTTP workers, so the rules are tested on a
//! distributed step without a network.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::fake::{FakeAdapter, FakeCarrier, FakeModel, Sut};
use crate::live_metrics::LatencySource;
use crate::load_source::{LoadSource, SourceNotes, StepLoad};
use crate::loadgen::{self, LoadSpec, Plugins, ProducerLive, ProducerReport, Share};
use crate::results::WorkerFigures;
use crate::transport::{AckCounts, Batch, Live, Transport};

type Producer = std::thread::JoinHandle<Result<ProducerReport, plugin_runtime::PluginError>>;

/// `count` workers on `carrier`'s broker.
pub struct FakeWorkers {
    carrier: FakeCarrier,
    count: u32,
    seed: u64,
    stop: Arc<AtomicBool>,
    step: Mutex<Vec<FakeWorker>>,
    /// Their connections, opened at `prepare`, in the step's transport from `gather`.
    opened: Mutex<Vec<Box<dyn Transport>>>,
}

/// One worker's step.
#[derive(Default)]
struct FakeWorker {
    senders: Vec<tokio::sync::mpsc::Sender<Batch>>,
    acks: Arc<Live>,
    live: Arc<ProducerLive>,
    producer: Option<Producer>,
    scheduled: u64,
    report: Option<ProducerReport>,
}

impl FakeWorkers {
    pub fn new(sut: Arc<Sut>, count: u32, connections: u32, window: usize, seed: u64) -> FakeWorkers {
        FakeWorkers {
            carrier: FakeCarrier { sut, connections, window },
            count,
            seed,
            stop: Arc::new(AtomicBool::new(false)),
            step: Mutex::new(Vec::new()),
            opened: Mutex::new(Vec::new()),
        }
    }
}

/// The coordinator's connections and the workers': the final counts hold
/// them all (as `distributed::coordinator::Gathered` does).
struct Gathered {
    inner: Box<dyn Transport>,
    theirs: Vec<Box<dyn Transport>>,
}

impl Transport for Gathered {
    fn pool(&self) -> &crate::transport::pool::Pool {
        self.inner.pool()
    }
    fn finish(self: Box<Self>, drain: Duration) -> crate::future::BoxFuture<'static, AckCounts> {
        let Gathered { inner, theirs } = *self;
        Box::pin(async move {
            let mut counts = inner.finish(drain).await;
            for t in theirs {
                counts.merge(&t.finish(drain).await);
            }
            counts
        })
    }
}

impl LoadSource for FakeWorkers {
    fn own_share(&self) -> Share {
        Share::None
    }
    fn notice(&self) -> Duration {
        Duration::from_millis(300)
    }
    fn prepare(&self, _points: u64) -> anyhow::Result<()> {
        let rt = tokio::runtime::Handle::current();
        let mut workers = Vec::new();
        let mut transports = Vec::new();
        for _ in 0..self.count {
            let t = rt.block_on(crate::transport::Carrier::open(&self.carrier))?;
            // As a real worker: its seconds are merged with the others'.
            t.live().keep_second_histograms.store(true, Ordering::Relaxed);
            workers.push(FakeWorker { senders: t.senders(), acks: t.live().clone(), ..Default::default() });
            transports.push(t);
        }
        *self.step.lock().unwrap() = workers;
        *self.opened.lock().unwrap() = transports;
        Ok(())
    }
    fn gather(self: Arc<Self>, own: Box<dyn Transport>) -> Box<dyn Transport> {
        let theirs = std::mem::take(&mut *self.opened.lock().unwrap());
        Box::new(Gathered { inner: own, theirs })
    }
    fn start(&self, load: &StepLoad) -> Vec<String> {
        self.stop.store(false, Ordering::Relaxed);
        let addresses: Arc<Vec<Arc<str>>> =
            Arc::new((0..load.points).map(|p| Arc::from(format!("fake/{p}").as_str())).collect());
        for (index, w) in self.step.lock().unwrap().iter_mut().enumerate() {
            let spec = LoadSpec {
                points: load.points as u32,
                interval: load.interval,
                seed: self.seed,
                duration: load.duration,
                sample_period_ms: load.sample_period_ms,
                first_canary_seq: 0,
                start_ms: Some(load.start_ms),
                share: Share::Shard { index: index as u32, count: self.count },
                canaries: false,
            };
            w.scheduled = loadgen::scheduled_in_share(spec.points, spec.interval, spec.duration, spec.share);
            let senders = std::mem::take(&mut w.senders);
            let (live, stop, addresses) = (w.live.clone(), self.stop.clone(), addresses.clone());
            let adapter = FakeAdapter(self.carrier.sut.clone());
            w.producer = Some(std::thread::spawn(move || {
                let mut plugins = Plugins { model: Box::new(FakeModel), adapter: Box::new(adapter) };
                loadgen::produce(&mut plugins, &spec, &addresses, &senders, &live, &stop)
            }));
        }
        Vec::new()
    }
    fn watch(&self, live: &ProducerLive, acks: &Live, stop: &AtomicBool, until: Instant) {
        let mut counted = vec![(0u64, 0u64); self.count as usize];
        loop {
            if stop.load(Ordering::Relaxed) {
                self.stop.store(true, Ordering::Relaxed);
            }
            let mut running = 0;
            for (w, (o, a)) in self.step.lock().unwrap().iter().zip(counted.iter_mut()) {
                let (offered, acked) =
                    (w.live.readings_offered.load(Ordering::Relaxed), w.acks.readings_acked.load(Ordering::Relaxed));
                live.readings_offered.fetch_add(offered - *o, Ordering::Relaxed);
                acks.readings_acked.fetch_add(acked - *a, Ordering::Relaxed);
                (*o, *a) = (offered, acked);
                running += usize::from(w.producer.as_ref().is_some_and(|p| !p.is_finished()));
            }
            if running == 0 || Instant::now() >= until {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    fn more_latency(self: Arc<Self>) -> Option<Arc<dyn LatencySource>> {
        None
    }
    fn merge_reports(&self, r: &mut ProducerReport) -> f64 {
        for w in self.step.lock().unwrap().iter_mut() {
            let report = match w.producer.take().map(|p| p.join()) {
                Some(Ok(Ok(report))) => report,
                other => panic!("a fake worker's producer failed: {:?}", other.map(|r| r.map(|x| x.err()))),
            };
            r.add_side_by_side(&report);
            w.report = Some(report);
        }
        // Their CPU is this process's: already in its own figure.
        0.0
    }
    fn notes(&self) -> SourceNotes {
        let figures = self
            .step
            .lock()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, w)| WorkerFigures {
                worker: i as u32 + 1,
                url: format!("in-process fake worker {}", i + 1),
                scheduled: w.scheduled,
                offered: w.report.as_ref().map_or(0, |r| r.readings_offered),
                acked: w.acks.readings_acked.load(Ordering::Relaxed),
                cpu_s: None,
                behind_schedule_max_s: w.report.as_ref().map(|r| r.behind_max_s),
                clock_offset_ms: Some(0),
                clock_rtt_ms: Some(0),
                problem: None,
                ..Default::default()
            })
            .collect();
        SourceNotes { figures, ..Default::default() }
    }
}
