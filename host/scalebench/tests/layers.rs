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

/// The crate directories the Makefile's lint target hands the layer check.
fn crate_dirs(makefile_line: &str) -> Vec<String> {
    let args = makefile_line.split("import-graph.py").nth(1).unwrap().split("--layers").next().unwrap();
    args.split_whitespace().map(String::from).collect()
}

/// The layer check exactly as the Makefile's lint target runs it, on the
/// crates under `base` (the repository, or a scratch copy of its crates).
fn check(base: &Path) -> (bool, String) {
    let line = lint_line();
    assert!(line.contains("--layers docs/architecture.md"), "make lint checks the layers: {line}");
    let out = Command::new("python3")
        .arg(root().join("scripts/import-graph.py"))
        .args(crate_dirs(&line).iter().map(|d| base.join(d)))
        .args(["--layers", root().join("docs/architecture.md").to_str().unwrap()])
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The Makefile's line that runs `script` (make lint's).
fn makefile_line(script: &str) -> String {
    let makefile = std::fs::read_to_string(root().join("Makefile")).unwrap();
    let start = format!("python3 scripts/{script}");
    makefile
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("make lint runs {script}"))
        .to_string()
}

fn lint_line() -> String {
    makefile_line("import-graph.py")
}

#[test]
fn an_upward_import_planted_in_a_scratch_copy_fails_the_layer_check_by_name() {
    let (ok, text) = check(&root());
    assert!(ok, "the tree as it stands passes:\n{text}");
    assert!(text.contains("0 upward edges"), "{text}");
    let dirs = crate_dirs(&lint_line());
    assert!(dirs.len() >= 4, "the check covers every scalebench crate: {dirs:?}");

    let scratch = tempfile::tempdir().unwrap();
    for d in &dirs {
        copy_dir(&root().join(d).join("src"), &scratch.path().join(d).join("src"));
        std::fs::copy(root().join(d).join("Cargo.toml"), scratch.path().join(d).join("Cargo.toml")).unwrap();
    }
    // The load generator (layer 3) reaching up into the ladder (layer 2).
    let loadgen = scratch.path().join("host/engine/src/loadgen.rs");
    let text = std::fs::read_to_string(&loadgen).unwrap();
    std::fs::write(&loadgen, format!("{text}\n#[allow(unused_imports)]\nuse crate::ladder::LadderConfig;\n")).unwrap();
    let (ok, out) = check(scratch.path());
    assert!(!ok, "an upward import passed:\n{out}");
    assert!(
        out.contains("upward: scalebench_engine::loadgen (layer 3, what a run drives) -> scalebench_engine::ladder (layer 2, runs)"),
        "{out}"
    );

    // A new top-level module that no layer names fails too. (An import
    // from one crate up into another is cargo's to refuse: the crate does
    // not depend on it.)
    std::fs::write(&loadgen, text).unwrap();
    std::fs::write(scratch.path().join("host/engine/src/newcomer.rs"), "//! New.\npub fn f() {}\n").unwrap();
    let (ok, out) = check(scratch.path());
    assert!(!ok && out.contains("`newcomer` (engine) is in no layer"), "{out}");
}

/// The long-function check `make lint` runs: a function over 120 lines
/// fails it, named, unless its doc comment says why; the tree passes.
#[test]
fn a_long_function_fails_the_lint_unless_it_says_why() {
    let line = makefile_line("long-functions.py");
    let dirs: Vec<_> = line.split_whitespace().skip(2).map(|d| root().join(d)).collect();
    let run = |dirs: &[PathBuf]| {
        let out = Command::new("python3").arg(root().join("scripts/long-functions.py")).args(dirs).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (ok, text) = run(&dirs);
    assert!(ok, "the tree as it stands passes:\n{text}");

    let scratch = tempfile::tempdir().unwrap();
    let body: String = (0..130).map(|i| format!("    let _x{i} = {i};\n")).collect();
    let file = scratch.path().join("long.rs");
    std::fs::write(&file, format!("/// Does a lot.\npub fn long_one() {{\n{body}}}\n")).unwrap();
    let (ok, text) = run(&[scratch.path().to_path_buf()]);
    assert!(!ok && text.contains("`long_one` is 132 lines"), "{text}");
    std::fs::write(
        &file,
        format!("/// Does a lot.\n///\n/// Long on purpose: a test.\npub fn long_one() {{\n{body}}}\n"),
    )
    .unwrap();
    assert!(run(&[scratch.path().to_path_buf()]).0);
}
