//! Studies: a fixed ladder of measurements with hypotheses stated before the
//! run, checked against the numbers afterwards, and a report with charts
//! (the shape of the NATS messaging study this project started from).
//!
//! - [`nats`]: `scalebench study nats`, core NATS vs JetStream.
//!
//! What a study records is in the results crate (`scalebench_results::study`);
//! its verdicts, charts and report.md are drawn by the report crate.

#[cfg(feature = "nats")]
pub mod nats;
pub mod nats_args;

#[cfg(feature = "nats")]
pub use nats::{run_study, StudyReport};
pub use nats_args::StudyNatsArgs;
