//! `scalebench plugins check`: the contract tests any plugin author can run
//! before a ladder. Each check is a finding (passed, failed with what to
//! fix, or a figure); the command prints them and fails when one failed.
//! The checks that need no service live here, one module per kind of
//! plugin; the adapter's round trip against a service is wired in
//! `commands/plugins_check.rs`, since it is a short run.

pub mod adapter;
pub mod model;
pub mod probes;

use std::fmt::Write as _;

/// How one finding came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Pass,
    Fail,
    /// A measured figure (time, memory, size), with the limit beside it.
    Figure,
    /// Not checked, and why (e.g. no service to check against).
    Skipped,
    /// Against the contract's meaning but not its rules (a `counter` that
    /// goes down, as `noise` does on purpose): said, not failed.
    Warning,
}

#[derive(Debug, Clone)]
pub struct Finding {
    pub mark: Mark,
    pub what: String,
    /// For a failure: what to change, in the author's words.
    pub fix: Option<String>,
}

/// Everything one `plugins check` found, in order.
#[derive(Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn pass(&mut self, what: impl Into<String>) {
        self.findings.push(Finding { mark: Mark::Pass, what: what.into(), fix: None });
    }

    pub fn fail(&mut self, what: impl Into<String>, fix: impl Into<String>) {
        self.findings.push(Finding { mark: Mark::Fail, what: what.into(), fix: Some(fix.into()) });
    }

    pub fn figure(&mut self, what: impl Into<String>) {
        self.findings.push(Finding { mark: Mark::Figure, what: what.into(), fix: None });
    }

    pub fn warn(&mut self, what: impl Into<String>, fix: impl Into<String>) {
        self.findings.push(Finding { mark: Mark::Warning, what: what.into(), fix: Some(fix.into()) });
    }

    pub fn skipped(&mut self, what: impl Into<String>) {
        self.findings.push(Finding { mark: Mark::Skipped, what: what.into(), fix: None });
    }

    /// Pass when `ok`, else fail with `fix`.
    pub fn expect(&mut self, ok: bool, what: impl Into<String>, fix: impl Into<String>) -> bool {
        if ok {
            self.pass(what);
        } else {
            self.fail(what, fix);
        }
        ok
    }

    pub fn failures(&self) -> usize {
        self.findings.iter().filter(|f| f.mark == Mark::Fail).count()
    }

    /// One line per finding (`ok`, `FAIL`, `figure`, `skipped`,
    /// `warning`), a `fix:` line under each failure and warning, and a
    /// closing count.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            let mark = match f.mark {
                Mark::Pass => "ok     ",
                Mark::Fail => "FAIL   ",
                Mark::Figure => "figure ",
                Mark::Skipped => "skipped",
                Mark::Warning => "warning",
            };
            let _ = writeln!(out, "{mark} {}", f.what);
            if let Some(fix) = &f.fix {
                let _ = writeln!(out, "        fix: {fix}");
            }
        }
        let passed = self.findings.iter().filter(|f| f.mark == Mark::Pass).count();
        let warnings = self.findings.iter().filter(|f| f.mark == Mark::Warning).count();
        let and_warnings = match warnings {
            0 => String::new(),
            n => format!(" ({n} warning(s))"),
        };
        let _ = match self.failures() {
            0 => writeln!(out, "\nall {passed} checks passed{and_warnings}"),
            n => writeln!(out, "\n{n} of {} checks failed{and_warnings}", passed + n),
        };
        out
    }
}

/// A plugin the host refused to load, said as what the author did.
pub fn load_refusal(report: &mut Report, e: &anyhow::Error) {
    let text = format!("{e:#}");
    let Some(plugin_runtime::PluginError::ForbiddenImport { imports, .. }) = e.downcast_ref() else {
        report.fail(format!("loads: {text}"), "see the hint above; `scalebench plugins inspect FILE` shows the same");
        return;
    };
    let (what, fix) = if imports.contains("wasi:clocks") {
        (
            "reads the clock",
            "compute every value from (seed, point, sample) alone: sample s is at s × sample-period after the Unix epoch, so the time is already given; remove the clock call (std::time::SystemTime, Instant)",
        )
    } else if imports.contains("wasi:random") {
        (
            "uses randomness",
            "derive pseudo-random numbers from (seed, point, sample) with a hash; a HashMap with the default hasher imports randomness too: use a BTreeMap",
        )
    } else if imports.contains("wasi:filesystem") || imports.contains("wasi:sockets") {
        ("opens files or sockets", "ask the host through your world's imports (http-client, sql-client) instead")
    } else {
        ("imports what the host does not grant", "import only what your world in wit/plugin.wit lists")
    };
    report.fail(format!("loads: the plugin {what} (it imports {imports}); the host refuses it"), fix);
}

/// Milliseconds with sensible precision for a figure.
pub fn ms(d: std::time::Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 0.001 {
        "< 0.001 ms".into()
    } else if ms < 10.0 {
        format!("{ms:.3} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_says_what_to_fix_and_is_counted() {
        let mut r = Report::default();
        r.pass("loads");
        r.fail("sample is deterministic", "keep no state between calls");
        r.figure("sample: 1 ms");
        let text = r.render();
        assert!(text.contains("FAIL    sample is deterministic\n        fix: keep no state"), "{text}");
        assert!(text.ends_with("1 of 2 checks failed\n"), "{text}");
        assert_eq!(r.failures(), 1);
    }
}
