//! The ladder (after the original Baler scale-test plan): for each step, publish topology for the new points,
//! offer readings for a warm-up and a soak while sampling every
//! `sample_every` and timing read probes under load, stop, drain the lag
//! canaries, compare stored with acked second by second, apply the pass
//! rules (`verdict`) and write the result file. Stops at the first step that
//! does not pass unless `continue_on_fail`.
//!
//! Threads: the producer owns the model and the encoding adapter instance on
//! a thread of its own; a second adapter instance (queries: canaries, stored
//! counts, stats) is shared behind a mutex; probes run on a blocking thread.
//! Network I/O runs on the tokio runtime.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use plugin_runtime::adapter_types::TransportPlan;
use plugin_runtime::types::{TagInfo, Window};
use plugin_runtime::{ProbeSet, Runtime, TargetAdapter, ValueModel};

use crate::broker_sys::{self, BrokerSys};
use crate::budgets::Budgets;
use crate::canary::{self, Seen};
use crate::hardware;
use crate::loadgen::{self, now_ms, LoadSpec, Plugins, ProducerLive};
use crate::results::*;
use crate::services::StackServices;
use crate::stack::Stack;
use crate::transport::mqtt::{self, MqttConfig, MqttTransport};
use crate::transport::nats::{self as nats_transport, NatsConfig, NatsTransport};
use crate::transport::Transport;
use crate::stack::ProcSample;
use crate::verdict;

#[derive(Debug, Clone)]
pub struct LadderConfig {
    pub steps: Vec<u64>,
    pub interval: Duration,
    pub warmup: Duration,
    pub soak: Duration,
    pub sample_every: Duration,
    pub continue_on_fail: bool,
    pub seed: u64,
    pub connections: u32,
    pub model: String,
    pub model_params: String,
    pub target: String,
    pub target_params: String,
    /// None: no probes.
    pub probes: Option<String>,
    pub probe_params: String,
    pub probe_warm_runs: usize,
    pub drain_timeout: Duration,
    pub results_dir: PathBuf,
    pub run_id: String,
    pub command_line: Vec<String>,
    pub min_disk_free_bytes: u64,
    pub repo_dir: PathBuf,
    /// Crash test: SIGKILL the local historian this long into the load,
    /// restart it 3 s later; the step then shows whether acked readings survived.
    pub kill_historian_after: Option<Duration>,
    /// Crash test: SIGKILL node 1 of the local NATS cluster this long into
    /// the load, restart it 3 s later.
    pub kill_nats_node_after: Option<Duration>,
}

/// Where readings go and how stored readings are counted.
enum Route {
    /// MQTT; stored counted by the adapter (SQL/HTTP), canaries polled.
    Mqtt(MqttConfig),
    /// JetStream; stored counted by the host from the stream, canary acks = stored.
    JetStream { cfg: NatsConfig, client: async_nats::Client, stream: String, max_msgs: i64 },
}

fn utc_now() -> String {
    let ms = now_ms();
    crate::results::format_utc(ms)
}

/// Everything that lives across steps.
struct Session {
    model: Option<ValueModel>,
    encoder: Option<TargetAdapter>,
    query: Arc<Mutex<TargetAdapter>>,
    probe_set: Option<ProbeSet>,
    addresses: Vec<Arc<str>>,
    tags: Vec<TagInfo>,
    period_ms: u64,
    route: Route,
    next_canary_seq: u64,
}

pub async fn run(
    cfg: &LadderConfig,
    rt: &Runtime,
    stack: &mut Stack,
    services: Arc<StackServices>,
    budgets: &Budgets,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<RunResult> {
    // Plugins.
    let model_plugin = crate::catalog::load(rt, &cfg.model)?;
    let target_plugin = crate::catalog::load(rt, &cfg.target)?;
    let mut model = ValueModel::instantiate(rt, &model_plugin)?;
    model.configure(&cfg.model_params).map_err(crate::commands::gen::user_error)?;
    let period_ms = model.sample_period_ms()?;
    let dyn_services: Arc<dyn plugin_runtime::HostServices> = services.clone();
    let mut encoder = TargetAdapter::instantiate(rt, &target_plugin, dyn_services.clone())?;
    let plan = encoder.configure(&cfg.target_params).map_err(crate::commands::gen::user_error)?;
    let route = match &plan.transport {
        TransportPlan::Mqtt(m) => {
            let (host, port) = stack.mqtt().ok_or_else(|| anyhow::anyhow!(
                "target {} publishes over MQTT, but this stack has no MQTT broker\nhint: use the local MQTT stack (the default for MQTT targets) or --stack external --mqtt-url", cfg.target))?;
            let mut mqtt = MqttConfig::new(&host, port);
            mqtt.connections = cfg.connections.max(1);
            mqtt.qos = m.qos;
            mqtt.retain = m.retain;
            mqtt::check_reachable(&mqtt, Duration::from_secs(5)).await?;
            Route::Mqtt(mqtt)
        }
        TransportPlan::NatsJetstream(jp) => {
            let urls = stack.nats_urls().ok_or_else(|| anyhow::anyhow!(
                "target {} publishes to NATS JetStream, but this stack has no NATS server\nhint: use the local NATS stack (the default for NATS targets) or --stack external --nats-url", cfg.target))?;
            let client = nats_transport::connect(&urls).await?;
            nats_transport::ensure_stream(&client, &jp.stream_name, jp.subjects.clone(), &jp.storage, jp.replicas, jp.max_msgs).await?;
            let ncfg = NatsConfig { urls, connections: cfg.connections.max(1), jetstream_window: Some(256), channel_batches: 4 };
            Route::JetStream { cfg: ncfg, client, stream: jp.stream_name.clone(), max_msgs: jp.max_msgs }
        }
        other => bail!(
            "target {} wants transport {other:?}, which `scalebench run` does not drive yet (MQTT and NATS JetStream)\nhint: use an MQTT or JetStream target such as baler or nats-jetstream",
            cfg.target
        ),
    };
    let mut query = TargetAdapter::instantiate(rt, &target_plugin, dyn_services.clone())?;
    query.configure(&cfg.target_params).map_err(crate::commands::gen::user_error)?;
    let query = Arc::new(Mutex::new(query));
    let mut plugins_used = BTreeMap::new();
    plugins_used.insert(format!("model:{}", cfg.model), model_plugin.sha256.clone());
    plugins_used.insert(format!("target:{}", cfg.target), target_plugin.sha256.clone());
    let probe_set = match &cfg.probes {
        Some(spec) => {
            let p = crate::catalog::load(rt, spec)?;
            plugins_used.insert(format!("probes:{spec}"), p.sha256.clone());
            Some(ProbeSet::instantiate(rt, &p, dyn_services.clone())?)
        }
        None => None,
    };

    {
        let q = query.clone();
        tokio::task::spawn_blocking(move || q.lock().unwrap().preflight())
            .await?
            .context("the target is not ready for a ladder")?;
    }
    let sys = match &route { Route::Mqtt(m) => Some(BrokerSys::start(&m.host, m.port)), _ => None };

    let mut commits = BTreeMap::new();
    if let Some(c) = hardware::git_commit(&cfg.repo_dir) {
        commits.insert("scalebench".to_string(), c);
    }
    let mut caps = BTreeMap::new();
    caps.insert("cpu".to_string(), "none (local processes, uncapped)".to_string());
    let mut result = RunResult {
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
        hardware: hardware::describe(&cfg.results_dir),
        commits,
        plugins: plugins_used,
        caps,
        steps: Vec::new(),
        max_passing_points: None,
        ended_because: "running".into(),
    };
    let path = RunResult::path_in(&cfg.results_dir, &cfg.run_id);
    result.save(&path).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("results: {}", path.display());

    let mut session = Session {
        model: Some(model),
        encoder: Some(encoder),
        query,
        probe_set,
        addresses: Vec::new(),
        tags: Vec::new(),
        period_ms,
        route,
        next_canary_seq: 0,
    };

    let nproc = result.hardware.nproc.max(1);
    for (i, &points) in cfg.steps.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        eprintln!(
            "step {}/{}: {} points every {:?} = {:.0} readings/s",
            i + 1,
            cfg.steps.len(),
            crate::commands::gen_bench::group(points),
            cfg.interval,
            points as f64 / cfg.interval.as_secs_f64()
        );
        let step = run_step(cfg, &mut session, stack, &services, budgets, sys.as_ref(), &stop, points, nproc).await;
        let step = match step {
            Ok(s) => s,
            Err(e) => {
                result.ended_because = format!("error in step {}: {e:#}", points);
                result.finished_utc = Some(utc_now());
                result.save(&path)?;
                if let Some(sys) = sys { sys.stop(); }
                return Err(e);
            }
        };
        let status = step.status;
        eprintln!("step {} points: {:?}{}", points, status, if step.reasons.is_empty() { String::new() } else { format!(" - {}", step.reasons.join("; ")) });
        result.steps.push(step);
        if status == Status::Pass {
            result.max_passing_points = Some(points);
        }
        result.save(&path)?;
        if status == Status::Interrupted {
            result.ended_because = "interrupted".into();
            break;
        }
        if status != Status::Pass && !cfg.continue_on_fail {
            result.ended_because = format!("step {points} did not pass");
            break;
        }
    }
    if result.ended_because == "running" {
        result.ended_because = if stop.load(Ordering::Relaxed) { "interrupted".into() } else { "completed".into() };
    }
    result.finished_utc = Some(utc_now());
    result.save(&path)?;
    if let Some(sys) = sys { sys.stop(); }
    Ok(result)
}

#[allow(clippy::too_many_arguments)]
async fn run_step(
    cfg: &LadderConfig,
    session: &mut Session,
    stack: &mut Stack,
    services: &Arc<StackServices>,
    budgets: &Budgets,
    sys: Option<&BrokerSys>,
    stop: &Arc<AtomicBool>,
    points: u64,
    nproc: u32,
) -> anyhow::Result<StepResult> {
    let started_utc = utc_now();
    let step_started = Instant::now();
    let target_rps = points as f64 / cfg.interval.as_secs_f64();
    let mut ctx = verdict::Context::default();
    let free = hardware::disk_free_bytes(&cfg.results_dir).unwrap_or(u64::MAX);
    if free < cfg.min_disk_free_bytes {
        ctx.disk_low = Some(format!("{:.1} GB free, below {:.1} GB", free as f64 / 1e9, cfg.min_disk_free_bytes as f64 / 1e9));
    }

    // Topology for the new points.
    let have = session.tags.len() as u64;
    let mut topology = Topology::default();
    let transport = match &session.route {
        Route::Mqtt(c) => Transport::Mqtt(MqttTransport::start(c)),
        Route::JetStream { cfg: c, .. } => Transport::Nats(NatsTransport::start(c).await?),
    };
    let senders = transport.senders();
    if points > have {
        let model = session.model.as_mut().unwrap();
        let encoder = session.encoder.as_mut().unwrap();
        let new_tags = model.tags(cfg.seed, have as u32, (points - have) as u32)?;
        let addrs = encoder.addresses(&new_tags)?;
        session.addresses.extend(addrs.into_iter().map(|a| Arc::<str>::from(a.as_str())));
        let messages = loadgen::topology_messages(encoder, &new_tags)?;
        topology.new_points = new_tags.len() as u64;
        topology.messages = messages.len() as u64;
        session.tags.extend(new_tags);
        let t = Instant::now();
        for chunk in messages.chunks(1000) {
            senders[0].send(chunk.to_vec()).await.map_err(|_| anyhow::anyhow!("transport closed"))?;
        }
        // QoS 0 has no acks to wait for.
        let acks_expected = !matches!(&session.route, Route::Mqtt(m) if m.qos == 0);
        let deadline = Instant::now() + Duration::from_secs(if acks_expected { 120 } else { 0 });
        while transport.counts().topology_acked < topology.messages && Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        topology.publish_s = t.elapsed().as_secs_f64();
    }

    // Load.
    let live = Arc::new(ProducerLive::default());
    let spec = LoadSpec {
        points: points as u32,
        interval: cfg.interval,
        seed: cfg.seed,
        duration: cfg.warmup + cfg.soak,
        sample_period_ms: session.period_ms,
        first_canary_seq: session.next_canary_seq,
    };
    let mut plugins = Plugins { model: session.model.take().unwrap(), adapter: session.encoder.take().unwrap() };
    let addresses: Arc<Vec<Arc<str>>> = Arc::new(session.addresses.clone());
    let producer = {
        let (live, stop, spec, addresses, senders) = (live.clone(), stop.clone(), spec.clone(), addresses.clone(), senders.clone());
        std::thread::Builder::new().name("producer".into()).spawn(move || {
            let r = loadgen::produce(&mut plugins, &spec, &addresses, &senders, &live, &stop);
            (plugins, r)
        })?
    };
    drop(senders);

    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop_poll = Arc::new(AtomicBool::new(false));
    let poller = match &session.route {
        Route::Mqtt(_) => {
            let (q, live, seen, sp) = (session.query.clone(), live.clone(), seen.clone(), stop_poll.clone());
            let first = spec.first_canary_seq;
            Some(std::thread::spawn(move || canary::poll(q, live, first, seen, sp)))
        }
        Route::JetStream { .. } => None,
    };

    let sys_before = sys.map(|s| s.snapshot()).unwrap_or_default();
    let cpu_before = hardware::self_cpu_seconds();
    let load_started = Instant::now();
    let warmup_end = load_started + cfg.warmup;
    let mut samples: Vec<Sample> = Vec::new();
    let mut proc_samples: Vec<Vec<ProcSample>> = Vec::new();
    let mut probes_task: Option<tokio::task::JoinHandle<(ProbeSet, Vec<ProbeResult>)>> = None;
    let probe_at = warmup_end + cfg.soak / 2;
    let mut last_acked = 0u64;
    let mut last_t = Instant::now();
    let mut next_sample = Instant::now() + cfg.sample_every.min(cfg.warmup + cfg.soak);
    let mut soak_proc_start: Option<Vec<ProcSample>> = None;
    let mut health = stack.health();
    let mut crash_at = cfg.kill_historian_after.map(|d| load_started + d);
    let mut node_crash_at = cfg.kill_nats_node_after.map(|d| load_started + d);

    while !producer.is_finished() {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = Instant::now();
        if let (Some(at), Stack::Local(local)) = (crash_at, &mut *stack) {
            if now >= at {
                crash_at = None;
                eprintln!("  crash test: SIGKILL reference-historian, restart in 3 s");
                local.kill_historian(libc::SIGKILL)?;
                tokio::time::sleep(Duration::from_secs(3)).await;
                local.restart_historian().await?;
                let h = health.entry("reference-historian".into()).or_default();
                h.restarts += 1;
                h.state = "running".into();
            }
        }
        if let (Some(at), Stack::Nats(cluster)) = (node_crash_at, &mut *stack) {
            if now >= at {
                node_crash_at = None;
                let victim = if cluster.node_count() > 1 { 1 } else { 0 };
                eprintln!("  crash test: SIGKILL nats node {victim}, restart in 3 s");
                cluster.kill_node(victim, libc::SIGKILL)?;
                tokio::time::sleep(Duration::from_secs(3)).await;
                tokio::task::block_in_place(|| cluster.restart_node(victim))?;
                let h = health.entry(format!("nats-{victim}")).or_default();
                h.restarts += 1;
                h.state = "running".into();
            }
        }
        if soak_proc_start.is_none() && now >= warmup_end {
            soak_proc_start = Some(stack.sample_processes());
        }
        if probes_task.is_none() && now >= probe_at {
            if let Some(mut ps) = session.probe_set.take() {
                let (svc, tags, b, params, runs) = (services.clone(), session.tags.clone(), budgets.clone(), cfg.probe_params.clone(), cfg.probe_warm_runs);
                probes_task = Some(tokio::task::spawn_blocking(move || {
                    let results = match ps.setup(&params, &tags) {
                        Ok(probes) => crate::probes::run_probes(&mut ps, &probes, &svc, &b, runs),
                        Err(e) => vec![ProbeResult { name: "setup".into(), ok: false, error: Some(e.to_string()), ..Default::default() }],
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
            last_t = now;
            let procs = stack.sample_processes();
            let mut cpu_percent = BTreeMap::new();
            let mut rss_bytes = BTreeMap::new();
            if let Some(prev) = proc_samples.last() {
                for p in &procs {
                    if let Some(q) = prev.iter().find(|q| q.name == p.name) {
                        let wall = p.at.duration_since(q.at).as_secs_f64().max(1e-3);
                        cpu_percent.insert(p.name.clone(), (p.cpu_seconds - q.cpu_seconds) / wall * 100.0);
                    }
                }
            }
            for p in &procs {
                rss_bytes.insert(p.name.clone(), p.rss_bytes);
            }
            proc_samples.push(procs);
            let svc = services.clone();
            let pg_roundtrip_s = tokio::task::spawn_blocking(move || svc.pg_roundtrip("postgres").ok().map(|d| d.as_secs_f64()))
                .await
                .unwrap_or(None);
            let lag_s = match transport.canary_acks() {
                Some(acks) => {
                    let sent: BTreeMap<u64, i64> = live.canaries.lock().unwrap().iter().copied().collect();
                    acks.iter().next_back().and_then(|(seq, at)| sent.get(seq).map(|ts| (*at - *ts) as f64 / 1e3))
                }
                None => seen.lock().unwrap().seen.values().last().map(|(ts, at)| (*at - *ts) as f64 / 1e3),
            };
            // Stored rate over the last sample period, 5 s back so ingest lag does not hide rows.
            let to = now_ms() - 5_000;
            let from = to - cfg.sample_every.as_millis() as i64;
            let q = session.query.clone();
            let is_mqtt = matches!(session.route, Route::Mqtt(_));
            let stored_rps = if !is_mqtt { None } else { tokio::task::spawn_blocking(move || {
                q.lock().unwrap().stored(Window { start_ms: from, end_ms: to }).ok().map(|v| v.iter().map(|p| p.count).sum::<u64>())
            })
            .await
            .unwrap_or(None)
            .map(|n| n as f64 / ((to - from) as f64 / 1e3)) };
            let behind = live.behind_ms.load(Ordering::Relaxed) as f64 / 1e3;
            let elapsed = load_started.elapsed().as_secs_f64();
            eprintln!(
                "  [{points} pts] {:>5.0} s  offered {:>8.0}/s  acked {:>8.0}/s  stored {:>8}/s  lag {:>6}  behind {:.2} s{}",
                elapsed,
                target_rps,
                acked_rps,
                stored_rps.map(|s| format!("{s:.0}")).unwrap_or("-".into()),
                lag_s.map(|l| format!("{l:.2} s")).unwrap_or("-".into()),
                behind,
                if now < warmup_end { "  (warm-up)" } else { "" }
            );
            samples.push(Sample { elapsed_s: elapsed, acked_rps, stored_rps, lag_s, pg_roundtrip_s, behind_schedule_s: behind, cpu_percent, rss_bytes });
            for (svc, h) in stack.health() {
                if h.state != "running" {
                    health.entry(svc).or_default().state = h.state;
                }
            }
        }
    }
    let (plugins_back, report) = producer.join().map_err(|_| anyhow::anyhow!("the producer thread panicked"))?;
    session.model = Some(plugins_back.model);
    session.encoder = Some(plugins_back.adapter);
    let interrupted = stop.load(Ordering::Relaxed);
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            stop_poll.store(true, Ordering::Relaxed);
            if let Some(p) = poller { let _ = p.join(); }
            return Err(e.into());
        }
    };
    session.next_canary_seq = report.next_canary_seq;
    let soak_proc_end = stack.sample_processes();
    let canary_acks = transport.canary_acks();
    let counts = transport.finish(Duration::from_secs(if interrupted { 2 } else { 30 })).await;
    let cpu_s = hardware::self_cpu_seconds() - cpu_before;

    let probes = match probes_task {
        Some(t) => {
            let (ps, r) = t.await?;
            session.probe_set = Some(ps);
            r
        }
        None => Vec::new(),
    };

    // Drain: every canary stored (or the drain timeout), then stored stable.
    let sent: Vec<(u64, i64)> = live.canaries.lock().unwrap().clone();
    if canary_acks.is_some() {
        let acks = counts.canary_acked_at.clone();
        let mut s = seen.lock().unwrap();
        for (seq, ts) in &sent {
            if let Some(at) = acks.get(seq) {
                s.seen.insert(*seq, (*ts, *at));
            }
        }
    }
    let drain_deadline = Instant::now() + if interrupted { Duration::from_secs(2) } else { cfg.drain_timeout };
    while Instant::now() < drain_deadline {
        let n_seen = seen.lock().unwrap().seen.len();
        if n_seen >= sent.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop_poll.store(true, Ordering::Relaxed);
    if let Some(p) = poller { let _ = p.join(); }
    let window = Window { start_ms: report.start_ms, end_ms: report.end_ms };
    let acked_total: u64 = counts.acked_by_second.range(window.start_ms.div_euclid(1000)..window.end_ms.div_euclid(1000) + 1).map(|(_, n)| n).sum();
    let mut stored_by_second: BTreeMap<i64, u64>;
    let mut last_sum = u64::MAX;
    let stable_deadline = Instant::now() + if interrupted { Duration::from_secs(2) } else { Duration::from_secs(60) };
    let mut stream_note: Option<String> = None;
    loop {
        if let Route::JetStream { client, stream, max_msgs, .. } = &session.route {
            let (per_second, _read) = nats_transport::stored_per_second(client, stream, (window.start_ms, window.end_ms), Duration::from_secs(3))
                .await
                .map_err(|e| anyhow::anyhow!("counting stored messages in JetStream stream {stream}: {e}"))?;
            stored_by_second = per_second;
            if *max_msgs > 0 {
                if let Some((messages, limit)) = nats_transport::stream_state(client, stream).await {
                    if limit > 0 && messages as i64 >= limit {
                        stream_note = Some(format!(
                            "JetStream stream {stream} reached its limit max_msgs={limit} (holds {messages}): it discarded messages it had acknowledged"
                        ));
                    }
                }
            }
            break;
        }
        let q = session.query.clone();
        let rows = tokio::task::spawn_blocking(move || q.lock().unwrap().stored(window)).await??;
        stored_by_second = rows.iter().map(|p| (p.second_ms.div_euclid(1000), p.count)).collect();
        let sum: u64 = stored_by_second.values().sum();
        if sum >= acked_total || sum == last_sum || Instant::now() >= stable_deadline {
            break;
        }
        last_sum = sum;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let sys_after = sys.map(|s| s.snapshot()).unwrap_or_default();

    // Compare per second of payload ts.
    let mut acked = 0u64;
    let mut stored = 0u64;
    let mut short = Vec::new();
    let mut short_count = 0u64;
    for (sec, a) in &counts.acked_by_second {
        let ms = sec * 1000;
        if ms < window.start_ms || ms >= window.end_ms {
            continue;
        }
        let s = stored_by_second.get(sec).copied().unwrap_or(0);
        acked += a;
        stored += s.min(*a);
        if (s as f64) < 0.99 * *a as f64 {
            short_count += 1;
            if short.len() < 10 {
                short.push(format!("{sec}: {s}/{a}"));
            }
        }
    }
    let soak_from_ms = window.start_ms + cfg.warmup.as_millis() as i64;
    let soak_s = ((window.end_ms - soak_from_ms) as f64 / 1e3).max(1e-3);
    let acked_soak: u64 = counts.acked_by_second.iter().filter(|(s, _)| **s * 1000 >= soak_from_ms && **s * 1000 < window.end_ms).map(|(_, n)| n).sum();
    let stored_soak: u64 = stored_by_second.iter().filter(|(s, _)| **s * 1000 >= soak_from_ms && **s * 1000 < window.end_ms).map(|(_, n)| n).sum();
    let achieved_rps = acked_soak as f64 / soak_s;
    let stored_rps = stored_soak as f64 / soak_s;

    let broker = broker_sys::compare(&sys_before, &sys_after);
    let dropped = broker.get("publish/messages/dropped").and_then(|c| c.delta).unwrap_or(0.0);

    // Resources over the soak.
    let mut resources = BTreeMap::new();
    if let Some(start) = &soak_proc_start {
        for p in &soak_proc_end {
            if let Some(q) = start.iter().find(|q| q.name == p.name) {
                let wall = p.at.duration_since(q.at).as_secs_f64().max(1e-3);
                let mut r = Resource { cpu_percent: (p.cpu_seconds - q.cpu_seconds) / wall * 100.0, ..Default::default() };
                r.rss_bytes_last = p.rss_bytes;
                r.rss_bytes_max = proc_samples.iter().flatten().filter(|x| x.name == p.name).map(|x| x.rss_bytes).max().unwrap_or(p.rss_bytes);
                r.cpu_percent_max = samples.iter().filter_map(|s| s.cpu_percent.get(&p.name)).cloned().fold(0.0, f64::max);
                resources.insert(p.name.clone(), r);
            }
        }
    }

    // SUT stats: durability (read live) and storage.
    let q = session.query.clone();
    let stats = tokio::task::spawn_blocking(move || q.lock().unwrap().stats()).await?.unwrap_or_default();
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
            "db.table_bytes" => db.table_bytes = s.number,
            "db.rows_estimate" | "db.rows" => db.rows_estimate = s.number,
            "db.database_bytes" => db.database_bytes = s.number,
            _ => {}
        }
    }
    let on = |v: &Option<String>| v.as_deref() == Some("on");
    durability.comparable = on(&durability.fsync) && on(&durability.synchronous_commit) && on(&durability.full_page_writes);
    if let (Some(b), Some(r)) = (db.table_bytes, db.rows_estimate) {
        if r > 0.0 {
            db.bytes_per_row = Some(b / r);
            db.bytes_per_day_raw_at_this_rate = Some(b / r * stored_rps * 86_400.0);
        }
    }

    let lag = canary::summarize(&sent, &seen.lock().unwrap(), soak_from_ms);
    let mut step = StepResult {
        points,
        status: Status::Pass,
        reasons: Vec::new(),
        target_rps,
        started_utc,
        duration_s: step_started.elapsed().as_secs_f64(),
        generator: Generator {
            published: counts.published,
            acked: counts.readings_acked,
            achieved_rps,
            offered_ratio: achieved_rps / target_rps,
            behind_schedule_max_s: report.behind_max_s,
            behind_schedule_p95_s: report.behind_p95_s,
            connections: cfg.connections.max(1),
            publish_errors: counts.errors,
            cpu_s,
            cpu_us_per_acked: if counts.readings_acked > 0 { cpu_s * 1e6 / counts.readings_acked as f64 } else { 0.0 },
            rss_peak_bytes: hardware::self_peak_rss_bytes(),
        },
        ingest: Ingest {
            acked,
            stored,
            stored_ratio: if acked > 0 { stored as f64 / acked as f64 } else { 1.0 },
            short_seconds: short,
            short_seconds_count: short_count,
            stored_rps,
            stored_rate_ratio: if achieved_rps > 0.0 { stored_rps / achieved_rps } else { 0.0 },
            stored_rps_per_host_cpu: stored_rps / nproc as f64,
            broker_dropped_delta: dropped,
            rows_per_day_at_this_rate: stored_rps * 86_400.0,
        },
        lag,
        broker,
        resources,
        containers: health,
        samples,
        probes,
        db,
        durability,
        topology,
    };
    if !counts.error_samples.is_empty() {
        eprintln!("  transport errors: {}", counts.error_samples.join("; "));
    }
    ctx.interrupted = interrupted;
    if let Some(n) = stream_note {
        ctx.sut_failures.push(n);
    }
    if counts.errors > 0 && matches!(session.route, Route::JetStream { .. }) {
        ctx.sut_failures.push(format!("{} JetStream publish errors ({})", counts.errors, counts.error_samples.join("; ")));
    }
    if report.stopped_early && !interrupted {
        ctx.aborted = Some("the producer stopped early (transport closed)".into());
    }
    let (status, reasons) = verdict::decide(&step, &ctx);
    step.status = status;
    step.reasons = reasons;
    Ok(step)
}
