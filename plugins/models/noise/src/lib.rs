//! The `noise` value model: uniform random values in [low, high), what a
//! quickly written generator emits. Same points, kinds and labels as
//! `plant-core` (its layout is reused), so the two can be compared like for
//! like: only the values differ.

use plant_core::shape::{hash2, unit};
use serde::Deserialize;

#[cfg(target_arch = "wasm32")]
mod component;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    pub low: f64,
    pub high: f64,
    pub sample_period_ms: u64,
    pub points_per_equip: u32,
    pub equips_per_site: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params { low: 0.0, high: 100.0, sample_period_ms: 1000, points_per_equip: 10, equips_per_site: 100 }
    }
}

pub const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "low": {"type": "number"},
    "high": {"type": "number"},
    "sample_period_ms": {"type": "integer", "minimum": 1, "maximum": 86400000},
    "points_per_equip": {"type": "integer", "minimum": 1, "maximum": 1000},
    "equips_per_site": {"type": "integer", "minimum": 1, "maximum": 1000000}
  }
}"#;

pub const DEFAULT_JSON: &str =
    r#"{"low":0.0,"high":100.0,"sample_period_ms":1000,"points_per_equip":10,"equips_per_site":100}"#;

impl Params {
    pub fn from_json(json: &str) -> Result<Params, String> {
        let text = if json.trim().is_empty() { "{}" } else { json };
        let p: Params = serde_json::from_str(text).map_err(|e| format!("noise params: {e}"))?;
        if !(p.low.is_finite() && p.high.is_finite() && p.low < p.high) {
            return Err(format!("noise params: need finite low < high, got low={} high={}", p.low, p.high));
        }
        let shape = plant_core::Params {
            sample_period_ms: p.sample_period_ms,
            points_per_equip: p.points_per_equip,
            equips_per_site: p.equips_per_site,
            ..Default::default()
        };
        shape.validate().map_err(|e| e.replace("plant-core", "noise"))?;
        Ok(p)
    }

    /// The layout shared with plant-core.
    pub fn layout(&self) -> plant_core::Layout {
        plant_core::Layout::new(&plant_core::Params {
            sample_period_ms: self.sample_period_ms,
            points_per_equip: self.points_per_equip,
            equips_per_site: self.equips_per_site,
            ..Default::default()
        })
    }
}

#[derive(Debug, Clone)]
pub struct Noise {
    pub params: Params,
}

impl Noise {
    #[inline(always)]
    pub fn value(&self, tag_hash: u64, sample: u64) -> f64 {
        let p = &self.params;
        p.low + (p.high - p.low) * unit(hash2(tag_hash, sample))
    }

    #[inline(always)]
    pub fn tag_hash(seed: u64, tag: u32) -> u64 {
        hash2(seed ^ 0x0153_0153, tag as u64)
    }

    pub fn sample_into(&self, seed: u64, first: u32, count: u32, sample: u64, out: &mut Vec<f64>) {
        out.reserve(count as usize);
        out.extend((first..first.saturating_add(count)).map(|t| self.value(Self::tag_hash(seed, t), sample)));
    }

    pub fn sample(&self, seed: u64, first: u32, count: u32, sample: u64) -> Vec<f64> {
        let mut out = Vec::new();
        self.sample_into(seed, first, count, sample, &mut out);
        out
    }

    pub fn series(&self, seed: u64, tag: u32, start: u64, count: u32) -> Vec<f64> {
        let h = Self::tag_hash(seed, tag);
        (start..start + count as u64).map(|s| self.value(h, s)).collect()
    }
}
