//! The layer check `make lint` runs: an import that points up a layer, or
//! a module in no layer, fails it, named; the tree as it stands passes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// The layer check exactly as the Makefile's lint target runs it, on `src`.
fn check(src: &Path) -> (bool, String) {
    let makefile = std::fs::read_to_string(root().join("Makefile")).unwrap();
    let line = makefile
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("python3 scripts/import-graph.py"))
        .expect("make lint runs the import graph");
    assert!(line.contains("--layers docs/architecture.md"), "make lint checks the layers: {line}");
    let out = Command::new("python3")
        .arg(root().join("scripts/import-graph.py"))
        .arg(src)
        .args(["--layers", root().join("docs/architecture.md").to_str().unwrap()])
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn an_upward_import_planted_in_a_scratch_copy_fails_the_layer_check_by_name() {
    let (ok, text) = check(&root().join("host/scalebench/src"));
    assert!(ok, "the tree as it stands passes:\n{text}");
    assert!(text.contains("0 upward edges"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    copy_dir(&root().join("host/scalebench/src"), &src);
    // The result schema (layer 4) reaching up into the ladder (layer 2).
    let results = src.join("results.rs");
    let text = std::fs::read_to_string(&results).unwrap();
    std::fs::write(&results, format!("{text}\n#[allow(unused_imports)]\nuse crate::ladder::LadderConfig;\n")).unwrap();
    let (ok, out) = check(&src);
    assert!(!ok, "an upward import passed:\n{out}");
    assert!(out.contains("upward: results (layer 4, results and their views) -> ladder (layer 2, runs)"), "{out}");

    // A new top-level module that no layer names fails too.
    std::fs::write(&results, text).unwrap();
    std::fs::write(src.join("newcomer.rs"), "//! New.\npub fn f() {}\n").unwrap();
    let (ok, out) = check(&src);
    assert!(!ok && out.contains("`newcomer` is in no layer"), "{out}");
}
