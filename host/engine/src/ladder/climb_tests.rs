//! The whole ladder in the fast tier: [`crate::ladder::run`] (the session
//! opened, the one-reading check, the floor, each step, the ceiling, the
//! result file) against the in-memory SUT through the session-parts seam,
//! its readings from this process or from two in-process workers through
//! the load-source seam. A throttled broker must stop the
//! climb at the same step, for the same reason, whoever offers the load;
//! each test fails if its verdict rule is taken out of `verdict.rs`.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::fake::{ladder_config, session, shipped_budgets, FakeStack, Setup, Sut};
use super::fake_workers::FakeWorkers;
use super::{LadderConfig, LocalBoxFuture, Opened, SessionParts};
use crate::load_source::{LoadSource, Local};
use crate::results::{RunResult, Status, StepResult};
use crate::services::StackServices;
use crate::stack::StackDriver;

/// Where a fake ladder's readings come from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// The ladder's own process.
    Local,
    /// That many in-process workers ([`FakeWorkers`]).
    Workers(u32),
}

/// The fast tier's session parts: fakes on `sut` where a real run has
/// plugins, a carrier and a storage counter; [`FakeWorkers`], one per URL
/// in `cfg.workers`, where it has `scalebench worker`s.
struct FakeParts(Arc<Sut>);

impl SessionParts for FakeParts {
    fn open<'a>(
        &'a self,
        cfg: &'a LadderConfig,
        _stack: &'a dyn StackDriver,
        _services: &'a Arc<StackServices>,
        watch: crate::live_safety::Watch,
    ) -> LocalBoxFuture<'a, anyhow::Result<Opened>> {
        Box::pin(async move {
            let mut session = session(&self.0, cfg, Arc::new(Local));
            session.watch = watch;
            Ok(Opened { session, plugins_used: BTreeMap::new(), sys: None })
        })
    }

    fn workers<'a>(
        &'a self,
        cfg: &'a LadderConfig,
        _stack: &'a dyn StackDriver,
    ) -> LocalBoxFuture<'a, anyhow::Result<Arc<dyn LoadSource>>> {
        let n = cfg.workers.len() as u32;
        let w = FakeWorkers::new(self.0.clone(), n, cfg.connections, cfg.inflight as usize, cfg.seed);
        Box::pin(async move { Ok(Arc::new(w) as Arc<dyn LoadSource>) })
    }
}

/// Run a whole ladder of `steps` against `sut` through [`crate::ladder::run`]
/// (the session opened, the one-reading check, the floor, each step, the
/// ceiling, the result file), its readings from `source`; the result, and
/// the result file as written.
async fn run_ladder(sut: Arc<Sut>, setup: Setup, steps: &[u64], source: Source) -> (RunResult, RunResult) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ladder_config(&setup, dir.path());
    cfg.steps = steps.to_vec();
    if let Source::Workers(n) = source {
        // `ladder::run` asks the parts for workers because the run names some.
        cfg.workers = (0..n).map(|i| format!("http://fake-worker-{i}/")).collect();
    }
    let budgets = shipped_budgets();
    let services = Arc::new(StackServices::new(BTreeMap::new(), BTreeMap::new()).unwrap());
    let mut stack = FakeStack(sut.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let result =
        crate::ladder::run(&cfg, &FakeParts(sut), &mut stack, services, &budgets, stop).await.expect("the ladder runs");
    let path = RunResult::path_in(&cfg.results_dir, &cfg.run_id);
    let written: RunResult = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (result, written)
}

fn show(step: &StepResult) -> String {
    format!("{} points, {:?}: {:#?}", step.points, step.status, step.reasons)
}

fn setup() -> Setup {
    Setup { warmup: Duration::from_secs(1), soak: Duration::from_secs(4), ..Setup::default() }
}

/// A broker that takes 1,500 readings/s: 500 points a second pass, 3,000 fail.
async fn throttled_climb(source: Source) -> (RunResult, RunResult) {
    let sut = Arc::new(Sut { rate_limit: Some(1_500.0), ..Sut::new() });
    run_ladder(sut, setup(), &[500, 3_000, 6_000], source).await
}

fn assert_the_climb_stops_at_the_throttle(r: &RunResult, written: &RunResult) {
    assert_eq!(r.steps.len(), 2, "the climb stops at the first step that fails: {:?}", r.ended_because);
    assert_eq!(r.steps[0].status, Status::Pass, "{}", show(&r.steps[0]));
    let failed = &r.steps[1];
    assert_eq!(failed.status, Status::Fail, "{}", show(failed));
    let pushback = failed.reasons.iter().find(|x| x.starts_with("pushback: ")).unwrap_or_else(|| {
        panic!("pushback named: {}", show(failed));
    });
    assert!(pushback.contains("of the 3000/s target"), "{pushback}");
    let achieved = failed.generator.achieved_rps;
    assert!((1_250.0..1_750.0).contains(&achieved), "the throttle (1,500/s) measured as {achieved}/s");
    assert_eq!(r.max_passing_points, Some(500));
    assert_eq!(r.ended_because, "step 3000 did not pass");
    assert!(r.floor.is_some(), "the floor is measured before step 1");
    // The file says what the run returned.
    assert_eq!(written.steps.len(), 2);
    assert_eq!(written.max_passing_points, Some(500));
    assert_eq!(written.ended_because, r.ended_because);
    assert!(written.finished_utc.is_some());
    for step in &r.steps {
        let o = &step.outcomes;
        assert_eq!(
            o.ok.unwrap() + o.lost.unwrap() + o.unknown + o.refused,
            step.generator.offered,
            "{}: {o:?}",
            show(step)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_broker_stops_the_climb_at_its_rate_with_the_load_from_this_process() {
    let (r, written) = throttled_climb(Source::Local).await;
    assert_the_climb_stops_at_the_throttle(&r, &written);
    assert!(r.steps.iter().all(|s| s.workers.is_empty()), "one process: no workers' rows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_broker_stops_the_climb_at_its_rate_with_the_load_from_two_workers() {
    let (r, written) = throttled_climb(Source::Workers(2)).await;
    assert_the_climb_stops_at_the_throttle(&r, &written);
    for step in &r.steps {
        assert_eq!(step.workers.len(), 2, "{}", show(step));
        // The workers offered every reading (this process only canaries),
        // each its half of the schedule.
        let offered: u64 = step.workers.iter().map(|w| w.offered).sum();
        assert_eq!(offered, step.generator.offered, "{:?}", step.workers);
        let scheduled: u64 = step.workers.iter().map(|w| w.scheduled).sum();
        assert_eq!(scheduled, step.generator.scheduled, "{:?}", step.workers);
        for w in &step.workers {
            assert!(w.scheduled.abs_diff(scheduled / 2) <= scheduled / 20, "{:?}", step.workers);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readings_dropped_behind_two_workers_fail_the_first_step_as_data_loss_counting_exactly_the_dropped() {
    let sut = Arc::new(Sut { drop_every: Some(50), ..Sut::new() });
    let (r, _) = run_ladder(sut.clone(), setup(), &[1_000, 2_000], Source::Workers(2)).await;
    assert_eq!(r.steps.len(), 1, "{:?}", r.ended_because);
    let step = &r.steps[0];
    // The floor's messages before step 1 are dropped too (every 50th
    // message): the step's are those of its load's seconds.
    let dropped: u64 = sut.dropped_by_second.lock().unwrap().range(step.series.start_unix_s..).map(|(_, n)| n).sum();
    assert!(dropped > 50, "the fault was injected ({dropped} dropped)");
    assert_eq!(step.status, Status::Fail, "{}", show(step));
    assert_eq!(step.ingest.acked - step.ingest.stored, dropped, "missing = dropped: {}", show(step));
    let loss = format!("{dropped} missing)");
    assert!(
        step.reasons.iter().any(|x| x.starts_with("data loss: ") && x.ends_with(&loss)),
        "data loss names the {dropped} dropped: {}",
        show(step)
    );
    assert_eq!(r.max_passing_points, None);
}
