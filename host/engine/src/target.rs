//! What the ladder asks of a value model and a target adapter, as traits.
//!
//! The WebAssembly plugins ([`ValueModel`], [`TargetAdapter`]) implement
//! them by delegation; the fast test tier implements them in memory
//! (`ladder::step::fake`), so a step's honesty rules run without a broker,
//! a database or a compiled plugin. Only the calls a step makes are here:
//! configuring, planning and prefill stay on the plugin types.

use plugin_runtime::adapter_types::{EncodedBatch, Message, Stat};
use plugin_runtime::types::{Readings, TagInfo};
use plugin_runtime::{PluginError, TargetAdapter, ValueModel};

/// A value model as the producer and the topology phase use it.
pub trait Model: Send {
    fn name(&self) -> &str;
    /// Memory the instance holds now, in bytes.
    fn memory_bytes(&self) -> u64;
    /// Metadata of points `first .. first + count`.
    fn tags(&mut self, seed: u64, first: u32, count: u32) -> Result<Vec<TagInfo>, PluginError>;
    /// Values of points `first .. first + count` at sample number `sample`.
    fn sample(&mut self, seed: u64, first: u32, count: u32, sample: u64) -> Result<Vec<f64>, PluginError>;
}

/// A target adapter as a step uses it: encoding (topology, readings,
/// canaries) and reading the store back (canaries stored, stats).
pub trait Adapter: Send {
    fn name(&self) -> &str;
    /// Memory the instance holds now, in bytes.
    fn memory_bytes(&self) -> u64;
    /// One address per point; a counting instance learns the run's points here.
    fn addresses(&mut self, points: &[TagInfo]) -> Result<Vec<String>, PluginError>;
    fn topology(&mut self, points: &[TagInfo]) -> Result<Vec<Message>, PluginError>;
    fn encode(&mut self, batch: &Readings) -> Result<EncodedBatch, PluginError>;
    fn canary(&mut self, seq: u64, ts_ms: i64) -> Result<Message, PluginError>;
    /// Canary numbers from `from_seq` on that storage holds.
    fn canaries_stored(&mut self, from_seq: u64) -> Result<Vec<u64>, PluginError>;
    /// Durability settings and storage sizes, as the target reports them.
    fn stats(&mut self) -> Result<Vec<Stat>, PluginError>;
}

impl Model for ValueModel {
    fn name(&self) -> &str {
        ValueModel::name(self)
    }
    fn memory_bytes(&self) -> u64 {
        ValueModel::memory_bytes(self)
    }
    fn tags(&mut self, seed: u64, first: u32, count: u32) -> Result<Vec<TagInfo>, PluginError> {
        ValueModel::tags(self, seed, first, count)
    }
    fn sample(&mut self, seed: u64, first: u32, count: u32, sample: u64) -> Result<Vec<f64>, PluginError> {
        ValueModel::sample(self, seed, first, count, sample)
    }
}

impl Adapter for TargetAdapter {
    fn name(&self) -> &str {
        TargetAdapter::name(self)
    }
    fn memory_bytes(&self) -> u64 {
        TargetAdapter::memory_bytes(self)
    }
    fn addresses(&mut self, points: &[TagInfo]) -> Result<Vec<String>, PluginError> {
        TargetAdapter::addresses(self, points)
    }
    fn topology(&mut self, points: &[TagInfo]) -> Result<Vec<Message>, PluginError> {
        TargetAdapter::topology(self, points)
    }
    fn encode(&mut self, batch: &Readings) -> Result<EncodedBatch, PluginError> {
        TargetAdapter::encode(self, batch)
    }
    fn canary(&mut self, seq: u64, ts_ms: i64) -> Result<Message, PluginError> {
        TargetAdapter::canary(self, seq, ts_ms)
    }
    fn canaries_stored(&mut self, from_seq: u64) -> Result<Vec<u64>, PluginError> {
        TargetAdapter::canaries_stored(self, from_seq)
    }
    fn stats(&mut self) -> Result<Vec<Stat>, PluginError> {
        TargetAdapter::stats(self)
    }
}
