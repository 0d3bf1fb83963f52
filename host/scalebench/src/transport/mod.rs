//! Transports: how encoded messages reach the system under test, and how
//! their acknowledgements are counted. MQTT first; NATS JetStream and HTTP
//! ingest fit beside it with the same shape: a set of connections fed by
//! bounded channels of [`Batch`]es, acknowledgements counted per second of
//! payload ts, and memory bounded by channel capacity + in-flight window.

pub mod mqtt;
pub mod mqtt_wire;
pub mod nats;

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

/// What a message carries, for accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

/// Messages for one connection, sent together.
pub type Batch = Vec<Message>;

/// Acknowledgement counts of a transport, merged over its connections.
#[derive(Debug, Clone, Default)]
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
    pub canaries_acked: u64,
    pub errors: u64,
    /// The first few distinct error messages.
    pub error_samples: Vec<String>,
    /// Canary seq -> when its ack arrived (ms); filled where an ack means stored (JetStream).
    pub canary_acked_at: BTreeMap<u64, i64>,
}

impl AckCounts {
    /// Count one acknowledged message; returns the readings it carried.
    /// `at_ms` is when the ack arrived (wall clock, ms since the epoch);
    /// `ack_means_stored` keeps it for canaries (JetStream).
    pub fn record_ack(&mut self, carries: Carries, at_ms: i64, ack_means_stored: bool) -> u64 {
        self.acked_msgs += 1;
        match carries {
            Carries::Readings { n, ts_s } => {
                *self.acked_by_second.entry(ts_s).or_default() += n as u64;
                *self.acked_by_arrival_second.entry(at_ms.div_euclid(1000)).or_default() += n as u64;
                self.readings_acked += n as u64;
                n as u64
            }
            Carries::Canary { seq } => {
                self.canaries_acked += 1;
                if ack_means_stored {
                    self.canary_acked_at.insert(seq, at_ms);
                }
                0
            }
            Carries::Topology => {
                self.topology_acked += 1;
                0
            }
        }
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
        self.canaries_acked += o.canaries_acked;
        self.errors += o.errors;
        self.canary_acked_at.extend(o.canary_acked_at.iter().map(|(k, v)| (*k, *v)));
        for e in &o.error_samples {
            if self.error_samples.len() < 5 && !self.error_samples.contains(e) {
                self.error_samples.push(e.clone());
            }
        }
    }
}

/// Count an error in a connection's counts and the live view.
pub(crate) fn note_error(counts: &std::sync::Mutex<AckCounts>, live: &mqtt::Live, msg: String) {
    counts.lock().unwrap().record_error(msg);
    live.errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The transport of a step, whichever the target's plan chose.
pub enum Transport {
    Mqtt(mqtt::MqttTransport),
    Nats(nats::NatsTransport),
}

impl Transport {
    pub fn senders(&self) -> Vec<tokio::sync::mpsc::Sender<Batch>> {
        match self {
            Transport::Mqtt(t) => t.senders(),
            Transport::Nats(t) => t.senders(),
        }
    }

    pub fn counts(&self) -> AckCounts {
        match self {
            Transport::Mqtt(t) => t.counts(),
            Transport::Nats(t) => t.counts(),
        }
    }

    pub fn live(&self) -> &Arc<mqtt::Live> {
        match self {
            Transport::Mqtt(t) => &t.live,
            Transport::Nats(t) => &t.live,
        }
    }

    /// Canary seq -> time its ack arrived (ms), where an ack means "stored".
    pub fn canary_acks(&self) -> Option<BTreeMap<u64, i64>> {
        match self {
            Transport::Mqtt(_) => None,
            Transport::Nats(t) => Some(t.canary_acks.lock().unwrap().clone()),
        }
    }

    pub async fn finish(self, drain: std::time::Duration) -> AckCounts {
        match self {
            Transport::Mqtt(t) => t.finish(drain).await,
            Transport::Nats(t) => t.finish(drain).await,
        }
    }
}
