//! CI gates on real runs: `run --require-ceiling` and `compare
//! --fail-on-regression` exit 3 with every breach named and 0 otherwise,
//! and `--junit` writes JUnit XML a CI system reads (parsed here with a
//! JUnit reader).

use std::process::Command;

use crate::common::*;
use crate::ladder::{ladder_args, Run, ONE_STACK_AT_A_TIME};

fn run_with(extra: &[&str]) -> Run {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut args = ladder_args(dir.path(), &["--soak", "4s", "--warmup", "1s"]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = Command::new(bin()).args(&args).env("SCALEBENCH_CACHE_DIR", cache_dir()).output().unwrap();
    Run { out, dir }
}

fn junit(path: &std::path::Path) -> junit_parser::TestSuites {
    let text = std::fs::read_to_string(path).unwrap();
    junit_parser::from_reader(std::io::Cursor::new(text.as_bytes()))
        .unwrap_or_else(|e| panic!("not JUnit XML: {e}\n{text}"))
}

#[test]
fn require_ceiling_exits_3_naming_the_shortfall_and_0_when_met_with_junit_for_ci() {
    let dir = tempfile::tempdir().unwrap();
    let failing = dir.path().join("failing.xml");
    let r = run_with(&["--require-ceiling", "1k", "--junit", failing.to_str().unwrap()]);
    let e = stderr(&r.out);
    assert_eq!(r.out.status.code(), Some(3), "{e}");
    assert!(e.contains("--require-ceiling:\n  - the ceiling is 200 points, below the required 1,000"), "{e}");
    assert!(r.result()["steps"][0]["status"] == "pass", "the result is kept");
    let suites = junit(&failing);
    let cases: Vec<_> = suites.suites.iter().flat_map(|s| s.cases.iter()).collect();
    assert_eq!(cases.len(), 2, "one case per step and one for the gate");
    assert!(cases[0].original_name == "200 points" && cases[0].status.is_success(), "{:?}", cases[0]);
    assert!(
        cases[1].original_name == "ceiling at least 1,000 points" && cases[1].status.is_failure(),
        "{:?}",
        cases[1]
    );

    let passing = dir.path().join("passing.xml");
    let r = run_with(&["--require-ceiling", "200", "--junit", passing.to_str().unwrap()]);
    assert_eq!(r.out.status.code(), Some(0), "{}", stderr(&r.out));
    let suites = junit(&passing);
    assert!(suites.suites.iter().flat_map(|s| s.cases.iter()).all(|c| c.status.is_success()));

    // compare: the same run against itself holds; with one step's stored/s
    // cut by a fifth and its ack p99 doubled, both breaches are named.
    let a = std::fs::read_dir(r.dir.path().join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-ladder.json"))
        .unwrap();
    let mut worse: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    worse["run_id"] = "worse".into();
    let step = &mut worse["steps"][0];
    let stored = step["ingest"]["stored_rps"].as_f64().or(step["ingest"]["stored_rps_by_payload"].as_f64()).unwrap();
    step["ingest"]["stored_rps"] = (stored * 0.8).into();
    let p99 = step["ack_latency"]["intended"]["p99_s"].as_f64().unwrap();
    step["ack_latency"]["intended"]["p99_s"] = (p99 * 2.0).into();
    let b = dir.path().join("worse-ladder.json");
    std::fs::write(&b, serde_json::to_string(&worse).unwrap()).unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out_dir = dir.path().join("cmp");
    let same = scalebench(&["compare", a, a, "--fail-on-regression", "5", "--out", out_dir.to_str().unwrap()]);
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    let xml = dir.path().join("compare.xml");
    let out = scalebench(&[
        "compare",
        a,
        b,
        "--fail-on-regression",
        "5",
        "--junit",
        xml.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{e}");
    assert!(e.contains("worse, step 200 points: stored/s fell 20.0 %"), "{e}");
    assert!(e.contains("worse, step 200 points: ack p99 from the intended send time rose 100.0 %"), "{e}");
    assert!(!e.contains("ceiling fell"), "the ceiling held: {e}");
    let suites = junit(&xml);
    let failed: Vec<_> = suites
        .suites
        .iter()
        .flat_map(|s| s.cases.iter())
        .filter(|c| c.status.is_failure())
        .map(|c| c.original_name.clone())
        .collect();
    assert_eq!(failed, vec!["200 points: stored/s", "200 points: ack p99 from the intended send time"]);
}
