//! Ladder reports: one or more results as a self-contained `report.html`
//! (inline SVG charts, inline CSS, no script, no font, nothing fetched) and a
//! `report.md` with the same charts as SVG files under `charts/`.
//!
//! A report is a view of result files: the verdict table (`table`, shared
//! with `scalebench table`), the first failure and its reason, hardware,
//! durability and the command line, then every step's ack latency and
//! outcomes (`step_facts`) and charts (`figures`, from the per-second
//! series and canaries in `series`).
//! One format per file (`html`, `markdown`); nothing in a report depends on
//! when it was rendered, so the same results give the same bytes.

pub mod figures;
pub mod html;
pub mod markdown;
pub mod series;
pub mod step_facts;
pub mod table;
pub mod versus;

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::results::{RunResult, StepResult};
use figures::Figure;

/// One run, ready to be written in any format.
pub struct RunReport<'a> {
    pub run: &'a RunResult,
    pub table: table::RunTable,
    pub ladder: Figure,
    /// Per step: the step and its charts, in `figures::STEP_CHARTS` order.
    pub steps: Vec<(&'a StepResult, Vec<Figure>)>,
}

/// A report of one or more runs.
pub struct Report<'a> {
    pub runs: Vec<RunReport<'a>>,
}

impl<'a> Report<'a> {
    pub fn build(runs: &'a [RunResult]) -> Report<'a> {
        Report {
            runs: runs
                .iter()
                .map(|r| RunReport {
                    run: r,
                    table: table::run_table(r),
                    ladder: figures::ladder(r),
                    steps: r.steps.iter().enumerate().map(|(i, s)| (s, figures::step(r, i + 1, s))).collect(),
                })
                .collect(),
        }
    }

    /// The title of the whole report.
    pub fn title(&self) -> String {
        match self.runs.as_slice() {
            [one] => format!("Ladder report: {} · {} · run {}", one.run.target, one.run.model, one.run.run_id),
            many => format!("Ladder report: {} runs", many.len()),
        }
    }
}

impl RunReport<'_> {
    /// Every figure of this run, the ladder first.
    pub fn figures(&self) -> impl Iterator<Item = &Figure> {
        std::iter::once(&self.ladder).chain(self.steps.iter().flat_map(|(_, f)| f.iter()))
    }

    /// Where a figure's SVG goes, relative to the report.
    pub fn chart_file(&self, f: &Figure) -> String {
        format!("charts/{}-{}.svg", file_safe(&self.run.run_id), f.id)
    }

    /// "Step 2,500 points: fail — data loss: …", or None when every step passed.
    pub fn first_failure(&self) -> Option<String> {
        self.run.steps.iter().find(|s| !s.status.passed()).map(|s| {
            format!(
                "{} points: {} — {}",
                crate::format::thousands(s.points),
                crate::results::Status::words(s.status),
                s.reasons.first().map(String::as_str).unwrap_or("no reason recorded")
            )
        })
    }
}

fn file_safe(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// What `write` wrote.
#[derive(Debug)]
pub struct Written {
    pub html: PathBuf,
    pub markdown: PathBuf,
    pub charts: Vec<PathBuf>,
}

/// Write `report.html`, `report.md` and `charts/*.svg` into `out`.
pub fn write(runs: &[RunResult], out: &Path) -> anyhow::Result<Written> {
    let report = Report::build(runs);
    let charts_dir = out.join("charts");
    std::fs::create_dir_all(&charts_dir).with_context(|| {
        format!("cannot create {}\nhint: choose another directory with --out", charts_dir.display())
    })?;
    let mut charts = Vec::new();
    for run in &report.runs {
        for f in run.figures() {
            if let Some(svg) = &f.svg {
                let p = out.join(run.chart_file(f));
                std::fs::write(&p, &svg.text).with_context(|| format!("cannot write {}", p.display()))?;
                charts.push(p);
            }
        }
    }
    let html = out.join("report.html");
    std::fs::write(&html, html::render(&report)).with_context(|| format!("cannot write {}", html.display()))?;
    let markdown = out.join("report.md");
    std::fs::write(&markdown, markdown::render(&report))
        .with_context(|| format!("cannot write {}", markdown.display()))?;
    Ok(Written { html, markdown, charts })
}

/// Durability as one line: "fsync on · synchronous_commit on · full_page_writes on (ingest path: on/on/on)".
pub fn durability_text(s: &StepResult) -> String {
    let d = &s.durability;
    let v = |x: &Option<String>| x.clone().unwrap_or_else(|| crate::format::NOT_MEASURED.into());
    let mut t = format!(
        "fsync {} · synchronous_commit {} · full_page_writes {}",
        v(&d.fsync),
        v(&d.synchronous_commit),
        v(&d.full_page_writes)
    );
    if d.ingest_synchronous_commit.is_some() {
        t += &format!(
            " · as the ingest session sees them: {} / {} / {}",
            v(&d.ingest_fsync),
            v(&d.ingest_synchronous_commit),
            v(&d.ingest_full_page_writes)
        );
    }
    t + &format!(" · comparable: {}", if d.comparable { "yes" } else { "no" })
}

/// Hardware facts as (name, value) pairs.
pub fn hardware_rows(r: &RunResult) -> Vec<(&'static str, String)> {
    let h = &r.hardware;
    vec![
        (
            "CPUs",
            format!(
                "{} ({})",
                h.nproc,
                if h.cpu_affinity.is_empty() {
                    "affinity unknown".into()
                } else {
                    format!("affinity {}", h.cpu_affinity)
                }
            ),
        ),
        ("CPU model", if h.cpu_model.is_empty() { "unknown".into() } else { h.cpu_model.clone() }),
        ("RAM", crate::format::bytes(h.ram_bytes as f64)),
        ("Disk free at start", crate::format::bytes(h.disk_free_bytes as f64)),
        ("Load average (1/5/15 min)", format!("{:.2} / {:.2} / {:.2}", h.load_avg_1m, h.load_avg_5m, h.load_avg_15m)),
        ("Kernel", h.kernel.clone()),
        ("Host", h.hostname.clone()),
    ]
}

/// The run's settings as (name, value) pairs.
pub fn run_rows(r: &RunResult) -> Vec<(&'static str, String)> {
    let mut rows = vec![
        ("Target", r.target.clone()),
        ("Value model", r.model.clone()),
        ("Probe set", r.probes.clone()),
        ("Stack", r.stack.clone()),
        ("Interval", crate::format::seconds(r.interval_s)),
        (
            "Warm-up / soak per step",
            format!("{} / {}", crate::format::seconds(r.warmup_s), crate::format::seconds(r.soak_s)),
        ),
        ("Started", r.started_utc.clone()),
        ("Finished", r.finished_utc.clone().unwrap_or_else(|| "not finished".into())),
        ("Ended because", r.ended_because.clone()),
    ];
    if !r.commits.is_empty() {
        rows.push(("Commits", r.commits.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")));
    }
    if !r.caps.is_empty() {
        rows.push(("Caps", r.caps.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")));
    }
    rows.push((
        "Floor (bare round trip before step 1)",
        r.floor.as_ref().map(crate::results::Floor::line).unwrap_or_else(|| "not recorded in this result".into()),
    ));
    rows
}
