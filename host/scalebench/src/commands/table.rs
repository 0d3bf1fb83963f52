//! `scalebench table`: print ladder results as the Markdown table of the original Baler scale-test plan
//! (one row per step), ready to paste into a report. The table itself is
//! `report::table` (the reports show the same table); numbers are formatted
//! by `format`.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::error::UsageError;
pub use crate::report::table::render;
use crate::results::RunResult;

/// Result files named by `paths`: files as given, directories as every
/// `*-ladder.json` in them (sorted by name, i.e. by run id). No paths means
/// the `results` directory.
pub fn collect(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let default = [PathBuf::from("results")];
    let paths = if paths.is_empty() { &default[..] } else { paths };
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("cannot list {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with("-ladder.json")))
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(UsageError(format!(
                    "{} holds no ladder results (*-ladder.json)\nhint: run a ladder first, or name result files: scalebench table results/<run-id>-ladder.json",
                    p.display()
                ))
                .into());
            }
            files.extend(found);
        } else if p.exists() {
            files.push(p.clone());
        } else {
            return Err(UsageError(format!(
                "{}: no such file or directory\nhint: ladder results are written to results/<run-id>-ladder.json",
                p.display()
            ))
            .into());
        }
    }
    Ok(files)
}

/// `scalebench table [PATH...]`: print the tables of the results named.
pub fn run(paths: &[PathBuf]) -> anyhow::Result<()> {
    let files = collect(paths)?;
    let runs = files.iter().map(|f| RunResult::load(Path::new(f))).collect::<anyhow::Result<Vec<_>>>()?;
    print!("{}", render(&runs));
    if crate::report::versus::several_targets(&runs) {
        let mut side = String::from("\n");
        crate::report::versus::markdown(&runs, &mut side);
        print!("{side}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::*;

    fn probe(name: &str, median: f64, budget: f64, ok: bool) -> ProbeResult {
        ProbeResult {
            name: name.into(),
            description: String::new(),
            cold_s: Some(median),
            warm_median_s: Some(median),
            warm_runs_s: vec![median; 5],
            budget_s: Some(budget),
            budget_source: Some("provisional".into()),
            ok,
            rows: None,
            error: (!ok).then(|| "over budget".into()),
            note: None,
        }
    }

    fn step(points: u64, status: Status, rps: f64, probes: Vec<ProbeResult>, reasons: Vec<String>) -> StepResult {
        StepResult {
            points,
            status,
            reasons,
            target_rps: rps,
            started_utc: "2026-11-08T00:33:11Z".into(),
            duration_s: 360.0,
            generator: Generator {
                offered_rps: rps,
                achieved_rps: rps * 0.98,
                offered_ratio: 1.0,
                ..Default::default()
            },
            ingest: Ingest {
                acked: (rps * 300.0) as u64,
                stored: (rps * 300.0 * 0.9969) as u64,
                stored_ratio: 0.9969,
                stored_rps: Some(rps * 1.018),
                stored_rps_per_host_cpu: Some(rps * 1.018 / 2.0),
                broker_dropped_delta: if points > 2000 {
                    Some(115_903.0)
                } else if points > 1000 {
                    None
                } else {
                    Some(0.0)
                },
                ..Default::default()
            },
            lag: Lag { canaries_sent: 150, lost: 0, p95_s: Some(0.45), ..Default::default() },
            broker: Default::default(),
            resources: Default::default(),
            containers: Default::default(),
            samples: vec![],
            probes,
            db: Default::default(),
            durability: Durability { comparable: true, ..Default::default() },
            topology: Default::default(),
            unmeasured: vec![],
            live_safety: vec![],
            ..Default::default()
        }
    }

    fn run_result() -> RunResult {
        RunResult {
            schema_version: SCHEMA_VERSION,
            run_id: "20261108T003311Z".into(),
            started_utc: "2026-11-08T00:33:11Z".into(),
            finished_utc: None,
            command_line: vec![
                "scalebench".into(),
                "ladder".into(),
                "--steps".into(),
                "1k,2.5k".into(),
                "--note".into(),
                "a b".into(),
            ],
            target: "baler".into(),
            model: "plant-shaped".into(),
            probes: "historian-sql".into(),
            stack: "local".into(),
            interval_s: 5.0,
            warmup_s: 60.0,
            soak_s: 300.0,
            hardware: Hardware {
                nproc: 2,
                cpu_model: "Intel Xeon @ 2.10GHz".into(),
                cpu_affinity: "0-1".into(),
                ..Default::default()
            },
            commits: Default::default(),
            plugins: Default::default(),
            caps: Default::default(),
            prefill: None,
            floor: None,
            tls: Default::default(),
            plan: Default::default(),
            steps: vec![
                step(
                    1000,
                    Status::Pass,
                    200.0,
                    vec![probe("latest-all", 0.31, 1.0, true), probe("day-1", 0.05, 0.5, true)],
                    vec![],
                ),
                step(
                    2500,
                    Status::Fail,
                    5000.0,
                    vec![probe("latest-all", 1.8, 1.0, false), probe("hour-1000", 0.2, 1.0, true)],
                    vec!["probe latest-all over budget | 1.80 s > 1.00 s".into(), "broker drops".into()],
                ),
            ],
            max_passing_points: Some(1000),
            ended_because: "step failed".into(),
        }
    }

    #[test]
    fn renders_a_run() {
        let md = render(&[run_result()]);
        let lines: Vec<&str> = md.lines().collect();
        assert!(
            lines[0].starts_with(
                "Run 20261108T003311Z · nproc 2 (CPUs 0-1) · Intel Xeon @ 2.10GHz · durability comparable: yes"
            ),
            "{md}"
        );
        assert!(lines[0].contains("command: `scalebench ladder --steps 1k,2.5k --note 'a b'`"), "{md}");
        assert!(md.contains(
            "| Points | Status | Offered/s | Acked/s | Stored/s | Stored/s per CPU | Stored % | p95 lag | Ack p99 (from intended) | Ack p50 (service) | Lost canaries | Broker drops | latest-all | day-1 | hour-1000 | First failure |"
        ), "{md}");
        assert!(md.contains("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"), "{md}");
        assert!(
            md.contains("| 1,000 | pass | 200 | 196 | 204 | 102 | 99.69% | 0.45 s | n/m | n/m | 0 | 0 | 0.31 s | 0.05 s | - | - |"),
            "{md}"
        );
        assert!(md.contains("| 2,500 | fail | 5,000 | 4,900 | 5,090 | 2,545 | 99.69% | 0.45 s | n/m | n/m | 0 | 115,903 | 1.80 s* | - | 0.20 s | probe latest-all over budget \\| 1.80 s > 1.00 s |"), "{md}");
        assert!(md.contains("`*` warm median over budget"), "{md}");
        assert!(md.trim_end().ends_with("Highest passing step: 1,000 points. Run ended: step failed."), "{md}");
    }

    #[test]
    fn a_pass_above_a_failure_is_no_ceiling_and_a_run_without_a_write_counter_shows_stored_by_payload() {
        let mut r = run_result();
        (r.steps[0].status, r.steps[1].status) = (Status::Fail, Status::Pass);
        // What the file says is not believed: the ceiling comes from the steps.
        r.max_passing_points = Some(2500);
        let md = render(std::slice::from_ref(&r));
        assert!(md.contains("Highest passing step: none (a pass above a failed step is not a ceiling)."), "{md}");
        assert!(md.contains("| Offered/s | Acked/s | Stored/s | Stored/s per CPU |"), "{md}");

        for s in &mut r.steps {
            s.ingest.stored_rps = None;
            s.ingest.stored_rps_per_host_cpu = None;
            s.ingest.stored_rps_by_payload = s.target_rps * 0.97;
        }
        let md = render(&[r]);
        assert!(md.contains("| Offered/s | Acked/s | Stored/s (by payload second) | Stored/s per CPU |"), "{md}");
        assert!(md.contains("| 1,000 | fail | 200 | 196 | 194 | n/m |"), "{md}");
        assert!(md.contains("as this target has no write counter of its own"), "{md}");
    }

    #[test]
    fn no_pass_and_files() {
        let mut r = run_result();
        r.steps.truncate(0);
        r.max_passing_points = None;
        r.ended_because = "completed".into();
        let md = render(&[r.clone()]);
        assert!(md.contains("durability comparable: unknown (no steps)"), "{md}");
        assert!(md.trim_end().ends_with("Highest passing step: none."), "{md}");

        let dir = tempfile::tempdir().unwrap();
        let a = run_result();
        a.save(&RunResult::path_in(dir.path(), &a.run_id)).unwrap();
        r.run_id = "20261109T000000Z".into();
        r.save(&RunResult::path_in(dir.path(), &r.run_id)).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let files = collect(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(files.len(), 2);
        assert!(files[0].ends_with("20261108T003311Z-ladder.json"));
        let runs: Vec<RunResult> = files.iter().map(|f| RunResult::load(f).unwrap()).collect();
        let md = render(&runs);
        assert_eq!(md.matches("Highest passing step").count(), 2);
        let e = collect(&[dir.path().join("nope.json")]).unwrap_err().to_string();
        assert!(e.contains("no such file") && e.contains("hint:"), "{e}");
        let empty = tempfile::tempdir().unwrap();
        assert!(collect(&[empty.path().to_path_buf()]).unwrap_err().to_string().contains("no ladder results"));
    }
}
