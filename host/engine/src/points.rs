//! The run's points, kept compactly between steps.
//!
//! A value model describes a point as a `tag-info` record: three strings and
//! a list of marker strings, about 350 bytes of heap per point once Rust has
//! them. At a million points that alone would be a third of a gigabyte, so
//! the session keeps each point as a fixed 24-byte row (kind, unit and the
//! marker set interned: a model has a handful of each) plus its label in one
//! shared string, about 35 bytes a point, and rebuilds `tag-info` records
//! only where a plugin needs them.

use std::collections::HashMap;
use std::sync::Arc;

use plugin_runtime::types::TagInfo;
use plugin_runtime::{PluginError, TargetAdapter, ValueModel, POINTS_PER_CALL};

/// At most this many points are handed to a probe set's `setup` (spread
/// evenly over the run's points, real indices): probes name points to read,
/// they do not need a million of them.
pub const PROBE_POINTS_MAX: usize = 65_536;

#[derive(Clone, Copy)]
struct Row {
    kind: u32,
    unit: u32,
    markers: u32,
    site: u32,
    equip: u32,
    label_end: u32,
}

#[derive(Default)]
pub struct PointTable {
    rows: Vec<Row>,
    labels: String,
    strings: Vec<String>,
    string_ids: HashMap<String, u32>,
    marker_sets: Vec<Vec<String>>,
    marker_ids: HashMap<Vec<String>, u32>,
}

impl PointTable {
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn intern(&mut self, s: &str) -> u32 {
        if let Some(id) = self.string_ids.get(s) {
            return *id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), id);
        id
    }

    /// Append points; their indices must continue the table (0, 1, 2 ...).
    pub fn extend(&mut self, tags: &[TagInfo]) {
        self.rows.reserve(tags.len());
        for t in tags {
            debug_assert_eq!(t.index as usize, self.rows.len(), "points arrive in index order");
            let kind = self.intern(&t.kind);
            let unit = self.intern(&t.unit);
            let markers = match self.marker_ids.get(&t.markers) {
                Some(id) => *id,
                None => {
                    let id = self.marker_sets.len() as u32;
                    self.marker_sets.push(t.markers.clone());
                    self.marker_ids.insert(t.markers.clone(), id);
                    id
                }
            };
            self.labels.push_str(&t.label);
            self.rows.push(Row {
                kind,
                unit,
                markers,
                site: t.site,
                equip: t.equip,
                label_end: self.labels.len() as u32,
            });
        }
    }

    /// The `tag-info` record of point `i`.
    pub fn get(&self, i: usize) -> TagInfo {
        let r = self.rows[i];
        let start = if i == 0 { 0 } else { self.rows[i - 1].label_end as usize };
        TagInfo {
            index: i as u32,
            kind: self.strings[r.kind as usize].clone(),
            unit: self.strings[r.unit as usize].clone(),
            site: r.site,
            equip: r.equip,
            label: self.labels[start..r.label_end as usize].to_string(),
            markers: self.marker_sets[r.markers as usize].clone(),
        }
    }

    /// Every point, or `max` of them spread evenly (first and last included).
    pub fn spread(&self, max: usize) -> Vec<TagInfo> {
        let n = self.rows.len();
        if n <= max {
            return (0..n).map(|i| self.get(i)).collect();
        }
        let max = max.max(2);
        (0..max).map(|k| self.get(k * (n - 1) / (max - 1))).collect()
    }

    /// Heap bytes the table holds (for the generator's memory figures).
    pub fn heap_bytes(&self) -> usize {
        self.rows.capacity() * std::mem::size_of::<Row>() + self.labels.capacity()
    }
}

/// The address table of points 0..`points`, asked for slice by slice so the
/// model's tag records are never all in memory at once.
pub fn address_table(
    model: &mut ValueModel,
    adapter: &mut TargetAdapter,
    seed: u64,
    points: u32,
) -> Result<Vec<Arc<str>>, PluginError> {
    let mut out = Vec::with_capacity(points as usize);
    let mut at = 0u32;
    while at < points {
        let n = (points - at).min(POINTS_PER_CALL as u32);
        let tags = model.tags(seed, at, n)?;
        out.extend(adapter.addresses(&tags)?.into_iter().map(|a| Arc::<str>::from(a.as_str())));
        at += n;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(i: u32) -> TagInfo {
        TagInfo {
            index: i,
            kind: if i.is_multiple_of(2) { "temperature".into() } else { "flow".into() },
            unit: "°C".into(),
            site: i / 100,
            equip: i / 10,
            label: format!("temp{i}"),
            markers: vec!["point".into(), "sensor".into()],
        }
    }

    #[test]
    fn points_come_back_exactly_as_given() {
        let tags: Vec<TagInfo> = (0..1000).map(tag).collect();
        let mut t = PointTable::default();
        t.extend(&tags[..400]);
        t.extend(&tags[400..]);
        assert_eq!(t.len(), 1000);
        for (i, want) in tags.iter().enumerate() {
            assert_eq!(format!("{:?}", t.get(i)), format!("{want:?}"));
        }
        let s = t.spread(10);
        assert_eq!(s.len(), 10);
        assert_eq!(s[0].index, 0);
        assert_eq!(s[9].index, 999);
        assert!(t.heap_bytes() < 1000 * 40, "{} bytes for 1000 points", t.heap_bytes());
    }
}
