//! MQTT transport (rumqttc): `connections` client connections, QoS 1, each
//! fed by a bounded channel. PUBACKs are matched to what each message carried:
//! the event loop reports the packet id it gives each outgoing publish in the
//! order publishes were queued, so a FIFO of "what was queued" per connection
//! maps packet ids to payload seconds; a PUBACK for that id counts them.
//!
//! Memory stays bounded: a connection holds at most `channel_batches`
//! batches, the client's request channel and `inflight` unacknowledged
//! publishes. When they are full the producer waits, and that wait shows as
//! "behind schedule" instead of as memory (seed 002 saw a client that
//! buffered ahead of its socket climb to 706 MB).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rumqttc::{AsyncClient, Event, EventLoop, MqttOptions, Outgoing, Packet, QoS};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{AckCounts, Batch, Carries};

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
            inflight: 1000,
            channel_batches: 4,
        }
    }

    fn options(&self, id: String) -> MqttOptions {
        let mut o = MqttOptions::new(id, self.host.clone(), self.port);
        o.set_keep_alive(Duration::from_secs(30));
        o.set_clean_session(true);
        o.set_inflight(self.inflight);
        o.set_max_packet_size(1 << 20, 1 << 20);
        o.set_request_channel_capacity(1024);
        if let (Some(u), Some(p)) = (&self.username, &self.password) {
            o.set_credentials(u.clone(), p.clone());
        }
        o
    }

    fn qos(&self) -> QoS {
        match self.qos {
            0 => QoS::AtMostOnce,
            2 => QoS::ExactlyOnce,
            _ => QoS::AtLeastOnce,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MqttError {
    #[error("cannot connect to the MQTT broker at {addr}: {detail}\nhint: is the broker running and listening there? For a local stack, let scalebench start it (--stack local); for --stack external, check --mqtt-url")]
    Connect { addr: String, detail: String },
}

/// Connect once and wait for CONNACK: a clear error before any ladder starts.
pub async fn check_reachable(cfg: &MqttConfig, timeout: Duration) -> Result<(), MqttError> {
    let addr = format!("{}:{}", cfg.host, cfg.port);
    let (client, mut ev) = AsyncClient::new(cfg.options(format!("{}-check", cfg.client_id_prefix)), 10);
    let res = tokio::time::timeout(timeout, async {
        loop {
            match ev.poll().await {
                Ok(Event::Incoming(Packet::ConnAck(ack))) => {
                    return if ack.code == rumqttc::ConnectReturnCode::Success {
                        Ok(())
                    } else {
                        Err(format!("the broker refused the connection: {:?}", ack.code))
                    };
                }
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    })
    .await;
    let _ = client.disconnect().await;
    match res {
        Ok(Ok(())) => Ok(()),
        Ok(Err(detail)) => Err(MqttError::Connect { addr, detail }),
        Err(_) => Err(MqttError::Connect { addr, detail: format!("no CONNACK within {timeout:?}") }),
    }
}

/// Live counters the progress line and samples read without stopping anything.
#[derive(Debug, Default)]
pub struct Live {
    pub published: AtomicU64,
    pub readings_acked: AtomicU64,
    pub errors: AtomicU64,
    pub connected: AtomicU64,
}

struct Conn {
    tx: mpsc::Sender<Batch>,
    publisher: JoinHandle<()>,
    events: JoinHandle<()>,
    counts: Arc<Mutex<AckCounts>>,
    /// Messages queued to the client whose packet id we have not seen yet.
    pending: Arc<Mutex<VecDeque<Carries>>>,
    client: AsyncClient,
}

pub struct MqttTransport {
    conns: Vec<Conn>,
    pub live: Arc<Live>,
    stop_events: Arc<AtomicBool>,
}

impl MqttTransport {
    /// Open the connections (on the current tokio runtime).
    pub fn start(cfg: &MqttConfig) -> MqttTransport {
        let live = Arc::new(Live::default());
        let stop_events = Arc::new(AtomicBool::new(false));
        let mut conns = Vec::new();
        for i in 0..cfg.connections.max(1) {
            let (client, eventloop) = AsyncClient::new(cfg.options(format!("{}-{i}", cfg.client_id_prefix)), 1024);
            let (tx, rx) = mpsc::channel::<Batch>(cfg.channel_batches.max(1));
            let counts = Arc::new(Mutex::new(AckCounts::default()));
            let pending = Arc::new(Mutex::new(VecDeque::new()));
            let events = tokio::spawn(run_events(eventloop, pending.clone(), counts.clone(), live.clone(), stop_events.clone()));
            let publisher = tokio::spawn(run_publisher(
                rx,
                client.clone(),
                cfg.qos(),
                cfg.retain,
                pending.clone(),
                counts.clone(),
                live.clone(),
            ));
            conns.push(Conn { tx, publisher, events, counts, pending, client });
        }
        MqttTransport { conns, live, stop_events }
    }

    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Senders, one per connection, for the producer.
    pub fn senders(&self) -> Vec<mpsc::Sender<Batch>> {
        self.conns.iter().map(|c| c.tx.clone()).collect()
    }

    /// Counts so far (a snapshot).
    pub fn counts(&self) -> AckCounts {
        let mut all = AckCounts::default();
        for c in &self.conns {
            all.merge(&c.counts.lock().unwrap());
        }
        all
    }

    /// Stop accepting batches, publish what is queued, wait up to `drain`
    /// for the remaining PUBACKs, then disconnect. Returns the final counts.
    pub async fn finish(self, drain: Duration) -> AckCounts {
        let MqttTransport { conns, live, stop_events } = self;
        let mut publishers = Vec::new();
        let mut rest = Vec::new();
        for c in conns {
            drop(c.tx);
            publishers.push(c.publisher);
            rest.push((c.events, c.counts, c.pending, c.client));
        }
        for p in publishers {
            let _ = p.await;
        }
        let deadline = tokio::time::Instant::now() + drain;
        loop {
            let waiting: usize = rest.iter().map(|(_, counts, _, _)| {
                let c = counts.lock().unwrap();
                c.published.saturating_sub(c.acked_msgs) as usize
            }).sum();
            if waiting == 0 || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop_events.store(true, Ordering::Relaxed);
        let mut all = AckCounts::default();
        for (events, counts, _, client) in rest {
            let _ = client.try_disconnect();
            events.abort();
            let _ = events.await;
            all.merge(&counts.lock().unwrap());
        }
        let _ = live;
        all
    }
}

async fn run_publisher(
    mut rx: mpsc::Receiver<Batch>,
    client: AsyncClient,
    qos: QoS,
    retain: bool,
    pending: Arc<Mutex<VecDeque<Carries>>>,
    counts: Arc<Mutex<AckCounts>>,
    live: Arc<Live>,
) {
    while let Some(batch) = rx.recv().await {
        for m in batch {
            if qos != QoS::AtMostOnce {
                pending.lock().unwrap().push_back(m.carries);
            }
            let n = match m.carries {
                Carries::Readings { n, .. } => n as u64,
                _ => 0,
            };
            match client.publish_bytes(m.address.as_ref(), qos, retain, m.payload).await {
                Ok(()) => {
                    let mut c = counts.lock().unwrap();
                    c.published += 1;
                    c.readings_published += n;
                    live.published.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    if qos != QoS::AtMostOnce {
                        pending.lock().unwrap().pop_back();
                    }
                    let mut c = counts.lock().unwrap();
                    c.errors += 1;
                    let msg = e.to_string();
                    if c.error_samples.len() < 5 && !c.error_samples.contains(&msg) {
                        c.error_samples.push(msg);
                    }
                    live.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

async fn run_events(
    mut ev: EventLoop,
    pending: Arc<Mutex<VecDeque<Carries>>>,
    counts: Arc<Mutex<AckCounts>>,
    live: Arc<Live>,
    stop: Arc<AtomicBool>,
) {
    // Packet id -> what that publish carried, for publishes awaiting PUBACK.
    let mut inflight: HashMap<u16, Carries> = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        match ev.poll().await {
            Ok(Event::Outgoing(Outgoing::Publish(pkid))) => {
                // A retransmission reuses an id that is still in flight.
                if pkid != 0 && !inflight.contains_key(&pkid) {
                    if let Some(carries) = pending.lock().unwrap().pop_front() {
                        inflight.insert(pkid, carries);
                    }
                }
            }
            Ok(Event::Incoming(Packet::PubAck(ack))) => {
                if let Some(carries) = inflight.remove(&ack.pkid) {
                    let mut c = counts.lock().unwrap();
                    c.acked_msgs += 1;
                    match carries {
                        Carries::Readings { n, ts_s } => {
                            *c.acked_by_second.entry(ts_s).or_default() += n as u64;
                            c.readings_acked += n as u64;
                            live.readings_acked.fetch_add(n as u64, Ordering::Relaxed);
                        }
                        Carries::Canary { .. } => c.canaries_acked += 1,
                        Carries::Topology => c.topology_acked += 1,
                    }
                }
            }
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                live.connected.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) => {}
            Err(e) => {
                {
                    let mut c = counts.lock().unwrap();
                    c.errors += 1;
                    let msg = format!("connection: {e}");
                    if c.error_samples.len() < 5 && !c.error_samples.contains(&msg) {
                        c.error_samples.push(msg);
                    }
                }
                live.errors.fetch_add(1, Ordering::Relaxed);
                // rumqttc reconnects on the next poll; do not spin.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
