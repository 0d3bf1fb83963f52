//! The command line. Data goes to stdout (or `--out`), progress and logs to stderr.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "scalebench", version, about = "How far one server goes for an IoT / time-series ingest system")]
pub struct Cli {
    #[command(flatten)]
    pub plugin: PluginOptions,
    #[command(subcommand)]
    pub command: Command,
}

/// Limits and cache for every plugin a command loads.
#[derive(Debug, Clone, Args)]
pub struct PluginOptions {
    /// Longest one call into a plugin may run, in milliseconds.
    #[arg(long, global = true, default_value_t = 30_000, value_name = "MS")]
    pub plugin_timeout_ms: u64,
    /// Most memory one plugin instance may use, in MiB.
    #[arg(long, global = true, default_value_t = 1024, value_name = "MIB")]
    pub plugin_memory_mb: u64,
    /// Where compiled plugins are cached (default: $XDG_CACHE_HOME/scalebench/wasm).
    #[arg(long, global = true, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate readings from a value model (or benchmark the generator with --bench).
    Gen(GenArgs),
    /// List or inspect plugins.
    Plugins(PluginsArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Csv,
    Jsonl,
}

#[derive(Debug, Args)]
pub struct GenArgs {
    /// Value model: a built-in name (see `scalebench plugins list`) or a path to a .wasm.
    #[arg(long, default_value = "plant-shaped")]
    pub model: String,
    /// Model params as JSON (see `scalebench plugins inspect <model>`).
    #[arg(long, default_value = "{}")]
    pub params: String,
    /// Number of points (tags).
    #[arg(long, default_value_t = 10_000)]
    pub tags: u32,
    /// Samples per tag.
    #[arg(long, default_value_t = 1_000)]
    pub samples: u64,
    /// First sample index.
    #[arg(long, default_value_t = 0)]
    pub first_sample: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Timestamp of sample 0, milliseconds since the Unix epoch (default 2026-01-01T00:00:00Z).
    #[arg(long, default_value_t = 1_767_225_600_000)]
    pub start_ms: i64,
    #[arg(long, value_enum, default_value_t = Format::Csv)]
    pub format: Format,
    /// Write here instead of stdout (written to a temporary name, then renamed).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print seed 002's stage table for this model: values/s through
    /// WebAssembly and natively, then + JSON. Writes no readings.
    #[arg(long)]
    pub bench: bool,
}

#[derive(Debug, Args)]
pub struct PluginsArgs {
    #[command(subcommand)]
    pub command: PluginsCommand,
}

#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// The built-in plugins.
    List,
    /// A plugin's world, version, imports, exports, params schema and defaults.
    Inspect {
        /// A built-in name or a path to a .wasm.
        plugin: String,
    },
}

/// Bad input from the user (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
