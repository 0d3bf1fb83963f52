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
        let readings =
            Readings { points: (first..first + n).collect(), values, ts_ms: vec![1_700_000_000_000; n as usize] };
        let enc = adapter.encode(&readings).unwrap_or_else(|e| panic!("{adapter_name} encode at {first}: {e}"));
        carried +=
            if enc.carries.is_empty() { enc.ends.len() as u64 } else { enc.carries.iter().map(|c| *c as u64).sum() };
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
    let mut model =
        ValueModel::instantiate(&rt, &rt.load_bytes("plant-shaped", builtin("plant-shaped")).unwrap()).unwrap();
    model.configure("{}").unwrap();
    let err = model.tags(7, 0, 100_000).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, PluginError::CallData { .. }), "{msg}");
    assert!(msg.contains("per-call data limit") && msg.contains("--plugin-call-data-mb"), "{msg}");
    assert!(!msg.contains("bug in the plugin"), "{msg}");
}

#[test]
fn a_broker_frozen_under_500k_points_grows_behind_schedule_not_the_generators_memory() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("gen.json");
    let out = scalebench(&[
        "bench",
        "generator",
        "--points",
        "500k",
        "--interval",
        "5s",
        "--seconds",
        "12",
        "--stall",
        "6s",
        "--no-baseline",
        "--json",
        json.to_str().unwrap(),
        "--record",
        dir.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let arms: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let stalled = arms.as_array().unwrap().iter().find(|a| !a["stalled_s"].is_null()).expect("a stalled arm");
    let (peak, bound) = (stalled["peak_rss_bytes"].as_u64().unwrap(), stalled["rss_bound_bytes"].as_u64().unwrap());
    // The generator waited while the broker was frozen: that is behind schedule...
    assert!(stalled["behind_max_s"].as_f64().unwrap() >= 4.0, "{stalled}");
    // ...and not memory: the 600k readings the schedule held during the
    // freeze (~120 MB as messages) were never buffered.
    assert!(peak <= bound, "peak RSS {} MB over the bound {} MB: {stalled}", peak >> 20, bound >> 20);
    assert!(stalled["queue_bound_bytes"].as_u64().unwrap() < 64 << 20, "{stalled}");
}

#[test]
fn a_million_point_step_runs_to_a_verdict_that_says_why() {
    // This 2-core machine cannot take 200,000 readings/s through mosquitto,
    // the historian and PostgreSQL at once: the step is not expected to
    // pass. It must run, measure and say why, with the generator's memory
    // measured per point.
    let run = crate::ladder::run_ladder(&[
        "--steps",
        "1m",
        "--interval",
        "5s",
        "--warmup",
        "5s",
        "--soak",
        "15s",
        "--sample-every",
        "5s",
        // The stack cannot keep up: what it has not acknowledged 10 s
        // after the load is unknown, which is all the test needs to see.
        "--drain-timeout",
        "10s",
        "--connections",
        "4",
    ]);
    let r = run.result();
    let s = crate::ladder::step0(&r);
    assert_eq!(s["points"], 1_000_000, "{}", stderr(&run.out));
    assert_eq!(s["topology"]["new_points"], 1_000_000, "{}", s["topology"]);
    let g = &s["generator"];
    // Every point is scheduled every 5 s over warmup and soak (20 s): four
    // readings each. How many of them this machine's stack lets through is
    // what the step measures, not what the test may assume (one CI machine
    // offered 0.92M while mosquitto and PostgreSQL held it back), but every
    // scheduled reading is accounted for: offered, or not offered by the end.
    let (scheduled, offered, not_offered) =
        (g["scheduled"].as_u64().unwrap(), g["offered"].as_u64().unwrap(), g["not_offered"].as_u64().unwrap());
    assert_eq!(scheduled, 4_000_000, "{g}");
    assert_eq!(offered + not_offered, scheduled, "{g}");
    assert!(offered > 0, "{g}");
    assert!(s["ingest"]["acked"].as_u64().unwrap() > 0, "{}", s["ingest"]);
    let status = s["status"].as_str().unwrap();
    assert!(["pass", "fail", "inconclusive"].contains(&status), "{status}");
    if status != "pass" {
        assert!(
            !s["reasons"].as_array().unwrap().is_empty() || !s["unmeasured"].as_array().unwrap().is_empty(),
            "a step that did not pass must say why: {s}"
        );
    }
    // A step whose readings were not all offered cannot pass, and says so.
    if not_offered > 0 {
        assert_ne!(status, "pass", "{s}");
        let reasons = s["reasons"].to_string() + &s["unmeasured"].to_string();
        assert!(reasons.contains("not offered") || reasons.contains("generator offered"), "{reasons}");
    }
    // Memory per point is measured, not guessed: tables and every instance.
    let mem = g["memory_bytes"].as_object().unwrap();
    for part in ["point table", "address table", "model", "encoder", "counter"] {
        assert!(mem.get(part).and_then(|v| v.as_u64()).is_some_and(|b| b > 0), "{part} missing: {mem:?}");
    }
    let per_point = g["memory_bytes_per_point"].as_f64().unwrap();
    eprintln!(
        "generator memory at 1M points: {per_point:.0} bytes per point ({mem:?}), peak RSS {} MB",
        g["rss_peak_bytes"].as_u64().unwrap() >> 20
    );
    assert!(per_point < 1000.0, "{per_point} bytes per point: {mem:?}");
}
