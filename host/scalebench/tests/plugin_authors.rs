//! Plugin authors' paths, end to end: `plugins new` for every kind into a
//! directory outside the repository, built there with cargo, passed by
//! `plugins check` and run (a ladder step or `gen`); the three paths of
//! docs/plugin-authoring.md run as written; and `plugins check` naming what
//! a broken plugin does (a model that reads the clock, an adapter whose
//! `judge` takes an error grid, one whose count double-counts), each made
//! from the template by changing one line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;
use crate::ladder::{free_base_port, step0};

fn reasons(s: &serde_json::Value) -> String {
    s["reasons"].to_string()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Where the tests' plugin builds go: shared, so wit-bindgen compiles once.
fn build_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-authors-target")
}

/// `scalebench plugins new KIND NAME --dir <tmp>/NAME`, asserted to succeed.
fn plugins_new(tmp: &Path, kind: &str, name: &str) -> PathBuf {
    let dir = tmp.join(name);
    let out = scalebench(&["plugins", "new", kind, name, "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "plugins new {kind}: {}", stderr(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("cargo build --release --target wasm32-wasip2"), "{said}");
    assert!(!dir.starts_with(repo()), "outside the repository");
    dir
}

/// `cargo build --release --target wasm32-wasip2` in `dir`, as its README
/// says, into the shared build directory; the component's path.
fn build(dir: &Path, name: &str) -> PathBuf {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", build_dir())
        .env("CARGO_NET_OFFLINE", "true")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .unwrap();
    assert!(out.status.success(), "building {name} failed:\n{}", stderr(&out));
    build_dir().join("wasm32-wasip2/release").join(format!("{}.wasm", name.replace('-', "_")))
}

/// Replace `from` (which must be there, once) by `to` in the project's src/lib.rs.
fn patch(dir: &Path, from: &str, to: &str) {
    let lib = dir.join("src/lib.rs");
    let text = std::fs::read_to_string(&lib).unwrap();
    assert_eq!(text.matches(from).count(), 1, "the template has {from:?} once");
    std::fs::write(&lib, text.replacen(from, to, 1)).unwrap();
}

fn check(wasm: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["plugins", "check", wasm.to_str().unwrap()];
    args.extend_from_slice(extra);
    scalebench(&args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// A short ladder step with the component as target (or `--probes` for a
/// probe set, with the baler target), at ports of its own; the step.
fn one_step(tmp: &Path, args: &[&str]) -> serde_json::Value {
    let results = tmp.join("results");
    let port = free_base_port().to_string();
    let mut all =
        vec!["run", "--steps", "200", "--warmup", "1s", "--soak", "4s", "--results-dir", results.to_str().unwrap()];
    all.extend_from_slice(&["--base-port", &port]);
    all.extend_from_slice(args);
    let out = scalebench(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    let file = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-ladder.json"))
        .expect("a result file");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    step0(&r).clone()
}

// ---- every kind: new, build, check, run -------------------------------------

#[test]
fn an_mqtt_adapter_from_plugins_new_builds_outside_the_repository_passes_check_and_runs_a_step() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = plugins_new(tmp.path(), "adapter-mqtt", "acme-mqtt");
    let wasm = build(&dir, "acme-mqtt");
    let out = check(&wasm, &["--base-port", &free_base_port().to_string()]);
    let said = stdout(&out);
    assert!(out.status.success(), "{said}\n{}", stderr(&out));
    assert!(said.contains("ok      round trip: the step passed"), "{said}");
    assert!(said.contains("figure  encode of 200 readings:"), "{said}");
    let s = one_step(tmp.path(), &["--target", wasm.to_str().unwrap()]);
    assert_eq!(s["status"], "pass", "{}", reasons(&s));
    assert_eq!(s["ingest"]["stored"], s["ingest"]["acked"]);
}

#[test]
fn a_nats_adapter_from_plugins_new_builds_outside_the_repository_passes_check_and_runs_a_step() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = plugins_new(tmp.path(), "adapter-nats", "acme-nats");
    let wasm = build(&dir, "acme-nats");
    let out = check(&wasm, &[]);
    let said = stdout(&out);
    assert!(out.status.success(), "{said}\n{}", stderr(&out));
    assert!(said.contains("ok      round trip: the step passed"), "{said}");
    let s = one_step(tmp.path(), &["--target", wasm.to_str().unwrap()]);
    assert_eq!(s["status"], "pass", "{}", reasons(&s));
}

// ---- what check names ---------------------------------------------------------

#[test]
fn check_names_a_model_that_reads_the_clock_and_one_that_keeps_state() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = plugins_new(tmp.path(), "model", "clocky");
    patch(&dir, MODEL_VALUE, MODEL_VALUE_WITH_CLOCK);
    let out = check(&build(&dir, "clocky"), &[]);
    let said = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("FAIL    loads: the plugin reads the clock (it imports wasi:clocks/"), "{said}");
    assert!(said.contains("fix: compute every value from (seed, point, sample) alone"), "{said}");
    assert!(stderr(&out).contains("1 check(s) failed"), "{}", stderr(&out));

    let dir = plugins_new(tmp.path(), "model", "stateful");
    patch(&dir, MODEL_VALUE, MODEL_VALUE_WITH_STATE);
    let out = check(&build(&dir, "stateful"), &[]);
    let said = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("FAIL    deterministic: point "), "{said}");
}

#[test]
fn check_names_an_adapter_whose_judge_accepts_an_error_grid() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = plugins_new(tmp.path(), "adapter-http", "lenient");
    patch(&dir, JUDGE_ERROR_GRID, JUDGE_ERROR_GRID_ACCEPTED);
    // Against a server of the test's own, as docs/plugin-authoring.md shows
    // `--against NAME=URL` for a server of the author's.
    let server = crate::http::Server::start(&[]);
    let out = check(&build(&dir, "lenient"), &["--against", &format!("api={}", server.url())]);
    let said = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{said}\n{}", stderr(&out));
    assert!(
        said.contains("FAIL    judge accepted the answer to a malformed request as an acknowledgement: HTTP 200: ver:"),
        "{said}"
    );
    assert!(said.contains("err"), "the answer shown is the error grid: {said}");
}

#[test]
fn check_names_an_adapter_whose_count_double_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = plugins_new(tmp.path(), "adapter-mqtt", "twice");
    patch(&dir, MQTT_COUNT, MQTT_COUNT_TWICE);
    let out = check(&build(&dir, "twice"), &["--base-port", &free_base_port().to_string()]);
    let said = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{said}\n{}", stderr(&out));
    assert!(said.contains("FAIL    count: the adapter counted "), "{said}");
    assert!(said.contains("it counts some more than once"), "{said}");
}

// ---- the docs' paths, as written ---------------------------------------------

/// The lines of docs/plugin-authoring.md between `<!-- author-path: NAME begin -->` and its end.
fn author_path_commands(doc: &str, name: &str) -> Vec<String> {
    let block = doc
        .split(&format!("<!-- author-path: {name} begin -->"))
        .nth(1)
        .and_then(|rest| rest.split(&format!("<!-- author-path: {name} end -->")).next())
        .unwrap_or_else(|| panic!("docs/plugin-authoring.md marks the {name} author's path"));
    block.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("```")).map(String::from).collect()
}

/// Run one of the doc's paths in a fresh home with `scalebench` on the
/// PATH, as `cargo install --path host/scalebench` leaves it; the Rust
/// toolchain and the crates already fetched stay the user's own. Each line
/// is timed. Returns the home and the output.
fn run_author_path(name: &str) -> (tempfile::TempDir, Output) {
    let doc = std::fs::read_to_string(repo().join("docs/plugin-authoring.md")).unwrap();
    let commands = author_path_commands(&doc, name);
    assert!(commands.len() >= 5, "{commands:?}");
    assert!(commands[0].starts_with("scalebench plugins new "), "{commands:?}");
    let home = tempfile::tempdir().unwrap();
    let bin_dir = home.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::os::unix::fs::symlink(bin(), bin_dir.join("scalebench")).unwrap();
    let real_home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let cargo_home = std::env::var("CARGO_HOME").unwrap_or_else(|_| format!("{real_home}/.cargo"));
    let rustup_home = std::env::var("RUSTUP_HOME").unwrap_or_else(|_| format!("{real_home}/.rustup"));
    let path = format!("{}:{cargo_home}/bin:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut script = String::from("set -e\n");
    for (i, c) in commands.iter().enumerate() {
        script
            .push_str(&format!("t=$(date +%s%N)\n{c}\necho \"TIMED {i} $(( ($(date +%s%N) - t) / 1000000 ))\" >&2\n"));
    }
    let out = Command::new("bash")
        .args(["-c", &script])
        .current_dir(repo())
        .env("HOME", home.path())
        .env("PATH", path)
        .env("CARGO_HOME", &cargo_home)
        .env("RUSTUP_HOME", &rustup_home)
        .env("CARGO_NET_OFFLINE", "true")
        .env("SCALEBENCH_CACHE_DIR", cache_dir())
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "the {name} author's path failed:\n{err}\n{}", stdout(&out));
    for line in err.lines().filter_map(|l| l.strip_prefix("TIMED ")) {
        let (i, ms) = line.split_once(' ').unwrap();
        eprintln!("{name} author's path: {:>7} ms  {}", ms, commands[i.parse::<usize>().unwrap()]);
    }
    (home, out)
}

fn result_in(dir: &Path) -> serde_json::Value {
    let file = std::fs::read_dir(dir.join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-ladder.json"))
        .expect("a result file");
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

#[test]
fn the_model_authors_path_in_the_docs_runs_as_written() {
    let (_home, out) = run_author_path("model");
    let said = stdout(&out);
    assert!(said.contains("all ") && said.contains(" checks passed"), "{said}");
    assert!(said.contains("ok      deterministic"), "{said}");
    // gen printed readings of the new model: 10 points × 3 samples.
    let rows = said.lines().filter(|l| l.contains("my-model") || l.starts_with('{') || l.contains(',')).count();
    assert!(rows >= 30, "gen printed its readings:\n{said}");
}

#[test]
fn the_adapter_authors_path_in_the_docs_runs_as_written() {
    let (home, out) = run_author_path("adapter");
    let said = stdout(&out);
    assert!(said.contains("ok      judge refuses the answer to a malformed request (HTTP 200)"), "{said}");
    assert!(said.contains("ok      round trip: the step passed"), "{said}");
    assert!(!said.contains("warning:"), "the adapter has http-ingest: {said}");
    // The step passed against the local Haystack test server, with the
    // haystack probes on the target's own service and no --probe-params.
    let r = result_in(&home.path().join("my-adapter"));
    let s = step0(&r);
    assert_eq!((s["points"].as_u64(), s["status"].as_str()), (Some(1000), Some("pass")), "{}", reasons(s));
    assert_eq!(r["probes"], "haystack");
    let probes = s["probes"].as_array().unwrap();
    assert!(probes.iter().all(|p| p["ok"] == true), "{}", s["probes"]);
    let his = probes.iter().find(|p| p["name"] == "his-read-1000").expect("the hisRead probe");
    assert!(his["rows"].as_u64().unwrap() > 0, "the probes found the run's points through the server: {his}");
    assert_eq!(s["ingest"]["stored"], s["ingest"]["acked"]);
}

#[test]
fn the_probe_set_authors_path_in_the_docs_runs_as_written() {
    let (home, out) = run_author_path("probes");
    let said = stdout(&out);
    assert!(said.contains("ok      every probe has a budget in budgets.json"), "{said}");
    let r = result_in(&home.path().join("my-probes"));
    let s = step0(&r);
    assert_eq!(s["status"], "pass", "{}", reasons(s));
    let probes = s["probes"].as_array().unwrap();
    assert!(!probes.is_empty() && probes.iter().all(|p| p["ok"] == true), "{}", s["probes"]);
}

// ---- the one-line changes that break a template --------------------------------

/// The model's pressure point, and the same reading the clock or keeping state.
const MODEL_VALUE: &str = "        1 => 2.0 + own + 0.05 * noise,";
const MODEL_VALUE_WITH_CLOCK: &str = "        1 => 2.0 + own + 0.05 * noise + std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| (d.as_nanos() % 2) as f64).unwrap_or(0.0),";
const MODEL_VALUE_WITH_STATE: &str = "        1 => { static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0); 2.0 + own + 0.05 * noise + CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as f64 }";
/// The HTTP adapter's judge on an error grid, and the same accepting it.
const JUDGE_ERROR_GRID: &str = "            return Err(format!(\"error grid: {meta}\"));";
const JUDGE_ERROR_GRID_ACCEPTED: &str = "            return Ok(());";
/// The MQTT adapter's per-second count, and the same counting each row twice.
const MQTT_COUNT: &str = "Ok(PerSecond { second_ms, count: count as u64 })";
const MQTT_COUNT_TWICE: &str = "Ok(PerSecond { second_ms, count: count as u64 * 2 })";
