//! Hostile adapters in the middle of a real ladder (issue 22, part 3): a
//! `judge` that loops, `headers` of megabytes, an `encode` that allocates up
//! to its memory limit, and a server answering with a gigabyte. Each run is
//! `scalebench run` against a real stack; the first step (200 points) is
//! measured normally and the fault strikes in the second (400 points: the
//! fixtures in tests/bad-plugins misbehave on the points it adds). Each must
//! end the step with an error naming the plugin and the call, keep the
//! first step in the result file, and leave no process of the stack behind.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::http::Server;
use crate::ladder::{assert_no_stack_processes, ladder_args, Run, ONE_STACK_AT_A_TIME};

/// Longest any of these runs may take: the point of each is that it ends.
const DEADLINE: Duration = Duration::from_secs(240);

/// Two steps of an HTTP ladder with `adapter`, no probes; `during` is
/// called with the results dir every 100 ms while scalebench runs. Killed
/// (and the test failed) if it outlives [`DEADLINE`].
fn run_two_steps(adapter: &str, extra: &[&str], mut during: impl FnMut(&Path)) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut a = vec!["--target", adapter, "--steps", "200,400", "--soak", "8s", "--probes", "none"];
    a.extend_from_slice(extra);
    let mut child = Command::new(bin())
        .args(ladder_args(dir.path(), &a))
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the pipes while it runs, so a chatty run never blocks on them.
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut b).map(|_| b).unwrap_or_default()
    });
    let err_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut b).map(|_| b).unwrap_or_default()
    });
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            let e = String::from_utf8_lossy(&err_reader.join().unwrap()).to_string();
            panic!("scalebench was still running after {DEADLINE:?}: the fault hung it\n{e}");
        }
        during(&dir.path().join("results"));
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = std::process::Output { status, stdout: out_reader.join().unwrap(), stderr: err_reader.join().unwrap() };
    assert_no_stack_processes(&dir.path().join("stack"));
    Run { out, dir }
}

/// The result file holds the first step, measured and passed, and ends on
/// the second step's error; scalebench exited 1 with that error.
fn assert_first_step_kept_and_ended_on(run: &Run, plugin: &str, says: &[&str]) {
    let e = stderr(&run.out);
    assert_eq!(run.out.status.code(), Some(1), "an adapter's fault is an error of the run:\n{e}");
    for s in says {
        assert!(e.contains(plugin) && e.contains(s), "stderr should name {plugin} and say {s:?}:\n{e}");
    }
    assert!(!e.contains("panicked") && !e.contains("PluginError") && !e.contains("wasmtime::"), "{e}");
    let r = run.result();
    let steps = r["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "the first step is kept, the broken one is not half-written: {e}");
    let s = &steps[0];
    assert_eq!(s["points"], 200);
    assert_eq!(s["status"], "pass", "{}\n{e}", s["reasons"]);
    assert_eq!(s["ingest"]["stored"], s["ingest"]["acked"]);
    assert!(s["ingest"]["acked"].as_u64().unwrap() >= 200 * 8, "{}", s["ingest"]);
    let ended = r["ended_because"].as_str().unwrap();
    assert!(ended.starts_with("error in step 400: ") && ended.contains(plugin), "{ended}");
    for s in says {
        assert!(ended.contains(s), "ended_because should say {s:?}: {ended}");
    }
    assert!(r["finished_utc"].is_string(), "the result file is complete: {r}");
}

#[test]
fn a_judge_that_loops_forever_is_stopped_at_its_deadline_and_ends_the_step() {
    let adapter = bad_plugin("judge-loop");
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let run = run_two_steps(adapter.to_str().unwrap(), &["--plugin-timeout-ms", "3000"], |_| {});
    assert_first_step_kept_and_ended_on(&run, "bad_judge_loop.wasm", &["`judge` ran longer than its limit of 3s"]);
    // Not the server's refusal: the server answered, the adapter failed.
    assert!(!stderr(&run.out).contains("the SUT refused"), "{}", stderr(&run.out));
}

#[test]
fn headers_of_megabytes_are_the_adapters_bug_and_end_the_step() {
    let adapter = bad_plugin("huge-headers");
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let run = run_two_steps(adapter.to_str().unwrap(), &[], |_| {});
    assert_first_step_kept_and_ended_on(
        &run,
        "bad_huge_headers.wasm",
        &["`headers` broke the plugin contract", "KiB of headers for api /api/hisWrite?late", "at most 64 KiB"],
    );
    assert!(!stderr(&run.out).contains("the SUT refused"), "{}", stderr(&run.out));
}

#[test]
fn an_encode_that_allocates_up_to_its_memory_limit_mid_step_ends_the_step() {
    let adapter = bad_plugin("midstep-hog");
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let run = run_two_steps(adapter.to_str().unwrap(), &["--plugin-memory-mb", "64"], |_| {});
    assert_first_step_kept_and_ended_on(
        &run,
        "bad_midstep_hog.wasm",
        &[&format!("`encode` ran out of memory (limit {} bytes)", 64u64 << 20)],
    );
}

#[test]
fn a_gigabyte_answer_is_read_no_further_than_4_mib_and_never_judged() {
    // The haxall adapter against a Haystack test server of the test's own;
    // once the first step is in the result file, every hisWrite is answered
    // with a gigabyte.
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = Server::start(&[]);
    let service = format!("api={}", server.url());
    let mut switched = false;
    let run = run_two_steps("haxall", &["--stack", "external", "--service", &service], |results| {
        if switched {
            return;
        }
        let file = std::fs::read_dir(results)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with("-ladder.json"));
        let steps = file
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|r| r["steps"].as_array().map(|s| s.len()))
            .unwrap_or(0);
        if steps >= 1 {
            ureq::post(&format!("{}/test/huge-answers", server.url())).call().unwrap();
            switched = true;
        }
    });
    assert!(switched, "the first step never reached the result file:\n{}", stderr(&run.out));
    // The server's answer is a measurement, not an error of the run.
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    let r = run.result();
    let steps = r["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{}", stderr(&run.out));
    // An external stack's health is not watched: "pass-health-not-watched".
    assert!(steps[0]["status"].as_str().unwrap().starts_with("pass"), "{}", steps[0]["reasons"]);
    let s = &steps[1];
    assert_eq!(s["status"], "fail", "{}", s["reasons"]);
    let reasons = serde_json::to_string(&s["reasons"]).unwrap();
    assert!(
        reasons.contains("the SUT refused")
            && reasons
                .contains("an answer larger than 4 MiB, read no further and not handed to `judge` of plugin haxall"),
        "{reasons}"
    );
    assert!(s["generator"]["rejected"].as_u64().unwrap() > 0, "{}", s["generator"]);
    assert_eq!(s["ingest"]["stored"], s["ingest"]["acked"]);
    // The server is still up, and no answer was read to its end: the
    // client stopped at 4 MiB (the server counts what it produced as the
    // client read, socket buffers included).
    let f = server.faults();
    let (answers, bytes) = (f["huge_answers"].as_u64().unwrap(), f["huge_answer_bytes"].as_u64().unwrap());
    assert!(answers > 0, "{f}");
    assert!(bytes < answers * (32 << 20), "{bytes} bytes produced for {answers} answers of a gigabyte: {f}");
}
