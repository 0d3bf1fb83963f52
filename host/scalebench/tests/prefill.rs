//! `scalebench prefill` and `run --prefill-days` against the real local
//! stack (PostgreSQL 15, durable, the reference historian's point_history),
//! and `scalebench storage` measuring real stores.
//!
//! One stack at a time (shares the ladder tests' lock): each starts
//! PostgreSQL on a 2-core machine.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::ladder::{free_base_port, run_ladder, ONE_STACK_AT_A_TIME};

const POINTS: u64 = 1000;
const INTERVAL_MS: i64 = 5000;

fn prefill_args(run_dir: &Path, results: &Path, port: u16, days: &str) -> Vec<String> {
    ["prefill", "--target", "baler", "--model", "plant-shaped", "--points", "1k", "--days", days, "--interval", "5s"]
        .iter()
        .map(|s| s.to_string())
        .chain(["--run-dir".into(), run_dir.display().to_string()])
        .chain(["--base-port".into(), port.to_string()])
        .chain(["--results-dir".into(), results.display().to_string()])
        .collect()
}

/// The newest `*-prefill.json` in `dir` (run ids sort by time), then removed
/// so the next read finds the next run's.
fn take_report(dir: &Path) -> serde_json::Value {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("-prefill.json"))
        .collect();
    files.sort();
    let f = files.pop().expect("a prefill result file");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    for f in files.iter().chain(std::iter::once(&f)) {
        std::fs::remove_file(f).unwrap();
    }
    v["prefill"].clone()
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The stack's PostgreSQL, started again on its run dir to look at what is stored.
struct Look {
    stack: Option<local_stack::LocalStack>,
    rt: tokio::runtime::Runtime,
}

impl Look {
    fn start(run_dir: &Path, port: u16) -> Look {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let mut so = local_stack::StackOptions::new(run_dir).with_base_port(port);
        so.historian.bin = Some(bin());
        so.historian.leading_args = vec!["reference-historian".into()];
        let stack = rt.block_on(local_stack::LocalStack::start(so)).expect("restart the prefilled stack");
        Look { stack: Some(stack), rt }
    }
    fn client(&self) -> postgres::Client {
        let conn = self.stack.as_ref().unwrap().postgres_conn();
        let _g = self.rt.enter();
        std::thread::scope(|s| s.spawn(|| postgres::Client::connect(&conn, postgres::NoTls).unwrap()).join().unwrap())
    }
}

impl Drop for Look {
    fn drop(&mut self) {
        if let Some(s) = self.stack.take() {
            s.stop();
        }
    }
}

fn query<T: Send>(look: &Look, f: impl FnOnce(&mut postgres::Client) -> T + Send) -> T {
    let mut c = look.client();
    std::thread::scope(|s| s.spawn(move || f(&mut c)).join().unwrap())
}

/// Distinct interval starts in the union of half-open windows (ms).
fn union_intervals(windows: &[(i64, i64)]) -> u64 {
    let mut starts = std::collections::BTreeSet::new();
    for (s, e) in windows {
        let mut t = *s;
        while t < *e {
            starts.insert(t);
            t += INTERVAL_MS;
        }
    }
    starts.len() as u64
}

/// Done-when 1: prefill a few hours for 1,000 points, rerun (nothing added
/// twice), interrupt a run with SIGINT and resume it (row count exact),
/// values equal to the model's for (seed, point, sample), and a following
/// ladder's hour-1000 probe reads the prefilled rows.
#[test]
fn prefill_is_idempotent_resumable_exact_and_read_by_the_probes() {
    let one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (run_dir, results) = (dir.path().join("stack"), dir.path().join("results"));
    let port = free_base_port();

    // 1. Two hours.
    let out = Command::new(bin())
        .args(prefill_args(&run_dir, &results, port, "0.0833333"))
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "prefill failed:\n{}", stderr(&out));
    let a = take_report(&results);
    assert_eq!(u(&a["intervals_total"]), 1440, "{a}");
    assert_eq!(u(&a["rows_added"]), POINTS * 1440, "{a}");
    assert!(a["complete"].as_bool().unwrap(), "{a}");
    assert!(stderr(&out).contains("rows/s"), "no rate printed:\n{}", stderr(&out));

    // 2. The same command again adds nothing.
    let out = Command::new(bin())
        .args(prefill_args(&run_dir, &results, port, "0.0833333"))
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "rerun failed:\n{}", stderr(&out));
    let again = take_report(&results);
    assert_eq!(u(&again["rows_added"]), 0, "{again}");
    assert_eq!((again["start_ms"].as_i64(), again["end_ms"].as_i64()), (a["start_ms"].as_i64(), a["end_ms"].as_i64()));
    assert!(stderr(&out).contains("already complete"), "{}", stderr(&out));

    // 3. Six hours, interrupted with SIGINT once some chunks are committed.
    let mut child = Command::new(bin())
        .args(prefill_args(&run_dir, &results, port, "0.25"))
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let conn = format!("host=127.0.0.1 port={} user=postgres dbname=scalebench connect_timeout=2", port + 1);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = 0i64;
    while Instant::now() < deadline && seen == 0 {
        std::thread::sleep(Duration::from_millis(100));
        if let Ok(mut c) = postgres::Client::connect(&conn, postgres::NoTls) {
            if let Ok(Some(r)) =
                c.query_opt("SELECT intervals_done FROM scalebench_prefill WHERE intervals_total = 4320", &[])
            {
                seen = r.get(0);
            }
        }
        assert!(child.try_wait().unwrap().is_none(), "the six-hour prefill ended before it could be interrupted");
    }
    assert!(seen > 0, "no chunk of the six-hour prefill committed within 120 s");
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "an interrupted prefill exits 130:\n{}", stderr(&out));
    assert!(stderr(&out).contains("run the same command again to resume"), "{}", stderr(&out));
    let cut = take_report(&results);
    assert!(cut["interrupted"].as_bool().unwrap() && !cut["complete"].as_bool().unwrap(), "{cut}");
    let written_before_resume = u(&cut["rows_added"]) + u(&cut["rows_already_stored"]);
    assert!(written_before_resume > 0 && written_before_resume < POINTS * 4320, "{cut}");

    // 4. Resumed: exactly the rest.
    let out = Command::new(bin())
        .args(prefill_args(&run_dir, &results, port, "0.25"))
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "resume failed:\n{}", stderr(&out));
    let b = take_report(&results);
    assert!(b["resumed"].as_bool().unwrap() && b["complete"].as_bool().unwrap(), "{b}");
    assert_eq!(
        (b["start_ms"].as_i64(), b["end_ms"].as_i64()),
        (cut["start_ms"].as_i64(), cut["end_ms"].as_i64()),
        "a resumed job keeps its window"
    );
    assert_eq!(u(&b["rows_before"]) + u(&b["rows_added"]) + u(&b["rows_already_stored"]), POINTS * 4320, "{b}");
    // The six hours overlap the two: those readings were met and left alone.
    assert!(
        u(&cut["rows_already_stored"]) + u(&b["rows_already_stored"]) > 0,
        "the overlap with the first history was not noticed: {cut} {b}"
    );

    // 5. What is stored: exact counts, and the model's values.
    let windows = [
        (a["start_ms"].as_i64().unwrap(), a["end_ms"].as_i64().unwrap()),
        (b["start_ms"].as_i64().unwrap(), b["end_ms"].as_i64().unwrap()),
    ];
    let expected = POINTS * union_intervals(&windows);
    {
        let look = Look::start(&run_dir, port);
        let (count, distinct, in_b, samples) = query(&look, |c| {
            let count: i64 = c.query_one("SELECT count(*) FROM point_history", &[]).unwrap().get(0);
            let distinct: i64 =
                c.query_one("SELECT count(DISTINCT (point, ts)) FROM point_history", &[]).unwrap().get(0);
            let in_b: i64 = c
                .query_one(
                    "SELECT count(*) FROM point_history WHERE ts >= to_timestamp($1::bigint / 1000.0) AND ts < to_timestamp($2::bigint / 1000.0)",
                    &[&windows[1].0, &windows[1].1],
                )
                .unwrap()
                .get(0);
            let samples: Vec<(String, i64, f64)> = c
                .query(
                    "(SELECT point, (extract(epoch FROM ts) * 1000)::bigint, value FROM point_history WHERE point = 's0/e0/temp1' ORDER BY ts LIMIT 3) \
                     UNION ALL (SELECT point, (extract(epoch FROM ts) * 1000)::bigint, value FROM point_history WHERE point <> 's0/e0/temp1' ORDER BY ts DESC LIMIT 3)",
                    &[],
                )
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect();
            (count, distinct, in_b, samples)
        });
        assert_eq!(count as u64, expected, "rows stored (expected {POINTS} points x the union of both windows)");
        assert_eq!(count, distinct);
        assert_eq!(in_b as u64, POINTS * 4320);
        // Values: the model's pure function of (seed, point, sample), with the live mapping.
        let rt = runtime();
        let plugin = rt.load_bytes("plant-shaped", builtin("plant-shaped")).unwrap();
        let mut m = plugin_runtime::ValueModel::instantiate(&rt, &plugin).unwrap();
        m.configure("{}").unwrap();
        let period = m.sample_period_ms().unwrap() as i64;
        let tags = m.tags(1, 0, POINTS as u32).unwrap();
        assert_eq!(samples.len(), 6);
        for (point, ts, value) in samples {
            let p = tags
                .iter()
                .position(|t| format!("s{}/e{}/{}", t.site, t.equip, t.label) == point)
                .expect("a point of the model") as i64;
            let t = ts - p * INTERVAL_MS / POINTS as i64;
            assert_eq!(t % INTERVAL_MS, 0, "{point} at {ts}: not on the live generator's stamp");
            let want = m.sample(1, p as u32, 1, (t / period) as u64).unwrap()[0];
            assert_eq!(value.to_bits(), want.to_bits(), "{point} at {ts}: stored {value}, the model says {want}");
        }
    }

    // run_ladder takes the one-stack lock itself.
    drop(one);
    // 6. A ladder on the prefilled stack, prefilling a short history of its own
    //    first (already stored: met and left alone), then probing under load.
    let run = run_ladder(&[
        // Probes over hours of history take seconds each, one after the
        // other from mid-soak (latest-all took 5 s a run here): the cold
        // runs alone (six runs of each took a 90 s soak) reach hour-1000's
        // first run within the soak's second half, or it has no rows.
        "--probe-warm-runs",
        "0",
        "--steps",
        "1k",
        "--interval",
        "5s",
        "--soak",
        "36s",
        "--run-dir",
        run_dir.to_str().unwrap(),
        "--base-port",
        &port.to_string(),
        "--prefill-days",
        "0.01",
    ]);
    let r = run.result();
    let p = &r["prefill"];
    assert!(p["complete"].as_bool().unwrap(), "run --prefill-days did not complete: {p}\n{}", stderr(&run.out));
    assert_eq!(u(&p["rows_added"]) + u(&p["rows_already_stored"]), u(&p["rows_total"]), "{p}");
    assert!(u(&p["rows_already_stored"]) > 0, "{p}");
    let hour = r["steps"][0]["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "hour-1000")
        .unwrap_or_else(|| panic!("no hour-1000 probe: {r}"))
        .clone();
    // An hour of 1,000 points at 5 s is 720,000 readings; the load itself adds at most 14 s of them.
    assert!(hour["rows"].is_u64(), "hour-1000 has no rows (cut by the soak's end?): {hour}");
    assert!(u(&hour["rows"]) >= POINTS * 700, "hour-1000 read {} rows: {hour}", hour["rows"]);
}

/// Done-when 2: bytes per reading in real stores; noise costs over 3x
/// plant-shaped in the columnar stores, and PostgreSQL keeps both at about
/// the same size (it does not compress them).
#[test]
fn storage_measures_real_stores() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = scalebench(&[
        "storage",
        "--models",
        "plant-shaped,noise",
        "--points",
        "1k",
        "--hours",
        "2",
        "--interval",
        "5s",
        "--base-port",
        &free_base_port().to_string(),
        "--results-dir",
        dir.path().join("results").to_str().unwrap(),
        "--work-dir",
        dir.path().to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "storage failed:\n{text}\n{}", stderr(&out));
    println!("{text}");
    let file = std::fs::read_dir(dir.path().join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-storage.json"))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    // Two hours of 1k points: enough for the compression ratios to show
    // (the smallest, parquet split, reads 3.5x), a minute of the suite.
    assert_eq!(u(&v["readings_per_model"]), 1000 * 1440);
    let store = |name: &str| {
        v["stores"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["store"].as_str().unwrap().starts_with(name))
            .unwrap_or_else(|| panic!("no store {name}: {v}"))
            .clone()
    };
    let bpr = |s: &serde_json::Value, model: &str| -> f64 {
        s["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["model"] == model)
            .unwrap_or_else(|| panic!("{model} not measured in {s}"))["bytes_per_reading"]
            .as_f64()
            .unwrap()
    };
    for name in ["parquet-zstd", "parquet-zstd-split", "tsink"] {
        let s = store(name);
        assert!(s["error"].is_null(), "{s}");
        let (plant, noise) = (bpr(&s, "plant-shaped"), bpr(&s, "noise"));
        assert!(
            noise / plant > 3.0,
            "{name}: noise {noise:.2} B/reading vs plant-shaped {plant:.2}: ratio {:.2} not above 3",
            noise / plant
        );
        assert!(plant > 0.05 && noise < 40.0, "{name}: implausible sizes {plant} {noise}");
    }
    let pg = store("postgresql");
    assert!(pg["error"].is_null(), "{pg}");
    let heap = |model: &str| -> f64 {
        let m = pg["models"].as_array().unwrap().iter().find(|m| m["model"] == model).unwrap().clone();
        let parts = m["parts"].as_array().unwrap();
        let h =
            parts.iter().find(|p| p[0] == "heap").unwrap_or_else(|| panic!("no heap bytes: {m}"))[1].as_f64().unwrap();
        h / m["readings"].as_f64().unwrap()
    };
    let (hp, hn) = (heap("plant-shaped"), heap("noise"));
    assert!(
        (hn / hp - 1.0).abs() < 0.05,
        "PostgreSQL heap: plant-shaped {hp:.2} vs noise {hn:.2} B/reading, not about equal"
    );
    assert!(hp > 30.0, "a PostgreSQL row of (text, timestamptz, float8, timestamptz) is more than 30 bytes: {hp}");
    // The reference is printed, labelled as measured elsewhere.
    assert!(text.contains("measured elsewhere") && text.contains("1.69") && text.contains("8.57"), "{text}");
}

/// Prefill refuses a target that cannot take history, in plain words.
#[test]
fn prefill_names_a_target_without_history_sink() {
    let dir = tempfile::tempdir().unwrap();
    let out = scalebench(&[
        "prefill",
        "--target",
        "nats-jetstream",
        "--points",
        "10",
        "--days",
        "0.01",
        "--stack",
        "external",
        "--pg-url",
        "host=127.0.0.1 port=29999 user=x dbname=y",
        "--results-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(e.contains("does not describe how to write history") && e.contains("hint:"), "{e}");
    assert!(!e.contains("PluginError") && !e.contains("anyhow"), "{e}");
}

/// The documented pair with a relative `--run-dir` (docs/storage.md): both
/// commands mean the same directory under the working directory, and
/// PostgreSQL — which resolves relative paths from its own data directory —
/// starts in it (it failed to, with a relative socket directory, before).
#[test]
fn a_relative_run_dir_means_the_same_place_for_prefill_and_run() {
    let one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cwd = tempfile::tempdir().unwrap();
    let port = free_base_port().to_string();
    let common = ["--target", "baler", "--model", "plant-shaped", "--run-dir", "runs/a", "--base-port", &port];
    let out = Command::new(bin())
        .arg("prefill")
        .args(common)
        .args(["--points", "100", "--days", "0.01", "--interval", "5s", "--results-dir", "results"])
        .current_dir(cwd.path())
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "prefill: {}", stderr(&out));
    assert!(cwd.path().join("runs/a/pg").is_dir(), "the stack lives under the working directory");
    let stored = u(&take_report(&cwd.path().join("results"))["rows_total"]);
    assert!(stored > 0);

    let out = Command::new(bin())
        .arg("run")
        .args(common)
        .args(["--steps", "100", "--warmup", "2s", "--soak", "10s", "--results-dir", "results"])
        .current_dir(cwd.path())
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .output()
        .unwrap();
    drop(one);
    assert!(out.status.success(), "run: {}", stderr(&out));
    let result = std::fs::read_dir(cwd.path().join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-ladder.json"))
        .expect("a ladder result");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(result).unwrap()).unwrap();
    assert_eq!(r["steps"][0]["status"], "pass", "{}", r["steps"][0]);
}
