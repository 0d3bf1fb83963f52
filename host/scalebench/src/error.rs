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
}
