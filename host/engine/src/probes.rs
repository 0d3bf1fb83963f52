//! Running a probe set's reads under load: the host runs every probe, times
//! it through [`StackServices`] (SQL probes through the SQL path, HTTP probes
//! through the HTTP path), lets the plugin judge each answer (`check`), and
//! compares the warm median with the probe's budget.
//!
//! Per probe: one cold run, then `warm_runs` warm runs, one after the other.
//! A probe passes when every run got an answer (HTTP: a 2xx status), the
//! plugin's `check` accepted every answer, and the median of the warm runs
//! is within its budget (with `warm_runs` = 0, the cold run is compared).
//! A request that fails ends that probe's runs (the next would most likely
//! fail the same way and each may cost a whole timeout); a rejected answer
//! does not, so the timings stay complete. A probe that has no budget is
//! measured and reported with `budget_s` = None, `ok` = true and a `note`.

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use plugin_runtime::probe_types::{Probe, ProbeRequest, ProbeResponse};
use plugin_runtime::ProbeSet;

use crate::budgets::Budgets;
use crate::results::ProbeResult;
use crate::services::{StackServices, PROBES_ROLE};

/// Warm runs per probe that the original Baler scale-test plan uses ("5 runs, warm median").
pub const DEFAULT_WARM_RUNS: usize = 5;

/// Median of `v` (mean of the middle two for an even count); None if empty.
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 })
}

fn run_label(i: usize) -> String {
    if i == 0 {
        "cold run".into()
    } else {
        format!("warm run {i}")
    }
}

/// One run of a probe: the answer, or why there is none (untimed: the
/// caller times it from the moment it asked, see [`Asker`]).
fn run_once(plugin: &str, probe: &Probe, services: &StackServices) -> Result<ProbeResponse, String> {
    match &probe.request {
        ProbeRequest::Sql(q) => {
            let (r, _) = services.timed_sql_as(PROBES_ROLE, plugin, &q.database, &q.statement, &q.params);
            let rows = r.map_err(|e| format!("SQL on `{}`: {e}", q.database))?;
            Ok(ProbeResponse::Sql(rows))
        }
        ProbeRequest::Http(req) => {
            let (r, _) = services.timed_http(plugin, req);
            let resp = r.map_err(|e| format!("HTTP {} {} on `{}`: {e}", req.method, req.path, req.service))?;
            if !(200..300).contains(&resp.status) {
                let body: String = String::from_utf8_lossy(&resp.body).chars().take(200).collect();
                return Err(format!(
                    "HTTP {} {} on `{}` answered status {} (a probe needs 2xx): {}",
                    req.method,
                    req.path,
                    req.service,
                    resp.status,
                    body.trim()
                ));
            }
            Ok(ProbeResponse::Http(resp))
        }
    }
}

/// A run that has not answered by this many times its budget is over
/// budget at that deadline: the probe phase never waits unbounded on a
/// frozen service.
pub const DEADLINE_BUDGETS: f64 = 10.0;
/// The deadline of a probe without a budget.
pub const DEADLINE_UNBUDGETED: Duration = Duration::from_secs(60);
/// No deadline is shorter than this (a tiny budget's deadline must not
/// turn a scheduling hiccup into "no answer").
const MIN_DEADLINE: Duration = Duration::from_secs(1);

/// The deadline of a probe with `budget_s` (None: no budget).
pub fn deadline_for(budget_s: Option<f64>) -> Duration {
    match budget_s {
        Some(b) if b.is_finite() && b > 0.0 => Duration::from_secs_f64(b * DEADLINE_BUDGETS).max(MIN_DEADLINE),
        _ => DEADLINE_UNBUDGETED,
    }
}

/// How one run ended, timed from the moment it was asked for (the
/// connection's wait, BEGIN and any queueing included) to the last byte
/// of the answer.
enum Ran {
    Answered(ProbeResponse, f64),
    Failed(String),
    /// No answer by the deadline (its length, s).
    NoAnswer(f64),
}

type Job = (String, Probe, Instant, mpsc::Sender<(Result<ProbeResponse, String>, Duration)>);

/// Runs probes on a thread of its own so a run can be given up at its
/// deadline. A run given up leaves that thread waiting on the frozen
/// service: the next run gets a fresh thread.
struct Asker {
    services: Arc<StackServices>,
    jobs: Option<mpsc::Sender<Job>>,
}

impl Asker {
    fn new(services: Arc<StackServices>) -> Asker {
        Asker { services, jobs: None }
    }

    fn worker(&mut self) -> &mpsc::Sender<Job> {
        self.jobs.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let services = self.services.clone();
            std::thread::Builder::new()
                .name("probes".into())
                .spawn(move || {
                    for (plugin, probe, asked, answer) in rx {
                        let r = run_once(&plugin, &probe, &services);
                        let _ = answer.send((r, asked.elapsed()));
                    }
                })
                .expect("starting the probe thread");
            tx
        })
    }

    fn ask(&mut self, plugin: &str, probe: &Probe, deadline: Duration) -> Ran {
        let (tx, rx) = mpsc::channel();
        let asked = Instant::now();
        if self.worker().send((plugin.to_string(), probe.clone(), asked, tx)).is_err() {
            return Ran::Failed("the probe thread stopped".into());
        }
        match rx.recv_timeout(deadline) {
            Ok((Ok(resp), took)) => Ran::Answered(resp, took.as_secs_f64()),
            Ok((Err(e), _)) => Ran::Failed(e),
            Err(_) => {
                // Stuck on the service: the next run starts on a new thread.
                self.jobs = None;
                Ran::NoAnswer(deadline.as_secs_f64())
            }
        }
    }
}

/// A single run slower than this many times its budget fails the probe
/// even when the warm median is within budget: the cold run of a probe
/// asked during an outage waits the outage out, and the warm runs after
/// it would hide that.
pub const SLOW_RUN_BUDGETS: f64 = 3.0;

/// The probe set's `setup` reads the SUT too (its points, the last hour of
/// history) under load, untimed by any budget of its own: when those reads
/// took over [`SLOW_RUN_BUDGETS`] times the set's largest budget, they are
/// reported as a failed probe named `setup` with the time they took (a
/// probe phase asked during an outage waits it out here, and the probes
/// after it would read as quick).
pub fn judge_setup(took_s: f64, probes: &[Probe], budgets: &Budgets) -> Option<ProbeResult> {
    let largest = probes.iter().filter_map(|p| budgets.get(&p.name)).map(|b| b.budget_s).fold(0.0, f64::max);
    (largest > 0.0 && took_s > largest * SLOW_RUN_BUDGETS).then(|| ProbeResult {
        name: "setup".into(),
        description: "the probe set's own reads before its probes (points, history range)".into(),
        cold_s: Some(took_s),
        ok: false,
        error: Some(format!(
            "over budget: the probe set's setup (its reads of the SUT before the probes) took {took_s:.3} s, over {SLOW_RUN_BUDGETS:.0}× the set's largest budget ({largest:.3} s)"
        )),
        ..Default::default()
    })
}

/// What a probe's error says when the load ended before it finished: its
/// timings were not taken under load, so it is unmeasured, not passed.
pub const NOT_UNDER_LOAD: &str = "did not finish while the load ran";

/// Run every probe once cold and `warm_runs` times warm; see the module docs.
/// Never fails as a whole: every problem lands in its probe's `error`.
pub fn run_probes(
    probe_set: &mut ProbeSet,
    probes: &[Probe],
    services: &Arc<StackServices>,
    budgets: &Budgets,
    warm_runs: usize,
) -> Vec<ProbeResult> {
    run_probes_until(probe_set, probes, services, budgets, warm_runs, &std::sync::atomic::AtomicBool::new(false))
}

/// [`run_probes`], but probes run only while the load runs: once `load_over`
/// is set, a probe whose runs are not all done is reported as
/// [`NOT_UNDER_LOAD`] (and the rest are not started).
///
/// Long on purpose: the probes' scheduler loop: which probe runs next, what the load's end does to the rest, and each run's outcome share the loop's state.
pub fn run_probes_until(
    probe_set: &mut ProbeSet,
    probes: &[Probe],
    services: &Arc<StackServices>,
    budgets: &Budgets,
    warm_runs: usize,
    load_over: &std::sync::atomic::AtomicBool,
) -> Vec<ProbeResult> {
    let plugin = probe_set.name().to_string();
    let budgets_file = if budgets.path.as_os_str().is_empty() {
        "the budgets file".to_string()
    } else {
        budgets.path.display().to_string()
    };
    let mut out = Vec::with_capacity(probes.len());
    let mut asker = Asker::new(services.clone());
    for probe in probes {
        let budget = budgets.get(&probe.name);
        let deadline = deadline_for(budget.map(|b| b.budget_s));
        let mut times: Vec<f64> = Vec::with_capacity(warm_runs + 1);
        let mut problems: Vec<String> = Vec::new();
        let mut first_rejection: Option<(usize, String)> = None;
        let mut rejected = 0usize;
        let mut checked = 0usize;
        let mut cut = false;
        let mut rows: Option<u64> = None;
        for i in 0..=warm_runs {
            if load_over.load(std::sync::atomic::Ordering::Relaxed) {
                cut = true;
                break;
            }
            let (resp, secs) = match asker.ask(&plugin, probe, deadline) {
                Ran::Answered(resp, secs) => (resp, secs),
                Ran::Failed(e) => {
                    problems.push(format!("error on the {}: {e}", run_label(i)));
                    break;
                }
                Ran::NoAnswer(d) => {
                    // Over budget at the deadline, whatever the other runs say.
                    times.push(d);
                    problems.push(format!(
                        "over budget: the {} had no answer within {d:.1} s{}; given up there",
                        run_label(i),
                        match budget {
                            Some(b) => format!(" ({DEADLINE_BUDGETS:.0}× its {:.3} s budget)", b.budget_s),
                            None => " (the deadline of a probe without a budget)".into(),
                        }
                    ));
                    break;
                }
            };
            times.push(secs);
            checked += 1;
            let verdict = match probe_set.check(&probe.name, &resp) {
                Ok(v) => v,
                Err(e) => Err(format!("the probe set's check could not judge it: {e}")),
            };
            // What the answer held: SQL rows, or what the probe set counts
            // in an accepted HTTP answer (unsized when it cannot tell).
            rows = match &resp {
                ProbeResponse::Sql(r) => Some(r.rows.len() as u64),
                ProbeResponse::Http(h) if verdict.is_ok() => probe_set.answer_size(&probe.name, h).ok().flatten(),
                ProbeResponse::Http(_) => None,
            };
            if let Err(reason) = verdict {
                rejected += 1;
                first_rejection.get_or_insert((i, reason));
            }
        }
        if let Some((i, reason)) = first_rejection {
            problems.push(format!("check failed on {rejected} of {checked} runs (first: {}): {reason}", run_label(i)));
        }
        // A run that ended after the load did not run under load.
        if load_over.load(std::sync::atomic::Ordering::Relaxed) {
            cut = true;
        }
        if cut {
            out.push(ProbeResult {
                name: probe.name.clone(),
                description: probe.description.clone(),
                ok: false,
                rows,
                error: Some(format!(
                    "{NOT_UNDER_LOAD} ({} of {} runs done under load)",
                    times.len().saturating_sub(1),
                    warm_runs + 1
                )),
                ..Default::default()
            });
            continue;
        }
        let cold_s = times.first().copied();
        let warm_runs_s: Vec<f64> = times.iter().skip(1).copied().collect();
        let warm_median_s = median(&warm_runs_s);
        let judged = if warm_runs == 0 { cold_s } else { warm_median_s };
        let mut note = None;
        // A run over budget by itself (a stall the warm median would hide)
        // fails the probe too: the slowest run is named with its real time.
        if let (Some(b), Some((i, t))) = (budget, times.iter().copied().enumerate().max_by(|a, b| a.1.total_cmp(&b.1)))
        {
            let already = problems.iter().any(|p| p.starts_with("over budget"));
            let judged_over = judged.is_some_and(|j| j > b.budget_s);
            if t > b.budget_s * SLOW_RUN_BUDGETS && !already && !judged_over {
                problems.push(format!(
                    "over budget: the {} took {t:.3} s, {:.0}× its {:.3} s budget ({})",
                    run_label(i),
                    t / b.budget_s,
                    b.budget_s,
                    b.source
                ));
            }
        }
        match (budget, judged) {
            (Some(b), Some(t)) if t > b.budget_s => {
                let what = if warm_runs == 0 { "cold run" } else { "warm median" };
                problems.push(format!(
                    "over budget: {what} {t:.3} s > {:.3} s budget ({}) by {:.3} s ({:.0}% over)",
                    b.budget_s,
                    b.source,
                    t - b.budget_s,
                    (t / b.budget_s - 1.0) * 100.0
                ));
            }
            (None, _) => {
                note = Some(format!("no budget for `{}` in {budgets_file}: measured, not judged", probe.name));
            }
            _ => {}
        }
        out.push(ProbeResult {
            name: probe.name.clone(),
            description: probe.description.clone(),
            cold_s,
            warm_median_s,
            warm_runs_s,
            budget_s: budget.map(|b| b.budget_s),
            budget_source: budget.map(|b| b.source.clone()),
            ok: problems.is_empty(),
            rows,
            error: if problems.is_empty() { None } else { Some(problems.join("; ")) },
            note,
        });
    }
    // The SUT's backend that served the probes keeps what their reads made
    // it allocate for as long as the connection lives: closed here, it gives
    // that back (the next step's probe set opens a new one; its cold run
    // then includes the connection, as a cold run should).
    services.close_role(PROBES_ROLE);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0, 2.0, 4.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }
}
