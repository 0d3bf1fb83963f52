//! One integration-test binary for scalebench (one place to look, one link).
//! Modules by concern; each test talks to real things: real WebAssembly
//! components built from plugins/ and tests/bad-plugins/, the real binary.

mod common;
mod cli_gen;
mod models;
mod plugin_faults;
mod ladder;
mod honesty;
mod docker;
mod probes;
mod study;
mod reports;
mod user_text;
mod prefill;
mod scale;
mod http;
