//! MQTT transport: `connections` publisher connections, QoS 1 (or 0), each
//! fed by a bounded channel of batches. A connection writes a whole batch of
//! PUBLISH packets with one syscall ([`wire`]) and reads PUBACKs on a
//! task of its own; each packet id maps to what its message carried, so a
//! PUBACK counts readings per second of payload ts.
//!
//! Memory stays bounded: a connection holds at most `channel_batches`
//! batches and `inflight` unacknowledged publishes. When they are full the
//! producer waits, and that wait shows as "behind schedule" instead of as
//! memory (the generator write-up this project started from saw a client that buffered ahead of its socket climb to
//! 706 MB). A connection that drops is re-established; publishes that were
//! in flight on it are never counted as acknowledged.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};

mod blocked;
pub mod sys;
pub mod wire;

use self::wire::Incoming;
use super::pool::Pool;
use super::{note_error, AckCounts, Batch, Carries};
use crate::latency::Timing;

/// Capacity of a connection's write buffer (a batch is written in one go).
const WRITE_BUFFER: usize = 256 * 1024;
/// A connection's two directions, plain TCP or TLS alike.
type Reader = Box<dyn AsyncRead + Send + Unpin>;
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Write all of `buf` and flush it: over TLS, records can stay in the
/// session's buffer until a flush (a no-op on plain TCP).
async fn send(wr: &mut Writer, buf: &[u8]) -> std::io::Result<()> {
    wr.write_all(buf).await?;
    wr.flush().await
}

#[derive(Debug, Clone)]
pub struct MqttConfig {
    pub host: String,
    pub port: u16,
    pub client_id_prefix: String,
    pub username: Option<String>,
    pub password: Option<String>,
    pub connections: u32,
    pub qos: u8,
    pub retain: bool,
    /// Unacknowledged publishes per connection.
    pub inflight: u16,
    pub channel_batches: usize,
    pub keep_alive: Duration,
    /// `mqtts://`: TLS with the process's configuration ([`crate::tls`]).
    pub tls: bool,
    /// MQTT's protocol level: [`wire::V311`] (default) or [`wire::V5`],
    /// whose PUBACKs say per message whether the broker took it.
    pub version: u8,
}

impl MqttConfig {
    pub fn new(host: &str, port: u16) -> MqttConfig {
        MqttConfig {
            host: host.into(),
            port,
            client_id_prefix: format!("scalebench-{}", std::process::id()),
            username: None,
            password: None,
            connections: 4,
            qos: 1,
            retain: true,
            inflight: 4096,
            channel_batches: 4,
            keep_alive: Duration::from_secs(30),
            tls: false,
            version: wire::V311,
        }
    }
}

impl MqttConfig {
    /// The most the transport can hold for the SUT, whatever its backlog:
    /// per connection, `channel_batches` queued batches of at most
    /// `batch_msgs` messages, `inflight` unacknowledged publishes, and the
    /// socket write buffer. Each message costs its payload plus ~96 bytes of
    /// bookkeeping (the message record and its in-flight entry).
    pub fn queue_bound_bytes(&self, batch_msgs: u64, msg_bytes: u64) -> u64 {
        let per_msg = msg_bytes + 96;
        let per_conn =
            (self.channel_batches as u64 * batch_msgs + self.inflight as u64) * per_msg + WRITE_BUFFER as u64;
        self.connections.max(1) as u64 * per_conn
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MqttError {
    #[error("cannot connect to the MQTT broker at {addr}: {detail}\nhint: is the broker running and listening there? For a local stack, let scalebench start it (--stack local); for --stack external, check --mqtt-url")]
    Connect { addr: String, detail: String },
    /// A TLS failure: `detail` carries its own hint.
    #[error("cannot connect to the MQTT broker at {addr} over TLS: {detail}")]
    Tls { addr: String, detail: String },
}

/// An open connection: its two directions, and the nanoseconds its writes
/// have found the socket full ([`blocked`]).
struct Stream {
    rd: Reader,
    wr: Writer,
    blocked_ns: Arc<AtomicU64>,
}

/// Open the TCP connection, and TLS over it for `mqtts://`.
async fn open_stream(cfg: &MqttConfig, addr: &str) -> Result<Stream, MqttError> {
    let err = |detail: String| MqttError::Connect { addr: addr.to_string(), detail };
    let stream = TcpStream::connect((cfg.host.as_str(), cfg.port)).await.map_err(|e| err(e.to_string()))?;
    let _ = stream.set_nodelay(true);
    let blocked_ns = Arc::new(AtomicU64::new(0));
    if !cfg.tls {
        let (rd, wr) = stream.into_split();
        let wr = blocked::BlockedTimer::new(wr, blocked_ns.clone());
        return Ok(Stream { rd: Box::new(rd), wr: Box::new(wr), blocked_ns });
    }
    let stream = blocked::BlockedTimer::new(stream, blocked_ns.clone());
    let tls = crate::tls::connect_stream(stream, &cfg.host)
        .await
        .map_err(|e| MqttError::Tls { addr: addr.to_string(), detail: crate::tls::explain_handshake(&e, "mqtt://") })?;
    crate::tls::record("mqtt", tls.get_ref().1);
    let (rd, wr) = tokio::io::split(tls);
    Ok(Stream { rd: Box::new(rd), wr: Box::new(wr), blocked_ns })
}

/// An I/O error of a TLS connection, in the user's words when it is a TLS failure.
fn tls_err(addr: &str, e: &std::io::Error) -> MqttError {
    match crate::tls::explain(e, "mqtt://") {
        Some(detail) => MqttError::Tls { addr: addr.to_string(), detail },
        None => MqttError::Connect { addr: addr.to_string(), detail: e.to_string() },
    }
}

/// Open a connection and wait for CONNACK.
async fn open(cfg: &MqttConfig, client_id: &str, timeout: Duration) -> Result<(Stream, Vec<u8>), MqttError> {
    let addr = format!("{}:{}", cfg.host, cfg.port);
    let err = |detail: String| MqttError::Connect { addr: addr.clone(), detail };
    // Before CONNACK, a plain connection that breaks may be talking to a TLS port.
    let io_err = |e: std::io::Error| {
        if cfg.tls {
            tls_err(&addr, &e)
        } else {
            err(format!("{e} before CONNACK (if that port speaks TLS, use mqtts://)"))
        }
    };
    let fut = async {
        let Stream { mut rd, mut wr, blocked_ns } = open_stream(cfg, &addr).await?;
        let mut buf = Vec::new();
        wire::connect(
            &mut buf,
            cfg.version,
            client_id,
            cfg.keep_alive.as_secs() as u16,
            true,
            cfg.username.as_deref(),
            cfg.password.as_deref(),
        );
        send(&mut wr, &buf).await.map_err(io_err)?;
        let mut acc = Vec::with_capacity(64);
        let mut chunk = [0u8; 64];
        loop {
            let n = rd.read(&mut chunk).await.map_err(io_err)?;
            if n == 0 {
                return Err(err(if cfg.tls {
                    "the broker closed the connection before CONNACK".into()
                } else {
                    "the broker closed the connection before CONNACK (if that port speaks TLS, use mqtts://)".into()
                }));
            }
            acc.extend_from_slice(&chunk[..n]);
            if let Some((packet, used)) = wire::decode(&acc).map_err(err)? {
                acc.drain(..used);
                return match packet {
                    Incoming::ConnAck { return_code: 0 } => Ok((Stream { rd, wr, blocked_ns }, acc)),
                    Incoming::ConnAck { return_code } if cfg.version >= wire::V5 => Err(err(format!(
                        "the broker refused the connection: {} (0x{return_code:02x})",
                        wire::reason_name(return_code)
                    ))),
                    Incoming::ConnAck { return_code } => Err(err(format!(
                        "the broker refused the connection (CONNACK return code {return_code}: {})",
                        match return_code {
                            1 => "unacceptable protocol version",
                            2 => "client id rejected",
                            3 => "server unavailable",
                            4 => "bad user name or password",
                            5 => "not authorised",
                            _ => "unknown",
                        }
                    ))),
                    other => Err(err(format!("expected CONNACK, got {other:?}"))),
                };
            }
        }
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(err(format!("no CONNACK within {timeout:?}"))),
    }
}

/// Connect once and wait for CONNACK: a clear error before any ladder starts.
pub async fn check_reachable(cfg: &MqttConfig, timeout: Duration) -> Result<(), MqttError> {
    let (Stream { mut wr, .. }, _) = open(cfg, &format!("{}-check", cfg.client_id_prefix), timeout).await?;
    let _ = send(&mut wr, &wire::DISCONNECT).await;
    Ok(())
}

pub use super::Live;

/// Packet id -> what that publish carried, for publishes awaiting PUBACK.
struct Inflight {
    slots: Vec<Option<(Carries, Timing)>>,
    next: u16,
    count: usize,
}

impl Inflight {
    fn new() -> Inflight {
        Inflight { slots: vec![None; 65_536], next: 1, count: 0 }
    }
    fn insert(&mut self, c: (Carries, Timing)) -> u16 {
        loop {
            let id = self.next;
            self.next = self.next.wrapping_add(1).max(1);
            if self.slots[id as usize].is_none() {
                self.slots[id as usize] = Some(c);
                self.count += 1;
                return id;
            }
        }
    }
    fn remove(&mut self, id: u16) -> Option<(Carries, Timing)> {
        let c = self.slots[id as usize].take();
        if c.is_some() {
            self.count -= 1;
        }
        c
    }
}

pub struct MqttTransport {
    pool: Pool,
    shutdown: Arc<AtomicBool>,
}

impl MqttTransport {
    /// Open the connections (on the current tokio runtime).
    pub fn start(cfg: &MqttConfig) -> MqttTransport {
        let live = Arc::new(Live::default());
        let shutdown = Arc::new(AtomicBool::new(false));
        let cfg = Arc::new(cfg.clone());
        let mut pool = Pool::new(live.clone());
        for i in 0..cfg.connections.max(1) {
            let (cfg, live, shutdown) = (cfg.clone(), live.clone(), shutdown.clone());
            let client_id = format!("{}-{i}", cfg.client_id_prefix);
            pool.open(cfg.channel_batches, |rx, counts| {
                tokio::spawn(run_connection(cfg, client_id, rx, counts, live, shutdown))
            });
        }
        MqttTransport { pool, shutdown }
    }

    pub fn connections(&self) -> usize {
        self.pool.conns.len()
    }

    /// Stop accepting batches, send what is queued, wait up to `drain` for
    /// the remaining PUBACKs, then disconnect. Returns the final counts.
    pub async fn finish(self, drain: Duration) -> AckCounts {
        let MqttTransport { pool, shutdown } = self;
        let conns = pool.conns;
        let mut rest = Vec::new();
        for c in conns {
            drop(c.tx);
            rest.push((c.task, c.counts));
        }
        let deadline = Instant::now() + drain;
        loop {
            // Done when every connection has written all its batches and
            // every written message has ended: acknowledged, refused (an
            // MQTT 5 reason code: answered, never to be acknowledged) or
            // known lost.
            let waiting: u64 = rest
                .iter()
                .map(|(task, counts)| {
                    let c = counts.lock().unwrap();
                    let unsent = u64::from(!c.input_drained && !task.is_finished());
                    c.queued.saturating_sub(c.settled_msgs) + unsent
                })
                .sum();
            if waiting == 0 || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        shutdown.store(true, Ordering::Relaxed);
        let mut all = AckCounts::default();
        for (task, counts) in rest {
            if tokio::time::timeout(Duration::from_secs(2), task).await.is_err() {
                // A connection stuck in connect: nothing more will be acked.
            }
            let mut c = counts.lock().unwrap();
            c.close(crate::clock::now_ns());
            all.merge(&c);
        }
        pool.live.add_seconds_to(&mut all);
        all
    }
}

/// MQTT as a [`super::Carrier`]: QoS 1 PUBACKs from the broker.
pub struct MqttCarrier {
    pub cfg: MqttConfig,
}

impl super::Carrier for MqttCarrier {
    fn describe(&self) -> String {
        format!("MQTT broker {}:{}", self.cfg.host, self.cfg.port)
    }
    fn open(&self) -> super::BoxFuture<'_, anyhow::Result<Box<dyn super::Transport>>> {
        Box::pin(async move { Ok(Box::new(MqttTransport::start(&self.cfg)) as Box<dyn super::Transport>) })
    }
    fn acks_expected(&self) -> bool {
        self.cfg.qos > 0
    }
    fn ack_means_stored(&self) -> bool {
        false
    }
    fn broker_counters(&self) -> Option<Box<dyn super::BrokerCounters>> {
        let c = &self.cfg;
        let login = c.username.as_deref().map(|u| (u, c.password.as_deref().unwrap_or_default()));
        Some(Box::new(sys::BrokerSys::start(&c.host, c.port, login, c.tls)))
    }
    fn acknowledger(&self) -> &'static str {
        "the broker"
    }
    fn unstored_hint(&self, _: &super::AckCounts) -> String {
        "mosquitto acknowledges publishes its ACL denies: check that the broker lets scalebench's account (--mqtt-user) publish on the target's topics, and that the system under test is subscribed and writing".into()
    }
}

impl super::Transport for MqttTransport {
    fn pool(&self) -> &Pool {
        &self.pool
    }
    fn finish(self: Box<Self>, drain: Duration) -> super::BoxFuture<'static, AckCounts> {
        Box::pin(MqttTransport::finish(*self, drain))
    }
}

/// Long on purpose: one connection's reconnect loop around its send loop; both share the socket, the in-flight window and the map of packets awaiting their PUBACK, which is what makes an ack count exactly once across a reconnect.
async fn run_connection(
    cfg: Arc<MqttConfig>,
    client_id: String,
    mut rx: mpsc::Receiver<Batch>,
    counts: Arc<Mutex<AckCounts>>,
    live: Arc<Live>,
    shutdown: Arc<AtomicBool>,
) {
    let qos = cfg.qos.min(1);
    let v5 = cfg.version >= wire::V5;
    let mut backoff = Duration::from_millis(100);
    let mut pending: Option<Batch> = None;
    let mut input_closed = false;
    'reconnect: while !shutdown.load(Ordering::Relaxed) {
        let (Stream { rd, mut wr, blocked_ns }, leftover) = match open(&cfg, &client_id, Duration::from_secs(5)).await {
            Ok(c) => c,
            Err(e) => {
                note_error(&counts, &live, e.to_string().lines().next().unwrap_or_default().to_string());
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        backoff = Duration::from_millis(100);
        live.connected.fetch_add(1, Ordering::Relaxed);
        let inflight = Arc::new(Mutex::new(Inflight::new()));
        let window = Arc::new(Semaphore::new(cfg.inflight.max(1) as usize));
        let reader_done = Arc::new(tokio::sync::Notify::new());
        let reader_dead = Arc::new(AtomicBool::new(false));
        let reader = tokio::spawn(read_acks(
            rd,
            leftover,
            inflight.clone(),
            window.clone(),
            counts.clone(),
            live.clone(),
            reader_done.clone(),
            reader_dead.clone(),
        ));

        let mut buf: Vec<u8> = Vec::with_capacity(WRITE_BUFFER);
        let mut last_write = Instant::now();
        let ping_every = cfg.keep_alive / 2;
        let broken: Option<String> = loop {
            if reader_dead.load(Ordering::Relaxed) {
                break Some("connection closed by the broker".into());
            }
            let batch = match pending.take() {
                Some(b) => Some(b),
                None if input_closed => None,
                None => tokio::select! {
                    b = rx.recv() => { if b.is_none() { input_closed = true; } b }
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {
                        if shutdown.load(Ordering::Relaxed) { break None; }
                        // An idle connection pings like any other (a
                        // distributed run's coordinator carries nothing):
                        // a broker drops a client silent for 1.5 × its
                        // keep-alive, which read as a SUT fault.
                        if last_write.elapsed() > ping_every {
                            if send(&mut wr, &wire::PINGREQ).await.is_err() {
                                break Some("write failed".into());
                            }
                            last_write = Instant::now();
                        }
                        continue;
                    }
                },
            };
            let Some(batch) = batch else {
                counts.lock().unwrap().input_drained = true;
                // Input done: keep reading acks until the transport shuts down.
                if shutdown.load(Ordering::Relaxed) {
                    break None;
                }
                tokio::select! {
                    _ = reader_done.notified() => {}
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
                if last_write.elapsed() > ping_every {
                    if send(&mut wr, &wire::PINGREQ).await.is_err() {
                        break Some("write failed".into());
                    }
                    last_write = Instant::now();
                }
                continue;
            };
            let mut readings = 0u64;
            let mut sent = 0u64;
            let mut failed: Option<String> = None;
            for m in batch.iter() {
                if qos > 0 {
                    // Wait for room in the in-flight window; flush first so
                    // the acks we wait for can come.
                    let permit = match window.clone().try_acquire_owned() {
                        Ok(p) => p,
                        Err(_) => {
                            if !buf.is_empty() {
                                if let Err(e) = send(&mut wr, &buf).await {
                                    failed = Some(e.to_string());
                                    break;
                                }
                                buf.clear();
                                last_write = Instant::now();
                            }
                            let waited = Instant::now();
                            let acquired = loop {
                                tokio::select! {
                                    p = window.clone().acquire_owned() => break Some(p.expect("semaphore closed")),
                                    _ = tokio::time::sleep(Duration::from_millis(100)) => {
                                        if reader_dead.load(Ordering::Relaxed) || shutdown.load(Ordering::Relaxed) {
                                            break None;
                                        }
                                    }
                                }
                            };
                            counts.lock().unwrap().held_back_s += waited.elapsed().as_secs_f64();
                            match acquired {
                                Some(p) => p,
                                None => {
                                    failed = Some("connection closed while waiting for acks".into());
                                    break;
                                }
                            }
                        }
                    };
                    permit.forget();
                    let id = inflight.lock().unwrap().insert((m.carries, m.sent_now()));
                    wire::publish(&mut buf, m.address.as_bytes(), &m.payload, qos, cfg.retain, id, v5);
                } else {
                    wire::publish(&mut buf, m.address.as_bytes(), &m.payload, 0, cfg.retain, 0, v5);
                }
                sent += 1;
                if let Carries::Readings { n, .. } = m.carries {
                    readings += n as u64;
                }
            }
            if failed.is_none() && !buf.is_empty() {
                let before = blocked_ns.load(Ordering::Relaxed);
                if let Err(e) = send(&mut wr, &buf).await {
                    failed = Some(e.to_string());
                }
                // A write that found the socket full: the broker is not reading.
                let waited = blocked_ns.load(Ordering::Relaxed) - before;
                if waited > 0 {
                    counts.lock().unwrap().held_back_s += waited as f64 / 1e9;
                }
                buf.clear();
                last_write = Instant::now();
            }
            {
                let mut c = counts.lock().unwrap();
                c.published += sent;
                if qos > 0 {
                    c.queued += sent;
                }
                c.readings_published += readings;
            }
            live.published.fetch_add(sent, Ordering::Relaxed);
            if let Some(e) = failed {
                break Some(e);
            }
        };
        let _ = send(&mut wr, &wire::DISCONNECT).await;
        reader.abort();
        let lost = {
            let mut table = inflight.lock().unwrap();
            let mut c = counts.lock().unwrap();
            for (carries, t) in table.slots.iter_mut().filter_map(Option::take) {
                super::count_unanswered(&mut c, &live, carries, t, None);
            }
            let lost = table.count as u64;
            table.count = 0;
            c.lost_in_flight += lost;
            lost
        };
        match broken {
            None => break 'reconnect,
            Some(e) => {
                note_error(
                    &counts,
                    &live,
                    format!("connection {client_id}: {e}; {lost} publishes in flight were never acknowledged"),
                );
                tokio::time::sleep(backoff).await;
            }
        }
    }
    // Batches that never went out are not counted as published.
    rx.close();
}

#[allow(clippy::too_many_arguments)]
async fn read_acks(
    mut rd: Reader,
    mut acc: Vec<u8>,
    inflight: Arc<Mutex<Inflight>>,
    window: Arc<Semaphore>,
    counts: Arc<Mutex<AckCounts>>,
    live: Arc<Live>,
    done: Arc<tokio::sync::Notify>,
    dead: Arc<AtomicBool>,
) {
    let mut chunk = vec![0u8; 64 * 1024];
    // When the bytes being parsed were read: an ack is answered then.
    let mut read_at = crate::clock::now_ns();
    loop {
        // Parse everything buffered.
        let mut used_total = 0;
        {
            let mut acks = Vec::new();
            loop {
                match wire::decode(&acc[used_total..]) {
                    Ok(Some((Incoming::PubAck { pkid, reason }, used))) => {
                        acks.push((pkid, reason));
                        used_total += used;
                    }
                    Ok(Some((_, used))) => used_total += used,
                    Ok(None) => break,
                    Err(_) => {
                        dead.store(true, Ordering::Relaxed);
                        done.notify_waiters();
                        return;
                    }
                }
            }
            if !acks.is_empty() {
                let at = read_at;
                let mut table = inflight.lock().unwrap();
                let mut c = counts.lock().unwrap();
                let mut released = 0;
                for (id, reason) in acks {
                    if let Some((carries, t)) = table.remove(id) {
                        released += 1;
                        if reason >= 0x80 {
                            // MQTT 5: the broker answered and did not take it.
                            let why = format!("{} (0x{reason:02x})", wire::reason_name(reason));
                            super::count_refused(&mut c, &live, carries, t, at, why);
                        } else {
                            super::count_ack(&mut c, &live, carries, t, at);
                        }
                    }
                }
                window.add_permits(released);
            }
        }
        acc.drain(..used_total);
        match rd.read(&mut chunk).await {
            Ok(0) | Err(_) => {
                dead.store(true, Ordering::Relaxed);
                done.notify_waiters();
                return;
            }
            Ok(n) => {
                read_at = crate::clock::now_ns();
                acc.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection given nothing to send still pings within its keep-alive:
    /// against a bare broker that answers CONNACK and records what arrives.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_connection_pings_within_its_keep_alive() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let broker = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            let mut chunk = [0u8; 256];
            let mut connacked = false;
            let deadline = Instant::now() + Duration::from_secs(4);
            while Instant::now() < deadline {
                let n = match tokio::time::timeout(Duration::from_millis(200), s.read(&mut chunk)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => break,
                    Ok(Ok(n)) => n,
                    Err(_) => continue,
                };
                seen.extend_from_slice(&chunk[..n]);
                if !connacked && seen.first() == Some(&0x10) {
                    s.write_all(&[0x20, 0x02, 0x00, 0x00]).await.unwrap();
                    connacked = true;
                    seen.clear();
                }
                if seen.windows(2).any(|w| w == wire::PINGREQ) {
                    s.write_all(&[0xD0, 0x00]).await.unwrap();
                    // The socket stays open until the transport is finished.
                    return (Some(Instant::now()), s);
                }
            }
            (None, s)
        });
        let mut cfg = MqttConfig::new("127.0.0.1", port);
        cfg.keep_alive = Duration::from_secs(2);
        cfg.connections = 1;
        let started = Instant::now();
        let transport = MqttTransport::start(&cfg);
        let (pinged, socket) = broker.await.unwrap();
        let counts = transport.finish(Duration::from_millis(100)).await;
        drop(socket);
        let at = pinged.expect("an idle connection never sent PINGREQ within 4 s (keep-alive 2 s)");
        assert!(at - started < Duration::from_secs(2), "pinged after {:?}", at - started);
        assert_eq!(counts.errors, 0, "{:?}", counts.error_samples);
    }
}
