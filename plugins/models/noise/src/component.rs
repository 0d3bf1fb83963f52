//! The WebAssembly export of the model (world `value-model-plugin`).

use std::cell::RefCell;

use scalebench_plugin_sdk::value_model::exports::scalebench::plugin::value_model::Guest;
use scalebench_plugin_sdk::value_model::scalebench::plugin::types::{PluginInfo, PluginKind, TagInfo};

use crate::{Noise, Params};

thread_local! {
    static STATE: RefCell<Noise> = RefCell::new(Noise { params: Params::default() });
}

struct NoiseModel;

impl Guest for NoiseModel {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "noise".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: scalebench_plugin_sdk::ABI_VERSION.into(),
            kind: PluginKind::ValueModel,
            summary: "uniform random values: what a quick generator emits, for comparison".into(),
            params_schema: crate::SCHEMA.into(),
            default_params: crate::DEFAULT_JSON.into(),
        }
    }

    fn configure(params_json: String) -> Result<(), String> {
        let p = Params::from_json(&params_json)?;
        STATE.with(|s| s.borrow_mut().params = p);
        Ok(())
    }

    fn sample_period_ms() -> u64 {
        STATE.with(|s| s.borrow().params.sample_period_ms)
    }

    fn tags(_seed: u64, first: u32, count: u32) -> Vec<TagInfo> {
        STATE.with(|s| {
            let layout = s.borrow().params.layout();
            (first..first.saturating_add(count))
                .map(|t| {
                    let m = layout.meta(t);
                    TagInfo {
                        index: m.index,
                        kind: m.kind.name().into(),
                        unit: m.kind.unit().into(),
                        site: m.site,
                        equip: m.equip,
                        label: m.label,
                        markers: m.kind.markers().iter().map(|x| x.to_string()).collect(),
                    }
                })
                .collect()
        })
    }

    fn sample(seed: u64, first: u32, count: u32, sample: u64) -> Vec<f64> {
        STATE.with(|s| s.borrow().sample(seed, first, count, sample))
    }

    fn series(seed: u64, tag: u32, start: u64, count: u32) -> Vec<f64> {
        STATE.with(|s| s.borrow().series(seed, tag, start, count))
    }
}

scalebench_plugin_sdk::export_value_model!(NoiseModel);
