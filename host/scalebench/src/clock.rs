//! The wall clock, in one place: milliseconds since the Unix epoch. Every
//! rate that a pass rule reads is measured on it (acks by second of arrival,
//! the load's wall-clock end), beside the payload timestamps the schedule
//! gives each reading.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Now, in RFC 3339 UTC (`2026-12-01T02:31:03.120Z`).
pub fn utc_now() -> String {
    crate::results::format_utc(now_ms())
}
