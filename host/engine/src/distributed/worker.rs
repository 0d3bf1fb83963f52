//! `scalebench worker`: one generator of a distributed run. It loads the
//! coordinator's plugins (the same component bytes), learns the step's
//! points the way the coordinator did (model tags, adapter addresses and
//! topology, so the adapter holds the same state; nothing of the topology
//! is sent, the coordinator sends it once), and offers its shard of each
//! step on the schedule the coordinator fixes. Acknowledgements are counted
//! and timed here, by the same transports and recorders as a one-process
//! run, and travel back as counters and HdrHistograms.
//!
//! The control API is in [`super::wire`]. Heartbeats both ways: the
//! coordinator polls `status` every second, and a worker whose coordinator
//! falls silent for [`wire::COORDINATOR_SILENCE`] stops its load.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State as AxState;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use plugin_runtime::adapter_types::TransportPlan;
use plugin_runtime::{TargetAdapter, ValueModel};

use super::wire::{self, State};
use crate::catalog::PluginLimits;
use crate::live_metrics::{LatencyBuckets, LiveMetrics, LoadSources};
use crate::loadgen::{self, LoadSpec, Plugins, ProducerLive, Share};
use crate::phase::Phase;
use crate::services::{Scoped, StackServices};
use crate::stack::{Endpoint, ServiceKind, StackDriver};
use crate::transport::{Carrier, CarrierOptions, Live, Transport};

/// How a worker is started.
#[derive(Debug, Clone)]
pub struct Options {
    pub listen: SocketAddr,
    pub index: Option<u32>,
    pub limits: PluginLimits,
    /// `--metrics-listen`: serve this worker's live figures there.
    pub metrics_listen: Option<SocketAddr>,
    /// Tests only: the build id this worker reports (how the coordinator's
    /// refusal of another binary is tested).
    pub test_build_id: Option<String>,
    /// What every call but `/v1/health` must carry ([`super::token`]).
    pub token: String,
}

/// What a worker holds between calls.
struct Loaded {
    index: u32,
    count: u32,
    seed: u64,
    plugins: Option<Plugins>,
    addresses: Vec<Arc<str>>,
    points: u64,
    carrier: Box<dyn Carrier>,
    transport: Option<Box<dyn Transport>>,
}

#[derive(Default)]
struct Step {
    live: Arc<ProducerLive>,
    acks: Option<Arc<Live>>,
    /// The connections' counts, for the latency each heartbeat carries.
    conns: Vec<Arc<Mutex<crate::transport::AckCounts>>>,
    stop: Arc<AtomicBool>,
    final_: Option<wire::Final>,
    /// The last heartbeat's number and the per-second figures it carried.
    seq: u64,
    sent: wire::Seconds,
}

impl Step {
    /// The step's per-second figures now: the producer's offers, the
    /// connections' acks and refusals.
    fn seconds(&self) -> wire::Seconds {
        let offered = self.live.seconds.lock().unwrap().clone();
        let mut s = wire::Seconds {
            offered_by_second: offered.by_payload,
            offered_by_wall_second: offered.by_wall,
            ..Default::default()
        };
        for c in &self.conns {
            let c = c.lock().unwrap();
            let add = |into: &mut std::collections::BTreeMap<i64, u64>, from: &std::collections::BTreeMap<i64, u64>| {
                for (k, v) in from {
                    *into.entry(*k).or_default() += v;
                }
            };
            add(&mut s.acked_by_second, &c.acked_by_second);
            add(&mut s.acked_by_arrival_second, &c.acked_by_arrival_second);
            add(&mut s.refused_by_second, &c.refused_by_second);
            add(&mut s.refused_by_arrival_second, &c.refused_by_arrival_second);
        }
        s
    }

    /// The next heartbeat's per-second figures: what changed since heartbeat
    /// `since` if that was the last one sent, else all of them.
    fn heartbeat_seconds(&mut self, since: Option<u64>) -> (u64, wire::Seconds) {
        let now = self.seconds();
        let out = if since == Some(self.seq) && self.seq > 0 { now.changed_since(&self.sent) } else { now.clone() };
        self.seq += 1;
        self.sent = now;
        (self.seq, out)
    }
}

struct Worker {
    /// The index given on the command line (a slot of Swarm or Kubernetes);
    /// the coordinator's shard index is what the worker offers.
    index: Option<u32>,
    limits: PluginLimits,
    state: Mutex<State>,
    loaded: Mutex<Option<Loaded>>,
    step: Mutex<Step>,
    error: Mutex<Option<String>>,
    last_contact: Mutex<Instant>,
    /// The same, as [`crate::clock::now_ns`]: the running producer's leash.
    contact_ns: Arc<AtomicI64>,
    /// `--metrics-listen`: this worker's own live figures.
    metrics: Option<Arc<LiveMetrics>>,
}

fn kind_of(s: &str) -> Option<ServiceKind> {
    Some(match s {
        "mqtt" => ServiceKind::Mqtt,
        "postgres" => ServiceKind::Postgres,
        "nats" => ServiceKind::Nats,
        "http" => ServiceKind::Http,
        _ => return None,
    })
}

/// The kind's name on the wire.
pub fn kind_name(k: ServiceKind) -> &'static str {
    match k {
        ServiceKind::Mqtt => "mqtt",
        ServiceKind::Postgres => "postgres",
        ServiceKind::Nats => "nats",
        ServiceKind::Http => "http",
    }
}

/// The coordinator's services, as a stack the carrier can be chosen from.
struct Remote(Vec<Endpoint>);

impl StackDriver for Remote {
    fn kind(&self) -> &'static str {
        "coordinator's"
    }
    fn services(&self) -> Vec<Endpoint> {
        self.0.clone()
    }
    fn stop(self: Box<Self>) {}
}

fn fail(status: StatusCode, e: impl std::fmt::Display) -> Response {
    (status, serde_json::to_string(&wire::Failure { error: e.to_string() }).unwrap_or_default()).into_response()
}

fn json<T: serde::Serialize>(v: &T) -> Response {
    (StatusCode::OK, [("content-type", "application/json")], serde_json::to_string(v).unwrap_or_default())
        .into_response()
}

fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("bad request body: {e}"))
}

impl Worker {
    fn touch(&self) {
        *self.last_contact.lock().unwrap() = Instant::now();
        self.contact_ns.store(crate::clock::now_ns(), Ordering::Relaxed);
    }
    fn set(&self, s: State) {
        *self.state.lock().unwrap() = s;
    }
    fn failed(&self, why: String) -> Response {
        tracing::warn!("worker: {why}");
        *self.error.lock().unwrap() = Some(why.clone());
        self.set(State::Failed);
        fail(StatusCode::UNPROCESSABLE_ENTITY, why)
    }
    fn ready(&self, detail: String) -> Response {
        let index = self.loaded.lock().unwrap().as_ref().map(|l| l.index).or(self.index).unwrap_or(0);
        json(&wire::Ready { index, detail })
    }
}

async fn init(w: Arc<Worker>, body: Bytes) -> Response {
    w.touch();
    let req: wire::Init = match parse(&body) {
        Ok(r) => r,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e),
    };
    if let Some(l) = w.loaded.lock().unwrap().take() {
        if let Some(t) = l.transport {
            drop(t.finish(Duration::ZERO));
        }
    }
    *w.step.lock().unwrap() = Step::default();
    if let Some(m) = &w.metrics {
        m.set_target(&req.target.name);
    }
    let limits = w.limits.clone();
    let opened = tokio::task::spawn_blocking(move || open_plugins(&limits, &req).map(|p| (p, req))).await;
    let ((plugins, plan, rules), req) = match opened {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => return w.failed(format!("{e:#}")),
        Err(e) => return w.failed(format!("init: {e}")),
    };
    let mut endpoints = Vec::new();
    for s in &req.services {
        match kind_of(&s.kind) {
            Some(kind) => endpoints.push(Endpoint { name: s.name.clone(), kind, address: s.address.clone() }),
            None => return w.failed(format!("service {} has an unknown kind `{}`", s.name, s.kind)),
        }
    }
    let opts = CarrierOptions {
        connections: req.connections,
        inflight: req.inflight,
        mqtt_user: req.mqtt_user.clone(),
        mqtt_password: req.mqtt_password.clone(),
        mqtt_version: req.mqtt_version,
        http_window: req.http_window,
        http_rules: rules,
        client_id_prefix: Some(req.client_id_prefix.clone()),
        worker: true,
    };
    // The carrier is chosen from a stack borrowed as `&dyn StackDriver`
    // (not Sync): chosen on this thread, off the handler's future.
    let chosen = tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(crate::transport::carrier_for(
            &req.target.name,
            &plan,
            &Remote(endpoints),
            &opts,
        ))
    });
    let carrier = match chosen {
        Ok(c) => c,
        Err(e) => return w.failed(format!("cannot reach the target from this worker: {e:#}")),
    };
    let detail = format!("shard {} of {}: {} via {}", req.index + 1, req.count, req.target.name, carrier.describe());
    tracing::info!("worker: {detail}");
    *w.loaded.lock().unwrap() = Some(Loaded {
        index: req.index,
        count: req.count,
        seed: req.seed,
        plugins: Some(plugins),
        addresses: Vec::new(),
        points: 0,
        carrier,
        transport: None,
    });
    *w.error.lock().unwrap() = None;
    w.set(State::Ready);
    w.ready(detail)
}

type Opened = (Plugins, TransportPlan, Option<Arc<dyn crate::transport::http::IngestRules>>);

fn open_plugins(limits: &PluginLimits, req: &wire::Init) -> anyhow::Result<Opened> {
    let rt = crate::catalog::runtime(limits)?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let model_bytes = b64.decode(&req.model.wasm_b64)?;
    let target_bytes = b64.decode(&req.target.wasm_b64)?;
    let model_plugin = rt.load_bytes(&req.model.name, &model_bytes)?;
    let target_plugin = rt.load_bytes(&req.target.name, &target_bytes)?;
    let mut model = ValueModel::instantiate(&rt, &model_plugin)?;
    model.configure(&req.model_params).map_err(crate::catalog::user_error)?;
    // The SQL and HTTP services a plugin may ask for: the coordinator's
    // (an adapter may read what the SUT holds while it learns the points).
    let by_kind = |k: &str| -> std::collections::BTreeMap<String, String> {
        req.services.iter().filter(|s| s.kind == k).map(|s| (s.name.clone(), s.address.clone())).collect()
    };
    let services = Arc::new(StackServices::new(by_kind("postgres"), by_kind("http"))?);
    let mut adapter = TargetAdapter::instantiate(&rt, &target_plugin, Scoped::shared(&services, "encoder"))?;
    let plan = adapter.configure(&req.target_params).map_err(crate::catalog::user_error)?;
    let rules: Option<Arc<dyn crate::transport::http::IngestRules>> = match plan.transport {
        TransportPlan::Http => {
            let mut a = TargetAdapter::instantiate(&rt, &target_plugin, Scoped::shared(&services, "ingest"))?;
            a.configure(&req.target_params).map_err(crate::catalog::user_error)?;
            Some(Arc::new(crate::transport::http::AdapterRules(Arc::new(Mutex::new(a)))))
        }
        _ => None,
    };
    Ok((Plugins { model: Box::new(model), adapter: Box::new(adapter) }, plan.transport, rules))
}

async fn prepare(w: Arc<Worker>, body: Bytes) -> Response {
    w.touch();
    let req: wire::Prepare = match parse(&body) {
        Ok(r) => r,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e),
    };
    let Some(mut l) = w.loaded.lock().unwrap().take() else {
        return fail(StatusCode::CONFLICT, "prepare before init");
    };
    let res = tokio::task::spawn_blocking(move || {
        let r = learn_points(&mut l, req.points);
        (l, r)
    })
    .await;
    let mut l = match res {
        Ok((l, Ok(()))) => l,
        Ok((l, Err(e))) => {
            *w.loaded.lock().unwrap() = Some(l);
            return w.failed(format!("{e:#}"));
        }
        Err(e) => return w.failed(format!("prepare: {e}")),
    };
    if l.transport.is_none() {
        match l.carrier.open().await {
            Ok(t) => l.transport = Some(t),
            Err(e) => {
                *w.loaded.lock().unwrap() = Some(l);
                return w.failed(format!("cannot connect: {e:#}"));
            }
        }
    }
    let detail = format!("{} points known", l.points);
    *w.loaded.lock().unwrap() = Some(l);
    w.set(State::Ready);
    w.ready(detail)
}

/// Tags, addresses and topology for points up to `points`, as the
/// coordinator learned them (the adapter keeps the same state).
fn learn_points(l: &mut Loaded, points: u64) -> anyhow::Result<()> {
    let p = l.plugins.as_mut().ok_or_else(|| anyhow::anyhow!("a step is running"))?;
    while l.points < points {
        let n = (points - l.points).min(plugin_runtime::POINTS_PER_CALL as u64);
        let tags = p.model.tags(l.seed, l.points as u32, n as u32)?;
        let addrs = p.adapter.addresses(&tags)?;
        l.addresses.extend(addrs.into_iter().map(|a| Arc::<str>::from(a.as_str())));
        drop(loadgen::topology_messages(&mut *p.adapter, &tags)?);
        l.points += n;
    }
    Ok(())
}

async fn start(w: Arc<Worker>, body: Bytes) -> Response {
    w.touch();
    let req: wire::Start = match parse(&body) {
        Ok(r) => r,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e),
    };
    let mut guard = w.loaded.lock().unwrap();
    let Some(l) = guard.as_mut() else {
        return fail(StatusCode::CONFLICT, "start before init");
    };
    if l.points < req.points {
        return fail(
            StatusCode::CONFLICT,
            format!("start of {} points before prepare ({} known)", req.points, l.points),
        );
    }
    let (Some(mut plugins), Some(transport)) = (l.plugins.take(), l.transport.take()) else {
        return fail(StatusCode::CONFLICT, "start before prepare, or while a step runs");
    };
    let spec = LoadSpec {
        points: req.points as u32,
        interval: Duration::from_millis(req.interval_ms),
        seed: l.seed,
        duration: Duration::from_millis(req.duration_ms),
        sample_period_ms: req.sample_period_ms,
        first_canary_seq: 0,
        start_ms: Some(req.start_ms),
        share: Share::Shard { index: l.index, count: l.count },
        canaries: false,
    };
    transport.live().soak_from_ms.store(req.start_ms + req.warmup_ms as i64, Ordering::Relaxed);
    // The coordinator merges the workers' seconds: each keeps its histograms.
    transport.live().keep_second_histograms.store(true, Ordering::Relaxed);
    // The producer stops itself when its coordinator falls silent for as
    // long as the coordinator takes to count this worker lost.
    let leash = loadgen::Leash { contact_ns: w.contact_ns.clone(), silence: wire::HEARTBEAT_LOST };
    let step = Step {
        live: Arc::new(ProducerLive { leash: Some(leash), ..Default::default() }),
        acks: Some(transport.live().clone()),
        conns: transport.pool().conns.iter().map(|c| c.counts.clone()).collect(),
        stop: Arc::new(AtomicBool::new(false)),
        final_: None,
        seq: 0,
        sent: wire::Seconds::default(),
    };
    if let Some(m) = &w.metrics {
        metrics_step_started(m, &req, &step, transport.live());
    }
    let (live, stop) = (step.live.clone(), step.stop.clone());
    *w.step.lock().unwrap() = step;
    let addresses: Arc<Vec<Arc<str>>> = Arc::new(l.addresses.clone());
    let index = l.index;
    drop(guard);
    w.set(State::Running);
    let senders = transport.senders();
    let cpu_before = crate::hardware::self_cpu_seconds();
    let w2 = w.clone();
    let producer = std::thread::Builder::new().name("producer".into()).spawn(move || {
        let r = loadgen::produce(&mut plugins, &spec, &addresses, &senders, &live, &stop);
        (plugins, r)
    });
    let producer = match producer {
        Ok(p) => p,
        Err(e) => return w.failed(format!("cannot start the producer: {e}")),
    };
    tokio::spawn(async move {
        let joined = tokio::task::spawn_blocking(move || producer.join()).await;
        let (plugins, report) = match joined {
            Ok(Ok(x)) => x,
            _ => {
                w2.failed("the producer thread panicked".into());
                return;
            }
        };
        w2.set(State::Draining);
        if w2.step.lock().unwrap().live.off_leash.load(Ordering::Relaxed) {
            tracing::warn!(
                "worker: no call from the coordinator for {} s; the load stopped (the coordinator counts this worker lost)",
                wire::HEARTBEAT_LOST.as_secs()
            );
        }
        if let Some(m) = &w2.metrics {
            m.phase(Phase::Drain);
        }
        let counts = transport.finish(Duration::from_millis(req.drain_ms)).await;
        if let Some(l) = w2.loaded.lock().unwrap().as_mut() {
            l.plugins = Some(plugins);
        }
        match report {
            Ok(report) => {
                let f = wire::Final {
                    index,
                    report,
                    counts,
                    cpu_s: crate::hardware::self_cpu_seconds() - cpu_before,
                    rss_bytes: crate::hardware::self_rss_bytes(),
                };
                w2.step.lock().unwrap().final_ = Some(f);
                w2.set(State::Done);
                if let Some(m) = &w2.metrics {
                    m.step_ended();
                }
            }
            Err(e) => {
                w2.failed(format!("{e}"));
            }
        }
    });
    w.ready(format!("load from {}", crate::clock::format_utc(req.start_ms)))
}

/// `since=SEQ` from a status call's query.
fn since(query: Option<&str>) -> Option<u64> {
    query?.split('&').find_map(|kv| kv.strip_prefix("since=")).and_then(|v| v.parse().ok())
}

/// `--metrics-listen`: the step's load from now, its soak from the
/// schedule's start plus the warm-up.
fn metrics_step_started(m: &Arc<LiveMetrics>, req: &wire::Start, step: &Step, acks: &Arc<Live>) {
    m.step_started(req.points);
    m.phase(if req.warmup_ms > 0 { Phase::WarmUp } else { Phase::Soak });
    m.load_started(LoadSources {
        producer: step.live.clone(),
        transport: acks.clone(),
        connections: step.conns.clone(),
        more_latency: None,
    });
    let (m, points) = (m.clone(), req.points);
    let soak_in = (req.start_ms + req.warmup_ms as i64 - crate::clock::now_ms()).max(0) as u64;
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(soak_in)).await;
        m.phase_of(points, Phase::Soak);
    });
}

async fn status(w: Arc<Worker>, query: Option<String>) -> Response {
    w.touch();
    let state = *w.state.lock().unwrap();
    let mut step = w.step.lock().unwrap();
    let index = w.loaded.lock().unwrap().as_ref().map(|l| l.index).or(w.index).unwrap_or(0);
    let (seq, seconds) = step.heartbeat_seconds(since(query.as_deref()));
    json(&wire::Status {
        index,
        state,
        offered: step.live.readings_offered.load(Ordering::Relaxed),
        acked: step.acks.as_ref().map_or(0, |a| a.readings_acked.load(Ordering::Relaxed)),
        behind_ms: step.live.behind_ms.load(Ordering::Relaxed),
        errors: step.acks.as_ref().map_or(0, |a| a.errors.load(Ordering::Relaxed)),
        now_ms: crate::clock::now_ms(),
        error: w.error.lock().unwrap().clone(),
        refused: step.acks.as_ref().map_or(0, |a| a.readings_refused.load(Ordering::Relaxed)),
        latency: Some(LatencyBuckets::of_connections(&step.conns)),
        seq,
        seconds,
        off_leash: step.live.off_leash.load(Ordering::Relaxed),
    })
}

async fn result(w: Arc<Worker>) -> Response {
    w.touch();
    let step = w.step.lock().unwrap();
    match &step.final_ {
        Some(f) => json(f),
        None => (StatusCode::ACCEPTED, "the step has not drained yet").into_response(),
    }
}

async fn stop(w: Arc<Worker>) -> Response {
    w.touch();
    w.step.lock().unwrap().stop.store(true, Ordering::Relaxed);
    (StatusCode::OK, "stopping").into_response()
}

/// A call that carries the worker's token goes on; any other is answered
/// 401, saying what to do.
async fn authorized(token: &str, req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let header = req.headers().get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if super::token::authorizes(header, token) {
        return next.run(req).await;
    }
    let error = format!(
        "this worker takes calls from its coordinator only: give --workers the URL the worker printed (with its ?token=), or set {} to the token it was started with",
        super::token::ENV
    );
    (
        StatusCode::UNAUTHORIZED,
        [("content-type", "application/json")],
        serde_json::to_string(&wire::Failure { error }).unwrap_or_default(),
    )
        .into_response()
}

/// Serve the control API until the process is stopped; `listening` hears
/// the bound address once it accepts connections.
///
/// Boxed at the crate's edge: see `crate::future`.
pub fn serve(
    opts: Options,
    listening: Box<dyn FnOnce(SocketAddr) + Send>,
) -> crate::future::BoxFuture<'static, anyhow::Result<()>> {
    Box::pin(serve_here(opts, listening))
}

async fn serve_here(opts: Options, listening: Box<dyn FnOnce(SocketAddr) + Send>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e} (choose another with --listen)", opts.listen))?;
    let addr = listener.local_addr()?;
    let mut build = wire::Build::this();
    if let Some(id) = &opts.test_build_id {
        build.build_id = id.clone();
    }
    let w = Arc::new(Worker {
        index: opts.index,
        limits: opts.limits,
        state: Mutex::new(State::Idle),
        loaded: Mutex::new(None),
        step: Mutex::new(Step::default()),
        error: Mutex::new(None),
        last_contact: Mutex::new(Instant::now()),
        contact_ns: Arc::new(AtomicI64::new(crate::clock::now_ns())),
        metrics: opts.metrics_listen.map(|_| LiveMetrics::new("")),
    });
    if let (Some(addr), Some(m)) = (opts.metrics_listen, &w.metrics) {
        let bound = crate::live_metrics::server::serve(addr, m.clone()).await?;
        tracing::info!("worker metrics on http://{bound}/metrics");
    }
    // The coordinator's heartbeat: a load nobody watches stops.
    let watchdog = w.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let running = matches!(*watchdog.state.lock().unwrap(), State::Running);
            let silent = watchdog.last_contact.lock().unwrap().elapsed();
            if running && silent > wire::COORDINATOR_SILENCE {
                tracing::warn!("worker: no word from the coordinator for {} s; stopping the load", silent.as_secs());
                watchdog.step.lock().unwrap().stop.store(true, Ordering::Relaxed);
            }
        }
    });
    let token = Arc::new(opts.token.clone());
    let app = axum::Router::new()
        .route("/v1/clock", get(|| async { json(&wire::Clock { now_ms: crate::clock::now_ms() }) }))
        .route("/v1/build", get(move || async move { json(&build) }))
        .route("/v1/init", post(|AxState(w): AxState<Arc<Worker>>, b: Bytes| init(w, b)))
        .route("/v1/prepare", post(|AxState(w): AxState<Arc<Worker>>, b: Bytes| prepare(w, b)))
        .route("/v1/start", post(|AxState(w): AxState<Arc<Worker>>, b: Bytes| start(w, b)))
        .route(
            "/v1/status",
            get(|AxState(w): AxState<Arc<Worker>>, axum::extract::RawQuery(q): axum::extract::RawQuery| status(w, q)),
        )
        .route("/v1/result", get(|AxState(w): AxState<Arc<Worker>>| result(w)))
        .route("/v1/stop", post(|AxState(w): AxState<Arc<Worker>>| stop(w)))
        // Every route above takes its coordinator's token; health does not.
        .route_layer(axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
            let token = token.clone();
            async move { authorized(&token, req, next).await }
        }))
        .route("/v1/health", get(|| async { "ok" }))
        .with_state(w);
    listening(addr);
    axum::serve(listener, app).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Heartbeats carry the seconds that changed since the last one the
    /// coordinator heard (whole values), everything when it missed one; a
    /// coordinator applying them holds exactly the worker's figures.
    #[test]
    fn heartbeats_carry_the_changed_seconds_and_add_up_to_the_workers_figures() {
        let conn = Arc::new(Mutex::new(crate::transport::AckCounts::default()));
        let mut step = Step { conns: vec![conn.clone()], ..Default::default() };
        let offer = |step: &Step, sec: i64, n: u64| {
            let mut s = step.live.seconds.lock().unwrap();
            *s.by_payload.entry(sec).or_default() += n;
            *s.by_wall.entry(sec).or_default() += n;
        };
        let mut held = wire::Seconds::default();
        offer(&step, 100, 50);
        conn.lock().unwrap().acked_by_second.insert(100, 20);
        let (seq, first) = step.heartbeat_seconds(Some(0));
        assert_eq!((seq, first.offered(), first.acked()), (1, 50, 20));
        held.apply(&first);
        // Second 100's acks grow late, second 101 is new: both travel, whole.
        offer(&step, 101, 50);
        conn.lock().unwrap().acked_by_second.insert(100, 50);
        let (seq, second) = step.heartbeat_seconds(Some(seq));
        assert_eq!(second.offered_by_second, [(101, 50)].into());
        assert_eq!(second.acked_by_second, [(100, 50)].into());
        held.apply(&second);
        // A heartbeat the coordinator never heard: the next is whole.
        offer(&step, 102, 50);
        let (_, unheard) = step.heartbeat_seconds(Some(seq));
        assert_eq!(unheard.offered_by_second.len(), 1);
        offer(&step, 103, 50);
        let (_, whole) = step.heartbeat_seconds(Some(seq));
        assert_eq!(whole, step.seconds());
        held.apply(&whole);
        assert_eq!(held, step.seconds());
        assert_eq!((held.offered(), held.acked()), (200, 50));
    }
}
