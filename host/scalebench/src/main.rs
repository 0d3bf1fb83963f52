//! The `scalebench` binary: parses the command line and hands over to the library.
//!
//! A closed standard output (`scalebench plugins inspect noise | head -1`)
//! ends the process quietly with status 141, as a shell reports a process
//! ended by SIGPIPE; SIGPIPE itself stays ignored (Rust's default), so a
//! socket to a SUT that closes is an error the run reports, never a silent
//! death.

/// The status a shell gives a process ended by SIGPIPE (128 + 13).
const CLOSED_PIPE: i32 = 141;

fn main() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // `print!` panics when its stdout is gone: the reader has had enough.
        let text = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if text.starts_with("failed printing to stdout") && stdout_closed() {
            std::process::exit(CLOSED_PIPE);
        }
        default_hook(info)
    }));
    let cli = match scalebench::parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(scalebench::ParseError::Clap(e)) => e.exit(),
        Err(scalebench::ParseError::Plan(e)) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    if let Err(err) = scalebench::run(cli) {
        // An error from writing to a closed stdout (gen's buffered writer) is
        // the same quiet end; a broken pipe to a SUT is reported as ever.
        if stdout_closed() {
            std::process::exit(CLOSED_PIPE);
        }
        // Through the log, so `--log-format json` keeps every stderr line JSON.
        tracing::error!("{err:#}");
        std::process::exit(scalebench::exit_code(&err));
    }
}

/// Whether standard output is a pipe whose reader has gone: poll(2)
/// reports an error condition on such a pipe's write end (and none on a
/// terminal, a file or a live pipe).
fn stdout_closed() -> bool {
    let mut fd = libc::pollfd { fd: 1, events: 0, revents: 0 };
    // SAFETY: one pollfd on the stack, no timeout.
    let n = unsafe { libc::poll(&mut fd, 1, 0) };
    n == 1 && fd.revents & libc::POLLERR != 0
}
