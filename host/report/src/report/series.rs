//! A step's per-second series and canaries as chart lines, shared by the
//! report's step charts and `compare`'s overlays. x is seconds since the
//! load's first whole second (`series.start_unix_s`): the index of a
//! per-second count, and the time canaries and the soak are placed at.
//!
//! A result written before per-second series existed has none: callers ask
//! [`has_series`] / [`has_canaries`] and fall back to the 15 s samples.

use crate::chart::{Events, Line};
use crate::format::seconds;
use crate::results::StepResult;

/// Whether the step recorded per-second counts.
pub fn has_series(s: &StepResult) -> bool {
    !s.series.offered.is_empty() || !s.series.acked.is_empty()
}

/// Whether the step recorded every canary.
pub fn has_canaries(s: &StepResult) -> bool {
    !s.canaries.is_empty()
}

/// Seconds of the load (its last second may be partial): counts by
/// payload or hand-over second end here, acks may go on in the drain.
fn load_seconds(s: &StepResult) -> usize {
    s.series.load_end_s.ceil().max(0.0) as usize
}

fn per_second(v: &[u64], upto: usize) -> Vec<(f64, Option<f64>)> {
    v.iter().take(upto).enumerate().map(|(k, n)| (k as f64, Some(*n as f64))).collect()
}

/// Readings acknowledged per second, by the second each ack arrived (drain included).
pub fn acked(s: &StepResult, name: &str) -> Line {
    Line { name: name.into(), points: per_second(&s.series.acked, usize::MAX) }
}

/// Offered, acked, stored (by payload second) and, when any, refused readings per second.
pub fn rates(s: &StepResult) -> Vec<Line> {
    let load = load_seconds(s);
    let mut lines = vec![
        Line { name: "offered/s".into(), points: per_second(&s.series.offered, load) },
        acked(s, "acked/s (by arrival)"),
        Line { name: "stored/s (by payload second)".into(), points: per_second(&s.series.stored_by_payload, load) },
    ];
    if s.series.refused.iter().any(|n| *n > 0) {
        lines.push(Line { name: "refused/s (by answer)".into(), points: per_second(&s.series.refused, usize::MAX) });
    }
    lines
}

/// Ack latency p99 (from intended send time) of the acks that arrived in
/// each second; a gap where nothing was acknowledged.
pub fn latency_p99(s: &StepResult, name: &str) -> Line {
    Line {
        name: name.into(),
        points: s.series.ack_latency_p99_s.iter().enumerate().map(|(k, p)| (k as f64, *p)).collect(),
    }
}

/// Lag of every canary at the time it was sent; a gap where one never arrived.
pub fn canary_lag(s: &StepResult, name: &str) -> Line {
    Line { name: name.into(), points: s.canaries.iter().map(|c| (c.sent_s, c.lag_s)).collect() }
}

/// Canaries lost (acknowledged, never stored) and unknown (never
/// acknowledged), at the time each was sent; `who` prefixes the names.
pub fn canary_events(s: &StepResult, who: &str) -> Vec<Events> {
    let at = |outcome: &str| s.canaries.iter().filter(|c| c.outcome == outcome).map(|c| c.sent_s).collect();
    vec![
        Events { name: format!("{who}lost canary (acknowledged, never stored)"), xs: at("lost"), severe: true },
        Events { name: format!("{who}unknown canary (never acknowledged)"), xs: at("unknown"), severe: false },
    ]
}

/// Where the soak starts and, when acks went on after it, where the load ends.
pub fn marks(s: &StepResult) -> Vec<(f64, String)> {
    let mut m = Vec::new();
    if s.series.soak_from_s > 0.0 {
        m.push((s.series.soak_from_s, "soak starts".to_string()));
    }
    if s.series.acked.len() as f64 > s.series.load_end_s + 1.0 {
        m.push((s.series.load_end_s, "load ends".to_string()));
    }
    m
}

/// The longest run of consecutive seconds with no ack, within the load:
/// (first second, length). None when every second of the load had one.
pub fn longest_ack_gap(s: &StepResult) -> Option<(usize, usize)> {
    let load = load_seconds(s).min(s.series.acked.len());
    let (mut best, mut run_from) = (None::<(usize, usize)>, None);
    for k in 0..=load {
        match (k < load && s.series.acked[k] == 0, run_from) {
            (true, None) => run_from = Some(k),
            (false, Some(from)) => {
                if best.is_none_or(|(_, n)| k - from > n) {
                    best = Some((from, k - from));
                }
                run_from = None;
            }
            _ => {}
        }
    }
    best
}

/// "no acknowledgement for 20 s (from 30 s)", or None.
pub fn ack_gap_text(s: &StepResult) -> Option<String> {
    longest_ack_gap(s).filter(|(_, n)| *n >= 2).map(|(from, n)| {
        format!("no acknowledgement for {} (from {} after the load started)", seconds(n as f64), seconds(from as f64))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{CanaryRecord, Series};

    fn step() -> StepResult {
        StepResult {
            series: Series {
                start_unix_s: 1_000,
                soak_from_s: 2.0,
                load_end_s: 6.5,
                offered: vec![10; 9],
                acked: vec![10, 10, 0, 0, 0, 10, 10, 5, 3],
                refused: vec![0; 9],
                stored_by_payload: vec![10; 9],
                ack_latency_p99_s: vec![Some(0.01), Some(0.01), None, None, None, Some(3.0), Some(0.5), None, None],
                ..Default::default()
            },
            canaries: vec![
                CanaryRecord { seq: 1, sent_s: 1.0, lag_s: Some(0.1), outcome: "ok".into(), ..Default::default() },
                CanaryRecord { seq: 2, sent_s: 3.0, outcome: "lost".into(), ..Default::default() },
                CanaryRecord { seq: 3, sent_s: 5.0, outcome: "unknown".into(), ..Default::default() },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn lines_follow_the_seconds_and_the_canaries() {
        let s = step();
        assert!(has_series(&s) && has_canaries(&s));
        assert!(!has_series(&StepResult::default()));
        let r = rates(&s);
        assert_eq!(r.len(), 3, "no refused line when nothing was refused");
        assert_eq!(r[0].points.len(), 7, "offered stops with the load (6.5 s: 7 seconds)");
        assert_eq!(r[1].points.len(), 9, "acks go on in the drain");
        assert_eq!(r[1].points[3], (3.0, Some(0.0)), "a second without acks is a measured zero");
        assert_eq!(latency_p99(&s, "p99").points[2], (2.0, None), "no ack: no latency, never 0");
        assert_eq!(canary_lag(&s, "lag").points, vec![(1.0, Some(0.1)), (3.0, None), (5.0, None)]);
        let ev = canary_events(&s, "");
        assert_eq!((ev[0].xs.clone(), ev[1].xs.clone()), (vec![3.0], vec![5.0]));
        assert_eq!(longest_ack_gap(&s), Some((2, 3)));
        assert_eq!(marks(&s).len(), 2);
        assert!(ack_gap_text(&s).unwrap().contains("3.00 s"));
    }
}
