//! The pass rules of a step (after the original Baler scale-test plan), in one place.
//!
//! A step passes only if the system under test kept up:
//! - nothing refused: a reading the SUT answered with a refusal fails the
//!   step first;
//! - no data loss: stored ≥ 99 % of acked, overall and in every second of
//!   payload ts; no lost canaries (acknowledged and never stored; a canary
//!   never acknowledged is unknown, not lost); broker drops 0;
//! - no stall: readings never waited longer than the `silence` limit with
//!   no answer at all, the store (its cheapest read, asked every second)
//!   never went longer than that limit without answering, and
//!   acknowledgement latency p99 measured from each reading's intended
//!   send time stays under its limit (`step_rules` in budgets.json). The
//!   ack rules are measured from the schedule, so they do not
//!   depend on the generator's in-flight window or connection count;
//! - no pushback: the SUT accepted the offered rate on the wall clock (acks
//!   by second of arrival ≥ 99 % of the target), and did not hold the
//!   transport back (in-flight window full, writes blocked) for more than
//!   1 % of the soak;
//! - no growing backlog: lag's last-third median − first-third median ≤ 10 s,
//!   and p95 lag < 30 s;
//! - responsive: every probe answered, passed its check, within budget;
//! - graceful: no service restarted, died or was OOM-killed.
//!
//! A step that could not be measured fairly is inconclusive, not failed:
//! the generator could not offer 99 % of the target rate without being held
//! back (its own CPU), a metric a rule needs could not be read, live-safety
//! tripped, or the disk ran low. A SUT failure outranks an inconclusive
//! reason (data lost is data lost).

use crate::results::{SilenceSpan, Status, StepResult};

/// Stalls named one by one in a reason; more are counted.
const MAX_STALLS_NAMED: usize = 10;

/// "3 stalls over the 5.0 s limit (6.1 s from 10.0 s, … of the soak)" when
/// there is more than one; None for one or none.
fn several_stalls(stalls: &[&SilenceSpan], limit_s: f64) -> Option<String> {
    if stalls.len() < 2 {
        return None;
    }
    let list: Vec<String> =
        stalls.iter().take(MAX_STALLS_NAMED).map(|s| format!("{:.1} s from {:.1} s", s.len_s, s.from_soak_s)).collect();
    let more = stalls.len().saturating_sub(MAX_STALLS_NAMED);
    Some(format!(
        "{} stalls over the {limit_s:.1} s limit ({}{} of the soak)",
        stalls.len(),
        list.join(", "),
        if more > 0 { format!(" and {more} more") } else { String::new() }
    ))
}

pub const MIN_STORED_RATIO: f64 = 0.99;
pub const MIN_OFFERED_RATIO: f64 = 0.99;
pub const MIN_ACHIEVED_RATIO: f64 = 0.99;
pub const MAX_P95_LAG_S: f64 = 30.0;
pub const MAX_LAG_GROWTH_S: f64 = 10.0;
/// Held back for more than this share of the soak (and at least
/// [`MIN_HELD_BACK_S`]) is pushback.
pub const MAX_HELD_BACK_SHARE: f64 = 0.01;
pub const MIN_HELD_BACK_S: f64 = 1.0;

/// Conditions outside the step's own metrics.
#[derive(Debug, Default, Clone)]
pub struct Context {
    pub interrupted: bool,
    pub disk_low: Option<String>,
    /// A problem that stopped the step early (e.g. a plugin error).
    pub aborted: Option<String>,
    /// Failures of the SUT seen by the transport or storage (JetStream
    /// publish errors and stream limits take the place of broker drops).
    pub sut_failures: Vec<String>,
    /// Live-safety tripped: why.
    pub live_safety: Option<String>,
    /// What the SUT said when it refused readings (a few samples).
    pub refusals: Vec<String>,
    /// Limits of the stall and latency rules.
    pub rules: crate::budgets::StepRules,
    /// Storage could not be counted: the data-loss rules cannot be applied
    /// (the step is inconclusive on that, never "0 stored").
    pub stored_unmeasured: bool,
    /// An external stack with nothing watched (`--watch`): restarts, exits
    /// and OOM kills are unmeasured. The step can still pass the rules that
    /// were measured, as "pass (health not watched)", never a plain pass.
    pub health_unwatched: bool,
    /// A distributed run lost a worker or refused one at the barrier: the
    /// step's totals are incomplete, so it is inconclusive whatever else
    /// was seen, and these reasons lead.
    pub workers_unjudged: Vec<String>,
    /// Workers that could not offer their share without being held back:
    /// a generator limit, not the SUT's.
    pub workers_bound: Vec<String>,
}

/// The note every step of an unwatched external stack carries.
pub const HEALTH_NOT_WATCHED: &str = "health not watched: restarts, exits and OOM kills of the external stack are not measured (add --watch SERVICE=pid:PID, SERVICE=docker:CONTAINER or SERVICE=url:HEALTH_URL)";

/// Was the transport held back long enough to be pushback?
fn secs(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.1} s")
    }
}

pub fn held_back_too_long(held_back_s: f64, soak_s: f64) -> bool {
    held_back_s > (MAX_HELD_BACK_SHARE * soak_s).max(MIN_HELD_BACK_S)
}

/// Decide status and reasons; reasons are ordered most important first.
///
/// Long on purpose: every pass rule in the order its reason is printed, one block each, so the verdict reads top to bottom in one place; the figures the rules compare come from the named helpers around it.
pub fn decide(step: &StepResult, ctx: &Context) -> (Status, Vec<String>) {
    let mut fail = Vec::new();
    let mut inconclusive = Vec::new();

    if let Some(why) = &ctx.aborted {
        inconclusive.push(format!("step aborted: {why}"));
    }
    let g = &step.generator;
    if g.rejected > 0 {
        fail.push(format!(
            "the SUT refused {} readings ({}): answered, not acknowledged",
            g.rejected,
            if ctx.refusals.is_empty() { "no reason given".to_string() } else { ctx.refusals.join("; ") }
        ));
    }
    let i = &step.ingest;
    if ctx.stored_unmeasured {
        // Not measured: said among the inconclusive reasons.
    } else if i.acked > 0 && i.stored_ratio < MIN_STORED_RATIO {
        fail.push(format!(
            "data loss: stored {:.2}% of acked ({} of {}, {} missing)",
            i.stored_ratio * 100.0,
            i.stored,
            i.acked,
            i.acked.saturating_sub(i.stored)
        ));
    } else if i.short_seconds_count > 0 {
        fail.push(format!("data loss: {} second(s) stored < 99% of acked", i.short_seconds_count));
    }
    // The store watched like the broker: a storage stall fails whatever the
    // broker acknowledged meanwhile.
    let st = &step.store;
    let store_stalls: Vec<&SilenceSpan> = st.silences.iter().filter(|s| s.len_s > ctx.rules.silence.limit_s).collect();
    if let Some(longest) = store_stalls.iter().max_by(|a, b| a.len_s.total_cmp(&b.len_s)) {
        let others = match several_stalls(&store_stalls, ctx.rules.silence.limit_s) {
            Some(list) => format!(" (the longest of {list})"),
            None => String::new(),
        };
        fail.push(format!(
            "storage stall: {} answered nothing for {:.1} s, from {:.1} s to {:.1} s of the soak{others}",
            if st.store.is_empty() { "the store" } else { &st.store },
            longest.len_s,
            longest.from_soak_s,
            longest.to_soak_s
        ));
    }
    let a = &step.ack_latency;
    let p99 =
        a.intended.p99_s.map(|p| format!("; ack latency p99 {} from intended send time", secs(p))).unwrap_or_default();
    if let Some(silent) = a.longest_silence_s.filter(|s| *s > ctx.rules.silence.limit_s) {
        let when = match (a.silence_from_soak_s, a.silence_to_soak_s) {
            (Some(f), Some(t)) => format!(", from {f:.1} s to {t:.1} s of the soak"),
            _ => String::new(),
        };
        // Every stall over the limit, not only the longest: how many, each
        // one's length and when, then the longest in full.
        let stalls: Vec<&SilenceSpan> = a.silences.iter().filter(|s| s.len_s > ctx.rules.silence.limit_s).collect();
        let lead = match several_stalls(&stalls, ctx.rules.silence.limit_s) {
            Some(list) => format!("{list}; the longest: "),
            None => String::new(),
        };
        if a.silence_total {
            fail.push(format!("stall: {lead}the SUT acknowledged nothing for {silent:.1} s{when}{p99}"));
        } else {
            fail.push(format!(
                "stall: {lead}readings waited {silent:.1} s without an answer on one connection{when} while others were answered{p99}"
            ));
        }
    }
    if let Some(p) = a.intended.p99_s.filter(|p| *p > ctx.rules.ack_latency_p99.limit_s) {
        fail.push(format!(
            "behind schedule: ack latency p99 {} from intended send time (limit {}; service time p99 {}); the SUT accepted {:.0} readings/s of the {:.0}/s target",
            secs(p),
            secs(ctx.rules.ack_latency_p99.limit_s),
            a.service.p99_s.map(secs).unwrap_or_else(|| "n/m".into()),
            g.achieved_rps,
            step.target_rps
        ));
    }
    if step.lag.lost > 0 {
        fail.push(format!("{} lost canaries (acknowledged, not stored within the drain timeout)", step.lag.lost));
    }
    if let Some(d) = i.broker_dropped_delta {
        if d > 0.0 {
            fail.push(format!("broker dropped {d} messages (a subscriber's queue overflowed)"));
        }
    }
    let pushback = held_back_too_long(g.held_back_s, g.soak_s);
    // Refused readings are not pushback: the SUT answered them (the refusal leads).
    let short = g.achieved_ratio < MIN_ACHIEVED_RATIO && g.offered_ratio >= MIN_OFFERED_RATIO && g.rejected == 0;
    if step.target_rps > 0.0 && (pushback || short) {
        // What was held back first, then the rate: an average that met the
        // target over a soak with a long hold-back is no sign of health.
        let held = if pushback {
            format!(
                "the SUT held the transport back {:.1} s of the {:.0} s soak (in-flight window full or writes blocked){}",
                g.held_back_s,
                g.soak_s,
                if g.not_offered > 0 {
                    format!(" and {} readings were not offered by the wall-clock end", g.not_offered)
                } else {
                    String::new()
                }
            )
        } else {
            format!(
                "the SUT acknowledged fewer readings than were offered ({:.1} s held back){}",
                g.held_back_s,
                if g.not_offered > 0 { format!(", {} readings not offered", g.not_offered) } else { String::new() }
            )
        };
        fail.push(format!(
            "pushback: {held}; it accepted {:.0} readings/s of the {:.0}/s target ({:.1}%{})",
            g.achieved_rps,
            step.target_rps,
            g.achieved_ratio * 100.0,
            g.achieved_rps_min_5s.map(|m| format!(", {m:.0}/s in its slowest 5 s")).unwrap_or_default(),
        ));
    }
    if let Some(p95) = step.lag.p95_s {
        if p95 >= MAX_P95_LAG_S {
            fail.push(format!("p95 lag {p95:.1} s (limit {MAX_P95_LAG_S} s)"));
        }
    }
    if let (Some(a), Some(b)) = (step.lag.first_third_median_s, step.lag.last_third_median_s) {
        if b - a > MAX_LAG_GROWTH_S {
            fail.push(format!("growing backlog: lag median {a:.1} s -> {b:.1} s over the soak"));
        }
    }
    fail.extend(ctx.sut_failures.iter().cloned());
    for p in &step.probes {
        if !p.ok {
            fail.push(format!("probe {}: {}", p.name, p.error.clone().unwrap_or_else(|| "failed".into())));
        }
    }
    for (svc, h) in &step.containers {
        if h.restarts > 0 || h.oom_kills > 0 || h.state != "running" || !h.exits.is_empty() {
            let how = if h.exits.is_empty() { String::new() } else { format!(": {}", h.exits.join("; ")) };
            let what = if h.oom_kills > 0 {
                "OOM kill"
            } else if h.restarts > 0 {
                "restart"
            } else {
                "exit"
            };
            fail.push(format!(
                "{svc}: {what} (restarts {}, OOM kills {}, now {}){how}",
                h.restarts, h.oom_kills, h.state
            ));
        }
    }

    if step.target_rps > 0.0
        && !pushback
        && g.offered_ratio < MIN_OFFERED_RATIO
        && g.achieved_ratio < MIN_ACHIEVED_RATIO
    {
        inconclusive.push(format!(
            "generator offered {:.1}% of the target rate ({:.0} of {:.0} readings/s) without being held back by the SUT ({:.1} s): a generator limit, not the SUT's",
            g.offered_ratio * 100.0,
            g.offered_rps,
            step.target_rps,
            g.held_back_s
        ));
    }
    for what in &step.unmeasured {
        inconclusive.push(format!("not measured: {what}"));
    }
    inconclusive.extend(ctx.workers_bound.iter().cloned());
    if let Some(why) = &ctx.live_safety {
        inconclusive.push(format!("live-safety: {why}"));
    }
    if let Some(d) = &ctx.disk_low {
        inconclusive.push(format!("disk low: {d}"));
    }

    let status = if ctx.interrupted {
        Status::Interrupted
    } else if !ctx.workers_unjudged.is_empty() {
        Status::Inconclusive
    } else if !fail.is_empty() {
        Status::Fail
    } else if !inconclusive.is_empty() {
        Status::Inconclusive
    } else if ctx.health_unwatched {
        Status::PassUnwatched
    } else {
        Status::Pass
    };
    let mut reasons = Vec::new();
    if ctx.interrupted {
        reasons.push("interrupted (Ctrl-C): measured so far, not judged".into());
    }
    reasons.extend(ctx.workers_unjudged.iter().cloned());
    reasons.extend(fail);
    reasons.extend(inconclusive);
    if ctx.health_unwatched {
        reasons.push(HEALTH_NOT_WATCHED.into());
    }
    (status, reasons)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::*;

    fn good() -> StepResult {
        StepResult {
            points: 1000,
            status: Status::Pass,
            reasons: vec![],
            target_rps: 200.0,
            started_utc: String::new(),
            duration_s: 30.0,
            generator: Generator {
                achieved_rps: 200.0,
                achieved_ratio: 1.0,
                offered_rps: 200.0,
                offered_ratio: 1.0,
                soak_s: 30.0,
                ..Default::default()
            },
            ingest: Ingest {
                acked: 6000,
                stored: 6000,
                stored_ratio: 1.0,
                broker_dropped_delta: Some(0.0),
                ..Default::default()
            },
            lag: Lag {
                canaries_sent: 15,
                p95_s: Some(0.3),
                first_third_median_s: Some(0.2),
                last_third_median_s: Some(0.25),
                ..Default::default()
            },
            broker: Default::default(),
            resources: Default::default(),
            containers: Default::default(),
            samples: vec![],
            probes: vec![],
            db: Default::default(),
            durability: Default::default(),
            topology: Default::default(),
            unmeasured: vec![],
            live_safety: vec![],
            ack_latency: AckLatency {
                intended: crate::latency::Quantiles { count: 6000, p99_s: Some(0.02), ..Default::default() },
                longest_silence_s: Some(0.05),
                ..Default::default()
            },
            store: Default::default(),
            outcomes: Default::default(),
            series: Default::default(),
            canaries: vec![],
            workers: vec![],
            faults: vec![],
        }
    }

    #[test]
    fn a_lost_worker_makes_the_step_inconclusive_whatever_else_failed() {
        let mut s = good();
        s.ingest.acked = 100;
        s.ingest.stored = 50;
        s.ingest.stored_ratio = 0.5;
        let lost = "worker 2 of 3 (http://w2): lost mid-step: no heartbeat for 3 s".to_string();
        let ctx = Context { workers_unjudged: vec![lost.clone()], ..Default::default() };
        let (status, reasons) = decide(&s, &ctx);
        assert_eq!(status, Status::Inconclusive);
        assert_eq!(reasons[0], lost, "{reasons:?}");
        assert!(reasons.iter().any(|r| r.starts_with("data loss")), "the rest is still said: {reasons:?}");
        let (status, _) = decide(&good(), &Context { workers_unjudged: vec![], ..Default::default() });
        assert_eq!(status, Status::Pass);
        let bound = "generator-bound: worker 1 of 2 offered 60.0% of its share".to_string();
        let (status, reasons) = decide(&good(), &Context { workers_bound: vec![bound.clone()], ..Default::default() });
        assert_eq!((status, reasons), (Status::Inconclusive, vec![bound]));
    }

    #[test]
    fn a_stall_fails_first_and_says_when_in_the_users_words() {
        let mut s = good();
        s.ack_latency.longest_silence_s = Some(19.6);
        s.ack_latency.silence_from_soak_s = Some(40.2);
        s.ack_latency.silence_to_soak_s = Some(59.8);
        s.ack_latency.silence_total = true;
        s.ack_latency.intended.p99_s = Some(19.2);
        s.generator.held_back_s = 19.0;
        let (status, reasons) = decide(&s, &Context::default());
        assert_eq!(status, Status::Fail);
        assert_eq!(
            reasons[0],
            "stall: the SUT acknowledged nothing for 19.6 s, from 40.2 s to 59.8 s of the soak; ack latency p99 19.2 s from intended send time"
        );
        assert!(reasons[1].starts_with("behind schedule: ack latency p99 19.2 s"), "{reasons:?}");
        assert!(reasons.iter().any(|r| r.starts_with("pushback")), "pushback stays a rule of its own: {reasons:?}");
        // A 2 s hiccup passes.
        let mut s = good();
        s.ack_latency.longest_silence_s = Some(2.0);
        s.ack_latency.intended.p99_s = Some(1.4);
        assert_eq!(decide(&s, &Context::default()).0, Status::Pass);
        // The limits come from the budgets file.
        let mut ctx = Context::default();
        ctx.rules.silence.limit_s = 1.0;
        assert_eq!(decide(&s, &ctx).0, Status::Fail);
    }

    #[test]
    fn a_store_that_answered_nothing_past_the_silence_limit_fails_as_a_storage_stall() {
        let mut s = good();
        s.store.store = "PostgreSQL (service `postgres`)".into();
        s.store.silences = vec![
            SilenceSpan { from_soak_s: 5.0, to_soak_s: 7.0, len_s: 2.0 },
            SilenceSpan { from_soak_s: 25.1, to_soak_s: 45.1, len_s: 20.0 },
        ];
        let (status, reasons) = decide(&s, &Context::default());
        assert_eq!(status, Status::Fail);
        assert_eq!(
            reasons[0],
            "storage stall: PostgreSQL (service `postgres`) answered nothing for 20.0 s, from 25.1 s to 45.1 s of the soak"
        );
        // A 2 s pause of the store passes (the limit is the ack silence's).
        s.store.silences.pop();
        assert_eq!(decide(&s, &Context::default()).0, Status::Pass);
    }

    #[test]
    fn several_stalls_are_each_named_with_when() {
        let mut s = good();
        s.ack_latency.longest_silence_s = Some(6.2);
        s.ack_latency.silence_from_soak_s = Some(50.0);
        s.ack_latency.silence_to_soak_s = Some(56.2);
        s.ack_latency.silence_total = true;
        s.ack_latency.silences = vec![
            SilenceSpan { from_soak_s: 10.0, to_soak_s: 16.1, len_s: 6.1 },
            SilenceSpan { from_soak_s: 20.0, to_soak_s: 21.5, len_s: 1.5 },
            SilenceSpan { from_soak_s: 30.0, to_soak_s: 36.0, len_s: 6.0 },
            SilenceSpan { from_soak_s: 50.0, to_soak_s: 56.2, len_s: 6.2 },
        ];
        let (status, reasons) = decide(&s, &Context::default());
        assert_eq!(status, Status::Fail);
        assert!(
            reasons[0].starts_with(
                "stall: 3 stalls over the 5.0 s limit (6.1 s from 10.0 s, 6.0 s from 30.0 s, 6.2 s from 50.0 s of the soak); the longest: the SUT acknowledged nothing for 6.2 s, from 50.0 s to 56.2 s of the soak"
            ),
            "{reasons:?}"
        );
    }

    #[test]
    fn storage_that_could_not_be_counted_is_not_measured_never_zero_stored() {
        let mut s = good();
        s.ingest.stored = 0;
        s.ingest.stored_ratio = 0.0;
        s.unmeasured.push("stored readings: stream SCALE: timed out".into());
        let ctx = Context { stored_unmeasured: true, ..Default::default() };
        let (status, reasons) = decide(&s, &ctx);
        assert_eq!(status, Status::Inconclusive, "{reasons:?}");
        assert!(!reasons.iter().any(|r| r.contains("data loss")), "{reasons:?}");
        // Counted, the same numbers are loss.
        assert_eq!(decide(&s, &Context::default()).0, Status::Fail);
    }

    #[test]
    fn refused_readings_lead_and_are_not_pushback() {
        let mut s = good();
        s.generator.rejected = 4000;
        s.generator.achieved_rps = 0.0;
        s.generator.achieved_ratio = 0.0;
        let ctx = Context { refusals: vec!["HTTP 404 from api:/x".into()], ..Default::default() };
        let (status, reasons) = decide(&s, &ctx);
        assert_eq!(status, Status::Fail);
        assert!(reasons[0].starts_with("the SUT refused 4000 readings (HTTP 404"), "{reasons:?}");
        assert!(!reasons.iter().any(|r| r.contains("pushback")), "{reasons:?}");
    }

    #[test]
    fn a_clean_step_passes() {
        assert_eq!(decide(&good(), &Context::default()).0, Status::Pass);
    }

    #[test]
    fn each_rule_fails_the_step_with_its_reason() {
        type Change = Box<dyn Fn(&mut StepResult)>;
        let cases: Vec<(Change, &str)> = vec![
            (
                Box::new(|s| {
                    s.ingest.stored = 5880;
                    s.ingest.stored_ratio = 0.98;
                }),
                "data loss",
            ),
            (Box::new(|s| s.ingest.short_seconds_count = 2), "second(s)"),
            (Box::new(|s| s.lag.lost = 1), "lost canaries"),
            (Box::new(|s| s.ingest.broker_dropped_delta = Some(935.0)), "broker dropped"),
            (
                Box::new(|s| {
                    s.generator.held_back_s = 10.0;
                }),
                "pushback",
            ),
            (
                Box::new(|s| {
                    s.generator.achieved_rps = 100.0;
                    s.generator.achieved_ratio = 0.5;
                }),
                "pushback",
            ),
            (
                Box::new(|s| {
                    s.containers.insert(
                        "mosquitto".into(),
                        ServiceHealth {
                            restarts: 1,
                            state: "running".into(),
                            exits: vec!["killed by signal 9 (SIGKILL)".into()],
                            ..Default::default()
                        },
                    );
                }),
                "mosquitto: restart",
            ),
            (
                Box::new(|s| {
                    s.containers.insert(
                        "postgres".into(),
                        ServiceHealth {
                            restarts: 1,
                            oom_kills: 1,
                            oom_measured: true,
                            state: "running".into(),
                            ..Default::default()
                        },
                    );
                }),
                "postgres: OOM kill",
            ),
            (Box::new(|s| s.lag.p95_s = Some(31.0)), "p95 lag"),
            (
                Box::new(|s| {
                    s.lag.first_third_median_s = Some(1.0);
                    s.lag.last_third_median_s = Some(12.0);
                }),
                "growing backlog",
            ),
            (
                Box::new(|s| {
                    s.probes.push(ProbeResult {
                        name: "latest-all".into(),
                        ok: false,
                        error: Some("over budget".into()),
                        ..Default::default()
                    })
                }),
                "probe latest-all",
            ),
            (
                Box::new(|s| {
                    s.containers.insert(
                        "reference-historian".into(),
                        ServiceHealth { state: "exited".into(), ..Default::default() },
                    );
                }),
                "reference-historian",
            ),
        ];
        for (change, want) in cases {
            let mut s = good();
            change(&mut s);
            let (status, reasons) = decide(&s, &Context::default());
            assert_eq!(status, Status::Fail, "{want}");
            assert!(reasons[0].contains(want), "{reasons:?} should mention {want}");
        }
    }

    #[test]
    fn pushback_names_the_rate_the_sut_accepted() {
        let mut s = good();
        s.generator.held_back_s = 12.0;
        s.generator.achieved_rps = 110.0;
        s.generator.achieved_ratio = 0.55;
        s.generator.offered_ratio = 0.56;
        s.generator.achieved_rps_min_5s = Some(0.0);
        let (status, reasons) = decide(&s, &Context::default());
        assert_eq!(status, Status::Fail);
        assert!(
            reasons[0].starts_with("pushback: the SUT held the transport back 12.0 s of the"),
            "what was held back comes before any percentage: {reasons:?}"
        );
        assert!(reasons[0].contains("it accepted 110 readings/s of the 200/s target"), "{reasons:?}");
        assert!(reasons[0].contains("0/s in its slowest 5 s"), "{reasons:?}");
        // A short hold-back (under 1 % of the soak, and under 1 s) is not pushback.
        let mut s = good();
        s.generator.held_back_s = 0.2;
        assert_eq!(decide(&s, &Context::default()).0, Status::Pass);
    }

    #[test]
    fn unwatched_health_is_never_a_plain_pass() {
        let ctx = Context { health_unwatched: true, ..Default::default() };
        let (status, reasons) = decide(&good(), &ctx);
        assert_eq!(status, Status::PassUnwatched);
        assert_eq!(reasons, vec![HEALTH_NOT_WATCHED.to_string()]);
        // A failure stays a failure, with the note last.
        let mut s = good();
        s.unmeasured.push("broker drops: $SYS not readable".into());
        let (status, reasons) = decide(&s, &ctx);
        assert_eq!(status, Status::Inconclusive);
        assert_eq!(reasons.last().unwrap(), HEALTH_NOT_WATCHED);
    }

    #[test]
    fn unmeasured_is_inconclusive_never_zero() {
        let mut s = good();
        s.ingest.broker_dropped_delta = None;
        s.unmeasured.push("broker drops: $SYS not readable".into());
        let (status, reasons) = decide(&s, &Context::default());
        assert_eq!(status, Status::Inconclusive);
        assert!(reasons[0].contains("not measured: broker drops"), "{reasons:?}");
        let (status, reasons) = decide(&good(), &Context { live_safety: Some("load".into()), ..Default::default() });
        assert_eq!(status, Status::Inconclusive);
        assert!(reasons[0].starts_with("live-safety"), "{reasons:?}");
    }

    #[test]
    fn a_generator_limit_is_inconclusive_not_a_failure() {
        let mut s = good();
        s.generator.offered_ratio = 0.9;
        s.generator.offered_rps = 180.0;
        s.generator.achieved_ratio = 0.9;
        let (status, reasons) = decide(&s, &Context::default());
        assert_eq!(status, Status::Inconclusive);
        assert!(reasons[0].contains("generator offered 90.0%"), "{reasons:?}");
        let (status, _) = decide(&good(), &Context { disk_low: Some("0.5 GB free".into()), ..Default::default() });
        assert_eq!(status, Status::Inconclusive);
        // Data loss outranks a generator limit.
        s.ingest.stored_ratio = 0.5;
        assert_eq!(decide(&s, &Context::default()).0, Status::Fail);
    }

    #[test]
    fn interrupted_steps_are_not_judged() {
        let (status, reasons) = decide(&good(), &Context { interrupted: true, ..Default::default() });
        assert_eq!(status, Status::Interrupted);
        assert!(reasons[0].contains("interrupted"));
    }
}
