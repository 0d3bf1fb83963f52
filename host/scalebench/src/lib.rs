//! scalebench: finds out, honestly, how far one server goes for an IoT /
//! time-series ingest system.
//!
//! The library holds everything; `main.rs` only parses and calls [`run`].
//! Map of the crate, from the top (see docs/architecture.md):
//! - `cli` (clap derive) and `commands/*` (one module per subcommand, and
//!   `commands/stack_start.rs`: the run's stack from its flags). Nothing
//!   below imports them.
//! - `ladder/`: the run (config, session, the one-reading check) and
//!   `ladder/step/` (topology, offer, drain, count, assemble); `verdict`: the
//!   pass rules; `budgets`: their limits; `target`: what a step asks of a
//!   model and an adapter (and `ladder/fake.rs`, the fast tier's in-memory SUT).
//! - `loadgen` (the producer), `transport/` (MQTT with its `$SYS` counters,
//!   NATS, HTTP carriers; one pool), `stack/` (drivers: local, docker, external with `--watch`),
//!   `storage`, `canary`, `probes`, `services/` (SQL and HTTP for plugins),
//!   `prefill/`, `live_safety`, `latency` (HdrHistograms).
//! - `results` (the result file's schema), `report/`, `compare`, `chart`,
//!   `progress`, `study/`.
//! - Bottom: `error`, `clock`, `units`, `format`, `future`, `output`,
//!   `catalog` (plugins by name), `points`, `hardware`, `guard`.

pub mod async_runtime;
pub mod atomic_file;
pub mod bench_record;
pub mod budgets;
pub mod canary;
pub mod catalog;
pub mod chart;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod compare;
pub mod compression;
pub mod credentials;
pub mod distributed;
pub mod error;
pub mod format;
pub mod future;
pub mod gates;
pub mod guard;
pub mod hardware;
pub mod ladder;
pub mod latency;
pub mod live_metrics;
pub mod live_safety;
pub mod loadgen;
pub mod logging;
pub mod output;
pub mod per_second_latency;
pub mod pg_connect;
pub mod phase;
pub mod plugin_check;
pub mod plugin_templates;
pub mod points;
pub mod prefill;
pub mod probes;
pub mod progress;
pub mod report;
pub mod results;
pub mod run_plan;
pub mod serde_words;
pub mod services;
pub mod stack;
pub mod storage;
pub mod storage_cost;
pub mod study;
pub mod target;
pub mod throwaway_ca;
pub mod tls;
pub mod transport;
pub mod units;
pub mod verdict;

use cli::{Cli, Command};

/// Parse a command line, with a `run --plan` or `run --again` expanded
/// into its flags and the run's resolved plan attached. A clap error (bad
/// flag, `--help`) comes back as clap's, to print and exit with as clap does.
pub fn parse(argv: Vec<std::ffi::OsString>) -> Result<Cli, ParseError> {
    use clap::{CommandFactory, FromArgMatches};
    let command = Cli::command();
    let argv = run_plan::expand(argv, &command).map_err(ParseError::Plan)?;
    let matches = command.clone().try_get_matches_from(argv).map_err(ParseError::Clap)?;
    let mut cli = Cli::from_arg_matches(&matches).map_err(ParseError::Clap)?;
    if let (Command::Run(args), Some(m)) = (&mut cli.command, matches.subcommand_matches("run")) {
        args.resolved_plan = run_plan::resolved(m, &command);
    }
    Ok(cli)
}

/// Why a command line did not parse.
pub enum ParseError {
    /// clap's own: usage, `--help`, `--version`.
    Clap(clap::Error),
    /// A plan that cannot be read or names a flag that does not exist.
    Plan(error::UsageError),
}

/// Run one command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    logging::init(cli.log.verbose, cli.log.quiet, cli.log.log_format);
    match cli.command {
        Command::Gen(args) => commands::gen::run(&cli.plugin, args),
        Command::Plugins(args) => commands::plugins::run(&cli.plugin, args),
        Command::Plan { what: cli::PlanCommand::Show { args } } => commands::plan::show(args),
        Command::Run(args) => commands::run::run(&cli.plugin, *args),
        Command::Bench { what: cli::BenchCommand::Generator(args) } => commands::bench::run(&cli.plugin, args),
        Command::Bench { what: cli::BenchCommand::Nats(args) } => commands::bench::run_nats(&cli.plugin, args),
        Command::Bench { what: cli::BenchCommand::Stacks(args) } => commands::bench_stacks::run(args),
        Command::Study { what: cli::StudyCommand::Nats(args) } => commands::study::nats(args),
        Command::Bench { what: cli::BenchCommand::Prefill(args) } => commands::bench_prefill::run(&cli.plugin, args),
        Command::Bench { what: cli::BenchCommand::Http(args) } => commands::bench_http::run(&cli.plugin, args),
        Command::Bench { what: cli::BenchCommand::Workers(args) } => commands::bench_workers::run(args),
        Command::Bench { what: cli::BenchCommand::Soak(args) } => commands::bench_soak::run(args),
        Command::Prefill(args) => commands::prefill::run(&cli.plugin, *args),
        Command::Storage(args) => commands::storage::run(&cli.plugin, args),
        Command::Table { files } => commands::table::run(&files),
        Command::Worker(args) => commands::worker::run(&cli.plugin, *args),
        Command::Stack { what } => commands::stack::run(&cli.plugin, what),
        Command::Report(args) => commands::report::run(args),
        Command::Compare(args) => commands::compare::run(args),
        Command::HaystackTestserver { args } => {
            let argv = std::iter::once(std::ffi::OsString::from("scalebench haystack-testserver")).chain(args);
            haystack_testserver::main_with_args(argv)
        }
        Command::ReferenceHistorian { args } => {
            let argv = std::iter::once(std::ffi::OsString::from("scalebench reference-historian")).chain(args);
            std::process::exit(reference_historian::app::main_with_args(argv));
        }
        Command::Deploy { what } => commands::deploy::run(what),
    }
}

pub use error::exit_code;
