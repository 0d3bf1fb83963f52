//! scalebench's views of results: the report of a run (`report`: Markdown
//! and HTML with its figures and tables), SVG charts (`chart`), `compare`
//! across runs, CI gates and JUnit XML (`gates`), and the study's report
//! (`study`). Everything here reads result files through the schema crate
//! and nothing else: a report draws the limits the run recorded, never this
//! build's.

pub mod chart;
pub mod compare;
pub mod error;
pub mod gates;
pub mod report;
pub mod study;

// The schema's modules under the names this crate's files use.
use scalebench_results::{atomic_file, format, latency, results};
