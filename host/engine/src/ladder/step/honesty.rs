//! The honesty rules as fast tests: one real step against the in-memory SUT
//! (`ladder::fake`), a fault injected, and the verdict reporting exactly
//! what was injected. Each test fails if its rule is taken out of
//! `verdict.rs`; all run at the `run` command's default connections and
//! in-flight window. The real-service calibration tests (tests/honesty.rs
//! and others) do the same against mosquitto, PostgreSQL and NATS.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::ladder::fake::{run_step, Setup, Sut, BROKER};
use crate::ladder::{Fault, FaultKind};
use crate::results::{Status, StepResult};

fn show(step: &StepResult) -> String {
    format!("{:?}: {:#?}", step.status, step.reasons)
}

/// The per-second outcomes add up to the step's: every reading offered is
/// in exactly one second's ok, lost, unknown or refused.
fn assert_outcome_series_add_up(step: &StepResult) {
    let (o, s) = (&step.outcomes, &step.series);
    let sum = |v: &Option<Vec<u64>>| v.as_ref().map(|v| v.iter().sum::<u64>());
    assert_eq!(sum(&s.ok_by_payload), o.ok, "ok by second vs the step: {s:?}");
    assert_eq!(sum(&s.lost_by_payload), o.lost, "lost by second vs the step: {s:?}");
    assert_eq!(s.unknown_by_payload.iter().sum::<u64>(), o.unknown, "unknown by second vs the step: {s:?}");
    // Acknowledged = ok + lost where the stored count was read.
    let acked = match (o.ok, o.lost) {
        (Some(ok), Some(lost)) => ok + lost,
        _ => step.ingest.acked,
    };
    assert_eq!(acked, step.ingest.acked, "{o:?} vs {:?}", step.ingest);
    assert_eq!(acked + o.unknown + o.refused, step.generator.offered, "{o:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sut_that_keeps_up_passes_with_everything_stored() {
    let sut = Arc::new(Sut::new());
    let step = run_step(sut.clone(), Setup::default()).await;
    assert_eq!(step.status, Status::Pass, "{}", show(&step));
    assert!(step.ingest.acked > 0);
    assert_eq!(step.ingest.stored, step.ingest.acked);
    assert_eq!(step.lag.lost, 0);
    assert_outcome_series_add_up(&step);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_6s_freeze_fails_as_a_stall_with_the_same_reason_at_any_window() {
    let freeze = || {
        vec![Fault {
            service: BROKER.into(),
            after: Duration::from_secs(2),
            kind: FaultKind::Freeze(Duration::from_secs(6)),
        }]
    };
    let run = |connections: u32, inflight: u16| {
        let setup = Setup { soak: Duration::from_secs(8), connections, inflight, faults: freeze(), ..Setup::default() };
        run_step(Arc::new(Sut::new()), setup)
    };
    // The default window, a small one and the largest: the verdict must not
    // depend on scalebench's own buffers.
    let (default, small, large) = tokio::join!(run(4, 4096), run(2, 64), run(8, 65535));
    for step in [&default, &small, &large] {
        assert_eq!(step.status, Status::Fail, "{}", show(step));
        assert!(
            step.reasons[0].starts_with("stall: the SUT acknowledged nothing for"),
            "the stall leads: {}",
            show(step)
        );
        let silent = step.ack_latency.longest_silence_s.unwrap();
        assert!((5.5..7.5).contains(&silent), "the 6 s freeze measured as {silent} s");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freeze_is_injected_on_time_while_a_slow_count_holds_the_sample() {
    // The storage takes 1.8 s to count (below the sample's 2 s limit), and
    // the step samples every second: the freeze due at 2 s of load must not
    // wait for the sample.
    let sut = Arc::new(Sut { slow_count: Some(Duration::from_millis(1_800)), ..Sut::new() });
    let faults = vec![Fault {
        service: BROKER.into(),
        after: Duration::from_millis(2_300),
        kind: FaultKind::Freeze(Duration::from_secs(3)),
    }];
    let step = run_step(sut, Setup { soak: Duration::from_secs(6), faults, ..Setup::default() }).await;
    let at = |action: &str| step.faults.iter().find(|f| f.action == action).map(|f| f.at_load_s);
    let (froze, thawed) = (at("freeze").expect("freeze recorded"), at("thaw").expect("thaw recorded"));
    assert!((2.3..2.6).contains(&froze), "the freeze due at 2.3 s of load came at {froze} s: {:?}", step.faults);
    assert!((5.3..5.6).contains(&thawed), "the thaw due at 5.3 s of load came at {thawed} s: {:?}", step.faults);
    // The silence is the freeze's, from when it was injected (the soak starts at 1 s of load).
    let from = step.ack_latency.silence_from_soak_s.unwrap();
    assert!((from - (froze - 1.0)).abs() < 0.5, "silence from {from} s of the soak, freeze at {froze} s of load");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_throttled_to_half_the_rate_fails_as_pushback_and_loses_nothing() {
    let sut = Arc::new(Sut { rate_limit: Some(1_000.0), ..Sut::new() });
    let step = run_step(sut.clone(), Setup::default()).await;
    assert_eq!(step.status, Status::Fail, "{}", show(&step));
    let pushback = step.reasons.iter().find(|r| r.starts_with("pushback: ")).unwrap_or_else(|| {
        panic!("pushback named: {}", show(&step));
    });
    assert!(pushback.contains("of the 2000/s target"), "{pushback}");
    let achieved = step.generator.achieved_rps;
    assert!((850.0..1_150.0).contains(&achieved), "the throttle (1,000/s) measured as {achieved}/s");
    assert!(step.reasons.iter().all(|r| !r.starts_with("data loss")), "{}", show(&step));
    assert_eq!(step.ingest.stored, step.ingest.acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_reading_in_50_dropped_fails_as_data_loss_counting_exactly_the_dropped() {
    let sut = Arc::new(Sut { drop_every: Some(50), ..Sut::new() });
    let step = run_step(sut.clone(), Setup::default()).await;
    let dropped = sut.dropped.load(Ordering::Relaxed);
    assert!(dropped > 100, "the fault was injected ({dropped} dropped)");
    assert_eq!(step.status, Status::Fail, "{}", show(&step));
    assert_eq!(step.ingest.acked - step.ingest.stored, dropped, "missing = dropped: {}", show(&step));
    let loss = format!("{} missing)", dropped);
    assert!(
        step.reasons.iter().any(|r| r.starts_with("data loss: stored 98.") && r.ends_with(&loss)),
        "data loss names the {dropped} dropped: {}",
        show(&step)
    );
    assert_outcome_series_add_up(&step);
    let lost = step.series.lost_by_payload.as_ref().unwrap();
    assert!(lost.iter().filter(|n| **n > 0).count() >= 3, "loss shows in the seconds it happened: {lost:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_readings_lead_the_verdict_with_their_exact_count_and_the_reason_given() {
    let sut = Arc::new(Sut { refuse_every: Some(100), ..Sut::new() });
    let step = run_step(sut.clone(), Setup::default()).await;
    let refused = sut.refused.load(Ordering::Relaxed);
    assert!(refused > 50, "the fault was injected ({refused} refused)");
    assert_eq!(step.status, Status::Fail, "{}", show(&step));
    assert_eq!(step.generator.rejected, refused);
    assert!(
        step.reasons[0].starts_with(&format!("the SUT refused {refused} readings (quota exceeded")),
        "the refusal leads: {}",
        show(&step)
    );
    assert!(step.reasons.iter().all(|r| !r.starts_with("pushback")), "refusals are not pushback: {}", show(&step));
    assert_outcome_series_add_up(&step);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_count_that_cannot_be_read_is_inconclusive_never_zero() {
    let sut = Arc::new(Sut { hide_stored: true, ..Sut::new() });
    let step = run_step(sut.clone(), Setup::default()).await;
    assert_eq!(step.status, Status::Inconclusive, "{}", show(&step));
    assert!(
        step.reasons.iter().any(|r| r.starts_with("not measured: stored readings: the fake store does not answer")),
        "{}",
        show(&step)
    );
    assert!(step.reasons.iter().all(|r| !r.starts_with("data loss")), "{}", show(&step));
    assert_eq!(step.series.ok_by_payload, None, "unmeasured, never zeros");
    assert_eq!(step.series.lost_by_payload, None, "unmeasured, never zeros");
    // The step's own outcomes too: its acknowledged readings are neither
    // ok nor lost, and nothing offered goes unclassified.
    assert_eq!((step.outcomes.ok, step.outcomes.lost), (None, None), "unmeasured, never zero");
    assert!(step.ingest.acked > 0, "{}", show(&step));
    assert_outcome_series_add_up(&step);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_count_that_answers_after_a_few_failed_reads_is_measured() {
    // A stream whose whole cluster restarted has no leader for a while:
    // the count is asked again, and what it then answers is the count.
    let sut = Arc::new(Sut { count_unreadable_reads: 3.into(), ..Sut::new() });
    let step = run_step(sut.clone(), Setup::default()).await;
    assert_eq!(sut.count_unreadable_reads.load(Ordering::Relaxed), 0, "the fault was injected");
    assert_eq!(step.status, Status::Pass, "{}", show(&step));
    assert!(step.ingest.acked > 0 && step.ingest.stored == step.ingest.acked, "{:?}", step.ingest);
    assert_eq!(step.outcomes.ok, Some(step.ingest.acked));
    assert_outcome_series_add_up(&step);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_of_each_reading_twice_is_never_stored_and_is_said_beyond_the_acks() {
    let sut = Arc::new(Sut { count_times: Some(2), ..Sut::new() });
    let step = run_step(sut.clone(), Setup::default()).await;
    let i = &step.ingest;
    assert!(i.acked > 0, "{}", show(&step));
    // A second's acks cap what counts as stored: a double count hides no loss …
    assert_eq!(i.stored, i.acked, "{}", show(&step));
    // … and what it counted beyond them is said, exactly.
    assert_eq!(i.stored_beyond_acked, i.acked, "{}", show(&step));
    let once = run_step(Arc::new(Sut::new()), Setup::default()).await;
    assert_eq!(once.ingest.stored_beyond_acked, 0, "{}", show(&once));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_broker_fails_the_step_naming_the_restart() {
    let sut = Arc::new(Sut::new());
    let kill = Fault { service: BROKER.into(), after: Duration::from_secs(2), kind: FaultKind::Kill };
    let step = run_step(sut.clone(), Setup { faults: vec![kill], ..Setup::default() }).await;
    assert_eq!(step.status, Status::Fail, "{}", show(&step));
    assert!(
        step.reasons.contains(&"broker: restart (restarts 1, OOM kills 0, now running): killed by SIGKILL".to_string()),
        "{}",
        show(&step)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_never_injected_leaves_the_step_inconclusive() {
    let sut = Arc::new(Sut::new());
    let late = Fault { service: BROKER.into(), after: Duration::from_secs(3600), kind: FaultKind::Kill };
    let step = run_step(sut.clone(), Setup { faults: vec![late], ..Setup::default() }).await;
    assert_eq!(step.status, Status::Inconclusive, "{}", show(&step));
    assert!(
        step.reasons
            .iter()
            .any(|r| r.starts_with("not measured: fault kill broker at ") && r.contains("never injected")),
        "{}",
        show(&step)
    );
    assert_eq!(sut.health.lock().unwrap().restarts, 0);
}
