//! The `baler` target adapter (world `target-adapter-history-plugin`: it can prefill): readings and
//! topology as the Baler wire contract has them (MQTT QoS 1 retained,
//! `{"point","value","ts"}` envelopes), stored rows counted in Postgres.
//! See docs/wire-contract-baler.md.
//!
//! Envelopes, tags messages and the canary are written by the shared
//! `reading-envelope` crate (`plugins/targets/envelope`); [`wire`] says which
//! topic each goes to. The logic lives in plain modules that build and test
//! natively; the component glue below is compiled for wasm32 only.

pub mod history;
pub mod params;
pub mod sql;
pub mod wire;

#[cfg(target_arch = "wasm32")]
mod component;
