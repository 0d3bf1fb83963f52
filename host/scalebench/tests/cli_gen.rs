//! `scalebench gen` and `plugins` from the command line: determinism of the
//! bytes written, atomic output files, and clear errors for bad input.

use crate::common::*;

#[test]
fn gen_writes_byte_identical_output_for_the_same_seed() {
    for format in ["csv", "jsonl"] {
        let args =
            ["gen", "--model", "plant-shaped", "--tags", "300", "--samples", "20", "--seed", "7", "--format", format];
        let a = scalebench(&args);
        let b = scalebench(&args);
        assert!(a.status.success(), "{}", stderr(&a));
        assert_eq!(a.stdout, b.stdout, "{format} differs between runs");
        assert_eq!(a.stdout.iter().filter(|c| **c == b'\n').count(), 300 * 20 + usize::from(format == "csv"));
        let mut other = args.to_vec();
        other[8] = "8";
        assert_ne!(scalebench(&other).stdout, a.stdout, "another seed should give other values");
    }
    let out = scalebench(&["gen", "--tags", "3", "--samples", "1", "--format", "jsonl"]);
    let first: serde_json::Value = serde_json::from_slice(out.stdout.split(|c| *c == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["point"], "s0/e0/temp1");
    assert!(first["value"].is_number() && first["ts_ms"].is_number());
}

#[test]
fn gen_out_is_written_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("readings.csv");
    let out = scalebench(&["gen", "--tags", "100", "--samples", "5", "--out", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 501);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 1, "no temporary file left: {names:?}");

    // A model that fails half-way leaves no file behind.
    let bad = dir.path().join("never.csv");
    let out = scalebench(&[
        "gen",
        "--model",
        bad_plugin("trap").to_str().unwrap(),
        "--tags",
        "5",
        "--samples",
        "2",
        "--out",
        bad.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "nothing half-written");
}

#[test]
fn bad_input_gets_a_clear_error_and_exit_status_2() {
    let out = scalebench(&["gen", "--model", "no-such-model"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("no-such-model") && e.contains("plant-shaped") && e.contains("hint:"), "{e}");

    let out = scalebench(&["gen", "--params", r#"{"mixx":{}}"#, "--tags", "3", "--samples", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown field `mixx`"), "{}", stderr(&out));

    let out = scalebench(&["gen", "--format", "xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("xml"), "{}", stderr(&out));

    let out = scalebench(&["gen", "--params", "{not json", "--tags", "3", "--samples", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn plugins_list_and_inspect_describe_the_built_ins() {
    let out = scalebench(&["plugins", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for (name, kind) in [
        ("plant-shaped", "value-model"),
        ("noise", "value-model"),
        ("baler", "target-adapter"),
        ("historian-sql", "probe-set"),
    ] {
        assert!(text.lines().any(|l| l.starts_with(name) && l.contains(kind)), "{name} {kind} missing:\n{text}");
    }
    let out = scalebench(&["plugins", "inspect", "plant-shaped"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("kind:         value-model")
            && text.contains("sample_period_ms")
            && text.contains("scalebench:plugin/value-model@0.1.0"),
        "{text}"
    );
    assert!(!text.contains("wasi:filesystem"));
    let path = bad_plugin("trap");
    let out = scalebench(&["plugins", "inspect", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A reader that stops early (`| head -1`) ends scalebench quietly: no
/// panic, no backtrace, no "error:", and the pipeline's status is head's.
#[test]
fn a_closed_pipe_ends_printing_commands_quietly() {
    let bin = bin();
    for cmd in ["plugins inspect noise", "gen --tags 20000 --samples 50", "plugins list"] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("'{}' {cmd} | head -1", bin.display()))
            .env("SCALEBENCH_CACHE_DIR", cache_dir())
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        let e = stderr(&out);
        assert!(out.status.success(), "{cmd}: {e}");
        assert_eq!(out.stdout.iter().filter(|c| **c == b'\n').count(), 1, "{cmd}");
        assert!(!e.contains("panicked") && !e.contains("Broken pipe") && !e.contains("error:"), "{cmd}: {e}");
        // Deterministically: a stdout whose reader is gone before the first
        // write ends with a SIGPIPE death's status, as `yes | head` gives.
        let mut child = std::process::Command::new(&bin)
            .args(cmd.split(' '))
            .env("SCALEBENCH_CACHE_DIR", cache_dir())
            .env("RUST_BACKTRACE", "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(141), "{cmd}: {e}");
        assert!(!e.contains("panicked") && !e.contains("Broken pipe") && !e.contains("error:"), "{cmd}: {e}");
    }
}

/// Sample s is stamped s × the sample period after the epoch: the first
/// sample written is the first at or after --start-ms, and --first-sample
/// names one directly.
#[test]
fn gen_stamps_sample_s_at_s_periods_after_the_epoch() {
    let rows = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut all = vec!["gen", "--model", "plant-shaped", "--tags", "2", "--samples", "2", "--format", "jsonl"];
        all.extend_from_slice(args);
        let out = scalebench(&all);
        assert!(out.status.success(), "{}", stderr(&out));
        out.stdout
            .split(|c| *c == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    };
    // plant-shaped samples every second: 2026-01-01 is sample 1,767,225,600.
    let by_default = rows(&[]);
    assert_eq!(by_default[0]["ts_ms"], 1_767_225_600_000i64);
    let named = rows(&["--first-sample", "1767225600"]);
    assert_eq!(by_default, named);
    // An instant between samples starts at the next one.
    let next = rows(&["--start-ms", "1767225600001"]);
    assert_eq!(next[0]["ts_ms"], 1_767_225_601_000i64);
    assert_eq!(next[0], by_default[2], "the same point at the same instant has the same value");
    let out = scalebench(&["gen", "--first-sample", "3", "--start-ms", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
