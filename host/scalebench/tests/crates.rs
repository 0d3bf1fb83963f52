//! The crates along the seams: the result schema and the report crate
//! carry none of the engine's heavy dependencies, and the engine does not
//! depend on the report crate (touching a chart rebuilds only the report
//! crate and the binary).

use std::path::Path;
use std::process::Command;

/// The packages `package` depends on (normal dependencies, the whole tree).
fn tree(package: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&root)
        .args(["tree", "--offline", "-e", "normal", "--prefix", "none", "-p", package])
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo tree -p {package}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.split_whitespace().next()).map(String::from).collect()
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
