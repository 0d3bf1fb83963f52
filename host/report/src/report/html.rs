//! `report.html`: one self-contained page. Styles are inline, charts are
//! inline SVG, there is no script and no font or image to fetch: it opens
//! the same from a disk, an e-mail or an air-gapped machine. Each chart's
//! figure carries the values it drew as JSON in `data-series`, for a reader
//! (or a test in a browser) that reads no pixels.

use std::fmt::Write as _;

use super::figures::Figure;
use super::{durability_text, hardware_rows, run_rows, Report, RunReport};
use crate::chart::escape;
use crate::format::thousands;
use crate::results::{Status, StepResult};

const STYLE: &str = "
body { font-family: 'DejaVu Sans', Verdana, sans-serif; margin: 24px auto; max-width: 1200px; color: #222; padding: 0 16px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ccc; } h3 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; }
th { background: #f2f2f2; } td.text, th.text { text-align: left; }
tr.fail td { background: #fbe9e9; } tr.inconclusive td, tr.interrupted td { background: #fff6dd; }
.verdict { font-size: 16px; font-weight: bold; }
.badge { padding: 1px 8px; border-radius: 8px; color: #fff; font-size: 13px; }
.badge.pass { background: #3d8b4a; } .badge.fail { background: #b22222; } .badge.inconclusive, .badge.interrupted { background: #b8860b; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; font-size: 13px; }
dl.facts dt { font-weight: bold; } dl.facts dd { margin: 0; }
pre { background: #f6f6f6; padding: 8px; white-space: pre-wrap; word-break: break-all; font-size: 12px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 16px; }
figure.chart { margin: 0; border: 1px solid #e4e4e4; padding: 6px; }
figure.chart svg { width: 100%; height: auto; }
figure.chart figcaption { font-size: 12px; color: #444; margin-top: 4px; }
figure.missing { border-style: dashed; color: #666; font-size: 13px; padding: 12px; }
ul.reasons, ul.facts { font-size: 13px; }
";

pub fn render(report: &Report) -> String {
    let mut h = String::new();
    let title = escape(&report.title());
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n"
    );
    for run in &report.runs {
        render_run(run, report.runs.len() > 1, &mut h);
    }
    h.push_str("</body>\n</html>\n");
    h
}

fn class(s: Status) -> &'static str {
    crate::results::Status::words(s)
}

fn render_run(run: &RunReport, heading: bool, h: &mut String) {
    let r = run.run;
    let _ = writeln!(h, "<section class=\"run\" id=\"run-{}\">", escape(&r.run_id));
    if heading {
        let _ = writeln!(h, "<h2>Run {} · {} · {}</h2>", escape(&r.run_id), escape(&r.target), escape(&r.model));
    }
    let _ = writeln!(h, "<p class=\"verdict\">{}</p>", escape(&run.table.verdict));
    match run.first_failure() {
        Some(f) => {
            let _ = writeln!(h, "<p>First step that did not pass: {}</p>", escape(&f));
        }
        None if r.steps.is_empty() => h.push_str("<p>No step was measured.</p>\n"),
        None => h.push_str("<p>Every step passed.</p>\n"),
    }

    // The verdict table: the same cells as `scalebench table`.
    let t = &run.table;
    h.push_str("<table class=\"verdicts\">\n<tr>");
    let last = t.header.len().saturating_sub(1);
    for (i, c) in t.header.iter().enumerate() {
        let _ = write!(h, "<th{}>{}</th>", if i == last { " class=\"text\"" } else { "" }, escape(c));
    }
    h.push_str("</tr>\n");
    for (st, row) in &t.rows {
        let _ = write!(h, "<tr class=\"{}\">", class(*st));
        for (i, c) in row.iter().enumerate() {
            let _ = write!(h, "<td{}>{}</td>", if i == last || i == 1 { " class=\"text\"" } else { "" }, escape(c));
        }
        h.push_str("</tr>\n");
    }
    if t.rows.is_empty() {
        let _ = writeln!(h, "<tr><td class=\"text\" colspan=\"{}\">no steps measured</td></tr>", t.header.len());
    }
    h.push_str("</table>\n");
    if let Some(l) = &t.legend {
        let _ = writeln!(h, "<p>{}</p>", escape(&l.replace('`', "")));
    }

    h.push_str("<h3>Where it ran</h3>\n<dl class=\"facts\">\n");
    for (k, v) in hardware_rows(r).into_iter().chain(run_rows(r)) {
        let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
    }
    if let Some(s) = r.steps.first() {
        let _ = writeln!(
            h,
            "<dt>Durability ({})</dt><dd>{}</dd>",
            escape(&s.durability.scope),
            escape(&durability_text(s))
        );
    }
    h.push_str("</dl>\n");
    let _ = writeln!(h, "<p>Command line:</p>\n<pre>{}</pre>", escape(&t.command));

    h.push_str("<div class=\"charts\">\n");
    figure(&run.ladder, h);
    h.push_str("</div>\n");
    for (step, figs) in &run.steps {
        let _ = writeln!(
            h,
            "<h3 id=\"run-{}-step-{}\">{} points <span class=\"badge {}\">{}</span></h3>",
            escape(&r.run_id),
            step.points,
            thousands(step.points),
            class(step.status),
            crate::results::Status::words(step.status)
        );
        if !step.reasons.is_empty() || !step.unmeasured.is_empty() {
            h.push_str("<ul class=\"reasons\">\n");
            for reason in &step.reasons {
                let _ = writeln!(h, "<li>{}</li>", escape(reason));
            }
            for u in &step.unmeasured {
                let _ = writeln!(h, "<li>not measured: {}</li>", escape(u));
            }
            h.push_str("</ul>\n");
        }
        step_facts(step, r.floor.as_ref(), h);
        h.push_str("<div class=\"charts\">\n");
        for f in figs {
            figure(f, h);
        }
        h.push_str("</div>\n");
    }
    h.push_str("</section>\n");
}

/// A table of class `class`: `header`, then `rows` (first column text).
fn table(class: &str, header: &[&str], rows: Vec<Vec<String>>, h: &mut String) {
    let _ = write!(h, "<table class=\"{class}\">\n<tr>");
    for (i, c) in header.iter().enumerate() {
        let _ = write!(h, "<th{}>{}</th>", if i == 0 { " class=\"text\"" } else { "" }, escape(c));
    }
    h.push_str("</tr>\n");
    for row in rows {
        h.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let _ = write!(h, "<td{}>{}</td>", if i == 0 { " class=\"text\"" } else { "" }, escape(c));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}

/// The step's ack latency quantiles, silence, outcomes and canaries.
fn step_facts(step: &StepResult, floor: Option<&crate::results::Floor>, h: &mut String) {
    if let Some(rows) = super::step_facts::worker_rows(step) {
        table("workers", &super::step_facts::WORKER_HEADER, rows, h);
    }
    if let Some(rows) = super::step_facts::latency_rows(step, floor) {
        table("latency", &super::step_facts::LATENCY_HEADER, rows, h);
    }
    h.push_str("<ul class=\"facts\">\n");
    for line in super::step_facts::lines(step) {
        let _ = writeln!(h, "<li>{}</li>", escape(&line));
    }
    h.push_str("</ul>\n");
}

fn figure(f: &Figure, h: &mut String) {
    match &f.svg {
        Some(svg) => {
            let data = f.data.as_deref().map(|d| format!(" data-series=\"{}\"", escape(d))).unwrap_or_default();
            let _ = writeln!(h, "<figure class=\"chart\" data-chart=\"{}\"{data}>", escape(&f.id));
            // The SVG document inline, without its own XML prolog.
            h.push_str(svg.text.trim_start_matches("<?xml version=\"1.0\" encoding=\"UTF-8\"?>").trim());
            let _ = writeln!(h, "\n<figcaption>{}</figcaption>\n</figure>", escape(&f.caption));
        }
        None => {
            let _ = writeln!(
                h,
                "<figure class=\"missing\" data-chart=\"{}\"><strong>{}</strong>: n/m — {}. {}</figure>",
                escape(&f.id),
                escape(&f.title),
                escape(f.missing.as_deref().unwrap_or("not measured")),
                escape(&f.caption)
            );
        }
    }
}
