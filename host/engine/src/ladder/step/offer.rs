//! Phase 2: the producer offers readings for the warm-up and soak while the
//! step samples, supervises, injects calibration faults and times probes.

use super::faults::FaultClock;
use super::store_watch::{StoreRecord, StoreWatch};
use super::*;

/// What the offer phase measured.
pub(super) struct Offered {
    pub(super) report: ProducerReport,
    pub(super) live: Arc<ProducerLive>,
    pub(super) seen: Arc<Mutex<Seen>>,
    pub(super) stop_poll: Arc<AtomicBool>,
    pub(super) poller: Option<std::thread::JoinHandle<()>>,
    pub(super) samples: Vec<Sample>,
    pub(super) proc_samples: Vec<Vec<ProcSample>>,
    pub(super) soak_proc_start: Option<Vec<ProcSample>>,
    pub(super) soak_proc_end: Vec<ProcSample>,
    pub(super) probes: Vec<ProbeResult>,
    pub(super) sys_before: BTreeMap<String, f64>,
    pub(super) cpu_s: f64,
    /// The storage's own write counter at the soak's start and the load's end.
    pub(super) written_at_soak_start: Option<(Instant, f64)>,
    pub(super) written_at_end: Option<(Instant, f64)>,
    pub(super) written_source: Option<String>,
    pub(super) unmeasured: Vec<String>,
    pub(super) disk_low: Option<String>,
    pub(super) live_safety: Option<String>,
    pub(super) live_samples: Vec<crate::live_safety::LiveSample>,
    pub(super) interrupted: bool,
    /// Services still frozen by a calibration fault when the load ended.
    pub(super) frozen: Vec<String>,
    /// When the producer returned (the load's end).
    pub(super) load_ended: Instant,
    /// Calibration faults as they were injected.
    pub(super) faults: Vec<InjectedFault>,
    /// The store watched every second of the load.
    pub(super) store: StoreRecord,
}

pub(super) fn disk_check(
    dirs: &[(&str, &Path)],
    min_free: u64,
    out: &mut BTreeMap<String, Option<u64>>,
) -> (Option<String>, Vec<String>) {
    let mut low = None;
    let mut unmeasured = Vec::new();
    for (what, dir) in dirs {
        let free = hardware::disk_free_bytes(dir);
        out.insert(what.to_string(), free);
        match free {
            Some(f) if f < min_free => {
                low = Some(format!(
                    "{what} ({}): {:.1} GB free, below {:.1} GB",
                    dir.display(),
                    f as f64 / 1e9,
                    min_free as f64 / 1e9
                ));
            }
            Some(_) => {}
            None => unmeasured.push(format!("free disk of the {what} ({}): statvfs failed", dir.display())),
        }
    }
    (low, unmeasured)
}

/// The offer phase.
///
/// Long on purpose: it is one loop, every 100 ms for the
/// whole load, that must see everything in order (stop, supervision,
/// faults due, the soak's start, the probes' start, a sample); each of
/// those is a named function or phase of its own below.
pub(super) async fn offer(
    env: &mut Env<'_>,
    session: &mut Session,
    transport: &dyn Transport,
    points: u64,
) -> anyhow::Result<Offered> {
    let cfg = env.cfg;
    let target_rps = points as f64 / cfg.interval.as_secs_f64();
    let live = Arc::new(ProducerLive::default());
    let spec = load_spec(cfg, session, points);
    start_load(session, cfg, &spec, points).await?;
    // Readings due from the soak's start are in the step's latency histograms.
    if let Some(start) = spec.start_ms {
        transport.live().soak_from_ms.store(start + cfg.warmup.as_millis() as i64, Ordering::Relaxed);
    }
    // The producer stops on Ctrl-C or when this step must end early (live-safety).
    let step_stop = Arc::new(AtomicBool::new(false));
    let producer = spawn_producer(session, transport, &spec, &live, &step_stop)?;

    env.progress.load_started(|| crate::live_metrics::LoadSources {
        producer: live.clone(),
        transport: transport.live().clone(),
        connections: transport.pool().conns.iter().map(|c| c.counts.clone()).collect(),
        more_latency: session.load.clone().more_latency(),
    });

    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop_poll = Arc::new(AtomicBool::new(false));
    let poller = if !session.carrier.ack_means_stored() {
        let (q, live, seen, sp) = (session.canary.clone(), live.clone(), seen.clone(), stop_poll.clone());
        let first = spec.first_canary_seq;
        Some(std::thread::spawn(move || canary::poll(q, live, first, seen, sp)))
    } else {
        None
    };

    let sys_before = env.sys.map(|s| s.snapshot()).unwrap_or_default();
    let cpu_before = hardware::self_cpu_seconds();
    // The schedule's first second (the producer waits for it): faults,
    // phases and probes count from there.
    let load_started = Instant::now()
        + Duration::from_millis(spec.start_ms.map_or(0, |ms| (ms - crate::clock::now_ms()).max(0) as u64));
    let warmup_end = load_started + cfg.warmup;
    let load_end = load_started + cfg.warmup + cfg.soak;
    let probe_at = warmup_end + cfg.soak / 2;
    let data_dir = env.stack.data_dir();
    let mut o = Offered::new(live.clone(), seen, stop_poll, poller, sys_before);
    // The store's round trip and write counter, every second of the load.
    let store_watch = StoreWatch::start(session.count.clone());
    let mut probes_task: Option<tokio::task::JoinHandle<(ProbeSet, Vec<ProbeResult>)>> = None;
    let probes_until = Arc::new(AtomicBool::new(false));
    let load_s = (cfg.warmup + cfg.soak).as_secs_f64();
    let mut phase = if cfg.warmup.is_zero() { Phase::Soak } else { Phase::WarmUp };
    env.progress.phase(
        phase,
        &format!(
            "{} of load",
            crate::format::seconds(if cfg.warmup.is_zero() { cfg.soak } else { cfg.warmup }.as_secs_f64())
        ),
    );
    let mut sampler = Sampler {
        last_acked: 0,
        last_offered: 0,
        last_t: Instant::now(),
        last_written: None,
        // The storage's write counter as the load begins: the endpoint's
        // stored counter counts from it.
        written_base: if env.progress.has_metrics() { sample_written(session).await.map(|(n, _)| n) } else { None },
    };
    let mut next_sample = Instant::now() + cfg.sample_every.min(cfg.warmup + cfg.soak);
    let mut faults = FaultClock::new(&cfg.faults, load_started);

    while !producer.is_finished() {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = Instant::now();
        // Ctrl-C, or the adapter failed inside the transport (`headers`, `judge`).
        if env.stop.load(Ordering::Relaxed) || transport.live().plugin_fault.lock().unwrap().is_some() {
            step_stop.store(true, Ordering::Relaxed);
        }
        env.progress.elapsed(load_started.elapsed().as_secs_f64());
        // Supervision: an exit is detected from the process and the service brought back.
        for event in env.stack.supervise().await {
            env.progress.println(&format!("  stack: {event}"));
        }
        faults.tick(env.stack);
        if phase == Phase::WarmUp && now >= warmup_end {
            phase = Phase::Soak;
            env.progress.phase(
                phase,
                &format!(
                    "{} of load, sampled every {}",
                    crate::format::seconds(cfg.soak.as_secs_f64()),
                    crate::format::seconds(cfg.sample_every.as_secs_f64())
                ),
            );
        }
        if o.soak_proc_start.is_none() && now >= warmup_end {
            o.soak_proc_start = Some(env.stack.sample_processes());
            o.written_at_soak_start = faults.during(env.stack, sample_written(session)).await.map(|(n, src)| {
                o.written_source = Some(src);
                (Instant::now(), n)
            });
        }
        if probes_task.is_none() && now >= probe_at {
            probes_task = start_probes(env, session, &probes_until);
            if probes_task.is_some() {
                phase = Phase::Probes;
                env.progress.phase(phase, "read probes timed at mid-soak, under load");
            }
        }
        if now >= next_sample {
            next_sample += cfg.sample_every;
            if phase == Phase::Probes && probes_task.as_ref().is_some_and(|t| t.is_finished()) {
                phase = Phase::Soak;
            }
            let load = Load {
                transport,
                live: &live,
                load_started,
                load_s,
                target_rps,
                data_dir: data_dir.as_deref(),
                step_stop: &step_stop,
            };
            take_sample(env, session, &mut o, &mut faults, &load, &mut sampler, phase, now).await;
            // Freed pages back to the system at every sample (see `memory`).
            crate::memory::trim();
        }
        if now >= load_end + Duration::from_secs(30) {
            // The producer ends at the wall-clock end by itself; this is the
            // last resort if it does not.
            step_stop.store(true, Ordering::Relaxed);
        }
    }
    // The load is over: probes still running no longer run under load.
    probes_until.store(true, Ordering::Relaxed);
    o.store = store_watch.finish().await;
    let (injected, unmeasured, frozen) = faults.finish();
    o.faults = injected;
    o.unmeasured.extend(unmeasured);
    o.frozen = frozen;
    o.written_at_end = sample_written(session).await.map(|(n, _)| (Instant::now(), n));
    o.report = join_producer(producer, session, transport, &mut o)?;
    o.interrupted = env.stop.load(Ordering::Relaxed);
    o.soak_proc_end = env.stack.sample_processes();
    o.cpu_s = hardware::self_cpu_seconds() - cpu_before;
    if let Some(t) = probes_task {
        let (ps, r) = t.await?;
        session.probe_set = Some(ps);
        o.probes = r;
    }
    Ok(o)
}

/// What the generator holds for the run's points, by part.
pub(super) fn generator_memory(session: &Session) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let addresses: usize = session.addresses.iter().map(|a| a.len() + 16 + std::mem::size_of::<Arc<str>>()).sum();
    m.insert("point table".to_string(), session.tags.heap_bytes() as u64);
    m.insert("address table".to_string(), addresses as u64);
    if let Some(x) = &session.model {
        m.insert("model".to_string(), x.memory_bytes());
    }
    if let Some(x) = &session.encoder {
        m.insert("encoder".to_string(), x.memory_bytes());
    }
    if let Ok(x) = session.counter.try_lock() {
        m.insert("counter".to_string(), x.memory_bytes());
    }
    if let Some(x) = &session.probe_set {
        m.insert("probes".to_string(), x.memory_bytes());
    }
    m
}

/// Every producer starts together at the schedule's start; one refused
/// (a distributed run's worker whose clock is off) is named and offers
/// nothing this step.
async fn start_load(session: &Session, cfg: &LadderConfig, spec: &LoadSpec, points: u64) -> anyhow::Result<()> {
    let load = session.load.clone();
    let step = crate::load_source::StepLoad {
        points,
        start_ms: spec.start_ms.expect("a step's load has a start"),
        interval: cfg.interval,
        warmup: cfg.warmup,
        duration: spec.duration,
        sample_period_ms: spec.sample_period_ms,
    };
    for why in tokio::task::spawn_blocking(move || load.start(&step)).await? {
        tracing::info!("  {why}");
    }
    Ok(())
}

/// What the producer thread hands back: the plugins, and its report.
type ProducerHandle = std::thread::JoinHandle<(Plugins, Result<ProducerReport, plugin_runtime::PluginError>)>;

/// The producer thread, the session's plugins moved into it; the other
/// producers (a distributed run's workers) feed the live counters while
/// they load, and the load is over when theirs is.
fn spawn_producer(
    session: &mut Session,
    transport: &dyn Transport,
    spec: &LoadSpec,
    live: &Arc<ProducerLive>,
    stop: &Arc<AtomicBool>,
) -> std::io::Result<ProducerHandle> {
    let mut plugins =
        Plugins { model: session.model.take().expect("model"), adapter: session.encoder.take().expect("encoder") };
    let addresses: Arc<Vec<Arc<str>>> = Arc::new(session.addresses.clone());
    let (live, stop, spec, senders) = (live.clone(), stop.clone(), spec.clone(), transport.senders());
    let (load, acks) = (session.load.clone(), transport.live().clone());
    std::thread::Builder::new().name("producer".into()).spawn(move || {
        let watcher = {
            let (live, stop) = (live.clone(), stop.clone());
            let until = Instant::now() + spec.duration + Duration::from_secs(30);
            std::thread::spawn(move || load.watch(&live, &acks, &stop, until))
        };
        let r = loadgen::produce(&mut plugins, &spec, &addresses, &senders, &live, &stop);
        let _ = watcher.join();
        (plugins, r)
    })
}

/// The read probes, at mid-soak under load, on a blocking task until
/// `until` (None when the run has no probe set).
fn start_probes(
    env: &Env<'_>,
    session: &mut Session,
    until: &Arc<AtomicBool>,
) -> Option<tokio::task::JoinHandle<(ProbeSet, Vec<ProbeResult>)>> {
    let mut ps = session.probe_set.take()?;
    let cfg = env.cfg;
    let (svc, tags, b, params, runs, until) = (
        env.services.clone(),
        session.tags.spread(crate::points::PROBE_POINTS_MAX),
        env.budgets.clone(),
        crate::credentials::with_password(&cfg.probe_params, cfg.target_password.as_ref()),
        cfg.probe_warm_runs,
        until.clone(),
    );
    Some(tokio::task::spawn_blocking(move || {
        let asked = Instant::now();
        let results = match ps.setup(&params, &tags) {
            Ok(probes) => {
                let setup = crate::probes::judge_setup(asked.elapsed().as_secs_f64(), &probes, &b);
                let mut r = crate::probes::run_probes_until(&mut ps, &probes, &svc, &b, runs, &until);
                r.splice(0..0, setup);
                r
            }
            Err(e) => {
                vec![ProbeResult { name: "setup".into(), ok: false, error: Some(e.to_string()), ..Default::default() }]
            }
        };
        // The answers are dropped, but the probe set's memory grew to judge
        // them and never shrinks: a fresh instance for the next step (which
        // calls setup again). Their pages would stay with this thread's
        // arena for the rest of the run (see `memory`).
        if let Err(e) = ps.renew() {
            tracing::debug!("the probe set kept its instance: {e}");
        }
        let given = crate::memory::give_back_freed();
        tracing::debug!("after the probes, resident memory {:?} -> {:?} bytes", given.rss_before, given.rss_after);
        (ps, results)
    }))
}

/// Each stack process's resources at one sample.
struct Resources {
    /// CPU since the previous sample (100 = one core).
    cpu_percent: BTreeMap<String, f64>,
    rss_bytes: BTreeMap<String, u64>,
    mem_limit_bytes: BTreeMap<String, u64>,
    /// Bytes read and written, where the engine reports them.
    blkio_bytes: BTreeMap<String, [u64; 2]>,
}

fn resources(procs: &[ProcSample], prev: Option<&Vec<ProcSample>>) -> Resources {
    let mut r = Resources {
        cpu_percent: BTreeMap::new(),
        rss_bytes: BTreeMap::new(),
        mem_limit_bytes: BTreeMap::new(),
        blkio_bytes: BTreeMap::new(),
    };
    if let Some(prev) = prev {
        for p in procs {
            if let Some(q) = prev.iter().find(|q| q.name == p.name) {
                let wall = p.at.duration_since(q.at).as_secs_f64().max(1e-3);
                r.cpu_percent.insert(p.name.clone(), (p.cpu_seconds - q.cpu_seconds) / wall * 100.0);
            }
        }
    }
    for p in procs {
        r.rss_bytes.insert(p.name.clone(), p.rss_bytes);
        if let Some(l) = p.mem_limit_bytes {
            r.mem_limit_bytes.insert(p.name.clone(), l);
        }
        if let (Some(rd), Some(wr)) = (p.blkio_read_bytes, p.blkio_write_bytes) {
            r.blkio_bytes.insert(p.name.clone(), [rd, wr]);
        }
    }
    r
}

/// The latest canary's lag (s): from its send to the ack that means
/// stored, or to its sighting in storage.
fn latest_lag(transport: &dyn Transport, live: &ProducerLive, seen: &Mutex<Seen>) -> Option<f64> {
    match transport.canary_acks() {
        Some(acks) => {
            let sent: BTreeMap<u64, i64> = live.canaries.lock().unwrap().iter().copied().collect();
            acks.iter().next_back().and_then(|(seq, at)| sent.get(seq).map(|ts| (*at - *ts) as f64 / 1e3))
        }
        None => seen.lock().unwrap().seen.values().last().map(|(ts, at)| (*at - *ts) as f64 / 1e3),
    }
}

/// What one sample reads of the load: its counters, where it began.
struct Load<'a> {
    transport: &'a dyn Transport,
    live: &'a Arc<ProducerLive>,
    load_started: Instant,
    /// Warm-up + soak, s.
    load_s: f64,
    target_rps: f64,
    data_dir: Option<&'a Path>,
    /// Stops the producer (live-safety tripped).
    step_stop: &'a Arc<AtomicBool>,
}

/// What a sample remembers of the one before it.
struct Sampler {
    last_acked: u64,
    last_offered: u64,
    last_t: Instant,
    /// When the storage's write counter was read, and its value.
    last_written: Option<(Instant, f64)>,
    written_base: Option<f64>,
}

/// One sample of the load (every `--sample-every`): rates since the last,
/// each stack process's resources, the store's round trip and write
/// counter, canary lag, free disk, live-safety; shown, and kept in `o`.
#[allow(clippy::too_many_arguments)]
async fn take_sample(
    env: &mut Env<'_>,
    session: &mut Session,
    o: &mut Offered,
    faults: &mut FaultClock,
    load: &Load<'_>,
    smp: &mut Sampler,
    phase: Phase,
    now: Instant,
) {
    let cfg = env.cfg;
    let Load { transport, live, load_started, load_s, target_rps, data_dir, step_stop } = *load;
    let acked = transport.live().readings_acked.load(Ordering::Relaxed);
    let dt = now.duration_since(smp.last_t).as_secs_f64().max(1e-3);
    let acked_rps = (acked - smp.last_acked) as f64 / dt;
    smp.last_acked = acked;
    let offered_now = live.readings_offered.load(Ordering::Relaxed);
    let offered_rps = offered_now.saturating_sub(smp.last_offered) as f64 / dt;
    smp.last_offered = offered_now;
    smp.last_t = now;
    let procs = env.stack.sample_processes();
    let Resources { cpu_percent, rss_bytes, mem_limit_bytes, blkio_bytes } = resources(&procs, o.proc_samples.last());
    o.proc_samples.push(procs);
    let svc = env.services.clone();
    let mut store_no_answer_s = None;
    let pg_roundtrip_s = if svc.database_names().is_empty() {
        None
    } else {
        let rt = tokio::task::spawn_blocking(move || svc.pg_roundtrip("postgres").ok().map(|d| d.as_secs_f64()));
        let rt = tokio::time::timeout(SAMPLE_WAIT, rt);
        match faults.during(env.stack, rt).await {
            Ok(r) => r.ok().flatten(),
            Err(_) => {
                store_no_answer_s = Some(SAMPLE_WAIT.as_secs_f64());
                None
            }
        }
    };
    let lag_s = latest_lag(transport, live, &o.seen);
    // Stored rate since the last sample, from the storage's own write counter.
    let asked = Instant::now();
    let written = faults.during(env.stack, sample_written(session)).await.map(|(n, _)| (Instant::now(), n));
    if written.is_none() && asked.elapsed() >= SAMPLE_WAIT {
        store_no_answer_s = Some(asked.elapsed().as_secs_f64());
    }
    let stored_rps = match (smp.last_written, written) {
        (Some((t0, n0)), Some((t1, n1))) => Some((n1 - n0) / t1.duration_since(t0).as_secs_f64().max(1e-3)),
        _ => None,
    };
    smp.last_written = written;
    let mut disk = BTreeMap::new();
    let mut dirs: Vec<(&str, &Path)> = vec![("results directory", cfg.results_dir.as_path())];
    if let Some(d) = data_dir {
        dirs.push(("stack data directory", d));
    }
    let (low, unmeasured) = disk_check(&dirs, cfg.min_disk_free_bytes, &mut disk);
    if low.is_some() {
        o.disk_low = low;
    }
    for u in unmeasured {
        if !o.unmeasured.contains(&u) {
            o.unmeasured.push(u);
        }
    }
    let behind = live.behind_ms.load(Ordering::Relaxed) as f64 / 1e3;
    let elapsed = load_started.elapsed().as_secs_f64();
    let (ls, trip) = tokio::task::block_in_place(|| session.watch.sample(elapsed));
    o.live_samples.push(ls);
    if let Some(why) = trip {
        if o.live_safety.is_none() {
            tracing::warn!("  live-safety tripped: {why}; stopping the step");
            o.live_safety = Some(why);
            step_stop.store(true, Ordering::Relaxed);
        }
    }
    let broker_dropped = env.progress.has_metrics().then(|| env.sys.map(|s| s.snapshot())).flatten().and_then(|now| {
        let key = crate::transport::mqtt::sys::DROPPED;
        Some(now.get(key)? - o.sys_before.get(key)?)
    });
    env.progress.sample(&Tick {
        phase,
        elapsed_s: elapsed,
        load_s,
        target_rps,
        offered_rps,
        acked_rps,
        stored_rps,
        store_no_answer_s,
        lag_s,
        behind_s: behind,
        stored_total: smp.written_base.zip(written).map(|(b, (_, n))| n - b),
        broker_dropped,
        cpu_percent: cpu_percent.clone(),
        rss_bytes: rss_bytes.clone(),
    });
    o.samples.push(Sample {
        elapsed_s: elapsed,
        acked_rps,
        stored_rps,
        lag_s,
        pg_roundtrip_s,
        store_no_answer_s,
        behind_schedule_s: behind,
        cpu_percent,
        rss_bytes,
        mem_limit_bytes,
        blkio_bytes,
        disk_free_bytes: disk,
    });
}

/// The step's load: every point, the run's seed, warm-up and soak, with
/// canaries; this process offers its own share of the readings (all of
/// them, or none where workers offer them) and every canary, starting late
/// enough for the other producers to hear the start.
fn load_spec(cfg: &LadderConfig, session: &Session, points: u64) -> LoadSpec {
    LoadSpec {
        points: points as u32,
        interval: cfg.interval,
        seed: cfg.seed,
        duration: cfg.warmup + cfg.soak,
        sample_period_ms: session.period_ms,
        first_canary_seq: session.next_canary_seq,
        start_ms: Some(loadgen::start_ms_after(crate::clock::now_ms() + session.load.notice().as_millis() as i64)),
        share: session.load.own_share(),
        canaries: true,
    }
}

impl Offered {
    fn new(
        live: Arc<ProducerLive>,
        seen: Arc<Mutex<Seen>>,
        stop_poll: Arc<AtomicBool>,
        poller: Option<std::thread::JoinHandle<()>>,
        sys_before: BTreeMap<String, f64>,
    ) -> Offered {
        Offered {
            report: ProducerReport::default(),
            live,
            seen,
            stop_poll,
            poller,
            samples: Vec::new(),
            proc_samples: Vec::new(),
            soak_proc_start: None,
            soak_proc_end: Vec::new(),
            probes: Vec::new(),
            sys_before,
            cpu_s: 0.0,
            written_at_soak_start: None,
            written_at_end: None,
            written_source: None,
            unmeasured: Vec::new(),
            disk_low: None,
            live_safety: None,
            live_samples: Vec::new(),
            interrupted: false,
            frozen: Vec::new(),
            load_ended: Instant::now(),
            faults: Vec::new(),
            store: StoreRecord::default(),
        }
    }
}

/// The producer's end: the plugins back into the session, its report (or
/// the error that ended it, the canary poller stopped first).
fn join_producer(
    producer: ProducerHandle,
    session: &mut Session,
    transport: &dyn Transport,
    o: &mut Offered,
) -> anyhow::Result<ProducerReport> {
    let (plugins_back, report) = producer.join().map_err(|_| anyhow::anyhow!("the producer thread panicked"))?;
    o.load_ended = Instant::now();
    session.model = Some(plugins_back.model);
    session.encoder = Some(plugins_back.adapter);
    match super::transport_fault(transport.live()).and(report.map_err(anyhow::Error::from)) {
        Ok(r) => {
            session.next_canary_seq = r.next_canary_seq;
            Ok(r)
        }
        Err(e) => {
            o.stop_poll.store(true, Ordering::Relaxed);
            if let Some(p) = o.poller.take() {
                let _ = p.join();
            }
            Err(e)
        }
    }
}
