//! One module per subcommand.

pub mod bench;
pub mod bench_http;
pub mod bench_prefill;
pub mod bench_stacks;
pub mod compare;
pub mod gen;
pub mod gen_bench;
pub mod gen_compression;
pub mod plugins;
pub mod prefill;
pub mod report;
pub mod report_bench;
pub mod run;
pub mod stack;
pub mod storage;
pub mod table;

/// Bad input from the user as an error the top turns into exit status 2.
///
/// Here rather than in `error.rs` because [`crate::cli::UsageError`] still
/// lives in `cli.rs`, and `error.rs` must not import the CLI; when the type
/// moves to `error.rs`, this function moves with it.
pub fn usage(msg: String) -> anyhow::Error {
    crate::cli::UsageError(msg).into()
}
