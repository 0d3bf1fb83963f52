//! The crates along the seams: the result schema and the report crate
//! carry none of the engine's heavy dependencies, and the engine does not
//! depend on the report crate (touching a chart rebuilds only the report
//! crate and the binary).

use std::path::Path;
use std::process::Command;

/// `cargo tree` of the workspace with these arguments: its lines.
fn cargo_tree(args: &[&str]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&root)
        .args(["tree", "--offline", "--prefix", "none"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo tree {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect()
}

/// The packages `package` depends on (normal dependencies, the whole tree).
fn tree(package: &str) -> Vec<String> {
    cargo_tree(&["-e", "normal", "-p", package])
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect()
}

/// `make run`'s build flags, read from the Makefile as `make run` uses them.
fn run_build_flags() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("make").current_dir(&root).args(["-s", "print-run-build"]).output().unwrap();
    assert!(out.status.success(), "make print-run-build: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect()
}

/// Every package of a build with its features, one line each (`name vX [f,g]`),
/// this workspace's own crates left out.
fn packages_with_features(flags: &[String]) -> std::collections::BTreeSet<String> {
    let mut args: Vec<&str> = vec!["-e", "normal,build", "-f", "{p} [{f}]"];
    // `cargo tree` takes the build's package and feature flags, not --release.
    args.extend(flags.iter().map(String::as_str).filter(|f| *f != "--release"));
    cargo_tree(&args)
        .into_iter()
        .map(|l| l.trim_end_matches(" (*)").to_string())
        .filter(|l| !l.is_empty() && !l.contains("(/"))
        .collect()
}

/// `make run`'s lean build leaves the optional parts out, and compiles
/// every dependency it shares with a full build with the same features,
/// so a full build after `make run` (or `make test`) builds each of them
/// once (host/build-pins keeps it so).
#[test]
fn lean_and_full_builds_share_their_dependencies() {
    let lean_flags = run_build_flags();
    assert!(lean_flags.iter().any(|f| f == "--no-default-features"), "make run builds lean: {lean_flags:?}");
    let lean = packages_with_features(&lean_flags);
    let full = packages_with_features(&["-p".to_string(), "scalebench".to_string()]);
    let names = |set: &std::collections::BTreeSet<String>| -> std::collections::BTreeSet<String> {
        set.iter().filter_map(|l| l.split_whitespace().next()).map(String::from).collect()
    };
    for left_out in ["tsink", "parquet", "zstd-sys", "bollard", "async-nats", "rusty-haystack-core", "regex-automata"] {
        assert!(names(&full).contains(left_out), "the full build has {left_out}");
        assert!(!names(&lean).contains(left_out), "make run's build leaves {left_out} out");
    }
    let differ: Vec<&String> = lean.difference(&full).collect();
    assert!(
        differ.is_empty(),
        "packages make run's build compiles with other features than a full build (pin their features in host/build-pins): {differ:?}"
    );
    assert!(lean.len() + 50 < full.len(), "the lean build is smaller: {} vs {}", lean.len(), full.len());
}

const HEAVY: &[&str] =
    &["wasmtime", "bollard", "parquet", "tsink", "async-nats", "rumqttc", "plugin-runtime", "postgres", "tokio"];

#[test]
fn the_schema_and_the_report_crates_carry_no_heavy_dependency() {
    for package in ["scalebench-results", "scalebench-report"] {
        let deps = tree(package);
        assert!(deps.len() > 5, "{package}: {deps:?}");
        let heavy: Vec<_> = deps.iter().filter(|d| HEAVY.contains(&d.as_str())).collect();
        assert!(heavy.is_empty(), "{package} depends on {heavy:?}");
    }
    // The check can fail: the engine has them all.
    let engine = tree("scalebench-engine");
    for d in ["wasmtime", "bollard", "parquet", "async-nats", "rumqttc"] {
        assert!(engine.iter().any(|e| e == d), "the engine depends on {d}");
    }
}

#[test]
fn the_engine_does_not_depend_on_the_report_crate() {
    let engine = tree("scalebench-engine");
    assert!(engine.iter().any(|d| d == "scalebench-results"), "{engine:?}");
    assert!(
        !engine.iter().any(|d| d == "scalebench-report" || d == "plotters"),
        "the engine depends on the report crate"
    );
    let binary = tree("scalebench");
    assert!(binary.iter().any(|d| d == "scalebench-report"), "the binary wires the report crate");
}
