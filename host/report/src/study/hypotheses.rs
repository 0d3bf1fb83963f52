//! The study's hypotheses H1–H5, stated before the run, and their verdicts
//! from the numbers (supported, not supported, or not tested when a row
//! they need did not run).

use std::fmt::Write as _;

use super::{core, count, delay, js, ms, NOT_SUPPORTED, NOT_TESTED, SUPPORTED};
use scalebench_results::study::record::{Hypothesis, StudyResult, ThroughputRow};

fn h(id: &str, statement: &str, verdict: &str, evidence: String) -> Hypothesis {
    Hypothesis { id: id.into(), statement: statement.into(), verdict: verdict.into(), evidence }
}

pub const H1: &str = "Core vs JetStream: fire-and-forget core NATS publishes at least 10x as many messages/s as JetStream file storage with replicas=3 and acks (1 publisher, 128 B, async window), because a durable publish waits for a majority of replicas.";
pub const H2: &str = "JetStream parallelism: going from 1 to 4 publishers raises JetStream acked writes/s, but sub-linearly (more than 1.05x, less than 4x): the replicated log, not the publishers, is the limit.";
pub const H3: &str =
    "Storage: memory storage acks more writes/s than file storage at the same replicas and publisher count.";
pub const H4: &str =
    "Replication: replicas=1 acks more writes/s than replicas=3 at the same storage and publisher count.";
pub const H5: &str = "Burst delay: flood delay (publish a burst, then drain) is far above ping delay (p50 at least 10x), because it is queueing time that grows with the backlog, not the network path.";

/// H1–H5 checked against the rows.
///
/// Long on purpose: H1–H5 in order, one block each, as the report states them.
pub fn evaluate_hypotheses(res: &StudyResult) -> Vec<Hypothesis> {
    let mut out = Vec::new();

    // H1
    let core1 = core(res, 1, 1, 128);
    let js_r3 = js(res, "file", 3, 1, 128, false);
    out.push(match (core1, js_r3) {
        (Some(c), Some(j)) => {
            let ratio = c.pub_msgs_per_s / j.pub_msgs_per_s;
            h(
                "H1",
                H1,
                if ratio >= 10.0 { SUPPORTED } else { NOT_SUPPORTED },
                format!(
                    "{}: {} msgs/s sent vs {}: {} acked writes/s = {ratio:.1}x",
                    c.name,
                    count(c.pub_msgs_per_s),
                    j.name,
                    count(j.pub_msgs_per_s)
                ),
            )
        }
        (c, _) => {
            let mut ev = "no JetStream file r=3 row ran (replicas=3 needs 3 nodes)".to_string();
            if let (Some(c), Some(j1)) = (c, js(res, "file", 1, 1, 128, false)) {
                let _ = write!(
                    ev,
                    "; for reference, against file r=1 ({}): {:.1}x",
                    j1.name,
                    c.pub_msgs_per_s / j1.pub_msgs_per_s
                );
            }
            h("H1", H1, NOT_TESTED, ev)
        }
    });

    // H2
    let pair = match (js(res, "file", 3, 1, 128, false), js(res, "file", 3, 4, 128, false)) {
        (Some(a), Some(b)) => Some((a, b, "")),
        _ => match (js(res, "file", 1, 1, 128, false), js(res, "file", 1, 4, 128, false)) {
            (Some(a), Some(b)) => Some((a, b, " (file r=1: no r=3 rows on this stand)")),
            _ => None,
        },
    };
    out.push(match pair {
        Some((one, four, why)) => {
            let ratio = four.pub_msgs_per_s / one.pub_msgs_per_s;
            let verdict = if ratio > 1.05 && ratio < 4.0 { SUPPORTED } else { NOT_SUPPORTED };
            let reading = if ratio <= 1.05 {
                "adding publishers did not raise the rate"
            } else if ratio >= 4.0 {
                "the rate grew linearly or better"
            } else {
                "more, but far from 4x"
            };
            h(
                "H2",
                H2,
                verdict,
                format!(
                    "{}: {} vs {}: {} acked writes/s = {ratio:.2}x: {reading}{why}",
                    one.name,
                    count(one.pub_msgs_per_s),
                    four.name,
                    count(four.pub_msgs_per_s)
                ),
            )
        }
        None => h("H2", H2, NOT_TESTED, "no pair of 1- and 4-publisher JetStream file rows ran".into()),
    });

    // H3 and H4: pairwise comparisons.
    let compare =
        |id: &str, statement: &str, pairs: Vec<(Option<&ThroughputRow>, Option<&ThroughputRow>)>, missing: &str| {
            let pairs: Vec<(&ThroughputRow, &ThroughputRow)> =
                pairs.into_iter().filter_map(|(a, b)| Some((a?, b?))).collect();
            if pairs.is_empty() {
                return h(id, statement, NOT_TESTED, missing.into());
            }
            let mut ev = Vec::new();
            let mut all = true;
            for (better, worse) in &pairs {
                let ratio = better.pub_msgs_per_s / worse.pub_msgs_per_s;
                all &= ratio > 1.0;
                ev.push(format!(
                    "{} {} vs {} {} ({ratio:.2}x)",
                    better.name,
                    count(better.pub_msgs_per_s),
                    worse.name,
                    count(worse.pub_msgs_per_s)
                ));
            }
            h(id, statement, if all { SUPPORTED } else { NOT_SUPPORTED }, format!("acked writes/s: {}", ev.join("; ")))
        };
    out.push(compare(
        "H3",
        H3,
        vec![
            (js(res, "memory", 1, 1, 128, false), js(res, "file", 1, 1, 128, false)),
            (js(res, "memory", 1, 4, 128, false), js(res, "file", 1, 4, 128, false)),
            (js(res, "memory", 3, 1, 128, false), js(res, "file", 3, 1, 128, false)),
            (js(res, "memory", 3, 4, 128, false), js(res, "file", 3, 4, 128, false)),
        ],
        "no memory/file pair at the same replicas and publishers ran",
    ));
    out.push(compare(
        "H4",
        H4,
        vec![
            (js(res, "file", 1, 1, 128, false), js(res, "file", 3, 1, 128, false)),
            (js(res, "file", 1, 4, 128, false), js(res, "file", 3, 4, 128, false)),
            (js(res, "memory", 1, 1, 128, false), js(res, "memory", 3, 1, 128, false)),
            (js(res, "memory", 1, 4, 128, false), js(res, "memory", 3, 4, 128, false)),
        ],
        "no r=1/r=3 pair ran (replicas=3 needs 3 nodes)",
    ));

    // H5
    out.push(match (delay(res, "ping"), delay(res, "flood")) {
        (Some(p), Some(f)) => {
            let ratio = f.p50_ms / p.p50_ms.max(1e-6);
            let all: Vec<String> = res
                .delay
                .iter()
                .filter(|d| d.kind == "flood" && d.error.is_none() && d.received > 0)
                .map(|d| format!("{} p50 {}", d.name, ms(d.p50_ms)))
                .collect();
            h(
                "H5",
                H5,
                if ratio >= 10.0 { SUPPORTED } else { NOT_SUPPORTED },
                format!(
                    "{} p50 {} vs {} p50 {} = {ratio:.0}x (floods: {})",
                    f.name,
                    ms(f.p50_ms),
                    p.name,
                    ms(p.p50_ms),
                    all.join(", ")
                ),
            )
        }
        _ => h("H5", H5, NOT_TESTED, "the ping or flood row did not produce delays".into()),
    });
    out
}
