//! Errors of scalebench's own making that a user must act on. Every message
//! names the problem in the user's words and ends with a `hint:` line saying
//! what to do. (`anyhow` carries them only at the top, in `commands/`.)

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{what} {host}:{port} is on a live system's default port; scalebench does not drive a live install by accident\n\
         hint: point it at a stack of its own on a 2xxxx port, or, if this host really is meant to be the target, name it: --live-host {host}"
    )]
    LivePort { what: String, host: String, port: u16 },

    #[error(
        "{what} `{name}` is a live system's name; scalebench does not drive a live install by accident\n\
         hint: use a scale-only name (for example scale_{name}), or, if this host really is meant to be the target, name it: --live-host {host}"
    )]
    LiveName { what: String, name: String, host: String },

    #[error(
        "one-reading check failed: {detail}\n\
         hint: {hint}"
    )]
    ReadingCheck { detail: String, hint: String },

    #[error("budgets: {problem}\nhint: {hint}")]
    Budgets { problem: String, hint: String },

    #[error("live-safety: {problem}\nhint: {hint}")]
    LiveSafety { problem: String, hint: String },

    #[error(
        "target {target} needs {what}, which the {stack} stack does not provide (it provides: {has})\n\
         hint: choose a stack that has one (--stack local starts the one the target's plan asks for; --stack external takes its URLs: --mqtt-url, --pg-url, --nats-url, --service NAME=URL)"
    )]
    MissingService { target: String, what: String, stack: String, has: String },

    #[error(
        "target {target} asks for {what}, which scalebench does not drive yet\n\
         hint: use a target whose plan is MQTT, NATS JetStream or HTTP (baler, nats-jetstream, haxall), or check the plugin's plan with `scalebench plugins inspect`"
    )]
    UnsupportedPlan { target: String, what: String },

    #[error(
        "{what} is not in this build of scalebench: `make run` builds only what a run against the built-in local stack needs\n\
         hint: build every command with `cargo build --release -p scalebench` (or install it with `cargo install --path host/scalebench`)"
    )]
    LeftOut { what: String },
}

/// A part this build left out (a cargo feature off: `make run`'s lean build).
pub fn left_out(what: impl Into<String>) -> anyhow::Error {
    Error::LeftOut { what: what.into() }.into()
}

/// Bad input from the user (exit status 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The user pressed Ctrl-C (exit status 130).
#[derive(Debug, thiserror::Error)]
#[error("interrupted; the steps measured so far are in the result file")]
pub struct Interrupted;

/// Ctrl-C stopped a prefill between chunks (exit status 130).
#[derive(Debug, thiserror::Error)]
#[error("interrupted: {written} of {total} rows of this prefill are written; run the same command again to resume where it stopped")]
pub struct PrefillInterrupted {
    pub written: u64,
    pub total: u64,
}

/// A usage error (exit status 2) from a message in the user's words.
pub fn usage(msg: String) -> anyhow::Error {
    UsageError(msg).into()
}

/// Exit status for an error: 2 for bad input, 130 for Ctrl-C, 1 otherwise
/// (the binary adds 3 for a failed CI gate, the report crate's `GateFailed`).
pub fn exit_code(err: &anyhow::Error) -> i32 {
    if err.downcast_ref::<UsageError>().is_some()
        || matches!(
            err.downcast_ref::<Error>(),
            Some(Error::Budgets { .. } | Error::LivePort { .. } | Error::LiveName { .. } | Error::LeftOut { .. })
        )
    {
        2
    } else if err.downcast_ref::<Interrupted>().is_some() || err.downcast_ref::<PrefillInterrupted>().is_some() {
        130
    } else {
        1
    }
}
