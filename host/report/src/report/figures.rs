//! The charts of a ladder report, from the result alone: the ladder
//! (target, accepted and stored rates per step) and, per step: offered,
//! acked, stored and refused readings per second; the ack latency p99 per
//! second; the lag of every canary (lost and unknown ones marked); CPU and
//! memory per stack service against caps; probe latencies against budgets;
//! how far the generator fell behind its schedule.
//!
//! Rates, latency and lag come from the step's per-second series and
//! canary records (`report::series`); a result written before those existed
//! falls back to its 15 s samples for rates and lag (and says so), and has
//! no latency chart. CPU, memory and behind-schedule always come from the
//! samples. A chart with nothing measured is not drawn: it says "not
//! measured" instead (never a line at zero). Every figure carries the
//! values it drew (`data`), so they can be read without the pixels.

use super::series;
use crate::chart::{BarChart, Line, LineChart, Markers, Rule, Series, Svg};
use crate::format::{self, bytes, compact, seconds, thousands, whole};
use crate::results::{RunResult, Sample, StepResult};

/// One chart of a report, rendered, or why it could not be drawn.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Stable within a report: `ladder`, `step1-rates`, `step1-lag`, …
    pub id: String,
    pub title: String,
    /// What to read from it, in a sentence.
    pub caption: String,
    pub svg: Option<Svg>,
    /// Why nothing was drawn (nothing measured, no probe set).
    pub missing: Option<String>,
    /// The values drawn, as JSON: the chart's own data plus `source` (where
    /// they come from: "per second", "per canary", "samples", "per step",
    /// "per probe"). None when nothing was drawn.
    pub data: Option<String>,
}

/// The chart kinds of every step, in report order.
pub const STEP_CHARTS: [&str; 7] = ["rates", "latency", "lag", "cpu", "memory", "probes", "behind"];

fn with_source(mut data: serde_json::Value, source: &str) -> String {
    data["source"] = source.into();
    data.to_string()
}

fn line_figure(id: String, caption: String, chart: LineChart, missing: &str, source: &str) -> Figure {
    if chart.has_data() {
        let data = Some(with_source(chart.data(), source));
        Figure { id, title: chart.title.clone(), caption, svg: Some(chart.render()), missing: None, data }
    } else {
        Figure { id, title: chart.title.clone(), caption, svg: None, missing: Some(missing.into()), data: None }
    }
}

fn context(r: &RunResult) -> String {
    format!("{} · {} · run {} · nproc {}", r.target, r.model, r.run_id, r.hardware.nproc)
}

/// Rates per step across the ladder.
pub fn ladder(r: &RunResult) -> Figure {
    let pts = |f: &dyn Fn(&StepResult) -> Option<f64>| {
        r.steps.iter().enumerate().map(|(i, s)| (i as f64, f(s))).collect::<Vec<_>>()
    };
    let chart = LineChart {
        title: "Ladder: target, accepted and stored readings/s per step".into(),
        subtitle: context(r),
        x_label: "points in the step".into(),
        y_label: "readings per second".into(),
        lines: vec![
            Line { name: "target/s".into(), points: pts(&|s| Some(s.target_rps)) },
            Line { name: "acked/s (accepted by the SUT)".into(), points: pts(&|s| Some(s.generator.achieved_rps)) },
            Line { name: "stored/s (storage's own counter)".into(), points: pts(&|s| s.ingest.stored_rps) },
        ],
        note: super::table::ceiling_text(r),
        x_names: r.steps.iter().map(|s| thousands(s.points)).collect(),
        ..Default::default()
    };
    line_figure(
        "ladder".into(),
        "Where stored fell away from the target, step by step.".into(),
        chart,
        "no step was measured",
        "per step",
    )
}

/// What every chart of a step shares.
struct StepCtx<'a> {
    r: &'a RunResult,
    s: &'a StepResult,
    n: usize,
    sub: String,
}

impl StepCtx<'_> {
    fn id(&self, kind: &str) -> String {
        format!("step{}-{kind}", self.n)
    }

    fn title(&self, what: &str) -> String {
        format!("{what} — {} points", thousands(self.s.points))
    }

    /// The soak's start on a samples chart (x = seconds since the load started).
    fn sample_marks(&self) -> Vec<(f64, String)> {
        if self.r.warmup_s > 0.0 {
            vec![(self.r.warmup_s, "soak starts".to_string())]
        } else {
            vec![]
        }
    }

    fn samples(&self, f: &dyn Fn(&Sample) -> Option<f64>) -> Vec<(f64, Option<f64>)> {
        self.s.samples.iter().map(|x| (x.elapsed_s, f(x))).collect()
    }
}

/// Every chart of one step (`n` counts from 1), in [`STEP_CHARTS`] order.
pub fn step(r: &RunResult, n: usize, s: &StepResult) -> Vec<Figure> {
    let sub = format!(
        "{} · {} points every {} s = {}/s · {}",
        context(r),
        thousands(s.points),
        compact(r.interval_s),
        whole(s.target_rps),
        crate::results::Status::words(s.status)
    );
    let c = StepCtx { r, s, n, sub };
    let (cpu, memory) = resources(&c);
    vec![rates(&c), latency(&c), lag(&c), cpu, memory, probes(&c), behind(&c)]
}

const SINCE_LOAD: &str = "seconds since the load started";

/// Offered, acked, stored and refused readings per second (samples in an older result).
fn rates(c: &StepCtx) -> Figure {
    let (s, i) = (c.s, &c.s.ingest);
    let mut loss = if i.missing_acked > 0 || i.short_seconds_count > 0 {
        format!(
            "LOSS: {} acknowledged readings not stored; {} seconds short of 99 %.",
            thousands(i.missing_acked),
            thousands(i.short_seconds_count)
        )
    } else {
        "No acknowledged reading missing.".to_string()
    };
    if let Some(gap) = series::ack_gap_text(s) {
        loss = format!("{loss} Longest gap: {gap}.");
    }
    let caption = format!(
        "Acked {} · stored {} ({} of acked, per second of payload time). {loss}",
        thousands(i.acked),
        thousands(i.stored),
        format::percent(i.stored_ratio)
    );
    let target = vec![Rule { name: format!("target {}/s", whole(s.target_rps)), value: s.target_rps, limit: false }];
    let (chart, source) = if series::has_series(s) {
        let chart = LineChart {
            title: c.title("Offered, acked and stored readings per second"),
            lines: series::rates(s),
            x_marks: series::marks(s),
            note: "Each second: offered (handed over), acked (by arrival), stored (by the payload's second).".into(),
            ..Default::default()
        };
        (chart, "per second")
    } else {
        let chart = LineChart {
            title: c.title("Acked vs stored readings/s"),
            lines: vec![
                Line { name: "acked/s (by arrival)".into(), points: c.samples(&|x| Some(x.acked_rps)) },
                Line { name: "stored/s (storage's own counter)".into(), points: c.samples(&|x| x.stored_rps) },
            ],
            x_marks: c.sample_marks(),
            note: format!("{loss} One point per sample: this result has no per-second series."),
            ..Default::default()
        };
        (chart, "samples")
    };
    let chart = LineChart {
        subtitle: c.sub.clone(),
        x_label: SINCE_LOAD.into(),
        y_label: "readings per second".into(),
        rules: target,
        ..chart
    };
    line_figure(
        c.id("rates"),
        caption,
        chart,
        "no sample was taken (the load was shorter than the sampling period)",
        source,
    )
}

/// Ack latency p99 per second, from the intended send time.
fn latency(c: &StepCtx) -> Figure {
    let a = &c.s.ack_latency;
    let mut rules = Vec::new();
    if let Some(p) = a.intended.p99_s {
        rules.push(Rule { name: format!("soak p99 {}", seconds(p)), value: p, limit: false });
    }
    let caption = if super::step_facts::latency_rows(c.s, None).is_none() {
        "Ack latency: not recorded in this result.".to_string()
    } else {
        format!(
        "Ack latency from the intended send time over the soak: p50 {}, p99 {}, max {}; from the send (service time): p99 {}. {}",
        format::measured_seconds(a.intended.p50_s),
        format::measured_seconds(a.intended.p99_s),
        format::measured_seconds(a.intended.max_s),
        format::measured_seconds(a.service.p99_s),
        super::step_facts::silence_text(c.s)
    )
    };
    let chart = LineChart {
        title: c.title("Ack latency p99 per second"),
        subtitle: c.sub.clone(),
        x_label: SINCE_LOAD.into(),
        y_label: "p99 of that second's acks (s)".into(),
        lines: vec![series::latency_p99(c.s, "p99 from intended send time")],
        rules,
        x_marks: series::marks(c.s),
        note: "Each second: p99 of the acks that arrived in it, timed from each reading's scheduled send. A gap: nothing was acknowledged.".into(),
        y_format: |v| format!("{} s", compact(v)),
        ..Default::default()
    };
    let missing = if series::has_series(c.s) {
        "nothing was acknowledged"
    } else {
        "this result has no per-second series (written by an older scalebench)"
    };
    line_figure(c.id("latency"), caption, chart, missing, "per second")
}

/// The lag of every canary (the latest per sample in an older result).
fn lag(c: &StepCtx) -> Figure {
    let s = c.s;
    // The limit the run applied, as its result recorded it.
    let mut rules: Vec<Rule> = s
        .lag
        .p95_limit_s
        .map(|l| Rule { name: format!("rule: p95 < {}", seconds(l)), value: l, limit: true })
        .into_iter()
        .collect();
    for (name, p) in [("p50", s.lag.p50_s), ("p95", s.lag.p95_s)] {
        if let Some(p) = p {
            rules.push(Rule { name: format!("{name} {}", seconds(p)), value: p, limit: false });
        }
    }
    let caption = format!(
        "Canaries sent {}, lost {}, unknown {}; p50 {}, p95 {}, max {} (storage polled every {}).",
        thousands(s.lag.canaries_sent),
        thousands(s.lag.lost),
        super::step_facts::unknown_canaries(s),
        format::measured_seconds(s.lag.p50_s),
        format::measured_seconds(s.lag.p95_s),
        format::measured_seconds(s.lag.max_s),
        seconds(s.lag.poll_interval_s)
    );
    let (chart, source) = if series::has_canaries(s) {
        let chart = LineChart {
            y_label: "lag of each canary (s)".into(),
            lines: vec![series::canary_lag(s, "canary lag (at its send time)")],
            events: series::canary_events(s, ""),
            x_marks: series::marks(s),
            note: "Lag: a canary's scheduled time to its arrival in storage, one point per canary. Dashed: the soak's p50/p95 and the pass rule.".into(),
            ..Default::default()
        };
        (chart, "per canary")
    } else {
        let chart = LineChart {
            y_label: "lag of the latest canary (s)".into(),
            lines: vec![Line { name: "canary lag".into(), points: c.samples(&|x| x.lag_s) }],
            x_marks: c.sample_marks(),
            note: "Lag of the latest canary at each sample: this result has no per-canary records.".into(),
            ..Default::default()
        };
        (chart, "samples")
    };
    let chart = LineChart {
        title: c.title("End-to-end lag"),
        subtitle: c.sub.clone(),
        x_label: SINCE_LOAD.into(),
        rules,
        y_format: |v| format!("{} s", compact(v)),
        ..chart
    };
    line_figure(c.id("lag"), caption, chart, "no canary arrived while the load ran", source)
}

/// Every stack service seen in the samples, in order of first appearance.
fn services(s: &StepResult) -> Vec<String> {
    let mut services: Vec<String> = Vec::new();
    for x in &s.samples {
        for k in x.cpu_percent.keys().chain(x.rss_bytes.keys()) {
            if !services.contains(k) {
                services.push(k.clone());
            }
        }
    }
    services
}

/// CPU and memory rules: the host's CPUs, numeric caps of the run, and
/// memory caps per service as the stack reported them (Docker).
fn resource_rules(r: &RunResult, s: &StepResult, services: &[String]) -> (Vec<Rule>, Vec<Rule>) {
    let mut cpu_rules = vec![Rule {
        name: format!("host: {} CPUs", r.hardware.nproc),
        value: r.hardware.nproc as f64 * 100.0,
        limit: true,
    }];
    let mut mem_rules = Vec::new();
    for (k, v) in &r.caps {
        // A cap is drawn only when it is a number: cores for CPU, bytes for memory.
        if let Ok(n) = v.trim().parse::<f64>() {
            if k.starts_with("cpu") {
                cpu_rules.push(Rule { name: format!("cap {k}"), value: n * 100.0, limit: true });
            } else if k.starts_with("mem") {
                mem_rules.push(Rule { name: format!("cap {k}"), value: n, limit: true });
            }
        }
    }
    for name in services {
        if let Some(cap) = s.samples.iter().filter_map(|x| x.mem_limit_bytes.get(name)).max() {
            mem_rules.push(Rule {
                name: format!("cap {name} {}", bytes(*cap as f64)),
                value: *cap as f64,
                limit: true,
            });
        }
    }
    (cpu_rules, mem_rules)
}

/// CPU and memory per stack service, from the samples.
fn resources(c: &StepCtx) -> (Figure, Figure) {
    let (r, s) = (c.r, c.s);
    let services = services(s);
    let (cpu_rules, mem_rules) = resource_rules(r, s, &services);
    let caps = if r.caps.is_empty() {
        "caps: none recorded".to_string()
    } else {
        format!("caps: {}", r.caps.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "))
    };
    let per_service = |f: &dyn Fn(&Sample, &str) -> Option<f64>| {
        services.iter().map(|name| Line { name: name.clone(), points: c.samples(&|x| f(x, name)) }).collect::<Vec<_>>()
    };
    let not_visible = "the stack's processes are not visible to scalebench (external stack), or no sample was taken";
    let cpu_summary: Vec<String> = s
        .resources
        .iter()
        .map(|(k, v)| format!("{k} {:.0} % (max {:.0} %)", v.cpu_percent, v.cpu_percent_max))
        .collect();
    let cpu = line_figure(
        c.id("cpu"),
        if cpu_summary.is_empty() {
            "CPU over the soak: not measured.".into()
        } else {
            format!("CPU over the soak: {}.", cpu_summary.join(", "))
        },
        LineChart {
            title: c.title("CPU per stack service"),
            subtitle: c.sub.clone(),
            x_label: SINCE_LOAD.into(),
            y_label: "CPU (100 % = one core)".into(),
            lines: per_service(&|x, n| x.cpu_percent.get(n).copied()),
            rules: cpu_rules,
            x_marks: c.sample_marks(),
            note: caps.clone(),
            y_format: |v| format!("{} %", compact(v)),
            ..Default::default()
        },
        not_visible,
        "samples",
    );
    let mem_summary: Vec<String> =
        s.resources.iter().map(|(k, v)| format!("{k} max {}", bytes(v.rss_bytes_max as f64))).collect();
    let memory = line_figure(
        c.id("memory"),
        if mem_summary.is_empty() {
            "Memory: not measured.".into()
        } else {
            format!("Resident memory: {}.", mem_summary.join(", "))
        },
        LineChart {
            title: c.title("Memory (RSS) per stack service"),
            subtitle: c.sub.clone(),
            x_label: SINCE_LOAD.into(),
            y_label: "resident memory".into(),
            lines: per_service(&|x, n| x.rss_bytes.get(n).map(|b| *b as f64)),
            rules: mem_rules,
            x_marks: c.sample_marks(),
            note: format!("{caps} · host RAM {}", bytes(r.hardware.ram_bytes as f64)),
            y_format: bytes,
            ..Default::default()
        },
        not_visible,
        "samples",
    );
    (cpu, memory)
}

/// Probe latencies against budgets.
fn probes(c: &StepCtx) -> Figure {
    let s = c.s;
    let chart = BarChart {
        title: c.title("Read probes under load vs budgets"),
        subtitle: c.sub.clone(),
        value_label: "seconds".into(),
        categories: s.probes.iter().map(|p| p.name.clone()).collect(),
        series: vec![
            Series {
                name: "warm median (of the warm runs)".into(),
                values: s.probes.iter().map(|p| p.warm_median_s).collect(),
            },
            Series { name: "cold (first run)".into(), values: s.probes.iter().map(|p| p.cold_s).collect() },
        ],
        log_scale: false,
        note: "Timed at mid-soak, while the load ran. A warm median past its budget fails the step.".into(),
        markers: Some(Markers { name: "budget".into(), values: s.probes.iter().map(|p| p.budget_s).collect() }),
    };
    let over: Vec<String> = s
        .probes
        .iter()
        .filter(|p| !p.ok)
        .map(|p| format!("{} ({})", p.name, p.error.as_deref().unwrap_or("failed")))
        .collect();
    let caption = if s.probes.is_empty() {
        "No probe set in this run.".to_string()
    } else if over.is_empty() {
        "Every probe answered within its budget.".into()
    } else {
        format!("Failed: {}.", over.join("; "))
    };
    let (id, title) = (c.id("probes"), chart.title.clone());
    if chart.has_data() {
        let data = Some(with_source(chart.data(), "per probe"));
        Figure { id, title, caption, svg: Some(chart.render()), missing: None, data }
    } else {
        let missing =
            if s.probes.is_empty() { "no probe set ran in this step" } else { "no probe finished with a time" };
        Figure { id, title, caption, svg: None, missing: Some(missing.into()), data: None }
    }
}

/// How far the generator fell behind its schedule, from the samples.
fn behind(c: &StepCtx) -> Figure {
    let g = &c.s.generator;
    line_figure(
        c.id("behind"),
        format!(
            "Behind schedule p95 {}, max {}; offered {} of the target; held back by the SUT {}.",
            seconds(g.behind_schedule_p95_s),
            seconds(g.behind_schedule_max_s),
            format::percent(g.offered_ratio),
            seconds(g.held_back_s)
        ),
        LineChart {
            title: c.title("Generator behind its schedule"),
            subtitle: c.sub.clone(),
            x_label: SINCE_LOAD.into(),
            y_label: "behind schedule (s)".into(),
            lines: vec![Line { name: "behind schedule".into(), points: c.samples(&|x| Some(x.behind_schedule_s)) }],
            rules: vec![Rule {
                name: format!("p95 {}", seconds(g.behind_schedule_p95_s)),
                value: g.behind_schedule_p95_s,
                limit: false,
            }],
            x_marks: c.sample_marks(),
            note:
                "A generator behind schedule offers less than the target: the step is then inconclusive, not a ceiling."
                    .into(),
            y_format: |v| format!("{} s", compact(v)),
            ..Default::default()
        },
        "no sample was taken (the load was shorter than the sampling period)",
        "samples",
    )
}
