//! `scalebench run` end to end against the real local stack (mosquitto,
//! PostgreSQL, the reference historian as child processes on free 2xxxx
//! ports): honest accounting of loss, lag, crashes and bad input.
//!
//! Ladders are short (200 points every second, seconds of soak) and run one
//! at a time: each starts a whole stack on a 2-core machine.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::common::*;

pub static ONE_STACK_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A base port p with p and p+1 free, both in 2xxxx.
pub fn free_base_port() -> u16 {
    let seed = std::process::id() as u64
        ^ Instant::now().elapsed().as_nanos() as u64
        ^ (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as u64);
    for i in 0..200u64 {
        let p = 22_000 + ((seed.wrapping_mul(2654435761).wrapping_add(i * 7919)) % 7_000) as u16;
        if local_stack::guard::claim_run(p, 2) {
            return p;
        }
    }
    panic!("no free port pair in 22000-29000");
}

pub struct Run {
    pub out: Output,
    pub dir: tempfile::TempDir,
}

impl Run {
    pub fn result(&self) -> serde_json::Value {
        let results = self.dir.path().join("results");
        let file = std::fs::read_dir(&results)
            .unwrap_or_else(|_| panic!("no results dir; stderr:\n{}", stderr(&self.out)))
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with("-ladder.json"))
            .unwrap_or_else(|| panic!("no result file; stderr:\n{}", stderr(&self.out)));
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
    }
    pub fn run_dir(&self) -> PathBuf {
        self.dir.path().join("stack")
    }
    pub fn historian_stats(&self) -> serde_json::Value {
        let p = self.run_dir().join("historian/stats.json");
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
    }
}

pub fn ladder_args(dir: &Path, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "run",
        "--target",
        "baler",
        "--model",
        "plant-shaped",
        "--steps",
        "200",
        "--interval",
        "1s",
        "--warmup",
        "2s",
        "--soak",
        "10s",
        "--sample-every",
        "2s",
        "--drain-timeout",
        "30s",
        "--connections",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(["--results-dir".into(), dir.join("results").display().to_string()]);
    a.extend(["--run-dir".into(), dir.join("stack").display().to_string()]);
    a.extend(["--base-port".into(), free_base_port().to_string()]);
    // `extra` is flag/value pairs; a flag already present gets the new value.
    for pair in extra.chunks(2) {
        match a.iter().position(|x| x == pair[0]) {
            Some(i) if pair.len() == 2 => a[i + 1] = pair[1].to_string(),
            _ => a.extend(pair.iter().map(|s| s.to_string())),
        }
    }
    a
}

pub fn run_ladder(extra: &[&str]) -> Run {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(ladder_args(dir.path(), extra))
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .output()
        .unwrap();
    assert_no_stack_processes(&dir.path().join("stack"));
    Run { out, dir }
}

/// No process of this run's stack is alive (they all name the run dir).
pub fn assert_no_stack_processes(run_dir: &Path) {
    let needle = run_dir.display().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let alive: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok().map(|c| (e.file_name(), c)))
            .map(|(pid, c)| (pid, String::from_utf8_lossy(&c).replace('\0', " ")))
            .filter(|(_, c)| c.contains(&needle))
            .map(|(pid, c)| format!("{}: {c}", pid.to_string_lossy()))
            .collect();
        if alive.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "stack processes left running: {alive:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub fn step0(r: &serde_json::Value) -> &serde_json::Value {
    &r["steps"][0]
}

#[test]
fn a_clean_ladder_passes_with_stored_equal_to_acked() {
    let run = run_ladder(&[]);
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    let r = run.result();
    let s = step0(&r);
    assert_eq!(s["status"], "pass", "{}", serde_json::to_string_pretty(&s["reasons"]).unwrap());
    let acked = s["ingest"]["acked"].as_u64().unwrap();
    assert!(acked >= 200 * 11, "acked {acked}");
    assert_eq!(s["ingest"]["stored"], s["ingest"]["acked"]);
    assert_eq!(s["lag"]["lost"], 0);
    assert!(s["lag"]["p50_s"].as_f64().unwrap() < 2.0);
    assert_eq!(s["durability"]["comparable"], true);
    assert!(s["generator"]["offered_ratio"].as_f64().unwrap() >= 0.99);
    // The write rate comes from the storage's own counter over the soak's
    // wall clock, not from row timestamps.
    assert!(s["ingest"]["stored_rps_source"].as_str().unwrap().contains("pg_stat_user_tables"), "{}", s["ingest"]);
    let stored_rps = s["ingest"]["stored_rps"].as_f64().unwrap();
    // PostgreSQL's counters move at most once a second and are read at the
    // soak's start and end: a second of skew is 10% of a 10 s soak either
    // way. Counted twice (400) or over the whole step (~60) still fails.
    assert!((120.0..280.0).contains(&stored_rps), "stored_rps {stored_rps} at 200 readings/s");
    let probes = s["probes"].as_array().unwrap();
    assert!(probes.len() >= 3 && probes.iter().all(|p| p["ok"] == true), "{probes:?}");
    // Every second with acks has its p99 (most of them settled mid-step,
    // the last few read from their histograms), every other has none.
    let acked_by_second = s["series"]["acked"].as_array().unwrap();
    let p99_by_second = s["series"]["ack_latency_p99_s"].as_array().unwrap();
    assert_eq!(acked_by_second.len(), p99_by_second.len());
    for (k, (a, p)) in acked_by_second.iter().zip(p99_by_second).enumerate() {
        let acked = a.as_u64().unwrap() > 0;
        assert_eq!(acked, p.as_f64().is_some_and(|p| p > 0.0), "second {k}: {a} acked, p99 {p}");
    }
    assert_eq!(r["max_passing_points"], 200);
    assert!(r["hardware"]["nproc"].as_u64().unwrap() >= 1);
    let table = String::from_utf8_lossy(&run.out.stdout);
    assert!(table.contains("200") && table.contains("pass"), "{table}");
}

#[test]
fn a_historian_that_drops_one_in_50_is_caught_to_the_reading() {
    let run = run_ladder(&["--historian-drop-one-in", "50"]);
    let r = run.result();
    let s = step0(&r);
    assert_eq!(s["status"], "fail");
    assert!(s["reasons"][0].as_str().unwrap().contains("data loss"), "{}", s["reasons"]);
    let missing = s["ingest"]["acked"].as_u64().unwrap() - s["ingest"]["stored"].as_u64().unwrap();
    let dropped = run.historian_stats()["dropped"].as_u64().unwrap();
    assert!(dropped > 0);
    assert_eq!(missing, dropped, "the harness must report exactly what the historian dropped");
    assert_eq!(run.out.status.code(), Some(0), "a failed step is a result, not an error: {}", stderr(&run.out));
}

#[test]
fn a_fixed_historian_delay_shows_in_lag_p50() {
    let run = run_ladder(&["--historian-delay-ms", "2000"]);
    let r = run.result();
    let s = step0(&r);
    let p50 = s["lag"]["p50_s"].as_f64().unwrap();
    // The delay is a floor, not a centre: the machine's own path (the
    // historian's batch, the commit, the canary's polling) comes on top, and
    // more of it on a slower or busier machine. Missing (~0.3 s) or counted
    // twice (~4 s) still fails.
    assert!((1.9..3.5).contains(&p50), "lag p50 {p50} s with a 2 s delay");
    assert_eq!(s["ingest"]["stored"], s["ingest"]["acked"]);
}

#[test]
fn killing_the_historian_mid_soak_loses_no_acknowledged_reading() {
    let run = run_ladder(&["--kill-historian-after", "5s", "--soak", "12s"]);
    let r = run.result();
    let s = step0(&r);
    let acked = s["ingest"]["acked"].as_u64().unwrap();
    assert!(acked > 2000);
    assert_eq!(s["ingest"]["stored"].as_u64().unwrap(), acked, "acked readings lost across a SIGKILL");
    assert_eq!(s["lag"]["lost"], 0);
    // The crash is reported honestly: a restart fails the step.
    assert_eq!(s["containers"]["reference-historian"]["restarts"], 1);
    assert_eq!(s["status"], "fail");
}

#[test]
fn malformed_steps_are_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin()).args(ladder_args(dir.path(), &["--steps", "1k,lots"])).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("--steps") && e.contains("lots"), "{e}");
    assert!(!dir.path().join("stack").exists(), "nothing should have started");
}

#[test]
fn a_postgres_that_refuses_connections_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // A local stack whose broker is fine, with the adapter pointed at a closed port.
    let mut opts = local_stack::StackOptions::for_tests(dir.path().join("stack")).unwrap();
    opts.historian.bin = Some(bin());
    opts.historian.leading_args = vec!["reference-historian".into()];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let stack = rt.block_on(local_stack::LocalStack::start(opts)).unwrap();
    let closed = free_base_port();
    let out = Command::new(bin())
        .args(["run", "--stack", "external", "--steps", "200", "--soak", "5s"])
        .arg(format!("--mqtt-url=mqtt://127.0.0.1:{}", stack.mqtt_port()))
        .arg(format!("--pg-url=host=127.0.0.1 port={closed} user=postgres dbname=scalebench connect_timeout=3"))
        .arg("--results-dir")
        .arg(dir.path().join("results"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(e.contains(&closed.to_string()) || e.to_lowercase().contains("postgres"), "{e}");
    assert!(e.contains("preflight") || e.contains("connect"), "{e}");

    // And a broker that is not there at all.
    let out = Command::new(bin())
        .args(["run", "--stack", "external", "--steps", "200", "--soak", "5s"])
        .arg(format!("--mqtt-url=mqtt://127.0.0.1:{closed}"))
        .arg(format!("--pg-url={}", stack.postgres_conn()))
        .arg("--results-dir")
        .arg(dir.path().join("results"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(
        e.contains("cannot connect to the MQTT broker") && e.contains(&closed.to_string()) && e.contains("hint:"),
        "{e}"
    );
    stack.stop();
}

#[test]
fn ctrl_c_during_a_soak_keeps_finished_steps_and_leaves_no_process() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let args = ladder_args(dir.path(), &["--steps", "100,200", "--soak", "6s"]);
    let child = Command::new(bin()).args(&args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    // Wait until step 2 has started, then Ctrl-C.
    let results = dir.path().join("results");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < deadline, "step 1 never finished");
        let done = std::fs::read_dir(&results)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| std::fs::read_to_string(e.ok()?.path()).ok())
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .map(|v| v["steps"].as_array().map(|a| a.len()).unwrap_or(0) >= 1)
            .unwrap_or(false);
        if done {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(4));
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_no_stack_processes(&dir.path().join("stack"));
    let run = Run { out, dir };
    let r = run.result();
    assert_eq!(r["ended_because"], "interrupted");
    assert_eq!(r["steps"][0]["status"], "pass");
    assert_eq!(r["steps"][1]["status"], "interrupted");
    assert!(r["finished_utc"].is_string());
}

// ---- NATS JetStream ----------------------------------------------------

fn nats_ladder(extra: &[&str]) -> Run {
    let mut args = vec!["--target", "nats-jetstream"];
    args.extend_from_slice(extra);
    run_ladder(&args)
}

/// Over TLS (`--tls`: the node's client listener takes only `tls://`);
/// the plain JetStream path is the three-node test's.
#[test]
fn a_clean_jetstream_ladder_on_one_node_over_tls_passes_with_stored_equal_to_acked() {
    let run = nats_ladder(&["--tls"]);
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    let r = run.result();
    let s = step0(&r);
    assert_eq!(s["status"], "pass", "{}", s["reasons"]);
    let acked = s["ingest"]["acked"].as_u64().unwrap();
    assert!(acked >= 200 * 11, "acked {acked}");
    assert_eq!(s["ingest"]["stored"], s["ingest"]["acked"]);
    assert_eq!(s["lag"]["lost"], 0);
    assert_eq!(r["stack"], "local-nats");
    let conf = std::fs::read_to_string(run.run_dir().join("nats/n0/nats.conf")).unwrap();
    assert!(conf.contains("tls {") && conf.contains("cert_file"), "node config: {conf}");
    assert!(stderr(&run.out).contains("TLS-only local NATS"), "{}", stderr(&run.out));
    assert!(r["tls"]["nats"]["protocol"].as_str().unwrap_or("").starts_with("TLSv1."), "{}", r["tls"]);
}

#[test]
fn a_clean_jetstream_ladder_with_three_replicas_on_three_nodes_passes() {
    let run = nats_ladder(&["--nodes", "3", "--target-params", r#"{"replicas":3}"#]);
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    let r = run.result();
    let s = step0(&r);
    assert_eq!(s["status"], "pass", "{}", s["reasons"]);
    assert_eq!(s["ingest"]["stored"], s["ingest"]["acked"]);
    assert_eq!(s["containers"].as_object().unwrap().len(), 3, "three nodes watched");
}

#[test]
fn a_stream_limited_on_purpose_fails_the_step_and_says_so() {
    let run = nats_ladder(&["--target-params", r#"{"max_msgs":500}"#]);
    let r = run.result();
    let s = step0(&r);
    assert_eq!(s["status"], "fail");
    let reasons = s["reasons"].to_string();
    assert!(reasons.contains("max_msgs=500"), "{reasons}");
    assert!(s["ingest"]["stored"].as_u64().unwrap() <= 500);
}

#[test]
fn killing_one_node_of_three_during_an_r3_run_loses_no_acknowledged_message() {
    let run = nats_ladder(&[
        "--nodes",
        "3",
        "--target-params",
        r#"{"replicas":3}"#,
        "--kill-nats-node-after",
        "4s",
        "--soak",
        "12s",
    ]);
    let r = run.result();
    let s = step0(&r);
    let acked = s["ingest"]["acked"].as_u64().unwrap();
    // While the stream's leader fails over, publishes may time out unacked:
    // that is allowed. What is not allowed is losing one that was acked.
    assert!(acked > 600, "acked {acked}: {}", stderr(&run.out));
    assert_eq!(s["ingest"]["stored"].as_u64().unwrap(), acked, "acked messages lost when a node died");
    assert_eq!(s["containers"]["nats-1"]["restarts"], 1);
}

#[test]
fn a_budgets_file_with_a_typo_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let budgets = dir.path().join("budgets.json");
    std::fs::write(&budgets, r#"{"probes": {"latest-all": {"budget_ms": 500}}}"#).unwrap();
    let out =
        Command::new(bin()).args(ladder_args(dir.path(), &["--budgets", budgets.to_str().unwrap()])).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("budgets.json") && e.contains("budget_ms") && e.contains("hint:"), "{e}");
    assert!(!dir.path().join("stack").exists(), "nothing should have started");
}

#[test]
fn a_step_run_with_the_disk_low_is_inconclusive_not_failed() {
    let run = run_ladder(&["--soak", "3s", "--min-disk-free-gb", "1000000"]);
    let r = run.result();
    let s = step0(&r);
    assert_eq!(s["status"], "inconclusive", "{}", s["reasons"]);
    assert!(s["reasons"].to_string().contains("disk low"), "{}", s["reasons"]);
    assert_eq!(r["max_passing_points"], serde_json::Value::Null);
}
