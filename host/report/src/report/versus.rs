//! Runs of different targets side by side, in the columns of the original
//! "Baler vs Haxall" table: stored/s, p95 lag, read filter, hisRead of
//! 1,000 points, RAM / disk — one row per (run, step). Each probe set names
//! the probe that answers "read filter" and "hisRead 1000" for its target
//! ([`READ_FILTER`], [`HIS_READ_1000`]); a run without one shows `-`.

use std::fmt::Write as _;

use crate::format::{bytes, measured_seconds, seconds, thousands, whole};
use crate::results::{RunResult, StepResult};

/// Probe that is the table's "read filter" column, by probe name, first match wins:
/// Haystack `read` of every point; the historian's latest value of every point.
pub const READ_FILTER: &[&str] = &["read-point", "latest-all"];
/// Probe that is the "hisRead 1000" column: an hour of 1,000 points.
pub const HIS_READ_1000: &[&str] = &["his-read-1000", "hour-1000"];

pub const HEADER: [&str; 10] =
    ["Target", "Run", "Points", "Status", "Stored/s", "p95 lag", "Read filter", "hisRead 1000", "RAM", "Disk"];

/// Do these runs hold more than one target (worth a side-by-side table)?
pub fn several_targets(runs: &[RunResult]) -> bool {
    runs.iter().any(|r| r.target != runs[0].target)
}

fn probe_time(s: &StepResult, names: &[&str]) -> String {
    names
        .iter()
        .find_map(|n| s.probes.iter().find(|p| p.name == *n))
        .map(|p| match p.warm_median_s.or(p.cold_s) {
            Some(t) => format!("{}{}", seconds(t), if p.ok { "" } else { " !" }),
            None => "error !".into(),
        })
        .unwrap_or_else(|| "-".into())
}

/// Peak RSS of the stack's services over the soak, summed; n/m when no
/// process of the stack was sampled.
fn ram(s: &StepResult) -> String {
    if s.resources.is_empty() {
        return "n/m".into();
    }
    bytes(s.resources.values().map(|r| r.rss_bytes_max as f64).sum())
}

/// The database's (else the table's) size, as the adapter's stats gave it.
fn disk(s: &StepResult) -> String {
    match s.db.database_bytes.or(s.db.table_bytes) {
        Some(b) => bytes(b),
        None => "n/m".into(),
    }
}

/// One row per step of every run, cells as plain text.
pub fn rows(runs: &[RunResult]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for r in runs {
        for s in &r.steps {
            let stored = s.ingest.stored_rps.unwrap_or(s.ingest.stored_rps_by_payload);
            out.push(vec![
                r.target.clone(),
                r.run_id.clone(),
                thousands(s.points),
                crate::results::Status::words(s.status).to_string(),
                whole(stored),
                measured_seconds(s.lag.p95_s),
                probe_time(s, READ_FILTER),
                probe_time(s, HIS_READ_1000),
                ram(s),
                disk(s),
            ]);
        }
    }
    out
}

/// The side-by-side table as Markdown, with a line on what it compares.
pub fn markdown(runs: &[RunResult], out: &mut String) {
    let targets: Vec<&str> = {
        let mut t: Vec<&str> = runs.iter().map(|r| r.target.as_str()).collect();
        t.dedup();
        t
    };
    let _ = writeln!(out, "Side by side: {} (read filter = {}; hisRead 1000 = {}; RAM = peak RSS of the stack's processes; `!` = the probe failed)\n", targets.join(" vs "), READ_FILTER.join(" / "), HIS_READ_1000.join(" / "));
    let _ = writeln!(out, "| {} |", HEADER.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(HEADER.len()));
    for row in rows(runs) {
        let _ = writeln!(out, "| {} |", row.iter().map(|c| super::table::cell(c)).collect::<Vec<_>>().join(" | "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::*;

    fn run(target: &str, probes: &[(&str, f64)], rss: u64, db: Option<f64>) -> RunResult {
        let step = StepResult {
            points: 1000,
            status: Status::Pass,
            reasons: vec![],
            target_rps: 200.0,
            started_utc: String::new(),
            duration_s: 30.0,
            generator: Default::default(),
            ingest: Ingest { stored_rps: None, stored_rps_by_payload: 200.0, ..Default::default() },
            lag: Lag { p95_s: Some(0.25), ..Default::default() },
            broker: Default::default(),
            resources: [("svc".to_string(), Resource { rss_bytes_max: rss, ..Default::default() })].into(),
            containers: Default::default(),
            samples: vec![],
            probes: probes
                .iter()
                .map(|(n, t)| ProbeResult {
                    name: n.to_string(),
                    warm_median_s: Some(*t),
                    ok: true,
                    ..Default::default()
                })
                .collect(),
            db: Db { database_bytes: db, ..Default::default() },
            durability: Default::default(),
            topology: Default::default(),
            unmeasured: vec![],
            live_safety: vec![],
            ..Default::default()
        };
        RunResult {
            schema_version: SCHEMA_VERSION,
            run_id: format!("run-{target}"),
            started_utc: String::new(),
            finished_utc: None,
            command_line: vec![],
            target: target.into(),
            model: "plant-shaped".into(),
            probes: String::new(),
            stack: "local".into(),
            interval_s: 5.0,
            warmup_s: 2.0,
            soak_s: 10.0,
            hardware: Default::default(),
            commits: Default::default(),
            plugins: Default::default(),
            caps: Default::default(),
            prefill: None,
            floor: None,
            tls: Default::default(),
            plan: Default::default(),
            steps: vec![step],
            max_passing_points: Some(1000),
            ended_because: "completed".into(),
        }
    }

    #[test]
    fn baler_and_haystack_runs_share_the_columns() {
        let runs = vec![
            run("baler", &[("latest-all", 0.5), ("hour-1000", 0.25), ("day-1", 0.01)], 100 << 20, Some(50e6)),
            run("haxall", &[("read-point", 0.75), ("his-read-1000", 1.25), ("about", 0.01)], 60 << 20, None),
        ];
        assert!(several_targets(&runs));
        assert!(!several_targets(&runs[..1]));
        let r = rows(&runs);
        assert_eq!(r[0][0], "baler");
        assert_eq!((r[0][6].as_str(), r[0][7].as_str()), ("0.50 s", "0.25 s"), "{r:?}");
        assert_eq!((r[1][6].as_str(), r[1][7].as_str()), ("0.75 s", "1.25 s"), "{r:?}");
        assert_eq!(r[1][4], "200", "stored/s falls back to the rate by payload second");
        assert_eq!(r[1][9], "n/m", "no disk figure is unmeasured, not zero");
        assert_ne!(r[0][9], "n/m");
        let mut md = String::new();
        markdown(&runs, &mut md);
        assert!(md.contains("baler vs haxall") && md.contains("| Read filter | hisRead 1000 |"), "{md}");
    }
}
