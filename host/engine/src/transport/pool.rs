//! The connections of one transport, written once for every protocol: each
//! connection is a task fed by a bounded channel of batches, counting into
//! its own [`AckCounts`]; the live counters are shared.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{AckCounts, Batch, Live};

/// One connection: its input, its task, its counts.
pub struct Conn {
    pub tx: mpsc::Sender<Batch>,
    pub task: JoinHandle<()>,
    pub counts: Arc<Mutex<AckCounts>>,
}

/// A transport's connections and live counters.
pub struct Pool {
    pub conns: Vec<Conn>,
    pub live: Arc<Live>,
}

impl Pool {
    pub fn new(live: Arc<Live>) -> Pool {
        Pool { conns: Vec::new(), live }
    }

    /// A connection's channel (`capacity` batches) and counts; `start`
    /// spawns its task on them.
    pub fn open(
        &mut self,
        capacity: usize,
        start: impl FnOnce(mpsc::Receiver<Batch>, Arc<Mutex<AckCounts>>) -> JoinHandle<()>,
    ) {
        let (tx, rx) = mpsc::channel::<Batch>(capacity.max(1));
        let counts = Arc::new(Mutex::new(AckCounts::default()));
        let task = start(rx, counts.clone());
        self.conns.push(Conn { tx, task, counts });
    }

    /// Senders, one per connection, for the producer.
    pub fn senders(&self) -> Vec<mpsc::Sender<Batch>> {
        self.conns.iter().map(|c| c.tx.clone()).collect()
    }

    /// Counts of every connection so far (a snapshot: a second a
    /// connection hands over meanwhile may be missing from its latency).
    pub fn counts(&self) -> AckCounts {
        let mut all = AckCounts::default();
        self.live.add_seconds_to(&mut all);
        for c in &self.conns {
            all.merge(&c.counts.lock().unwrap());
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::super::{count_ack, Carries};
    use super::*;
    use crate::latency::Timing;
    use crate::per_second_latency::SETTLED_AFTER_S;
    use std::sync::atomic::Ordering;

    /// Ten minutes of acks on four connections, each counted through
    /// `count_ack` as every transport counts them; returns the shared
    /// counters and the connections' counts.
    fn ten_minutes_on_four_connections(keep: bool) -> (Arc<Live>, Vec<AckCounts>) {
        let live = Arc::new(Live::default());
        live.keep_second_histograms.store(keep, Ordering::Relaxed);
        let mut conns = vec![AckCounts::default(); 4];
        let start_ns = 1_700_000_000_000_000_000i64;
        for s in 0..600i64 {
            for k in 0..100i64 {
                for (c, counts) in conns.iter_mut().enumerate() {
                    let intended_ns = start_ns + s * 1_000_000_000 + k * 10_000_000;
                    let latency_ns = ((s * 7 + k * 13 + c as i64 * 29) % 400 + 1) * 1_000_000;
                    let t = Timing { intended_ns, sent_ns: intended_ns };
                    count_ack(counts, &live, Carries::Readings { n: 10, ts_s: 0 }, t, intended_ns + latency_ns);
                }
            }
        }
        (live, conns)
    }

    /// A connection keeps only the second it is in; the transport keeps one
    /// merged histogram per second until the second settles, then its p99,
    /// which is what the connections' histograms merged at the end give.
    #[test]
    fn connections_hand_their_seconds_over_and_settled_seconds_read_as_merged() {
        let (live, conns) = ten_minutes_on_four_connections(false);
        for c in &conns {
            assert!(c.latency.per_second_us.len() <= 1, "a connection holds {} seconds", c.latency.per_second_us.len());
        }
        let shared = live.seconds.lock().unwrap().clone();
        assert!(shared.iter().count() <= SETTLED_AFTER_S as usize + 1, "{} seconds unsettled", shared.iter().count());
        assert!(shared.settled().len() >= 590, "{} seconds settled", shared.settled().len());

        let mut all = AckCounts::default();
        for c in &conns {
            all.merge(c);
        }
        live.add_seconds_to(&mut all);
        let (kept, kept_conns) = ten_minutes_on_four_connections(true);
        let mut merged = AckCounts::default();
        for c in &kept_conns {
            merged.merge(c);
        }
        kept.add_seconds_to(&mut merged);
        assert!(merged.latency.per_second_us.settled().is_empty(), "a worker keeps every histogram");
        let start_s = 1_700_000_000i64;
        for s in start_s..start_s + 601 {
            let p99 = merged.latency.p99_in_second_s(s);
            assert!(s == start_s + 600 || p99.is_some(), "second {s}");
            assert_eq!(all.latency.p99_in_second_s(s), p99, "second {s}");
        }
    }
}
