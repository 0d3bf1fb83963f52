//! The suite's own scheduling (.config/nextest.toml), checked by `make
//! lint`: a setting nextest accepts but does not carry out as written is
//! refused by name, and the configuration as it stands passes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn check(config: &Path) -> (bool, String) {
    let out = Command::new("python3").arg(root().join("scripts/nextest-config.py")).arg(config).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn make_lint_refuses_threads_required_inside_a_test_group_and_passes_the_suite_as_it_stands() {
    let makefile = std::fs::read_to_string(root().join("Makefile")).unwrap();
    assert!(
        makefile.lines().any(|l| l.trim() == "python3 scripts/nextest-config.py .config/nextest.toml"),
        "make lint checks the suite's configuration"
    );
    let config = root().join(".config/nextest.toml");
    let (ok, out) = check(&config);
    assert!(ok, "{out}");

    // The override that left five Docker tests never started: a whole
    // JetStream cluster's kill tests given five threads in the group of one.
    let text = std::fs::read_to_string(&config).unwrap();
    let bad = format!(
        "{text}\n[[profile.default.overrides]]\nfilter = 'binary(tests) & test(/^docker::a_whole_/)'\n\
         test-group = \"docker\"\nthreads-required = 5\npriority = 99\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nextest.toml");
    std::fs::write(&path, bad).unwrap();
    let (ok, out) = check(&path);
    assert!(!ok, "passed: {out}");
    assert!(out.contains("threads-required = 5 in test group 'docker' (max-threads 1)"), "{out}");
    assert!(out.contains("test(/^docker::a_whole_/)"), "{out}");
}
