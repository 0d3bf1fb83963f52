//! The value models: determinism, the two access paths agreeing bit for bit,
//! WebAssembly agreeing with native, and the shape of each kind of point.

use plugin_runtime::ValueModel;

use crate::common::*;

fn model(name: &str, params: &str) -> ValueModel {
    let rt = runtime();
    let p = rt.load_bytes(name, builtin(name)).unwrap();
    // The runtime can be dropped: the instance keeps the engine alive.
    let mut m = ValueModel::instantiate(&rt, &p).unwrap();
    m.configure(params).unwrap();
    m
}

/// Series of every tag of `kind` among the first `tags`, `samples` long.
fn series_of(m: &mut ValueModel, kind: &str, tags: u32, samples: u32) -> Vec<(u32, u32, Vec<f64>)> {
    let infos = m.tags(1, 0, tags).unwrap();
    infos
        .iter()
        .filter(|t| t.kind == kind)
        .map(|t| (t.index, t.equip, m.series(1, t.index, 0, samples).unwrap()))
        .collect()
}

#[test]
fn sample_and_series_give_the_same_bits() {
    for name in ["plant-shaped", "noise"] {
        let mut m = model(name, "{}");
        let (tags, samples) = (120u32, 300u32);
        let by_instant: Vec<Vec<f64>> = (0..samples as u64).map(|s| m.sample(9, 0, tags, s).unwrap()).collect();
        for tag in 0..tags {
            let series = m.series(9, tag, 0, samples).unwrap();
            for s in 0..samples as usize {
                assert_eq!(series[s].to_bits(), by_instant[s][tag as usize].to_bits(), "{name} tag {tag} sample {s}");
            }
        }
        // An offset window of tags agrees with the full one.
        let part = m.sample(9, 50, 20, 77).unwrap();
        assert_eq!(part, by_instant[77][50..70].to_vec());
    }
}

#[test]
fn webassembly_and_native_builds_agree_bit_for_bit() {
    let mut m = model("plant-shaped", "{}");
    let native = plant_core::Model::new(plant_core::Params::default());
    for s in [0u64, 1, 3_600, 86_399, 1_000_000] {
        let w = m.sample(42, 0, 500, s).unwrap();
        let n = native.sample(42, 0, 500, s);
        assert!(w.iter().zip(&n).all(|(a, b)| a.to_bits() == b.to_bits()), "sample {s} differs");
    }
}

#[test]
fn same_seed_same_values_other_seed_other_values() {
    let mut a = model("plant-shaped", "{}");
    let mut b = model("plant-shaped", "{}");
    assert_eq!(a.sample(5, 0, 1000, 17).unwrap(), b.sample(5, 0, 1000, 17).unwrap());
    assert_ne!(a.sample(5, 0, 1000, 17).unwrap(), a.sample(6, 0, 1000, 17).unwrap());
}

#[test]
fn the_mix_is_mostly_slow_analogue_values() {
    let mut m = model("plant-shaped", "{}");
    let tags = m.tags(1, 0, 1000).unwrap();
    let temps = tags.iter().filter(|t| t.kind == "temperature").count();
    assert_eq!(temps, 500);
    for k in ["flow", "pressure", "vibration", "counter", "state"] {
        assert_eq!(tags.iter().filter(|t| t.kind == k).count(), 100, "{k}");
    }
    assert!(tags.iter().all(|t| !t.unit.is_empty() || t.kind == "state"));
    let mut m = model("plant-shaped", r#"{"mix":{"counter":1}}"#);
    assert!(m.tags(1, 0, 50).unwrap().iter().all(|t| t.kind == "counter"));
}

#[test]
fn counters_never_decrease() {
    let mut m = model("plant-shaped", r#"{"sample_period_ms":1000}"#);
    let all = series_of(&mut m, "counter", 400, 20_000);
    assert!(all.len() >= 30);
    for (tag, _, s) in all {
        assert!(s.windows(2).all(|w| w[1] >= w[0]), "counter {tag} decreased");
        assert!(s.last().unwrap() > s.first().unwrap(), "counter {tag} never counted");
        let steps: std::collections::BTreeSet<u64> =
            s.windows(2).map(|w| (w[1] - w[0]) as u64).filter(|d| *d > 0).collect();
        assert_eq!(steps.len(), 1, "counter {tag} should step by a constant, saw {steps:?}");
    }
}

#[test]
fn states_are_discrete_and_hold_for_hours() {
    // One sample a minute for 4 days.
    let mut m = model("plant-shaped", r#"{"sample_period_ms":60000}"#);
    for (tag, _, s) in series_of(&mut m, "state", 400, 4 * 1440) {
        assert!(s.iter().all(|v| v.fract() == 0.0 && *v >= 0.0 && *v < 5.0), "state {tag} not discrete");
        // Change points; every run between two changes lasts at least 2 h.
        let changes: Vec<usize> = (1..s.len()).filter(|&i| s[i] != s[i - 1]).collect();
        for w in changes.windows(2) {
            assert!(w[1] - w[0] >= 120, "state {tag} held only {} min", w[1] - w[0]);
        }
        assert!(changes.len() <= 4 * 12, "state {tag} changed {} times in 4 days", changes.len());
    }
}

#[test]
fn flow_is_bimodal_and_pressure_tracks_it() {
    // One sample a minute for 2 days.
    let mut m = model("plant-shaped", r#"{"sample_period_ms":60000}"#);
    let flows = series_of(&mut m, "flow", 1000, 2 * 1440);
    let pressures = series_of(&mut m, "pressure", 1000, 2 * 1440);
    let mut zero_fraction = Vec::new();
    for (tag, _, s) in &flows {
        let distinct: std::collections::BTreeSet<u64> = s.iter().map(|v| v.to_bits()).collect();
        assert!(distinct.len() <= 2, "flow {tag} has {} levels", distinct.len());
        assert!(distinct.contains(&0f64.to_bits()), "flow {tag} never stops");
        zero_fraction.push(s.iter().filter(|v| **v == 0.0).count() as f64 / s.len() as f64);
    }
    let running = zero_fraction.iter().filter(|z| **z < 1.0).count();
    assert!(running as f64 > 0.9 * flows.len() as f64, "most pumps run at some point");
    let mean_zero = zero_fraction.iter().sum::<f64>() / zero_fraction.len() as f64;
    assert!((0.2..0.8).contains(&mean_zero), "pumps off {mean_zero:.2} of the time");

    let mut checked = 0;
    for (_, equip, p) in &pressures {
        let (_, _, f) = flows.iter().find(|(_, e, _)| e == equip).expect("pressure has a flow in its equip");
        if f.iter().all(|v| *v == f[0]) {
            continue;
        }
        let r = correlation(f, p);
        assert!(r > 0.95, "equip {equip}: pressure/flow correlation {r:.3}");
        checked += 1;
    }
    assert!(checked > 50);
}

#[test]
fn vibration_creeps_on_about_one_asset_in_23() {
    // One sample every 10 minutes for 10 days, 2,300 equips.
    let mut m = model("plant-shaped", r#"{"sample_period_ms":600000}"#);
    let day = 144usize;
    let all = series_of(&mut m, "vibration", 23_000, 10 * day as u32);
    assert_eq!(all.len(), 2300);
    let mut creeping = 0;
    let mut total_spikes = 0;
    for (_, _, s) in &all {
        let first = median(&s[..day]);
        let last = median(&s[s.len() - day..]);
        if last - first > 0.5 {
            creeping += 1;
        } else {
            assert!((last - first).abs() < 0.2, "a quiet asset should stay quiet: {first} -> {last}");
            // Spikes: occasional, well above the quiet level.
            let spikes = s.iter().filter(|v| **v > 3.0 * first).count();
            assert!(spikes < s.len() / 50, "{spikes} spikes in {} samples", s.len());
            total_spikes += spikes;
        }
    }
    assert!(total_spikes > 0, "no asset ever spikes");
    let expected = 2300.0 / 23.0;
    assert!(
        (creeping as f64 - expected).abs() < 0.35 * expected,
        "{creeping} of 2300 creep, expected about {expected}"
    );
}

#[test]
fn temperatures_drift_cycle_daily_and_step_at_shift_change() {
    let mut m = model("plant-shaped", r#"{"sample_period_ms":60000}"#);
    for (tag, _, s) in series_of(&mut m, "temperature", 200, 3 * 1440) {
        assert!(s.iter().all(|v| (v * 10.0).round() == v * 10.0 || ((v * 10.0).round() - v * 10.0).abs() < 1e-6));
        // Slow: a minute-to-minute change is small, except at a shift change.
        let big: Vec<usize> = (1..s.len()).filter(|&i| (s[i] - s[i - 1]).abs() > 0.25).collect();
        let shift_minutes = [6 * 60, 14 * 60, 22 * 60];
        assert!(
            big.iter().all(|i| shift_minutes.contains(&(i % 1440))),
            "tag {tag} jumps away from shift changes at {big:?}"
        );
        let range = s.iter().cloned().fold(f64::MIN, f64::max) - s.iter().cloned().fold(f64::MAX, f64::min);
        assert!(range > 0.5, "tag {tag} never moves");
    }
}

#[test]
fn plant_data_repeats_where_noise_does_not() {
    // What makes plant data compress: neighbouring samples are often equal.
    let repeats = |name: &str| {
        let mut m = model(name, "{}");
        let a = m.sample(3, 0, 10_000, 1000).unwrap();
        let b = m.sample(3, 0, 10_000, 1001).unwrap();
        a.iter().zip(&b).filter(|(x, y)| x == y).count() as f64 / a.len() as f64
    };
    let plant = repeats("plant-shaped");
    let noise = repeats("noise");
    assert!(plant > 0.4, "plant-shaped repeats {plant:.2}");
    assert!(noise < 0.01, "noise repeats {noise:.2}");
}

#[test]
fn noise_is_uniform() {
    let mut m = model("noise", r#"{"low":0,"high":100}"#);
    let mut bins = [0u64; 10];
    let mut n = 0u64;
    for s in 0..20u64 {
        for v in m.sample(11, 0, 5000, s).unwrap() {
            assert!((0.0..100.0).contains(&v));
            bins[(v / 10.0) as usize] += 1;
            n += 1;
        }
    }
    let expected = n as f64 / 10.0;
    let chi2: f64 = bins.iter().map(|&o| (o as f64 - expected).powi(2) / expected).sum();
    // 9 degrees of freedom: 27.9 is the 0.1% critical value.
    assert!(chi2 < 27.9, "chi-square {chi2:.1}, bins {bins:?}");
}

#[test]
fn bad_params_are_refused_with_the_field_named() {
    let rt = runtime();
    let p = rt.load_bytes("plant-shaped", builtin("plant-shaped")).unwrap();
    let mut m = ValueModel::instantiate(&rt, &p).unwrap();
    let e = m.configure(r#"{"mixx": {}}"#).unwrap_err().to_string();
    assert!(e.contains("unknown field `mixx`"), "{e}");
    let e = m.configure(r#"{"sample_period_ms": 0}"#).unwrap_err().to_string();
    assert!(e.contains("sample_period_ms"), "{e}");
    let e = m.configure(r#"{"mix": {"flow": 0}}"#).unwrap_err().to_string();
    assert!(e.contains("no positive weight"), "{e}");
    // The instance is still usable after a refused configure.
    m.configure("{}").unwrap();
    assert_eq!(m.sample(1, 0, 3, 0).unwrap().len(), 3);
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va.sqrt() * vb.sqrt())
}

#[test]
fn plant_shaped_data_compresses_several_times_better_than_noise() {
    // A TimescaleDB measurement of 10 M readings: 1.69 vs 8.57 bytes per reading in TimescaleDB; a storage
    // estimate from noise is ~5x off. Gorilla/delta-of-delta bit counts.
    let opts = scalebench::cli::PluginOptions {
        plugin_timeout_ms: 30_000,
        plugin_memory_mb: 1024,
        plugin_call_data_mb: 128,
        cache_dir: Some(cache_dir()),
    };
    let (plant, kinds) =
        scalebench::commands::gen_compression::measure(&opts, "plant-shaped", "{}", 200, 5_000, 1).unwrap();
    let (noise, _) = scalebench::commands::gen_compression::measure(&opts, "noise", "{}", 200, 5_000, 1).unwrap();
    assert!(plant < 3.0, "plant-shaped {plant:.2} B/reading");
    assert!(noise > 6.0, "noise {noise:.2} B/reading");
    assert!(noise / plant > 3.0, "noise/plant {:.1}", noise / plant);
    // Held values (state, flow) cost well under a byte.
    for (k, b) in kinds {
        if k == "state" || k == "flow" {
            assert!(b < 1.0, "{k} {b:.2}");
        }
    }
}
