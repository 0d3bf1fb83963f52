//! scalebench's result schema and what it is made of: the result file
//! (`results`), ack-latency HdrHistograms (`latency`,
//! `per_second_latency`), the machine a run ran on (`hardware`), units and
//! number formats (`units`, `format`), one monotonic clock read as epoch
//! time (`clock`), atomic files (`atomic_file`), benchmark records
//! (`bench_record`) and what a study records (`study`).
//!
//! It depends on no engine, plugin runtime, client library or chart code:
//! the report crate and anything else that reads results builds on this
//! alone.

pub mod atomic_file;
pub mod bench_record;
pub mod clock;
pub mod format;
pub mod hardware;
pub mod latency;
pub mod per_second_latency;
pub mod results;
pub mod serde_words;
pub mod study;
pub mod units;
