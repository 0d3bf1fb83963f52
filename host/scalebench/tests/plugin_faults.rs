//! Bad plugins are refused or contained: each error names the plugin and the
//! cause, and the host goes on working afterwards.

use std::path::Path;

use plugin_runtime::{PluginError, ValueModel};

use crate::common::*;

/// After any fault, a good plugin still loads and answers in the same runtime.
fn host_still_works(rt: &plugin_runtime::Runtime) {
    let p = rt.load_bytes("plant-shaped", builtin("plant-shaped")).unwrap();
    let mut m = ValueModel::instantiate(rt, &p).unwrap();
    m.configure("{}").unwrap();
    assert_eq!(m.sample(1, 0, 100, 0).unwrap().len(), 100);
}

fn load_and_sample(rt: &plugin_runtime::Runtime, path: &Path) -> PluginError {
    let plugin = rt.load_path(path).expect("bad plugin should load; it misbehaves only when called");
    let mut m = ValueModel::instantiate(rt, &plugin).unwrap();
    let err = m.sample(1, 0, 10, 0).unwrap_err();
    // The instance is discarded after a fault: it says so instead of misbehaving again.
    let again = m.sample(1, 0, 10, 1).unwrap_err();
    assert!(matches!(again, PluginError::Poisoned { .. }), "{again}");
    err
}

#[test]
fn a_plugin_that_traps_is_an_error_naming_plugin_call_and_panic() {
    let rt = runtime();
    let path = bad_plugin("trap");
    let err = load_and_sample(&rt, &path);
    let msg = err.to_string();
    assert!(matches!(err, PluginError::Trap { .. }), "{msg}");
    assert!(msg.contains("bad_trap.wasm") && msg.contains("`sample`"), "{msg}");
    assert!(msg.contains("deliberate trap in sample"), "the guest's panic message should be shown: {msg}");
    host_still_works(&rt);
}

#[test]
fn a_plugin_that_loops_forever_is_stopped_at_its_deadline() {
    let rt = runtime();
    let started = std::time::Instant::now();
    let err = load_and_sample(&rt, &bad_plugin("spin"));
    let msg = err.to_string();
    assert!(matches!(err, PluginError::Timeout { .. }), "{msg}");
    assert!(msg.contains("bad_spin.wasm") && msg.contains("`sample`") && msg.contains("limit"), "{msg}");
    // Generous bound: the point is that it returns at all.
    assert!(started.elapsed().as_secs() < 30, "took {:?}", started.elapsed());
    host_still_works(&rt);
}

#[test]
fn a_plugin_that_eats_memory_is_stopped_at_its_limit() {
    let rt = runtime();
    let err = load_and_sample(&rt, &bad_plugin("hog"));
    let msg = err.to_string();
    assert!(matches!(err, PluginError::OutOfMemory { .. }), "{msg}");
    assert!(
        msg.contains("bad_hog.wasm") && msg.contains("`sample`") && msg.contains(&(64u64 << 20).to_string()),
        "{msg}"
    );
    host_still_works(&rt);
}

#[test]
fn a_plugin_importing_the_filesystem_is_refused_at_load() {
    let rt = runtime();
    let err = rt.load_path(&bad_plugin("fs-reader")).err().expect("must be refused");
    let msg = err.to_string();
    assert!(matches!(err, PluginError::ForbiddenImport { .. }), "{msg}");
    assert!(
        msg.contains("bad_fs_reader.wasm") && msg.contains("wasi:filesystem") && msg.contains("filesystem access"),
        "{msg}"
    );
    host_still_works(&rt);
}

#[test]
fn a_component_of_an_unknown_world_is_refused() {
    let rt = runtime();
    let err = rt.load_path(&bad_plugin("unknown-world")).err().expect("must be refused");
    let msg = err.to_string();
    assert!(matches!(err, PluginError::UnknownWorld { .. }), "{msg}");
    assert!(msg.contains("bad_unknown_world.wasm") && msg.contains("acme:other/thing@1.0.0"), "{msg}");
    host_still_works(&rt);
}

#[test]
fn files_that_are_not_components_are_refused() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.wasm");
    std::fs::write(&text, "this is not wasm\n").unwrap();
    let err = rt.load_path(&text).err().unwrap();
    assert!(matches!(err, PluginError::NotAComponent { .. }), "{err}");
    assert!(err.to_string().contains("notes.wasm") && err.to_string().contains("magic"), "{err}");

    let module = dir.path().join("core.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    let err = rt.load_path(&module).err().unwrap();
    assert!(err.to_string().contains("core WebAssembly module"), "{err}");

    let missing = dir.path().join("missing.wasm");
    let err = rt.load_path(&missing).err().unwrap();
    assert!(matches!(err, PluginError::Read { .. }) && err.to_string().contains("missing.wasm"), "{err}");
    host_still_works(&rt);
}

#[test]
fn a_plugin_of_the_wrong_kind_is_refused_where_a_model_is_needed() {
    let rt = runtime();
    let p = rt.load_bytes("baler", builtin("baler")).unwrap();
    let err = ValueModel::instantiate(&rt, &p).err().unwrap();
    assert!(err.to_string().contains("baler") && err.to_string().contains("target-adapter plugin"), "{err}");
}

#[test]
fn the_compile_cache_is_used_on_the_second_load() {
    let dir = tempfile::tempdir().unwrap();
    let limits = plugin_runtime::Limits::default();
    let rt = plugin_runtime::Runtime::with_cache_dir(limits, Some(dir.path().to_path_buf())).unwrap();
    let first = rt.load_bytes("noise", builtin("noise")).unwrap();
    assert!(!first.from_cache);
    let rt2 = plugin_runtime::Runtime::with_cache_dir(limits, Some(dir.path().to_path_buf())).unwrap();
    let second = rt2.load_bytes("noise", builtin("noise")).unwrap();
    assert!(second.from_cache, "second load should come from the compile cache");
    // A corrupt cache entry is recompiled, not fatal.
    for e in std::fs::read_dir(dir.path()).unwrap() {
        std::fs::write(e.unwrap().path(), b"garbage").unwrap();
    }
    let rt3 = plugin_runtime::Runtime::with_cache_dir(limits, Some(dir.path().to_path_buf())).unwrap();
    let third = rt3.load_bytes("noise", builtin("noise")).unwrap();
    assert!(!third.from_cache);
    let mut m = ValueModel::instantiate(&rt3, &third).unwrap();
    assert_eq!(m.sample(1, 0, 5, 0).unwrap().len(), 5);
}

#[test]
fn the_cli_reports_a_trapping_model_and_exits_nonzero() {
    let path = bad_plugin("trap");
    let out = scalebench(&["gen", "--model", path.to_str().unwrap(), "--tags", "5", "--samples", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(e.contains("bad_trap.wasm") && e.contains("trapped"), "{e}");
}

#[test]
fn a_model_that_describes_fewer_tags_than_asked_breaks_the_contract_by_name() {
    let rt = runtime();
    let plugin = rt.load_path(&bad_plugin("spin")).unwrap();
    let mut m = ValueModel::instantiate(&rt, &plugin).unwrap();
    let err = m.tags(1, 0, 5).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, PluginError::Contract { .. }), "{msg}");
    assert!(
        msg.contains("`tags` broke the plugin contract")
            && msg.contains("asked for 5 tags from index 0, it described 0"),
        "{msg}"
    );
}

// ---- HTTP adapters: with and without http-ingest -------------------------------

#[test]
fn an_http_adapter_without_http_ingest_is_warned_about_and_one_with_it_is_not() {
    let plain = bad_plugin("odd-target");
    let out = scalebench(&["plugins", "inspect", plain.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains("warning:") && text.contains("sends no Content-Type; any 2xx counts as acknowledged"),
        "{text}"
    );
    // Built with the SDK's http-ingest export beside the target adapter.
    let judged = bad_plugin("judged-http");
    let out = scalebench(&["plugins", "inspect", judged.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("http-ingest"), "the SDK's http-ingest export is missing:\n{text}");
    assert!(!text.contains("warning:"), "{text}");
}

#[test]
fn an_adapter_built_from_a_stale_contract_names_the_export_and_says_to_copy_the_wit() {
    let stale = bad_plugin("stale-wit");
    let out = scalebench(&["plugins", "inspect", stale.to_str().unwrap()]);
    let e = stderr(&out);
    assert!(!out.status.success());
    assert!(e.contains("`scalebench:plugin/target-adapter@0.1.0` export does not match"), "{e}");
    assert!(e.contains("copy wit/plugin.wit from this scalebench"), "{e}");
    assert!(!e.contains("Error {") && !e.contains("wasmtime::"), "{e}");
    // What it says to copy is there to copy.
    let out = scalebench(&["plugins", "wit"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), std::fs::read_to_string(workspace_wit()).unwrap());
}

fn workspace_wit() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit/plugin.wit")
}
