//! The phases of a ladder step, in order, by the names progress lines and
//! the live metrics endpoint give them.

/// The phases of a step, in order (see `step`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Topology,
    WarmUp,
    Soak,
    /// The read probes, timed at mid-soak while the load runs.
    Probes,
    Drain,
    Count,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Topology => "topology",
            Phase::WarmUp => "warm-up",
            Phase::Soak => "soak",
            Phase::Probes => "probes",
            Phase::Drain => "drain",
            Phase::Count => "count",
        }
    }
}
