//! One integration-test binary for scalebench (one place to look, one link).
//! Modules by concern; each test talks to real things: real WebAssembly
//! components built from plugins/ and tests/bad-plugins/, the real binary.

mod architecture_paths;
mod ci_gates;
mod cli_gen;
mod common;
mod crash;
mod crates;
mod deploy;
mod distributed;
mod docker;
mod external;
mod historian;
mod honesty;
mod hostile_adapters;
mod http;
mod ladder;
mod layers;
mod live_metrics;
mod logs;
mod make_run;
mod models;
mod plans;
mod plugin_authors;
mod plugin_faults;
mod precision;
mod prefill;
mod probes;
mod reports;
mod scale;
mod study;
mod suite_config;
mod tls;
mod user_text;
