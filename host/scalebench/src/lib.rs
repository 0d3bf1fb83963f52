//! scalebench: finds out, honestly, how far one server goes for an IoT /
//! time-series ingest system.
//!
//! The binary's library: the command line (`cli`, `run_plan`) and one
//! module per subcommand (`commands/`), wiring three crates (see
//! docs/architecture.md):
//! - `scalebench-engine`: the ladder, pass rules, load generator,
//!   transports, stack drivers, probes, distributed runs, studies;
//! - `scalebench-report`: reports, charts, compare, CI gates;
//! - `scalebench-results`: the result schema both build on.
//!
//! Their modules are re-exported here, so `scalebench::ladder`,
//! `scalebench::report` and `scalebench::results` name what they always
//! named. `main.rs` only parses and calls [`run`].

pub mod cli;
pub mod commands;
pub mod plugin_templates;
pub mod run_plan;

pub use scalebench_engine::*;
pub use scalebench_report::{chart, compare, gates, report};

/// Studies: the engine runs them, the report crate draws their report.
pub mod study {
    pub use scalebench_engine::study::*;

    /// `scalebench study nats`: the study, its report drawn in its results directory.
    #[cfg(feature = "nats")]
    pub fn run_study(args: StudyNatsArgs) -> anyhow::Result<std::path::PathBuf> {
        scalebench_engine::study::run_study(args, &scalebench_report::study::draw)
    }

    /// The study's verdicts, charts and report.md.
    pub use scalebench_report::study as report;
}

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
        #[cfg(feature = "nats")]
        Command::Bench { what: cli::BenchCommand::Nats(args) } => commands::bench_nats::run(&cli.plugin, args),
        #[cfg(not(feature = "nats"))]
        Command::Bench { what: cli::BenchCommand::Nats(_) } => Err(error::left_out("`scalebench bench nats`")),
        Command::Bench { what: cli::BenchCommand::Stacks(args) } => commands::bench_stacks::run(args),
        #[cfg(feature = "nats")]
        Command::Study { what: cli::StudyCommand::Nats(args) } => commands::study::nats(args),
        #[cfg(not(feature = "nats"))]
        Command::Study { what: cli::StudyCommand::Nats(_) } => Err(error::left_out("`scalebench study nats`")),
        Command::Bench { what: cli::BenchCommand::Prefill(args) } => commands::bench_prefill::run(&cli.plugin, args),
        Command::Bench { what: cli::BenchCommand::Http(args) } => commands::bench_http::run(&cli.plugin, args),
        #[cfg(feature = "docker")]
        Command::Bench { what: cli::BenchCommand::Workers(args) } => commands::bench_workers::run(args),
        #[cfg(not(feature = "docker"))]
        Command::Bench { what: cli::BenchCommand::Workers(_) } => {
            Err(error::left_out("`scalebench bench workers` (workers on Docker Swarm)"))
        }
        Command::Bench { what: cli::BenchCommand::Coordinator(args) } => commands::bench_coordinator::run(args),
        Command::Bench { what: cli::BenchCommand::Soak(args) } => commands::bench_soak::run(args),
        Command::Prefill(args) => commands::prefill::run(&cli.plugin, *args),
        #[cfg(feature = "storage-study")]
        Command::Storage(args) => commands::storage::run(&cli.plugin, args),
        #[cfg(not(feature = "storage-study"))]
        Command::Storage(_) => Err(error::left_out("`scalebench storage` (the storage study)")),
        Command::Table { files } => commands::table::run(&files),
        Command::Worker(args) => commands::worker::run(&cli.plugin, *args),
        #[cfg(feature = "docker")]
        Command::Stack { what } => commands::stack::run(&cli.plugin, what),
        #[cfg(not(feature = "docker"))]
        Command::Stack { .. } => Err(error::left_out("`scalebench stack` (Docker stacks)")),
        Command::Report(args) => commands::report::run(args),
        Command::Compare(args) => commands::compare::run(args),
        #[cfg(feature = "haystack-server")]
        Command::HaystackTestserver { args } => {
            let argv = std::iter::once(std::ffi::OsString::from("scalebench haystack-testserver")).chain(args);
            haystack_testserver::main_with_args(argv)
        }
        #[cfg(not(feature = "haystack-server"))]
        Command::HaystackTestserver { .. } => {
            Err(error::left_out("The Haystack test server (haxall targets' local stack)"))
        }
        Command::ReferenceHistorian { args } => {
            let argv = std::iter::once(std::ffi::OsString::from("scalebench reference-historian")).chain(args);
            std::process::exit(reference_historian::app::main_with_args(argv));
        }
        Command::Deploy { what } => commands::deploy::run(what),
    }
}

/// Exit status for an error: 3 for a failed CI gate, else the engine's
/// (2 for bad input, 130 for Ctrl-C, 1 otherwise).
pub fn exit_code(err: &anyhow::Error) -> i32 {
    if err.downcast_ref::<scalebench_report::error::GateFailed>().is_some() {
        scalebench_report::error::EXIT_GATE
    } else {
        error::exit_code(err)
    }
}
