//! Transports: how encoded messages reach the system under test, and how
//! their acknowledgements are counted. MQTT first; NATS JetStream and HTTP
//! ingest fit beside it with the same shape: a set of connections fed by
//! bounded channels of [`Batch`]es, acknowledgements counted per second of
//! payload ts, and memory bounded by channel capacity + in-flight window.

pub mod http;
pub mod mqtt;
#[cfg(feature = "nats")]
pub mod nats;
pub mod nats_access;
pub mod pool;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::latency::{Recorder, Timing};
use crate::per_second_latency::{PerSecondLatency, SETTLED_AFTER_S};

/// Whether this build carries the transport `plan` asks for (`make run`'s
/// lean build leaves NATS out): checked before a stack starts, so a run
/// that could not go on starts nothing.
pub fn check_built_in(plan: &plugin_runtime::adapter_types::TransportPlan) -> anyhow::Result<()> {
    if matches!(plan, plugin_runtime::adapter_types::TransportPlan::NatsJetstream(_)) && !cfg!(feature = "nats") {
        return Err(crate::error::left_out("Publishing to NATS JetStream"));
    }
    Ok(())
}

/// What a message carries, for accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Carries {
    /// `n` readings whose payload ts falls in second `ts_s` (Unix seconds).
    Readings { n: u32, ts_s: i64 },
    /// Lag canary number `seq`.
    Canary { seq: u64 },
    /// Topology (equip / point tags).
    Topology,
}

#[derive(Debug, Clone)]
pub struct Message {
    pub address: Arc<str>,
    pub payload: Bytes,
    pub carries: Carries,
    /// The instant the schedule gave this message's (first) reading, ns
    /// since the epoch on the monotonic clock: acknowledgement latency is
    /// measured from here as well as from the actual send ([`crate::latency`]).
    pub intended_ns: i64,
}

impl Message {
    /// The message's timing, its bytes handed to the socket now.
    #[inline]
    pub fn sent_now(&self) -> Timing {
        Timing { intended_ns: self.intended_ns, sent_ns: crate::clock::now_ns() }
    }
    /// Readings this message carries.
    pub fn readings(&self) -> u64 {
        match self.carries {
            Carries::Readings { n, .. } => n as u64,
            _ => 0,
        }
    }
}

/// Live counters the progress line and samples read without stopping
/// anything, shared by a transport's connections (any kind).
#[derive(Debug, Default)]
pub struct Live {
    pub published: AtomicU64,
    pub readings_acked: AtomicU64,
    /// Readings in messages the SUT answered and refused.
    pub readings_refused: AtomicU64,
    pub errors: AtomicU64,
    pub connected: AtomicU64,
    /// The soak's start (ms since the epoch): readings due before it are not
    /// in the step's latency histograms. 0 (the default) records everything.
    pub soak_from_ms: AtomicI64,
    /// Turns latency recording off (only the generator benchmark does, to
    /// measure what recording costs).
    pub no_latency: std::sync::atomic::AtomicBool,
    /// The first time the adapter failed as a plugin inside the transport
    /// (HTTP `headers` or `judge`): the step ends on it.
    pub plugin_fault: Mutex<Option<plugin_runtime::PluginError>>,
    /// The connections' closed seconds of ack latency, merged: one
    /// histogram per second for the transport, settled to its p99 once no
    /// answer can arrive in it ([`PerSecondLatency`]). The step's counts
    /// are the connections' and these ([`Live::add_seconds_to`]).
    pub seconds: Mutex<PerSecondLatency>,
    /// Keep every second's histogram, never settle: a distributed worker's
    /// coordinator merges the workers' histograms.
    pub keep_second_histograms: std::sync::atomic::AtomicBool,
}

impl Live {
    /// Take a connection's closed seconds into the shared record and settle
    /// those the clock (`now_ns`) has left behind.
    fn hand_over_seconds(&self, from: &mut PerSecondLatency, now_ns: i64) {
        let closed = from.take_closed();
        let mut shared = self.seconds.lock().unwrap();
        shared.add_packed(closed);
        if !self.keep_second_histograms.load(Ordering::Relaxed) {
            shared.settle_before(now_ns.div_euclid(1_000_000_000) - SETTLED_AFTER_S);
        }
    }

    /// Add the shared seconds to counts gathered from the connections.
    pub fn add_seconds_to(&self, all: &mut AckCounts) {
        all.latency.per_second_us.add(&self.seconds.lock().unwrap());
    }
}

/// Messages for one connection, sent together.
pub type Batch = Vec<Message>;

/// Acknowledgement counts of a transport, merged over its connections (and,
/// in a distributed run, over workers: they travel as JSON).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct AckCounts {
    /// Messages handed to the client library.
    pub published: u64,
    /// Messages acknowledged (readings, canaries and topology).
    pub acked_msgs: u64,
    /// Messages written to a connection that later broke before their ack.
    pub lost_in_flight: u64,
    /// Messages written (QoS 1), for the drain wait.
    pub queued: u64,
    /// The connection has taken every batch from its channel.
    pub input_drained: bool,
    /// Readings acknowledged, by second of payload ts.
    pub acked_by_second: BTreeMap<i64, u64>,
    /// Readings acknowledged, by wall-clock second the ack arrived (Unix s):
    /// what the SUT accepted when, whatever the payloads say.
    pub acked_by_arrival_second: BTreeMap<i64, u64>,
    /// Seconds the transport could not send because the SUT held it back:
    /// the in-flight window was full, or a write to the socket blocked
    /// (merged over connections: the longest any one was held back).
    pub held_back_s: f64,
    pub readings_published: u64,
    pub readings_acked: u64,
    pub topology_acked: u64,
    /// Topology messages that ended: acknowledged, refused, or failed
    /// without an answer (the topology phase waits for these, not for acks:
    /// a refused tag is answered and will never be acknowledged).
    #[serde(default)]
    pub topology_settled: u64,
    pub canaries_acked: u64,
    /// Readings in messages the SUT answered but refused (HTTP: a non-2xx
    /// status, or a 2xx the adapter judged not an ack, e.g. an error grid).
    pub readings_rejected: u64,
    pub errors: u64,
    /// The first few distinct error messages.
    pub error_samples: Vec<String>,
    /// The first answer the SUT gave that counted as an acknowledgement,
    /// in words (HTTP: "HTTP 200: <first bytes>"), where answers have a body.
    pub first_answer: Option<String>,
    /// Canary seq -> when its ack arrived (ms). Where an ack means stored
    /// (JetStream) this is the canary's arrival in storage; elsewhere it
    /// tells a canary the SUT never acknowledged (unknown, not lost).
    pub canary_acked_at: BTreeMap<u64, i64>,
    /// Readings refused, by wall-clock second the answer arrived.
    pub refused_by_arrival_second: BTreeMap<i64, u64>,
    /// Readings refused, by second of payload ts.
    #[serde(default)]
    pub refused_by_second: BTreeMap<i64, u64>,
    /// Messages that ended: acknowledged, refused, or failed without an answer.
    pub settled_msgs: u64,
    /// Messages the SUT answered and refused (any payload).
    pub refused_msgs: u64,
    /// Acknowledgement latency from intended and actual send, and the
    /// longest silence ([`crate::latency`]).
    pub latency: Recorder,
}

impl AckCounts {
    /// Count one acknowledged message; returns the readings it carried.
    /// `at_ns` is when the ack was read (ns since the epoch, [`crate::clock::now_ns`]).
    pub fn record_ack(&mut self, carries: Carries, t: Timing, at_ns: i64) -> u64 {
        self.acked_msgs += 1;
        self.settled_msgs += 1;
        match carries {
            Carries::Readings { n, ts_s } => {
                *self.acked_by_second.entry(ts_s).or_default() += n as u64;
                *self.acked_by_arrival_second.entry(at_ns.div_euclid(1_000_000_000)).or_default() += n as u64;
                self.readings_acked += n as u64;
                self.latency.answered(t, n as u64, at_ns, true);
                n as u64
            }
            Carries::Canary { seq } => {
                self.canaries_acked += 1;
                self.canary_acked_at.insert(seq, at_ns.div_euclid(1_000_000));
                0
            }
            Carries::Topology => {
                self.topology_acked += 1;
                self.topology_settled += 1;
                0
            }
        }
    }

    /// The SUT answered a message but refused it (HTTP non-2xx, an error grid).
    pub fn record_refused(&mut self, carries: Carries, t: Timing, at_ns: i64, why: String) {
        self.settled_msgs += 1;
        self.refused_msgs += 1;
        if matches!(carries, Carries::Topology) {
            self.topology_settled += 1;
        }
        if let Carries::Readings { n, ts_s } = carries {
            self.readings_rejected += n as u64;
            *self.refused_by_arrival_second.entry(at_ns.div_euclid(1_000_000_000)).or_default() += n as u64;
            *self.refused_by_second.entry(ts_s).or_default() += n as u64;
            self.latency.answered(t, n as u64, at_ns, false);
        }
        self.record_error(why);
    }

    /// A message ended without any answer (a timeout, a broken connection).
    pub fn record_unanswered(&mut self, carries: Carries, t: Timing, why: Option<String>) {
        self.settled_msgs += 1;
        match carries {
            Carries::Readings { .. } => self.latency.unanswered(t),
            Carries::Topology => self.topology_settled += 1,
            Carries::Canary { .. } => {}
        }
        if let Some(why) = why {
            self.record_error(why);
        }
    }

    /// The connection is done at `at_ns`: a silence still open (messages
    /// written and never settled, or batches never taken) ends here.
    pub fn close(&mut self, at_ns: i64) {
        let waiting = self.queued > self.settled_msgs || !self.input_drained;
        self.latency.close(at_ns, waiting, None);
    }

    /// Count an error, keeping the first few distinct messages.
    pub fn record_error(&mut self, msg: String) {
        self.errors += 1;
        if self.error_samples.len() < 5 && !self.error_samples.contains(&msg) {
            self.error_samples.push(msg);
        }
    }

    pub fn merge(&mut self, o: &AckCounts) {
        self.published += o.published;
        self.acked_msgs += o.acked_msgs;
        self.lost_in_flight += o.lost_in_flight;
        self.queued += o.queued;
        for (s, n) in &o.acked_by_second {
            *self.acked_by_second.entry(*s).or_default() += n;
        }
        for (s, n) in &o.acked_by_arrival_second {
            *self.acked_by_arrival_second.entry(*s).or_default() += n;
        }
        // Connections are held back at the same time: the longest one is the wall time.
        self.held_back_s = self.held_back_s.max(o.held_back_s);
        self.readings_published += o.readings_published;
        self.readings_acked += o.readings_acked;
        self.topology_acked += o.topology_acked;
        self.topology_settled += o.topology_settled;
        self.canaries_acked += o.canaries_acked;
        self.readings_rejected += o.readings_rejected;
        self.errors += o.errors;
        self.canary_acked_at.extend(o.canary_acked_at.iter().map(|(k, v)| (*k, *v)));
        for (s, n) in &o.refused_by_second {
            *self.refused_by_second.entry(*s).or_default() += n;
        }
        for (s, n) in &o.refused_by_arrival_second {
            *self.refused_by_arrival_second.entry(*s).or_default() += n;
        }
        self.settled_msgs += o.settled_msgs;
        self.refused_msgs += o.refused_msgs;
        if self.first_answer.is_none() {
            self.first_answer.clone_from(&o.first_answer);
        }
        self.latency.merge(&o.latency);
        for e in &o.error_samples {
            if self.error_samples.len() < 5 && !self.error_samples.contains(e) {
                self.error_samples.push(e.clone());
            }
        }
    }
}

/// Count an error in a connection's counts and the live view.
pub(crate) fn note_error(counts: &std::sync::Mutex<AckCounts>, live: &Live, msg: String) {
    counts.lock().unwrap().record_error(msg);
    live.errors.fetch_add(1, Ordering::Relaxed);
}

/// Count an acknowledgement in a connection's counts (and the live view):
/// the one path every transport's acks take.
pub(crate) fn count_ack(c: &mut AckCounts, live: &Live, carries: Carries, t: Timing, at_ns: i64) -> u64 {
    c.latency.from_ms = live.soak_from_ms.load(Ordering::Relaxed);
    c.latency.enabled = !live.no_latency.load(Ordering::Relaxed);
    let n = c.record_ack(carries, t, at_ns);
    if c.latency.per_second_us.has_closed() {
        live.hand_over_seconds(&mut c.latency.per_second_us, at_ns);
    }
    live.readings_acked.fetch_add(n, Ordering::Relaxed);
    n
}

/// Count a refusal (answered, not acknowledged).
pub(crate) fn count_refused(c: &mut AckCounts, live: &Live, carries: Carries, t: Timing, at_ns: i64, why: String) {
    c.latency.from_ms = live.soak_from_ms.load(Ordering::Relaxed);
    if let Carries::Readings { n, .. } = carries {
        live.readings_refused.fetch_add(n as u64, Ordering::Relaxed);
    }
    c.record_refused(carries, t, at_ns, why);
    live.errors.fetch_add(1, Ordering::Relaxed);
}

/// Count a message that ended without an answer.
pub(crate) fn count_unanswered(c: &mut AckCounts, live: &Live, carries: Carries, t: Timing, why: Option<String>) {
    c.latency.from_ms = live.soak_from_ms.load(Ordering::Relaxed);
    if why.is_some() {
        live.errors.fetch_add(1, Ordering::Relaxed);
    }
    c.record_unanswered(carries, t, why);
}

/// A boxed future, for the dyn-compatible traits of the seam.
pub use crate::future::BoxFuture;

/// One step's open connections to the SUT, whichever kind: MQTT, NATS …
/// (the seam a new target kind implements once).
pub trait Transport: Send + Sync {
    /// The connections and live counters ([`pool::Pool`]).
    fn pool(&self) -> &pool::Pool;
    /// Senders, one per connection, for the producer.
    fn senders(&self) -> Vec<tokio::sync::mpsc::Sender<Batch>> {
        self.pool().senders()
    }
    /// Counts so far (a snapshot).
    fn counts(&self) -> AckCounts {
        self.pool().counts()
    }
    /// Live counters for progress and samples.
    fn live(&self) -> &Arc<Live> {
        &self.pool().live
    }
    /// Canary seq -> time its ack arrived (ms), where an ack means "stored".
    fn canary_acks(&self) -> Option<BTreeMap<u64, i64>> {
        None
    }
    /// Stop taking batches, send what is queued, wait up to `drain` for the
    /// last acks; the final counts.
    fn finish(self: Box<Self>, drain: std::time::Duration) -> BoxFuture<'static, AckCounts>;
}

/// How a run reaches its SUT: opens a step's transport, and says what its
/// acknowledgements mean. Chosen once per run from the adapter's plan
/// ([`carrier_for`]); a new target kind adds one of these.
pub trait Carrier: Send + Sync {
    /// In the user's words, e.g. "MQTT broker 127.0.0.1:21883".
    fn describe(&self) -> String;
    fn open(&self) -> BoxFuture<'_, anyhow::Result<Box<dyn Transport>>>;
    /// False where nothing is acknowledged (MQTT QoS 0, core NATS).
    fn acks_expected(&self) -> bool;
    /// True where an acknowledgement means "stored" (JetStream): canaries
    /// are then timed by their acks instead of polled in storage.
    fn ack_means_stored(&self) -> bool;
    /// The broker's own counters ($SYS), where it has them.
    fn broker_counters(&self) -> Option<Box<dyn BrokerCounters>> {
        None
    }
    /// Who acknowledges a reading, in the user's words ("the broker").
    fn acknowledger(&self) -> &'static str {
        "the transport"
    }
    /// What to check when an acknowledged reading never reached storage
    /// (the one-reading check); `counts` are the check's own.
    fn unstored_hint(&self, counts: &AckCounts) -> String {
        let _ = counts;
        "check that the system under test is running and writing what it acknowledges".into()
    }
}

/// A broker's own counters, where it publishes them (mosquitto's `$SYS`):
/// an optional capability of a carrier. One pass rule reads them (messages
/// the broker dropped); the rest go into the result as they are.
pub trait BrokerCounters: Send + Sync {
    /// The latest value of every counter seen, by name.
    fn snapshot(&self) -> BTreeMap<String, f64>;
    /// The step's counters, from the snapshot at its start to one taken
    /// once the broker has published again after `load_ended`.
    fn step(&self, before: &BTreeMap<String, f64>, load_ended: std::time::Instant) -> BoxFuture<'_, StepCounters>;
    /// Why the drop counter could not be read, in the user's words.
    fn drops_unreadable(&self) -> String;
    fn stop(self: Box<Self>);
}

/// A broker's counters over one step.
#[derive(Debug, Default)]
pub struct StepCounters {
    /// Before, after and delta of every counter, by name.
    pub counters: BTreeMap<String, crate::results::BrokerCounter>,
    /// Messages the broker dropped in the step; None: not measured.
    pub dropped: Option<f64>,
}

/// What the carrier needs from the run beyond the plan and the stack.
#[derive(Debug, Clone)]
pub struct CarrierOptions {
    pub connections: u32,
    pub inflight: u16,
    pub mqtt_user: Option<String>,
    pub mqtt_password: Option<String>,
    /// MQTT protocol level: 4 (3.1.1) or 5 (per-message reason codes).
    pub mqtt_version: u8,
    /// HTTP: requests in flight per connection.
    pub http_window: u32,
    /// HTTP: what goes with each message and what a response means (the
    /// adapter's `http-ingest`, on an instance of its own).
    pub http_rules: Option<Arc<dyn http::IngestRules>>,
    /// MQTT client ids start with this (None: `scalebench-<pid>`); workers
    /// of a distributed run each get their own, so ids never collide.
    pub client_id_prefix: Option<String>,
    /// A worker of a distributed run: what the run writes into (a JetStream
    /// stream) was created by its coordinator, not here.
    pub worker: bool,
}

impl std::fmt::Debug for dyn http::IngestRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IngestRules")
    }
}

/// The carrier the adapter's transport plan asks for, on the stack's
/// service of the matching kind. The one place that matches on the plan.
pub async fn carrier_for(
    target: &str,
    plan: &plugin_runtime::adapter_types::TransportPlan,
    stack: &dyn crate::stack::StackDriver,
    opts: &CarrierOptions,
) -> anyhow::Result<Box<dyn Carrier>> {
    use crate::stack::ServiceKind;
    use plugin_runtime::adapter_types::TransportPlan;
    let need = |kind: ServiceKind| {
        stack.service_of_kind(kind).ok_or_else(|| crate::error::Error::MissingService {
            target: target.into(),
            what: kind.describe().into(),
            stack: stack.kind().into(),
            has: stack.describe_services(),
        })
    };
    Ok(match plan {
        TransportPlan::Mqtt(m) => {
            let ep = need(ServiceKind::Mqtt)?;
            let (host, port) = crate::stack::parse_mqtt_url(&ep.address).map_err(|e| anyhow::anyhow!(e))?;
            let mut cfg = mqtt::MqttConfig::new(&host, port);
            cfg.tls = crate::stack::mqtt_url_is_tls(&ep.address);
            cfg.connections = opts.connections.max(1);
            cfg.inflight = opts.inflight.max(1);
            cfg.username = opts.mqtt_user.clone();
            cfg.password = opts.mqtt_password.clone();
            cfg.version = opts.mqtt_version;
            if let Some(p) = &opts.client_id_prefix {
                cfg.client_id_prefix.clone_from(p);
            }
            cfg.qos = m.qos;
            cfg.retain = m.retain;
            mqtt::check_reachable(&cfg, std::time::Duration::from_secs(5)).await?;
            Box::new(mqtt::MqttCarrier { cfg })
        }
        #[cfg(not(feature = "nats"))]
        TransportPlan::NatsJetstream(_) => {
            need(ServiceKind::Nats)?;
            return Err(crate::error::left_out("Publishing to NATS JetStream"));
        }
        #[cfg(feature = "nats")]
        TransportPlan::NatsJetstream(jp) => {
            let ep = need(ServiceKind::Nats)?;
            // What TLS negotiates, for the result (async-nats keeps its stream to itself).
            if let Some(url) = ep.address.split(',').map(str::trim).find(|u| u.starts_with("tls://")) {
                let rest = url.trim_start_matches("tls://");
                let hostport = rest.rsplit_once('@').map_or(rest, |(_, h)| h).trim_end_matches('/');
                if let Some((host, port)) = hostport.rsplit_once(':').and_then(|(h, p)| Some((h, p.parse().ok()?))) {
                    crate::tls::preflight_nats("nats", host, port)
                        .await
                        .map_err(|e| anyhow::anyhow!("cannot reach the NATS server at {url} over TLS: {e}"))?;
                }
            }
            Box::new(nats::JetStreamCarrier::start(&ep.address, jp, opts.connections, !opts.worker).await?)
        }
        TransportPlan::NatsCore => {
            return Err(crate::error::Error::UnsupportedPlan {
                target: target.into(),
                what: "core NATS publishing (plan `nats-core`)".into(),
            }
            .into())
        }
        TransportPlan::Http => {
            need(ServiceKind::Http)?;
            let bases: std::collections::BTreeMap<String, String> = stack
                .services()
                .into_iter()
                .filter(|e| e.kind == ServiceKind::Http)
                .map(|e| (e.name, e.address))
                .collect();
            for (name, base) in &bases {
                if base.starts_with("https://") {
                    let (host, port) = crate::stack::url_host_port(base).map_err(|e| anyhow::anyhow!(e))?;
                    crate::tls::preflight(&format!("http:{name}"), &host, port, "http://")
                        .await
                        .map_err(|e| anyhow::anyhow!("cannot reach HTTP service `{name}` at {base} over TLS: {e}"))?;
                }
            }
            let rules = opts
                .http_rules
                .clone()
                .unwrap_or_else(|| Arc::new(http::PlainRules { content_type: "application/octet-stream".into() }));
            let cfg = http::HttpConfig {
                bases,
                connections: opts.connections.max(1),
                window: opts.http_window.max(1) as usize,
                request_timeout: std::time::Duration::from_secs(30),
                channel_batches: 4,
                rules,
            };
            Box::new(http::HttpCarrier { cfg })
        }
    })
}
