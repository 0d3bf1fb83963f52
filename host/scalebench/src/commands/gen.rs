//! `scalebench gen`: readings from a value model, as CSV or JSON lines.
//! Values are asked for many tags at a time (one call per instant and chunk
//! of tags), the way the load generator asks for them.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Context;
use plugin_runtime::ValueModel;

use crate::cli::{GenArgs, PluginOptions, UsageError};
use crate::output::ReadingWriter;

/// Tags per call into the model: bounds memory at 1M+ tags.
const CHUNK: u32 = 65_536;

pub use crate::catalog::user_error;

pub fn run(opts: &PluginOptions, args: GenArgs) -> anyhow::Result<()> {
    if args.bench {
        return super::gen_bench::run(opts, &args);
    }
    if args.compression {
        return super::gen_compression::run(opts, &args);
    }
    if args.tags == 0 {
        return Err(UsageError("--tags must be at least 1".into()).into());
    }
    let mut model = crate::catalog::open_model(&opts.limits(), &args.model, &args.params)?;
    let period_ms = model.sample_period_ms()? as i64;
    let ids = crate::catalog::point_ids(&mut model, args.seed, args.tags)?;

    match &args.out {
        None => {
            let stdout = std::io::stdout().lock();
            generate(&mut model, &args, &ids, period_ms, BufWriter::with_capacity(1 << 20, stdout))?;
        }
        Some(path) => {
            let tmp = temp_name(path);
            let file = File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
            let result = generate(&mut model, &args, &ids, period_ms, BufWriter::with_capacity(1 << 20, file));
            match result {
                Ok(()) => std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?,
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// The first sample written: as given, or the first at or after --start-ms.
fn first_sample(args: &GenArgs, period_ms: i64) -> u64 {
    args.first_sample.unwrap_or_else(|| (args.start_ms.max(0) as u64).div_ceil(period_ms.max(1) as u64))
}

fn temp_name(path: &Path) -> std::path::PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp{}", std::process::id()))
}

fn generate<W: Write>(
    model: &mut ValueModel,
    args: &GenArgs,
    ids: &[String],
    period_ms: i64,
    out: W,
) -> anyhow::Result<()> {
    let mut w = ReadingWriter::new(out, args.format)?;
    let first = first_sample(args, period_ms);
    for s in first..first + args.samples {
        // Sample s is at s × period after the epoch, as the ladder asks for it.
        let ts = s as i64 * period_ms;
        let mut first = 0u32;
        while first < args.tags {
            let n = CHUNK.min(args.tags - first);
            let values = model.sample(args.seed, first, n, s)?;
            w.write_instant(&ids[first as usize..(first + n) as usize], ts, &values)?;
            first += n;
        }
    }
    let mut out = w.finish()?;
    out.flush()?;
    Ok(())
}
