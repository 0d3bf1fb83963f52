//! An external stack — mosquitto, PostgreSQL and the reference historian
//! owned by the test, driven by `--stack external` — reaches a ceiling: with
//! the historian watched by pid the ladder climbs and a SIGKILL of it fails
//! the step naming it; with nothing watched the ladder climbs too and the
//! ceiling says "health not watched" (never a plain pass).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use crate::honesty::external_stack;
use crate::ladder::*;

fn historian_pid(stack: &local_stack::LocalStack) -> u32 {
    stack.pids().into_iter().find(|(s, _)| *s == local_stack::Service::Historian).expect("the historian runs").1
}

/// `run` of the baler against `stack` as an external one: default interval
/// (5 s), a 2 s warm-up and a 10 s soak per step, `extra` on top.
fn external_run(stack: &local_stack::LocalStack, dir: &tempfile::TempDir, extra: &[&str]) -> Command {
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

#[test]
fn a_sigkill_of_the_watched_historian_fails_the_step_naming_it() {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (stack, dir, _rt) = external_stack();
    let pid = historian_pid(&stack);
    let watch = format!("historian=pid:{pid}");
    let mut child = external_run(&stack, &dir, &["--steps", "1k", "--drain-timeout", "30s", "--watch", &watch])
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
    // The stack is the test's, not scalebench's: nobody brings it back.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    let run = Run { out: std::process::Output { status, stdout: vec![], stderr: vec![] }, dir };
    let r = run.result();
    let s = step0(&r);
    assert_eq!(s["status"], "fail", "{}\n{}", s["reasons"], rest.join("\n"));
    let reasons = s["reasons"].to_string();
    assert!(reasons.contains("historian:") && reasons.contains(&format!("process {pid} is gone")), "{reasons}");
    assert_eq!(r["max_passing_points"], serde_json::Value::Null);
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
