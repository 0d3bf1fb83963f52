//! A million points and more: every per-point plugin call the host makes
//! (tags, addresses, topology, encode) passes 1.2M points through the real
//! built-in plugins without tripping a wasmtime limit, and a limit that is
//! hit is named with the flag that raises it, not blamed on the plugin.

use std::time::Duration;

use plugin_runtime::types::Readings;
use plugin_runtime::{Limits, PluginError, Runtime, TargetAdapter, ValueModel, POINTS_PER_CALL};

use crate::common::*;

const POINTS: u32 = 1_200_000;

fn production_runtime() -> Runtime {
    // The run's own defaults (`scalebench run` without plugin flags).
    Runtime::with_cache_dir(Limits::default(), Some(cache_dir())).unwrap()
}

fn drive(rt: &Runtime, model_name: &str, adapter_name: &str) {
    let mut model = ValueModel::instantiate(rt, &rt.load_bytes(model_name, builtin(model_name)).unwrap()).unwrap();
    model.configure("{}").unwrap();
    let tags = model.tags(7, 0, POINTS).unwrap_or_else(|e| panic!("{model_name} tags: {e}"));
    assert_eq!(tags.len(), POINTS as usize);
    assert_eq!(tags.last().unwrap().index, POINTS - 1);

    let plugin = rt.load_bytes(adapter_name, builtin(adapter_name)).unwrap();
    let mut adapter = TargetAdapter::instantiate(rt, &plugin, std::sync::Arc::new(plugin_runtime::NoServices)).unwrap();
    adapter.configure("{}").unwrap_or_else(|e| panic!("{adapter_name} configure: {e}"));
    let addresses = adapter.addresses(&tags).unwrap_or_else(|e| panic!("{adapter_name} addresses: {e}"));
    assert_eq!(addresses.len(), POINTS as usize);
    // Topology the way a step sends it: slice by slice.
    let mut messages = 0usize;
    for slice in tags.chunks(POINTS_PER_CALL) {
        messages += adapter.topology(slice).unwrap_or_else(|e| panic!("{adapter_name} topology: {e}")).len();
    }
    assert!(messages >= POINTS as usize, "{adapter_name}: {messages} topology messages for {POINTS} points");
    // One reading of every point, in the generator's batch sizes (a 1M-point
    // step at 5 s in 50 ms slots hands ~10k readings to encode at a time).
    let mut carried = 0u64;
    for first in (0..POINTS).step_by(10_000) {
        let n = 10_000.min(POINTS - first);
        let values = model.sample(7, first, n, 1).unwrap();
        let readings = Readings { points: (first..first + n).collect(), values, ts_ms: vec![1_700_000_000_000; n as usize] };
        let enc = adapter.encode(&readings).unwrap_or_else(|e| panic!("{adapter_name} encode at {first}: {e}"));
        carried += if enc.carries.is_empty() { enc.ends.len() as u64 } else { enc.carries.iter().map(|c| *c as u64).sum() };
    }
    assert_eq!(carried, POINTS as u64, "{adapter_name}: every reading encoded once");
}

#[test]
fn one_point_two_million_points_pass_through_tags_addresses_topology_and_encode() {
    let rt = production_runtime();
    drive(&rt, "plant-shaped", "baler");
    drive(&rt, "noise", "nats-jetstream");
}

#[test]
fn a_per_call_data_limit_that_is_hit_is_named_with_its_flag_not_called_a_plugin_bug() {
    // A limit far below one slice of tags (~16k records): the host's own
    // slicing cannot help, and the error must say which limit and how to raise it.
    let rt = Runtime::with_cache_dir(
        Limits { call_timeout: Duration::from_secs(30), memory_bytes: 1 << 30, call_data_bytes: 64 << 10 },
        Some(cache_dir()),
    )
    .unwrap();
    let mut model = ValueModel::instantiate(&rt, &rt.load_bytes("plant-shaped", builtin("plant-shaped")).unwrap()).unwrap();
    model.configure("{}").unwrap();
    let err = model.tags(7, 0, 100_000).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, PluginError::CallData { .. }), "{msg}");
    assert!(msg.contains("per-call data limit") && msg.contains("--plugin-call-data-mb"), "{msg}");
    assert!(!msg.contains("bug in the plugin"), "{msg}");
}
