//! Live progress of `scalebench run`: the step, its phase (topology,
//! warm-up, soak, probes, drain, count), elapsed and remaining load time,
//! and the rates of the latest sample (target, offered, acked, stored), lag
//! and how far the generator is behind its schedule.
//!
//! On a terminal it is one indicatif bar per step, redrawn in place; when
//! stderr is not a terminal (CI logs, pipes) or `SCALEBENCH_PROGRESS=plain`
//! it is plain lines, one per phase and per sample, so logs stay readable.
//! With `--log-format json` each line is a log event (a JSON object); with
//! `-q` there is none.
//! Messages that must not be lost (faults, stack events) go through
//! [`Progress::println`] so they never tear the bar.
//!
//! With `--metrics-listen` the same events also feed the run's Prometheus
//! endpoint ([`crate::live_metrics`]): one live view, two displays.
//!
//! Not here: measuring anything. Progress only shows what `step` measured.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::format::{measured_seconds, seconds, thousands, whole, NOT_MEASURED};
use crate::live_metrics::{LiveMetrics, LoadSources, SampleFigures};
use crate::results::Status;

pub use crate::phase::Phase;

/// The latest sample, as the display shows it.
#[derive(Debug, Clone)]
pub struct Tick {
    pub phase: Phase,
    pub elapsed_s: f64,
    /// Warm-up + soak.
    pub load_s: f64,
    pub target_rps: f64,
    pub offered_rps: f64,
    pub acked_rps: f64,
    pub stored_rps: Option<f64>,
    /// The store did not answer within this long (s): said, not "n/m".
    pub store_no_answer_s: Option<f64>,
    pub lag_s: Option<f64>,
    pub behind_s: f64,
    /// Readings the storage wrote since the step began, by its own counter.
    pub stored_total: Option<f64>,
    /// The broker's drop counter since the step began.
    pub broker_dropped: Option<f64>,
    /// Per stack service: CPU over the sample (%), resident memory (bytes).
    pub cpu_percent: BTreeMap<String, f64>,
    pub rss_bytes: BTreeMap<String, u64>,
}

impl Tick {
    /// One line of plain text (also the bar's message).
    pub fn line(&self) -> String {
        format!(
            "{:<8} {:>5.0} s, {:>4.0} s left  target {}/s  offered {}/s  acked {}/s  stored {}  lag {}  behind {}",
            self.phase.name(),
            self.elapsed_s,
            (self.load_s - self.elapsed_s).max(0.0),
            whole(self.target_rps),
            whole(self.offered_rps),
            whole(self.acked_rps),
            match (self.stored_rps, self.store_no_answer_s) {
                (Some(s), _) => format!("{}/s", whole(s)),
                (None, Some(w)) => format!("no answer in {}", seconds(w)),
                (None, None) => NOT_MEASURED.into(),
            },
            measured_seconds(self.lag_s),
            seconds(self.behind_s),
        )
    }
}

enum Display {
    /// An indicatif bar on the terminal.
    Bar(Mutex<Option<ProgressBar>>),
    /// Plain lines to a writer (stderr, or a buffer in tests).
    Lines(Mutex<Box<dyn Write + Send>>),
    /// Each line a log event (`--log-format json`).
    Log,
}

/// Where a run's progress goes.
pub struct Progress {
    display: Display,
    prefix: Mutex<String>,
    metrics: Option<Arc<LiveMetrics>>,
}

impl Progress {
    /// A bar when stderr is a terminal, plain lines otherwise.
    pub fn for_stderr() -> Progress {
        if crate::logging::quiet() {
            return Progress::lines(Box::new(std::io::sink()));
        }
        if crate::logging::json() {
            return Progress { display: Display::Log, prefix: Mutex::new(String::new()), metrics: None };
        }
        let plain = std::env::var("SCALEBENCH_PROGRESS").is_ok_and(|v| v == "plain");
        if std::io::stderr().is_terminal() && !plain {
            Progress { display: Display::Bar(Mutex::new(None)), prefix: Mutex::new(String::new()), metrics: None }
        } else {
            Progress::lines(Box::new(std::io::stderr()))
        }
    }

    /// Plain lines to `out`.
    pub fn lines(out: Box<dyn Write + Send>) -> Progress {
        Progress { display: Display::Lines(Mutex::new(out)), prefix: Mutex::new(String::new()), metrics: None }
    }

    /// The same events also feed `metrics` (the Prometheus endpoint).
    pub fn with_metrics(mut self, metrics: Option<Arc<LiveMetrics>>) -> Progress {
        self.metrics = metrics;
        self
    }

    /// Whether a Prometheus endpoint watches this run.
    pub fn has_metrics(&self) -> bool {
        self.metrics.is_some()
    }

    /// The step's load starts: the endpoint reads these counters from now on.
    pub fn load_started(&self, sources: impl FnOnce() -> LoadSources) {
        if let Some(m) = &self.metrics {
            m.load_started(sources());
        }
    }

    /// Whether this display redraws a bar in place.
    pub fn is_bar(&self) -> bool {
        matches!(self.display, Display::Bar(_))
    }

    fn line(&self, text: &str) {
        match &self.display {
            Display::Bar(bar) => match bar.lock().unwrap().as_ref() {
                Some(b) => b.println(text),
                None => eprintln!("{text}"),
            },
            Display::Lines(out) => {
                let mut o = out.lock().unwrap();
                let _ = writeln!(o, "{text}");
                let _ = o.flush();
            }
            Display::Log => tracing::info!(target: "scalebench::progress", "{text}"),
        }
    }

    /// A message that must be seen (a fault injected, a stack event).
    pub fn println(&self, text: &str) {
        self.line(text);
    }

    /// Step `i` of `n` starts: `points` every `interval_s`, a load of `load_s`.
    pub fn step(&self, i: usize, n: usize, points: u64, interval_s: f64, load_s: f64) {
        let rps = points as f64 / interval_s;
        let head = format!(
            "step {i}/{n}: {} points every {} = {} readings/s",
            thousands(points),
            seconds(interval_s),
            whole(rps)
        );
        *self.prefix.lock().unwrap() = format!("[{} pts]", thousands(points));
        if let Some(m) = &self.metrics {
            m.step_started(points);
        }
        self.line(&head);
        if let Display::Bar(bar) = &self.display {
            let b = ProgressBar::with_draw_target(Some((load_s * 1000.0) as u64), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{prefix} {bar:24.cyan/blue} {elapsed:>4} of {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            b.set_prefix(format!("step {i}/{n} [{} pts]", thousands(points)));
            b.set_message(format!("{} load · topology", seconds(load_s)));
            b.enable_steady_tick(Duration::from_millis(250));
            *bar.lock().unwrap() = Some(b);
        }
    }

    /// A phase starts; `detail` says what it does.
    pub fn phase(&self, phase: Phase, detail: &str) {
        if let Some(m) = &self.metrics {
            m.phase(phase);
        }
        match &self.display {
            Display::Bar(bar) => {
                if let Some(b) = bar.lock().unwrap().as_ref() {
                    b.set_message(format!("{} · {detail}", phase.name()));
                }
            }
            Display::Lines(_) | Display::Log => {
                let p = self.prefix.lock().unwrap().clone();
                self.line(&format!("  {p} phase: {} ({detail})", phase.name()));
            }
        }
    }

    /// Load time so far (the bar moves between samples).
    pub fn elapsed(&self, elapsed_s: f64) {
        if let Display::Bar(bar) = &self.display {
            if let Some(b) = bar.lock().unwrap().as_ref() {
                b.set_position((elapsed_s * 1000.0) as u64);
            }
        }
    }

    /// The latest sample.
    pub fn sample(&self, t: &Tick) {
        if let Some(m) = &self.metrics {
            m.phase(t.phase);
            m.sample(SampleFigures {
                stored: t.stored_total,
                lag_s: t.lag_s,
                behind_s: t.behind_s,
                broker_dropped: t.broker_dropped,
                cpu_cores: t.cpu_percent.iter().map(|(k, v)| (k.clone(), v / 100.0)).collect(),
                rss_bytes: t.rss_bytes.clone(),
            });
        }
        match &self.display {
            Display::Bar(bar) => {
                if let Some(b) = bar.lock().unwrap().as_ref() {
                    b.set_position((t.elapsed_s * 1000.0) as u64);
                    b.set_message(format!("{} s · {}", (t.load_s).round(), t.line()));
                }
            }
            Display::Lines(_) | Display::Log => {
                let p = self.prefix.lock().unwrap().clone();
                self.line(&format!("  {p} {}", t.line()));
            }
        }
    }

    /// The step ended with `status`: its verdict in one line.
    pub fn step_done(&self, status: Status, verdict: &str) {
        if let Some(m) = &self.metrics {
            m.step_done(status);
        }
        if let Display::Bar(bar) = &self.display {
            if let Some(b) = bar.lock().unwrap().take() {
                b.finish_and_clear();
            }
        }
        self.line(verdict);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn plain_lines_show_phase_rates_and_unmeasured_as_nm() {
        let buf = Buf::default();
        let p = Progress::lines(Box::new(buf.clone()));
        assert!(!p.is_bar());
        p.step(1, 2, 2500, 5.0, 70.0);
        p.phase(Phase::Topology, "2,500 new points");
        p.sample(&Tick {
            phase: Phase::Soak,
            elapsed_s: 40.0,
            load_s: 70.0,
            target_rps: 500.0,
            offered_rps: 499.6,
            acked_rps: 498.0,
            stored_rps: None,
            store_no_answer_s: None,
            lag_s: Some(0.4),
            behind_s: 0.0,
            stored_total: None,
            broker_dropped: None,
            cpu_percent: BTreeMap::new(),
            rss_bytes: BTreeMap::new(),
        });
        p.step_done(Status::Pass, "step 2,500 points: pass");
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(text.contains("step 1/2: 2,500 points every 5.00 s = 500 readings/s"), "{text}");
        assert!(text.contains("[2,500 pts] phase: topology (2,500 new points)"), "{text}");
        assert!(text.contains("soak        40 s,   30 s left  target 500/s  offered 500/s  acked 498/s  stored n/m  lag 0.40 s  behind 0.00 s"), "{text}");
        assert!(text.ends_with("step 2,500 points: pass\n"), "{text}");
        assert!(!text.contains('\u{1b}'), "no escape codes off a terminal: {text:?}");
    }
}
