//! Shared by the test modules: the binary, a runtime with test limits, and
//! the deliberately bad plugins (built once per test run).

#![allow(dead_code)]

pub mod pg;
pub mod pki;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use plugin_runtime::{Limits, Runtime};

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_scalebench"))
}

pub fn scalebench(args: &[&str]) -> Output {
    Command::new(bin()).args(args).env("SCALEBENCH_CACHE_DIR", cache_dir()).output().expect("run scalebench")
}

pub fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("wasm-cache")
}

/// A runtime with tight limits so faults show quickly.
pub fn runtime() -> Runtime {
    runtime_with_call_limit(Duration::from_millis(500))
}

/// The suite's plugin runtime (64 MiB of memory, the shared compile cache)
/// with a call limit of its own.
pub fn runtime_with_call_limit(call_timeout: Duration) -> Runtime {
    Runtime::with_cache_dir(Limits { call_timeout, memory_bytes: 64 << 20, ..Limits::default() }, Some(cache_dir()))
        .unwrap()
}

pub fn builtin(name: &str) -> &'static [u8] {
    scalebench::catalog::builtin_bytes(name).unwrap_or_else(|| panic!("built-in plugin {name} missing"))
}

/// Build tests/bad-plugins for wasm32-wasip2 once and return its output dir.
pub fn bad_plugins_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bad-plugins");
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad-plugins/Cargo.toml");
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
            .arg(&manifest)
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("RUSTFLAGS")
            .status()
            .expect("run cargo to build the bad plugins");
        assert!(status.success(), "building tests/bad-plugins failed");
        target.join("wasm32-wasip2/release")
    })
}

pub fn bad_plugin(name: &str) -> PathBuf {
    let p = bad_plugins_dir().join(format!("bad_{}.wasm", name.replace('-', "_")));
    assert!(p.exists(), "{} not built", p.display());
    p
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}
