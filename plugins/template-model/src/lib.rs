//! A value model: per equip a temperature in °C (a daily sine plus noise), a
//! pressure in bar and a counter that only grows. Change the layout and the
//! formulas; keep the rules of the value-model world (it imports only logging):
//! - every value is a pure function of (seed, tag, sample): no state that
//!   changes results, no clock, no randomness; `series` equals `sample` bit for bit;
//! - sample `s` is at `s × sample-period-ms` after the Unix epoch (real time of day);
//! - labels are unique within an equip and safe as an MQTT topic level and a
//!   NATS subject token; calls come in batches of up to 16,384 points;
//! - BTreeMap, never HashMap (its default hasher imports wasi:random: refused).

mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "value-model-plugin" });
}

use std::cell::Cell;
use std::f64::consts::TAU;

use bindings::exports::scalebench::plugin::value_model::Guest;
use bindings::scalebench::plugin::types::{PluginInfo, PluginKind, TagInfo};

/// One point of each kind per equip; equips per site.
const POINTS_PER_EQUIP: u32 = 3;
const EQUIPS_PER_SITE: u32 = 100;
const DAY_MS: u64 = 86_400_000;

const SCHEMA: &str = r#"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","additionalProperties":false,"properties":{"sample_period_ms":{"type":"integer","minimum":1,"maximum":86400000,"default":1000,"description":"milliseconds between two samples of a point"}}}"#;
const DEFAULTS: &str = r#"{"sample_period_ms":1000}"#;

thread_local! {
    /// The params of the last accepted `configure` (the host configures first).
    static PERIOD_MS: Cell<u64> = const { Cell::new(1000) };
}

/// A well-mixed 64-bit hash (splitmix64's finalizer).
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A deterministic number in [0, 1) for (seed, tag, salt): noise without randomness.
fn unit(seed: u64, tag: u32, salt: u64) -> f64 {
    (mix(seed ^ mix(tag as u64 ^ mix(salt))) >> 11) as f64 / (1u64 << 53) as f64
}

/// Where sample `sample` falls in its UTC day, in [0, 1).
fn day_fraction(sample: u64) -> f64 {
    let period = PERIOD_MS.with(Cell::get) as u128;
    (sample as u128 * period % DAY_MS as u128) as f64 / DAY_MS as f64
}

/// The value of point `tag` at sample `sample`: a pure function of (seed, tag, sample).
fn value(seed: u64, tag: u32, sample: u64) -> f64 {
    let own = unit(seed, tag, u64::MAX); // a constant of the point, in [0, 1)
    let noise = unit(seed, tag, sample) - 0.5; // fresh at every sample, in [-0.5, 0.5)
    match tag % POINTS_PER_EQUIP {
        0 => 18.0 + 4.0 * own + 3.0 * (TAU * (day_fraction(sample) - 0.375)).sin() + 0.2 * noise,
        1 => 2.0 + own + 0.05 * noise,
        _ => (sample as f64 * (0.5 + 4.5 * own)).floor(),
    }
}

fn tag_info(index: u32) -> TagInfo {
    let (kind, unit, label, marker) = match index % POINTS_PER_EQUIP {
        0 => ("temperature", "°C", "temp", "temp"),
        1 => ("pressure", "bar", "pressure", "pressure"),
        _ => ("counter", "count", "count", "totalizer"),
    };
    let equip = index / POINTS_PER_EQUIP;
    TagInfo {
        index,
        kind: kind.into(),
        unit: unit.into(),
        site: equip / EQUIPS_PER_SITE,
        equip,
        label: label.into(),
        markers: vec!["point".into(), "sensor".into(), marker.into()],
    }
}

struct Model;

impl Guest for Model {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "template-model".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: "0.1.0".into(),
            kind: PluginKind::ValueModel,
            summary: "per equip: a temperature (daily sine and noise), a pressure and a counter".into(),
            params_schema: SCHEMA.into(),
            default_params: DEFAULTS.into(),
        }
    }

    fn configure(params_json: String) -> Result<(), String> {
        let text = if params_json.trim().is_empty() { "{}" } else { params_json.as_str() };
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("params are not JSON: {e}"))?;
        let obj = v.as_object().ok_or("params must be a JSON object such as {\"sample_period_ms\":1000}")?;
        if let Some(k) = obj.keys().find(|k| k.as_str() != "sample_period_ms") {
            return Err(format!("unknown param `{k}`: this model takes only `sample_period_ms`"));
        }
        let period = match obj.get("sample_period_ms") {
            None => 1000,
            Some(p) => p.as_u64().filter(|p| (1..=DAY_MS).contains(p)).ok_or_else(|| {
                format!("`sample_period_ms` is {p}: give a whole number of milliseconds from 1 to 86400000")
            })?,
        };
        PERIOD_MS.with(|c| c.set(period));
        Ok(())
    }

    fn sample_period_ms() -> u64 {
        PERIOD_MS.with(Cell::get)
    }

    fn tags(_seed: u64, first: u32, count: u32) -> Vec<TagInfo> {
        (first..first.saturating_add(count)).map(tag_info).collect()
    }

    fn sample(seed: u64, first: u32, count: u32, sample: u64) -> Vec<f64> {
        (first..first.saturating_add(count)).map(|t| value(seed, t, sample)).collect()
    }

    fn series(seed: u64, tag: u32, start: u64, count: u32) -> Vec<f64> {
        (start..start.saturating_add(count as u64)).map(|s| value(seed, tag, s)).collect()
    }
}

bindings::export!(Model with_types_in bindings);
