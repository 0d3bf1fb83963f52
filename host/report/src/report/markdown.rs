//! `report.md`: the report as Markdown, charts linked as `charts/*.svg`
//! (written beside it by `report::write`).

use std::fmt::Write as _;

use super::table::{cell, markdown as table_markdown};
use super::{durability_text, hardware_rows, run_rows, Report};
use crate::format::thousands;
use crate::results::StepResult;

pub fn render(report: &Report) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# {}\n", report.title());
    for run in &report.runs {
        let r = run.run;
        if report.runs.len() > 1 {
            let _ = writeln!(m, "## Run {} · {} · {}\n", r.run_id, r.target, r.model);
        }
        let _ = writeln!(m, "**{}**\n", run.table.verdict);
        match run.first_failure() {
            Some(f) => {
                let _ = writeln!(m, "First step that did not pass: {}\n", cell(&f));
            }
            None if r.steps.is_empty() => {
                let _ = writeln!(m, "No step was measured.\n");
            }
            None => {
                let _ = writeln!(m, "Every step passed.\n");
            }
        }
        table_markdown(&run.table, &mut m);
        m.push('\n');
        let _ = writeln!(m, "### Where it ran\n");
        let _ = writeln!(m, "| | |\n|---|---|");
        for (k, v) in hardware_rows(r).into_iter().chain(run_rows(r)) {
            let _ = writeln!(m, "| {k} | {} |", cell(&v));
        }
        if let Some(s) = r.steps.first() {
            let _ = writeln!(m, "| Durability ({}) | {} |", cell(&s.durability.scope), cell(&durability_text(s)));
        }
        let _ = writeln!(m, "\nCommand line:\n\n```sh\n{}\n```\n", run.table.command);
        let _ = writeln!(m, "![{}]({})\n\n{}\n", run.ladder.title, run.chart_file(&run.ladder), run.ladder.caption);
        for (step, figs) in &run.steps {
            let _ =
                writeln!(m, "### {} points: {}\n", thousands(step.points), crate::results::Status::words(step.status));
            for reason in &step.reasons {
                let _ = writeln!(m, "- {}", cell(reason));
            }
            for u in &step.unmeasured {
                let _ = writeln!(m, "- not measured: {}", cell(u));
            }
            if !step.reasons.is_empty() || !step.unmeasured.is_empty() {
                m.push('\n');
            }
            step_facts(step, r.floor.as_ref(), &mut m);
            for f in figs {
                match (&f.svg, &f.missing) {
                    (Some(_), _) => {
                        let _ = writeln!(m, "![{}]({})\n\n{}\n", f.title, run.chart_file(f), f.caption);
                    }
                    (None, why) => {
                        let _ = writeln!(
                            m,
                            "**{}**: n/m — {}. {}\n",
                            f.title,
                            why.as_deref().unwrap_or("not measured"),
                            f.caption
                        );
                    }
                }
            }
        }
    }
    m
}

/// The step's ack latency quantiles, silence, outcomes and canaries.
/// A Markdown table of `rows` under `header`.
fn table(header: &[&str], rows: Vec<Vec<String>>, m: &mut String) {
    let _ = writeln!(m, "| {} |\n|{}", header.join(" | "), "---|".repeat(header.len()));
    for row in rows {
        let _ = writeln!(m, "| {} |", row.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | "));
    }
    m.push('\n');
}

fn step_facts(step: &StepResult, floor: Option<&crate::results::Floor>, m: &mut String) {
    if let Some(rows) = super::step_facts::worker_rows(step) {
        table(&super::step_facts::WORKER_HEADER, rows, m);
    }
    if let Some(rows) = super::step_facts::latency_rows(step, floor) {
        table(&super::step_facts::LATENCY_HEADER, rows, m);
    }
    for line in super::step_facts::lines(step) {
        let _ = writeln!(m, "{line}\n");
    }
}
