//! Lag canaries: the producer sends one every 2 s on the same connections as
//! the load; this poller asks the adapter which canaries storage holds and
//! notes when each first appeared. Lag = first seen − sent. The poll interval
//! bounds the resolution and is recorded with the result.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::now_ms;
use crate::loadgen::ProducerLive;
use crate::results::Lag;
use crate::target::Adapter;

pub const POLL: Duration = Duration::from_millis(200);

#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// seq -> (sent ts ms, first seen ms)
    pub seen: BTreeMap<u64, (i64, i64)>,
    pub last_error: Option<String>,
}

/// Poll until `stop`; results accumulate in `seen`.
pub fn poll(
    adapter: Arc<Mutex<dyn Adapter>>,
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

/// A canary's outcome: "ok" (stored), "lost" (acknowledged, never stored)
/// or "unknown" (never acknowledged: nothing says the SUT took it).
pub fn outcome(seq: u64, seen: &Seen, acked: &BTreeMap<u64, i64>) -> &'static str {
    if seen.seen.contains_key(&seq) {
        "ok"
    } else if acked.contains_key(&seq) {
        "lost"
    } else {
        "unknown"
    }
}

/// Lag metrics from the canaries sent in the soak (from `soak_from_ms`) and
/// all canaries for loss; `acked` is when each canary's ack arrived.
pub fn summarize(sent: &[(u64, i64)], seen: &Seen, acked: &BTreeMap<u64, i64>, soak_from_ms: i64) -> Lag {
    let mut lags_in_order = Vec::new();
    let mut all = Vec::new();
    let (mut lost, mut unknown) = (0, 0);
    for (seq, ts) in sent {
        match seen.seen.get(seq) {
            Some((_, at)) => {
                let lag = (*at - *ts) as f64 / 1e3;
                all.push(lag);
                if *ts >= soak_from_ms {
                    lags_in_order.push(lag);
                }
            }
            None if acked.contains_key(seq) => lost += 1,
            None => unknown += 1,
        }
    }
    let mut sorted = all.clone();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let third = lags_in_order.len() / 3;
    Lag {
        canaries_sent: sent.len() as u64,
        lost,
        unknown,
        p50_s: quantile(&sorted, 0.5),
        p95_s: quantile(&sorted, 0.95),
        max_s: sorted.last().copied(),
        first_third_median_s: if third > 0 { median(&lags_in_order[..third]) } else { None },
        last_third_median_s: if third > 0 { median(&lags_in_order[lags_in_order.len() - third..]) } else { None },
        poll_interval_s: POLL.as_secs_f64(),
        // The verdict records the limit it applies.
        p95_limit_s: None,
    }
}

/// Every canary's life, times in seconds from `origin_ms`.
pub fn records(
    sent: &[(u64, i64)],
    seen: &Seen,
    acked: &BTreeMap<u64, i64>,
    origin_ms: i64,
) -> Vec<crate::results::CanaryRecord> {
    let rel = |ms: i64| (ms - origin_ms) as f64 / 1e3;
    sent.iter()
        .map(|(seq, ts)| {
            let stored = seen.seen.get(seq).map(|(_, at)| *at);
            crate::results::CanaryRecord {
                seq: *seq,
                sent_s: rel(*ts),
                acked_s: acked.get(seq).map(|a| rel(*a)),
                stored_s: stored.map(rel),
                lag_s: stored.map(|at| (at - ts) as f64 / 1e3),
                outcome: outcome(*seq, seen, acked).into(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_canary_never_acknowledged_is_unknown_not_lost() {
        let sent = vec![(1, 1_000), (2, 3_000), (3, 5_000)];
        let mut seen = Seen::default();
        seen.seen.insert(1, (1_000, 1_200));
        let acked: BTreeMap<u64, i64> = [(1, 1_010), (2, 3_010)].into_iter().collect();
        let lag = summarize(&sent, &seen, &acked, 0);
        assert_eq!((lag.lost, lag.unknown), (1, 1));
        let r = records(&sent, &seen, &acked, 0);
        let outcomes: Vec<&str> = r.iter().map(|c| c.outcome.as_str()).collect();
        assert_eq!(outcomes, ["ok", "lost", "unknown"]);
        assert_eq!(r[0].lag_s, Some(0.2));
        assert_eq!(r[2].acked_s, None);
    }
}
