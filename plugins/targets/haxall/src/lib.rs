//! The `haxall` target adapter (world `target-adapter-http-history-plugin`): readings go
//! to a Haystack server over HTTP as Zinc `hisWrite` grids, topology as
//! `commit` "add" grids, stored readings are counted with `hisRead`, and the
//! adapter logs in with SCRAM-SHA-256 (Haystack auth) when given a user.
//! Prefill (history-sink) writes history with the same hisWrite grids.
//! See docs/haxall-adapter.md.
//!
//! The logic lives in plain modules that build and test natively; the
//! component glue is compiled for wasm32 only.

pub mod params;
pub mod scram;
pub mod wire;
pub mod zinc;

#[cfg(target_arch = "wasm32")]
mod component;
