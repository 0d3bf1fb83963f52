//! `scalebench report --bench`: how long rendering the report of a full
//! ladder takes — 7 steps with 15-minute soaks sampled every 15 s, three
//! stack services, three probes, the last step failing (a result file of
//! realistic size, made up here) — beside reading the same result file.
//! Prints figures; asserts nothing. Goal: under 1 s.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::results::*;

/// A deterministic pseudo-random stream (an LCG): the same result every time.
struct Noise(u64);
impl Noise {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A synthetic ladder result: `steps` (points), `soak_s` of soak after a
/// 60 s warm-up, a sample every 15 s. Made up, for timing the rendering only.
///
/// Long on purpose: a fixture: one made-up result written out field by field.
pub fn synthetic_ladder(steps: &[u64], soak_s: f64) -> RunResult {
    let mut n = Noise(7);
    let services = ["mosquitto", "postgres", "reference-historian"];
    let warmup_s = 60.0;
    let interval_s = 5.0;
    let last = steps.len().saturating_sub(1);
    let steps: Vec<StepResult> = steps
        .iter()
        .enumerate()
        .map(|(k, &points)| {
            let target = points as f64 / interval_s;
            let failing = k == last;
            let samples: Vec<Sample> = (1..=((warmup_s + soak_s) / 15.0) as usize)
                .map(|i| {
                    let t = i as f64 * 15.0;
                    let acked = target * (0.995 + 0.01 * n.next());
                    let stored =
                        if failing { acked * (0.90 + 0.05 * n.next()) } else { acked * (0.99 + 0.02 * n.next()) };
                    let mut cpu = BTreeMap::new();
                    let mut rss = BTreeMap::new();
                    for (j, s) in services.iter().enumerate() {
                        cpu.insert(s.to_string(), target / 200.0 * (1.0 + j as f64) * (0.8 + 0.4 * n.next()));
                        rss.insert(
                            s.to_string(),
                            ((40.0 + 30.0 * j as f64 + t / 60.0 * (1.0 + k as f64)) * 1048576.0) as u64,
                        );
                    }
                    let mut disk = BTreeMap::new();
                    disk.insert("results directory".to_string(), Some(50_000_000_000u64));
                    Sample {
                        elapsed_s: t,
                        acked_rps: acked,
                        stored_rps: Some(stored),
                        lag_s: Some(if failing { 2.0 + t / 40.0 } else { 0.2 + 0.3 * n.next() }),
                        pg_roundtrip_s: Some(0.001 + 0.002 * n.next()),
                        behind_schedule_s: 0.01 * n.next(),
                        cpu_percent: cpu,
                        rss_bytes: rss,
                        disk_free_bytes: disk,
                        ..Default::default()
                    }
                })
                .collect();
            let acked = (target * soak_s) as u64;
            let stored = if failing { (acked as f64 * 0.93) as u64 } else { acked };
            let probes = ["latest-all", "hour-1000", "day-1"]
                .iter()
                .enumerate()
                .map(|(j, name)| {
                    let base = 0.02 * (1.0 + j as f64) * (1.0 + k as f64 / 2.0);
                    let runs: Vec<f64> = (0..5).map(|_| base * (0.9 + 0.2 * n.next())).collect();
                    ProbeResult {
                        name: name.to_string(),
                        description: format!("synthetic probe {name}"),
                        cold_s: Some(base * 1.8),
                        warm_median_s: Some(runs[2]),
                        warm_runs_s: runs,
                        budget_s: Some(0.5),
                        budget_source: Some("provisional".into()),
                        ok: true,
                        rows: None,
                        error: None,
                        note: None,
                    }
                })
                .collect();
            let resources = services
                .iter()
                .map(|s| {
                    (
                        s.to_string(),
                        Resource {
                            cpu_percent: 30.0,
                            cpu_percent_max: 45.0,
                            rss_bytes_max: 200 << 20,
                            rss_bytes_last: 190 << 20,
                            ..Default::default()
                        },
                    )
                })
                .collect();
            StepResult {
                points,
                status: if failing { Status::Fail } else { Status::Pass },
                reasons: if failing {
                    vec![format!("data loss: stored 93.00% of acked ({} of {})", stored, acked)]
                } else {
                    vec![]
                },
                target_rps: target,
                started_utc: "2026-01-01T00:00:00.000Z".into(),
                duration_s: warmup_s + soak_s + 20.0,
                generator: Generator {
                    published: acked,
                    acked,
                    soak_s,
                    offered_rps: target,
                    offered_ratio: 1.0,
                    achieved_rps: target,
                    achieved_ratio: 1.0,
                    behind_schedule_max_s: 0.02,
                    behind_schedule_p95_s: 0.01,
                    connections: 4,
                    ..Default::default()
                },
                ingest: Ingest {
                    acked,
                    stored,
                    stored_ratio: stored as f64 / acked as f64,
                    missing_acked: acked - stored,
                    stored_rps: Some(stored as f64 / soak_s),
                    stored_rps_per_host_cpu: Some(stored as f64 / soak_s / 2.0),
                    broker_dropped_delta: Some(0.0),
                    ..Default::default()
                },
                lag: Lag {
                    canaries_sent: (soak_s / 2.0) as u64,
                    p50_s: Some(0.3),
                    p95_s: Some(if failing { 24.0 } else { 0.5 }),
                    max_s: Some(1.0),
                    poll_interval_s: 0.5,
                    ..Default::default()
                },
                broker: BTreeMap::new(),
                resources,
                containers: BTreeMap::new(),
                samples,
                probes,
                db: Db::default(),
                durability: Durability { comparable: true, ..Default::default() },
                topology: Topology::default(),
                unmeasured: vec![],
                live_safety: vec![],
                ack_latency: AckLatency::default(),
                store: StoreFigures::default(),
                outcomes: Outcomes { ok: Some(stored), lost: Some(acked - stored), ..Default::default() },
                series: {
                    let n = (warmup_s + soak_s) as usize;
                    let per = (target as u64).max(1);
                    Series {
                        start_unix_s: 1_767_225_600,
                        soak_from_s: warmup_s,
                        load_end_s: warmup_s + soak_s,
                        offered: vec![per; n],
                        acked: vec![per; n],
                        refused: vec![0; n],
                        stored_by_payload: vec![per; n],
                        ack_latency_p99_s: vec![Some(0.004); n],
                        ok_by_payload: Some(vec![per; n]),
                        lost_by_payload: Some(vec![0; n]),
                        unknown_by_payload: vec![0; n],
                        store_round_trip: vec![Some(StoreSecond::Answered(0.0004)); n],
                        stored_by_arrival: vec![Some(per as f64); n],
                    }
                },
                canaries: (0..((warmup_s + soak_s) / 2.0) as u64)
                    .map(|k| CanaryRecord {
                        seq: k,
                        sent_s: k as f64 * 2.0,
                        acked_s: Some(k as f64 * 2.0 + 0.01),
                        stored_s: Some(k as f64 * 2.0 + 0.3),
                        lag_s: Some(0.3),
                        outcome: "ok".into(),
                    })
                    .collect(),
                workers: Vec::new(),
                faults: Vec::new(),
            }
        })
        .collect();
    RunResult {
        schema_version: SCHEMA_VERSION,
        run_id: "20260101T000000Z".into(),
        started_utc: "2026-01-01T00:00:00.000Z".into(),
        finished_utc: Some("2026-01-01T02:00:00.000Z".into()),
        command_line: vec!["scalebench".into(), "run".into()],
        target: "baler".into(),
        model: "plant-shaped".into(),
        probes: "historian-sql".into(),
        stack: "local".into(),
        interval_s,
        warmup_s,
        soak_s,
        hardware: Hardware { nproc: 2, cpu_model: "synthetic".into(), ram_bytes: 24 << 30, ..Default::default() },
        commits: BTreeMap::new(),
        plugins: BTreeMap::new(),
        caps: BTreeMap::new(),
        max_passing_points: ceiling_of(steps.iter().map(|s| (s.points, s.status))),
        steps,
        ended_because: "step failed".into(),
        prefill: None,
        floor: None,
        tls: Default::default(),
        plan: Default::default(),
    }
}

use crate::bench_record::median;

pub fn run(record: &std::path::Path) -> anyhow::Result<()> {
    let result = synthetic_ladder(&[1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000], 900.0);
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("bench-ladder.json");
    result.save(&file)?;
    let size = std::fs::metadata(&file)?.len();
    const REPEATS: usize = 5;
    let mut read = Vec::new();
    let mut render = Vec::new();
    let mut charts = 0;
    for i in 0..REPEATS {
        let t = Instant::now();
        let r = RunResult::load(&file)?;
        read.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let w = crate::report::write(std::slice::from_ref(&r), &dir.path().join(format!("report-{i}")))?;
        render.push(t.elapsed().as_secs_f64());
        charts = w.charts.len();
    }
    let (read, render) = (median(read), median(render));
    let samples = result.steps[0].samples.len();
    println!(
        "report of a synthetic 7-step ladder, 15-minute soaks ({samples} samples a step, 3 services, 3 probes; result file {}); medians of {REPEATS}",
        crate::format::bytes(size as f64)
    );
    println!("  {:<56} {:>9.1} ms  (baseline)", "read the result file (parse JSON)", read * 1e3);
    println!(
        "  {:<56} {:>9.1} ms  ({:.1}x the baseline; goal < 1 s: {})",
        format!("render report.html + report.md + {charts} SVG charts"),
        render * 1e3,
        render / read.max(1e-9),
        if render < 1.0 { "met" } else { "NOT met" }
    );
    let figure = crate::bench_record::Figure::new("render report.html + report.md + charts", render * 1e3, "ms")
        .vs("read the result file", read * 1e3)
        .goal("< 1 s", render < 1.0);
    crate::bench_record::write(record, "report --bench", vec![figure])?;
    Ok(())
}
