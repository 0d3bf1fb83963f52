//! The plugin runtime: everything scalebench does with WebAssembly.
//!
//! It loads a component from bytes or a path, checks that it is a component
//! of exactly one known world that imports only what the host grants, compiles
//! it once (cached as `.cwasm`, keyed by the engine's compatibility hash and
//! the sha256 of the wasm), and instantiates it in a store with a memory limit.
//! Every call into a plugin has an epoch deadline; a trap, a timeout or
//! running out of memory comes back as a [`PluginError`] that names the
//! plugin and the call.
//!
//! It holds wasmtime, which takes long to build, so that the rest of the host
//! rebuilds without touching it. It does no I/O on a plugin's behalf itself:
//! the host passes a [`HostServices`] that performs HTTP and SQL.

mod bindings;
mod cache;
mod error;
mod host;
mod runtime;
mod validate;
mod worlds;

pub use bindings::types;
pub use cache::wasm_sha256;
pub use error::PluginError;
pub use host::{HostServices, NoServices};
pub use runtime::{Limits, Plugin, Runtime};
pub use validate::{World, CONTRACT_VERSION};
pub use worlds::{adapter_types, history_types, probe_types, ProbeSet, TargetAdapter, ValueModel, POINTS_PER_CALL};
