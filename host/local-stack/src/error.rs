//! Errors of the local stack. Every message names the problem and ends with a
//! `hint:` line saying what to do.

use std::path::PathBuf;
use std::time::Duration;

use crate::Service;

#[derive(Debug, thiserror::Error)]
pub enum StackError {
    #[error(
        "{service} port {port} is a live default port (live systems use it); the local stack never binds it\n\
         hint: pass --base-port with a free 2xxxx port (e.g. --base-port 21883)"
    )]
    LiveDefaultPort { service: Service, port: u16 },

    #[error(
        "{service} port {port} is outside 20000-29999, the range kept for scalebench's own stacks\n\
         hint: pass --base-port with a free 2xxxx port (e.g. --base-port 21883)"
    )]
    PortOutOfRange { service: Service, port: u16 },

    #[error(
        "{service} port 127.0.0.1:{port} is already in use ({detail})\n\
         hint: stop whatever holds it (another scalebench stack? see `ss -ltnp | grep :{port}`), \
         or pass --base-port with a free 2xxxx port"
    )]
    PortTaken { service: Service, port: u16, detail: String },

    #[error("{what} not found (looked at: {looked})\nhint: {hint}")]
    NotFound { what: String, looked: String, hint: String },

    #[error("{context}: {source}\nhint: {hint}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
        hint: String,
    },

    #[error(
        "{service} did not accept connections on 127.0.0.1:{port} within {waited:?} (last error: {last_error})\n\
         last lines of {log}:\n{tail}\n\
         hint: read {log}; a slow machine may need a longer ready timeout"
    )]
    NotReady { service: Service, port: u16, waited: Duration, last_error: String, log: PathBuf, tail: String },

    #[error(
        "{service} exited while {phase} ({status})\n\
         last lines of {log}:\n{tail}\n\
         hint: read {log}"
    )]
    Exited { service: Service, phase: String, status: String, log: PathBuf, tail: String },

    #[error("postgres: {context}: {source}\nhint: {hint}")]
    Postgres {
        context: String,
        #[source]
        source: tokio_postgres::Error,
        hint: String,
    },

    #[error(
        "the one-reading check failed: {detail}\n\
         last lines of {log}:\n{tail}\n\
         hint: the broker, PostgreSQL or the historian is not doing its job; read {log}"
    )]
    ReadingCheck { detail: String, log: PathBuf, tail: String },

    #[error("invalid stack options: {problem}\nhint: {hint}")]
    InvalidOptions { problem: String, hint: String },

    #[error("{service} is not running\nhint: {hint}")]
    NotRunning { service: Service, hint: String },

    #[error("cannot read the historian's stats file {path}: {problem}\nhint: the historian writes it every second; is it running?")]
    Stats { path: PathBuf, problem: String },
}

impl StackError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error, hint: impl Into<String>) -> Self {
        StackError::Io { context: context.into(), source, hint: hint.into() }
    }
}
