//! A minimal value model: a sawtooth per tag. Copy this crate to start a
//! plugin of your own; see docs/plugin-authoring.md (and plugins/template-adapter
//! for a target adapter that builds outside this repository).
//!
//! Rules of the value-model world: every value is a pure function of
//! (seed, tag, sample); `sample` and `series` must agree bit for bit; work in
//! batches (the host asks for thousands of values per call).

use scalebench_plugin_sdk::value_model::exports::scalebench::plugin::value_model::Guest;
use scalebench_plugin_sdk::value_model::scalebench::plugin::types::{PluginInfo, PluginKind, TagInfo};

struct Sawtooth;

fn value(seed: u64, tag: u32, sample: u64) -> f64 {
    ((seed ^ tag as u64).wrapping_add(sample) % 100) as f64
}

impl Guest for Sawtooth {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "template-model".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: scalebench_plugin_sdk::ABI_VERSION.into(),
            kind: PluginKind::ValueModel,
            summary: "a sawtooth per tag (template to copy)".into(),
            params_schema: r#"{"type":"object","additionalProperties":false}"#.into(),
            default_params: "{}".into(),
        }
    }

    fn configure(params_json: String) -> Result<(), String> {
        match params_json.trim() {
            "" | "{}" => Ok(()),
            other => Err(format!("template-model takes no params, got {other}")),
        }
    }

    fn sample_period_ms() -> u64 {
        1000
    }

    fn tags(_seed: u64, first: u32, count: u32) -> Vec<TagInfo> {
        (first..first.saturating_add(count))
            .map(|t| TagInfo {
                index: t,
                kind: "sawtooth".into(),
                unit: "".into(),
                site: 0,
                equip: t / 10,
                label: format!("saw{}", t % 10),
                markers: vec!["point".into(), "sensor".into()],
            })
            .collect()
    }

    fn sample(seed: u64, first: u32, count: u32, sample: u64) -> Vec<f64> {
        (first..first.saturating_add(count)).map(|t| value(seed, t, sample)).collect()
    }

    fn series(seed: u64, tag: u32, start: u64, count: u32) -> Vec<f64> {
        (start..start + count as u64).map(|s| value(seed, tag, s)).collect()
    }
}

scalebench_plugin_sdk::export_value_model!(Sawtooth);
