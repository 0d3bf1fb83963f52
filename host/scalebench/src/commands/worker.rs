//! `scalebench worker`: serve the control API of one generator of a
//! distributed run ([`crate::distributed::worker`]).

use crate::cli::{PluginOptions, WorkerArgs};
use crate::distributed::worker;

/// The worker's index: the flag, else what the engine that started it says.
fn index(args: &WorkerArgs) -> Option<u32> {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u32>().ok());
    args.index
        .or_else(|| env("SCALEBENCH_WORKER_INDEX"))
        .or_else(|| env("JOB_COMPLETION_INDEX"))
        .or_else(|| env("SCALEBENCH_WORKER_SLOT").map(|s| s.saturating_sub(1)))
}

pub fn run(plugin: &PluginOptions, args: WorkerArgs) -> anyhow::Result<()> {
    super::install_access(&args.access)?;
    crate::clock::set_offset_ms(args.test_clock_offset_ms);
    let index = index(&args);
    let mut listen = args.listen;
    if args.port_per_index {
        let i = index.ok_or_else(|| {
            crate::error::UsageError(
                "--port-per-index needs the worker's index: give --index N or set SCALEBENCH_WORKER_INDEX".into(),
            )
        })?;
        listen.set_port(listen.port().checked_add(i as u16).ok_or_else(|| {
            crate::error::UsageError(format!(
                "port {} + index {i} is past 65535: choose a lower --listen port",
                listen.port()
            ))
        })?);
    }
    let rt = crate::async_runtime::two_threads()?;
    let options = worker::Options {
        listen,
        index,
        limits: plugin.limits(),
        metrics_listen: args.metrics_listen,
        test_build_id: args.test_build_id.clone(),
    };
    rt.block_on(worker::serve(options, |addr| {
        // The one line a script or a test waits for, on stdout.
        println!("worker listening on http://{addr}");
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    }))
}
