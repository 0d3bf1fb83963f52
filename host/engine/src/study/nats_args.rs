//! The arguments of `scalebench study nats`: in every build, so the command
//! line reads the same with or without the NATS client (`make run`'s build
//! leaves it out and says so when the study is asked for).

use std::path::PathBuf;

/// `scalebench study nats`.
#[derive(Debug, Clone, clap::Args)]
pub struct StudyNatsArgs {
    /// Small rows (20k core msgs, 5k JetStream msgs, 300 pings): the whole
    /// study in well under 3 minutes on 2 cores.
    #[arg(long)]
    pub quick: bool,
    /// Nodes of the local nats-server cluster: 3 makes replicas=3 real; 1 runs
    /// standalone JetStream and skips the replicas=3 rows.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Results go to <results-dir>/<utc-run-id>/.
    #[arg(long, default_value = "results")]
    pub results_dir: PathBuf,
    /// An external cluster instead of a local one: comma-separated nats://
    /// URLs. Only throwaway subjects (bench.*) and streams
    /// (SCALEBENCH_STUDY_*) are used; nothing else is touched.
    #[arg(long)]
    pub url: Option<String>,
    /// Monitoring base URLs of the external cluster (comma-separated
    /// http://host:port) for /varz before and after; without them /varz is
    /// not recorded.
    #[arg(long, requires = "url")]
    pub monitor_url: Option<String>,
}

impl StudyNatsArgs {
    /// Defaults as on the command line, results under `results_dir`.
    pub fn new(results_dir: impl Into<PathBuf>) -> Self {
        StudyNatsArgs { quick: false, nodes: 3, results_dir: results_dir.into(), url: None, monitor_url: None }
    }
}
