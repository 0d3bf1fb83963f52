//! The reference historian's wire contract, shared with the rest of the host.
//!
//! The binary (`src/main.rs`) is a small, honest MQTT → PostgreSQL ingester:
//! it subscribes `fbf/#` at QoS 1 with a persistent session and manual acks,
//! writes readings in batched, durable transactions and acknowledges a
//! message (PUBACK) only after the transaction holding it committed.
//!
//! This library holds what other components rely on:
//! - [`SCHEMA_SQL`]: the tables it creates (`point_history`, `entity_tags`);
//! - [`INGEST_SESSION_SQL`]: `ingest_session`, one row per historian saying
//!   what its own ingest connection does for durability;
//! - [`classify`]: how a topic and payload become a reading, a tags upsert or
//!   a malformed message;
//! - [`Stats`]: the JSON it writes to `--stats-file`.

pub mod app;
pub mod tls;

use chrono::{DateTime, Datelike, NaiveDateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

/// The subscription: every topic under `fbf/`.
pub const SUBSCRIPTION: &str = "fbf/#";

/// Topic of the lag canary (point `canary/lag`, value = sequence number).
pub const CANARY_TOPIC: &str = "fbf/scale/canary/lag";

/// Schema created on start if missing. Other components (storage counting,
/// probes, local-stack's readiness check) rely on exactly these tables.
pub const SCHEMA_SQL: &str = "\
CREATE TABLE IF NOT EXISTS point_history (
  point text NOT NULL, ts timestamptz NOT NULL, value double precision NOT NULL,
  stored_at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (point, ts));
CREATE INDEX IF NOT EXISTS point_history_ts ON point_history (ts);
CREATE TABLE IF NOT EXISTS entity_tags (topic text PRIMARY KEY, payload jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
";

/// The historian's record of its own ingest path: right after every connect
/// to PostgreSQL it reads `SHOW fsync`, `SHOW synchronous_commit` and `SHOW
/// full_page_writes` on the connection it writes readings through (after any
/// `--session-setting`) and upserts its row, keyed by its MQTT client id. A
/// server that is durable can still be written to non-durably by a session
/// (`SET synchronous_commit = off`); this row shows what the writes got.
pub const INGEST_SESSION_SQL: &str = "\
CREATE TABLE IF NOT EXISTS ingest_session (client text PRIMARY KEY, fsync text NOT NULL, synchronous_commit text NOT NULL,
  full_page_writes text NOT NULL, pid int NOT NULL, at timestamptz NOT NULL DEFAULT now());
";

/// Counters written to `--stats-file` every second and on SIGTERM.
///
/// All counters except `malformed` and `batches` count *readings*, and the
/// lag canary is a reading like any other: canaries are included in
/// `received` and `stored` (they are never dropped by `--drop-one-in`).
/// Counters are per process lifetime: a restarted historian starts at zero.
///
/// Once the pipeline is drained, `received = stored + dropped + duplicates`
/// (a redelivered message counts again in `received`, then in `duplicates`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Well-formed readings that arrived (canaries and dropped ones included).
    pub received: u64,
    /// Readings whose row was newly inserted by a committed transaction.
    pub stored: u64,
    /// Readings discarded on purpose by `--drop-one-in` (acked, not stored).
    pub dropped: u64,
    /// Messages (readings or tags) that could not be parsed or stored; acked.
    pub malformed: u64,
    /// Readings whose (point, ts) row already existed (e.g. redeliveries).
    pub duplicates: u64,
    /// Committed write transactions.
    pub batches: u64,
}

/// One reading, ready for storage.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub point: String,
    pub ts: DateTime<Utc>,
    pub value: f64,
}

/// What one MQTT message means to the historian.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A reading; `canary` is true for the lag canary topic.
    Reading { reading: Reading, canary: bool },
    /// Topology for `topic` (a topic ending in `/tags`): the payload as JSON text.
    Tags { topic: String, payload: String },
    /// Not storable; the reason is for the log.
    Malformed(String),
}

/// Is this the lag canary's topic?
pub fn is_canary_topic(topic: &str) -> bool {
    topic == CANARY_TOPIC
}

/// Classify one message by topic and parse its payload.
///
/// - a topic ending in `/tags` → [`Message::Tags`] (payload must be JSON);
/// - any other topic → a reading with envelope
///   `{"point": string, "value": number, "ts": ISO-8601 string or epoch ms}`.
pub fn classify(topic: &str, payload: &[u8]) -> Message {
    if topic.ends_with("/tags") {
        return match parse_tags(payload) {
            Ok(payload) => Message::Tags { topic: topic.to_string(), payload },
            Err(e) => Message::Malformed(format!("tags on {topic}: {e}")),
        };
    }
    match parse_reading(payload) {
        Ok(reading) => Message::Reading { reading, canary: is_canary_topic(topic) },
        Err(e) => Message::Malformed(format!("reading on {topic}: {e}")),
    }
}

fn parse_tags(payload: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(payload).map_err(|e| format!("not UTF-8: {e}"))?;
    // jsonb cannot hold U+0000; refuse it here rather than fail a whole batch.
    if text.contains("\\u0000") || text.contains('\0') {
        return Err("contains U+0000, which jsonb cannot store".into());
    }
    serde_json::from_str::<serde_json::Value>(text).map_err(|e| format!("not JSON: {e}"))?;
    Ok(text.to_string())
}

/// Parse a reading envelope.
pub fn parse_reading(payload: &[u8]) -> Result<Reading, String> {
    let v: serde_json::Value = serde_json::from_slice(payload).map_err(|e| format!("not JSON: {e}"))?;
    let obj = v.as_object().ok_or("envelope is not a JSON object")?;
    let point = match obj.get("point") {
        Some(serde_json::Value::String(s)) if !s.is_empty() && !s.contains('\0') => s.clone(),
        Some(serde_json::Value::String(_)) => return Err("\"point\" is empty or contains U+0000".into()),
        Some(_) => return Err("\"point\" is not a string".into()),
        None => return Err("missing \"point\"".into()),
    };
    let value = match obj.get("value") {
        Some(serde_json::Value::Number(n)) => n.as_f64().ok_or("\"value\" is not a finite number")?,
        Some(_) => return Err("\"value\" is not a number".into()),
        None => return Err("missing \"value\"".into()),
    };
    if !value.is_finite() {
        return Err("\"value\" is not finite".into());
    }
    let ts = match obj.get("ts") {
        Some(serde_json::Value::String(s)) => parse_ts_str(s)?,
        Some(serde_json::Value::Number(n)) => {
            let ms = n.as_f64().ok_or("\"ts\" is not a number")?;
            ts_from_epoch_ms(ms)?
        }
        Some(_) => return Err("\"ts\" is neither a string nor a number".into()),
        None => return Err("missing \"ts\"".into()),
    };
    if !(1..=9999).contains(&ts.year()) {
        return Err(format!("\"ts\" year {} is outside 1..=9999", ts.year()));
    }
    Ok(Reading { point, ts, value })
}

/// ISO-8601 / RFC 3339 (`2026-11-30T14:00:00.123Z`, offsets allowed); a
/// timestamp without offset is taken as UTC.
fn parse_ts_str(s: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, fmt) {
            return Ok(Utc.from_utc_datetime(&t));
        }
    }
    Err(format!("\"ts\" {s:?} is not an ISO-8601 timestamp"))
}

fn ts_from_epoch_ms(ms: f64) -> Result<DateTime<Utc>, String> {
    if !ms.is_finite() || ms.abs() > 2.0e14 {
        return Err(format!("\"ts\" {ms} is not plausible epoch milliseconds"));
    }
    // Microsecond precision, like timestamptz.
    let micros = (ms * 1000.0).round() as i64;
    DateTime::<Utc>::from_timestamp_micros(micros).ok_or_else(|| format!("\"ts\" {ms} out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_with_iso_ts() {
        let m =
            classify("fbf/scale/s1/e2/temp", br#"{"point":"s1/e2/temp","value":21.5,"ts":"2026-11-30T14:00:00.123Z"}"#);
        match m {
            Message::Reading { reading, canary } => {
                assert!(!canary);
                assert_eq!(reading.point, "s1/e2/temp");
                assert_eq!(reading.value, 21.5);
                assert_eq!(reading.ts.timestamp_millis(), 1_796_047_200_123);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reading_with_epoch_ms_and_canary() {
        let m = classify(CANARY_TOPIC, br#"{"point":"canary/lag","value":7,"ts":1796047200123}"#);
        match m {
            Message::Reading { reading, canary } => {
                assert!(canary);
                assert_eq!(reading.value, 7.0);
                assert_eq!(reading.ts.timestamp_millis(), 1_796_047_200_123);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tags_and_malformed() {
        assert!(matches!(classify("fbf/scale/s1/e2/equip/tags", br#""{\"tags\":{}}""#), Message::Tags { .. }));
        assert!(matches!(classify("fbf/scale/s1/e2/equip/tags", b"{nope"), Message::Malformed(_)));
        assert!(matches!(classify("fbf/x", br#"{"point":"p","value":"1","ts":0}"#), Message::Malformed(_)));
        assert!(matches!(classify("fbf/x", br#"{"point":"p","value":1}"#), Message::Malformed(_)));
        assert!(matches!(classify("fbf/x", br#"{"point":"p","value":1,"ts":"yesterday"}"#), Message::Malformed(_)));
        assert!(matches!(classify("fbf/x", b"\xff"), Message::Malformed(_)));
        assert!(matches!(classify("fbf/x/tags", br#"{"a":"\u0000"}"#), Message::Malformed(_)));
    }

    #[test]
    fn stats_json_shape() {
        let s = Stats { received: 1, ..Default::default() };
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(j, r#"{"received":1,"stored":0,"dropped":0,"malformed":0,"duplicates":0,"batches":0}"#);
    }
}
