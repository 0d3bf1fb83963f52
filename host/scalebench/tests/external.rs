//! An external stack — mosquitto, PostgreSQL and the reference historian
//! owned by the test, driven by `--stack external` — reaches a ceiling: with
//! the historian watched by pid the ladder climbs and a SIGKILL of it fails
//! the step naming it; with nothing watched the ladder climbs too and the
//! ceiling says "health not watched" (never a plain pass).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use crate::honesty::external_stack;
use crate::ladder::*;

pub(crate) fn historian_pid(stack: &local_stack::LocalStack) -> u32 {
    stack.pids().into_iter().find(|(s, _)| *s == local_stack::Service::Historian).expect("the historian runs").1
}

/// `run` of the baler against `stack` as an external one: default interval
/// (5 s), a 2 s warm-up and a 10 s soak per step, `extra` on top.
pub(crate) fn external_run(stack: &local_stack::LocalStack, dir: &tempfile::TempDir, extra: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(["run", "--target", "baler", "--model", "plant-shaped", "--warmup", "2s", "--soak", "10s"])
        .args(["--sample-every", "5s", "--stack", "external"])
        .args(["--mqtt-url", &format!("mqtt://127.0.0.1:{}", stack.mqtt_port())])
        .args(["--pg-url", &stack.postgres_conn()])
        .arg("--results-dir")
        .arg(dir.path().join("results"))
        .args(extra)
        .env("SCALEBENCH_CACHE_DIR", cache_dir());
    c
}

fn statuses(r: &serde_json::Value) -> Vec<String> {
    r["steps"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap().to_string()).collect()
}

fn table(run: &Run) -> String {
    let results = run.dir.path().join("results");
    let file = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-ladder.json"))
        .expect("a result file");
    let out = scalebench(&["table", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn an_external_stack_with_its_historian_watched_climbs_to_a_ceiling() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (stack, dir, _rt) = external_stack();
    let watch = format!("historian=pid:{}", historian_pid(&stack));
    let out = external_run(&stack, &dir, &["--steps", "1k,2.5k", "--watch", &watch]).output().unwrap();
    let run = Run { out, dir };
    let r = run.result();
    assert_eq!(statuses(&r), ["pass", "pass"], "{}\n{}", r["steps"], stderr(&run.out));
    assert_eq!(r["max_passing_points"], 2500);
    // The watched process is measured: its health and its CPU and memory.
    let h = &r["steps"][1]["containers"]["historian"];
    assert_eq!(h["state"], "running", "{h}");
    assert!(r["steps"][1]["resources"].to_string().contains("historian"), "{}", r["steps"][1]["resources"]);
    let t = table(&run);
    assert!(t.contains("Highest passing step: 2,500 points."), "{t}");
    eprintln!("{t}");
    stack.stop();
}

/// Run one 1k step against `stack` with `watch`, call `fault` 3 s into
/// the soak, and return the run (its drain bounded at 30 s).
pub(crate) fn fault_mid_soak(
    stack: &local_stack::LocalStack,
    dir: tempfile::TempDir,
    watch: &str,
    fault: impl FnOnce(),
) -> Run {
    let mut child = external_run(stack, &dir, &["--steps", "1k", "--drain-timeout", "30s", "--watch", watch])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("phase: soak") {
            break;
        }
    }
    assert!(seen.contains("phase: soak"), "the run never reached its soak:\n{seen}");
    std::thread::sleep(Duration::from_secs(3));
    fault();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    Run { out: std::process::Output { status, stdout: vec![], stderr: (seen + &rest.join("\n")).into_bytes() }, dir }
}

#[test]
fn a_sigkill_of_the_watched_historian_fails_the_step_naming_it() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (stack, dir, _rt) = external_stack();
    let pid = historian_pid(&stack);
    // The stack is the test's, not scalebench's: nobody brings it back.
    let run = fault_mid_soak(&stack, dir, &format!("historian=pid:{pid}"), || unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    });
    let r = run.result();
    let s = step0(&r);
    assert_eq!(s["status"], "fail", "{}\n{}", s["reasons"], stderr(&run.out));
    let reasons = s["reasons"].to_string();
    assert!(reasons.contains("historian:") && reasons.contains(&format!("process {pid} is gone")), "{reasons}");
    assert_eq!(r["max_passing_points"], serde_json::Value::Null);
    stack.stop();
}

/// A health endpoint the test owns: 200 while `up`, 503 otherwise.
fn health_server(up: Arc<AtomicBool>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let answer: &[u8] = if up.load(Ordering::Relaxed) {
                b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
            } else {
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\nconnection: close\r\n\r\ndown"
            };
            let _ = c.write_all(answer);
        }
    });
    port
}

#[test]
fn a_watched_health_url_that_goes_down_fails_the_step_naming_the_outage() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (stack, dir, _rt) = external_stack();
    let up = Arc::new(AtomicBool::new(true));
    let port = health_server(up.clone());
    let flag = up.clone();
    let run = fault_mid_soak(&stack, dir, &format!("api=url:http://127.0.0.1:{port}/health"), move || {
        // Down for 3 s, then back: one outage.
        flag.store(false, Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs(3));
        flag.store(true, Ordering::Relaxed);
    });
    let r = run.result();
    let s = step0(&r);
    assert_eq!(s["status"], "fail", "{}\n{}", s["reasons"], stderr(&run.out));
    let reasons = s["reasons"].to_string();
    assert!(reasons.contains("api:") && reasons.contains("failed at") && reasons.contains("HTTP 503"), "{reasons}");
    assert!(reasons.contains("answered again after"), "the outage's end is recorded: {reasons}");
    assert_eq!(s["containers"]["api"]["restarts"], 1, "{}", s["containers"]);
    stack.stop();
}

#[test]
fn with_nothing_watched_the_ladder_climbs_and_the_ceiling_says_so() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (stack, dir, _rt) = external_stack();
    let out = external_run(&stack, &dir, &["--steps", "1k,2.5k"]).output().unwrap();
    let run = Run { out, dir };
    let r = run.result();
    assert_eq!(
        statuses(&r),
        ["pass-health-not-watched", "pass-health-not-watched"],
        "{}\n{}",
        r["steps"],
        stderr(&run.out)
    );
    assert_eq!(r["max_passing_points"], 2500);
    assert!(r["steps"][0]["reasons"].to_string().contains("health not watched"), "{}", r["steps"][0]["reasons"]);
    let t = table(&run);
    assert!(t.contains("Highest passing step: 2,500 points (health not watched)."), "{t}");
    assert!(t.contains("pass (health not watched)"), "{t}");
    stack.stop();
}

#[test]
fn watch_is_refused_where_it_means_nothing_or_names_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let out =
        scalebench(&["run", "--steps", "1k", "--watch", "historian=pid:1", "--results-dir", results.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--watch is for --stack external"), "{}", stderr(&out));
    let out = scalebench(&["run", "--stack", "external", "--watch", "historian:1", "--mqtt-url", "mqtt://127.0.0.1:1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("give SERVICE=pid:PID"), "{}", stderr(&out));
    assert!(!results.exists(), "a refused run writes nothing");
}

/// `gen` and a run agree on time: a reading the run put on the wire (as the
/// historian stored it) for point p at ts carries the value `gen` gives
/// point p at sample ts / sample period, and point 0 — sent at the start of
/// its interval — has the very timestamp `gen` stamps on that sample.
#[test]
fn gen_and_a_run_carry_the_same_value_for_the_same_point_and_timestamp() {
    // plant-shaped's sample period (readings go out every 5 s).
    const PERIOD_MS: i64 = 1000;
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (stack, dir, _rt) = external_stack();
    let out = external_run(&stack, &dir, &["--steps", "1k"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let mut pg = postgres::Client::connect(&stack.postgres_conn(), postgres::NoTls).unwrap();
    let stored: Vec<(String, i64, f64)> = pg
        .query("SELECT point, (extract(epoch FROM ts) * 1000)::int8, value FROM point_history", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    stack.stop();
    assert!(stored.len() >= 1000, "{} readings stored", stored.len());

    let mut by_sample: std::collections::BTreeMap<i64, Vec<&(String, i64, f64)>> = Default::default();
    for r in &stored {
        by_sample.entry(r.1.div_euclid(PERIOD_MS)).or_default().push(r);
    }
    let (mut compared, mut same_instant) = (0, 0);
    for (sample, readings) in &by_sample {
        let out = scalebench(&[
            "gen",
            "--model",
            "plant-shaped",
            "--tags",
            "1000",
            "--samples",
            "1",
            "--first-sample",
            &sample.to_string(),
            "--format",
            "jsonl",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let gen: std::collections::HashMap<String, (i64, f64)> = out
            .stdout
            .split(|c| *c == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| {
                let v: serde_json::Value = serde_json::from_slice(l).unwrap();
                (v["point"].as_str().unwrap().to_string(), (v["ts_ms"].as_i64().unwrap(), v["value"].as_f64().unwrap()))
            })
            .collect();
        for (point, ts, value) in readings {
            let Some((gen_ts, gen_value)) = gen.get(point) else { continue };
            assert_eq!(*gen_ts, sample * PERIOD_MS);
            assert_eq!(value, gen_value, "{point} at {ts}: the run sent {value}, gen gives {gen_value}");
            compared += 1;
            same_instant += usize::from(ts == gen_ts);
        }
    }
    assert!(compared >= 1000, "only {compared} stored readings were points gen writes");
    assert!(same_instant >= 1, "no reading at the instant gen stamps its sample");
}
