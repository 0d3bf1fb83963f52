//! Test fixtures for this crate's tests and the adapters' (feature
//! `fixtures`, enabled from their dev-dependencies).

use serde_json::Value;

use crate::wire::Tag;

/// A temperature point with markers `point`, `sensor`, `temp`, in °C.
pub fn tag(index: u32, site: u32, equip: u32, label: &str) -> Tag {
    Tag {
        index,
        kind: "temperature".into(),
        unit: "°C".into(),
        site,
        equip,
        label: label.into(),
        markers: vec!["point".into(), "sensor".into(), "temp".into()],
    }
}

/// Points `0..points`: ten per equip (`temp1`..`temp10`), a thousand per site.
pub fn plant(points: u32) -> Vec<Tag> {
    (0..points).map(|i| tag(i, i / 1000, i / 10, &format!("temp{}", i % 10 + 1))).collect()
}

/// Parse a payload as JSON, or panic showing it.
pub fn json(b: &[u8]) -> Value {
    serde_json::from_slice(b).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(b)))
}
