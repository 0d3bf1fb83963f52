//! `make run`'s own build (the Makefile's RUN_BUILD: without the storage
//! study, the NATS client, the Docker API and the Haystack test server):
//! it runs the main job end to end, and a command it left out says so,
//! names how to build it, exits 2 and starts nothing. `make test` builds
//! that binary before the suite and names it in SCALEBENCH_RUN_BUILD_BIN.

use std::path::PathBuf;
use std::process::Command;

use crate::common::*;
use crate::ladder::{assert_no_stack_processes, ladder_args, step0, Run, ONE_STACK_AT_A_TIME};

fn run_build_bin() -> PathBuf {
    let p = std::env::var_os("SCALEBENCH_RUN_BUILD_BIN").map(PathBuf::from).expect(
        "SCALEBENCH_RUN_BUILD_BIN is not set: `make test` builds make run's binary before the suite and names it there; run the suite with `make test`",
    );
    assert!(p.exists(), "make run's binary {} is not there", p.display());
    p
}

#[test]
fn make_runs_build_runs_the_main_job() {
    let lean_bin = run_build_bin();
    let _one = ONE_STACK_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(&lean_bin)
        .args(ladder_args(dir.path(), &["--steps", "1k", "--interval", "5s", "--soak", "8s"]))
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .output()
        .unwrap();
    assert_no_stack_processes(&dir.path().join("stack"));
    let run = Run { out, dir };
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    let r = run.result();
    let s = step0(&r);
    assert_eq!(s["status"], "pass", "{}", serde_json::to_string_pretty(&s["reasons"]).unwrap());
    assert_eq!(s["ingest"]["stored"], s["ingest"]["acked"], "{}", s["ingest"]);
    assert!(s["ingest"]["acked"].as_u64().unwrap() >= 1_000, "{}", s["ingest"]);
    // It is the lean build: the full binary has the storage study.
    let lean = Command::new(&lean_bin).args(["storage", "--help"]).output().unwrap();
    assert!(lean.status.success(), "a left-out command still parses (its help is the same): {}", stderr(&lean));
    assert!(
        std::fs::metadata(&lean_bin).unwrap().len() < std::fs::metadata(bin()).unwrap().len(),
        "make run's binary is the smaller one"
    );
}

#[test]
fn a_command_make_runs_build_left_out_says_so_and_starts_nothing() {
    let lean_bin = run_build_bin();
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("stack");
    let run_dir_s = run_dir.display().to_string();
    let results = dir.path().join("results").display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["storage", "--points", "1k", "--hours", "1"], "`scalebench storage`"),
        (
            vec![
                "run",
                "--target",
                "nats-jetstream",
                "--steps",
                "1k",
                "--run-dir",
                &run_dir_s,
                "--results-dir",
                &results,
            ],
            "NATS JetStream",
        ),
        (
            vec![
                "run",
                "--target",
                "baler",
                "--stack",
                "docker",
                "--steps",
                "1k",
                "--run-dir",
                &run_dir_s,
                "--results-dir",
                &results,
            ],
            "`--stack docker`",
        ),
        (
            vec!["run", "--target", "haxall", "--steps", "1k", "--run-dir", &run_dir_s, "--results-dir", &results],
            "Haystack test server",
        ),
        (vec!["stack", "status", "--stack", "docker", "--project", "none"], "`scalebench stack`"),
        (vec!["bench", "nats", "--seconds", "1"], "`scalebench bench nats`"),
        (vec!["study", "nats", "--quick"], "`scalebench study nats`"),
        (vec!["haystack-testserver", "--port", "29999"], "Haystack test server"),
    ];
    for (args, what) in cases {
        let out = Command::new(&lean_bin).args(&args).env("SCALEBENCH_CACHE_DIR", cache_dir()).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(what) && err.contains("is not in this build of scalebench"), "{args:?}: {err}");
        assert!(err.contains("cargo build --release -p scalebench"), "{args:?} names how to build it: {err}");
        assert!(!run_dir.exists(), "{args:?} started a stack in {}", run_dir.display());
        // The results directory may be made (its writability is checked first); nothing goes in it.
        let written: Vec<_> = std::fs::read_dir(dir.path().join("results"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(written.is_empty(), "{args:?} wrote {written:?}");
    }
}
