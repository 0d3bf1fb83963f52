//! The coordinator's side of a distributed run: the workers it drives, the
//! barrier before each step's load (clock offsets measured NTP-style), the
//! heartbeat, and the merge of their figures into the step's.
//!
//! Topology, canaries, probes and stored counts stay on the coordinator
//! (one clock for lag); workers offer the readings, each its shard.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;

use super::wire::{self, State};
use crate::loadgen::{ProducerLive, ProducerReport, Share};
use crate::results::WorkerFigures;
use crate::transport::{AckCounts, Live, Transport};

/// A worker as the coordinator knows it.
#[derive(Clone)]
pub struct Worker {
    /// Shard index (0-based).
    pub index: u32,
    /// Its control URL, without the token.
    pub url: String,
    /// What its control API takes ([`super::token`]); never printed.
    token: String,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("index", &self.index).field("url", &self.url).finish_non_exhaustive()
    }
}

impl Worker {
    /// "worker 2 of 3 (http://…)".
    fn name(&self, of: usize) -> String {
        format!("worker {} of {of} ({})", self.index + 1, self.url)
    }
}

/// What the coordinator learned about one worker in the current step.
#[derive(Debug, Default, Clone)]
struct Seen {
    offset_ms: Option<i64>,
    rtt_ms: Option<i64>,
    last_ok: Option<Instant>,
    last: Option<wire::Status>,
    lost: Option<String>,
    refused: Option<String>,
    final_: Option<wire::Final>,
    scheduled: u64,
    /// Its per-second figures as its heartbeats carried them, and the
    /// number of the last heartbeat heard.
    seconds: wire::Seconds,
    seq: u64,
    /// When its last heartbeat arrived (ms since the epoch).
    last_ok_ms: Option<i64>,
    /// Lost: its figures end at its last heartbeat, this one (ms since the
    /// epoch), and what it had offered by then.
    missing_from_ms: Option<i64>,
    offered_at_loss: Option<u64>,
}

impl Seen {
    /// Count the worker lost, for `why`: its figures are those of its last
    /// heartbeat from here on, unless it comes back with its result.
    fn lose(&mut self, why: String) {
        tracing::warn!("  {why}");
        self.lost = Some(why);
        self.missing_from_ms = self.last_ok_ms;
        self.offered_at_loss = Some(self.seconds.offered());
    }

    /// Lost, and came back with its result after the load.
    fn came_back(&self) -> bool {
        self.lost.is_some() && self.final_.is_some()
    }

    /// Readings it offered after it was counted lost (it came back).
    fn offered_late(&self) -> Option<u64> {
        let f = self.final_.as_ref().filter(|_| self.lost.is_some())?;
        Some(f.report.readings_offered.saturating_sub(self.offered_at_loss.unwrap_or(0)))
    }

    /// Its acknowledgements as its heartbeats told them (a worker lost and
    /// never back): the per-second maps and their totals, nothing else.
    fn heard_counts(&self) -> AckCounts {
        let s = &self.seconds;
        AckCounts {
            readings_acked: s.acked(),
            readings_rejected: s.refused(),
            acked_by_second: s.acked_by_second.clone(),
            acked_by_arrival_second: s.acked_by_arrival_second.clone(),
            refused_by_second: s.refused_by_second.clone(),
            refused_by_arrival_second: s.refused_by_arrival_second.clone(),
            ..Default::default()
        }
    }
}

/// The workers of a run.
pub struct Workers {
    pub list: Vec<Worker>,
    agent: ureq::Agent,
    seen: Mutex<Vec<Seen>>,
    /// The current step's start, for the barrier and the results.
    step: Mutex<Option<wire::Start>>,
    /// How long each heartbeat round of the current step took (every
    /// worker asked and its answer merged): the coordinator's own lateness.
    rounds: Mutex<Vec<Duration>>,
}

/// What the coordinator hands every worker at init (index and count added per worker).
pub struct InitTemplate {
    pub run_id: String,
    pub model: (String, Vec<u8>),
    pub model_params: String,
    pub target: (String, Vec<u8>),
    pub target_params: String,
    pub seed: u64,
    pub services: Vec<wire::Service>,
    pub connections: u32,
    pub inflight: u16,
    pub http_window: u32,
    pub mqtt_user: Option<String>,
    pub mqtt_password: Option<String>,
    pub mqtt_version: u8,
}

impl InitTemplate {
    /// The template simulated workers take: they load no plugin and reach
    /// no service, so the model and target are named "simulated" and carry
    /// no component.
    pub fn simulated(run_id: impl Into<String>) -> InitTemplate {
        InitTemplate {
            run_id: run_id.into(),
            model: ("simulated".into(), Vec::new()),
            model_params: "{}".into(),
            target: ("simulated".into(), Vec::new()),
            target_params: "{}".into(),
            seed: 1,
            services: Vec::new(),
            connections: 1,
            inflight: 1,
            http_window: 1,
            mqtt_user: None,
            mqtt_password: None,
            mqtt_version: 4,
        }
    }
}

/// One call of a worker's control API, with its token.
fn call<T: serde::de::DeserializeOwned>(
    agent: &ureq::Agent,
    token: &str,
    method: &str,
    url: &str,
    body: Option<String>,
    timeout: Duration,
) -> Result<(u16, Option<T>), String> {
    let req = agent.request(method, url).timeout(timeout).set("authorization", &format!("Bearer {token}"));
    let resp = match body {
        Some(b) => req.set("content-type", "application/json").send_string(&b),
        None => req.call(),
    };
    match resp {
        Ok(r) => {
            let code = r.status();
            let text = r.into_string().map_err(|e| e.to_string())?;
            if code == 200 {
                serde_json::from_str(&text).map(|v| (code, Some(v))).map_err(|e| format!("bad answer: {e}"))
            } else {
                Ok((code, None))
            }
        }
        Err(ureq::Error::Status(code, r)) => {
            let text = r.into_string().unwrap_or_default();
            let why = serde_json::from_str::<wire::Failure>(&text).map(|f| f.error).unwrap_or(text);
            Err(format!("HTTP {code}: {why}"))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The workers of `urls`, each with the token its URL carries or else
/// `from_env`; refused, naming each worker without one.
fn with_tokens(urls: &[String], from_env: Option<String>) -> anyhow::Result<Vec<Worker>> {
    let n = urls.len();
    let mut list = Vec::with_capacity(n);
    let mut problems = Vec::new();
    for (i, u) in urls.iter().enumerate() {
        let (url, token) = super::token::split(u);
        let name = format!("worker {} of {n} ({url})", i + 1);
        match token.or_else(|| from_env.clone()).map(|t| super::token::check(&t)) {
            Some(Ok(token)) => list.push(Worker { index: i as u32, url, token }),
            Some(Err(e)) => problems.push(format!("{name}: {e}")),
            None => problems.push(format!("{name} has no token")),
        }
    }
    if !problems.is_empty() {
        return Err(crate::error::UsageError(format!(
            "a worker's control API takes calls with its token only: {}\n\
             hint: give --workers the URLs the workers printed when they started (they end in ?token=…), or set {} to the token they were started with",
            problems.join("; "),
            super::token::ENV
        ))
        .into());
    }
    Ok(list)
}

/// Run `f` for every worker at once; the answers in worker order.
fn each<T: Send>(list: &[Worker], f: impl Fn(&Worker) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = list.iter().map(|w| s.spawn(|| f(w))).collect();
        handles.into_iter().map(|h| h.join().expect("worker call thread")).collect()
    })
}

/// Every worker runs what this coordinator runs (version, binary, plugin
/// contract), or the run is refused before step 1, each difference named.
fn same_build(agent: &ureq::Agent, list: &[Worker]) -> anyhow::Result<()> {
    let n = list.len();
    let mine = wire::Build::this();
    let answers = each(list, |w| {
        call::<wire::Build>(agent, &w.token, "GET", &format!("{}/v1/build", w.url), None, Duration::from_secs(10))
    });
    let mut differ = Vec::new();
    let mut refused = Vec::new();
    for (w, a) in list.iter().zip(answers) {
        match a {
            Err(e) if e.starts_with("HTTP 401") => refused.push(w.name(n)),
            Ok((_, Some(b))) if b == mine => {}
            Ok((_, Some(b))) => differ.push(format!("{} runs {}", w.name(n), b.words())),
            Ok((code, None)) => {
                differ.push(format!("{} does not say what it runs (HTTP {code}: an older scalebench)", w.name(n)))
            }
            Err(e) => differ.push(format!("{} does not say what it runs ({e}: an older scalebench)", w.name(n))),
        }
    }
    if !refused.is_empty() {
        return Err(crate::error::UsageError(format!(
            "workers that refused this coordinator's token: {}\n\
             hint: give --workers the URLs the workers printed when they started (they end in ?token=…), or set {} to the token they were started with",
            refused.join("; "),
            super::token::ENV
        ))
        .into());
    }
    if differ.is_empty() {
        return Ok(());
    }
    Err(crate::error::UsageError(format!(
        "workers that run another scalebench than this coordinator ({}): {}\n\
         hint: start the workers from this binary (scripts/docker-images.sh copies it into the worker image)",
        mine.words(),
        differ.join("; ")
    ))
    .into())
}

impl Workers {
    /// Workers at `urls` (each with its token, or the one in
    /// [`super::token::ENV`]), waiting up to `wait` for each to answer its
    /// health check; refused, each named, if any has no token, takes
    /// another or runs another build.
    pub fn connect(urls: &[String], wait: Duration) -> anyhow::Result<Workers> {
        let agent = ureq::AgentBuilder::new().timeout_connect(Duration::from_secs(2)).user_agent("scalebench").build();
        let list = with_tokens(urls, std::env::var(super::token::ENV).ok())?;
        let n = list.len();
        let answers = each(&list, |w| {
            let deadline = Instant::now() + wait;
            loop {
                let r = agent.get(&format!("{}/v1/health", w.url)).timeout(Duration::from_secs(2)).call();
                match r {
                    Ok(_) => return Ok(()),
                    Err(e) if Instant::now() >= deadline => return Err(format!("{}: {e}", w.name(n))),
                    Err(_) => std::thread::sleep(Duration::from_millis(200)),
                }
            }
        });
        let bad: Vec<String> = answers.into_iter().filter_map(|r| r.err()).collect();
        if !bad.is_empty() {
            anyhow::bail!(
                "{} of {n} workers did not answer: {}\nhint: start each with `scalebench worker --listen HOST:PORT` and give their URLs to --workers",
                bad.len(),
                bad.join("; ")
            );
        }
        same_build(&agent, &list)?;
        Ok(Workers {
            seen: Mutex::new(vec![Seen::default(); n]),
            list,
            agent,
            step: Mutex::new(None),
            rounds: Mutex::new(Vec::new()),
        })
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Load the plugins in every worker and check each reaches the target.
    pub fn init(&self, t: &InitTemplate) -> anyhow::Result<()> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let n = self.len();
        let (model, target) = (b64.encode(&t.model.1), b64.encode(&t.target.1));
        let answers = each(&self.list, |w| {
            let init = wire::Init {
                run_id: t.run_id.clone(),
                index: w.index,
                count: n as u32,
                model: wire::PluginBytes { name: t.model.0.clone(), wasm_b64: model.clone() },
                model_params: t.model_params.clone(),
                target: wire::PluginBytes { name: t.target.0.clone(), wasm_b64: target.clone() },
                target_params: t.target_params.clone(),
                seed: t.seed,
                services: t.services.clone(),
                connections: t.connections,
                inflight: t.inflight,
                http_window: t.http_window,
                mqtt_user: t.mqtt_user.clone(),
                mqtt_password: t.mqtt_password.clone(),
                mqtt_version: t.mqtt_version,
                client_id_prefix: format!("scalebench-{}-w{}", t.run_id, w.index + 1),
            };
            let body = serde_json::to_string(&init).expect("init is JSON");
            call::<wire::Ready>(
                &self.agent,
                &w.token,
                "POST",
                &format!("{}/v1/init", w.url),
                Some(body),
                // Init compiles both plugins, about 3.5 s of CPU with the
                // plugin compiler built unoptimised (Cargo.toml says why):
                // two minutes at a 0.03-CPU cap, as `bench workers` runs.
                Duration::from_secs(600),
            )
            .map_err(|e| format!("{}: {e}", w.name(n)))
        });
        let bad: Vec<String> = answers.into_iter().filter_map(|r| r.err()).collect();
        if !bad.is_empty() {
            anyhow::bail!("workers could not start the run: {}", bad.join("; "));
        }
        Ok(())
    }

    /// Every worker learns the step's points and opens its connections.
    pub fn prepare(&self, points: u64) -> anyhow::Result<()> {
        let n = self.len();
        *self.seen.lock().unwrap() = vec![Seen::default(); n];
        self.rounds.lock().unwrap().clear();
        let body = serde_json::to_string(&wire::Prepare { points }).expect("JSON");
        let answers = each(&self.list, |w| {
            call::<wire::Ready>(
                &self.agent,
                &w.token,
                "POST",
                &format!("{}/v1/prepare", w.url),
                Some(body.clone()),
                Duration::from_secs(600),
            )
            .map_err(|e| format!("{}: {e}", w.name(n)))
        });
        let bad: Vec<String> = answers.into_iter().filter_map(|r| r.err()).collect();
        if !bad.is_empty() {
            anyhow::bail!("workers could not prepare the step: {}", bad.join("; "));
        }
        Ok(())
    }

    /// The barrier: each worker's clock offset, from the quickest of a few
    /// round trips (offset = its clock − the midpoint of ours). A worker off
    /// by more than the bound is refused (it offers nothing this step), named.
    pub fn barrier(&self) -> Vec<String> {
        let n = self.len();
        let offsets = each(&self.list, |w| {
            let mut best: Option<(i64, i64)> = None;
            for _ in 0..5 {
                let t0 = crate::clock::now_ms();
                let r = call::<wire::Clock>(
                    &self.agent,
                    &w.token,
                    "GET",
                    &format!("{}/v1/clock", w.url),
                    None,
                    Duration::from_secs(2),
                );
                let t1 = crate::clock::now_ms();
                if let Ok((_, Some(c))) = r {
                    let rtt = t1 - t0;
                    let offset = c.now_ms - (t0 + t1) / 2;
                    if best.is_none_or(|(_, r)| rtt < r) {
                        best = Some((offset, rtt));
                    }
                }
            }
            best
        });
        let mut refused = Vec::new();
        let mut seen = self.seen.lock().unwrap();
        for (w, o) in self.list.iter().zip(offsets) {
            let s = &mut seen[w.index as usize];
            match o {
                Some((offset, rtt)) => {
                    s.offset_ms = Some(offset);
                    s.rtt_ms = Some(rtt);
                    // The offset is known to within half the round trip.
                    if offset.abs() - rtt / 2 > wire::MAX_CLOCK_OFFSET_MS {
                        let why = format!(
                            "{}: refused at the barrier: its clock is {:.2} s {} the coordinator's (measured over a {rtt} ms round trip; the bound is {} ms), so its seconds cannot be added to the others'; synchronise the clocks (NTP) and run again",
                            w.name(n),
                            offset.abs() as f64 / 1e3,
                            if offset > 0 { "ahead of" } else { "behind" },
                            wire::MAX_CLOCK_OFFSET_MS
                        );
                        s.refused = Some(why.clone());
                        refused.push(why);
                    }
                }
                None => {
                    let why = format!("{}: refused at the barrier: its clock could not be read", w.name(n));
                    s.refused = Some(why.clone());
                    refused.push(why);
                }
            }
        }
        refused
    }

    /// Start every worker not refused at the barrier; a worker that does
    /// not take the start is lost.
    pub fn start(&self, start: &wire::Start) {
        let n = self.len();
        *self.step.lock().unwrap() = Some(start.clone());
        let body = serde_json::to_string(start).expect("JSON");
        let refused: Vec<bool> = self.seen.lock().unwrap().iter().map(|s| s.refused.is_some()).collect();
        let answers = each(&self.list, |w| {
            if refused[w.index as usize] {
                return Ok(());
            }
            call::<wire::Ready>(
                &self.agent,
                &w.token,
                "POST",
                &format!("{}/v1/start", w.url),
                Some(body.clone()),
                Duration::from_secs(10),
            )
            .map(|_| ())
        });
        let mut seen = self.seen.lock().unwrap();
        for (w, a) in self.list.iter().zip(answers) {
            let s = &mut seen[w.index as usize];
            s.scheduled = crate::loadgen::scheduled_in_share(
                start.points as u32,
                Duration::from_millis(start.interval_ms),
                Duration::from_millis(start.duration_ms),
                Share::Shard { index: w.index, count: n as u32 },
            );
            s.last_ok = Some(Instant::now());
            s.last_ok_ms = Some(crate::clock::now_ms());
            if let Err(e) = a {
                s.lose(format!("{}: lost at the start of the load: {e}", w.name(n)));
                self.stop_one(w);
            }
        }
    }

    /// The heartbeat, once a second until every worker's load has ended (or
    /// it is lost): live counters into the step's, a worker silent for
    /// [`wire::HEARTBEAT_LOST`] lost. Returns when the load is over.
    pub fn watch(&self, live: &ProducerLive, acks: &Live, stop: &AtomicBool, until: Instant) {
        let n = self.len();
        let mut counted: Vec<(u64, u64, u64)> = vec![(0, 0, 0); n];
        loop {
            if stop.load(Ordering::Relaxed) {
                self.stop_all();
            }
            let round = Instant::now();
            let since: Vec<u64> = self.seen.lock().unwrap().iter().map(|s| s.seq).collect();
            let answers = each(&self.list, |w| {
                call::<wire::Status>(
                    &self.agent,
                    &w.token,
                    "GET",
                    &format!("{}/v1/status?since={}", w.url, since[w.index as usize]),
                    None,
                    Duration::from_secs(1),
                )
            });
            let mut running = 0;
            let mut behind = 0;
            {
                let mut seen = self.seen.lock().unwrap();
                for (w, a) in self.list.iter().zip(answers) {
                    let i = w.index as usize;
                    let s = &mut seen[i];
                    if s.lost.is_some() || s.refused.is_some() {
                        continue;
                    }
                    match a {
                        Ok((_, Some(st))) => {
                            s.last_ok = Some(Instant::now());
                            s.last_ok_ms = Some(crate::clock::now_ms());
                            s.seconds.apply(&st.seconds);
                            s.seq = st.seq;
                            let (o, a, r) = counted[i];
                            live.readings_offered.fetch_add(st.offered.saturating_sub(o), Ordering::Relaxed);
                            acks.readings_acked.fetch_add(st.acked.saturating_sub(a), Ordering::Relaxed);
                            acks.readings_refused.fetch_add(st.refused.saturating_sub(r), Ordering::Relaxed);
                            counted[i] = (st.offered.max(o), st.acked.max(a), st.refused.max(r));
                            behind = behind.max(st.behind_ms);
                            let failed = (st.state == State::Failed).then(|| {
                                format!(
                                    "{}: failed mid-step: {}",
                                    w.name(n),
                                    st.error.clone().unwrap_or_else(|| "no reason given".into())
                                )
                            });
                            let off_leash = st.off_leash.then(|| {
                                format!(
                                    "{}: lost mid-step: it stopped its load after {} s without a heartbeat call (frozen, or cut off from the coordinator); the other workers' figures are kept",
                                    w.name(n),
                                    wire::HEARTBEAT_LOST.as_secs()
                                )
                            });
                            if st.state == State::Running && off_leash.is_none() {
                                running += 1;
                            }
                            s.last = Some(st);
                            if let Some(why) = failed.or(off_leash) {
                                s.lose(why);
                            }
                        }
                        Ok((_, None)) | Err(_) => {
                            let silent = s.last_ok.map_or(Duration::MAX, |t| t.elapsed());
                            if silent >= wire::HEARTBEAT_LOST {
                                let why = a.err().unwrap_or_else(|| "no answer".into());
                                s.lose(format!(
                                    "{}: lost mid-step: no heartbeat for {} s (last: {why}); the other workers' figures are kept",
                                    w.name(n),
                                    silent.as_secs()
                                ));
                                self.stop_one(w);
                            } else {
                                running += 1;
                            }
                        }
                    }
                }
            }
            live.behind_ms.store(behind, Ordering::Relaxed);
            self.rounds.lock().unwrap().push(round.elapsed());
            if running == 0 || Instant::now() >= until {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// Tell a lost worker to stop its load, without waiting: it may never
    /// answer (its producer also stops itself, [`wire::HEARTBEAT_LOST`]
    /// after the last call it heard).
    fn stop_one(&self, w: &Worker) {
        let (agent, token, url) = (self.agent.clone(), w.token.clone(), format!("{}/v1/stop", w.url));
        std::thread::spawn(move || {
            let _ = call::<String>(&agent, &token, "POST", &url, None, Duration::from_secs(2));
        });
    }

    /// Tell every worker to stop its load (Ctrl-C, live-safety).
    pub fn stop_all(&self) {
        each(&self.list, |w| {
            let _ = call::<String>(
                &self.agent,
                &w.token,
                "POST",
                &format!("{}/v1/stop", w.url),
                None,
                Duration::from_secs(2),
            );
        });
    }

    /// Each worker's figures once it drained, waiting up to `wait`; a
    /// worker with none by then is lost. A worker lost mid-step is asked
    /// too, in case it came back (frozen, then thawed): its result counts
    /// what it offered late; one that does not answer three times in a row
    /// has gone, and its heartbeats' figures stand for it. The counts of
    /// every worker but those refused at the barrier.
    pub fn collect(&self, wait: Duration) -> Vec<AckCounts> {
        let n = self.len();
        let (refused, lost): (Vec<bool>, Vec<bool>) =
            self.seen.lock().unwrap().iter().map(|s| (s.refused.is_some(), s.lost.is_some())).unzip();
        let finals = each(&self.list, |w| {
            let i = w.index as usize;
            if refused[i] {
                return None;
            }
            let deadline = Instant::now() + wait;
            let mut unanswered = 0;
            loop {
                let timeout = if lost[i] { Duration::from_secs(2) } else { Duration::from_secs(30) };
                let r =
                    call::<wire::Final>(&self.agent, &w.token, "GET", &format!("{}/v1/result", w.url), None, timeout);
                unanswered = if r.is_err() { unanswered + 1 } else { 0 };
                match r {
                    Ok((_, Some(f))) => return Some(Ok(f)),
                    Err(e) if Instant::now() >= deadline || (lost[i] && unanswered >= 3) => return Some(Err(e)),
                    Ok((_, None)) | Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(250))
                    }
                    Ok(_) => return Some(Err(format!("no result {} s after the load", wait.as_secs()))),
                    Err(e) => return Some(Err(e)),
                }
            }
        });
        let mut seen = self.seen.lock().unwrap();
        let mut out = Vec::new();
        for (w, f) in self.list.iter().zip(finals) {
            let s = &mut seen[w.index as usize];
            match f {
                Some(Ok(f)) => {
                    out.push(f.counts.clone());
                    s.final_ = Some(f);
                }
                Some(Err(_)) if s.lost.is_some() => out.push(s.heard_counts()),
                Some(Err(e)) => {
                    s.lose(format!("{}: lost after the load: {e}", w.name(n)));
                    out.push(s.heard_counts());
                }
                None => {}
            }
        }
        out
    }

    /// Add the workers' producer reports to the coordinator's (which offered
    /// no readings, only canaries); returns the workers' CPU seconds.
    pub fn merge_reports(&self, r: &mut ProducerReport) -> f64 {
        let seen = self.seen.lock().unwrap();
        let mut cpu = 0.0;
        for s in seen.iter() {
            match &s.final_ {
                Some(f) => {
                    let early = r.stopped_early;
                    r.add_side_by_side(&f.report);
                    if s.lost.is_some() {
                        // It stopped because it was lost: that is the
                        // step's reason, not a transport that closed.
                        r.stopped_early = early;
                    }
                    cpu += f.cpu_s;
                }
                None => {
                    // Lost or refused: its share was scheduled; what it
                    // offered is what its heartbeats said, second by second.
                    r.readings_scheduled += s.scheduled;
                    r.readings_offered += s.seconds.offered();
                    for (into, from) in [
                        (&mut r.offered_by_second, &s.seconds.offered_by_second),
                        (&mut r.offered_by_wall_second, &s.seconds.offered_by_wall_second),
                    ] {
                        for (sec, k) in from {
                            *into.entry(*sec).or_default() += k;
                        }
                    }
                }
            }
        }
        cpu
    }

    /// Reasons the step cannot be judged (workers lost or refused), and
    /// workers that could not offer their share.
    pub fn verdict_notes(&self) -> (Vec<String>, Vec<String>) {
        let seen = self.seen.lock().unwrap();
        let n = self.len();
        let mut unjudged = Vec::new();
        let mut bound = Vec::new();
        for (w, s) in self.list.iter().zip(seen.iter()) {
            if let Some(r) = s.refused.as_ref().or(s.lost.as_ref()) {
                let mut why = r.clone();
                if let Some(late) = s.offered_late() {
                    why.push_str(&format!(
                        "; it came back after the load and reported {late} readings offered after it was counted lost, counted with its figures"
                    ));
                }
                unjudged.push(why);
            } else if let Some(f) = &s.final_ {
                let (sch, off) = (f.report.readings_scheduled, f.report.readings_offered);
                let ratio = if sch == 0 { 1.0 } else { off as f64 / sch as f64 };
                let held = crate::verdict::held_back_too_long(f.counts.held_back_s, self.soak_s());
                if ratio < crate::verdict::MIN_OFFERED_RATIO && !held && !f.report.stopped_early {
                    bound.push(format!(
                        "generator-bound: {} offered {:.1}% of its share ({off} of {sch} readings) without being held back by the SUT: a limit of that worker, not the SUT's",
                        w.name(n),
                        ratio * 100.0
                    ));
                }
            }
        }
        (unjudged, bound)
    }

    /// How long each heartbeat round of the current step took.
    pub fn heartbeat_rounds(&self) -> Vec<Duration> {
        self.rounds.lock().unwrap().clone()
    }

    fn soak_s(&self) -> f64 {
        self.step.lock().unwrap().as_ref().map_or(0.0, |s| (s.duration_ms - s.warmup_ms) as f64 / 1e3)
    }

    /// Each worker's figures, for the result.
    pub fn figures(&self) -> Vec<WorkerFigures> {
        let seen = self.seen.lock().unwrap();
        self.list
            .iter()
            .zip(seen.iter())
            .map(|(w, s)| WorkerFigures {
                worker: w.index + 1,
                url: w.url.clone(),
                scheduled: s.final_.as_ref().map_or(s.scheduled, |f| f.report.readings_scheduled),
                offered: s.final_.as_ref().map_or_else(|| s.seconds.offered(), |f| f.report.readings_offered),
                acked: s.final_.as_ref().map_or_else(|| s.seconds.acked(), |f| f.counts.readings_acked),
                missing_from_ms: s.missing_from_ms.filter(|_| !s.came_back()),
                offered_late: s.offered_late(),
                cpu_s: s.final_.as_ref().map(|f| f.cpu_s),
                behind_schedule_max_s: s.final_.as_ref().map(|f| f.report.behind_max_s),
                clock_offset_ms: s.offset_ms,
                clock_rtt_ms: s.rtt_ms,
                problem: s.refused.clone().or(s.lost.clone()),
            })
            .collect()
    }
}

/// The workers' ack latency for the coordinator's endpoint: each one's
/// final record once it drained, its last heartbeat's until then.
impl crate::live_metrics::LatencySource for Workers {
    fn latency(&self) -> crate::live_metrics::LatencyBuckets {
        let mut all = crate::live_metrics::LatencyBuckets::default();
        for s in self.seen.lock().unwrap().iter() {
            match (&s.final_, &s.last) {
                (Some(f), _) => all.add(&crate::live_metrics::LatencyBuckets::of(&f.counts)),
                (None, Some(st)) => {
                    if let Some(l) = &st.latency {
                        all.add(l)
                    }
                }
                (None, None) => {}
            }
        }
        all
    }
}

/// The step's transport in a distributed run: the coordinator's own
/// connections (topology, canaries), whose final counts also hold every
/// worker's once they drained.
pub struct Gathered {
    pub inner: Box<dyn Transport>,
    pub workers: Arc<Workers>,
}

impl Transport for Gathered {
    fn pool(&self) -> &crate::transport::pool::Pool {
        self.inner.pool()
    }
    fn counts(&self) -> AckCounts {
        self.inner.counts()
    }
    fn live(&self) -> &Arc<Live> {
        self.inner.live()
    }
    fn canary_acks(&self) -> Option<BTreeMap<u64, i64>> {
        self.inner.canary_acks()
    }
    fn finish(self: Box<Self>, drain: Duration) -> crate::future::BoxFuture<'static, AckCounts> {
        let Gathered { inner, workers } = *self;
        Box::pin(async move {
            let mine = inner.finish(drain);
            // A worker drains for as long as we do, then reports.
            let theirs = tokio::task::spawn_blocking(move || workers.collect(drain + Duration::from_secs(15)));
            let mut counts = mine.await;
            for c in theirs.await.unwrap_or_default() {
                counts.merge(&c);
            }
            counts
        })
    }
}

/// The workers as the step's load source: they offer every reading, this
/// process only the canaries.
impl crate::load_source::LoadSource for Workers {
    fn own_share(&self) -> Share {
        Share::None
    }
    fn notice(&self) -> Duration {
        // Workers get a second to hear the start before it is due.
        Duration::from_secs(1)
    }
    fn prepare(&self, points: u64) -> anyhow::Result<()> {
        Workers::prepare(self, points)
    }
    fn gather(self: Arc<Self>, own: Box<dyn Transport>) -> Box<dyn Transport> {
        Box::new(Gathered { inner: own, workers: self })
    }
    fn start(&self, load: &crate::load_source::StepLoad) -> Vec<String> {
        let refused = self.barrier();
        Workers::start(
            self,
            &wire::Start {
                points: load.points,
                start_ms: load.start_ms,
                interval_ms: load.interval.as_millis() as u64,
                warmup_ms: load.warmup.as_millis() as u64,
                duration_ms: load.duration.as_millis() as u64,
                sample_period_ms: load.sample_period_ms,
                drain_ms: 30_000,
            },
        );
        refused
    }
    fn watch(&self, live: &ProducerLive, acks: &Live, stop: &AtomicBool, until: Instant) {
        Workers::watch(self, live, acks, stop, until)
    }
    fn more_latency(self: Arc<Self>) -> Option<Arc<dyn crate::live_metrics::LatencySource>> {
        Some(self)
    }
    fn merge_reports(&self, report: &mut ProducerReport) -> f64 {
        Workers::merge_reports(self, report)
    }
    fn notes(&self) -> crate::load_source::SourceNotes {
        let (unjudged, bound) = self.verdict_notes();
        crate::load_source::SourceNotes { unjudged, bound, figures: self.figures() }
    }
}
