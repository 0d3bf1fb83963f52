//! Logs: everything a command says that is not its data (what it starts,
//! faults it injects, warnings), through `tracing` on stderr. Results and
//! tables go to stdout from the command layer; progress goes to stderr
//! from [`crate::progress`].
//!
//! How much: `-q` warnings and errors only (and no progress), `-qq` errors
//! only, `-v` debug, `-vv` trace, for scalebench's own crates (other
//! libraries: warnings). `RUST_LOG`, when set, decides instead: a default
//! level and `target=level` directives, comma-separated
//! (`RUST_LOG=scalebench=debug,rumqttc=info`). These are matched by
//! tracing's `Targets` filter, not its regex-based `EnvFilter`: span and
//! field directives are not read, and the regex engine is not built (about
//! 20 s of a first build's compile time).
//!
//! How: `--log-format text` (the default) writes each event as the line a
//! person reads, `warning: ` or `error: ` before the ones that are;
//! `--log-format json` writes one JSON object per line (timestamp, level,
//! target, fields), progress included, for log collectors.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Lines for a person.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

static QUIET: AtomicBool = AtomicBool::new(false);
static JSON: AtomicBool = AtomicBool::new(false);

/// `-q`: no progress, only warnings and errors.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// `--log-format json`: every stderr line is a JSON object.
pub fn json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// The crates whose events `-v` and `-q` govern.
const OURS: [&str; 5] = ["scalebench", "local_stack", "plugin_runtime", "reference_historian", "haystack_testserver"];

/// The filter for `verbose` `-v`s and `quiet` `-q`s (RUST_LOG wins).
fn filter(verbose: u8, quiet: u8) -> Targets {
    if let Some(f) =
        std::env::var("RUST_LOG").ok().filter(|v| !v.trim().is_empty()).and_then(|v| v.parse::<Targets>().ok())
    {
        return f;
    }
    let level = match (quiet, verbose) {
        (q, _) if q >= 2 => "error",
        (1, _) => "warn",
        (0, 0) => "info",
        (0, 1) => "debug",
        _ => "trace",
    };
    let mut directives = vec!["warn".to_string()];
    directives.extend(OURS.iter().map(|c| format!("{c}={level}")));
    directives.join(",").parse().expect("the built-in log directives parse")
}

/// Install the subscriber for this process (once; later calls do nothing).
pub fn init(verbose: u8, quiet: u8, format: LogFormat) {
    QUIET.store(quiet > 0, Ordering::Relaxed);
    JSON.store(format == LogFormat::Json, Ordering::Relaxed);
    let registry = tracing_subscriber::registry().with(filter(verbose, quiet));
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => registry.with(layer.event_format(Plain)).try_init(),
        LogFormat::Json => registry.with(layer.json().flatten_event(true).with_current_span(false)).try_init(),
    };
}

/// An event as a person reads it: the message and its fields, `warning: `
/// or `error: ` in front of the ones that are (as scalebench always wrote them).
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut w: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        match *event.metadata().level() {
            Level::ERROR => w.write_str("error: ")?,
            Level::WARN => w.write_str("warning: ")?,
            Level::INFO => {}
            Level::DEBUG => w.write_str("debug: ")?,
            Level::TRACE => w.write_str("trace: ")?,
        }
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_and_verbose_set_the_level_of_our_crates_only() {
        std::env::remove_var("RUST_LOG");
        let s = filter(0, 0).to_string();
        assert!(s.contains("scalebench=info") && s.split(',').any(|d| d == "warn"), "{s}");
        assert!(filter(0, 1).to_string().contains("scalebench=warn"));
        assert!(filter(0, 2).to_string().contains("local_stack=error"));
        assert!(filter(1, 0).to_string().contains("scalebench=debug"));
        assert!(filter(3, 0).to_string().contains("plugin_runtime=trace"));
    }
}
