//! A benchmark's figures as a JSON record: one file per benchmark, named for
//! it, under `results/bench/` unless `--record` says otherwise (`make bench`
//! writes them all; the README's benchmark section quotes them). A figure
//! carries the baseline measured in the same run, their ratio and the goal
//! in words; whether the goal was met is recorded and printed, never
//! asserted: speed lives in benchmarks, not in tests.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::results::Hardware;

pub const SCHEMA_VERSION: u32 = 1;

/// One measured figure, beside its baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub unit: String,
    /// What the figure is compared with, measured in the same run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<f64>,
    /// value / baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// The goal in words ("ratio >= 0.9").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_met: Option<bool>,
}

impl Figure {
    pub fn new(name: impl Into<String>, value: f64, unit: impl Into<String>) -> Figure {
        Figure {
            name: name.into(),
            value,
            unit: unit.into(),
            baseline_name: None,
            baseline: None,
            ratio: None,
            goal: None,
            goal_met: None,
        }
    }

    /// Beside `baseline` (same unit), with their ratio.
    pub fn vs(mut self, baseline_name: impl Into<String>, baseline: f64) -> Figure {
        self.baseline_name = Some(baseline_name.into());
        self.baseline = Some(baseline);
        self.ratio = (baseline != 0.0).then(|| self.value / baseline);
        self
    }

    /// The goal in words, and whether this run met it.
    pub fn goal(mut self, goal: impl Into<String>, met: bool) -> Figure {
        self.goal = Some(goal.into());
        self.goal_met = Some(met);
        self
    }

    /// The ratio's goal: `ratio >= min`.
    pub fn ratio_goal(self, min: f64) -> Figure {
        let met = self.ratio.is_some_and(|r| r >= min);
        self.goal(format!("ratio >= {min}"), met)
    }
}

/// One benchmark's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub schema_version: u32,
    /// "bench nats", "gen --bench", …
    pub benchmark: String,
    pub finished_utc: String,
    pub command_line: Vec<String>,
    pub machine: Hardware,
    pub figures: Vec<Figure>,
}

/// The median of a benchmark's repeats (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The file a benchmark's record goes to in `dir`: `bench-nats.json`.
pub fn path_in(dir: &Path, benchmark: &str) -> PathBuf {
    let name: String = benchmark.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect::<String>();
    let name = name.split('-').filter(|s| !s.is_empty()).collect::<Vec<_>>().join("-");
    dir.join(format!("{name}.json"))
}

/// Write `benchmark`'s figures to its file in `dir` (whole or not at all),
/// and say where.
pub fn write(dir: &Path, benchmark: &str, figures: Vec<Figure>) -> std::io::Result<PathBuf> {
    let record = Record {
        schema_version: SCHEMA_VERSION,
        benchmark: benchmark.to_string(),
        finished_utc: crate::clock::utc_now(),
        command_line: std::env::args().collect(),
        machine: crate::results::Hardware::describe(dir.parent().filter(|p| p.exists()).unwrap_or(Path::new("."))),
        figures,
    };
    let path = path_in(dir, benchmark);
    let text = serde_json::to_string_pretty(&record).map_err(std::io::Error::other)?;
    crate::atomic_file::write(&path, text.as_bytes())?;
    tracing::info!("{benchmark}: figures written to {}", path.display());
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_carries_its_baseline_ratio_and_goal() {
        let f = Figure::new("JetStream publish", 90.0, "msgs/s").vs("plain async-nats", 100.0).ratio_goal(0.9);
        assert_eq!(f.ratio, Some(0.9));
        assert_eq!(f.goal_met, Some(true));
        let f = Figure::new("x", 1.0, "u").vs("zero", 0.0).ratio_goal(0.9);
        assert_eq!((f.ratio, f.goal_met), (None, Some(false)), "no ratio is not a met goal");
    }

    #[test]
    fn records_are_named_for_their_benchmark_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(path_in(dir.path(), "gen --bench"), dir.path().join("gen-bench.json"));
        let p = write(dir.path(), "bench nats", vec![Figure::new("a", 1.0, "u")]).unwrap();
        let r: Record = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        assert_eq!((r.benchmark.as_str(), r.figures.len()), ("bench nats", 1));
        assert!(r.machine.nproc >= 1);
    }
}
