//! Bad plugin: panics in sample
use scalebench_plugin_sdk::value_model::exports::scalebench::plugin::value_model::Guest;
use scalebench_plugin_sdk::value_model::scalebench::plugin::types::{PluginInfo, PluginKind, TagInfo};

struct Bad;

impl Guest for Bad {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "bad-trap".into(),
            version: "0.1.0".into(),
            abi: scalebench_plugin_sdk::ABI_VERSION.into(),
            kind: PluginKind::ValueModel,
            summary: "panics in sample".into(),
            params_schema: "{}".into(),
            default_params: "{}".into(),
        }
    }
    fn configure(_p: String) -> Result<(), String> { Ok(()) }
    fn sample_period_ms() -> u64 { 1000 }
    fn tags(_seed: u64, first: u32, count: u32) -> Vec<TagInfo> {
        (first..first + count)
            .map(|i| TagInfo { index: i, kind: "noise".into(), unit: "".into(), site: 0, equip: 0, label: format!("n{i}"), markers: vec!["point".into()] })
            .collect()
    }
    fn sample(seed: u64, first: u32, count: u32, sample: u64) -> Vec<f64> {
        if count > 0 { panic!("deliberate trap in sample (seed {seed}, first {first}, sample {sample})"); } Vec::new()
    }
    fn series(_seed: u64, _tag: u32, _start: u64, count: u32) -> Vec<f64> { vec![0.0; count as usize] }
}

scalebench_plugin_sdk::export_value_model!(Bad);
