//! Ladder results side by side: per step, stored/s, accepted/s, p95 lag,
//! every probe, the stack's memory and the storage's size, one column per
//! run (named by target, run or model) and the change from the first run
//! with its sign. Overlaid charts of the same, and per step size the
//! runs' acked readings and ack latency p99 per second and every canary's
//! lag (where the results hold per-second series). The columns of the original
//! "Baler vs Haxall" comparison; also this week's build against last week's,
//! plant-shaped data against noise.
//!
//! Runs are compared only when they ran on the same hardware and with the
//! same durability settings (where both were read); otherwise `compare`
//! refuses unless told, and then says so at the top of its output.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::chart::{BarChart, Events, Line, LineChart, Series, Svg};
use crate::format::{self, bytes, compact, delta, seconds, thousands};
use crate::report::series;
use crate::report::table::cell;
use crate::results::{RunResult, StepResult};

/// What names a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// The target adapter (e.g. baler vs nats-jetstream).
    Target,
    /// The run id (e.g. this week's build vs last week's).
    Run,
    /// The value model (e.g. plant-shaped vs noise).
    Model,
}

/// Runs that should not be compared without saying so.
#[derive(Debug, thiserror::Error)]
#[error(
    "these runs are not comparable: {}\nhint: compare runs made on one host with the same durability settings, or pass --allow-different-hosts to compare them anyway (the output will say they differ)",
    .differences.join("; ")
)]
pub struct NotComparable {
    pub differences: Vec<String>,
}

/// Runs lined up for comparison.
pub struct Comparison<'a> {
    pub runs: &'a [RunResult],
    pub by: By,
    /// Column name of each run.
    pub labels: Vec<String>,
    /// How hardware or durability differ (empty: they do not).
    pub differences: Vec<String>,
    /// What could not be checked (e.g. durability a target does not report).
    pub unchecked: Vec<String>,
}

/// Hardware as compared: CPUs, CPU model, affinity, RAM (within 5 %).
fn hardware_differences(runs: &[RunResult], labels: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let (a, la) = (&runs[0].hardware, &labels[0]);
    for (r, l) in runs.iter().zip(labels).skip(1) {
        let b = &r.hardware;
        if a.nproc != b.nproc {
            out.push(format!("{la} ran on {} CPUs, {l} on {}", a.nproc, b.nproc));
        }
        if a.cpu_model != b.cpu_model {
            out.push(format!("{la} ran on {}, {l} on {}", a.cpu_model, b.cpu_model));
        }
        if a.cpu_affinity != b.cpu_affinity {
            out.push(format!("{la} ran on CPUs {}, {l} on CPUs {}", a.cpu_affinity, b.cpu_affinity));
        }
        let (ra, rb) = (a.ram_bytes as f64, b.ram_bytes as f64);
        if (ra - rb).abs() > 0.05 * ra.max(rb) {
            out.push(format!("{la} had {} of RAM, {l} {}", bytes(ra), bytes(rb)));
        }
    }
    out
}

/// The durability settings a run read (first step), by name; None when not read.
fn durability(r: &RunResult) -> Vec<(&'static str, Option<String>)> {
    let d = r.steps.first().map(|s| s.durability.clone()).unwrap_or_default();
    vec![
        ("fsync", d.ingest_fsync.or(d.fsync)),
        ("synchronous_commit", d.ingest_synchronous_commit.or(d.synchronous_commit)),
        ("full_page_writes", d.ingest_full_page_writes.or(d.full_page_writes)),
    ]
}

fn durability_differences(runs: &[RunResult], labels: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut differ, mut unchecked) = (Vec::new(), Vec::new());
    let base = durability(&runs[0]);
    for (i, (r, l)) in runs.iter().zip(labels).enumerate() {
        let d = durability(r);
        if d.iter().all(|(_, v)| v.is_none()) {
            unchecked.push(format!("{l}: durability settings not read (this target reports none), so not compared"));
            continue;
        }
        if i == 0 {
            continue;
        }
        for ((name, a), (_, b)) in base.iter().zip(&d) {
            if let (Some(a), Some(b)) = (a, b) {
                if a != b {
                    differ.push(format!("{name} was {a} for {}, {b} for {l}", labels[0]));
                }
            }
        }
    }
    (differ, unchecked)
}

/// Runs whose connections to the SUT differ in TLS are different set-ups:
/// TLS costs CPU on both ends.
fn tls_differences(runs: &[RunResult], labels: &[String]) -> Vec<String> {
    let describe = |r: &RunResult| -> String {
        if r.tls.is_empty() {
            "no TLS".into()
        } else {
            r.tls.keys().map(|k| format!("TLS on {k}")).collect::<Vec<_>>().join(", ")
        }
    };
    let base = describe(&runs[0]);
    runs.iter()
        .zip(labels)
        .skip(1)
        .filter_map(|(r, l)| {
            let d = describe(r);
            (d != base).then(|| format!("{} used {base}, {l} {d}", labels[0]))
        })
        .collect()
}

/// The axis the runs differ on, when not given: target, then model, then run.
fn infer_by(runs: &[RunResult]) -> By {
    if runs.iter().any(|r| r.target != runs[0].target) {
        By::Target
    } else if runs.iter().any(|r| r.model != runs[0].model) {
        By::Model
    } else {
        By::Run
    }
}

impl<'a> Comparison<'a> {
    /// Line the runs up; refuse runs that are not comparable unless `allow_different_hosts`.
    pub fn new(
        runs: &'a [RunResult],
        by: Option<By>,
        allow_different_hosts: bool,
    ) -> Result<Comparison<'a>, NotComparable> {
        assert!(runs.len() >= 2, "compare needs two runs");
        let by = by.unwrap_or_else(|| infer_by(runs));
        let name = |r: &RunResult| match by {
            By::Target => r.target.clone(),
            By::Run => r.run_id.clone(),
            By::Model => r.model.clone(),
        };
        let mut labels: Vec<String> = runs.iter().map(name).collect();
        // Two runs with the same name get their run ids.
        for i in 0..labels.len() {
            if labels.iter().filter(|l| **l == labels[i]).count() > 1 && by != By::Run {
                let dup = labels[i].clone();
                for (j, r) in runs.iter().enumerate() {
                    if labels[j] == dup {
                        labels[j] = format!("{dup} ({})", r.run_id);
                    }
                }
            }
        }
        let mut differences = hardware_differences(runs, &labels);
        let (d, unchecked) = durability_differences(runs, &labels);
        differences.extend(d);
        differences.extend(tls_differences(runs, &labels));
        if !differences.is_empty() && !allow_different_hosts {
            return Err(NotComparable { differences });
        }
        Ok(Comparison { runs, by, labels, differences, unchecked })
    }

    /// Every step size any run measured, ascending.
    fn points(&self) -> Vec<u64> {
        let mut p: Vec<u64> = self.runs.iter().flat_map(|r| r.steps.iter().map(|s| s.points)).collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    fn step(r: &RunResult, points: u64) -> Option<&StepResult> {
        r.steps.iter().find(|s| s.points == points)
    }

    fn probe_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for r in self.runs {
            for n in crate::report::table::probe_names(r) {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        names
    }

    /// One table: a row per step, a column per run, then the change of every
    /// other run from the first.
    fn table(&self, out: &mut String, title: &str, value: &dyn Fn(&StepResult) -> Option<f64>, fmt: fn(f64) -> String) {
        let _ = writeln!(out, "### {title}\n");
        let mut header = vec!["Points".to_string()];
        header.extend(self.labels.iter().map(|l| cell(l)));
        header.extend(self.labels.iter().skip(1).map(|l| format!("Δ {} vs {}", cell(l), cell(&self.labels[0]))));
        let _ = writeln!(out, "| {} |\n|{}", header.join(" | "), "---|".repeat(header.len()));
        for p in self.points() {
            let vals: Vec<Option<Option<f64>>> = self.runs.iter().map(|r| Self::step(r, p).map(value)).collect();
            let mut row = vec![thousands(p)];
            for v in &vals {
                row.push(match v {
                    None => "not run".into(),
                    Some(None) => format::NOT_MEASURED.into(),
                    Some(Some(x)) => fmt(*x),
                });
            }
            for v in vals.iter().skip(1) {
                row.push(match (v, &vals[0]) {
                    (Some(a), Some(b)) => delta(*a, *b, fmt),
                    _ => "-".into(),
                });
            }
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        out.push('\n');
    }

    /// How far apart two runs' latencies must be to be a change: the
    /// histograms' resolution, or the spread (p50 to p90) of either run's
    /// floor, whichever is larger.
    fn latency_noise_s(a: &RunResult, b: &RunResult) -> f64 {
        let spread = |r: &RunResult| {
            r.floor.as_ref().and_then(|f| Some(f.round_trip.p90_s? - f.round_trip.p50_s?)).unwrap_or(0.0)
        };
        let resolution = |r: &RunResult| r.steps.iter().find_map(|s| s.ack_latency.resolution_s).unwrap_or(1e-3);
        resolution(a).max(resolution(b)).max(spread(a)).max(spread(b))
    }

    /// A latency table: values in their unit (below the resolution as
    /// "< 1 µs"), and a change from the first run only when it is larger
    /// than the resolution and the floors' spread ("no measurable change").
    fn latency_table(&self, out: &mut String, title: &str, value: &dyn Fn(&StepResult) -> Option<f64>) {
        let _ = writeln!(out, "### {title}\n");
        let mut header = vec!["Points".to_string()];
        header.extend(self.labels.iter().map(|l| cell(l)));
        header.extend(self.labels.iter().skip(1).map(|l| format!("Δ {} vs {}", cell(l), cell(&self.labels[0]))));
        let _ = writeln!(out, "| {} |\n|{}", header.join(" | "), "---|".repeat(header.len()));
        let floor_row = self.runs.iter().any(|r| r.floor.is_some());
        let mut rows: Vec<(String, Vec<Option<Option<f64>>>)> = Vec::new();
        for p in self.points() {
            rows.push((thousands(p), self.runs.iter().map(|r| Self::step(r, p).map(value)).collect()));
        }
        if floor_row {
            let floors = self.runs.iter().map(|r| Some(r.floor.as_ref().and_then(|f| f.round_trip.p50_s))).collect();
            rows.push(("floor p50".into(), floors));
        }
        for (name, vals) in rows {
            let mut row = vec![name];
            for (v, r) in vals.iter().zip(self.runs) {
                let res = r.steps.iter().find_map(|s| s.ack_latency.resolution_s).or(Some(1e-3));
                row.push(match v {
                    None => "not run".into(),
                    Some(x) => format::latency(*x, res),
                });
            }
            for (i, v) in vals.iter().enumerate().skip(1) {
                let noise = Self::latency_noise_s(&self.runs[0], &self.runs[i]);
                row.push(match (v, &vals[0]) {
                    (Some(Some(a)), Some(Some(b))) if (a - b).abs() <= noise => {
                        format!("no measurable change (within {})", format::latency(Some(noise), None))
                    }
                    (Some(Some(a)), Some(Some(b))) => {
                        let d = a - b;
                        format!("{}{}", if d > 0.0 { "+" } else { "−" }, format::latency(Some(d.abs()), None))
                    }
                    (Some(_), Some(_)) => format::NOT_MEASURED.into(),
                    _ => "-".into(),
                });
            }
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        out.push('\n');
    }

    /// The comparison as Markdown: what is compared, host check, then one table per measure.
    pub fn markdown(&self) -> String {
        let mut m = String::new();
        let by = match self.by {
            By::Target => "target",
            By::Run => "run",
            By::Model => "value model",
        };
        let _ = writeln!(m, "## Comparison by {by}: {}\n", self.labels.join(" vs "));
        for (r, l) in self.runs.iter().zip(&self.labels) {
            let _ = writeln!(
                m,
                "- {l}: run {}, target {}, model {}, steps: {}, highest passing step: {}",
                r.run_id,
                r.target,
                r.model,
                r.steps.len(),
                crate::report::table::ceiling(r)
                    .map(|p| format!("{} points", thousands(p)))
                    .unwrap_or_else(|| "none".into())
            );
        }
        m.push('\n');
        if self.differences.is_empty() {
            let h = &self.runs[0].hardware;
            let _ =
                writeln!(m, "Same hardware: {} CPUs ({}), {} of RAM.", h.nproc, h.cpu_model, bytes(h.ram_bytes as f64));
        } else {
            let _ = writeln!(
                m,
                "**Not like for like** (compared anyway, as asked with --allow-different-hosts): {}.",
                self.differences.join("; ")
            );
        }
        for u in &self.unchecked {
            let _ = writeln!(m, "\nNote: {u}.");
        }
        let _ =
            writeln!(m, "\nΔ: the change from {} (the first run), with its sign. n/m: not measured.\n", self.labels[0]);

        let _ = writeln!(m, "### Status\n");
        let mut header = vec!["Points".to_string()];
        header.extend(self.labels.iter().map(|l| cell(l)));
        let _ = writeln!(m, "| {} |\n|{}", header.join(" | "), "---|".repeat(header.len()));
        for p in self.points() {
            let mut row = vec![thousands(p)];
            for r in self.runs {
                row.push(match Self::step(r, p) {
                    None => "not run".into(),
                    Some(s) => match s.reasons.first() {
                        Some(why) => format!("{}: {}", crate::results::Status::words(s.status), cell(why)),
                        None => crate::results::Status::words(s.status).into(),
                    },
                });
            }
            let _ = writeln!(m, "| {} |", row.join(" | "));
        }
        m.push('\n');
        self.table(&mut m, "Stored readings/s (storage's own counter)", &|s| s.ingest.stored_rps, format::whole);
        self.table(
            &mut m,
            "Accepted readings/s (acked, by arrival)",
            &|s| Some(s.generator.achieved_rps),
            format::whole,
        );
        self.table(&mut m, "p95 lag", &|s| s.lag.p95_s, seconds);
        self.latency_table(&mut m, "Ack latency p99 (from the intended send time)", &|s| s.ack_latency.intended.p99_s);
        self.latency_table(&mut m, "Ack latency p50 (service time, beside the floor: the bare round trip)", &|s| {
            s.ack_latency.service.p50_s
        });
        for name in self.probe_names() {
            let n = name.clone();
            self.table(
                &mut m,
                &format!("Probe {name}: warm median"),
                &move |s| s.probes.iter().find(|p| p.name == n).and_then(|p| p.warm_median_s),
                seconds,
            );
        }
        self.table(&mut m, "Stack memory (peak RSS, summed over its services)", &stack_rss, bytes);
        self.table(&mut m, "Storage size (database)", &storage_bytes, bytes);
        m
    }

    /// Overlaid charts: (file name, chart).
    pub fn charts(&self) -> Vec<(String, Svg)> {
        let sub = format!(
            "{} · by {}",
            self.labels.join(" vs "),
            match self.by {
                By::Target => "target",
                By::Run => "run",
                By::Model => "value model",
            }
        );
        let all_points = self.points();
        let x_names: Vec<String> = all_points.iter().map(|p| thousands(*p)).collect();
        let per_run = |f: &dyn Fn(&StepResult) -> Option<f64>| {
            self.runs
                .iter()
                .zip(&self.labels)
                .map(|(r, l)| Line {
                    name: l.clone(),
                    points: all_points
                        .iter()
                        .enumerate()
                        .map(|(i, p)| (i as f64, Self::step(r, *p).and_then(f)))
                        .collect(),
                })
                .collect::<Vec<_>>()
        };
        let mut out = Vec::new();
        let mut line = |file: &str, title: &str, y: &str, lines: Vec<Line>, y_format: fn(f64) -> String, note: &str| {
            let c = LineChart {
                title: title.into(),
                subtitle: sub.clone(),
                x_label: "points in the step".into(),
                y_label: y.into(),
                lines,
                note: note.into(),
                y_format,
                x_names: x_names.clone(),
                ..Default::default()
            };
            if c.has_data() {
                out.push((file.to_string(), c.render()));
            }
        };
        line(
            "compare-stored.svg",
            "Stored readings/s per step",
            "readings per second",
            per_run(&|s| s.ingest.stored_rps),
            compact,
            "Rows the storage wrote per second of soak (its own counter).",
        );
        line(
            "compare-lag.svg",
            "p95 lag per step",
            "p95 lag (s)",
            per_run(&|s| s.lag.p95_s),
            |v| format!("{} s", compact(v)),
            "The pass rule is p95 < 30 s.",
        );
        line(
            "compare-memory.svg",
            "Stack memory per step",
            "peak RSS, summed",
            per_run(&stack_rss),
            bytes,
            "Peak resident memory of each stack service, summed.",
        );
        let names = self.probe_names();
        if !names.is_empty() {
            let c = BarChart {
                title: "Read probes: warm median at each run's largest step".into(),
                subtitle: sub.clone(),
                value_label: "seconds".into(),
                categories: names.clone(),
                series: self
                    .runs
                    .iter()
                    .zip(&self.labels)
                    .map(|(r, l)| Series {
                        name: l.clone(),
                        values: names
                            .iter()
                            .map(|n| {
                                r.steps
                                    .iter()
                                    .rev()
                                    .find_map(|s| s.probes.iter().find(|p| &p.name == n))
                                    .and_then(|p| p.warm_median_s)
                            })
                            .collect(),
                    })
                    .collect(),
                log_scale: false,
                note: "'not run': no run timed this probe.".into(),
                markers: None,
            };
            if c.has_data() {
                out.push(("compare-probes.svg".into(), c.render()));
            }
        }
        out.extend(self.per_second_charts(&sub));
        out
    }

    /// Per step size that a run recorded per-second series for, overlaid
    /// per run: acked readings per second, ack latency p99 per second, and
    /// the lag of every canary (lost and unknown ones marked).
    fn per_second_charts(&self, sub: &str) -> Vec<(String, Svg)> {
        let mut out = Vec::new();
        for p in self.points() {
            let steps: Vec<(&String, &StepResult)> = self
                .runs
                .iter()
                .zip(&self.labels)
                .filter_map(|(r, l)| Self::step(r, p).filter(|s| series::has_series(s)).map(|s| (l, s)))
                .collect();
            if steps.is_empty() {
                continue;
            }
            let chart =
                |what: &str, y: &str, lines: Vec<Line>, events: Vec<Events>, y_format: fn(f64) -> String| LineChart {
                    title: format!("{what} — {} points", thousands(p)),
                    subtitle: sub.to_string(),
                    x_label: "seconds since the load started".into(),
                    y_label: y.into(),
                    lines,
                    events,
                    y_format,
                    ..Default::default()
                };
            let seconds_fmt: fn(f64) -> String = |v| format!("{} s", compact(v));
            let acked = chart(
                "Acked readings per second",
                "acked per second (by arrival)",
                steps.iter().map(|(l, s)| series::acked(s, l)).collect(),
                vec![],
                compact,
            );
            let latency = chart(
                "Ack latency p99 per second, from the intended send time",
                "p99 of that second's acks (s)",
                steps.iter().map(|(l, s)| series::latency_p99(s, l)).collect(),
                vec![],
                seconds_fmt,
            );
            let with_canaries: Vec<_> = steps.iter().filter(|(_, s)| series::has_canaries(s)).collect();
            let lag = chart(
                "Lag of every canary",
                "lag at the canary's send time (s)",
                with_canaries.iter().map(|(l, s)| series::canary_lag(s, l)).collect(),
                with_canaries.iter().flat_map(|(l, s)| series::canary_events(s, &format!("{l}: "))).collect(),
                seconds_fmt,
            );
            for (kind, c) in [("acked", acked), ("latency", latency), ("lag", lag)] {
                if c.has_data() {
                    out.push((format!("compare-{p}pts-{kind}.svg"), c.render()));
                }
            }
        }
        out
    }

    /// Write `compare.md` and the charts into `dir`; returns what was written.
    pub fn write(&self, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create {}\nhint: choose another directory with --out", dir.display()))?;
        let mut written = Vec::new();
        let mut md = self.markdown();
        md.push_str("### Charts\n\n");
        for (file, svg) in self.charts() {
            let p = dir.join(&file);
            std::fs::write(&p, &svg.text).with_context(|| format!("cannot write {}", p.display()))?;
            let _ = writeln!(md, "![{file}]({file})\n");
            written.push(p);
        }
        let p = dir.join("compare.md");
        std::fs::write(&p, md).with_context(|| format!("cannot write {}", p.display()))?;
        written.insert(0, p);
        Ok(written)
    }
}

/// Peak RSS of the stack: each service's peak, summed; None when not measured.
pub fn stack_rss(s: &StepResult) -> Option<f64> {
    (!s.resources.is_empty()).then(|| s.resources.values().map(|r| r.rss_bytes_max as f64).sum())
}

/// What the storage holds: the database's size, else its table's; None when the target reports neither.
pub fn storage_bytes(s: &StepResult) -> Option<f64> {
    s.db.database_bytes.or(s.db.table_bytes)
}
