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

    /// Counts of every connection so far (a snapshot).
    pub fn counts(&self) -> AckCounts {
        let mut all = AckCounts::default();
        for c in &self.conns {
            all.merge(&c.counts.lock().unwrap());
        }
        all
    }
}
