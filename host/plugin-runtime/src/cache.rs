//! Compiled-code cache: `<sha256 of wasm>-<engine compatibility hash>.cwasm`.
//! A hit skips Cranelift entirely (milliseconds instead of seconds). Files
//! are written to a temporary name and renamed, so a crash never leaves a
//! half-written entry; an entry that fails to load is recompiled.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

/// A `Hasher` that feeds sha256, so the engine hash is stable across runs
/// (std's default hasher is not guaranteed to be).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        let d = self.0.clone().finalize();
        u64::from_le_bytes(d[..8].try_into().unwrap())
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

pub fn engine_hash(engine: &Engine) -> String {
    let mut h = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut h);
    format!("{:016x}", h.finish())
}

pub fn wasm_sha256(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

pub struct Cache {
    pub dir: Option<PathBuf>,
    engine_hash: String,
}

/// Where a cache hit came from, for `plugins inspect` and the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Compiled,
    Cache,
}

impl Cache {
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> Cache {
        Cache { dir, engine_hash: engine_hash(engine) }
    }

    fn path(&self, sha: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("{sha}-{}.cwasm", self.engine_hash)))
    }

    pub fn get_or_compile(&self, engine: &Engine, sha: &str, bytes: &[u8]) -> anyhow::Result<(Component, Source)> {
        if let Some(path) = self.path(sha) {
            if path.exists() {
                // Read into memory rather than mmap: a file changed under a
                // mapping (another process, a user cleaning the cache) would
                // fault the host. Reading a few hundred KiB costs ~0.1 ms.
                // SAFETY: the file was written by `Component::serialize` of an
                // engine with the same compatibility hash (it is in the name),
                // into a directory only this tool writes; wasmtime checks the
                // header and refuses a mismatch.
                let loaded = std::fs::read(&path)
                    .map_err(anyhow::Error::from)
                    .and_then(|b| unsafe { Component::deserialize(engine, &b).map_err(|e| anyhow::anyhow!("{e}")) });
                match loaded {
                    Ok(c) => return Ok((c, Source::Cache)),
                    Err(_) => {
                        let _ = std::fs::remove_file(&path);
                    }
                }
            }
            let component = Component::new(engine, bytes)?;
            if let Ok(serialized) = component.serialize() {
                let _ = write_atomically(&path, &serialized);
            }
            return Ok((component, Source::Compiled));
        }
        Ok((Component::new(engine, bytes)?, Source::Compiled))
    }
}

fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Unique per process and call: concurrent writers never share a temp file.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, path)
}

/// The default cache directory: $SCALEBENCH_CACHE_DIR, else
/// $XDG_CACHE_HOME/scalebench/wasm, else ~/.cache/scalebench/wasm.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("SCALEBENCH_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("scalebench/wasm"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/scalebench/wasm"))
}
