//! One module per subcommand.

pub mod gen;
pub mod gen_bench;
pub mod gen_compression;
pub mod plugins;
pub mod run;
pub mod table;
pub mod report;
pub mod report_bench;
pub mod compare;
pub mod bench;
pub mod stack;
pub mod prefill;
pub mod storage;
pub mod bench_http;
pub mod bench_prefill;
pub mod bench_stacks;
