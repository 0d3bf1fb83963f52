//! One module per subcommand.

pub mod bench;
pub mod bench_http;
pub mod bench_prefill;
pub mod bench_soak;
pub mod bench_stacks;
pub mod bench_workers;
pub mod compare;
pub mod deploy;
pub mod gen;
pub mod gen_bench;
pub mod gen_compression;
pub mod plugins;
pub mod prefill;
pub mod report;
pub mod report_bench;
pub mod run;
pub mod stack;
pub mod stack_start;
pub mod storage;
pub mod table;
pub mod worker;

pub use crate::error::usage;
