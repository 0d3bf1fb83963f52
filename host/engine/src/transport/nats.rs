//! NATS transport (async-nats): core publish, or JetStream publish with
//! acknowledgements, one at a time (`window` 1) or windowed (many acks
//! outstanding). Same shape as MQTT: bounded channels of batches per
//! connection, acks counted per second of payload ts, a bounded number of
//! outstanding acks, so memory stays bounded and slowness shows as "behind
//! schedule". For JetStream an ack means the stream stored the message (on
//! a quorum of replicas), so a canary's ack time is its arrival in storage.
//!
//! Stored counts come from the stream itself (`stored_per_second`): an
//! ordered consumer reads every message and counts the readings it carries
//! per second of payload ts, the host's side of storage plan `jetstream`.
//! The host never decodes an adapter's payload: it sets headers of its own
//! on every message it publishes (one, [`HEADER`]: the payload second and
//! readings carried, or the canary, or topology) and counts by that.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use tokio::sync::mpsc;

use super::pool::Pool;
use super::Live;
use super::{note_error, AckCounts, Batch, Carries};
use crate::clock::now_ns;
use crate::latency::Timing;

#[derive(Debug, Clone)]
pub struct NatsConfig {
    /// Comma-separated nats:// URLs of the cluster.
    pub urls: String,
    pub connections: u32,
    /// None: core NATS (no acks). Some(w): JetStream with up to `w` acks outstanding per connection.
    pub jetstream_window: Option<usize>,
    pub channel_batches: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    #[error("cannot connect to NATS at {urls}: {detail}\nhint: is nats-server running there? For a local stack, let scalebench start it (--stack local)")]
    Connect { urls: String, detail: String },
    /// The server answered and refused: `detail` carries its own hint.
    #[error("cannot connect to NATS at {urls}: {detail}")]
    Refused { urls: String, detail: String },
    #[error("JetStream stream {stream}: {detail}\nhint: {hint}")]
    Stream { stream: String, detail: String, hint: String },
}

// This module's public futures are boxed at the crate's edge: see
// `crate::future`.

pub fn connect(urls: &str) -> crate::future::BoxFuture<'_, Result<async_nats::Client, NatsError>> {
    Box::pin(connect_here(urls))
}

async fn connect_here(urls: &str) -> Result<async_nats::Client, NatsError> {
    let addrs: Vec<String> = urls.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    let opts = || async {
        super::nats_access::options(urls)
            .await
            .map_err(|detail| NatsError::Connect { urls: urls.into(), detail })
            .map(|o| o.connection_timeout(Duration::from_secs(5)))
    };
    // One attempt first: a refusal (TLS, credentials) is reported as the
    // server gave it, instead of as a connection that never came.
    if let Ok(first) = tokio::time::timeout(Duration::from_secs(8), opts().await?.connect(addrs.clone())).await {
        use async_nats::ConnectErrorKind as K;
        match first {
            Ok(c) => return Ok(c),
            Err(e) if matches!(e.kind(), K::Authentication | K::AuthorizationViolation | K::Tls) => {
                let detail = match crate::tls::explain(&e, "nats://") {
                    Some(d) => d,
                    None if e.kind() == K::Tls => format!(
                        "{e}\nhint: check --tls-ca / --tls-cert / --tls-key; a tls:// URL needs a server with TLS, a nats:// URL to a TLS-only server needs tls://"
                    ),
                    None => format!(
                        "the server refused the login ({e}) with {}\nhint: check --nats-creds, --nats-nkey, --nats-user ({}) or the token ({})",
                        super::nats_access::account().describe(),
                        super::nats_access::PASSWORD_ENV,
                        super::nats_access::TOKEN_ENV
                    ),
                };
                return Err(NatsError::Refused { urls: urls.into(), detail });
            }
            Err(_) => {}
        }
    }
    let fut = opts().await?.retry_on_initial_connect().connect(addrs.clone());
    match tokio::time::timeout(Duration::from_secs(8), fut).await {
        Ok(Ok(c)) => {
            // retry_on_initial_connect returns at once; make sure we really are connected.
            let deadline = Instant::now() + Duration::from_secs(5);
            while c.connection_state() != async_nats::connection::State::Connected {
                if Instant::now() > deadline {
                    return Err(NatsError::Connect { urls: urls.into(), detail: "not connected within 5 s".into() });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(c)
        }
        Ok(Err(e)) => Err(NatsError::Connect { urls: urls.into(), detail: e.to_string() }),
        Err(_) => Err(NatsError::Connect { urls: urls.into(), detail: "no connection within 8 s".into() }),
    }
}

/// Create (or update) the stream the adapter's plan describes.
pub fn ensure_stream<'a>(
    client: &'a async_nats::Client,
    name: &'a str,
    subjects: Vec<String>,
    storage: &'a str,
    replicas: u8,
    max_msgs: i64,
) -> crate::future::BoxFuture<'a, Result<(), NatsError>> {
    Box::pin(ensure_stream_here(client, name, subjects, storage, replicas, max_msgs))
}

async fn ensure_stream_here(
    client: &async_nats::Client,
    name: &str,
    subjects: Vec<String>,
    storage: &str,
    replicas: u8,
    max_msgs: i64,
) -> Result<(), NatsError> {
    let js = jetstream::new(client.clone());
    let cfg = jetstream::stream::Config {
        name: name.to_string(),
        subjects,
        storage: if storage == "memory" {
            jetstream::stream::StorageType::Memory
        } else {
            jetstream::stream::StorageType::File
        },
        num_replicas: replicas.max(1) as usize,
        max_messages: if max_msgs > 0 { max_msgs } else { -1 },
        ..Default::default()
    };
    // Never delete or reuse a stream this run did not create: its messages
    // would be counted as ours, and it may be somebody's data.
    if js.get_stream(name).await.is_ok() {
        return Err(NatsError::Stream {
            stream: name.into(),
            detail: "a stream with this name already exists on the server".into(),
            hint: "scalebench only writes to a stream it creates itself and never deletes one it did not create: delete it yourself if it is a leftover of an earlier run, or give the target another stream name (--target-params '{\"stream\":\"...\"}')".into(),
        });
    }
    // A cluster that has just started may not have its peers yet: retry
    // placement for a while before calling it an error.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match js.create_stream(cfg.clone()).await {
            Err(e) if e.to_string().contains("no suitable peers") && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            other => {
                other.map_err(|e| NatsError::Stream {
                    stream: name.into(),
                    detail: e.to_string(),
                    hint: if replicas > 1 {
                        "replicas > 1 needs a cluster of at least that many nodes (--nodes 3)".into()
                    } else {
                        "check the server has JetStream enabled".into()
                    },
                })?;
                break;
            }
        }
    }
    // A replicated stream takes publishes once it has a leader and every
    // replica has it: until then a server may answer "no stream found" (seen
    // with nats-server 2.15, on a 3-node cluster whose leader was already
    // elected but whose other nodes had not caught up).
    if replicas > 1 {
        while Instant::now() < deadline {
            let ready = match js.get_stream(name).await {
                Ok(mut s) => s.info().await.ok().and_then(|i| i.cluster.clone()).is_some_and(|c| {
                    c.leader.is_some()
                        && c.replicas.len() + 1 >= replicas.max(1) as usize
                        && c.replicas.iter().all(|r| r.current && !r.offline)
                }),
                Err(_) => false,
            };
            if ready {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

/// Delete a stream this process created itself (the bench's own, between
/// arms). Never call it on a stream found on the server.
pub fn delete_created_stream<'a>(client: &'a async_nats::Client, name: &'a str) -> crate::future::BoxFuture<'a, ()> {
    Box::pin(async move {
        let _ = jetstream::new(client.clone()).delete_stream(name).await;
    })
}

/// Messages and limits of a stream, for the verdict.
pub async fn stream_state(client: &async_nats::Client, name: &str) -> Option<(u64, i64)> {
    let js = jetstream::new(client.clone());
    let mut s = js.get_stream(name).await.ok()?;
    let info = s.info().await.ok()?;
    Some((info.state.messages, info.config.max_messages))
}

pub struct NatsTransport {
    pool: Pool,
    shutdown: Arc<AtomicBool>,
    /// Canary seq -> ack time (ms), JetStream only.
    pub canary_acks: Arc<Mutex<BTreeMap<u64, i64>>>,
}

impl NatsTransport {
    pub fn start(cfg: &NatsConfig) -> crate::future::BoxFuture<'_, Result<NatsTransport, NatsError>> {
        Box::pin(Self::start_here(cfg))
    }

    async fn start_here(cfg: &NatsConfig) -> Result<NatsTransport, NatsError> {
        let live = Arc::new(Live::default());
        let shutdown = Arc::new(AtomicBool::new(false));
        let canary_acks = Arc::new(Mutex::new(BTreeMap::new()));
        let mut pool = Pool::new(live.clone());
        for _ in 0..cfg.connections.max(1) {
            let client = connect(&cfg.urls).await?;
            let (window, live, acks) = (cfg.jetstream_window, live.clone(), canary_acks.clone());
            pool.open(cfg.channel_batches, |rx, counts| {
                tokio::spawn(run_connection(client, window, rx, counts, live, acks))
            });
        }
        Ok(NatsTransport { pool, shutdown, canary_acks })
    }

    pub fn finish(self, drain: Duration) -> crate::future::BoxFuture<'static, AckCounts> {
        Box::pin(self.finish_here(drain))
    }

    async fn finish_here(self, drain: Duration) -> AckCounts {
        let NatsTransport { pool, shutdown, .. } = self;
        let conns = pool.conns;
        let mut all = AckCounts::default();
        let deadline = tokio::time::Instant::now() + drain;
        for c in conns {
            drop(c.tx);
            let _ = tokio::time::timeout_at(deadline, c.task).await;
            let mut counts = c.counts.lock().unwrap();
            counts.close(now_ns());
            all.merge(&counts);
        }
        pool.live.add_seconds_to(&mut all);
        shutdown.store(true, Ordering::Relaxed);
        all
    }
}

/// JetStream as a [`super::Carrier`]: a stream this run created; an ack
/// means the stream stored the message.
pub struct JetStreamCarrier {
    pub cfg: NatsConfig,
    pub client: async_nats::Client,
    pub stream: String,
    pub max_msgs: i64,
}

impl JetStreamCarrier {
    /// Connect and create the plan's stream (never one that exists already);
    /// a worker of a distributed run (`create` false) publishes into the
    /// stream its coordinator created, which must exist.
    pub async fn start(
        urls: &str,
        jp: &plugin_runtime::adapter_types::JetstreamPlan,
        connections: u32,
        create: bool,
    ) -> Result<JetStreamCarrier, NatsError> {
        let client = connect(urls).await?;
        if create {
            ensure_stream(&client, &jp.stream_name, jp.subjects.clone(), &jp.storage, jp.replicas, jp.max_msgs).await?;
        } else if jetstream::new(client.clone()).get_stream(&jp.stream_name).await.is_err() {
            return Err(NatsError::Stream {
                stream: jp.stream_name.clone(),
                detail: "the coordinator's stream is not on this server".into(),
                hint: "a worker publishes into the stream its coordinator created: check that the worker reaches the same NATS servers".into(),
            });
        }
        let cfg = NatsConfig {
            urls: urls.into(),
            connections: connections.max(1),
            jetstream_window: Some(256),
            channel_batches: 4,
        };
        Ok(JetStreamCarrier { cfg, client, stream: jp.stream_name.clone(), max_msgs: jp.max_msgs })
    }
}

impl super::Carrier for JetStreamCarrier {
    fn describe(&self) -> String {
        format!("NATS JetStream at {} (stream {})", self.cfg.urls, self.stream)
    }
    fn open(&self) -> super::BoxFuture<'_, anyhow::Result<Box<dyn super::Transport>>> {
        Box::pin(async move { Ok(Box::new(NatsTransport::start(&self.cfg).await?) as Box<dyn super::Transport>) })
    }
    fn acks_expected(&self) -> bool {
        true
    }
    fn ack_means_stored(&self) -> bool {
        true
    }
    fn acknowledger(&self) -> &'static str {
        "the JetStream stream"
    }
}

impl super::Transport for NatsTransport {
    fn pool(&self) -> &Pool {
        &self.pool
    }
    fn canary_acks(&self) -> Option<BTreeMap<u64, i64>> {
        Some(self.canary_acks.lock().unwrap().clone())
    }
    fn finish(self: Box<Self>, drain: Duration) -> super::BoxFuture<'static, AckCounts> {
        Box::pin(NatsTransport::finish(*self, drain))
    }
}

/// Headers naming what a message carries, for counting in the stream.
/// The one header the host sets on every message it publishes: what the
/// message carries, in a form the stored count reads back without decoding
/// the adapter's payload — `"<ts_s> <readings>"`, `"canary <seq>"` or
/// `"topology"`. One header, not one per fact: building and writing a
/// header map is most of what a publish costs the client (measured with
/// `scalebench bench nats`).
pub const HEADER: &str = "Scalebench";

/// The header of a message carrying `n` readings of second `ts_s`.
pub fn reading_header(ts_s: i64, n: u32) -> async_nats::HeaderMap {
    headers(Carries::Readings { n, ts_s })
}

fn headers(carries: Carries) -> async_nats::HeaderMap {
    let mut h = async_nats::HeaderMap::new();
    let value = match carries {
        Carries::Readings { n, ts_s } => {
            let (mut a, mut b) = (itoa::Buffer::new(), itoa::Buffer::new());
            let (ts, n) = (a.format(ts_s), b.format(n));
            let mut v = String::with_capacity(ts.len() + 1 + n.len());
            v.push_str(ts);
            v.push(' ');
            v.push_str(n);
            v
        }
        Carries::Canary { seq } => format!("canary {seq}"),
        Carries::Topology => "topology".to_string(),
    };
    h.insert(HEADER, value);
    h
}

/// Readings a message carries, by second of payload ts, from its header.
pub fn carried_readings(value: &str) -> Option<(i64, u64)> {
    let (ts, n) = value.split_once(' ')?;
    Some((ts.parse().ok()?, n.parse().ok()?))
}

fn count_ack(c: &mut AckCounts, live: &Live, carries: Carries, t: Timing, canary_acks: &Mutex<BTreeMap<u64, i64>>) {
    let at = now_ns();
    super::count_ack(c, live, carries, t, at);
    if let Carries::Canary { seq } = carries {
        // Milliseconds, as the canaries' send times (and `canary_acked_at`).
        canary_acks.lock().unwrap().insert(seq, at.div_euclid(1_000_000));
    }
}

async fn run_connection(
    client: async_nats::Client,
    window: Option<usize>,
    mut rx: mpsc::Receiver<Batch>,
    counts: Arc<Mutex<AckCounts>>,
    live: Arc<Live>,
    canary_acks: Arc<Mutex<BTreeMap<u64, i64>>>,
) {
    let js = jetstream::new(client.clone());
    let mut outstanding = FuturesUnordered::new();
    loop {
        // Settle acks as they come while waiting for the next batch.
        let batch = tokio::select! {
            biased;
            Some((carries, t, r)) = outstanding.next(), if !outstanding.is_empty() => {
                settle(carries, t, r, &counts, &live, &canary_acks);
                continue;
            }
            b = rx.recv() => match b { Some(b) => b, None => { counts.lock().unwrap().input_drained = true; break } },
        };
        for m in batch {
            let readings = if let Carries::Readings { n, .. } = m.carries { n as u64 } else { 0 };
            match window {
                None => {
                    let t = m.sent_now();
                    if let Err(e) =
                        client.publish_with_headers(m.address.to_string(), headers(m.carries), m.payload).await
                    {
                        note_error(&counts, &live, format!("publish: {e}"));
                        continue;
                    }
                    let mut c = counts.lock().unwrap();
                    c.published += 1;
                    c.readings_published += readings;
                    // Core NATS has no acknowledgement: "acked" = handed to the connection.
                    count_ack(&mut c, &live, m.carries, t, &canary_acks);
                }
                Some(w) => {
                    if outstanding.len() >= w.max(1) {
                        let waited = std::time::Instant::now();
                        while outstanding.len() >= w.max(1) {
                            if let Some((carries, t, r)) = outstanding.next().await {
                                settle(carries, t, r, &counts, &live, &canary_acks);
                            }
                        }
                        counts.lock().unwrap().held_back_s += waited.elapsed().as_secs_f64();
                    }
                    let t = m.sent_now();
                    match js.publish_with_headers(m.address.to_string(), headers(m.carries), m.payload).await {
                        Ok(ack) => {
                            let carries = m.carries;
                            outstanding.push(async move { (carries, t, ack.await.map_err(|e| e.to_string())) });
                            let mut c = counts.lock().unwrap();
                            c.published += 1;
                            c.queued += 1;
                            c.readings_published += readings;
                        }
                        Err(e) => super::count_unanswered(
                            &mut counts.lock().unwrap(),
                            &live,
                            m.carries,
                            t,
                            Some(format!("JetStream publish: {e}")),
                        ),
                    }
                }
            }
            live.published.fetch_add(1, Ordering::Relaxed);
        }
    }
    while let Some((carries, t, r)) = outstanding.next().await {
        settle(carries, t, r, &counts, &live, &canary_acks);
    }
    let _ = client.flush().await;
}

fn settle(
    carries: Carries,
    t: Timing,
    r: Result<jetstream::publish::PublishAck, String>,
    counts: &Mutex<AckCounts>,
    live: &Live,
    canary_acks: &Mutex<BTreeMap<u64, i64>>,
) {
    match r {
        Ok(_) => count_ack(&mut counts.lock().unwrap(), live, carries, t, canary_acks),
        Err(e) => {
            super::count_unanswered(&mut counts.lock().unwrap(), live, carries, t, Some(format!("JetStream ack: {e}")))
        }
    }
}

/// Count stored readings per second of payload ts in the stream, by the
/// headers the host set when it published (canaries and topology carry none
/// of the reading headers), reading every message with an ordered consumer.
/// Returns (per second, messages read).
pub async fn stored_per_second(
    client: &async_nats::Client,
    stream: &str,
    window: (i64, i64),
    idle: Duration,
) -> Result<(BTreeMap<i64, u64>, u64), String> {
    let js = jetstream::new(client.clone());
    let s = js.get_stream(stream).await.map_err(|e| format!("stream {stream}: {e}"))?;
    let consumer = s
        .create_consumer(jetstream::consumer::pull::OrderedConfig::default())
        .await
        .map_err(|e| format!("stream {stream}: cannot create an ordered consumer: {e}"))?;
    let mut messages = consumer.messages().await.map_err(|e| e.to_string())?;
    let mut per_second = BTreeMap::new();
    let mut read = 0u64;
    loop {
        let next = tokio::time::timeout(idle, messages.next()).await;
        let msg = match next {
            Ok(Some(Ok(m))) => m,
            Ok(Some(Err(e))) => return Err(e.to_string()),
            Ok(None) | Err(_) => break,
        };
        read += 1;
        let carried = msg.headers.as_ref().and_then(|h| h.get(HEADER)).and_then(|v| carried_readings(v.as_str()));
        if let Some((ts_s, n)) = carried {
            if ts_s * 1000 >= window.0 && ts_s * 1000 < window.1 && n > 0 {
                *per_second.entry(ts_s).or_default() += n;
            }
        }
        if let Ok(info) = msg.info() {
            if info.pending == 0 {
                break;
            }
        }
    }
    Ok((per_second, read))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_header_carries_what_the_stored_count_reads_back() {
        let h = headers(Carries::Readings { n: 50, ts_s: 1_733_221_234 });
        let v = h.get(HEADER).expect("the header is set");
        assert_eq!(v.as_str(), "1733221234 50");
        assert_eq!(carried_readings(v.as_str()), Some((1_733_221_234, 50)));
        // Canaries and topology carry no readings.
        for c in [Carries::Canary { seq: 7 }, Carries::Topology] {
            assert_eq!(carried_readings(headers(c).get(HEADER).unwrap().as_str()), None);
        }
        assert_eq!(h.iter().count(), 1, "one header, not one per fact");
    }
}
