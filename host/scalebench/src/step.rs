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

use crate::broker_sys::{self, BrokerSys, DROPPED};
use crate::budgets::Budgets;
use crate::canary::{self, Seen};
use crate::clock::utc_now;
use crate::hardware;
use crate::ladder::{FaultKind, LadderConfig, Session};
use crate::loadgen::{self, LoadSpec, Plugins, ProducerLive, ProducerReport};
use crate::progress::{Phase, Tick};
use crate::results::*;
use crate::services::StackServices;
use crate::stack::{health_delta, ProcSample, StackDriver};
use crate::transport::{AckCounts, Transport};
use crate::verdict;

/// What a step borrows from the run.
pub struct Env<'a> {
    pub cfg: &'a LadderConfig,
    pub stack: &'a mut dyn StackDriver,
    pub services: &'a Arc<StackServices>,
    pub budgets: &'a Budgets,
    pub sys: Option<&'a BrokerSys>,
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

/// Length of the windows the slowest accepted rate is taken over.
const SLOWEST_WINDOW_S: i64 = 5;

pub(crate) async fn run(mut env: Env<'_>, session: &mut Session, points: u64) -> anyhow::Result<StepResult> {
    let started_utc = utc_now();
    let step_started = Instant::now();
    let health_before = env.stack.health_totals();
    session.watch.reset();

    let transport = session.carrier.open().await?;
    let new_points = points.saturating_sub(session.tags.len() as u64);
    env.progress.phase(Phase::Topology, &format!("tags of {} new points", crate::format::thousands(new_points)));
    let topology = send_topology(&env, session, &*transport, points).await?;
    let mut offered = offer(&mut env, session, &*transport, points).await?;
    env.progress.phase(Phase::Drain, "last acks, every canary stored, stored counts stable");
    let drained = drain(&env, session, transport, &offered).await;
    for service in offered.frozen.drain(..) {
        eprintln!("  fault: SIGCONT {service} (end of step)");
        let _ = env.stack.signal(&service, libc::SIGCONT);
    }
    let drained = drained?;
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
    let (status, reasons) = verdict::decide(&step, &ctx);
    step.status = status;
    step.reasons = reasons;
    Ok(step)
}

// ---- 1. topology ---------------------------------------------------------

async fn send_topology(
    env: &Env<'_>,
    session: &mut Session,
    transport: &dyn Transport,
    points: u64,
) -> anyhow::Result<Topology> {
    let have = session.tags.len() as u64;
    let mut topology = Topology::default();
    if points <= have {
        return Ok(topology);
    }
    let t = Instant::now();
    let senders = transport.senders();
    // QoS 0 has no acks to wait for.
    let acks_expected = session.carrier.acks_expected();
    // Slice by slice: the model's tags, the adapter's addresses and topology,
    // sent and (when acknowledged) acked before the next slice, so a million
    // new points never sit in memory as records or messages at once.
    let mut at = have;
    while at < points && !env.stop.load(Ordering::Relaxed) {
        let n = (points - at).min(plugin_runtime::POINTS_PER_CALL as u64);
        let model = session.model.as_mut().expect("model is home between steps");
        let encoder = session.encoder.as_mut().expect("encoder is home between steps");
        let new_tags = model.tags(env.cfg.seed, at as u32, n as u32)?;
        let addrs = encoder.addresses(&new_tags)?;
        session.addresses.extend(addrs.into_iter().map(|a| Arc::<str>::from(a.as_str())));
        let messages = loadgen::topology_messages(encoder, &new_tags)?;
        session.tags.extend(&new_tags);
        // The counting adapter learns the run's points too: stored counts are
        // limited to them, so another writer's rows never hide a loss.
        let q = session.counter.clone();
        tokio::task::spawn_blocking(move || q.lock().unwrap().addresses(&new_tags)).await??;
        topology.new_points += n;
        topology.messages += messages.len() as u64;
        for chunk in messages.chunks(1000) {
            senders[0].send(chunk.to_vec()).await.map_err(|_| anyhow::anyhow!("transport closed"))?;
        }
        drop(messages);
        // At the broker's pace: wait for this slice's acks, giving up after
        // a minute without progress.
        let mut last = (transport.counts().topology_acked, Instant::now());
        while acks_expected
            && transport.counts().topology_acked < topology.messages
            && !env.stop.load(Ordering::Relaxed)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let now = transport.counts().topology_acked;
            if now != last.0 {
                last = (now, Instant::now());
            } else if last.1.elapsed() > Duration::from_secs(60) {
                break;
            }
        }
        at += n;
    }
    topology.publish_s = t.elapsed().as_secs_f64();
    Ok(topology)
}

// ---- 2. offer --------------------------------------------------------------

/// What the offer phase measured.
struct Offered {
    report: ProducerReport,
    live: Arc<ProducerLive>,
    seen: Arc<Mutex<Seen>>,
    stop_poll: Arc<AtomicBool>,
    poller: Option<std::thread::JoinHandle<()>>,
    samples: Vec<Sample>,
    proc_samples: Vec<Vec<ProcSample>>,
    soak_proc_start: Option<Vec<ProcSample>>,
    soak_proc_end: Vec<ProcSample>,
    probes: Vec<ProbeResult>,
    sys_before: BTreeMap<String, f64>,
    cpu_s: f64,
    /// The storage's own write counter at the soak's start and the load's end.
    written_at_soak_start: Option<(Instant, f64)>,
    written_at_end: Option<(Instant, f64)>,
    written_source: Option<String>,
    unmeasured: Vec<String>,
    disk_low: Option<String>,
    live_safety: Option<String>,
    live_samples: Vec<crate::live_safety::LiveSample>,
    interrupted: bool,
    /// Services still frozen by a calibration fault when the load ended.
    frozen: Vec<String>,
    /// When the producer returned (the load's end).
    load_ended: Instant,
}

fn disk_check(
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

async fn offer(
    env: &mut Env<'_>,
    session: &mut Session,
    transport: &dyn Transport,
    points: u64,
) -> anyhow::Result<Offered> {
    let cfg = env.cfg;
    let target_rps = points as f64 / cfg.interval.as_secs_f64();
    let live = Arc::new(ProducerLive::default());
    let spec = LoadSpec {
        points: points as u32,
        interval: cfg.interval,
        seed: cfg.seed,
        duration: cfg.warmup + cfg.soak,
        sample_period_ms: session.period_ms,
        first_canary_seq: session.next_canary_seq,
        start_ms: Some(loadgen::start_ms_after(crate::clock::now_ms())),
    };
    // Readings due from the soak's start are in the step's latency histograms.
    if let Some(start) = spec.start_ms {
        transport.live().soak_from_ms.store(start + cfg.warmup.as_millis() as i64, Ordering::Relaxed);
    }
    // The producer stops on Ctrl-C or when this step must end early (live-safety).
    let step_stop = Arc::new(AtomicBool::new(false));
    let mut plugins =
        Plugins { model: session.model.take().expect("model"), adapter: session.encoder.take().expect("encoder") };
    let addresses: Arc<Vec<Arc<str>>> = Arc::new(session.addresses.clone());
    let producer = {
        let (live, stop, spec, addresses, senders) =
            (live.clone(), step_stop.clone(), spec.clone(), addresses.clone(), transport.senders());
        std::thread::Builder::new().name("producer".into()).spawn(move || {
            let r = loadgen::produce(&mut plugins, &spec, &addresses, &senders, &live, &stop);
            (plugins, r)
        })?
    };

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
    let load_started = Instant::now();
    let warmup_end = load_started + cfg.warmup;
    let load_end = load_started + cfg.warmup + cfg.soak;
    let probe_at = warmup_end + cfg.soak / 2;
    let data_dir = env.stack.data_dir();
    let mut o = Offered {
        report: ProducerReport {
            readings_scheduled: 0,
            readings_offered: 0,
            offered_by_wall_second: BTreeMap::new(),
            channel_wait_s: 0.0,
            slots: 0,
            behind_max_s: 0.0,
            behind_p95_s: 0.0,
            start_ms: 0,
            end_ms: 0,
            next_canary_seq: 0,
            stopped_early: false,
            cut_at_wall_end: false,
        },
        live: live.clone(),
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
    };
    let mut probes_task: Option<tokio::task::JoinHandle<(ProbeSet, Vec<ProbeResult>)>> = None;
    let probes_until = Arc::new(AtomicBool::new(false));
    let mut last_acked = 0u64;
    let mut last_offered = 0u64;
    let mut last_t = Instant::now();
    let load_s = (cfg.warmup + cfg.soak).as_secs_f64();
    let mut phase = if cfg.warmup.is_zero() { Phase::Soak } else { Phase::WarmUp };
    env.progress.phase(
        phase,
        &format!(
            "{} of load",
            crate::format::seconds(if cfg.warmup.is_zero() { cfg.soak } else { cfg.warmup }.as_secs_f64())
        ),
    );
    let mut last_written: Option<(Instant, f64)> = None;
    let mut next_sample = Instant::now() + cfg.sample_every.min(cfg.warmup + cfg.soak);
    // Faults to inject: (when, service, kind); frozen services to thaw.
    let mut faults: Vec<(Instant, String, FaultKind)> =
        cfg.faults.iter().map(|f| (load_started + f.after, f.service.clone(), f.kind)).collect();
    let mut thaw: Vec<(Instant, String)> = Vec::new();

    while !producer.is_finished() {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = Instant::now();
        if env.stop.load(Ordering::Relaxed) {
            step_stop.store(true, Ordering::Relaxed);
        }
        env.progress.elapsed(load_started.elapsed().as_secs_f64());
        // Supervision: an exit is detected from the process and the service brought back.
        for event in env.stack.supervise().await {
            env.progress.println(&format!("  stack: {event}"));
        }
        inject_faults(env.stack, now, &mut faults, &mut thaw, &mut o.unmeasured);
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
            o.written_at_soak_start = sample_written(session).await.map(|(n, src)| {
                o.written_source = Some(src);
                (Instant::now(), n)
            });
        }
        if probes_task.is_none() && now >= probe_at {
            if let Some(mut ps) = session.probe_set.take() {
                phase = Phase::Probes;
                env.progress.phase(phase, "read probes timed at mid-soak, under load");
                let (svc, tags, b, params, runs, until) = (
                    env.services.clone(),
                    session.tags.spread(crate::points::PROBE_POINTS_MAX),
                    env.budgets.clone(),
                    crate::credentials::with_password(&cfg.probe_params, cfg.target_password.as_ref()),
                    cfg.probe_warm_runs,
                    probes_until.clone(),
                );
                probes_task = Some(tokio::task::spawn_blocking(move || {
                    let results = match ps.setup(&params, &tags) {
                        Ok(probes) => crate::probes::run_probes_until(&mut ps, &probes, &svc, &b, runs, &until),
                        Err(e) => vec![ProbeResult {
                            name: "setup".into(),
                            ok: false,
                            error: Some(e.to_string()),
                            ..Default::default()
                        }],
                    };
                    (ps, results)
                }));
            }
        }
        if now >= next_sample {
            next_sample += cfg.sample_every;
            let acked = transport.live().readings_acked.load(Ordering::Relaxed);
            let dt = now.duration_since(last_t).as_secs_f64().max(1e-3);
            let acked_rps = (acked - last_acked) as f64 / dt;
            last_acked = acked;
            let offered_now = live.readings_offered.load(Ordering::Relaxed);
            let offered_rps = offered_now.saturating_sub(last_offered) as f64 / dt;
            last_offered = offered_now;
            last_t = now;
            let procs = env.stack.sample_processes();
            let mut cpu_percent = BTreeMap::new();
            let mut rss_bytes = BTreeMap::new();
            if let Some(prev) = o.proc_samples.last() {
                for p in &procs {
                    if let Some(q) = prev.iter().find(|q| q.name == p.name) {
                        let wall = p.at.duration_since(q.at).as_secs_f64().max(1e-3);
                        cpu_percent.insert(p.name.clone(), (p.cpu_seconds - q.cpu_seconds) / wall * 100.0);
                    }
                }
            }
            let mut mem_limit_bytes = BTreeMap::new();
            let mut blkio_bytes = BTreeMap::new();
            for p in &procs {
                rss_bytes.insert(p.name.clone(), p.rss_bytes);
                if let Some(l) = p.mem_limit_bytes {
                    mem_limit_bytes.insert(p.name.clone(), l);
                }
                if let (Some(r), Some(w)) = (p.blkio_read_bytes, p.blkio_write_bytes) {
                    blkio_bytes.insert(p.name.clone(), [r, w]);
                }
            }
            o.proc_samples.push(procs);
            let svc = env.services.clone();
            let pg_roundtrip_s = if svc.database_names().is_empty() {
                None
            } else {
                let rt =
                    tokio::task::spawn_blocking(move || svc.pg_roundtrip("postgres").ok().map(|d| d.as_secs_f64()));
                tokio::time::timeout(SAMPLE_WAIT, rt).await.ok().and_then(|r| r.ok()).flatten()
            };
            let lag_s = match transport.canary_acks() {
                Some(acks) => {
                    let sent: BTreeMap<u64, i64> = live.canaries.lock().unwrap().iter().copied().collect();
                    acks.iter().next_back().and_then(|(seq, at)| sent.get(seq).map(|ts| (*at - *ts) as f64 / 1e3))
                }
                None => o.seen.lock().unwrap().seen.values().last().map(|(ts, at)| (*at - *ts) as f64 / 1e3),
            };
            // Stored rate since the last sample, from the storage's own write counter.
            let written = sample_written(session).await.map(|(n, _)| (Instant::now(), n));
            let stored_rps = match (last_written, written) {
                (Some((t0, n0)), Some((t1, n1))) => Some((n1 - n0) / t1.duration_since(t0).as_secs_f64().max(1e-3)),
                _ => None,
            };
            last_written = written;
            let mut disk = BTreeMap::new();
            let mut dirs: Vec<(&str, &Path)> = vec![("results directory", cfg.results_dir.as_path())];
            if let Some(d) = &data_dir {
                dirs.push(("stack data directory", d.as_path()));
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
                    eprintln!("  live-safety tripped: {why}; stopping the step");
                    o.live_safety = Some(why);
                    step_stop.store(true, Ordering::Relaxed);
                }
            }
            if phase == Phase::Probes && probes_task.as_ref().is_some_and(|t| t.is_finished()) {
                phase = Phase::Soak;
            }
            env.progress.sample(&Tick {
                phase,
                elapsed_s: elapsed,
                load_s,
                target_rps,
                offered_rps,
                acked_rps,
                stored_rps,
                lag_s,
                behind_s: behind,
            });
            o.samples.push(Sample {
                elapsed_s: elapsed,
                acked_rps,
                stored_rps,
                lag_s,
                pg_roundtrip_s,
                behind_schedule_s: behind,
                cpu_percent,
                rss_bytes,
                mem_limit_bytes,
                blkio_bytes,
                disk_free_bytes: disk,
            });
        }
        if now >= load_end + Duration::from_secs(30) {
            // The producer ends at the wall-clock end by itself; this is the
            // last resort if it does not.
            step_stop.store(true, Ordering::Relaxed);
        }
    }
    // A fault asked for but never injected leaves the crash test unmeasured.
    for (at, service, kind) in faults {
        o.unmeasured.push(format!(
            "fault {} {service} at {} of load: never injected (the load ended after {})",
            kind.verb(),
            crate::format::seconds(at.saturating_duration_since(load_started).as_secs_f64()),
            crate::format::seconds(load_started.elapsed().as_secs_f64())
        ));
    }
    // The load is over: probes still running no longer run under load.
    probes_until.store(true, Ordering::Relaxed);
    // A service still frozen stays frozen through the drain (a broker that
    // never comes back must end the step by the drain's deadlines) and is
    // thawed when the step ends.
    o.frozen = thaw.into_iter().map(|(_, s)| s).collect();
    o.written_at_end = sample_written(session).await.map(|(n, _)| (Instant::now(), n));
    let (plugins_back, report) = producer.join().map_err(|_| anyhow::anyhow!("the producer thread panicked"))?;
    o.load_ended = Instant::now();
    session.model = Some(plugins_back.model);
    session.encoder = Some(plugins_back.adapter);
    o.interrupted = env.stop.load(Ordering::Relaxed);
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            o.stop_poll.store(true, Ordering::Relaxed);
            if let Some(p) = o.poller.take() {
                let _ = p.join();
            }
            return Err(e.into());
        }
    };
    session.next_canary_seq = report.next_canary_seq;
    o.report = report;
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
fn generator_memory(session: &Session) -> BTreeMap<String, u64> {
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

/// Inject the calibration faults that are due; thaw frozen services on time.
fn inject_faults(
    stack: &mut dyn StackDriver,
    now: Instant,
    faults: &mut Vec<(Instant, String, FaultKind)>,
    thaw: &mut Vec<(Instant, String)>,
    unmeasured: &mut Vec<String>,
) {
    let mut i = 0;
    while i < faults.len() {
        if now < faults[i].0 {
            i += 1;
            continue;
        }
        let (_, service, kind) = faults.remove(i);
        match kind {
            FaultKind::Kill => {
                eprintln!("  fault: SIGKILL {service} (the stack's supervisor brings it back)");
                if let Err(e) = stack.signal(&service, libc::SIGKILL) {
                    eprintln!("  fault: {e}");
                    unmeasured.push(format!("fault kill {service}: {e}"));
                }
            }
            FaultKind::Freeze(d) => {
                eprintln!("  fault: SIGSTOP {service} for {:.0} s", d.as_secs_f64());
                match stack.signal(&service, libc::SIGSTOP) {
                    Ok(()) => thaw.push((now + d, service)),
                    Err(e) => {
                        eprintln!("  fault: {e}");
                        unmeasured.push(format!("fault freeze {service}: {e}"));
                    }
                }
            }
        }
    }
    thaw.retain(|(at, service)| {
        if now >= *at {
            eprintln!("  fault: SIGCONT {service}");
            let _ = stack.signal(service, libc::SIGCONT);
            false
        } else {
            true
        }
    });
}

// ---- 3. drain --------------------------------------------------------------

struct Drained {
    counts: AckCounts,
    sent: Vec<(u64, i64)>,
    stored_by_second: BTreeMap<i64, u64>,
    stream_note: Option<String>,
    drain_note: Option<String>,
    /// Storage could not be counted (e.g. it never answered after a fault):
    /// stored is then not measured, never zero.
    stored_error: Option<String>,
}

async fn drain(
    env: &Env<'_>,
    session: &mut Session,
    transport: Box<dyn Transport>,
    o: &Offered,
) -> anyhow::Result<Drained> {
    let cfg = env.cfg;
    let canary_acks = transport.canary_acks();
    let counts = transport.finish(Duration::from_secs(if o.interrupted { 2 } else { 30 })).await;
    let sent: Vec<(u64, i64)> = o.live.canaries.lock().unwrap().clone();
    if canary_acks.is_some() {
        let mut s = o.seen.lock().unwrap();
        for (seq, ts) in &sent {
            if let Some(at) = counts.canary_acked_at.get(seq) {
                s.seen.insert(*seq, (*ts, *at));
            }
        }
    }
    // Every canary the SUT acknowledged stored (the last one follows the last
    // reading), or the drain timeout. A canary never acknowledged is
    // unknown, not lost: nothing says the SUT took it, so it is not waited for.
    let expected: Vec<u64> = sent
        .iter()
        .map(|(seq, _)| *seq)
        .filter(|seq| !session.carrier.acks_expected() || counts.canary_acked_at.contains_key(seq))
        .collect();
    let drain_deadline = Instant::now() + if o.interrupted { Duration::from_secs(2) } else { cfg.drain_timeout };
    while Instant::now() < drain_deadline {
        if expected.iter().all(|seq| o.seen.lock().unwrap().seen.contains_key(seq)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    o.stop_poll.store(true, Ordering::Relaxed);
    let window = Window { start_ms: o.report.start_ms, end_ms: o.report.end_ms };
    let acked_total: u64 = counts
        .acked_by_second
        .range(window.start_ms.div_euclid(1000)..window.end_ms.div_euclid(1000) + 1)
        .map(|(_, n)| n)
        .sum();
    let stream_note = session.count.failure().await;
    let mut drain_note = None;
    let mut stored_error = None;
    let stored_by_second = if !session.count.settles() {
        session.count.stored(window).await.unwrap_or_else(|e| {
            stored_error = Some(format!("{e:#}"));
            BTreeMap::new()
        })
    } else {
        // Stored counts must hold still over several reads (or reach acked).
        let stable_deadline =
            Instant::now() + if o.interrupted { Duration::from_secs(2) } else { Duration::from_secs(60) };
        let mut last_sum = u64::MAX;
        let mut stable = 0u32;
        loop {
            let by_second = match session.count.stored(window).await {
                Ok(b) => b,
                Err(e) => {
                    stored_error = Some(format!("{e:#}"));
                    break BTreeMap::new();
                }
            };
            let sum: u64 = by_second.values().sum();
            stable = if sum == last_sum { stable + 1 } else { 0 };
            last_sum = sum;
            if sum >= acked_total || stable + 1 >= STABLE_READS {
                break by_second;
            }
            if Instant::now() >= stable_deadline {
                drain_note = Some(format!(
                    "stored counts still changing when the drain deadline came ({sum} of {acked_total} acked)"
                ));
                break by_second;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    Ok(Drained { counts, sent, stored_by_second, stream_note, drain_note, stored_error })
}

// ---- 4. count --------------------------------------------------------------

struct Counted {
    acked: u64,
    stored: u64,
    missing: u64,
    short: Vec<String>,
    short_count: u64,
    soak_s: f64,
    offered_rps: f64,
    achieved_rps: f64,
    slowest_5s: Option<f64>,
    stored_rps_by_payload: f64,
    stored_rps: Option<f64>,
    broker: BTreeMap<String, BrokerCounter>,
    dropped: Option<f64>,
    series: Series,
    ack_latency: AckLatency,
}

/// The step's per-second series, second 0 being the load's first.
fn series(r: &ProducerReport, counts: &AckCounts, stored: &BTreeMap<i64, u64>, soak_from_ms: i64) -> Series {
    let start = r.start_ms.div_euclid(1000);
    let last_key = |m: &BTreeMap<i64, u64>| m.keys().next_back().copied().unwrap_or(start);
    let end = [
        (r.end_ms - 1).div_euclid(1000),
        last_key(&r.offered_by_wall_second),
        last_key(&counts.acked_by_arrival_second),
        last_key(&counts.refused_by_arrival_second),
    ]
    .into_iter()
    .max()
    .unwrap_or(start)
    .max(start);
    let per = |m: &BTreeMap<i64, u64>| (start..=end).map(|s| m.get(&s).copied().unwrap_or(0)).collect::<Vec<u64>>();
    let stored_in_load: BTreeMap<i64, u64> =
        stored.range(start..r.end_ms.div_euclid(1000) + 1).map(|(k, v)| (*k, *v)).collect();
    Series {
        start_unix_s: start,
        soak_from_s: (soak_from_ms - start * 1000) as f64 / 1e3,
        load_end_s: (r.end_ms - start * 1000) as f64 / 1e3,
        offered: per(&r.offered_by_wall_second),
        acked: per(&counts.acked_by_arrival_second),
        refused: per(&counts.refused_by_arrival_second),
        stored_by_payload: per(&stored_in_load),
        ack_latency_p99_s: (start..=end).map(|s| counts.latency.p99_in_second_s(s)).collect(),
    }
}

/// Latency quantiles and the longest silence, placed in the soak.
fn ack_latency(counts: &AckCounts, soak_from_ms: i64) -> AckLatency {
    let l = &counts.latency;
    let mut a = AckLatency {
        intended: crate::latency::Quantiles::of(&l.intended_us),
        service: crate::latency::Quantiles::of(&l.service_us),
        ..Default::default()
    };
    match l.longest_silence {
        Some(sil) => {
            a.longest_silence_s = Some(sil.len_ms() as f64 / 1e3);
            a.silence_from_soak_s = Some((sil.from_ms - soak_from_ms) as f64 / 1e3);
            a.silence_to_soak_s = Some((sil.to_ms - soak_from_ms) as f64 / 1e3);
            // Total when no connection had any answer in the silence's whole
            // seconds; a silence shorter than that holds no whole second (and
            // an empty range, start past end, is not a range a map can take).
            let inner = (sil.from_ms.div_euclid(1000) + 1)..sil.to_ms.div_euclid(1000);
            a.silence_total = !inner.is_empty()
                && counts.acked_by_arrival_second.range(inner.clone()).all(|(_, n)| *n == 0)
                && counts.refused_by_arrival_second.range(inner).all(|(_, n)| *n == 0);
        }
        // Answers came and none waited: no silence, measured.
        None if counts.settled_msgs > 0 => a.longest_silence_s = Some(0.0),
        None => {}
    }
    a
}

async fn count(env: &Env<'_>, _session: &Session, o: &Offered, d: &Drained) -> anyhow::Result<Counted> {
    let cfg = env.cfg;
    let r = &o.report;
    // Per second of payload ts.
    let (mut acked, mut stored, mut missing, mut short_count) = (0u64, 0u64, 0u64, 0u64);
    let mut short = Vec::new();
    for (sec, a) in &d.counts.acked_by_second {
        let ms = sec * 1000;
        if ms < r.start_ms || ms >= r.end_ms {
            continue;
        }
        let s = d.stored_by_second.get(sec).copied().unwrap_or(0);
        acked += a;
        stored += s.min(*a);
        missing += a.saturating_sub(s);
        if (s as f64) < 0.99 * *a as f64 {
            short_count += 1;
            if short.len() < 10 {
                short.push(format!("{sec}: {s}/{a}"));
            }
        }
    }
    // On the wall clock: the soak is [start + warm-up, end) of the load.
    let soak_from_ms = r.start_ms + cfg.warmup.as_millis() as i64;
    let soak_to_ms = r.end_ms.max(soak_from_ms + 1);
    let soak_s = (soak_to_ms - soak_from_ms) as f64 / 1e3;
    let in_soak = |m: &BTreeMap<i64, u64>| -> u64 {
        m.range(soak_from_ms.div_euclid(1000)..soak_to_ms.div_euclid(1000)).map(|(_, n)| n).sum()
    };
    let offered_rps = in_soak(&r.offered_by_wall_second) as f64 / soak_s;
    let achieved_rps = in_soak(&d.counts.acked_by_arrival_second) as f64 / soak_s;
    let mut slowest_5s: Option<f64> = None;
    let (first, last) = (soak_from_ms.div_euclid(1000), soak_to_ms.div_euclid(1000));
    let mut w = first;
    while w + SLOWEST_WINDOW_S <= last {
        let n: u64 = d.counts.acked_by_arrival_second.range(w..w + SLOWEST_WINDOW_S).map(|(_, n)| n).sum();
        let rate = n as f64 / SLOWEST_WINDOW_S as f64;
        slowest_5s = Some(slowest_5s.map_or(rate, |m: f64| m.min(rate)));
        w += 1;
    }
    let stored_soak: u64 =
        d.stored_by_second.range(soak_from_ms.div_euclid(1000)..soak_to_ms.div_euclid(1000)).map(|(_, n)| n).sum();
    let stored_rps = match (o.written_at_soak_start, o.written_at_end) {
        (Some((t0, n0)), Some((t1, n1))) if t1 > t0 => Some((n1 - n0).max(0.0) / t1.duration_since(t0).as_secs_f64()),
        _ => None,
    };
    let heartbeat = match env.sys {
        Some(s) => s.heartbeat_after(o.load_ended, Duration::from_secs(12)).await,
        None => false,
    };
    let sys_after = env.sys.map(|s| s.snapshot()).unwrap_or_default();
    let mut broker = broker_sys::compare(&o.sys_before, &sys_after);
    let dropped = if env.sys.is_some() && sys_after.contains_key(DROPPED) {
        broker.get("publish/messages/dropped").and_then(|c| c.delta)
    } else if env.sys.is_some() && BrokerSys::unchanged_since_subscribed(&o.sys_before, &sys_after, DROPPED, heartbeat)
    {
        // Not republished because it did not change (a broker up for long).
        broker.insert("publish/messages/dropped".into(), BrokerCounter { before: None, after: None, delta: Some(0.0) });
        Some(0.0)
    } else {
        None
    };
    let soak_from_ms = r.start_ms + cfg.warmup.as_millis() as i64;
    Ok(Counted {
        acked,
        stored,
        missing,
        short,
        short_count,
        soak_s,
        offered_rps,
        achieved_rps,
        slowest_5s,
        stored_rps_by_payload: stored_soak as f64 / soak_s,
        stored_rps,
        broker,
        dropped,
        series: series(r, &d.counts, &d.stored_by_second, soak_from_ms),
        ack_latency: ack_latency(&d.counts, soak_from_ms),
    })
}

// ---- 5. assemble -------------------------------------------------------------

#[allow(clippy::too_many_arguments)]
async fn assemble(
    env: &Env<'_>,
    session: &Session,
    points: u64,
    topology: Topology,
    mut o: Offered,
    d: Drained,
    c: Counted,
    started_utc: String,
    step_started: Instant,
) -> (StepResult, verdict::Context) {
    let cfg = env.cfg;
    let target_rps = points as f64 / cfg.interval.as_secs_f64();
    if let Some(p) = o.poller.take() {
        let _ = p.join();
    }
    // Resources over the soak.
    let mut resources = BTreeMap::new();
    if let Some(start) = &o.soak_proc_start {
        for p in &o.soak_proc_end {
            if let Some(q) = start.iter().find(|q| q.name == p.name) {
                let wall = p.at.duration_since(q.at).as_secs_f64().max(1e-3);
                let mut r =
                    Resource { cpu_percent: (p.cpu_seconds - q.cpu_seconds) / wall * 100.0, ..Default::default() };
                r.rss_bytes_last = p.rss_bytes;
                r.rss_bytes_max = o
                    .proc_samples
                    .iter()
                    .flatten()
                    .filter(|x| x.name == p.name)
                    .map(|x| x.rss_bytes)
                    .max()
                    .unwrap_or(p.rss_bytes);
                r.cpu_percent_max =
                    o.samples.iter().filter_map(|s| s.cpu_percent.get(&p.name)).cloned().fold(0.0, f64::max);
                r.mem_limit_bytes = p.mem_limit_bytes;
                r.blkio_read_bytes = p.blkio_read_bytes.zip(q.blkio_read_bytes).map(|(a, b)| a.saturating_sub(b));
                r.blkio_write_bytes = p.blkio_write_bytes.zip(q.blkio_write_bytes).map(|(a, b)| a.saturating_sub(b));
                resources.insert(p.name.clone(), r);
            }
        }
    }
    let (db, durability) = read_stats(session, c.stored_rps).await;
    let soak_from_ms = o.report.start_ms + cfg.warmup.as_millis() as i64;
    let (lag, canaries) = {
        let seen = o.seen.lock().unwrap();
        let acked = &d.counts.canary_acked_at;
        (
            canary::summarize(&d.sent, &seen, acked, soak_from_ms),
            canary::records(&d.sent, &seen, acked, c.series.start_unix_s * 1000),
        )
    };

    let mut unmeasured = std::mem::take(&mut o.unmeasured);
    if let Some(e) = &d.stored_error {
        unmeasured.push(format!("stored readings: {e}"));
    }
    if env.sys.is_some() && c.dropped.is_none() {
        unmeasured.push(format!("broker drops: {DROPPED} was not readable (is $SYS denied to scalebench's account?)"));
    }
    for p in o.probes.iter_mut() {
        if p.error.as_deref().is_some_and(|e| e.contains(crate::probes::NOT_UNDER_LOAD)) {
            unmeasured.push(format!("probe {}: {}", p.name, p.error.take().unwrap_or_default()));
            p.ok = true;
        }
    }
    if !d.counts.error_samples.is_empty() {
        eprintln!("  transport errors: {}", d.counts.error_samples.join("; "));
    }
    let r = &o.report;
    let counts = &d.counts;
    let generator_memory = generator_memory(session);
    let step = StepResult {
        points,
        status: Status::Pass,
        reasons: Vec::new(),
        target_rps,
        started_utc,
        duration_s: step_started.elapsed().as_secs_f64(),
        generator: Generator {
            published: counts.published,
            acked: counts.readings_acked,
            scheduled: r.readings_scheduled,
            offered: r.readings_offered,
            not_offered: r.readings_scheduled.saturating_sub(r.readings_offered),
            soak_s: c.soak_s,
            offered_rps: c.offered_rps,
            offered_ratio: c.offered_rps / target_rps,
            achieved_rps: c.achieved_rps,
            achieved_ratio: c.achieved_rps / target_rps,
            achieved_rps_min_5s: c.slowest_5s,
            held_back_s: counts.held_back_s,
            channel_wait_s: r.channel_wait_s,
            behind_schedule_max_s: r.behind_max_s,
            behind_schedule_p95_s: r.behind_p95_s,
            connections: cfg.connections.max(1),
            publish_errors: counts.errors,
            rejected: counts.readings_rejected,
            cpu_s: o.cpu_s,
            cpu_us_per_acked: if counts.readings_acked > 0 {
                o.cpu_s * 1e6 / counts.readings_acked as f64
            } else {
                0.0
            },
            rss_peak_bytes: hardware::self_peak_rss_bytes(),
            memory_bytes_per_point: Some(
                generator_memory.values().sum::<u64>() as f64 / session.tags.len().max(1) as f64,
            ),
            memory_bytes: generator_memory,
        },
        ingest: Ingest {
            acked: c.acked,
            stored: c.stored,
            stored_ratio: if c.acked > 0 { c.stored as f64 / c.acked as f64 } else { 1.0 },
            short_seconds: c.short,
            short_seconds_count: c.short_count,
            missing_acked: c.missing,
            stored_rps: c.stored_rps,
            stored_rps_source: o.written_source.clone(),
            stored_rps_by_payload: c.stored_rps_by_payload,
            stored_rate_ratio: c.stored_rps.filter(|_| c.achieved_rps > 0.0).map(|s| s / c.achieved_rps),
            stored_rps_per_host_cpu: c.stored_rps.map(|s| s / env.nproc as f64),
            broker_dropped_delta: c.dropped,
            rows_per_day_at_this_rate: c.stored_rps.map(|s| s * 86_400.0),
        },
        lag,
        broker: c.broker,
        resources,
        containers: BTreeMap::new(),
        samples: std::mem::take(&mut o.samples),
        probes: std::mem::take(&mut o.probes),
        db,
        durability,
        topology,
        unmeasured,
        live_safety: std::mem::take(&mut o.live_samples),
        outcomes: Outcomes {
            ok: if d.stored_error.is_some() { 0 } else { c.stored },
            lost: if d.stored_error.is_some() { 0 } else { c.missing },
            unknown: r.readings_offered.saturating_sub(counts.readings_acked + counts.readings_rejected),
            refused: counts.readings_rejected,
            not_offered: r.readings_scheduled.saturating_sub(r.readings_offered),
        },
        ack_latency: c.ack_latency,
        series: c.series,
        canaries,
    };
    let mut ctx = verdict::Context {
        interrupted: o.interrupted,
        disk_low: o.disk_low,
        live_safety: o.live_safety.clone(),
        rules: env.budgets.rules.clone(),
        stored_unmeasured: d.stored_error.is_some(),
        ..Default::default()
    };
    ctx.sut_failures.extend(d.stream_note);
    if counts.errors > 0 && session.carrier.ack_means_stored() {
        ctx.sut_failures.push(format!(
            "{} JetStream publish errors ({})",
            counts.errors,
            counts.error_samples.join("; ")
        ));
    }
    if counts.readings_rejected > 0 {
        ctx.refusals = counts.error_samples.clone();
    }
    ctx.sut_failures.extend(d.drain_note);
    if o.report.stopped_early && !o.interrupted && o.live_safety.is_none() {
        ctx.aborted = Some("the producer stopped early (transport closed)".into());
    }
    (step, ctx)
}

/// Durability (server-level and, where the target can tell, as the ingest
/// path sees it) and storage sizes, from the counting adapter's stats.
async fn read_stats(session: &Session, stored_rps: Option<f64>) -> (Db, Durability) {
    let q = session.counter.clone();
    let stats = tokio::task::spawn_blocking(move || q.lock().unwrap().stats())
        .await
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or_default();
    let mut db = Db::default();
    let mut durability = Durability::default();
    for s in &stats {
        let v = match (&s.number, &s.text) {
            (Some(n), _) => serde_json::json!(n),
            (None, Some(t)) => serde_json::json!(t),
            _ => serde_json::Value::Null,
        };
        db.stats.insert(s.name.clone(), v);
        match s.name.as_str() {
            "durability.fsync" => durability.fsync = s.text.clone(),
            "durability.synchronous_commit" => durability.synchronous_commit = s.text.clone(),
            "durability.full_page_writes" => durability.full_page_writes = s.text.clone(),
            "durability.ingest.fsync" => durability.ingest_fsync = s.text.clone(),
            "durability.ingest.synchronous_commit" => durability.ingest_synchronous_commit = s.text.clone(),
            "durability.ingest.full_page_writes" => durability.ingest_full_page_writes = s.text.clone(),
            "db.table_bytes" => db.table_bytes = s.number,
            "db.rows_estimate" | "db.rows" => db.rows_estimate = s.number,
            "db.database_bytes" => db.database_bytes = s.number,
            _ => {}
        }
    }
    let on = |v: &Option<String>| v.as_deref() == Some("on");
    let server = on(&durability.fsync) && on(&durability.synchronous_commit) && on(&durability.full_page_writes);
    let ingest_known = durability.ingest_synchronous_commit.is_some();
    durability.scope = if ingest_known { "ingest path".into() } else { "server-level only".into() };
    durability.comparable = server
        && (!ingest_known
            || (on(&durability.ingest_fsync)
                && on(&durability.ingest_synchronous_commit)
                && on(&durability.ingest_full_page_writes)));
    if let (Some(b), Some(r), Some(rps)) = (db.table_bytes, db.rows_estimate, stored_rps) {
        if r > 0.0 {
            db.bytes_per_row = Some(b / r);
            db.bytes_per_day_raw_at_this_rate = Some(b / r * rps * 86_400.0);
        }
    }
    (db, durability)
}

#[cfg(test)]
mod tests {
    use crate::latency::Silence;
    use crate::transport::AckCounts;

    #[test]
    fn a_silence_inside_one_second_is_measured_not_a_panic() {
        let mut counts = AckCounts { settled_msgs: 3, ..Default::default() };
        counts.acked_by_arrival_second.insert(1, 10);
        counts.latency.longest_silence = Some(Silence { from_ms: 1_500, to_ms: 1_800 });
        let a = super::ack_latency(&counts, 0);
        assert_eq!(a.longest_silence_s, Some(0.3));
        assert!(!a.silence_total, "no whole second lies in it");

        counts.latency.longest_silence = Some(Silence { from_ms: 1_500, to_ms: 4_200 });
        let a = super::ack_latency(&counts, 1_000);
        assert_eq!((a.silence_from_soak_s, a.silence_to_soak_s), (Some(0.5), Some(3.2)));
        assert!(a.silence_total, "seconds 2 and 3 had no answer");
        counts.acked_by_arrival_second.insert(3, 1);
        assert!(!super::ack_latency(&counts, 1_000).silence_total);
    }
}
