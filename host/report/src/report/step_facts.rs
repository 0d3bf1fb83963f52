//! What a report says about a step beside its charts, as plain text for
//! both formats: the acknowledgement latency quantiles (from the intended
//! send time and from the send), the longest silence, and what became of
//! every reading offered (ok, lost, unknown, refused, not offered).
//!
//! A result written before these were recorded says so, never a row of zeros.

use crate::format::{latency, seconds, thousands};
use crate::latency::Quantiles;
use crate::results::{Floor, StepResult};

/// Columns of the ack latency table.
/// The per-worker table of a distributed step.
pub const WORKER_HEADER: [&str; 8] =
    ["Worker", "Scheduled", "Offered", "Acked", "CPU s", "Behind max", "Clock offset", "Problem"];

/// One row per worker of a distributed step, then the total; None for a
/// one-process step.
pub fn worker_rows(step: &StepResult) -> Option<Vec<Vec<String>>> {
    if step.workers.is_empty() {
        return None;
    }
    let nm = || "n/m".to_string();
    let mut rows: Vec<Vec<String>> = step
        .workers
        .iter()
        .map(|w| {
            vec![
                format!("{} ({})", w.worker, w.url),
                thousands(w.scheduled),
                thousands(w.offered),
                thousands(w.acked),
                w.cpu_s.map_or_else(nm, |c| format!("{c:.1}")),
                w.behind_schedule_max_s.map_or_else(nm, |b| format!("{b:.2} s")),
                w.clock_offset_ms.map_or_else(nm, |o| format!("{o} ms (±{} ms)", w.clock_rtt_ms.unwrap_or(0) / 2 + 1)),
                problem(w),
            ]
        })
        .collect();
    let g = &step.generator;
    rows.push(vec![
        "total".into(),
        thousands(g.scheduled),
        thousands(g.offered),
        thousands(g.acked),
        format!("{:.1}", g.cpu_s),
        format!("{:.2} s", g.behind_schedule_max_s),
        "-".into(),
        "-".into(),
    ]);
    Some(rows)
}

/// A worker's problem, with when its figures end (lost for good) or what
/// it offered late (lost, then back).
fn problem(w: &crate::results::WorkerFigures) -> String {
    let mut p = w.problem.clone().unwrap_or_else(|| "-".into());
    if let Some(ms) = w.missing_from_ms {
        p.push_str(&format!(
            " (its figures end at its last heartbeat, {}: its seconds after that are missing)",
            scalebench_results::clock::format_utc(ms)
        ));
    }
    if let Some(late) = w.offered_late {
        p.push_str(&format!(" (back after the load: {} readings offered after it was lost, counted)", thousands(late)));
    }
    p
}

pub const LATENCY_HEADER: [&str; 7] = ["Ack latency", "Acks", "p50", "p90", "p99", "p99.9", "max"];

fn row(name: &str, q: &Quantiles, resolution_s: Option<f64>) -> Vec<String> {
    // Results written before the resolution was recorded held ms figures.
    let r = resolution_s.or(Some(1e-3));
    vec![
        name.to_string(),
        thousands(q.count),
        latency(q.p50_s, r),
        latency(q.p90_s, r),
        latency(q.p99_s, r),
        latency(q.p999_s, r),
        latency(q.max_s, r),
    ]
}

/// The rows of the ack latency table (from intended send time, service
/// time, send lag, and the run's floor beside them); None when the result
/// has no latency recorded (written before it was measured, or nothing acked).
pub fn latency_rows(s: &StepResult, floor: Option<&Floor>) -> Option<Vec<Vec<String>>> {
    let a = &s.ack_latency;
    (a.intended.count > 0 || a.service.count > 0).then(|| {
        let mut rows = vec![
            row("from intended send time (what a client waited)", &a.intended, a.resolution_s),
            row("from the send (service time)", &a.service, a.resolution_s),
        ];
        if a.send_lag.count > 0 {
            rows.push(row("send lag (sent − intended: the pacing's own lateness)", &a.send_lag, a.resolution_s));
        }
        if let Some(f) = floor.filter(|f| f.round_trip.count > 0) {
            rows.push(row("floor: the bare round trip before step 1", &f.round_trip, Some(f.resolution_s)));
        }
        rows
    })
}

/// The longest silence, in a sentence.
pub fn silence_text(s: &StepResult) -> String {
    let a = &s.ack_latency;
    match a.longest_silence_s {
        None => "Longest silence: not measured.".into(),
        Some(x) if x <= 0.0 => "Longest silence: none (no reading waited without an answer).".into(),
        Some(x) => {
            let place = match (a.silence_from_soak_s, a.silence_to_soak_s) {
                (Some(f), Some(t)) => format!(", from {} to {} into the soak", seconds(f), seconds(t)),
                _ => String::new(),
            };
            let scope =
                if a.silence_total { "no connection had any answer" } else { "on the connection that waited longest" };
            format!("Longest silence: {}{place} ({scope}).", seconds(x))
        }
    }
}

/// "Readings: 1,600 ok · 32 lost (acknowledged, never stored) · …", or
/// None when the result has no outcomes recorded.
pub fn outcomes_text(s: &StepResult) -> Option<String> {
    let o = &s.outcomes;
    let (ok, lost) = (o.ok.unwrap_or(0), o.lost.unwrap_or(0));
    if o.ok.is_some() && ok + lost + o.unknown + o.refused + o.not_offered == 0 {
        return None;
    }
    let acked = match (o.ok, o.lost) {
        (Some(ok), Some(lost)) => format!(
            "{} ok (acknowledged and stored) · {} lost (acknowledged, never stored)",
            thousands(ok),
            thousands(lost)
        ),
        _ => format!(
            "{} acknowledged, ok or lost not measured (the stored count could not be read)",
            thousands(s.ingest.acked)
        ),
    };
    Some(format!(
        "Readings: {acked} · {} unknown (never acknowledged) · {} refused · {} not offered (the load's end came first).",
        thousands(o.unknown),
        thousands(o.refused),
        thousands(o.not_offered)
    ))
}

/// Canaries never acknowledged, counted; "not recorded" in a result
/// written before they were told apart (canaries sent, none recorded).
pub fn unknown_canaries(s: &StepResult) -> String {
    if s.canaries.is_empty() && s.lag.canaries_sent > 0 {
        "not recorded".into()
    } else {
        thousands(s.lag.unknown)
    }
}

/// "Canaries: 30 sent · 1 lost (…) · 2 unknown (never acknowledged)."
pub fn canaries_text(s: &StepResult) -> String {
    format!(
        "Canaries: {} sent · {} lost (acknowledged, never stored) · unknown (never acknowledged): {}.",
        thousands(s.lag.canaries_sent),
        thousands(s.lag.lost),
        unknown_canaries(s)
    )
}

/// Every line of text for a step, in report order (latency table apart).
pub fn lines(s: &StepResult) -> Vec<String> {
    let mut out = Vec::new();
    if latency_rows(s, None).is_some() {
        out.push(silence_text(s));
    } else {
        out.push("Ack latency: not recorded in this result.".into());
    }
    out.push(outcomes_text(s).unwrap_or_else(|| "Readings' outcomes: not recorded in this result.".into()));
    out.push(canaries_text(s));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{AckLatency, Outcomes};

    #[test]
    fn unrecorded_is_said_not_zero() {
        let s = StepResult::default();
        assert!(latency_rows(&s, None).is_none());
        assert_eq!(lines(&s)[0], "Ack latency: not recorded in this result.");
        assert!(lines(&s)[1].contains("not recorded"));

        let s = StepResult {
            ack_latency: AckLatency {
                intended: Quantiles { count: 10, p50_s: Some(0.01), p99_s: Some(20.5), ..Default::default() },
                longest_silence_s: Some(20.0),
                silence_from_soak_s: Some(10.0),
                silence_to_soak_s: Some(30.0),
                silence_total: true,
                ..Default::default()
            },
            outcomes: Outcomes { ok: Some(1600), lost: Some(32), unknown: 5, ..Default::default() },
            ..Default::default()
        };
        let rows = latency_rows(&s, None).unwrap();
        assert_eq!(rows[0][1..5], ["10", "10.0 ms", "n/m", "20.5 s"]);
        assert_eq!(rows[1][1], "0", "service time recorded nothing: a count of 0, quantiles n/m");
        assert_eq!(rows[1][4], "n/m");
        assert!(silence_text(&s).contains("20.0 s, from 10.0 s to 30.0 s into the soak (no connection"));
        assert!(outcomes_text(&s).unwrap().starts_with("Readings: 1,600 ok (acknowledged and stored) · 32 lost"));
    }

    #[test]
    fn outcomes_whose_stored_count_could_not_be_read_say_so_never_zero() {
        let mut s = StepResult {
            outcomes: Outcomes { ok: None, lost: None, unknown: 1250, not_offered: 480, ..Default::default() },
            ..Default::default()
        };
        s.ingest.acked = 1070;
        let t = outcomes_text(&s).unwrap();
        assert!(
            t.starts_with("Readings: 1,070 acknowledged, ok or lost not measured (the stored count could not be read) · 1,250 unknown"),
            "{t}"
        );
        assert!(!t.contains(" ok (") && !t.contains("0 lost"), "{t}");
    }
}
