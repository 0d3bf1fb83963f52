//! The command line. Data goes to stdout (or `--out`), progress and logs to stderr.
//! (Over 700 lines: every subcommand's flags, in groups, with their help
//! text and the parsers clap calls; nothing else lives here.)

use std::path::PathBuf;
use std::time::Duration;

pub use crate::error::{Interrupted, UsageError};
use crate::ladder::{Fault, FaultKind};
pub use crate::output::Format;
use crate::units::{parse_duration, parse_point_list, parse_points, parse_steps};
use clap::{Args, Parser, Subcommand, ValueEnum};

/// Point counts as one comma-separated value (`1k,2.5k,5k`). An alias, not
/// `Vec<u64>` spelled out: clap reads a `Vec` field as a repeatable flag,
/// and these are one value that `value_parser` turns into the list.
pub type PointCounts = Vec<u64>;

#[derive(Debug, Parser)]
#[command(
    name = "scalebench",
    version,
    about = "How far one server goes for an IoT / time-series ingest system",
    after_help = "Exit status: 0 done; 1 an error; 2 bad input; 3 a CI gate failed (run --require-ceiling, compare --fail-on-regression); 130 interrupted (the steps measured so far are kept); 141 standard output closed."
)]
pub struct Cli {
    #[command(flatten)]
    pub plugin: PluginOptions,
    #[command(flatten)]
    pub log: LogOptions,
    #[command(subcommand)]
    pub command: Command,
}

/// How much a command says on stderr, and in what form (results and
/// tables go to stdout whatever these say).
#[derive(Debug, Clone, Args)]
pub struct LogOptions {
    /// Say more: -v debug, -vv trace (RUST_LOG, when set, decides instead).
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Say less: -q no progress and only warnings and errors, -qq errors only.
    #[arg(short = 'q', long = "quiet", global = true, action = clap::ArgAction::Count, conflicts_with = "verbose")]
    pub quiet: u8,
    /// Log lines as text for a person, or one JSON object per line.
    #[arg(long, global = true, value_enum, default_value_t = crate::logging::LogFormat::Text)]
    pub log_format: crate::logging::LogFormat,
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
    /// Most data one plugin call may hand back to the host, in MiB.
    #[arg(long, global = true, default_value_t = 128, value_name = "MIB")]
    pub plugin_call_data_mb: u64,
    /// Where compiled plugins are cached (default: $XDG_CACHE_HOME/scalebench/wasm).
    #[arg(long, global = true, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

impl PluginOptions {
    /// The limits the catalog starts plugin runtimes with.
    pub fn limits(&self) -> crate::catalog::PluginLimits {
        crate::catalog::PluginLimits {
            call_timeout_ms: self.plugin_timeout_ms,
            memory_mb: self.plugin_memory_mb,
            call_data_mb: self.plugin_call_data_mb,
            cache_dir: self.cache_dir.clone(),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate readings from a value model (or benchmark the generator with --bench).
    Gen(GenArgs),
    /// List or inspect plugins.
    Plugins(PluginsArgs),
    /// Run plans: `plan show [RUN FLAGS…]` prints the resolved plan of a
    /// `run` command line (with --plan or --again) as TOML, without running it.
    Plan {
        #[command(subcommand)]
        what: PlanCommand,
    },
    /// Run the load ladder against a stack and report the ceiling.
    Run(Box<RunArgs>),
    /// Benchmarks that print figures (the generator's own ceiling).
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
    /// Messaging studies (after the NATS messaging study this project started from): `study nats`.
    Study {
        #[command(subcommand)]
        what: StudyCommand,
    },
    /// Bring a Docker stack up, show it, or take it down, to look at it
    /// between runs (`run --stack docker` makes and removes its own).
    Stack {
        #[command(subcommand)]
        what: StackCommand,
    },
    /// Write days of history for every point straight into the SUT's storage
    /// (binary COPY for SQL targets), resumable and idempotent.
    Prefill(Box<PrefillArgs>),
    /// Bytes per reading in real stores (PostgreSQL, Parquet, tsink), for
    /// each model on the same points and samples.
    Storage(StorageArgs),
    /// Print the results table of one or more ladder result files.
    Table {
        /// results/<run-id>-ladder.json files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Write a ladder report: a self-contained report.html (inline SVG
    /// charts) and report.md with the same charts as SVG files.
    Report(ReportArgs),
    /// Compare ladder results side by side (by target, run or value model):
    /// tables with signed changes, and overlaid charts.
    Compare(CompareArgs),
    /// One load generator of a distributed run, driven by a coordinator's
    /// `run --workers` over HTTP (docs/scale-out.md).
    Worker(Box<WorkerArgs>),
    /// Run the Haystack test server (used by the local stack of HTTP targets).
    /// Its flags are its own: `--help` here is the server's help.
    #[command(hide = true, disable_help_flag = true, disable_version_flag = true)]
    HaystackTestserver {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Run the reference historian (used by the local stack). Its flags are
    /// its own: `--help` here is the historian's help.
    #[command(hide = true, disable_help_flag = true, disable_version_flag = true)]
    ReferenceHistorian {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Write manifests that run `scalebench worker`s for distributed runs:
    /// `deploy k8s` (see docs/scale-out.md).
    Deploy {
        #[command(subcommand)]
        what: DeployCommand,
    },
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// results/<run-id>-ladder.json files (or directories of them).
    #[arg(required_unless_present = "bench")]
    pub files: Vec<PathBuf>,
    /// Where report.html, report.md and charts/ go (default: <run-id>-report beside the first result).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Time rendering the report of a synthetic 7-step ladder with
    /// 15-minute soaks, beside reading the same result; writes nothing you keep.
    #[arg(long, conflicts_with = "files")]
    pub bench: bool,
    /// With --bench: where its figures go as JSON.
    #[arg(long, value_name = "DIR", default_value = "results/bench", requires = "bench")]
    pub record: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Two or more results/<run-id>-ladder.json files; the first is the baseline.
    #[arg(num_args = 2.., required = true)]
    pub files: Vec<PathBuf>,
    /// What names each column (default: what differs: target, else model, else run).
    #[arg(long, value_enum)]
    pub by: Option<crate::compare::By>,
    /// Compare runs whose hardware or durability settings differ (the output says so).
    #[arg(long)]
    pub allow_different_hosts: bool,
    /// Where compare.md and the charts go (default: results/compare-<first run>-vs-<second run>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// CI gate: exit with status 3 when, against the first run, the ceiling
    /// fell, or a step both ran had its stored/s fall or its ack p99 from
    /// the intended send time rise by more than PCT percent (each breach listed).
    #[arg(long, value_name = "PCT")]
    pub fail_on_regression: Option<f64>,
    /// Write the comparison as JUnit XML (one test case per compared figure).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum StudyCommand {
    /// Core NATS against JetStream: publisher counts, payload sizes, storage,
    /// replicas, ping and flood delay; JSON, a Markdown report and SVG charts.
    Nats(crate::study::StudyNatsArgs),
}

#[derive(Debug, Subcommand)]
pub enum StackCommand {
    /// Create and start the project (kept until `down`).
    Up(StackUpArgs),
    /// The project's containers and their state.
    Status(StackArgs),
    /// Remove the project's containers, network and scale_* volumes (nothing else).
    Down(StackArgs),
}

#[derive(Debug, Args)]
pub struct StackUpArgs {
    #[command(flatten)]
    pub stack: StackArgs,
    /// A NATS stack's JetStream sync interval, as `run --nats-sync-interval`
    /// takes it: `always` or a duration; the server's default when not given.
    #[arg(long, value_name = "always|DURATION")]
    pub nats_sync_interval: Option<String>,
}

#[derive(Debug, Args)]
pub struct StackArgs {
    /// Only `docker` has a stack that outlives a run.
    #[arg(long, value_enum, default_value_t = StackKind::Docker)]
    pub stack: StackKind,
    /// Which built-in stack: the one this target's plan needs.
    #[arg(long, default_value = "baler")]
    pub target: String,
    #[arg(long, default_value = "{}")]
    pub target_params: String,
    /// NATS targets: 1 or 3 nodes.
    #[arg(long, default_value_t = 1)]
    pub nodes: u32,
    /// A compose file instead of the built-in one.
    #[arg(long, value_name = "FILE")]
    pub compose: Option<PathBuf>,
    /// Project name (default: the compose file's, e.g. scale-historian).
    #[arg(long)]
    pub project: Option<String>,
    /// First port to look for free 2xxxx ports from.
    #[arg(long, default_value_t = 21883)]
    pub base_port: u16,
    /// Caps as SERVICE=CPUS,MEMORY (repeatable).
    #[arg(long, value_name = "SERVICE=CPUS,MEMORY")]
    pub cap: Vec<String>,
    #[arg(long, value_name = "CPUS")]
    pub cpuset: Option<String>,
    /// Where the stack's env file goes (default: a directory under the temp dir).
    #[arg(long, value_parser = absolute_dir)]
    pub run_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Acked msgs/s, CPU per acked message and peak RSS of the generator
    /// against a bare local mosquitto, beside a plain rumqttc publisher.
    Generator(GeneratorBenchArgs),
    /// scalebench's core NATS and JetStream publish rates beside a plain
    /// async-nats publisher, against one local nats-server.
    Nats(NatsBenchArgs),
    /// Prefill rows/s into the local durable PostgreSQL, beside psql \copy
    /// of the same rows from a file and a COPY written a row at a time.
    Prefill(PrefillBenchArgs),
    /// The same short ladder on the local stack and the Docker stack, side
    /// by side: stored/s, p95 lag, CPU and memory per service.
    Stacks(StacksBenchArgs),
    /// scalebench's HTTP publish rate (the haxall adapter's hisWrite bodies
    /// through the HTTP transport, judged) beside a plain hyper client
    /// posting the same bodies with the same concurrency, against the local
    /// Haystack test server.
    Http(HttpBenchArgs),
    /// Distributed runs: aggregate acknowledged readings/s of 1, 2, … N
    /// workers (a Docker Swarm service, each worker capped to the same CPU
    /// share) against one bare mosquitto, beside N × one worker.
    Workers(WorkersBenchArgs),
    /// One ladder step on the local stack held for a long time (an hour by
    /// default): resident memory and CPU of scalebench and each stack
    /// process every minute, and each one's growth from the first ten
    /// minutes to the last ten.
    Soak(SoakBenchArgs),
    /// The coordinator of a distributed run against 10, 50 and 100
    /// simulated workers (the real control API over loopback HTTP, each
    /// sending the heartbeats and histograms of its share of a 10M-point
    /// step): its CPU, heartbeat rounds, merge time, memory and the bytes
    /// it takes in.
    Coordinator(CoordinatorBenchArgs),
}

#[derive(Debug, Args)]
pub struct CoordinatorBenchArgs {
    /// Worker counts, one arm each.
    #[arg(long, default_value = "10,50,100", value_delimiter = ',')]
    pub workers: Vec<u32>,
    /// Points of the simulated step, every --interval, split over the workers.
    #[arg(long, default_value = "10M", value_parser = crate::units::parse_points)]
    pub points: u64,
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Length of the simulated step: how many seconds its per-second
    /// counts and histograms hold.
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub step: Duration,
    /// Wall-clock time each arm plays the step in (the workers' seconds
    /// run faster than the clock by step / seconds).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub seconds: Duration,
    /// Then the largest count again with one worker lost mid-step, one
    /// offering 90% of its share and one whose clock is 2 s ahead: each
    /// must be named, and no other.
    #[arg(long)]
    pub faults: bool,
    /// Internal: serve this many simulated workers and print their URLs
    /// (the benchmark starts itself with it, so its own CPU is the
    /// coordinator's alone).
    #[arg(long, hide = true)]
    pub serve_simulated: Option<u32>,
    #[arg(long, hide = true, default_value_t = 1.0)]
    pub speed: f64,
    #[arg(long, hide = true)]
    pub plant_faults: bool,
    #[command(flatten)]
    pub record: BenchRecordArgs,
}

#[derive(Debug, Args)]
pub struct SoakBenchArgs {
    /// How long the step is held (after a warm-up of 30 s at most).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub duration: Duration,
    /// Points of the step: about half the ceiling `run` measured on this
    /// machine (the default is 4,000 readings/s at 5 s).
    #[arg(long, default_value = "20k", value_parser = crate::units::parse_points)]
    pub points: u64,
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub interval: Duration,
    /// How often memory and CPU are read and printed.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub every: Duration,
    #[arg(long, default_value = "baler")]
    pub target: String,
    #[arg(long, default_value = "plant-shaped")]
    pub model: String,
    #[command(flatten)]
    pub record: BenchRecordArgs,
}

#[derive(Debug, Args)]
pub struct WorkersBenchArgs {
    /// Most workers (the benchmark runs 1, 2, … this many).
    #[arg(long, default_value_t = 3)]
    pub workers: u32,
    /// CPU cap of each worker (CPUs): small enough that N workers at
    /// their cap stay below what one mosquitto acknowledges.
    #[arg(long, default_value_t = 0.03)]
    pub cpus: f64,
    /// Points offered, every --interval: more than the workers can offer,
    /// so each runs at its cap.
    #[arg(long, default_value = "60k", value_parser = crate::units::parse_points)]
    pub points: u64,
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    pub interval: Duration,
    /// Seconds of load per arm (the first 2 are warm-up, not counted).
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// First port of the workers.
    #[arg(long, default_value_t = 27300)]
    pub port: u16,
    /// The worker image (scripts/docker-images.sh builds it).
    #[arg(long, default_value = "scale-worker:bookworm")]
    pub image: String,
    #[command(flatten)]
    pub record: BenchRecordArgs,
}

/// Where a benchmark writes its figures ([`crate::bench_record`]).
#[derive(Debug, Clone, Args)]
pub struct BenchRecordArgs {
    /// Where the benchmark's figures go as JSON (one file per benchmark,
    /// replaced by each run).
    #[arg(long, value_name = "DIR", default_value = "results/bench")]
    pub record: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct StacksBenchArgs {
    #[arg(long, value_parser = parse_steps, default_value = "1k,2.5k")]
    pub steps: PointCounts,
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub soak: Duration,
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub warmup: Duration,
    #[arg(long, default_value = "baler")]
    pub target: String,
    #[arg(long, default_value = "plant-shaped")]
    pub model: String,
    #[command(flatten)]
    pub record: BenchRecordArgs,
}

#[derive(Debug, Args)]
pub struct HttpBenchArgs {
    /// Points (each a record on the server, one reading per message set).
    #[arg(long, value_parser = parse_points, default_value = "10k")]
    pub points: u64,
    /// hisWrite requests each arm posts.
    #[arg(long, default_value_t = 10_000)]
    pub messages: usize,
    /// Readings per hisWrite request.
    #[arg(long, default_value_t = 50)]
    pub batch: u32,
    /// Connections (tasks) and requests in flight per connection, for both arms.
    #[arg(long, default_value_t = 2)]
    pub connections: u32,
    #[arg(long, default_value_t = 8)]
    pub window: u32,
    /// Each arm runs this many times, alternating; medians are compared.
    #[arg(long, default_value_t = 3)]
    pub repeats: u32,
    /// Also measure over TLS: the test server HTTPS-only (a throwaway CA),
    /// both arms over TLS, beside the plain pass of the same invocation.
    #[arg(long)]
    pub tls: bool,
    #[command(flatten)]
    pub record: BenchRecordArgs,
}

#[derive(Debug, Args)]
pub struct PrefillBenchArgs {
    #[arg(long, value_parser = parse_points, default_value = "100k")]
    pub points: u64,
    #[arg(long, default_value_t = 1.0)]
    pub days: f64,
    /// 15m makes 100k points x 1 day 9.6 M rows; 5s would make 1.7 billion (hours, and more disk than most hosts have free).
    #[arg(long, value_parser = parse_duration, default_value = "15m")]
    pub interval: Duration,
    #[arg(long, default_value = "plant-shaped")]
    pub model: String,
    /// Rows of the row-at-a-time arm, the first of the same rows (0: all of them, so the arms compare like with like).
    #[arg(long, default_value_t = 0)]
    pub row_at_a_time_rows: u64,
    #[arg(long, default_value_t = 21883)]
    pub base_port: u16,
    #[command(flatten)]
    pub record: BenchRecordArgs,
}

#[derive(Debug, Args)]
pub struct NatsBenchArgs {
    /// Points the paced generator offers; with --interval, sets a target above what the server acks
    /// (1M every 500 ms: 2M/s, above what a plain publisher reaches on a small machine).
    #[arg(long, value_parser = parse_points, default_value = "1m")]
    pub points: u64,
    #[arg(long, value_parser = parse_duration, default_value = "500ms")]
    pub interval: Duration,
    #[arg(long, default_value_t = 6.0)]
    pub seconds: f64,
    /// Each arm runs this many times, alternating; medians are reported.
    #[arg(long, default_value_t = 3)]
    pub repeats: u32,
    #[arg(long, default_value_t = 1)]
    pub connections: u32,
    #[arg(long, default_value = "plant-shaped")]
    pub model: String,
    /// Also measure over TLS: a second nats-server whose client listener
    /// takes only TLS (a throwaway CA), both publishers over tls://.
    #[arg(long)]
    pub tls: bool,
    #[command(flatten)]
    pub record: BenchRecordArgs,
}

#[derive(Debug, Args)]
pub struct GeneratorBenchArgs {
    /// Point counts, comma-separated (e.g. 100k,1m).
    #[arg(long, value_parser = parse_point_list, default_value = "100k")]
    pub points: PointCounts,
    /// Short enough that the target rate is above what the machine can ack.
    #[arg(long, value_parser = parse_duration, default_value = "500ms")]
    pub interval: Duration,
    #[arg(long, default_value_t = 15.0)]
    pub seconds: f64,
    /// MQTT connections (default: one per 60,000 readings/s of target rate, 1 to 8).
    #[arg(long)]
    pub connections: Option<u32>,
    #[arg(long, default_value = "plant-shaped")]
    pub model: String,
    #[arg(long, default_value = "baler")]
    pub target: String,
    /// Also run each size with the broker frozen (SIGSTOP) for this long,
    /// from a third of the window on: memory must stay bounded.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub stall: Option<Duration>,
    /// Skip the plain publisher baseline.
    #[arg(long)]
    pub no_baseline: bool,
    /// Also run each size over TLS (mqtts:// to a TLS listener of the same
    /// broker, certificates from a throwaway CA): the CPU and memory TLS
    /// adds, beside the plain arm of the same invocation.
    #[arg(long)]
    pub tls: bool,
    /// Also run each size with the live metrics endpoint on
    /// (`run --metrics-listen`) and scraped every second: its CPU per
    /// acknowledged message, beside the same size's arm without it.
    #[arg(long)]
    pub metrics_listen: bool,
    /// Also write the figures as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub record: BenchRecordArgs,
}

#[derive(Debug, Args)]
pub struct PrefillArgs {
    /// Target adapter: a built-in name or a path to a .wasm (it must export history-sink).
    #[arg(long, default_value = "baler")]
    pub target: String,
    #[arg(long, default_value = "{}")]
    pub target_params: String,
    /// Value model: a built-in name or a path to a .wasm.
    #[arg(long, default_value = "plant-shaped")]
    pub model: String,
    #[arg(long, default_value = "{}")]
    pub model_params: String,
    /// Points with history, e.g. 1k, 100k.
    #[arg(long, value_parser = parse_points)]
    pub points: u64,
    /// Days of history, ending at the start of the current interval (fractions allowed: 0.125 = 3 h).
    #[arg(long)]
    pub days: f64,
    /// One reading per point per interval, as in `run`.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub interval: Duration,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t = StackKind::Local)]
    pub stack: StackKind,
    /// Local stack: its directory (required: the history lives there; pass the same --run-dir to `run`).
    #[arg(long, value_parser = absolute_dir)]
    pub run_dir: Option<PathBuf>,
    /// First port of the local stack (mqtt; postgres is the next).
    #[arg(long, default_value_t = 21883)]
    pub base_port: u16,
    /// External stack: PostgreSQL connection string of the SUT's database.
    #[arg(long)]
    pub pg_url: Option<String>,
    /// External stack: an HTTP service the target writes history to, NAME=URL
    /// (a Haystack server: api=http://127.0.0.1:28080); repeat for several.
    #[arg(long, value_name = "NAME=URL")]
    pub service: Vec<String>,
    /// The SUT account's password for targets that log in (their params name
    /// the `user`): the file's first line. Without it, the
    /// SCALEBENCH_TARGET_PASSWORD environment variable; never a flag value.
    #[arg(long, value_name = "PATH")]
    pub credentials_file: Option<PathBuf>,
    /// This host is a live install and you mean to write into it.
    #[arg(long, value_name = "HOST")]
    pub live_host: Vec<String>,
    /// Where the result JSON goes, and the progress files of jobs whose
    /// target has no place of its own for them (HTTP targets).
    #[arg(long, default_value = "results")]
    pub results_dir: PathBuf,
    #[command(flatten)]
    pub access: SutAccess,
}

#[derive(Debug, Args)]
pub struct StorageArgs {
    /// Value models to compare, comma-separated (the first is the baseline of the ratios' denominator: noise/plant).
    #[arg(long, default_value = "plant-shaped,noise")]
    pub models: String,
    /// Points, e.g. 1k.
    #[arg(long, value_parser = parse_points, default_value = "1k")]
    pub points: u64,
    /// Hours of readings per point.
    #[arg(long, default_value_t = 24.0)]
    pub hours: f64,
    /// One reading per point per interval.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub interval: Duration,
    /// Also measure this target's own storage (a fresh local stack per model), e.g. baler; `none` to skip.
    #[arg(long, default_value = "baler")]
    pub target: String,
    #[arg(long, default_value = "{}")]
    pub target_params: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// First port of the local stacks.
    #[arg(long, default_value_t = 21883)]
    pub base_port: u16,
    /// Where the stores' files are written while measured (default: a new temp dir, removed afterwards).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    #[arg(long, default_value = "results")]
    pub results_dir: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StackKind {
    /// Start mosquitto, PostgreSQL and the reference historian as child processes.
    Local,
    /// Drive a stack someone else runs: its services by --mqtt-url,
    /// --pg-url, --nats-url and --service NAME=URL; its health by --watch.
    External,
    /// Run the built-in stack's compose file (compose/) through the Docker
    /// engine, with CPU and memory caps; build its images first with
    /// scripts/docker-images.sh.
    Docker,
}

/// `scalebench run`: its flags in groups, one per thing they configure.
/// Each group is flattened, so the flags are the same as if they were
/// listed here one by one.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub plugins: RunPlugins,
    #[command(flatten)]
    pub ladder: LadderFlags,
    #[command(flatten)]
    pub stack: StackChoice,
    #[command(flatten)]
    pub calibration: HistorianCalibration,
    #[command(flatten)]
    pub external: ExternalStackFlags,
    #[command(flatten)]
    pub docker: DockerFlags,
    #[command(flatten)]
    pub workers: WorkerFlags,
    #[command(flatten)]
    pub faults: FaultFlags,
    #[command(flatten)]
    pub live: LiveSafetyFlags,
    #[command(flatten)]
    pub access: SutAccess,
    #[command(flatten)]
    pub output: RunOutput,
    /// Take the run's flags from a TOML file: every flag of this command is
    /// a key (`steps = "1k,2.5k"`, `continue-on-fail = true`, `service =
    /// ["api=http://…"]`); flags given here replace the file's.
    #[arg(long, value_name = "FILE.toml", conflicts_with = "again")]
    pub plan: Option<PathBuf>,
    /// Run the plan a result recorded again (results/<run-id>-ladder.json):
    /// same target, model, params, probes, steps, durations, seed, stack and
    /// faults; a plugin file changed since is refused by name. Flags given
    /// here replace the recorded ones.
    #[arg(long, value_name = "RESULT")]
    pub again: Option<PathBuf>,
    /// The resolved plan (set after parsing; recorded in the result).
    #[arg(skip)]
    pub resolved_plan: std::collections::BTreeMap<String, crate::results::PlanValue>,
}

/// Which plugins a run loads, their params, and the probe budgets.
#[derive(Debug, Args)]
pub struct RunPlugins {
    /// Target adapter: a built-in name or a path to a .wasm.
    #[arg(long, default_value = "baler")]
    pub target: String,
    #[arg(long, default_value = "{}")]
    pub target_params: String,
    /// Value model: a built-in name or a path to a .wasm.
    #[arg(long, default_value = "plant-shaped")]
    pub model: String,
    #[arg(long, default_value = "{}")]
    pub model_params: String,
    /// Probe set timed under load: a built-in name, a path, or `none`.
    /// Default: by where the target stores — historian-sql for a SQL store,
    /// haystack for an HTTP server (on the target's own service), none for
    /// a stream (NATS JetStream).
    #[arg(long)]
    pub probes: Option<String>,
    #[arg(long, default_value = "{}")]
    pub probe_params: String,
    /// Warm runs of each probe after its cold run; the median of the warm
    /// runs is held to the budget (5, the original Baler scale-test plan's
    /// "warm median"; 0 holds the cold run to it). Fewer let probes over a
    /// long history finish inside a short soak.
    #[arg(long, default_value_t = scalebench_engine::probes::DEFAULT_WARM_RUNS, value_name = "N")]
    pub probe_warm_runs: usize,
    /// Probe budgets (default: ./budgets.json, else the built-in copy).
    #[arg(long)]
    pub budgets: Option<PathBuf>,
    /// The SUT account's password for targets and probe sets that log in
    /// (their params name the `user`): the file's first line. Without it,
    /// the SCALEBENCH_TARGET_PASSWORD environment variable; never a flag value.
    #[arg(long, value_name = "PATH")]
    pub credentials_file: Option<PathBuf>,
}

/// The ladder: its steps and their phases, and how the generator offers the load.
#[derive(Debug, Args)]
pub struct LadderFlags {
    /// Points per step, e.g. 1k,2.5k,5k (default: the original Baler scale-test plan's ladder; starts at 1k on hosts with < 4 CPUs).
    #[arg(long, value_parser = parse_steps)]
    pub steps: Option<PointCounts>,
    /// Every point reports once per interval.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub interval: Duration,
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub warmup: Duration,
    #[arg(long, value_parser = parse_duration, default_value = "15m")]
    pub soak: Duration,
    #[arg(long, value_parser = parse_duration, default_value = "15s")]
    pub sample_every: Duration,
    /// How long to wait for canaries after the load stops.
    #[arg(long, value_parser = parse_duration, default_value = "300s")]
    pub drain_timeout: Duration,
    /// Go on after a step that does not pass.
    #[arg(long)]
    pub continue_on_fail: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// MQTT connections of the generator.
    #[arg(long, default_value_t = 4)]
    pub connections: u32,
    /// Unacknowledged publishes per MQTT connection (the in-flight window).
    /// When it is full the SUT is holding the generator back: pushback.
    #[arg(long, default_value_t = 4096)]
    pub inflight: u16,
    /// HTTP targets: requests in flight per connection. When all are
    /// waiting for answers the SUT is holding the generator back: pushback.
    #[arg(long, default_value_t = 8)]
    pub http_concurrency: u32,
    /// The generator's MQTT account; its password comes from the
    /// SCALEBENCH_MQTT_PASSWORD environment variable, never a flag.
    #[arg(long, value_name = "NAME")]
    pub mqtt_user: Option<String>,
    /// MQTT protocol version of the generator: 3.1.1, or 5, whose PUBACKs
    /// carry a reason code: one at or above 0x80 (0x87 not authorized,
    /// 0x97 quota exceeded) counts that message's readings as refused.
    #[arg(long, value_enum, default_value_t = MqttVersion::V311)]
    pub mqtt_version: MqttVersion,
    /// A step is inconclusive when the results disk has less free space.
    #[arg(long, default_value_t = 1.0)]
    pub min_disk_free_gb: f64,
    /// Days of history for every point of the largest step, written into
    /// the SUT's storage before step 1 (see `scalebench prefill`).
    #[arg(long, value_name = "DAYS")]
    pub prefill_days: Option<f64>,
}

/// Which stack a run drives, and where a stack scalebench runs lives.
#[derive(Debug, Args)]
pub struct StackChoice {
    #[arg(id = "stack", long = "stack", value_name = "STACK", value_enum, default_value_t = StackKind::Local)]
    pub kind: StackKind,
    /// First port of the local stack (mqtt; postgres is the next).
    #[arg(long, default_value_t = 21883)]
    pub base_port: u16,
    /// Where the local stack keeps its files (default: a new temp dir).
    #[arg(long, value_parser = absolute_dir)]
    pub run_dir: Option<PathBuf>,
    /// NATS stack scalebench starts (local or docker): nodes, 1 or 3
    /// (3 makes replicas = 3 real).
    #[arg(long, default_value_t = 1)]
    pub nodes: u32,
    /// NATS stack scalebench starts (local or docker): JetStream's sync
    /// interval, `always` (every message on disk before its ack) or a
    /// duration; the server's default (2 minutes) when not given. Needs
    /// nats-server 2.10 or later (docker: in the image, which
    /// scripts/docker-images.sh builds with the one scripts/setup.sh installs).
    #[arg(long, value_name = "always|DURATION")]
    pub nats_sync_interval: Option<String>,
    /// The stack scalebench starts (local or docker) TLS-only: a CA made for
    /// this run (in the run directory's tls/) signs the servers'
    /// certificate; mosquitto, PostgreSQL, nats-server and the Haystack test
    /// server take only TLS, and the historian and scalebench connect over
    /// TLS, verified. Run the same ladder with and without it to see what
    /// TLS costs the ceiling.
    #[arg(long)]
    pub tls: bool,
}

/// Calibration of the built-in stack: a historian (and broker) that
/// misbehave on purpose, so the verdict can be shown to notice.
#[derive(Debug, Args)]
pub struct HistorianCalibration {
    /// Calibration: the local historian drops one reading in N.
    #[arg(long, value_name = "N")]
    pub historian_drop_one_in: Option<u64>,
    /// Calibration: the local historian stores every reading this many ms late.
    #[arg(long, value_name = "MS")]
    pub historian_delay_ms: Option<u64>,
    /// Calibration: the local historian acknowledges each message on arrival,
    /// before its batch is committed (unsafe on purpose: a crash then loses
    /// acknowledged readings, and the crash test must say so).
    #[arg(long)]
    pub historian_ack_before_commit: bool,
    /// Calibration: a setting for the historian's own ingest session, e.g.
    /// synchronous_commit=off (repeatable); durability is read as that session sees it.
    #[arg(long, value_name = "NAME=VALUE")]
    pub historian_session_setting: Vec<String>,
    /// Calibration: the historian allocates and keeps this many MB every
    /// second (under a memory cap it is OOM-killed, which must fail the step).
    #[arg(long, value_name = "MB")]
    pub historian_leak_mb_per_s: Option<u64>,
    /// Calibration: run the local broker with this mosquitto ACL file.
    #[arg(long, value_name = "FILE")]
    pub mosquitto_acl: Option<PathBuf>,
}

/// `--stack external`: the services of a stack someone else runs, and how to watch its health.
#[derive(Debug, Args)]
pub struct ExternalStackFlags {
    /// External stack: the broker, e.g. mqtt://127.0.0.1:21883.
    #[arg(long)]
    pub mqtt_url: Option<String>,
    /// External stack: PostgreSQL connection string of the SUT's database.
    #[arg(long)]
    pub pg_url: Option<String>,
    /// External NATS stack: comma-separated nats:// URLs.
    #[arg(long)]
    pub nats_url: Option<String>,
    /// External stack: an HTTP service the target's plan names, NAME=URL
    /// (e.g. api=http://127.0.0.1:28080); repeat for several.
    #[arg(long, value_name = "NAME=URL")]
    pub service: Vec<String>,
    /// External stack: measure a service's health, as SERVICE=pid:PID (a
    /// process: exits), SERVICE=docker:CONTAINER (restarts, exits, OOM kills
    /// on a reachable Docker engine) or SERVICE=url:HEALTH_URL (outages);
    /// repeatable. With nothing watched, restarts and OOM kills are not
    /// measured and every pass says "health not watched".
    #[arg(long, value_name = "SERVICE=KIND:WHAT", value_parser = crate::stack::watch::parse)]
    pub watch: Vec<crate::stack::watch::WatchSpec>,
}

/// `--stack docker`: the compose file and the containers' caps.
#[derive(Debug, Args)]
pub struct DockerFlags {
    /// Docker stack: this compose file instead of the built-in one for the target.
    #[arg(long, value_name = "FILE")]
    pub compose: Option<PathBuf>,
    /// Docker stack: a service's caps, as SERVICE=CPUS,MEMORY (e.g.
    /// postgres=2,6g); repeatable. CPU caps are clamped to the host's CPUs.
    #[arg(long, value_name = "SERVICE=CPUS,MEMORY")]
    pub cap: Vec<String>,
    /// Docker stack: pin every container to these host CPUs (e.g. 0-1).
    #[arg(long, value_name = "CPUS")]
    pub cpuset: Option<String>,
}

/// A distributed run: the load comes from workers (docs/scale-out.md).
#[derive(Debug, Args)]
pub struct WorkerFlags {
    /// Generate the load on workers: a number N (started by --engine), or
    /// the control URLs of workers started by hand
    /// (http://host:27100,http://host2:27100). Topology, canaries, probes
    /// and the verdict stay here; each worker offers its shard.
    #[arg(long, value_name = "N|URL,URL,…")]
    pub workers: Option<String>,
    /// What starts N workers: swarm (a Docker Swarm service on this
    /// engine, removed after the run).
    #[arg(long, value_enum, default_value_t = WorkerEngine::Swarm)]
    pub engine: WorkerEngine,
    /// CPU cap of each worker the engine starts (CPUs, e.g. 0.5).
    #[arg(long, default_value_t = 1.0)]
    pub worker_cpus: f64,
    /// Memory cap of each worker the engine starts (e.g. 512m, 2g).
    #[arg(long, default_value = "1g")]
    pub worker_memory: String,
    /// First port of the workers the engine starts (worker k listens on this + k - 1).
    #[arg(long, default_value_t = crate::distributed::wire::DEFAULT_PORT)]
    pub worker_port: u16,
    /// The image the engine runs workers from (built by scripts/docker-images.sh).
    #[arg(long, default_value = "scale-worker:bookworm")]
    pub worker_image: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkerEngine {
    Swarm,
}

/// `scalebench worker`: one generator of a distributed run.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Where the control API listens.
    #[arg(long, default_value = "0.0.0.0:27100")]
    pub listen: std::net::SocketAddr,
    /// This worker's index (default: $SCALEBENCH_WORKER_INDEX, or
    /// $JOB_COMPLETION_INDEX under a Kubernetes Indexed Job, or the Swarm
    /// slot $SCALEBENCH_WORKER_SLOT minus one).
    #[arg(long)]
    pub index: Option<u32>,
    /// Listen on the --listen port plus the index (several workers on one
    /// host network, as a Swarm service's replicas are).
    #[arg(long)]
    pub port_per_index: bool,
    /// Tests only: this process's clock runs this many ms off (how the
    /// coordinator's clock-skew check is calibrated).
    #[arg(long, hide = true, default_value_t = 0, allow_hyphen_values = true)]
    pub test_clock_offset_ms: i64,
    /// Tests only: the build id this worker reports.
    #[arg(long, hide = true)]
    pub test_build_id: Option<String>,
    /// A file holding the token the control API takes (at least 16
    /// letters, digits, `-` or `_`); else $SCALEBENCH_WORKER_TOKEN; else
    /// the worker makes one and prints its URL with it.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Serve this worker's live figures for Prometheus at http://ADDR/metrics
    /// (its own share; the coordinator's endpoint has the run's).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub access: SutAccess,
}

/// How scalebench reaches the SUT as production runs it: TLS (`mqtts://`,
/// `tls://`, `https://`, `sslmode=require`) and the NATS account. Keys and
/// secrets come from files or the environment, never from flag values.
#[derive(Debug, Clone, Default, Args)]
pub struct SutAccess {
    /// TLS: trust this CA bundle (PEM) for the SUT's servers instead of the
    /// system's roots. Certificates are always verified.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// TLS: present this client certificate (PEM chain): mutual TLS. Needs --tls-key.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// TLS: the client certificate's private key (PEM file).
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// TLS: the name the servers' certificates carry, when the URLs name an
    /// address or another name.
    #[arg(long, value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// NATS: log in with this credentials file (user JWT and NKey seed).
    #[arg(long, value_name = "FILE")]
    pub nats_creds: Option<PathBuf>,
    /// NATS: log in with the NKey user seed in this file.
    #[arg(long, value_name = "FILE")]
    pub nats_nkey: Option<PathBuf>,
    /// NATS: log in as this user; the password comes from the
    /// SCALEBENCH_NATS_PASSWORD environment variable, never a flag.
    #[arg(long, value_name = "NAME")]
    pub nats_user: Option<String>,
    /// NATS: log in with the token on this file's first line (or set
    /// SCALEBENCH_NATS_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub nats_token_file: Option<PathBuf>,
}

impl SutAccess {
    pub fn tls_settings(&self) -> crate::tls::TlsSettings {
        crate::tls::TlsSettings {
            ca: self.tls_ca.clone(),
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            server_name: self.tls_server_name.clone(),
        }
    }
}

/// Crash tests and freezes in a stack scalebench runs, during each step's load.
#[derive(Debug, Args)]
pub struct FaultFlags {
    /// Crash test: SIGKILL the local historian this long into each step's
    /// load; the stack's supervisor brings it back and the restart is detected.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub kill_historian_after: Option<Duration>,
    /// Crash test: SIGKILL the local PostgreSQL this long into each step's load.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub kill_postgres_after: Option<Duration>,
    /// Crash test: SIGKILL node 1 of the local NATS cluster this long into each step's load; the supervisor brings it back.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub kill_nats_node_after: Option<Duration>,
    /// Crash test: SIGKILL a local stack service this long into each step's
    /// load, as SERVICE:DURATION (e.g. mosquitto:15s); repeatable. A SERVICE
    /// with `*` kills every service it matches at the same instant
    /// (`nats-*:15s`: the whole cluster).
    #[arg(long, value_name = "SERVICE:DURATION", value_parser = parse_kill)]
    pub kill: Vec<Fault>,
    /// Calibration: freeze a local stack service with SIGSTOP, as
    /// SERVICE:AFTER:FOR (e.g. mosquitto:12s:10s); SIGCONT after FOR or at the step's end.
    #[arg(long, value_name = "SERVICE:AFTER:FOR", value_parser = parse_freeze)]
    pub freeze: Vec<Fault>,
    /// Crash tests: repeat each --kill this many times, one --kill interval apart.
    #[arg(long, default_value_t = 1)]
    pub kill_cycles: u32,
}

/// `--kill SERVICE:DURATION`.
fn parse_kill(s: &str) -> Result<Fault, String> {
    let (service, after) = s.split_once(':').ok_or("give SERVICE:DURATION, e.g. mosquitto:15s")?;
    Ok(Fault { service: service.into(), after: parse_duration(after)?, kind: FaultKind::Kill })
}

/// `--freeze SERVICE:AFTER:FOR`.
fn parse_freeze(s: &str) -> Result<Fault, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let [service, after, for_] = parts[..] else {
        return Err("give SERVICE:AFTER:FOR, e.g. mosquitto:12s:10s".into());
    };
    Ok(Fault { service: service.into(), after: parse_duration(after)?, kind: FaultKind::Freeze(parse_duration(for_)?) })
}

/// Live-safety: what keeps a run off a live install, or watches one it may touch.
#[derive(Debug, Args)]
pub struct LiveSafetyFlags {
    /// This host is a live install and you mean to drive it: allows its
    /// live default ports and names (repeat for several hosts).
    #[arg(long, value_name = "HOST")]
    pub live_host: Vec<String>,
    /// Live-safety: a cheap, read-only GET of the live install on this host,
    /// timed against a baseline taken before the run.
    #[arg(long, value_name = "URL")]
    pub live_url: Option<String>,
    /// Live-safety: a sample is bad when the live URL is this many times slower than its baseline (and 0.5 s slower).
    #[arg(long, default_value_t = 3.0)]
    pub live_latency_factor: f64,
    /// Live-safety: a sample is bad when host load per CPU is this many times its baseline (and at least 2).
    /// Default: $SCALEBENCH_LIVE_LOAD_FACTOR, else 1.5 (`make test` sets inf: its own tests load the host).
    #[arg(long)]
    pub live_load_factor: Option<f64>,
}

/// Where a run's results go.
#[derive(Debug, Args)]
pub struct RunOutput {
    #[arg(long, default_value = "results")]
    pub results_dir: PathBuf,
    /// At the end, write the run's report (report.html, report.md, charts)
    /// to <results-dir>/<run-id>-report.
    #[arg(long)]
    pub report: bool,
    /// CI gate: exit with status 3 when the ceiling (highest passing step)
    /// is below POINTS or the ladder ended inconclusive (the message says which).
    #[arg(long, value_name = "POINTS", value_parser = parse_points)]
    pub require_ceiling: Option<u64>,
    /// Write the run as JUnit XML (one test case per step; with
    /// --require-ceiling, one more for the gate), for CI systems.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Serve the run's live figures for Prometheus at http://ADDR/metrics
    /// (OpenMetrics: readings offered, acknowledged, refused and stored,
    /// ack latency histograms, phase, lag, each service's CPU and memory,
    /// verdicts; see docs/reports.md). Port 0 picks a free port.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
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
    /// First sample index instead of --start-ms. Sample s is stamped
    /// s × the model's sample period after the Unix epoch, as in a run.
    #[arg(long, conflicts_with = "start_ms")]
    pub first_sample: Option<u64>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Start at the first sample at or after this instant, milliseconds since
    /// the Unix epoch (default 2026-01-01T00:00:00Z). Sample s is stamped
    /// s × the model's sample period after the epoch, as in a run, so the
    /// same point at the same timestamp has the same value in both.
    #[arg(long, default_value_t = 1_767_225_600_000)]
    pub start_ms: i64,
    #[arg(long, value_enum, default_value_t = Format::Csv)]
    pub format: Format,
    /// Write here instead of stdout (written to a temporary name, then renamed).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the stage table of the generator write-up this project started from for this model: values/s through
    /// WebAssembly and natively, then + JSON. Writes no readings.
    #[arg(long)]
    pub bench: bool,
    /// Quick estimate: compressed bytes per reading (Gorilla XOR values,
    /// delta-of-delta timestamps, counted, not stored) for this model beside
    /// noise on the same points. `scalebench storage` measures real stores.
    #[arg(long, conflicts_with = "bench")]
    pub compression: bool,
    /// With --bench: where its figures go as JSON.
    #[arg(long, value_name = "DIR", default_value = "results/bench", requires = "bench")]
    pub record: std::path::PathBuf,
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
    /// Print the plugin contract this scalebench speaks (wit/plugin.wit), to
    /// copy into an adapter built outside this repository.
    Wit,
    /// Start a plugin of your own: writes a crate that builds where it is
    /// written (`cargo build --release --target wasm32-wasip2`), with a README
    /// of the next commands.
    New {
        /// What kind of plugin.
        #[arg(value_enum)]
        kind: crate::plugin_templates::TemplateKind,
        /// The plugin's name: lowercase letters, digits and '-' (the crate's and the .wasm file's name).
        name: String,
        /// Where to write it (default: ./NAME). Must be missing or empty.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Test a plugin against the contract before a run: a model's determinism,
    /// kinds and limits; a probe set's probes and budgets; an adapter's
    /// batches, `judge` on a refusal, and a round trip (encode, send, count)
    /// against a service. Prints what passed and what to fix; exits 1 on a failure.
    Check(PluginsCheckArgs),
}

#[derive(Debug, Args)]
pub struct PluginsCheckArgs {
    /// A path to a .wasm (or a built-in name).
    pub plugin: String,
    /// The plugin's params as JSON (default: the defaults its info() gives).
    #[arg(long, value_name = "JSON")]
    pub params: Option<String>,
    /// An adapter's services to check against instead of the built-in local
    /// stack: mqtt://HOST:PORT, postgresql://…, nats://HOST:PORT, or
    /// NAME=http://HOST:PORT (a bare http:// URL is the service the plan counts with). Repeat for each.
    #[arg(long, value_name = "URL")]
    pub against: Vec<String>,
    /// Skip the adapter's round trip (encode, send, count): only the checks that need no service.
    #[arg(long)]
    pub no_round_trip: bool,
    /// First port of the local stack an adapter is checked against (without --against).
    #[arg(long, default_value_t = 21883)]
    pub base_port: u16,
    /// The probe budgets to check a probe set's names against (default:
    /// ./budgets.json if present, else the built-in file).
    #[arg(long, value_name = "FILE")]
    pub budgets: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Print the resolved plan of `scalebench run ARGS…` as TOML (what
    /// `--plan` reads and every result records).
    Show {
        /// The `run` flags, as you would give them to `scalebench run`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

#[derive(Debug, Subcommand)]
pub enum DeployCommand {
    /// Kubernetes: a Namespace, a headless Service and an Indexed Job of N
    /// workers, written to <out>/workers.yaml; prints the coordinator's
    /// `scalebench run --workers` line.
    K8s(DeployK8sArgs),
}

#[derive(Debug, Args)]
pub struct DeployK8sArgs {
    /// How many workers (pods; each runs `scalebench worker`).
    #[arg(long, value_name = "N")]
    pub workers: u32,
    /// The workers' image, as your cluster pulls it (scripts/docker-images.sh builds scale-worker:bookworm).
    #[arg(long, default_value = crate::distributed::k8s::DEFAULT_IMAGE)]
    pub image: String,
    /// The namespace the manifests create (and `kubectl delete -f` deletes).
    #[arg(long, default_value = crate::distributed::k8s::DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// The Job's and the headless Service's name (pods are <name>-<index>).
    #[arg(long, default_value = crate::distributed::k8s::DEFAULT_NAME)]
    pub name: String,
    /// CPU request and limit of each worker (cores or millicores: 1, 0.5, 500m).
    #[arg(long, default_value = crate::distributed::k8s::DEFAULT_CPU)]
    pub cpu: String,
    /// Memory request and limit of each worker (2Gi, 1536Mi, 2G): 512 MiB
    /// for the worker, the rest its plugins' limit; at least 768Mi.
    #[arg(long, default_value = crate::distributed::k8s::DEFAULT_MEMORY)]
    pub memory: String,
    /// The workers' control port (`scalebench worker --listen 0.0.0.0:PORT`).
    #[arg(long, default_value_t = crate::distributed::k8s::DEFAULT_PORT)]
    pub port: u16,
    /// The cluster's DNS domain, in the worker URLs.
    #[arg(long, default_value = crate::distributed::k8s::DEFAULT_CLUSTER_DOMAIN)]
    pub cluster_domain: String,
    /// Where workers.yaml goes; `-` prints the manifests to stdout instead.
    #[arg(long, value_name = "DIR", default_value = "deploy/k8s")]
    pub out: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The groups are flattened: the flags are the ones `run` always had,
    /// and clap hands over typed values with the same defaults.
    #[test]
    fn run_flags_parse_into_their_groups() {
        let cli = Cli::try_parse_from([
            "scalebench",
            "run",
            "--steps",
            "1k,2.5k",
            "--warmup",
            "10s",
            "--kill",
            "mosquitto:15s",
            "--freeze",
            "postgres:12s:10s",
            "--stack",
            "docker",
            "--cap",
            "postgres=2,6g",
        ])
        .unwrap();
        let Command::Run(run) = cli.command else { panic!("not run") };
        assert_eq!(run.ladder.steps, Some(vec![1_000, 2_500]));
        assert_eq!(run.ladder.warmup, Duration::from_secs(10));
        assert_eq!(run.ladder.interval, Duration::from_secs(5));
        assert_eq!(run.ladder.soak, Duration::from_secs(900));
        assert_eq!(run.ladder.drain_timeout, Duration::from_secs(300));
        assert_eq!(run.stack.kind, StackKind::Docker);
        assert_eq!(run.docker.cap, ["postgres=2,6g"]);
        assert_eq!(run.plugins.target, "baler");
        assert!(run.plugins.probes.is_none(), "no --probes: the target's storage decides");
        let (kill, freeze) = (&run.faults.kill[0], &run.faults.freeze[0]);
        assert_eq!((kill.service.as_str(), kill.after), ("mosquitto", Duration::from_secs(15)));
        assert!(matches!(freeze.kind, FaultKind::Freeze(d) if d == Duration::from_secs(10)));
    }

    #[test]
    fn a_bad_value_is_named_in_the_users_words() {
        for (flag, value, words) in [
            ("--steps", "abc", "`abc` is not a point count"),
            ("--warmup", "5x", "unknown unit `x` in `5x`; use ms, s, m or h"),
            ("--kill", "mosquitto", "give SERVICE:DURATION, e.g. mosquitto:15s"),
        ] {
            let e = Cli::try_parse_from(["scalebench", "run", flag, value]).unwrap_err().to_string();
            assert!(e.contains(flag) && e.contains(words) && !e.contains("Duration"), "{e}");
        }
    }
}

/// `--mqtt-version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MqttVersion {
    #[value(name = "3.1.1")]
    V311,
    #[value(name = "5")]
    V5,
}

impl MqttVersion {
    /// MQTT's protocol level byte.
    pub fn level(self) -> u8 {
        match self {
            MqttVersion::V311 => 4,
            MqttVersion::V5 => 5,
        }
    }
}

/// A directory given on the command line, made absolute against the working
/// directory: services started in it (PostgreSQL above all) resolve
/// relative paths from their own directories, and a run plan read elsewhere
/// must mean the same place.
fn absolute_dir(s: &str) -> Result<PathBuf, String> {
    if s.is_empty() {
        return Err("the directory is empty; give a path".into());
    }
    std::path::absolute(s).map_err(|e| format!("cannot resolve {s}: {e}"))
}
