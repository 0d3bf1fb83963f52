//! The fast test tier's system under test, in memory: a carrier whose
//! "broker" acknowledges, refuses, drops, freezes and throttles on command,
//! a store it writes to, a stack driver whose signals reach that broker, and
//! a model and adapter with no WebAssembly behind them (and, in
//! `fake_workers.rs`, workers of a distributed run). [`run_step`] runs one
//! real ladder step ([`super::step::run`]: topology, offer, drain, count,
//! assemble, verdict) against them, so the honesty rules are tested without
//! a service (hyperfine's `MockExecutor` plays this part for its runs).
//!
//! The connections are shaped like the real transports': a bounded channel
//! of batches, an in-flight window whose waits count as "held back", and
//! every answer counted through the same `count_ack` / `count_refused` as
//! MQTT, NATS and HTTP.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use plugin_runtime::adapter_types::{EncodedBatch, Message as PluginMessage, Stat};
use plugin_runtime::types::{Readings, TagInfo, Window};
use plugin_runtime::PluginError;
use tokio::sync::mpsc;

use super::{Fault, LadderConfig, Session};
use crate::budgets::Budgets;
use crate::clock::now_ns;
use crate::future::BoxFuture;
use crate::latency::Timing;
use crate::load_source::{LoadSource, Local};
use crate::results::{ServiceHealth, StepResult};
use crate::services::StackServices;
use crate::stack::{Endpoint, ServiceKind, StackDriver};
use crate::storage::StoredCount;
use crate::target::{Adapter, Model};
use crate::transport::pool::Pool;
use crate::transport::{count_ack, count_refused, AckCounts, Batch, Carrier, Carries, Live, Transport};

/// The fake broker's name, as faults and health name it.
pub const BROKER: &str = "broker";

/// What the fake SUT does, and what it did (for the tests' assertions).
#[derive(Default)]
pub struct Sut {
    /// SIGSTOP'd: nothing is answered until SIGCONT.
    pub frozen: AtomicBool,
    /// Readings per second the broker can take at most (all connections).
    pub rate_limit: Option<f64>,
    /// Every n-th reading message is acknowledged but never stored.
    pub drop_every: Option<u64>,
    /// Every n-th reading message is answered with a refusal.
    pub refuse_every: Option<u64>,
    /// Stored counts cannot be read (a metric hidden from scalebench).
    pub hide_stored: bool,
    /// The next this many count reads fail (a stream still electing its
    /// leader after a whole-cluster restart), then they answer.
    pub count_unreadable_reads: AtomicU64,
    /// The count reports each stored reading this many times (an adapter
    /// that double-counts); None or 1: once.
    pub count_times: Option<u64>,
    /// The storage's write counter answers this late (a database busy
    /// under load can take seconds to count).
    pub slow_count: Option<Duration>,
    pub next_free: Mutex<Option<Instant>>,
    pub reading_msgs: AtomicU64,
    /// Readings acknowledged and thrown away, and readings refused.
    pub dropped: AtomicU64,
    /// The dropped readings by their second (payload time, s since the epoch).
    pub dropped_by_second: Mutex<BTreeMap<i64, u64>>,
    pub refused: AtomicU64,
    pub store: Mutex<Store>,
    pub health: Mutex<ServiceHealth>,
    pub restarted: Mutex<Vec<String>>,
}

/// What reached storage.
#[derive(Default)]
pub struct Store {
    pub by_second: BTreeMap<i64, u64>,
    pub canaries: BTreeSet<u64>,
    pub rows: u64,
}

enum Answer {
    Ack,
    Refuse(String),
}

impl Sut {
    /// A broker that answers everything, up and running.
    pub fn new() -> Sut {
        let sut = Sut::default();
        *sut.health.lock().unwrap() =
            ServiceHealth { state: "running".into(), oom_measured: true, ..Default::default() };
        sut
    }

    /// Take one message, as a broker and its ingester would.
    fn take(&self, carries: Carries) -> Answer {
        match carries {
            Carries::Readings { n, ts_s } => {
                let k = self.reading_msgs.fetch_add(1, Ordering::Relaxed) + 1;
                if self.refuse_every.is_some_and(|e| k.is_multiple_of(e)) {
                    self.refused.fetch_add(n as u64, Ordering::Relaxed);
                    return Answer::Refuse("quota exceeded (the fake broker refuses on purpose)".into());
                }
                if self.drop_every.is_some_and(|e| k.is_multiple_of(e)) {
                    self.dropped.fetch_add(n as u64, Ordering::Relaxed);
                    *self.dropped_by_second.lock().unwrap().entry(ts_s).or_default() += n as u64;
                    return Answer::Ack;
                }
                let mut s = self.store.lock().unwrap();
                *s.by_second.entry(ts_s).or_default() += n as u64;
                s.rows += n as u64;
                Answer::Ack
            }
            Carries::Canary { seq } => {
                self.store.lock().unwrap().canaries.insert(seq);
                Answer::Ack
            }
            Carries::Topology => Answer::Ack,
        }
    }

    /// Wait while frozen, then for room under the rate limit.
    async fn ready_for(&self, readings: u64) {
        while self.frozen.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let Some(rate) = self.rate_limit else { return };
        let at = {
            let mut next = self.next_free.lock().unwrap();
            let now = Instant::now();
            let at = next.map_or(now, |n| n.max(now));
            *next = Some(at + Duration::from_secs_f64(readings.max(1) as f64 / rate));
            at
        };
        if at > Instant::now() + Duration::from_millis(1) {
            tokio::time::sleep_until(at.into()).await;
        }
    }
}

/// The fake carrier: acknowledged like MQTT into a historian (an ack is not
/// "stored"; canaries are polled in the store).
pub struct FakeCarrier {
    pub sut: Arc<Sut>,
    pub connections: u32,
    pub window: usize,
}

struct FakeTransport {
    pool: Pool,
}

impl Carrier for FakeCarrier {
    fn describe(&self) -> String {
        "the in-memory fake broker".into()
    }
    fn open(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn Transport>>> {
        Box::pin(async move {
            let mut pool = Pool::new(Arc::new(Live::default()));
            for _ in 0..self.connections.max(1) {
                let (sut, live, window) = (self.sut.clone(), pool.live.clone(), self.window.max(1));
                pool.open(64, move |rx, counts| tokio::spawn(connection(rx, counts, live, sut, window)));
            }
            Ok(Box::new(FakeTransport { pool }) as Box<dyn Transport>)
        })
    }
    fn acks_expected(&self) -> bool {
        true
    }
    fn ack_means_stored(&self) -> bool {
        false
    }
    fn acknowledger(&self) -> &'static str {
        "the fake broker"
    }
}

impl Transport for FakeTransport {
    fn pool(&self) -> &Pool {
        &self.pool
    }
    fn finish(self: Box<Self>, drain: Duration) -> BoxFuture<'static, AckCounts> {
        Box::pin(async move {
            let deadline = Instant::now() + drain;
            let mut all = AckCounts::default();
            let live = self.pool.live.clone();
            for c in self.pool.conns {
                drop(c.tx);
                let left = deadline.saturating_duration_since(Instant::now());
                let mut task = c.task;
                if tokio::time::timeout(left, &mut task).await.is_err() {
                    // Still waiting for answers at the deadline: they stay unanswered.
                    task.abort();
                }
                let mut counts = c.counts.lock().unwrap();
                counts.close(now_ns());
                all.merge(&counts);
            }
            live.add_seconds_to(&mut all);
            all
        })
    }
}

/// One connection: sends in order, at most `window` unanswered.
async fn connection(
    mut rx: mpsc::Receiver<Batch>,
    counts: Arc<Mutex<AckCounts>>,
    live: Arc<Live>,
    sut: Arc<Sut>,
    window: usize,
) {
    let (to_broker, from_conn) = mpsc::unbounded_channel::<(Carries, Timing)>();
    let (answers_tx, mut answers) = mpsc::unbounded_channel::<(Carries, Timing, Answer)>();
    let broker = tokio::spawn(broker(from_conn, answers_tx, sut));
    live.connected.fetch_add(1, Ordering::Relaxed);
    let settle = |(carries, t, answer): (Carries, Timing, Answer)| {
        let mut c = counts.lock().unwrap();
        match answer {
            Answer::Ack => {
                count_ack(&mut c, &live, carries, t, now_ns());
            }
            Answer::Refuse(why) => count_refused(&mut c, &live, carries, t, now_ns(), why),
        }
    };
    let mut outstanding = 0usize;
    loop {
        let batch = tokio::select! {
            biased;
            Some(a) = answers.recv(), if outstanding > 0 => {
                settle(a);
                outstanding -= 1;
                continue;
            }
            b = rx.recv() => match b {
                Some(b) => b,
                None => {
                    counts.lock().unwrap().input_drained = true;
                    break;
                }
            },
        };
        for m in batch {
            if outstanding >= window {
                let waited = Instant::now();
                while outstanding >= window {
                    let Some(a) = answers.recv().await else { return };
                    settle(a);
                    outstanding -= 1;
                }
                counts.lock().unwrap().held_back_s += waited.elapsed().as_secs_f64();
            }
            let t = m.sent_now();
            {
                let mut c = counts.lock().unwrap();
                c.published += 1;
                c.queued += 1;
                c.readings_published += m.readings();
            }
            live.published.fetch_add(1, Ordering::Relaxed);
            outstanding += 1;
            let _ = to_broker.send((m.carries, t));
        }
    }
    drop(to_broker);
    while outstanding > 0 {
        let Some(a) = answers.recv().await else { break };
        settle(a);
        outstanding -= 1;
    }
    let _ = broker.await;
}

/// The broker's side of one connection: answers in order.
async fn broker(
    mut rx: mpsc::UnboundedReceiver<(Carries, Timing)>,
    answers: mpsc::UnboundedSender<(Carries, Timing, Answer)>,
    sut: Arc<Sut>,
) {
    while let Some((carries, t)) = rx.recv().await {
        let n = if let Carries::Readings { n, .. } = carries { n as u64 } else { 1 };
        sut.ready_for(n).await;
        let answer = sut.take(carries);
        if answers.send((carries, t, answer)).is_err() {
            return;
        }
    }
}

/// Counts what the fake store holds.
pub struct FakeCount(pub Arc<Sut>);

impl StoredCount for FakeCount {
    fn stored(&self, window: Window) -> BoxFuture<'_, anyhow::Result<BTreeMap<i64, u64>>> {
        Box::pin(async move {
            if self.0.hide_stored {
                anyhow::bail!("the fake store does not answer count queries");
            }
            let unreadable = &self.0.count_unreadable_reads;
            if unreadable.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok() {
                anyhow::bail!("the fake stream has no leader yet");
            }
            let from = window.start_ms.div_euclid(1000);
            let to = (window.end_ms + 999).div_euclid(1000);
            let times = self.0.count_times.unwrap_or(1);
            Ok(self.0.store.lock().unwrap().by_second.range(from..to).map(|(s, n)| (*s, *n * times)).collect())
        })
    }
    fn rows_written(&self) -> BoxFuture<'_, Option<(f64, String)>> {
        Box::pin(async move {
            if let Some(d) = self.0.slow_count {
                tokio::time::sleep(d).await;
            }
            Some((self.0.store.lock().unwrap().rows as f64, "the fake store's row counter".into()))
        })
    }
    fn ping(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            if let Some(d) = self.0.slow_count {
                tokio::time::sleep(d).await;
            }
            Ok(())
        })
    }
    fn store_name(&self) -> String {
        "the fake store".into()
    }
    fn settles(&self) -> bool {
        false
    }
}

/// The fake stack: one broker, whose signals the fake SUT obeys.
pub struct FakeStack(pub Arc<Sut>);

impl StackDriver for FakeStack {
    fn kind(&self) -> &'static str {
        "fake"
    }
    fn services(&self) -> Vec<Endpoint> {
        vec![Endpoint { name: BROKER.into(), kind: ServiceKind::Mqtt, address: "mqtt://fake:1".into() }]
    }
    fn supervise(&mut self) -> BoxFuture<'_, Vec<String>> {
        let events = std::mem::take(&mut *self.0.restarted.lock().unwrap());
        Box::pin(async move { events })
    }
    fn health_totals(&mut self) -> Option<BTreeMap<String, ServiceHealth>> {
        Some(BTreeMap::from([(BROKER.to_string(), self.0.health.lock().unwrap().clone())]))
    }
    fn signal_names(&self) -> Vec<String> {
        vec![BROKER.to_string()]
    }
    fn signal(&mut self, service: &str, signal: i32) -> Result<(), String> {
        if service != BROKER {
            return Err(format!("no service `{service}` in the fake stack"));
        }
        match signal {
            libc::SIGSTOP => self.0.frozen.store(true, Ordering::Relaxed),
            libc::SIGCONT => self.0.frozen.store(false, Ordering::Relaxed),
            libc::SIGKILL => {
                // Supervised: back at once, its data kept, the exit recorded.
                let mut h = self.0.health.lock().unwrap();
                h.restarts += 1;
                h.exits.push("killed by SIGKILL".into());
                self.0.restarted.lock().unwrap().push(format!("{BROKER} exited (SIGKILL); restarted"));
            }
            other => return Err(format!("the fake stack does not know signal {other}")),
        }
        Ok(())
    }
    fn stop(self: Box<Self>) {}
}

/// Points with no model behind them: point `i` reads `i`.
pub struct FakeModel;

impl Model for FakeModel {
    fn name(&self) -> &str {
        "fake-model"
    }
    fn memory_bytes(&self) -> u64 {
        0
    }
    fn tags(&mut self, _seed: u64, first: u32, count: u32) -> Result<Vec<TagInfo>, PluginError> {
        Ok((first..first + count)
            .map(|i| TagInfo {
                index: i,
                kind: "noise".into(),
                unit: String::new(),
                site: 0,
                equip: i / 10,
                label: format!("p{i}"),
                markers: Vec::new(),
            })
            .collect())
    }
    fn sample(&mut self, _seed: u64, first: u32, count: u32, _sample: u64) -> Result<Vec<f64>, PluginError> {
        Ok((first..first + count).map(f64::from).collect())
    }
}

/// One message per reading, canaries read back from the fake store.
pub struct FakeAdapter(pub Arc<Sut>);

impl Adapter for FakeAdapter {
    fn name(&self) -> &str {
        "fake-adapter"
    }
    fn memory_bytes(&self) -> u64 {
        0
    }
    fn addresses(&mut self, points: &[TagInfo]) -> Result<Vec<String>, PluginError> {
        Ok(points.iter().map(|p| format!("fake/{}", p.index)).collect())
    }
    fn topology(&mut self, points: &[TagInfo]) -> Result<Vec<PluginMessage>, PluginError> {
        Ok(points
            .chunks(100)
            .map(|c| PluginMessage { address: "fake/topology".into(), payload: c.len().to_le_bytes().to_vec() })
            .collect())
    }
    fn encode(&mut self, batch: &Readings) -> Result<EncodedBatch, PluginError> {
        let payload: Vec<u8> = batch.values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Ok(EncodedBatch {
            address_of: batch.points.clone(),
            ends: (1..=batch.points.len() as u32).map(|i| i * 8).collect(),
            payload,
            carries: vec![1; batch.points.len()],
        })
    }
    fn canary(&mut self, seq: u64, _ts_ms: i64) -> Result<PluginMessage, PluginError> {
        Ok(PluginMessage { address: "fake/canary".into(), payload: seq.to_le_bytes().to_vec() })
    }
    fn canaries_stored(&mut self, from_seq: u64) -> Result<Vec<u64>, PluginError> {
        Ok(self.0.store.lock().unwrap().canaries.range(from_seq..).copied().collect())
    }
    fn stats(&mut self) -> Result<Vec<Stat>, PluginError> {
        Ok(Vec::new())
    }
}

/// How a fast test's step is run: scalebench's own defaults (connections,
/// in-flight window) unless a test says otherwise.
pub struct Setup {
    pub points: u64,
    pub warmup: Duration,
    pub soak: Duration,
    pub connections: u32,
    pub inflight: u16,
    pub faults: Vec<Fault>,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            points: 2_000,
            warmup: Duration::from_secs(1),
            soak: Duration::from_secs(5),
            // The `run` command's defaults.
            connections: 4,
            inflight: 4096,
            faults: Vec::new(),
        }
    }
}

pub(super) fn ladder_config(s: &Setup, results_dir: &std::path::Path) -> LadderConfig {
    LadderConfig {
        steps: vec![s.points],
        interval: Duration::from_secs(1),
        warmup: s.warmup,
        soak: s.soak,
        sample_every: Duration::from_secs(1),
        continue_on_fail: false,
        seed: 1,
        connections: s.connections,
        inflight: s.inflight,
        mqtt_user: None,
        mqtt_password: None,
        mqtt_version: 4,
        http_window: 64,
        target_password: None,
        model: "fake-model".into(),
        model_params: "{}".into(),
        target: "fake-adapter".into(),
        target_params: "{}".into(),
        probes: None,
        probe_params: "{}".into(),
        probe_warm_runs: 0,
        drain_timeout: Duration::from_secs(10),
        results_dir: results_dir.to_path_buf(),
        run_id: "fake".into(),
        command_line: Vec::new(),
        plan: Default::default(),
        min_disk_free_bytes: 0,
        repo_dir: results_dir.to_path_buf(),
        faults: s.faults.clone(),
        // Live-safety is not under test here: a busy test machine must not trip it.
        live: crate::live_safety::Config { url: None, latency_factor: f64::INFINITY, load_factor: f64::INFINITY },
        prefill: None,
        workers: Vec::new(),
        metrics: None,
    }
}

/// The shipped step rules (budgets.json).
pub(super) fn shipped_budgets() -> Budgets {
    Budgets::parse(include_str!("../../../../budgets.json"), std::path::Path::new("budgets.json"))
        .expect("the shipped budgets.json parses")
}

/// A run's session on the fake SUT, its readings from `load`.
pub(super) fn session(sut: &Arc<Sut>, cfg: &LadderConfig, load: Arc<dyn LoadSource>) -> Session {
    Session {
        model: Some(Box::new(FakeModel)),
        encoder: Some(Box::new(FakeAdapter(sut.clone()))),
        counter: Arc::new(Mutex::new(FakeAdapter(sut.clone()))),
        canary: Arc::new(Mutex::new(FakeAdapter(sut.clone()))),
        probe_set: None,
        addresses: Vec::new(),
        tags: Default::default(),
        period_ms: 1000,
        carrier: Box::new(FakeCarrier {
            sut: sut.clone(),
            connections: cfg.connections,
            window: cfg.inflight as usize,
        }),
        count: Arc::new(FakeCount(sut.clone())),
        next_canary_seq: 0,
        watch: crate::live_safety::Watch::start(cfg.live.clone()).unwrap(),
        load,
        durability_settings: Default::default(),
    }
}

/// Run one ladder step against `sut` with the shipped step rules
/// (budgets.json); needs a multi-threaded runtime.
pub async fn run_step(sut: Arc<Sut>, setup: Setup) -> StepResult {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ladder_config(&setup, dir.path());
    let budgets = shipped_budgets();
    let services = Arc::new(StackServices::new(BTreeMap::new(), BTreeMap::new()).unwrap());
    let mut stack = FakeStack(sut.clone());
    let mut session = session(&sut, &cfg, Arc::new(Local));
    let stop = Arc::new(AtomicBool::new(false));
    let progress = crate::progress::Progress::lines(Box::new(std::io::sink()));
    let env = super::step::Env {
        cfg: &cfg,
        stack: &mut stack,
        services: &services,
        budgets: &budgets,
        sys: None,
        stop: &stop,
        nproc: 2,
        progress: &progress,
    };
    super::step::run(env, &mut session, setup.points).await.expect("the step runs")
}
