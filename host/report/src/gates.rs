//! CI gates on results: a required ceiling for `run`, regressions against
//! the first run for `compare`, and both as JUnit XML so a CI system shows
//! each step's verdict. A failed gate is exit status 3 (k6 uses 99 for its
//! thresholds; 1 and 2 are already errors and usage here).

use std::path::Path;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use crate::format::thousands;
use crate::results::{RunResult, Status, StepResult};

pub use crate::error::{GateFailed, EXIT_GATE};

/// Why a run does not meet `--require-ceiling points`; None when it does.
pub fn ceiling_breach(r: &RunResult, points: u64) -> Option<String> {
    if let Some(last) = r.steps.last().filter(|s| s.status == Status::Inconclusive) {
        let why = last.reasons.first().map(|w| format!(": {w}")).unwrap_or_default();
        return Some(format!(
            "the ladder ended inconclusive at {} points{why}, so its ceiling is not a measurement",
            thousands(last.points)
        ));
    }
    match r.ceiling() {
        Some(c) if c >= points => None,
        Some(c) => Some(format!("the ceiling is {} points, below the required {}", thousands(c), thousands(points))),
        None => Some(format!("no step passed; {} points were required", thousands(points))),
    }
}

/// Stored readings per second of a step: the storage's own counter when it
/// has one, else by payload second.
fn stored_per_s(s: &StepResult) -> Option<f64> {
    s.ingest.stored_rps.or((s.ingest.stored_rps_by_payload > 0.0).then_some(s.ingest.stored_rps_by_payload))
}

/// One figure compared between the baseline and another run.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// "ceiling", or "<points> points: stored/s", "<points> points: ack p99".
    pub name: String,
    pub breach: Option<String>,
}

/// Every comparison of `other` with `base` at `pct` percent, breaches named.
pub fn regressions(base: &RunResult, other: &RunResult, pct: f64) -> Vec<Comparison> {
    let mut out = Vec::new();
    let label = &other.run_id;
    let (cb, co) = (base.ceiling().unwrap_or(0), other.ceiling().unwrap_or(0));
    out.push(Comparison {
        name: "ceiling".into(),
        breach: (co < cb)
            .then(|| format!("{label}: the ceiling fell from {} to {} points", thousands(cb), thousands(co))),
    });
    for a in &base.steps {
        let Some(b) = other.steps.iter().find(|s| s.points == a.points) else { continue };
        let step = format!("{} points", thousands(a.points));
        if let (Some(x), Some(y)) = (stored_per_s(a), stored_per_s(b)) {
            let fell = if x > 0.0 { (x - y) / x * 100.0 } else { 0.0 };
            out.push(Comparison {
                name: format!("{step}: stored/s"),
                breach: (fell > pct).then(|| {
                    format!(
                        "{label}, step {step}: stored/s fell {fell:.1} % ({} → {})",
                        thousands(x as u64),
                        thousands(y as u64)
                    )
                }),
            });
        }
        if let (Some(x), Some(y)) = (a.ack_latency.intended.p99_s, b.ack_latency.intended.p99_s) {
            let rose = if x > 0.0 { (y - x) / x * 100.0 } else { 0.0 };
            out.push(Comparison {
                name: format!("{step}: ack p99 from the intended send time"),
                breach: (rose > pct).then(|| {
                    format!(
                        "{label}, step {step}: ack p99 from the intended send time rose {rose:.1} % ({} → {})",
                        crate::format::latency(Some(x), a.ack_latency.resolution_s),
                        crate::format::latency(Some(y), b.ack_latency.resolution_s)
                    )
                }),
            });
        }
    }
    out
}

/// A run as JUnit XML: one test case per step (a failed step fails, an
/// inconclusive one is skipped with its reason), and the ceiling gate as
/// one more when required.
pub fn run_junit(r: &RunResult, required: Option<u64>) -> Report {
    let mut suite = TestSuite::new(format!("scalebench run {}", r.run_id));
    for s in &r.steps {
        let name = format!("{} points", thousands(s.points));
        let reasons = s.reasons.join("; ");
        let status = match s.status {
            st if st.passed() => TestCaseStatus::success(),
            Status::Fail => failure(&reasons),
            _ => {
                let mut st = TestCaseStatus::skipped();
                st.set_message(format!("inconclusive: {reasons}"));
                st
            }
        };
        let mut case = TestCase::new(name, status);
        case.set_classname(format!("{}.{}", r.target, r.model));
        case.set_time(std::time::Duration::from_secs_f64(s.duration_s.max(0.0)));
        suite.add_test_case(case);
    }
    if let Some(points) = required {
        let status = match ceiling_breach(r, points) {
            None => TestCaseStatus::success(),
            Some(b) => failure(&b),
        };
        suite.add_test_case(TestCase::new(format!("ceiling at least {} points", thousands(points)), status));
    }
    let mut report = Report::new("scalebench");
    report.add_test_suite(suite);
    report
}

/// A comparison as JUnit XML: a suite per compared run, a case per figure.
pub fn compare_junit(base: &RunResult, others: &[(&RunResult, Vec<Comparison>)]) -> Report {
    let mut report = Report::new("scalebench compare");
    for (r, cmp) in others {
        let mut suite = TestSuite::new(format!("{} against {}", r.run_id, base.run_id));
        for c in cmp {
            let status = match &c.breach {
                None => TestCaseStatus::success(),
                Some(b) => failure(b),
            };
            suite.add_test_case(TestCase::new(c.name.clone(), status));
        }
        report.add_test_suite(suite);
    }
    report
}

fn failure(message: &str) -> TestCaseStatus {
    let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
    st.set_message(message.to_string());
    st
}

/// Write a JUnit report atomically.
pub fn write_junit(report: &Report, path: &Path) -> anyhow::Result<()> {
    let xml = report.to_string().map_err(|e| anyhow::anyhow!("cannot write JUnit XML: {e}"))?;
    crate::atomic_file::write(path, xml.as_bytes()).map_err(|e| {
        anyhow::anyhow!("cannot write {}: {e}\nhint: check the directory exists and is writable", path.display())
    })
}
