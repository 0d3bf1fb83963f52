//! The results table of a ladder run (one row per step, the columns of the
//! original Baler scale-test plan) as data — header, rows of cells, legend,
//! verdict — and as Markdown. `scalebench table`, `run` and the reports
//! (Markdown and HTML) all show this one table; its numbers come from
//! `format`.

use std::fmt::Write as _;

use crate::format::{latency, measured, measured_seconds, percent, seconds, thousands, whole};
use crate::results::{ProbeResult, RunResult, Status, StepResult};

/// One run's table, cells as plain text (escaped by each view).
#[derive(Debug, Clone)]
pub struct RunTable {
    pub run_id: String,
    /// "nproc 2 (CPUs 0-1) · Intel Xeon …".
    pub hardware: String,
    /// "yes", "no", "no (some steps not durable)", "unknown (no steps)".
    pub durability: String,
    /// The command line, shell-quoted.
    pub command: String,
    pub header: Vec<String>,
    pub rows: Vec<(Status, Vec<String>)>,
    /// What `*` and `!` mean, when they appear.
    pub legend: Option<String>,
    /// "Highest passing step: 1,000 points. Run ended: step failed."
    pub verdict: String,
}

fn over_budget(p: &ProbeResult) -> bool {
    matches!((p.warm_median_s.or(p.cold_s), p.budget_s), (Some(t), Some(b)) if t > b)
}

/// A probe's cell: warm median (the cold run when there are no warm runs),
/// `*` when over budget, ` !` when it failed otherwise (a request error or
/// an answer the probe set rejected), "error !" when it has no time at all.
/// Returns (cell, over budget, failed otherwise).
pub fn probe_cell(p: &ProbeResult) -> (String, bool, bool) {
    let over = over_budget(p);
    // run_probes lists errors and rejections before "over budget".
    let only_over = over && p.error.as_deref().is_none_or(|e| e.starts_with("over budget"));
    let other = !p.ok && !only_over;
    let mut s = match p.warm_median_s.or(p.cold_s) {
        Some(t) => seconds(t),
        None if p.ok => return ("-".into(), false, false),
        None => return ("error !".into(), false, true),
    };
    if over {
        s.push('*');
    }
    if other {
        s += " !";
    }
    (s, over, other)
}

/// A command-line word as a shell would need it.
pub fn shell_word(a: &str) -> String {
    if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c)) {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// Whether every step ran with fsync, synchronous_commit and full_page_writes on.
pub fn durability_line(steps: &[StepResult]) -> &'static str {
    if steps.is_empty() {
        "unknown (no steps)"
    } else if steps.iter().all(|s| s.durability.comparable) {
        "yes"
    } else if steps.iter().any(|s| s.durability.comparable) {
        "no (some steps not durable)"
    } else {
        "no"
    }
}

/// Every probe name seen, in order of first appearance.
pub fn probe_names(r: &RunResult) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for s in &r.steps {
        for p in &s.probes {
            if !names.contains(&p.name) {
                names.push(p.name.clone());
            }
        }
    }
    names
}

/// The ceiling ([`RunResult::ceiling`]: the one rule everywhere).
pub fn ceiling(r: &RunResult) -> Option<u64> {
    r.ceiling()
}

/// "Highest passing step: 1,000 points.", or "…: none." and, when a step
/// passed above a failure (`--continue-on-fail`), why that is no ceiling.
pub fn ceiling_text(r: &RunResult) -> String {
    match ceiling(r) {
        Some(p) if r.ceiling_unwatched() => {
            format!("Highest passing step: {} points (health not watched).", thousands(p))
        }
        Some(p) => format!("Highest passing step: {} points.", thousands(p)),
        None if r.steps.iter().any(|s| s.status.passed()) => {
            "Highest passing step: none (a pass above a failed step is not a ceiling).".into()
        }
        None => "Highest passing step: none.".into(),
    }
}

/// Whether the run's stored rate is the one counted by payload second: no
/// step has the storage's own write counter (HTTP targets have none), and
/// some step counted stored readings.
pub fn stored_by_payload(r: &RunResult) -> bool {
    r.steps.iter().all(|s| s.ingest.stored_rps.is_none()) && r.steps.iter().any(|s| s.ingest.acked > 0)
}

pub fn run_table(r: &RunResult) -> RunTable {
    let h = &r.hardware;
    let hardware = format!(
        "nproc {} ({}) · {}",
        h.nproc,
        if h.cpu_affinity.is_empty() { "affinity unknown".to_string() } else { format!("CPUs {}", h.cpu_affinity) },
        if h.cpu_model.is_empty() { "CPU model unknown" } else { &h.cpu_model },
    );
    let command = r.command_line.iter().map(|a| shell_word(a)).collect::<Vec<_>>().join(" ");
    let names = probe_names(r);
    let by_payload = stored_by_payload(r);
    let mut header: Vec<String> = [
        "Points",
        "Status",
        "Offered/s",
        "Acked/s",
        if by_payload { "Stored/s (by payload second)" } else { "Stored/s" },
        "Stored/s per CPU",
        "Stored %",
        "p95 lag",
        "Ack p99 (from intended)",
        "Ack p50 (service)",
        "Lost canaries",
        "Broker drops",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(names.iter().cloned());
    header.push("First failure".into());

    let (mut any_over, mut any_other) = (false, false);
    let mut rows = Vec::new();
    for s in &r.steps {
        let g = &s.generator;
        let i = &s.ingest;
        let mut row = vec![
            thousands(s.points),
            crate::results::Status::words(s.status).to_string(),
            whole(g.offered_rps),
            whole(g.achieved_rps),
            if by_payload { whole(i.stored_rps_by_payload) } else { measured(i.stored_rps) },
            measured(i.stored_rps_per_host_cpu),
            if i.acked > 0 { percent(i.stored_ratio) } else { "-".into() },
            measured_seconds(s.lag.p95_s),
            latency(s.ack_latency.intended.p99_s, s.ack_latency.resolution_s.or(Some(1e-3))),
            latency(s.ack_latency.service.p50_s, s.ack_latency.resolution_s.or(Some(1e-3))),
            thousands(s.lag.lost),
            measured(i.broker_dropped_delta),
        ];
        for n in &names {
            match s.probes.iter().find(|p| &p.name == n) {
                Some(p) => {
                    let (c, over, other) = probe_cell(p);
                    any_over |= over;
                    any_other |= other;
                    row.push(c);
                }
                None => row.push("-".into()),
            }
        }
        row.push(s.reasons.first().cloned().unwrap_or_else(|| "-".into()));
        rows.push((s.status, row));
    }
    let mut legend = Vec::new();
    if any_over {
        legend.push("`*` warm median over budget");
    }
    if any_other {
        legend.push("`!` the probe failed otherwise (error or rejected answer; see `probes[].error` in the result)");
    }
    if by_payload {
        legend.push("Stored/s (by payload second): readings stored per second of soak, counted by the second in their payload (`ingest.stored_rps_by_payload`), as this target has no write counter of its own");
    }
    let floor = r.floor.as_ref().map(|f| format!("floor (the bare round trip before step 1): {}", f.line()));
    if let Some(f) = &floor {
        legend.push(f);
    }
    let legend = (!legend.is_empty()).then(|| format!("{}.", legend.join("; ")));
    let mut verdict = ceiling_text(r);
    let ended = r.ended_because.trim();
    if !(ended.is_empty() || ended == "completed") {
        let _ = write!(verdict, " Run ended: {}.", one_line(ended).trim_end_matches('.'));
    }
    RunTable {
        run_id: r.run_id.clone(),
        hardware,
        durability: durability_line(&r.steps).into(),
        command,
        header,
        rows,
        legend,
        verdict,
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// A Markdown table cell.
pub fn cell(s: &str) -> String {
    one_line(&s.replace('|', "\\|"))
}

/// The Markdown of one run: a line about the run, the table, the verdict.
pub fn markdown(t: &RunTable, out: &mut String) {
    let _ = writeln!(
        out,
        "Run {} · {} · durability comparable: {} · command: `{}`",
        t.run_id,
        t.hardware,
        t.durability,
        t.command.replace('`', "'"),
    );
    out.push('\n');
    let _ = writeln!(out, "| {} |", t.header.iter().map(|h| cell(h)).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(t.header.len()));
    for (_, row) in &t.rows {
        let _ = writeln!(out, "| {} |", row.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | "));
    }
    if t.rows.is_empty() {
        let _ = writeln!(out, "| (no steps measured) |{}", " |".repeat(t.header.len() - 1));
    }
    out.push('\n');
    if let Some(l) = &t.legend {
        let _ = writeln!(out, "{l}\n");
    }
    let _ = writeln!(out, "{}", cell(&t.verdict));
}

/// The Markdown table of every run, in the order given, separated by a blank line.
pub fn render(results: &[RunResult]) -> String {
    let mut out = String::new();
    for (i, r) in results.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        markdown(&run_table(r), &mut out);
    }
    out
}
