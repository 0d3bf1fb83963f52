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
