//! NATS transport (async-nats): core publish, or JetStream publish with
//! acknowledgements, one at a time (`window` 1) or windowed (many acks
//! outstanding). Same shape as MQTT: bounded channels of batches per
//! connection, acks counted per second of payload ts, a bounded number of
//! outstanding acks, so memory stays bounded and slowness shows as "behind
//! schedule". For JetStream an ack means the stream stored the message (on
//! a quorum of replicas), so a canary's ack time is its arrival in storage.
//!
//! Stored counts come from the stream itself (`stored_per_second`): an
//! ordered consumer reads every message and counts payload ts per second,
//! the host's side of storage plan `jetstream`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::mqtt::Live;
use super::{note_error, AckCounts, Batch, Carries};
use crate::loadgen::now_ms;

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
    #[error("JetStream stream {stream}: {detail}\nhint: {hint}")]
    Stream { stream: String, detail: String, hint: String },
}

pub async fn connect(urls: &str) -> Result<async_nats::Client, NatsError> {
    let addrs: Vec<String> = urls.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    let opts = async_nats::ConnectOptions::new().connection_timeout(Duration::from_secs(5)).retry_on_initial_connect();
    let fut = opts.connect(addrs.clone());
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
pub async fn ensure_stream(
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
        storage: if storage == "memory" { jetstream::stream::StorageType::Memory } else { jetstream::stream::StorageType::File },
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
    js.create_stream(cfg).await.map_err(|e| NatsError::Stream {
        stream: name.into(),
        detail: e.to_string(),
        hint: if replicas > 1 { "replicas > 1 needs a cluster of at least that many nodes (--nodes 3)".into() } else { "check the server has JetStream enabled".into() },
    })?;
    Ok(())
}

/// Messages and limits of a stream, for the verdict.
pub async fn stream_state(client: &async_nats::Client, name: &str) -> Option<(u64, i64)> {
    let js = jetstream::new(client.clone());
    let mut s = js.get_stream(name).await.ok()?;
    let info = s.info().await.ok()?;
    Some((info.state.messages, info.config.max_messages))
}

struct Conn {
    tx: mpsc::Sender<Batch>,
    task: JoinHandle<()>,
    counts: Arc<Mutex<AckCounts>>,
}

pub struct NatsTransport {
    conns: Vec<Conn>,
    pub live: Arc<Live>,
    shutdown: Arc<AtomicBool>,
    /// Canary seq -> ack time (ms), JetStream only.
    pub canary_acks: Arc<Mutex<BTreeMap<u64, i64>>>,
}

impl NatsTransport {
    pub async fn start(cfg: &NatsConfig) -> Result<NatsTransport, NatsError> {
        let live = Arc::new(Live::default());
        let shutdown = Arc::new(AtomicBool::new(false));
        let canary_acks = Arc::new(Mutex::new(BTreeMap::new()));
        let mut conns = Vec::new();
        for _ in 0..cfg.connections.max(1) {
            let client = connect(&cfg.urls).await?;
            let (tx, rx) = mpsc::channel::<Batch>(cfg.channel_batches.max(1));
            let counts = Arc::new(Mutex::new(AckCounts::default()));
            let task = tokio::spawn(run_connection(client, cfg.jetstream_window, rx, counts.clone(), live.clone(), canary_acks.clone()));
            conns.push(Conn { tx, task, counts });
        }
        Ok(NatsTransport { conns, live, shutdown, canary_acks })
    }

    pub fn senders(&self) -> Vec<mpsc::Sender<Batch>> {
        self.conns.iter().map(|c| c.tx.clone()).collect()
    }

    pub fn counts(&self) -> AckCounts {
        let mut all = AckCounts::default();
        for c in &self.conns {
            all.merge(&c.counts.lock().unwrap());
        }
        all
    }

    pub async fn finish(self, drain: Duration) -> AckCounts {
        let NatsTransport { conns, shutdown, .. } = self;
        let mut all = AckCounts::default();
        let deadline = tokio::time::Instant::now() + drain;
        for c in conns {
            drop(c.tx);
            let _ = tokio::time::timeout_at(deadline, c.task).await;
            all.merge(&c.counts.lock().unwrap());
        }
        shutdown.store(true, Ordering::Relaxed);
        all
    }
}

fn count_ack(c: &mut AckCounts, live: &Live, carries: Carries, canary_acks: &Mutex<BTreeMap<u64, i64>>) {
    let at = now_ms();
    let readings = c.record_ack(carries, at, true);
    live.readings_acked.fetch_add(readings, Ordering::Relaxed);
    if let Carries::Canary { seq } = carries {
        canary_acks.lock().unwrap().insert(seq, at);
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
            Some((carries, r)) = outstanding.next(), if !outstanding.is_empty() => {
                settle(carries, r, &counts, &live, &canary_acks);
                continue;
            }
            b = rx.recv() => match b { Some(b) => b, None => break },
        };
        for m in batch {
            let readings = if let Carries::Readings { n, .. } = m.carries { n as u64 } else { 0 };
            match window {
                None => {
                    if let Err(e) = client.publish(m.address.to_string(), m.payload).await {
                        note_error(&counts, &live, format!("publish: {e}"));
                        continue;
                    }
                    let mut c = counts.lock().unwrap();
                    c.published += 1;
                    c.readings_published += readings;
                    // Core NATS has no acknowledgement: "acked" = handed to the connection.
                    count_ack(&mut c, &live, m.carries, &canary_acks);
                }
                Some(w) => {
                    if outstanding.len() >= w.max(1) {
                        let waited = std::time::Instant::now();
                        while outstanding.len() >= w.max(1) {
                            if let Some((carries, r)) = outstanding.next().await {
                                settle(carries, r, &counts, &live, &canary_acks);
                            }
                        }
                        counts.lock().unwrap().held_back_s += waited.elapsed().as_secs_f64();
                    }
                    match js.publish(m.address.to_string(), m.payload).await {
                        Ok(ack) => {
                            let carries = m.carries;
                            outstanding.push(async move { (carries, ack.await.map_err(|e| e.to_string())) });
                            let mut c = counts.lock().unwrap();
                            c.published += 1;
                            c.queued += 1;
                            c.readings_published += readings;
                        }
                        Err(e) => note_error(&counts, &live, format!("JetStream publish: {e}")),
                    }
                }
            }
            live.published.fetch_add(1, Ordering::Relaxed);
        }
    }
    while let Some((carries, r)) = outstanding.next().await {
        settle(carries, r, &counts, &live, &canary_acks);
    }
    let _ = client.flush().await;
}

fn settle(
    carries: Carries,
    r: Result<jetstream::publish::PublishAck, String>,
    counts: &Mutex<AckCounts>,
    live: &Live,
    canary_acks: &Mutex<BTreeMap<u64, i64>>,
) {
    match r {
        Ok(_) => count_ack(&mut counts.lock().unwrap(), live, carries, canary_acks),
        Err(e) => note_error(counts, live, format!("JetStream ack: {e}")),
    }
}

/// Milliseconds since the epoch from `2026-11-30T14:00:00.123Z`.
pub fn parse_iso_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let ms = if b.get(19) == Some(&b'.') { num(20..23).unwrap_or(0) } else { 0 };
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1000) + ms)
}

#[derive(serde::Deserialize)]
struct Envelope {
    point: Option<String>,
    ts: Option<serde_json::Value>,
}

/// Count stored readings per second of payload ts in the stream (canaries
/// and topology messages excluded), reading every message with an ordered
/// consumer. Returns (per second, messages read).
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
        if let Ok(env) = serde_json::from_slice::<Envelope>(&msg.payload) {
            if env.point.as_deref() == Some("canary/lag") {
                continue;
            }
            let ts = match env.ts {
                Some(serde_json::Value::String(t)) => parse_iso_ms(&t),
                Some(serde_json::Value::Number(n)) => n.as_i64(),
                _ => None,
            };
            if let Some(ts) = ts {
                if ts >= window.0 && ts < window.1 {
                    *per_second.entry(ts.div_euclid(1000)).or_default() += 1;
                }
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
    #[test]
    fn parses_iso_timestamps() {
        assert_eq!(super::parse_iso_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(super::parse_iso_ms("2026-11-30T14:00:00.123Z"), Some(1_796_047_200_123));
        assert_eq!(super::parse_iso_ms("2000-02-29T00:00:00Z"), Some(951_782_400_000));
        assert_eq!(super::parse_iso_ms("nonsense"), None);
    }
}
