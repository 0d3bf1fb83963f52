//! Lag canaries: the producer sends one every 2 s on the same connections as
//! the load; this poller asks the adapter which canaries storage holds and
//! notes when each first appeared. Lag = first seen − sent. The poll interval
//! bounds the resolution and is recorded with the result.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use plugin_runtime::TargetAdapter;

use crate::loadgen::{now_ms, ProducerLive};
use crate::results::Lag;

pub const POLL: Duration = Duration::from_millis(200);

#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// seq -> (sent ts ms, first seen ms)
    pub seen: BTreeMap<u64, (i64, i64)>,
    pub last_error: Option<String>,
}

/// Poll until `stop`; results accumulate in `seen`.
pub fn poll(
    adapter: Arc<Mutex<TargetAdapter>>,
    live: Arc<ProducerLive>,
    first_seq: u64,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        let result = adapter.lock().unwrap().canaries_stored(first_seq);
        let at = now_ms();
        match result {
            Ok(seqs) => {
                let sent: BTreeMap<u64, i64> = live.canaries.lock().unwrap().iter().copied().collect();
                let mut s = seen.lock().unwrap();
                for seq in seqs {
                    if let Some(ts) = sent.get(&seq) {
                        s.seen.entry(seq).or_insert((*ts, at));
                    }
                }
            }
            Err(e) => seen.lock().unwrap().last_error = Some(e.to_string()),
        }
        std::thread::sleep(POLL);
    }
}

fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let idx = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    Some(sorted[idx])
}

fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    quantile(&v, 0.5)
}

/// Lag metrics from the canaries sent in `[from_ms, to_ms)` (the soak) and
/// all canaries for loss.
pub fn summarize(sent: &[(u64, i64)], seen: &Seen, soak_from_ms: i64) -> Lag {
    let mut lags_in_order = Vec::new();
    let mut all = Vec::new();
    let mut lost = 0;
    for (seq, ts) in sent {
        match seen.seen.get(seq) {
            Some((_, at)) => {
                let lag = (*at - *ts) as f64 / 1e3;
                all.push(lag);
                if *ts >= soak_from_ms {
                    lags_in_order.push(lag);
                }
            }
            None => lost += 1,
        }
    }
    let mut sorted = all.clone();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let third = lags_in_order.len() / 3;
    Lag {
        canaries_sent: sent.len() as u64,
        lost,
        p50_s: quantile(&sorted, 0.5),
        p95_s: quantile(&sorted, 0.95),
        max_s: sorted.last().copied(),
        first_third_median_s: if third > 0 { median(&lags_in_order[..third]) } else { None },
        last_third_median_s: if third > 0 { median(&lags_in_order[lags_in_order.len() - third..]) } else { None },
        poll_interval_s: POLL.as_secs_f64(),
    }
}
