//! Simulated workers, for `bench coordinator`: the real control API (the
//! same routes, token and JSON as `scalebench worker`, [`super::wire`]),
//! answering with the figures a worker of a big step sends, without
//! plugins, connections or load. A step's simulated seconds may run faster
//! than the wall clock (`speed`), so a 15-minute step's per-second maps and
//! histograms reach the coordinator in a short run.
//!
//! Each heartbeat carries the per-second counts that changed since the last
//! one (as a real worker's do) and ack latency in the endpoint's buckets;
//! the result carries the producer report and the acknowledgement counts
//! with a histogram per simulated second, serialized as a real worker's.
//! Three faults can be planted: a worker that stops answering (lost), one
//! that offers 90% of its share (generator-bound) and one whose clock is
//! 2 s ahead (refused at the barrier).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{RawQuery, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::wire::{self, State};
use crate::latency::{Recorder, Timing};
use crate::live_metrics::LatencyBuckets;
use crate::loadgen::ProducerReport;
use crate::transport::AckCounts;

/// Faults planted in a simulation, by worker index (0-based).
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// Stops answering this long after its load started.
    pub lost: Option<(u32, Duration)>,
    /// Offers 90% of its share.
    pub slow: Option<u32>,
    /// Its clock runs 2 s ahead.
    pub skewed: Option<u32>,
}

/// How the simulated workers behave.
#[derive(Debug, Clone)]
pub struct Simulation {
    pub count: u32,
    /// What every call but health must carry.
    pub token: String,
    /// Simulated seconds per wall-clock second.
    pub speed: f64,
    pub faults: Faults,
}

struct Sim {
    index: u32,
    speed: f64,
    lost_after: Option<Duration>,
    share: f64,
    skew_ms: i64,
    token: String,
    step: Mutex<Step>,
    /// Bytes of every answer, shared by all the simulated workers.
    sent: Arc<AtomicU64>,
}

#[derive(Default)]
struct Step {
    start: Option<wire::Start>,
    count: u32,
    began: Option<Instant>,
    seq: u64,
    heard: wire::Seconds,
    stopped_at_s: Option<i64>,
}

impl Sim {
    /// Readings per simulated second of this worker's share.
    fn rate(&self, st: &Step) -> u64 {
        let Some(s) = &st.start else { return 0 };
        let per_s = s.points as f64 * 1000.0 / s.interval_ms.max(1) as f64 / st.count.max(1) as f64;
        (per_s * self.share).round() as u64
    }

    /// Simulated whole seconds of load so far, and the load's length.
    fn progress(&self, st: &Step) -> (i64, i64) {
        let (Some(s), Some(began)) = (&st.start, st.began) else { return (0, 0) };
        let total = (s.duration_ms / 1000) as i64;
        let done = (began.elapsed().as_secs_f64() * self.speed) as i64;
        (done.min(total).min(st.stopped_at_s.unwrap_or(i64::MAX)), total)
    }

    fn seconds(&self, st: &Step) -> wire::Seconds {
        let (done, _) = self.progress(st);
        let first = st.start.as_ref().map_or(0, |s| s.start_ms / 1000);
        let rate = self.rate(st);
        let map = || (first..first + done).map(|s| (s, rate)).collect::<std::collections::BTreeMap<i64, u64>>();
        wire::Seconds {
            offered_by_second: map(),
            offered_by_wall_second: map(),
            acked_by_second: map(),
            acked_by_arrival_second: map(),
            ..Default::default()
        }
    }

    /// Ack latency of `seconds` simulated seconds from `first`: a spread of
    /// 1–40 ms every second, a histogram per second, as a real step's.
    fn recorder(first: i64, seconds: i64, per_s: u64) -> Recorder {
        let mut r = Recorder::new(i64::MIN);
        for s in first..first + seconds {
            for k in 0..20u64 {
                let intended_ns = s * 1_000_000_000 + (k as i64) * 40_000_000;
                let latency_ns = 1_000_000 + ((k * 7919 + s as u64) % 40) as i64 * 1_000_000;
                let t = Timing { intended_ns, sent_ns: intended_ns + 50_000 };
                r.answered(t, (per_s / 20).max(1), intended_ns + latency_ns, true);
            }
        }
        r.close((first + seconds) * 1_000_000_000, false, None);
        r
    }

    fn final_(&self, st: &Step) -> wire::Final {
        let (done, total) = self.progress(st);
        let s = st.start.as_ref().expect("a started step");
        let first = s.start_ms / 1000;
        let seconds = self.seconds(st);
        let full = (s.points as f64 * 1000.0 / s.interval_ms.max(1) as f64 / st.count.max(1) as f64).round() as u64;
        let offered = seconds.offered();
        let report = ProducerReport {
            readings_scheduled: full * total as u64,
            readings_offered: offered,
            offered_by_wall_second: seconds.offered_by_wall_second.clone(),
            offered_by_second: seconds.offered_by_second.clone(),
            slots: (done * 100) as u64,
            start_ms: s.start_ms,
            end_ms: s.start_ms + s.duration_ms as i64,
            stopped_early: st.stopped_at_s.is_some(),
            ..Default::default()
        };
        let counts = AckCounts {
            published: offered / 100,
            acked_msgs: offered / 100,
            readings_published: offered,
            readings_acked: offered,
            input_drained: true,
            settled_msgs: offered / 100,
            acked_by_second: seconds.acked_by_second,
            acked_by_arrival_second: seconds.acked_by_arrival_second,
            latency: Sim::recorder(first, done, self.rate(st)),
            ..Default::default()
        };
        wire::Final { index: self.index, report, counts, cpu_s: 0.0, rss_bytes: 0 }
    }

    fn status(&self, st: &mut Step, since: Option<u64>) -> wire::Status {
        let (done, total) = self.progress(st);
        let now = self.seconds(st);
        let seconds = if since == Some(st.seq) && st.seq > 0 { now.changed_since(&st.heard) } else { now.clone() };
        st.seq += 1;
        st.heard = now;
        let running = st.began.is_some() && done < total && st.stopped_at_s.is_none();
        let latency = LatencyBuckets::of(&AckCounts { latency: Sim::recorder(0, 1, 100), ..Default::default() });
        wire::Status {
            index: self.index,
            state: if running {
                State::Running
            } else if st.began.is_some() {
                State::Done
            } else {
                State::Ready
            },
            offered: st.heard.offered(),
            acked: st.heard.acked(),
            behind_ms: 0,
            errors: 0,
            now_ms: crate::clock::now_ms() + self.skew_ms,
            error: None,
            refused: 0,
            latency: Some(latency),
            seq: st.seq,
            seconds,
            off_leash: false,
        }
    }

    /// Lost: from `lost_after` into the load, no call is answered.
    async fn maybe_lost(&self) {
        let began = self.step.lock().unwrap().began;
        if let (Some(after), Some(began)) = (self.lost_after, began) {
            if began.elapsed() >= after {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
        }
    }

    fn answer<T: serde::Serialize>(&self, v: &T) -> Response {
        let body = serde_json::to_string(v).unwrap_or_default();
        self.sent.fetch_add(body.len() as u64, Ordering::Relaxed);
        (StatusCode::OK, [("content-type", "application/json")], body).into_response()
    }

    fn ready(&self, detail: &str) -> Response {
        self.answer(&wire::Ready { index: self.index, detail: detail.into() })
    }
}

async fn call(sim: Arc<Sim>, path: &'static str, query: Option<String>, body: Bytes) -> Response {
    sim.maybe_lost().await;
    match path {
        "clock" => sim.answer(&wire::Clock { now_ms: crate::clock::now_ms() + sim.skew_ms }),
        "build" => sim.answer(&wire::Build::this()),
        "init" => match serde_json::from_slice::<wire::Init>(&body) {
            Ok(init) => {
                sim.step.lock().unwrap().count = init.count;
                sim.ready("simulated")
            }
            Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
        },
        "prepare" => sim.ready("simulated"),
        "start" => match serde_json::from_slice::<wire::Start>(&body) {
            Ok(start) => {
                let mut st = sim.step.lock().unwrap();
                let count = st.count;
                *st = Step { start: Some(start), count, began: Some(Instant::now()), ..Default::default() };
                drop(st);
                sim.ready("simulated load")
            }
            Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
        },
        "status" => {
            let since = query.as_deref().and_then(|q| q.strip_prefix("since=")).and_then(|v| v.parse().ok());
            let st = sim.status(&mut sim.step.lock().unwrap(), since);
            sim.answer(&st)
        }
        "result" => {
            let st = sim.step.lock().unwrap();
            let (done, total) = sim.progress(&st);
            if st.start.is_none() || (done < total && st.stopped_at_s.is_none()) {
                return (StatusCode::ACCEPTED, "not drained yet").into_response();
            }
            let f = sim.final_(&st);
            drop(st);
            sim.answer(&f)
        }
        "stop" => {
            let mut st = sim.step.lock().unwrap();
            let (done, _) = sim.progress(&st);
            st.stopped_at_s.get_or_insert(done);
            (StatusCode::OK, "stopping").into_response()
        }
        _ => (StatusCode::NOT_FOUND, "no such call").into_response(),
    }
}

/// Start the simulated workers on loopback ports of their own, on the
/// current runtime; their addresses in index order, and the bytes of every
/// answer they sent so far.
pub async fn serve(sim: &Simulation) -> anyhow::Result<(Vec<SocketAddr>, Arc<AtomicU64>)> {
    let sent = Arc::new(AtomicU64::new(0));
    let mut addrs = Vec::new();
    for index in 0..sim.count {
        let f = sim.faults;
        let w = Arc::new(Sim {
            index,
            speed: sim.speed,
            lost_after: f.lost.filter(|(i, _)| *i == index).map(|(_, d)| d),
            share: if f.slow == Some(index) { 0.9 } else { 1.0 },
            skew_ms: if f.skewed == Some(index) { 2_000 } else { 0 },
            token: sim.token.clone(),
            step: Mutex::new(Step::default()),
            sent: sent.clone(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        addrs.push(listener.local_addr()?);
        let route = |path: &'static str| {
            move |AxState(w): AxState<Arc<Sim>>, RawQuery(q): RawQuery, b: Bytes| call(w, path, q, b)
        };
        let token = w.token.clone();
        let app = axum::Router::new()
            .route("/v1/clock", get(route("clock")))
            .route("/v1/build", get(route("build")))
            .route("/v1/init", post(route("init")))
            .route("/v1/prepare", post(route("prepare")))
            .route("/v1/start", post(route("start")))
            .route("/v1/status", get(route("status")))
            .route("/v1/result", get(route("result")))
            .route("/v1/stop", post(route("stop")))
            .route_layer(axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
                let token = token.clone();
                async move {
                    let header = req.headers().get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
                    if super::token::authorizes(header, &token) {
                        next.run(req).await
                    } else {
                        (StatusCode::UNAUTHORIZED, "no token").into_response()
                    }
                }
            }))
            .route("/v1/health", get(|| async { "ok" }))
            .with_state(w);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
    }
    Ok((addrs, sent))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::distributed::coordinator::{InitTemplate, Workers};
    use crate::loadgen::ProducerLive;
    use crate::transport::Live;

    /// The real coordinator against five simulated workers, one lost after
    /// 1.5 s of a 2 s load, one offering 90% of its share and one clock
    /// 2 s ahead: exactly those three are named, each for what it did, and
    /// the step's offered readings are its workers' sum, the lost worker's
    /// up to its last heartbeat included.
    #[test]
    fn the_coordinator_names_a_lost_a_slow_and_a_skewed_worker_and_adds_up_the_rest() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let token = crate::distributed::token::generate().unwrap();
        let faults = Faults { lost: Some((0, Duration::from_millis(1500))), slow: Some(1), skewed: Some(2) };
        let sim = Simulation { count: 5, token: token.clone(), speed: 10.0, faults };
        let (addrs, sent) = rt.block_on(serve(&sim)).unwrap();
        let urls: Vec<String> = addrs.iter().map(|a| format!("http://{a}/?token={token}")).collect();
        let w = Workers::connect(&urls, Duration::from_secs(5)).unwrap();
        w.init(&InitTemplate::simulated("t")).unwrap();
        w.prepare(1000).unwrap();
        let refused = w.barrier();
        assert!(refused.len() == 1 && refused[0].contains("worker 3 of 5"), "{refused:?}");
        let start_ms = crate::loadgen::start_ms_after(crate::clock::now_ms() + 500);
        w.start(&wire::Start {
            points: 1000,
            start_ms,
            interval_ms: 1000,
            warmup_ms: 0,
            duration_ms: 20_000,
            sample_period_ms: 1000,
            drain_ms: 1000,
        });
        let until = Instant::now() + Duration::from_secs(20);
        w.watch(&ProducerLive::default(), &Live::default(), &AtomicBool::new(false), until);
        let counts = w.collect(Duration::from_secs(5));
        let (unjudged, bound) = w.verdict_notes();
        assert_eq!(unjudged.len(), 2, "{unjudged:?}");
        assert!(unjudged.iter().any(|r| r.contains("worker 1 of 5") && r.contains("lost mid-step")), "{unjudged:?}");
        assert!(unjudged.iter().any(|r| r.contains("worker 3 of 5") && r.contains("refused")), "{unjudged:?}");
        assert!(bound.len() == 1 && bound[0].contains("worker 2 of 5") && bound[0].contains("90.0%"), "{bound:?}");
        let figures = w.figures();
        let lost = &figures[0];
        assert!(lost.missing_from_ms.is_some() && lost.offered > 0 && lost.offered < 200 * 20, "{lost:?}");
        let mut report = ProducerReport::default();
        w.merge_reports(&mut report);
        let sum: u64 = figures.iter().map(|f| f.offered).sum();
        assert_eq!(report.readings_offered, sum, "{figures:?}");
        assert_eq!(report.offered_by_second.values().sum::<u64>(), sum);
        let acked: u64 = counts.iter().map(|c| c.readings_acked).sum();
        assert_eq!(acked, figures.iter().map(|f| f.acked).sum::<u64>());
        assert!(sent.load(Ordering::Relaxed) > 0);
    }
}
