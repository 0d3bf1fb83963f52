//! What a study records: its plan (the rows it runs) and its result file
//! (study.json). The study runs in the engine; its report is drawn by the
//! report crate from these records alone.

pub mod plan;
pub mod record;

/// Acks a JetStream publisher keeps outstanding in an async row.
pub const ACK_WINDOW: usize = 256;
