//! The store watched like the broker, every second of the load: its round
//! trip (the storage plan's cheapest answer: `SELECT 1`, a `GET /`, the
//! stream's info) and its own write counter, each on a request of its own.
//!
//! A request is never stacked behind one that has not answered: while one
//! waits, each second is recorded as "no answer, waiting N s", and when it
//! answers its whole wait is its round trip. A stretch of at least a second
//! with a request out and no answer is a store silence; one longer than the
//! step's silence limit fails the step as a storage stall, whatever the
//! broker acknowledged meanwhile (a historian buffers while its database
//! is frozen, and the only other trace would be lag).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::now_ns;
use crate::latency::Silence;
pub use crate::results::StoreSecond;
use crate::storage::StoredCount;

/// How often the store is asked.
const EVERY: Duration = Duration::from_secs(1);

/// What the watch saw, by Unix second.
#[derive(Debug, Default, Clone)]
pub struct StoreRecord {
    pub store: String,
    pub round_trip: BTreeMap<i64, StoreSecond>,
    /// The store's own write counter, read when its request answered.
    pub written: BTreeMap<i64, f64>,
    /// Every stretch of at least a second with a request out and no answer.
    pub silences: Vec<Silence>,
}

/// A request out, with when it was asked (ns).
struct Out<T> {
    asked_ns: i64,
    task: tokio::task::JoinHandle<(T, i64)>,
}

fn ask<T: Send + 'static>(f: impl Future<Output = T> + Send + 'static) -> Out<T> {
    let asked_ns = now_ns();
    Out {
        asked_ns,
        task: tokio::spawn(async move {
            let r = f.await;
            (r, now_ns())
        }),
    }
}

/// The running watch; [`StoreWatch::finish`] ends it and gives its record.
pub struct StoreWatch {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<StoreRecord>,
}

impl StoreWatch {
    pub fn start(count: Arc<dyn StoredCount>) -> StoreWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(watch(count, stop.clone()));
        StoreWatch { stop, task }
    }

    pub async fn finish(self) -> StoreRecord {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or_default()
    }
}

fn note_silence(rec: &mut StoreRecord, from_ns: i64, to_ns: i64) {
    if to_ns - from_ns >= 1_000_000_000 {
        rec.silences.push(Silence { from_ms: from_ns.div_euclid(1_000_000), to_ms: to_ns.div_euclid(1_000_000) });
    }
}

async fn watch(count: Arc<dyn StoredCount>, stop: Arc<AtomicBool>) -> StoreRecord {
    let mut rec = StoreRecord { store: count.store_name(), ..Default::default() };
    let mut ping: Option<Out<Result<(), String>>> = None;
    let mut counter: Option<Out<Option<(f64, String)>>> = None;
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = now_ns();
        let second = now.div_euclid(1_000_000_000);
        // The round trip: collect the answer, or say how long it has waited.
        if let Some(out) = ping.take() {
            if out.task.is_finished() {
                if let Ok((r, at)) = out.task.await {
                    let took = (at - out.asked_ns) as f64 / 1e9;
                    let asked_second = out.asked_ns.div_euclid(1_000_000_000);
                    rec.round_trip.insert(
                        asked_second,
                        if r.is_ok() { StoreSecond::Answered(took) } else { StoreSecond::Failed(took) },
                    );
                    note_silence(&mut rec, out.asked_ns, at);
                }
            } else {
                rec.round_trip.insert(second, StoreSecond::NoAnswerFor((now - out.asked_ns) as f64 / 1e9));
                ping = Some(out);
            }
        }
        if let Some(out) = counter.take() {
            if out.task.is_finished() {
                if let Ok((Some((n, _)), at)) = out.task.await {
                    rec.written.insert(at.div_euclid(1_000_000_000), n);
                }
            } else {
                counter = Some(out);
            }
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if ping.is_none() {
            let c = count.clone();
            ping = Some(ask(async move { c.ping().await }));
        }
        if counter.is_none() {
            let c = count.clone();
            counter = Some(ask(async move { c.rows_written().await }));
        }
    }
    // A request still out at the end: its silence ends here.
    let end = now_ns();
    if let Some(out) = ping {
        note_silence(&mut rec, out.asked_ns, end);
        out.task.abort();
    }
    if let Some(out) = counter {
        out.task.abort();
    }
    rec
}

/// Readings stored per second by arrival, from the store's own counter:
/// the counter's rise between two readings a second apart, for the seconds
/// `start..=end`; None where either reading is missing (never 0).
pub fn stored_by_arrival(written: &BTreeMap<i64, f64>, start: i64, end: i64) -> Vec<Option<f64>> {
    (start..=end)
        .map(|s| match (written.get(&(s - 1)), written.get(&s)) {
            (Some(a), Some(b)) => Some((b - a).max(0.0)),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::future::BoxFuture;

    /// A store that answers at once, except while `frozen` is set.
    struct Fake {
        frozen: Arc<AtomicBool>,
    }

    impl StoredCount for Fake {
        fn stored(&self, _: plugin_runtime::types::Window) -> BoxFuture<'_, anyhow::Result<BTreeMap<i64, u64>>> {
            Box::pin(async { Ok(BTreeMap::new()) })
        }
        fn rows_written(&self) -> BoxFuture<'_, Option<(f64, String)>> {
            Box::pin(async { Some((0.0, "fake".into())) })
        }
        fn settles(&self) -> bool {
            false
        }
        fn ping(&self) -> BoxFuture<'_, Result<(), String>> {
            let frozen = self.frozen.clone();
            Box::pin(async move {
                while frozen.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Ok(())
            })
        }
        fn store_name(&self) -> String {
            "the fake store".into()
        }
    }

    #[tokio::test]
    async fn a_store_that_answers_nothing_is_a_silence_and_each_second_says_so() {
        let frozen = Arc::new(AtomicBool::new(false));
        let w = StoreWatch::start(Arc::new(Fake { frozen: frozen.clone() }));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        frozen.store(true, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(3500)).await;
        frozen.store(false, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let rec = w.finish().await;
        assert_eq!(rec.silences.len(), 1, "{rec:?}");
        let len = rec.silences[0].len_ms();
        assert!((2_000..=4_000).contains(&len), "the freeze (3.5 s, asked at a 1 s tick) as {len} ms");
        let waiting = rec.round_trip.values().filter(|s| matches!(s, StoreSecond::NoAnswerFor(_))).count();
        assert!(waiting >= 2, "seconds inside the freeze say no answer: {rec:?}");
        let long = rec.round_trip.values().any(|s| matches!(s, StoreSecond::Answered(t) if *t >= 2.0));
        assert!(long, "the request that waited the freeze out answered with its whole wait: {rec:?}");
    }

    #[test]
    fn stored_by_arrival_is_the_counters_rise_and_none_where_unread() {
        let w: BTreeMap<i64, f64> = [(10, 100.0), (11, 300.0), (13, 700.0)].into_iter().collect();
        assert_eq!(stored_by_arrival(&w, 10, 13), vec![None, Some(200.0), None, None]);
    }
}
