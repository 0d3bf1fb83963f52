//! The charts of a ladder report, from the result alone: the ladder
//! (target, accepted and stored rates per step) and, per step, acked vs
//! stored over the load, lag with its 30 s rule, CPU and memory per stack
//! service against caps, probe latencies against budgets, and how far the
//! generator fell behind its schedule. A chart with nothing measured is not
//! drawn: it says "not measured" instead (never a line at zero).

use crate::chart::{BarChart, Line, LineChart, Markers, Rule, Series, Svg};
use crate::format::{self, bytes, compact, seconds, thousands, whole};
use crate::results::{RunResult, StepResult};
use crate::verdict;

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
}

/// The chart kinds of every step, in report order.
pub const STEP_CHARTS: [&str; 6] = ["rates", "lag", "cpu", "memory", "probes", "behind"];

fn line_figure(id: String, caption: String, chart: LineChart, missing: &str) -> Figure {
    if chart.has_data() {
        Figure { id, title: chart.title.clone(), caption, svg: Some(chart.render()), missing: None }
    } else {
        Figure { id, title: chart.title.clone(), caption, svg: None, missing: Some(missing.into()) }
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
        note: match crate::report::table::ceiling(r) {
            Some(p) => format!("Highest passing step: {} points.", thousands(p)),
            None => "No step passed.".into(),
        },
        x_names: r.steps.iter().map(|s| thousands(s.points)).collect(),
        ..Default::default()
    };
    line_figure(
        "ladder".into(),
        "Where stored fell away from the target, step by step.".into(),
        chart,
        "no step was measured",
    )
}

/// Every chart of one step (`n` counts from 1).
pub fn step(r: &RunResult, n: usize, s: &StepResult) -> Vec<Figure> {
    let id = |kind: &str| format!("step{n}-{kind}");
    let sub = format!(
        "{} · {} points every {} s = {}/s · {}",
        context(r),
        thousands(s.points),
        compact(r.interval_s),
        whole(s.target_rps),
        format::status(s.status)
    );
    let soak_mark = if r.warmup_s > 0.0 { vec![(r.warmup_s, "soak starts".to_string())] } else { vec![] };
    let at = |f: &dyn Fn(&crate::results::Sample) -> Option<f64>| {
        s.samples.iter().map(|x| (x.elapsed_s, f(x))).collect::<Vec<_>>()
    };
    let i = &s.ingest;
    let mut out = Vec::new();

    // Acked vs stored.
    let loss = if i.missing_acked > 0 || i.short_seconds_count > 0 {
        format!(
            "LOSS: {} acknowledged readings not stored; {} seconds short of 99 %.",
            thousands(i.missing_acked),
            thousands(i.short_seconds_count)
        )
    } else {
        "No acknowledged reading missing.".to_string()
    };
    out.push(line_figure(
        id("rates"),
        format!(
            "Acked {} · stored {} ({} of acked, per second of payload time). {loss}",
            thousands(i.acked),
            thousands(i.stored),
            format::percent(i.stored_ratio)
        ),
        LineChart {
            title: format!("Acked vs stored readings/s — {} points", thousands(s.points)),
            subtitle: sub.clone(),
            x_label: "seconds since the load started".into(),
            y_label: "readings per second".into(),
            lines: vec![
                Line { name: "acked/s (by arrival)".into(), points: at(&|x| Some(x.acked_rps)) },
                Line { name: "stored/s (storage's own counter)".into(), points: at(&|x| x.stored_rps) },
            ],
            rules: vec![Rule { name: format!("target {}/s", whole(s.target_rps)), value: s.target_rps, limit: false }],
            x_marks: soak_mark.clone(),
            note: loss.clone(),
            ..Default::default()
        },
        "no sample was taken (the load was shorter than the sampling period)",
    ));

    // Lag.
    let mut rules = vec![Rule {
        name: format!("rule: p95 < {}", seconds(verdict::MAX_P95_LAG_S)),
        value: verdict::MAX_P95_LAG_S,
        limit: true,
    }];
    if let Some(p) = s.lag.p50_s {
        rules.push(Rule { name: format!("p50 {}", seconds(p)), value: p, limit: false });
    }
    if let Some(p) = s.lag.p95_s {
        rules.push(Rule { name: format!("p95 {}", seconds(p)), value: p, limit: false });
    }
    out.push(line_figure(
        id("lag"),
        format!(
            "Canaries sent {}, lost {}; p50 {}, p95 {}, max {} (storage polled every {}).",
            thousands(s.lag.canaries_sent),
            thousands(s.lag.lost),
            format::measured_seconds(s.lag.p50_s),
            format::measured_seconds(s.lag.p95_s),
            format::measured_seconds(s.lag.max_s),
            seconds(s.lag.poll_interval_s)
        ),
        LineChart {
            title: format!("End-to-end lag — {} points", thousands(s.points)),
            subtitle: sub.clone(),
            x_label: "seconds since the load started".into(),
            y_label: "lag of the latest canary (s)".into(),
            lines: vec![Line { name: "canary lag".into(), points: at(&|x| x.lag_s) }],
            rules,
            x_marks: soak_mark.clone(),
            note: "Lag: a canary's scheduled time to its arrival in storage. Dashed: the soak's p50/p95 and the pass rule.".into(),
            y_format: |v| format!("{} s", compact(v)),
            ..Default::default()
        },
        "no canary arrived while the load ran",
    ));

    // CPU and memory per stack service.
    let mut services: Vec<String> = Vec::new();
    for x in &s.samples {
        for k in x.cpu_percent.keys().chain(x.rss_bytes.keys()) {
            if !services.contains(k) {
                services.push(k.clone());
            }
        }
    }
    let caps = if r.caps.is_empty() {
        "caps: none recorded".to_string()
    } else {
        format!("caps: {}", r.caps.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "))
    };
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
    // Memory caps as the stack reported them per service (Docker).
    for name in &services {
        if let Some(cap) = s.samples.iter().filter_map(|x| x.mem_limit_bytes.get(name)).max() {
            mem_rules.push(Rule {
                name: format!("cap {name} {}", bytes(*cap as f64)),
                value: *cap as f64,
                limit: true,
            });
        }
    }
    let per_service = |f: &dyn Fn(&crate::results::Sample, &str) -> Option<f64>| {
        services
            .iter()
            .map(|name| Line {
                name: name.clone(),
                points: s.samples.iter().map(|x| (x.elapsed_s, f(x, name))).collect(),
            })
            .collect::<Vec<_>>()
    };
    let cpu_summary: Vec<String> = s
        .resources
        .iter()
        .map(|(k, v)| format!("{k} {:.0} % (max {:.0} %)", v.cpu_percent, v.cpu_percent_max))
        .collect();
    out.push(line_figure(
        id("cpu"),
        if cpu_summary.is_empty() {
            "CPU over the soak: not measured.".into()
        } else {
            format!("CPU over the soak: {}.", cpu_summary.join(", "))
        },
        LineChart {
            title: format!("CPU per stack service — {} points", thousands(s.points)),
            subtitle: sub.clone(),
            x_label: "seconds since the load started".into(),
            y_label: "CPU (100 % = one core)".into(),
            lines: per_service(&|x, n| x.cpu_percent.get(n).copied()),
            rules: cpu_rules,
            x_marks: soak_mark.clone(),
            note: caps.clone(),
            y_format: |v| format!("{} %", compact(v)),
            ..Default::default()
        },
        "the stack's processes are not visible to scalebench (external stack), or no sample was taken",
    ));
    let mem_summary: Vec<String> =
        s.resources.iter().map(|(k, v)| format!("{k} max {}", bytes(v.rss_bytes_max as f64))).collect();
    out.push(line_figure(
        id("memory"),
        if mem_summary.is_empty() {
            "Memory: not measured.".into()
        } else {
            format!("Resident memory: {}.", mem_summary.join(", "))
        },
        LineChart {
            title: format!("Memory (RSS) per stack service — {} points", thousands(s.points)),
            subtitle: sub.clone(),
            x_label: "seconds since the load started".into(),
            y_label: "resident memory".into(),
            lines: per_service(&|x, n| x.rss_bytes.get(n).map(|b| *b as f64)),
            rules: mem_rules,
            x_marks: soak_mark.clone(),
            note: format!("{caps} · host RAM {}", bytes(r.hardware.ram_bytes as f64)),
            y_format: bytes,
            ..Default::default()
        },
        "the stack's processes are not visible to scalebench (external stack), or no sample was taken",
    ));

    // Probes against budgets.
    let probes = BarChart {
        title: format!("Read probes under load vs budgets — {} points", thousands(s.points)),
        subtitle: sub.clone(),
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
    out.push(if probes.has_data() {
        Figure { id: id("probes"), title: probes.title.clone(), caption, svg: Some(probes.render()), missing: None }
    } else {
        Figure {
            id: id("probes"),
            title: probes.title.clone(),
            caption,
            svg: None,
            missing: Some(if s.probes.is_empty() {
                "no probe set ran in this step".into()
            } else {
                "no probe finished with a time".into()
            }),
        }
    });

    // Generator behind schedule.
    let g = &s.generator;
    out.push(line_figure(
        id("behind"),
        format!(
            "Behind schedule p95 {}, max {}; offered {} of the target; held back by the SUT {}.",
            seconds(g.behind_schedule_p95_s),
            seconds(g.behind_schedule_max_s),
            format::percent(g.offered_ratio),
            seconds(g.held_back_s)
        ),
        LineChart {
            title: format!("Generator behind its schedule — {} points", thousands(s.points)),
            subtitle: sub,
            x_label: "seconds since the load started".into(),
            y_label: "behind schedule (s)".into(),
            lines: vec![Line { name: "behind schedule".into(), points: at(&|x| Some(x.behind_schedule_s)) }],
            rules: vec![Rule {
                name: format!("p95 {}", seconds(g.behind_schedule_p95_s)),
                value: g.behind_schedule_p95_s,
                limit: false,
            }],
            x_marks: soak_mark,
            note:
                "A generator behind schedule offers less than the target: the step is then inconclusive, not a ceiling."
                    .into(),
            y_format: |v| format!("{} s", compact(v)),
            ..Default::default()
        },
        "no sample was taken (the load was shorter than the sampling period)",
    ));
    out
}
