//! Studies: a fixed ladder of measurements with hypotheses stated before the
//! run, checked against the numbers afterwards, and a report with charts
//! (the shape of the NATS messaging study this project started from).
//!
//! - [`nats`]: `scalebench study nats`, core NATS vs JetStream.
//! - [`report`]: verdicts, charts and report.md from a study's rows.
//!
//! Charts are drawn by [`crate::chart`], the same code as the ladder reports.

pub mod nats;
pub mod report;

pub use nats::{run_study, StudyNatsArgs};
