//! scalebench's engine: one run and everything it drives.
//!
//! Map, from the top (see docs/architecture.md):
//! - `ladder/`: the run (config, session, the one-reading check) and
//!   `ladder/step/` (topology, offer, drain, count, assemble); `verdict`: the
//!   pass rules; `budgets`: their limits; `target`: what a step asks of a
//!   model and an adapter (and `ladder/fake.rs`, the fast tier's in-memory SUT).
//!   `distributed/`: a run whose load comes from workers; `study/`: the NATS
//!   study; `plugin_check/`: a plugin against the contract.
//! - `loadgen` (the producer), `load_source` (where a step's readings come
//!   from: this process, or workers), `transport/` (MQTT with its `$SYS` counters,
//!   NATS, HTTP carriers; one pool), `stack/` (drivers: local, docker, external with `--watch`),
//!   `storage`, `canary`, `probes`, `services/` (SQL and HTTP for plugins),
//!   `prefill/`, `live_safety`, `progress`, `live_metrics/`.
//! - Bottom: `error`, `future`, `output`, `catalog` (plugins by name),
//!   `points`, `guard`, `logging`, `memory`, `async_runtime`.
//!
//! The result schema (results, latency, clock, units, formats, hardware)
//! is the `scalebench-results` crate, re-exported here under the names the
//! engine's files use. No report or chart is drawn here and no command
//! line parsed: those are the report crate and the binary.

pub mod async_runtime;
pub mod budgets;
pub mod canary;
pub mod catalog;
pub mod compression;
pub mod credentials;
pub mod distributed;
pub mod error;
pub mod future;
pub mod guard;
pub mod ladder;
pub mod live_metrics;
pub mod live_safety;
pub mod load_source;
pub mod loadgen;
pub mod logging;
pub mod memory;
pub mod output;
pub mod pg_connect;
pub mod phase;
pub mod plugin_check;
pub mod points;
pub mod prefill;
pub mod probes;
pub mod progress;
pub mod services;
pub mod stack;
pub mod storage;
#[cfg(feature = "storage-study")]
pub mod storage_cost;
pub mod study;
pub mod target;
pub mod throwaway_ca;
pub mod tls;
pub mod transport;
pub mod verdict;

// The result schema, under the paths the engine has always used.
pub use scalebench_results::{
    atomic_file, bench_record, clock, format, hardware, latency, per_second_latency, results, serde_words, units,
};
