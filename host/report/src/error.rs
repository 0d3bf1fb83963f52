//! The report crate's errors a user acts on.

/// The exit status of a failed CI gate (`--require-ceiling`,
/// `--fail-on-regression`): 1 and 2 are errors and usage already.
pub const EXIT_GATE: i32 = 3;

/// A CI gate that did not hold: every breach, in the user's words (exit status 3).
#[derive(Debug, thiserror::Error)]
#[error("{what}:\n  - {}\nhint: {hint}", breaches.join("\n  - "))]
pub struct GateFailed {
    pub what: String,
    pub breaches: Vec<String>,
    pub hint: String,
}
