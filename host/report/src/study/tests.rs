//! The study report's unit tests: verdicts from fixed rows, the report's text.

use super::*;
use scalebench_results::study::plan::Plan;
use scalebench_results::study::record::{ChartFile, StudyResult, Target};

fn core_row(p: u32, s: u32, rate: f64) -> ThroughputRow {
    ThroughputRow {
        name: format!("core-{p}p{s}s"),
        kind: "core".into(),
        publishers: p,
        subscribers: s,
        payload_bytes: 128,
        published: 1000,
        delivered: 1000 * s as u64,
        expected_deliveries: 1000 * s as u64,
        pub_msgs_per_s: rate,
        sub_msgs_per_s: Some(rate * s as f64),
        aggregate_msgs_per_s: Some(rate * (1 + s) as f64),
        publish: "fire-and-forget".into(),
        ..Default::default()
    }
}

fn js_row(storage: &str, r: u32, p: u32, rate: Option<f64>) -> ThroughputRow {
    ThroughputRow {
        name: format!("js-{storage}-r{r}-{p}p"),
        kind: "jetstream".into(),
        storage: Some(storage.into()),
        replicas: Some(r),
        publishers: p,
        payload_bytes: 128,
        publish: "async acks, window 256 per publisher".into(),
        published: if rate.is_some() { 1000 } else { 0 },
        stored: rate.map(|_| 1000),
        pub_msgs_per_s: rate.unwrap_or(0.0),
        skipped: if rate.is_none() { Some("replicas=3 needs at least 3 JetStream servers".into()) } else { None },
        ..Default::default()
    }
}

fn delay_row(kind: &str, p50: f64) -> DelayRow {
    DelayRow {
        name: format!("{kind}-x"),
        kind: kind.into(),
        count: 100,
        received: 100,
        min_ms: p50 / 2.0,
        avg_ms: p50,
        p50_ms: p50,
        p90_ms: p50 * 1.5,
        p99_ms: p50 * 2.0,
        max_ms: p50 * 3.0,
        ..Default::default()
    }
}

fn study(throughput: Vec<ThroughputRow>, delay: Vec<DelayRow>) -> StudyResult {
    StudyResult {
        schema: scalebench_results::study::record::SCHEMA.into(),
        run_id: "20261130T150000Z".into(),
        started_utc: String::new(),
        finished_utc: String::new(),
        wall_seconds: 1.0,
        ended_because: "completed".into(),
        command_line: vec!["scalebench".into(), "study".into(), "nats".into()],
        scalebench_version: "0.1.0".into(),
        scalebench_commit: None,
        client_library: "test".into(),
        target: Target { kind: "local".into(), nodes: Some(3), ..Default::default() },
        plan: Plan::new(true),
        hardware: Default::default(),
        servers: vec![],
        host_before: Default::default(),
        host_after: Default::default(),
        varz_before: vec![],
        varz_after: vec![],
        server_processes: vec![],
        throughput,
        delay,
        hypotheses: vec![],
        charts: vec![ChartFile { file: "charts/a.svg".into(), title: "A <chart>".into() }],
        notes: vec![],
    }
}

fn verdicts(s: &StudyResult) -> Vec<String> {
    evaluate_hypotheses(s).into_iter().map(|h| format!("{} {}", h.id, h.verdict)).collect()
}

#[test]
fn hypotheses_on_a_cluster() {
    let s = study(
        vec![
            core_row(1, 1, 500_000.0),
            js_row("file", 3, 1, Some(10_000.0)),
            js_row("file", 3, 4, Some(18_000.0)),
            js_row("file", 1, 1, Some(20_000.0)),
            js_row("file", 1, 4, Some(30_000.0)),
            js_row("memory", 1, 1, Some(40_000.0)),
            js_row("memory", 1, 4, Some(25_000.0)), // below file r=1 4p: H3 fails on this pair
            js_row("memory", 3, 1, Some(15_000.0)),
            js_row("memory", 3, 4, Some(20_000.0)),
        ],
        vec![delay_row("ping", 0.2), delay_row("flood", 50.0)],
    );
    assert_eq!(verdicts(&s), ["H1 supported", "H2 supported", "H3 not supported", "H4 supported", "H5 supported"]);
    let h3 = &evaluate_hypotheses(&s)[2];
    assert!(h3.evidence.contains("js-memory-r1-4p 25,000 vs js-file-r1-4p 30,000 (0.83x)"), "{}", h3.evidence);
}

#[test]
fn hypotheses_on_a_single_node_are_not_tested_where_replicas_3_is_missing() {
    let s = study(
        vec![
            core_row(1, 1, 500_000.0),
            js_row("file", 3, 1, None),
            js_row("file", 3, 4, None),
            js_row("file", 1, 1, Some(20_000.0)),
            js_row("file", 1, 4, Some(19_500.0)),
            js_row("memory", 1, 1, Some(40_000.0)),
            js_row("memory", 1, 4, Some(45_000.0)),
        ],
        vec![delay_row("ping", 0.2), delay_row("flood", 1.0)],
    );
    assert_eq!(
        verdicts(&s),
        ["H1 not tested", "H2 not supported", "H3 supported", "H4 not tested", "H5 not supported"]
    );
    let h = evaluate_hypotheses(&s);
    assert!(h[0].evidence.contains("against file r=1") && h[0].evidence.contains("25.0x"), "{}", h[0].evidence);
    assert!(h[1].evidence.contains("file r=1") && h[1].evidence.contains("did not raise"), "{}", h[1].evidence);
}

#[test]
fn report_states_hypotheses_threats_and_links_charts() {
    let mut s = study(vec![core_row(1, 1, 500_000.0), js_row("file", 3, 1, None)], vec![delay_row("ping", 0.2)]);
    s.throughput[0].capped = true;
    s.hypotheses = evaluate_hypotheses(&s);
    let md = markdown(&s);
    for id in ["| H1 |", "| H2 |", "| H3 |", "| H4 |", "| H5 |"] {
        assert!(md.contains(id), "{id}");
    }
    assert!(md.contains("](charts/a.svg)"));
    assert!(md.contains("Rows cut by the time cap") && md.contains("Rows not run"));
    assert!(md.contains("*not tested*"));
    assert!(md.contains("scalebench study nats --quick --nodes 3"));
    let dir = tempfile::tempdir().unwrap();
    let charts = write_charts(&s, dir.path()).unwrap();
    assert_eq!(charts.len(), 4);
    for c in &charts {
        assert!(dir.path().join(&c.file).is_file());
    }
}

#[test]
fn count_groups_digits() {
    assert_eq!(count(0.0), "0");
    assert_eq!(count(999.4), "999");
    assert_eq!(count(1_760_599.0), "1,760,599");
    assert_eq!(count(-12_345.0), "-12,345");
    assert_eq!(count(f64::NAN), "n/a");
}
