//! The `plant-shaped` value model as a component (world `value-model-plugin`).
//! The model itself lives in `plant-core`, which the host also compiles
//! natively as the baseline of `scalebench gen --bench`.

use std::cell::RefCell;

use scalebench_plugin_sdk::value_model::exports::scalebench::plugin::value_model::Guest;
use scalebench_plugin_sdk::value_model::scalebench::plugin::types::{PluginInfo, PluginKind, TagInfo};

use plant_core::{params, Model, Params, TagShape};

struct State {
    model: Model,
    /// Shapes of the last (seed, first, count) asked for by `sample`: a load
    /// generator asks for the same tags at every instant. A cache, not state:
    /// results are the same with or without it.
    cache: Option<(u64, u32, u32, Vec<TagShape>)>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State { model: Model::new(Params::default()), cache: None });
}

struct PlantShaped;

impl Guest for PlantShaped {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "plant-shaped".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: scalebench_plugin_sdk::ABI_VERSION.into(),
            kind: PluginKind::ValueModel,
            summary: "readings shaped like a plant's: drifting temperatures, pumps, counters, states".into(),
            params_schema: params::SCHEMA.into(),
            default_params: params::DEFAULT_JSON.into(),
        }
    }

    fn configure(params_json: String) -> Result<(), String> {
        let p = Params::from_json(&params_json)?;
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            s.model = Model::new(p);
            s.cache = None;
        });
        Ok(())
    }

    fn sample_period_ms() -> u64 {
        STATE.with(|s| s.borrow().model.params.sample_period_ms)
    }

    fn tags(seed: u64, first: u32, count: u32) -> Vec<TagInfo> {
        let _ = seed; // the layout does not depend on the seed
        STATE.with(|s| {
            let s = s.borrow();
            (first..first.saturating_add(count))
                .map(|t| {
                    let m = s.model.layout.meta(t);
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
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            let hit = matches!(&s.cache, Some((k, f, c, _)) if *k == seed && *f == first && *c == count);
            if !hit {
                let shapes = s.model.shapes(seed, first, count);
                s.cache = Some((seed, first, count, shapes));
            }
            let State { model, cache } = &*s;
            let mut out = Vec::new();
            model.sample_into(&cache.as_ref().unwrap().3, sample, &mut out);
            out
        })
    }

    fn series(seed: u64, tag: u32, start: u64, count: u32) -> Vec<f64> {
        STATE.with(|s| s.borrow().model.series(seed, tag, start, count))
    }
}

scalebench_plugin_sdk::export_value_model!(PlantShaped);
