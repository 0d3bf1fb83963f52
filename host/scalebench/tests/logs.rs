//! Logs on real runs: `-q` leaves the results table alone on stdout and
//! nothing on stderr; `--log-format json` makes every stderr line a JSON
//! object (progress included) while the table stays on stdout; `-v` and
//! RUST_LOG say more. The rule that keeps it so (no terminal output past
//! the command layer and the progress view) is `scripts/print-lint.py`,
//! run by `make lint`.

use std::process::Command;

use crate::common::*;
use crate::ladder::{ladder_args, Run, ONE_STACK_AT_A_TIME};

fn run_with(flags: &[&str], env: &[(&str, &str)]) -> Run {
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut args = ladder_args(dir.path(), &["--soak", "3s", "--warmup", "1s", "--sample-every", "1s"]);
    args.splice(1..1, flags.iter().map(|s| s.to_string()));
    let mut cmd = Command::new(bin());
    cmd.args(&args).env("SCALEBENCH_CACHE_DIR", cache_dir()).env_remove("RUST_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    Run { out: cmd.output().unwrap(), dir }
}

fn table_of(r: &Run) -> String {
    let result = std::fs::read_dir(r.dir.path().join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-ladder.json"))
        .unwrap();
    String::from_utf8(scalebench(&["table", result.to_str().unwrap()]).stdout).unwrap()
}

#[test]
fn quiet_prints_only_the_table_and_json_logs_are_json_lines() {
    let q = run_with(&["-q"], &[]);
    assert!(q.out.status.success(), "{}", stderr(&q.out));
    let stdout = String::from_utf8(q.out.stdout.clone()).unwrap();
    assert_eq!(stdout.trim_end(), table_of(&q).trim_end(), "-q: stdout is the results table, nothing else");
    assert_eq!(stderr(&q.out), "", "-q: no progress, no logs");

    let j = run_with(&["--log-format", "json"], &[]);
    assert!(j.out.status.success(), "{}", stderr(&j.out));
    let err = stderr(&j.out);
    let lines: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}\n{err}")))
        .collect();
    assert!(lines.len() >= 5, "{err}");
    assert!(lines.iter().all(|l| l["level"].is_string() && l["message"].is_string() && l["timestamp"].is_string()));
    assert!(
        lines
            .iter()
            .any(|l| l["target"] == "scalebench::progress" && l["message"].as_str().unwrap().contains("phase: soak")),
        "progress is in the log: {err}"
    );
    assert!(lines.iter().any(|l| l["message"].as_str().unwrap().starts_with("results: ")), "{err}");
    let stdout = String::from_utf8(j.out.stdout.clone()).unwrap();
    assert_eq!(stdout.trim_end(), table_of(&j).trim_end(), "the table stays on stdout");

    // RUST_LOG decides over the flags: off silences the log (progress stays).
    let off = run_with(&[], &[("RUST_LOG", "off")]);
    assert!(off.out.status.success());
    let e = stderr(&off.out);
    assert!(!e.contains("results: ") && !e.contains("floor: "), "{e}");
    assert!(e.contains("phase: soak"), "{e}");
}

#[test]
fn a_bad_log_format_is_refused_naming_the_choices() {
    let out = scalebench(&["--log-format", "yaml", "table", "a-ladder.json"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("yaml") && e.contains("text") && e.contains("json"), "{e}");
}
