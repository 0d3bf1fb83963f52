//! `scalebench storage`: bytes per reading in real stores, each model on the
//! same points and samples, beside the TimescaleDB measurement of 10 M
//! readings made elsewhere. See `storage_cost` and docs/storage.md.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context as _;

use super::usage;
use crate::cli::{PluginOptions, StorageArgs};
use crate::storage_cost::{self, Readings, StoreResult};

/// The readings of `model` over the window, point keys from the adapter when there is one.
fn generate(
    opts: &PluginOptions,
    model: &str,
    points: u32,
    start_ms: i64,
    interval_ms: u64,
    intervals: usize,
    seed: u64,
    target: Option<(&str, &str)>,
) -> anyhow::Result<Readings> {
    let mut m = crate::catalog::open_model(&opts.limits(), model, "{}")?;
    let period = m.sample_period_ms()?.max(1);
    let tags = m.tags(seed, 0, points)?;
    let keys = match target {
        Some((t, params)) => {
            let rt = crate::catalog::runtime(&opts.limits())?;
            let mut a = plugin_runtime::TargetAdapter::instantiate(
                &rt,
                &crate::catalog::load(&rt, t)?,
                Arc::new(plugin_runtime::NoServices),
            )?;
            a.configure(params).map_err(super::gen::user_error)?;
            let keys = a.point_keys(&tags)?;
            if keys.len() == tags.len() {
                keys
            } else {
                tags.iter().map(|t| format!("s{}/e{}/{}", t.site, t.equip, t.label)).collect()
            }
        }
        None => tags.iter().map(|t| format!("s{}/e{}/{}", t.site, t.equip, t.label)).collect(),
    };
    let n = points as usize;
    let mut values = vec![0.0; n * intervals];
    for k in 0..intervals {
        let t = start_ms + (k as u64 * interval_ms) as i64;
        let v = m.sample(seed, 0, points, t as u64 / period)?;
        for (p, x) in v.into_iter().enumerate() {
            values[p * intervals + k] = x;
        }
    }
    Ok(Readings { model: model.to_string(), keys, start_ms, interval_ms, intervals, values })
}

/// The target's own storage for one model: a fresh local stack, prefill, the adapter's stats.
fn measure_target(
    opts: &PluginOptions,
    args: &StorageArgs,
    model: &str,
    points: u32,
    end_ms: i64,
    interval_ms: u64,
    intervals: u64,
    dir: &std::path::Path,
    port: u16,
) -> anyhow::Result<(u64, u64, Vec<(String, u64)>)> {
    let tokio_rt = crate::async_runtime::two_threads()?;
    let stack = tokio_rt.block_on(crate::prefill::operation::start_local(dir, port))?;
    let conn = stack.postgres_conn();
    let measured = (|| -> anyhow::Result<(u64, u64, Vec<(String, u64)>)> {
        let mut spec = crate::prefill::operation::spec(
            model,
            "{}",
            &args.target,
            &args.target_params,
            points,
            intervals as f64 * interval_ms as f64 / 86_400_000.0,
            interval_ms,
            args.seed,
        );
        spec.end_ms = Some(end_ms);
        let (dest, services) = crate::prefill::operation::destination(
            [("postgres".to_string(), conn.clone())].into_iter().collect(),
            Default::default(),
            dir,
        )?;
        let r = crate::prefill::operation::prefill_with(
            &opts.limits(),
            &spec,
            &args.target_params,
            &dest,
            &services,
            Arc::new(AtomicBool::new(false)),
        )?;
        let rt = crate::catalog::runtime(&opts.limits())?;
        let mut a = plugin_runtime::TargetAdapter::instantiate(
            &rt,
            &crate::catalog::load(&rt, &args.target)?,
            crate::services::Scoped::shared(&services, "adapter"),
        )?;
        a.configure(&args.target_params).map_err(super::gen::user_error)?;
        let stats = a.stats().map_err(|e| anyhow::anyhow!("{e}"))?;
        let get = |name: &str| stats.iter().find(|s| s.name == name).and_then(|s| s.number).map(|x| x as u64);
        let total =
            get("db.table_bytes").ok_or_else(|| anyhow::anyhow!("target {} reports no db.table_bytes", args.target))?;
        let mut parts = Vec::new();
        if let (Some(h), Some(i)) = (get("db.heap_bytes"), get("db.index_bytes")) {
            parts.push(("heap".to_string(), h));
            parts.push(("indexes".to_string(), i));
        }
        let rows = r.rows_before + r.rows_added + r.rows_already_stored;
        Ok((rows, total, parts))
    })();
    stack.stop();
    measured
}

/// Long on purpose: a benchmark's script: each storage format written from the same values, then the table, in the order they run.
pub fn run(opts: &PluginOptions, args: StorageArgs) -> anyhow::Result<()> {
    let models: Vec<String> = args.models.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    if models.len() < 2 {
        return Err(usage("--models needs at least two models to compare, e.g. plant-shaped,noise".into()));
    }
    let points = args.points as u32;
    let interval_ms = args.interval.as_millis() as u64;
    if interval_ms == 0 || args.hours.is_nan() || args.hours <= 0.0 {
        return Err(usage("--interval and --hours must be above zero".into()));
    }
    let intervals = ((args.hours * 3_600_000.0) / interval_ms as f64).round().max(2.0) as u64;
    let readings_per_model = intervals * points as u64;
    if readings_per_model > 200_000_000 {
        return Err(usage(format!("{readings_per_model} readings per model is more than this command holds in memory (200 M)\nhint: fewer --points or --hours, or a longer --interval")));
    }
    let target = match args.target.as_str() {
        "none" => None,
        t => Some((t, args.target_params.as_str())),
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis() as i64;
    let end_ms = now.div_euclid(interval_ms as i64) * interval_ms as i64;
    let start_ms = end_ms - (intervals * interval_ms) as i64;

    let (work, _guard) = match &args.work_dir {
        Some(d) => {
            let sub = d.join(format!("scalebench-storage-{}", crate::results::run_id_now()));
            std::fs::create_dir_all(&sub).with_context(|| format!("cannot create {}", sub.display()))?;
            (sub, None)
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("scalebench-storage")
                .tempdir_in("/var/tmp")
                .or_else(|_| tempfile::tempdir())?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    tracing::info!(
        "storage: {} points x {} intervals of {} s = {} readings per model, models {}",
        points,
        intervals,
        interval_ms as f64 / 1000.0,
        readings_per_model,
        models.join(", ")
    );

    let mut pq = StoreResult::new(
        "parquet-zstd",
        "Parquet, zstd level 3, default encodings (dictionary, then plain), rows ordered by point then time",
    );
    let mut pq_split = StoreResult::new(
        "parquet-zstd-split",
        "Parquet, zstd level 3, values in BYTE_STREAM_SPLIT (the float encoding), ordered by point then time",
    );
    let mut ts = StoreResult::new("tsink", "tsink 0.10, an embedded time-series store: one series per point, XOR/delta encoded chunks, zstd; WAL off, bytes on disk after close");
    let mut pg = target.map(|(t, _)| {
        StoreResult::new(
            &format!("postgresql ({t})"),
            "the target's own table after prefill: heap + indexes (pg_total_relation_size), no compression of values",
        )
    });
    for (i, model) in models.iter().enumerate() {
        tracing::info!("storage: {model}: generating");
        let r = generate(opts, model, points, start_ms, interval_ms, intervals as usize, args.seed, target)?;
        let n = r.len();
        let run = |s: &mut StoreResult, f: &dyn Fn() -> anyhow::Result<u64>| match f() {
            Ok(b) => s.push(model, n, b, Vec::new()),
            Err(e) => s.error = Some(format!("{model}: {e:#}")),
        };
        tracing::info!("storage: {model}: parquet");
        run(&mut pq, &|| storage_cost::write_parquet(&r, &work.join(format!("{model}.parquet")), false));
        run(&mut pq_split, &|| storage_cost::write_parquet(&r, &work.join(format!("{model}-split.parquet")), true));
        tracing::info!("storage: {model}: tsink");
        run(&mut ts, &|| storage_cost::write_tsink(&r, &work.join(format!("{model}-tsink"))));
        drop(r);
        if let Some(pg) = pg.as_mut() {
            tracing::info!("storage: {model}: {} through prefill into a fresh local stack", args.target);
            let dir = work.join(format!("{model}-stack"));
            match measure_target(
                opts,
                &args,
                model,
                points,
                end_ms,
                interval_ms,
                intervals,
                &dir,
                args.base_port + 2 * i as u16,
            ) {
                Ok((rows, bytes, parts)) => pg.push(model, rows, bytes, parts),
                Err(e) => pg.error = Some(format!("{model}: {e:#}")),
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let mut stores: Vec<StoreResult> = pg.into_iter().chain([pq, pq_split, ts]).collect();
    for s in &mut stores {
        s.finish();
    }

    // The view: one line per store and model.
    println!("{:<26} {:<14} {:>14} {:>12} {:>14}", "store", "model", "bytes", "B/reading", "ratio");
    for s in &stores {
        for (j, m) in s.models.iter().enumerate() {
            let ratio = if j == 0 {
                String::new()
            } else {
                s.ratio_to_first.get(j - 1).map(|(_, r)| format!("{r:.1}x")).unwrap_or_default()
            };
            println!("{:<26} {:<14} {:>14} {:>12.2} {:>14}", s.store, m.model, m.bytes, m.bytes_per_reading, ratio);
            for (part, b) in &m.parts {
                println!(
                    "{:<26} {:<14} {:>14} {:>12.2}",
                    format!("  {part}"),
                    "",
                    b,
                    *b as f64 / m.readings.max(1) as f64
                );
            }
        }
        if let Some(e) = &s.error {
            println!("{:<26} not measured: {e}", s.store);
        }
    }
    println!("ratio: bytes per reading of {} / {}", models[1..].join(", "), models[0]);
    println!("reference, {}", storage_cost::REFERENCE);

    std::fs::create_dir_all(&args.results_dir)
        .with_context(|| format!("cannot create {}", args.results_dir.display()))?;
    let path: PathBuf = args
        .results_dir
        .join(format!("{}-storage.json", crate::results::fresh_run_id(&args.results_dir, "-storage.json")));
    let mut reference = BTreeMap::new();
    reference.insert(
        "source",
        serde_json::json!("a TimescaleDB measurement of 10 M readings, made elsewhere (not on this machine)"),
    );
    reference.insert("plant_shaped_bytes_per_reading", serde_json::json!(1.69));
    reference.insert("noise_bytes_per_reading", serde_json::json!(8.57));
    reference.insert("plant_shaped_compression_x", serde_json::json!(43.0));
    reference.insert("noise_compression_x", serde_json::json!(8.5));
    let json = serde_json::json!({
        "schema_version": 1,
        "command_line": std::env::args().collect::<Vec<_>>(),
        "hardware": crate::results::Hardware::describe(&args.results_dir),
        "points": points,
        "hours": args.hours,
        "interval_s": interval_ms as f64 / 1000.0,
        "readings_per_model": readings_per_model,
        "models": models,
        "stores": stores,
        "reference_measured_elsewhere": reference,
    });
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    tracing::info!("results: {}", path.display());
    Ok(())
}
