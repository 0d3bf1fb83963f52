//! What readings really cost on disk, measured in real stores rather than
//! estimated (`compression` only counts Gorilla bits): the same points and
//! samples, written with each value model, and the bytes each store keeps.
//!
//! Stores measured:
//! - the target's own storage (PostgreSQL for baler): heap and index bytes
//!   from the adapter's stats, after `scalebench prefill` wrote the rows;
//! - Parquet with zstd, as a historian archive would be written: rows
//!   ordered by point then time, default encodings, and a variant with the
//!   value column in BYTE_STREAM_SPLIT (made for floats);
//! - tsink, an embedded time-series store (Gorilla-style XOR values,
//!   delta-of-delta timestamps, zstd), one series per point.
//!
//! Not for: estimating in a hurry (`gen --compression` does that in a second).

use std::path::Path;
use std::sync::Arc;

use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use serde::{Deserialize, Serialize};

/// The readings of one model: every point over every interval, point-major.
pub struct Readings {
    pub model: String,
    pub keys: Vec<String>,
    /// First interval start, ms since the epoch.
    pub start_ms: i64,
    pub interval_ms: u64,
    pub intervals: usize,
    /// values[p * intervals + k]
    pub values: Vec<f64>,
}

impl Readings {
    pub fn len(&self) -> u64 {
        self.values.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The live generator's stamp of point `p` in interval `k`.
    pub fn ts_ms(&self, p: usize, k: usize) -> i64 {
        let n = self.keys.len() as u64;
        self.start_ms + (k as u64 * self.interval_ms) as i64 + ((p as u64 * self.interval_ms) / n) as i64
    }
}

/// One store's bytes for one model.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ModelBytes {
    pub model: String,
    pub readings: u64,
    pub bytes: u64,
    pub bytes_per_reading: f64,
    /// Parts of `bytes`, where the store tells them apart (heap, indexes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<(String, u64)>,
}

/// One store, every model.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StoreResult {
    pub store: String,
    /// How the store was written and what it does to floats.
    pub how: String,
    pub models: Vec<ModelBytes>,
    /// bytes_per_reading of each later model / the first model's (noise / plant-shaped).
    pub ratio_to_first: Vec<(String, f64)>,
    /// Set when the store could not be measured (unmeasured is never zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl StoreResult {
    pub fn new(store: &str, how: &str) -> StoreResult {
        StoreResult { store: store.into(), how: how.into(), ..Default::default() }
    }

    pub fn push(&mut self, model: &str, readings: u64, bytes: u64, parts: Vec<(String, u64)>) {
        self.models.push(ModelBytes {
            model: model.into(),
            readings,
            bytes,
            bytes_per_reading: bytes as f64 / readings.max(1) as f64,
            parts,
        });
    }

    pub fn finish(&mut self) {
        self.ratio_to_first = match self.models.first() {
            Some(first) if first.bytes_per_reading > 0.0 => self.models[1..]
                .iter()
                .map(|m| (format!("{} / {}", m.model, first.model), m.bytes_per_reading / first.bytes_per_reading))
                .collect(),
            _ => Vec::new(),
        };
    }

    pub fn bytes_per_reading(&self, model: &str) -> Option<f64> {
        self.models.iter().find(|m| m.model == model).map(|m| m.bytes_per_reading)
    }
}

/// Bytes of every file under `dir`.
pub fn dir_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let m = e.metadata()?;
        total += if m.is_dir() { dir_bytes(&e.path())? } else { m.len() };
    }
    Ok(total)
}

/// Write `r` as Parquet with zstd; returns the file's bytes.
/// `float_split`: the value column in BYTE_STREAM_SPLIT without a dictionary.
pub fn write_parquet(r: &Readings, path: &Path, float_split: bool) -> anyhow::Result<u64> {
    let schema = Arc::new(parquet::schema::parser::parse_message_type(
        "message reading { required binary point (STRING); required int64 ts (TIMESTAMP(MILLIS,true)); required double value; }",
    )?);
    let mut props = WriterProperties::builder().set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?));
    if float_split {
        let value = ColumnPath::from("value");
        props = props
            .set_column_dictionary_enabled(value.clone(), false)
            .set_column_encoding(value, Encoding::BYTE_STREAM_SPLIT);
    }
    let file = std::fs::File::create(path)?;
    let mut w = SerializedFileWriter::new(file, schema, Arc::new(props.build()))?;
    // Row groups of whole points, about a million readings each.
    let per_group = (1_000_000 / r.intervals.max(1)).max(1);
    let mut p0 = 0;
    while p0 < r.keys.len() {
        let p1 = (p0 + per_group).min(r.keys.len());
        let mut points = Vec::with_capacity((p1 - p0) * r.intervals);
        let mut ts = Vec::with_capacity((p1 - p0) * r.intervals);
        for p in p0..p1 {
            let key = ByteArray::from(r.keys[p].as_bytes().to_vec());
            for k in 0..r.intervals {
                points.push(key.clone());
                ts.push(r.ts_ms(p, k));
            }
        }
        let values = &r.values[p0 * r.intervals..p1 * r.intervals];
        let mut g = w.next_row_group()?;
        let mut col = g.next_column()?.ok_or_else(|| anyhow::anyhow!("Parquet schema has no point column"))?;
        col.typed::<ByteArrayType>().write_batch(&points, None, None)?;
        col.close()?;
        let mut col = g.next_column()?.ok_or_else(|| anyhow::anyhow!("Parquet schema has no ts column"))?;
        col.typed::<Int64Type>().write_batch(&ts, None, None)?;
        col.close()?;
        let mut col = g.next_column()?.ok_or_else(|| anyhow::anyhow!("Parquet schema has no value column"))?;
        col.typed::<DoubleType>().write_batch(values, None, None)?;
        col.close()?;
        g.close()?;
        p0 = p1;
    }
    w.close()?;
    Ok(std::fs::metadata(path)?.len())
}

/// Write `r` into a fresh tsink store in `dir` (WAL off: only the data
/// files count); returns the bytes on disk after close.
pub fn write_tsink(r: &Readings, dir: &Path) -> anyhow::Result<u64> {
    let storage = tsink::StorageBuilder::new()
        .with_data_path(dir)
        .with_timestamp_precision(tsink::TimestampPrecision::Milliseconds)
        .with_wal_enabled(false)
        .with_retention(std::time::Duration::from_secs(3650 * 86_400))
        .build()
        .map_err(|e| anyhow::anyhow!("tsink: cannot open a store in {}: {e}", dir.display()))?;
    let mut batch = Vec::with_capacity(10_000);
    // Interval-major, as readings arrive.
    for k in 0..r.intervals {
        for (p, key) in r.keys.iter().enumerate() {
            let v = r.values[p * r.intervals + k];
            batch.push(tsink::Row::with_labels(
                "reading",
                vec![tsink::Label::new("point", key.as_str())],
                tsink::DataPoint::new(r.ts_ms(p, k), v),
            ));
            if batch.len() == 10_000 {
                storage.insert_rows(&batch).map_err(|e| anyhow::anyhow!("tsink: insert failed: {e}"))?;
                batch.clear();
            }
        }
    }
    if !batch.is_empty() {
        storage.insert_rows(&batch).map_err(|e| anyhow::anyhow!("tsink: insert failed: {e}"))?;
    }
    storage.close().map_err(|e| anyhow::anyhow!("tsink: close failed: {e}"))?;
    drop(storage);
    Ok(dir_bytes(dir)?)
}

/// The TimescaleDB measurement of 10 M readings, made elsewhere, that these
/// figures are set beside (bytes per reading compressed; compression ratio).
pub const REFERENCE: &str = "TimescaleDB, 10 M readings, measured elsewhere (not on this machine): \
plant-shaped 1.69 B/reading (43.0x), uniform noise 8.57 B/reading (8.5x); noise / plant 5.1";

#[cfg(test)]
mod tests {
    use super::*;

    fn readings(mut values: impl FnMut(usize, usize) -> f64) -> Readings {
        let (n, k) = (20, 2000);
        let mut v = Vec::with_capacity(n * k);
        for p in 0..n {
            for i in 0..k {
                v.push(values(p, i));
            }
        }
        Readings {
            model: "m".into(),
            keys: (0..n).map(|p| format!("s0/e0/p{p}")).collect(),
            start_ms: 1_767_225_600_000,
            interval_ms: 5000,
            intervals: k,
            values: v,
        }
    }

    #[test]
    fn parquet_compresses_held_values_and_not_noise() {
        let dir = tempfile::tempdir().unwrap();
        let flat = readings(|p, i| (p * 10 + i / 500) as f64);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise = readings(|_, _| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        });
        let a = write_parquet(&flat, &dir.path().join("a.parquet"), false).unwrap() as f64 / flat.len() as f64;
        let b = write_parquet(&noise, &dir.path().join("b.parquet"), false).unwrap() as f64 / noise.len() as f64;
        assert!(b > 3.0 * a, "noise {b} B/reading vs held values {a}");
        assert!(b > 6.0, "random doubles cannot shrink much below 8 bytes: {b}");
    }
}
