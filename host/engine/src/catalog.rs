//! Built-in plugins (embedded in the binary at build time) and resolving a
//! name or a path given on the command line to a loaded plugin.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use plugin_runtime::{Limits, Plugin, Runtime, ValueModel};

use crate::error::UsageError;

mod generated {
    include!(concat!(env!("OUT_DIR"), "/builtin_plugins.rs"));
}

/// Built-in plugins: (name, component bytes).
pub fn builtin() -> &'static [(&'static str, &'static [u8])] {
    generated::BUILTIN
}

pub fn builtin_bytes(name: &str) -> Option<&'static [u8]> {
    builtin().iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

/// What every plugin instance may use, and where compiled plugins are cached.
#[derive(Debug, Clone)]
pub struct PluginLimits {
    pub call_timeout_ms: u64,
    pub memory_mb: u64,
    pub call_data_mb: u64,
    /// None: $XDG_CACHE_HOME/scalebench/wasm.
    pub cache_dir: Option<std::path::PathBuf>,
}

pub fn runtime(opts: &PluginLimits) -> anyhow::Result<Runtime> {
    let limits = Limits {
        call_timeout: Duration::from_millis(opts.call_timeout_ms.max(1)),
        memory_bytes: opts.memory_mb.max(1) << 20,
        call_data_bytes: opts.call_data_mb.max(1) << 20,
    };
    let rt = match &opts.cache_dir {
        Some(dir) => Runtime::with_cache_dir(limits, Some(dir.clone())),
        None => Runtime::new(limits),
    };
    rt.context("cannot start the WebAssembly runtime")
}

/// Load `spec`: a path if it names an existing file or ends in `.wasm`,
/// otherwise a built-in name.
pub fn load(rt: &Runtime, spec: &str) -> anyhow::Result<Plugin> {
    let looks_like_path = spec.ends_with(".wasm") || spec.contains('/');
    if looks_like_path || Path::new(spec).is_file() {
        return Ok(rt.load_path(Path::new(spec))?);
    }
    match builtin_bytes(spec) {
        Some(bytes) => Ok(rt.load_bytes(spec, bytes)?),
        None => {
            let names: Vec<&str> = builtin().iter().map(|(n, _)| *n).collect();
            Err(UsageError(format!(
                "no built-in plugin named `{spec}`; built-in plugins are: {}\nhint: give a path to a .wasm file to load your own",
                names.join(", ")
            ))
            .into())
        }
    }
}

/// The component bytes `spec` names (a path or a built-in), to hand to
/// workers of a distributed run, which load the very same plugin.
pub fn bytes(spec: &str) -> anyhow::Result<Vec<u8>> {
    let looks_like_path = spec.ends_with(".wasm") || spec.contains('/');
    if looks_like_path || Path::new(spec).is_file() {
        return std::fs::read(spec).with_context(|| format!("cannot read plugin {spec}"));
    }
    builtin_bytes(spec)
        .map(|b| b.to_vec())
        .ok_or_else(|| UsageError(format!("no built-in plugin named `{spec}`")).into())
}

/// A plugin error caused by what the user passed (params) is a usage error.
pub fn user_error(e: plugin_runtime::PluginError) -> anyhow::Error {
    match e {
        plugin_runtime::PluginError::Returned { ref call, .. } if call == "configure" || call == "setup" => {
            crate::error::UsageError(format!(
                "{e}\nhint: see the params schema with `scalebench plugins inspect <plugin>`"
            ))
            .into()
        }
        other => other.into(),
    }
}

/// Tags per call into a model when listing points: bounds memory at 1M+ tags.
const MODEL_CHUNK: u32 = 65_536;

/// Load and configure a value model.
pub fn open_model(limits: &PluginLimits, spec: &str, params: &str) -> anyhow::Result<ValueModel> {
    let rt = runtime(limits)?;
    let plugin = load(&rt, spec)?;
    let mut model = ValueModel::instantiate(&rt, &plugin)?;
    model.configure(params).map_err(user_error)?;
    Ok(model)
}

/// Point ids as the Baler contract names them: `s<site>/e<equip>/<label>`.
pub fn point_ids(model: &mut ValueModel, seed: u64, tags: u32) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::with_capacity(tags as usize);
    let mut first = 0;
    while first < tags {
        let n = MODEL_CHUNK.min(tags - first);
        for t in model.tags(seed, first, n)? {
            ids.push(format!("s{}/e{}/{}", t.site, t.equip, t.label));
        }
        first += n;
    }
    Ok(ids)
}
