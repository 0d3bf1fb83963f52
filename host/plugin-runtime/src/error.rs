//! Errors of loading and calling plugins. Every variant names the plugin and,
//! for calls, the function, so a user knows which file misbehaved and how.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("plugin {plugin}: cannot read file: {source}\nhint: check the path, or use a built-in name (scalebench plugins list)")]
    Read { plugin: String, source: std::io::Error },

    #[error("plugin {plugin}: not a WebAssembly component: {reason}\nhint: build it with `cargo build --release --target wasm32-wasip2` (a wasm32-wasip2 cdylib is a component)")]
    NotAComponent { plugin: String, reason: String },

    #[error("plugin {plugin}: exports no known world: {reason}\nhint: implement one of the worlds in wit/plugin.wit (value-model-plugin, probe-set-plugin, target-adapter-plugin) with the scalebench plugin SDK")]
    UnknownWorld { plugin: String, reason: String },

    #[error("plugin {plugin}: imports what the host does not grant: {imports}\n{why}\nhint: plugins get no filesystem, sockets, clocks, randomness or environment; ask the host through the imports of your world instead")]
    ForbiddenImport { plugin: String, imports: String, why: String },

    #[error("plugin {plugin}: {culprit} contract version {found}, which this scalebench does not speak (it speaks {supported})\nhint: copy wit/plugin.wit from this scalebench (`scalebench plugins wit > wit/plugin.wit`), have info() report abi \"{supported}\", and rebuild")]
    Abi { plugin: String, found: String, supported: String, culprit: String },

    #[error("plugin {plugin}: its `{export}` export does not match this scalebench's contract: {detail}\nhint: it was built from another copy of the contract: copy wit/plugin.wit from this scalebench (`scalebench plugins wit > wit/plugin.wit`) and rebuild")]
    Mismatch { plugin: String, export: String, detail: String },

    #[error("plugin {plugin}: failed to compile: {detail}")]
    Compile { plugin: String, detail: String },

    #[error("plugin {plugin}: failed to instantiate: {detail}")]
    Instantiate { plugin: String, detail: String },

    #[error("plugin {plugin}: `{call}` trapped: {detail}\nhint: this is a bug in the plugin; the plugin instance is discarded")]
    Trap { plugin: String, call: String, detail: String },

    #[error("plugin {plugin}: `{call}` ran longer than its limit of {limit:?} and was stopped\nhint: pass smaller batches, or raise the limit (--plugin-timeout-ms)")]
    Timeout { plugin: String, call: String, limit: Duration },

    #[error("plugin {plugin}: `{call}` ran out of memory (limit {limit_bytes} bytes) and was stopped\nhint: pass smaller batches, or raise the limit (--plugin-memory-mb)")]
    OutOfMemory { plugin: String, call: String, limit_bytes: u64 },

    #[error("plugin {plugin}: `{call}` moved more than {} MiB from the plugin to the host in one call (the per-call data limit) and was stopped\nhint: scalebench slices its own per-point calls well below this limit; if this plugin really returns that much per call, raise the limit (--plugin-call-data-mb)", limit_bytes >> 20)]
    CallData { plugin: String, call: String, limit_bytes: u64 },

    #[error("plugin {plugin}: `{call}` broke the plugin contract: {problem}\nhint: this is a bug in the plugin (see docs/plugin-contract.md for what `{call}` must return)")]
    Contract { plugin: String, call: String, problem: String },

    #[error("plugin {plugin}: cannot call `{call}`: an earlier call failed and left the instance unusable; load the plugin again")]
    Poisoned { plugin: String, call: String },

    #[error("plugin {plugin}: `{call}` returned an error: {message}")]
    Returned { plugin: String, call: String, message: String },
}

impl PluginError {
    pub fn plugin(&self) -> &str {
        match self {
            PluginError::Read { plugin, .. }
            | PluginError::NotAComponent { plugin, .. }
            | PluginError::UnknownWorld { plugin, .. }
            | PluginError::ForbiddenImport { plugin, .. }
            | PluginError::Abi { plugin, .. }
            | PluginError::Mismatch { plugin, .. }
            | PluginError::Compile { plugin, .. }
            | PluginError::Instantiate { plugin, .. }
            | PluginError::Trap { plugin, .. }
            | PluginError::Timeout { plugin, .. }
            | PluginError::OutOfMemory { plugin, .. }
            | PluginError::CallData { plugin, .. }
            | PluginError::Contract { plugin, .. }
            | PluginError::Poisoned { plugin, .. }
            | PluginError::Returned { plugin, .. } => plugin,
        }
    }
}
