//! `scalebench gen --bench`: the first rows of the stage table of the generator write-up this project started from for a
//! value model, measured through WebAssembly and, side by side, with the same
//! model code compiled natively (plant-core / noise), on one thread.
//!
//! Stages, each adding the next real cost:
//! 1. work out the values (`sample` for all tags, one instant per call);
//! 2. + serialise to JSON (the `{"point","ts_ms","value"}` line of each reading).
//!
//! Then what loading costs: compiling the component cold, loading it from the
//! compile cache, and instantiating it.

use std::time::{Duration, Instant};

use plugin_runtime::{Limits, Runtime, ValueModel};

use crate::bench_record::Figure;
use crate::catalog;
use crate::cli::{Format, GenArgs, PluginOptions, UsageError};
use crate::output::ReadingWriter;

/// The native twin of a built-in model.
enum Native {
    Plant(plant_core::Model, Vec<plant_core::TagShape>),
    Noise(noise::Noise),
}

impl Native {
    fn new(name: &str, params: &str, seed: u64, tags: u32) -> anyhow::Result<Option<Native>> {
        Ok(match name {
            "plant-shaped" => {
                let m = plant_core::Model::new(plant_core::Params::from_json(params).map_err(UsageError)?);
                let shapes = m.shapes(seed, 0, tags);
                Some(Native::Plant(m, shapes))
            }
            "noise" => {
                Some(Native::Noise(noise::Noise { params: noise::Params::from_json(params).map_err(UsageError)? }))
            }
            _ => None,
        })
    }

    fn sample_into(&self, seed: u64, tags: u32, s: u64, out: &mut Vec<f64>) {
        out.clear();
        match self {
            Native::Plant(m, shapes) => m.sample_into(shapes, s, out),
            Native::Noise(n) => n.sample_into(seed, 0, tags, s, out),
        }
    }
}

struct Rate {
    values_per_s: f64,
}

/// Best of `runs` timings of `f`, which produces `n` values per run.
fn best_of(runs: usize, n: u64, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<Rate> {
    f()?; // warm up: caches, page faults, first-call costs
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed());
    }
    Ok(Rate { values_per_s: n as f64 / best.as_secs_f64() })
}

fn fmt_rate(r: Option<&Rate>) -> String {
    match r {
        Some(r) => group(r.values_per_s as u64),
        None => "n/a".into(),
    }
}

pub use crate::format::group;

/// Pin this thread to one CPU so "one core" means one core.
fn pin_to_one_cpu() -> Option<usize> {
    // SAFETY: plain libc calls on a zeroed cpu_set_t owned by this frame.
    unsafe {
        let cpu = libc::sched_getcpu();
        if cpu < 0 {
            return None;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 {
            Some(cpu as usize)
        } else {
            None
        }
    }
}

/// Long on purpose: a benchmark's script: the plugin and the native code timed on the same points in one run, then both figures.
pub fn run(opts: &PluginOptions, args: &GenArgs) -> anyhow::Result<()> {
    let tags = args.tags.max(1);
    let samples = args.samples.clamp(1, 1_000_000);
    let seed = args.seed;
    let runs = 3;
    let cpu = pin_to_one_cpu();

    let mut model = crate::catalog::open_model(&opts.limits(), &args.model, &args.params)?;
    let native = Native::new(&args.model, &args.params, seed, tags)?;
    let ids = crate::catalog::point_ids(&mut model, seed, tags)?;
    let n = tags as u64 * samples;

    tracing::info!(
        "gen --bench: model {}, {} tags x {} samples = {} values per run, best of {runs}, one thread{}",
        args.model,
        group(tags as u64),
        group(samples),
        group(n),
        cpu.map(|c| format!(" pinned to CPU {c}")).unwrap_or_default()
    );

    // Stage 1: values.
    let wasm_values = best_of(runs, n, || {
        for s in 0..samples {
            let v = model.sample(seed, 0, tags, s)?;
            std::hint::black_box(&v);
        }
        Ok(())
    })?;
    let native_values = match &native {
        Some(nat) => {
            let mut buf = Vec::with_capacity(tags as usize);
            Some(best_of(runs, n, || {
                for s in 0..samples {
                    nat.sample_into(seed, tags, s, &mut buf);
                    std::hint::black_box(&buf);
                }
                Ok(())
            })?)
        }
        None => None,
    };

    // Stage 2: + JSON.
    let mut sink = ReadingWriter::new(std::io::sink(), Format::Jsonl)?;
    let mut json_bytes = 0usize;
    let wasm_json = best_of(runs, n, || {
        json_bytes = 0;
        for s in 0..samples {
            let v = model.sample(seed, 0, tags, s)?;
            sink.write_instant(&ids, args.start_ms + s as i64 * 1000, &v)?;
            json_bytes += sink.take_buffer_len();
        }
        Ok(())
    })?;
    let native_json = match &native {
        Some(nat) => {
            let mut buf = Vec::with_capacity(tags as usize);
            Some(best_of(runs, n, || {
                for s in 0..samples {
                    nat.sample_into(seed, tags, s, &mut buf);
                    sink.write_instant(&ids, args.start_ms + s as i64 * 1000, &buf)?;
                    sink.take_buffer_len();
                }
                Ok(())
            })?)
        }
        None => None,
    };

    let ratio = |w: &Rate, n: Option<&Rate>| {
        n.map(|n| format!("{:.2}", w.values_per_s / n.values_per_s)).unwrap_or("n/a".into())
    };
    println!("{:<28} {:>16} {:>16} {:>12}", "stage (values/s, one core)", "WebAssembly", "native", "wasm/native");
    println!(
        "{:<28} {:>16} {:>16} {:>12}",
        "work out the values",
        fmt_rate(Some(&wasm_values)),
        fmt_rate(native_values.as_ref()),
        ratio(&wasm_values, native_values.as_ref())
    );
    println!(
        "{:<28} {:>16} {:>16} {:>12}",
        "+ serialise to JSON",
        fmt_rate(Some(&wasm_json)),
        fmt_rate(native_json.as_ref()),
        ratio(&wasm_json, native_json.as_ref())
    );
    println!(
        "JSON: {:.1} MB per million readings. The generator write-up this project started from, one core: 3,164,557 values/s; + JSON 1,158,749/s.",
        json_bytes as f64 / n as f64
    );
    let stage = |name: &str, w: &Rate, nat: Option<&Rate>| {
        let f = Figure::new(name, w.values_per_s, "values/s");
        match nat {
            Some(nat) => f.vs("the same model compiled natively", nat.values_per_s),
            None => f,
        }
    };
    let mut figures = vec![
        stage("values through WebAssembly, one core", &wasm_values, native_values.as_ref()),
        stage("values + JSON through WebAssembly, one core", &wasm_json, native_json.as_ref()),
    ];

    // Loading.
    if let Some(bytes) =
        catalog::builtin_bytes(&args.model).map(|b| b.to_vec()).or_else(|| std::fs::read(&args.model).ok())
    {
        let dir = tempfile_dir()?;
        let limits = Limits {
            call_timeout: Duration::from_millis(opts.plugin_timeout_ms),
            memory_bytes: opts.plugin_memory_mb << 20,
            call_data_bytes: opts.plugin_call_data_mb << 20,
        };
        let rt = Runtime::with_cache_dir(limits, Some(dir.clone()))?;
        let t = Instant::now();
        let cold = rt.load_bytes(&args.model, &bytes)?;
        let cold_ms = t.elapsed().as_secs_f64() * 1e3;
        assert!(!cold.from_cache);
        let mut loads = Vec::new();
        let mut inst = Vec::new();
        for _ in 0..20 {
            let rt2 = Runtime::with_cache_dir(limits, Some(dir.clone()))?;
            let t = Instant::now();
            let p = rt2.load_bytes(&args.model, &bytes)?;
            loads.push(t.elapsed().as_secs_f64() * 1e3);
            if !p.from_cache {
                anyhow::bail!("the compile cache in {} was not used", dir.display());
            }
            let t = Instant::now();
            let m = ValueModel::instantiate(&rt2, &p)?;
            inst.push(t.elapsed().as_secs_f64() * 1e3);
            drop(m);
        }
        loads.sort_by(|a, b| a.partial_cmp(b).unwrap());
        inst.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "plugin load: compile (cold) {:.1} ms; from compile cache median {:.2} ms (max {:.2}, n=20); instantiate median {:.2} ms",
            cold_ms, loads[10], loads[19], inst[10]
        );
        figures.push(
            Figure::new("plugin load from the compile cache (median)", loads[10], "ms").vs("compile (cold)", cold_ms),
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    crate::bench_record::write(&args.record, "gen --bench", figures)?;
    Ok(())
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("scalebench-bench-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
