//! What a ladder run is asked to do: its steps, timing, plugins, faults.

use std::path::PathBuf;
use std::time::Duration;

use crate::live_safety;

/// A fault injected into a local stack during each step's load (calibration).
#[derive(Debug, Clone)]
pub struct Fault {
    /// Service name as the stack knows it ("mosquitto", "postgres",
    /// "reference-historian", "nats-1").
    pub service: String,
    /// How long into the load.
    pub after: Duration,
    pub kind: FaultKind,
}

#[derive(Debug, Clone, Copy)]
pub enum FaultKind {
    /// SIGKILL; the stack's supervisor brings it back, and the restart is detected.
    Kill,
    /// SIGSTOP for this long, then SIGCONT (also at the step's end).
    Freeze(Duration),
}

impl FaultKind {
    /// The fault in the user's words ("kill", "freeze").
    pub fn verb(&self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Freeze(_) => "freeze",
        }
    }
}

#[derive(Debug, Clone)]
pub struct LadderConfig {
    pub steps: Vec<u64>,
    pub interval: Duration,
    pub warmup: Duration,
    pub soak: Duration,
    pub sample_every: Duration,
    pub continue_on_fail: bool,
    pub seed: u64,
    pub connections: u32,
    /// Unacknowledged publishes per MQTT connection.
    pub inflight: u16,
    /// The generator's MQTT account (password from the environment).
    pub mqtt_user: Option<String>,
    pub mqtt_password: Option<String>,
    /// MQTT protocol level: 4 (3.1.1) or 5.
    pub mqtt_version: u8,
    /// HTTP targets: requests in flight per connection.
    pub http_window: u32,
    /// The SUT account's password (from a file or the environment), handed
    /// to the adapter's and probe set's params next to their `user`.
    pub target_password: Option<crate::credentials::Secret>,
    pub model: String,
    pub model_params: String,
    pub target: String,
    pub target_params: String,
    /// None: no probes.
    pub probes: Option<String>,
    pub probe_params: String,
    pub probe_warm_runs: usize,
    pub drain_timeout: Duration,
    pub results_dir: PathBuf,
    pub run_id: String,
    pub command_line: Vec<String>,
    /// The resolved plan the result records (`run --again` runs it again).
    pub plan: std::collections::BTreeMap<String, crate::results::PlanValue>,
    pub min_disk_free_bytes: u64,
    pub repo_dir: PathBuf,
    pub faults: Vec<Fault>,
    pub live: live_safety::Config,
    /// History written before step 1 (`run --prefill-days`), for the result.
    pub prefill: Option<crate::prefill::Report>,
    /// A distributed run: the workers' control URLs (empty: this process
    /// generates the load).
    pub workers: Vec<String>,
    /// `--metrics-listen`: the endpoint the run's live figures also go to.
    pub metrics: Option<std::sync::Arc<crate::live_metrics::LiveMetrics>>,
}
