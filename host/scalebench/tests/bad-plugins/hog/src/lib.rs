//! Bad plugin: grows memory without bound in sample
use scalebench_plugin_sdk::value_model::exports::scalebench::plugin::value_model::Guest;
use scalebench_plugin_sdk::value_model::scalebench::plugin::types::{PluginInfo, PluginKind, TagInfo};

struct Bad;

impl Guest for Bad {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "bad-hog".into(),
            version: "0.1.0".into(),
            abi: scalebench_plugin_sdk::ABI_VERSION.into(),
            kind: PluginKind::ValueModel,
            summary: "grows memory without bound in sample".into(),
            params_schema: "{}".into(),
            default_params: "{}".into(),
        }
    }
    fn configure(_p: String) -> Result<(), String> { Ok(()) }
    fn sample_period_ms() -> u64 { 1000 }
    fn tags(_seed: u64, _first: u32, _count: u32) -> Vec<TagInfo> { Vec::new() }
    fn sample(seed: u64, first: u32, count: u32, sample: u64) -> Vec<f64> {
        let mut hoard: Vec<Vec<u8>> = Vec::new(); loop { let mut chunk = vec![0u8; 16 << 20]; chunk[0] = (seed ^ first as u64 ^ sample) as u8; hoard.push(chunk); if hoard.len() == usize::MAX { return vec![count as f64]; } }
    }
    fn series(_seed: u64, _tag: u32, _start: u64, count: u32) -> Vec<f64> { vec![0.0; count as usize] }
}

scalebench_plugin_sdk::export_value_model!(Bad);
