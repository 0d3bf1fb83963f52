//! `scalebench worker`: serve the control API of one generator of a
//! distributed run ([`crate::distributed::worker`]).

use crate::cli::{PluginOptions, WorkerArgs};
use crate::distributed::{token, worker};

/// The worker's index: the flag, else what the engine that started it says.
fn index(args: &WorkerArgs) -> Option<u32> {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u32>().ok());
    args.index
        .or_else(|| env("SCALEBENCH_WORKER_INDEX"))
        .or_else(|| env("JOB_COMPLETION_INDEX"))
        .or_else(|| env("SCALEBENCH_WORKER_SLOT").map(|s| s.saturating_sub(1)))
}

/// The control API's token: `--token-file`, else the environment's, else
/// a new one (true: made here, so printed with the URL).
fn token(args: &WorkerArgs) -> anyhow::Result<(String, bool)> {
    let given = match &args.token_file {
        Some(f) => Some(
            std::fs::read_to_string(f)
                .map_err(|e| crate::error::UsageError(format!("--token-file {}: cannot read it: {e}", f.display())))?,
        ),
        None => std::env::var(token::ENV).ok().filter(|t| !t.trim().is_empty()),
    };
    match given {
        Some(t) => Ok((token::check(&t).map_err(crate::error::UsageError)?, false)),
        None => Ok((token::generate()?, true)),
    }
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
    let (token, made) = token(&args)?;
    let rt = crate::async_runtime::two_threads()?;
    let options = worker::Options {
        listen,
        index,
        limits: plugin.limits(),
        metrics_listen: args.metrics_listen,
        test_build_id: args.test_build_id.clone(),
        token: token.clone(),
    };
    rt.block_on(worker::serve(
        options,
        Box::new(move |addr| {
            // The one line a script or a test waits for, on stdout: with the
            // token when the worker made it (the coordinator's --workers takes
            // this URL), without when it was given.
            let url = format!("http://{addr}");
            if made {
                println!("worker listening on {}", token::url_with(&url, &token));
            } else {
                println!("worker listening on {url}");
            }
            use std::io::Write as _;
            let _ = std::io::stdout().flush();
        }),
    ))
}
