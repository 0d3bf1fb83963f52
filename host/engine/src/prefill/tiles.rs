//! The order history rows are written in: tiles of (points × intervals).
//!
//! A SQL target's table is typically keyed (point, ts) with a second index
//! on ts. Rows written a whole interval at a time (every point, then the
//! next interval) put one row on every leaf page of the (point, ts) key per
//! interval: each row descends the key's B-tree to a page no other row of
//! the chunk touches. Rows written a point at a time scatter the ts index
//! the same way. A tile — a group of points, adjacent in key order, over a
//! block of intervals, written point by point — gives both indexes runs of
//! neighbours: each point's intervals are adjacent in the key, each
//! interval's points in the ts index.
//!
//! Measured on this machine (PostgreSQL 15, one COPY connection, 9.6 M rows
//! = 100k points × 96 intervals, both indexes): whole intervals 39.1 s,
//! whole points 24.5 s, tiles of 2,000 points × 96 intervals 21.4–23.3 s,
//! tiles of 12,500 × 16 29.7 s; the same rows with no index 5.5 s. With
//! prefill's two writers into the same PostgreSQL, alternating runs of the
//! real model's keys: tiles 281–329 k rows/s, whole intervals 257–290 k
//! (the spread between runs on this shared host is as large as the gap).
//!
//! Tiles go block by block (a block: every point over `block_intervals`),
//! groups in key order within a block, so progress is (intervals of whole
//! blocks done, points of the current block done).

use plugin_runtime::{TargetAdapter, ValueModel};

use super::{err, Spec};

/// Rows per tile (one transaction): large enough that commits cost
/// nothing, small enough that Ctrl-C waits about a second for the tile in
/// flight.
pub const CHUNK_ROWS: u64 = 200_000;
/// Points per tile at least (fewer points than this: every point).
const GROUP_POINTS_MIN: u64 = 2_000;
/// A block's values are sampled once and held: at most this many tiles'
/// worth (64 × 200k values = 100 MB).
const BLOCK_TILES_MAX: u64 = 64;

/// The shape of a job's tiles; a job keeps the shape it started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tiling {
    pub points: u64,
    pub intervals_total: u64,
    pub group_points: u64,
    pub block_intervals: u64,
}

/// Where a job stands: intervals of whole blocks done, and points (in key
/// order) of the block that starts there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Done {
    pub intervals: u64,
    pub points: u64,
}

/// One tile: intervals [k0, k0 + intervals) of the points at key-order
/// positions [g0, g0 + points).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tile {
    pub k0: u64,
    pub intervals: u64,
    pub g0: u64,
    pub points: u64,
    /// Where the job stands once this tile is stored.
    pub done_after: Done,
}

impl Tile {
    pub fn rows(&self) -> u64 {
        self.intervals * self.points
    }
}

impl Tiling {
    pub fn new(points: u64, intervals_total: u64) -> Tiling {
        let n = points.max(1);
        let group_points = n.min(GROUP_POINTS_MIN.max(n.div_ceil(BLOCK_TILES_MAX)));
        let block_intervals = (CHUNK_ROWS / group_points).max(1);
        Tiling { points: n, intervals_total, group_points, block_intervals }
    }

    /// A job's stored shape (as written in its marker).
    pub fn stored(points: u64, intervals_total: u64, group_points: u64, block_intervals: u64) -> Tiling {
        let n = points.max(1);
        Tiling {
            points: n,
            intervals_total,
            group_points: group_points.clamp(1, n),
            block_intervals: block_intervals.max(1),
        }
    }

    /// The shape of jobs written before tiles: every point, whole intervals.
    pub fn whole_intervals(points: u64, intervals_total: u64) -> Tiling {
        let n = points.max(1);
        Tiling { points: n, intervals_total, group_points: n, block_intervals: (CHUNK_ROWS / n).max(1) }
    }

    /// Every tile after `from`, in order.
    pub fn tiles_from(self, from: Done) -> impl Iterator<Item = Tile> {
        let mut at = from;
        std::iter::from_fn(move || {
            if at.intervals >= self.intervals_total {
                return None;
            }
            let intervals = self.block_intervals.min(self.intervals_total - at.intervals);
            let points = self.group_points.min(self.points - at.points);
            let next = if at.points + points >= self.points {
                Done { intervals: at.intervals + intervals, points: 0 }
            } else {
                Done { intervals: at.intervals, points: at.points + points }
            };
            let tile = Tile { k0: at.intervals, intervals, g0: at.points, points, done_after: next };
            at = next;
            Some(tile)
        })
    }

    /// Rows stored when the job stands at `done`.
    #[cfg(test)]
    fn rows_done(&self, done: Done) -> u64 {
        done.intervals * self.points
            + done.points * self.block_intervals.min(self.intervals_total.saturating_sub(done.intervals))
    }
}

/// Values and stamps of a job's rows, tile by tile, from the model.
pub struct RowSource<'a> {
    model: &'a mut ValueModel,
    seed: u64,
    keys: Vec<String>,
    /// Point indexes in the order of their keys' bytes.
    order: Vec<u32>,
    interval_ms: u64,
    period_ms: u64,
    start_ms: i64,
    /// The block sampled last: (first interval, every point's values per interval).
    block: Option<(u64, Vec<Vec<f64>>)>,
}

impl<'a> RowSource<'a> {
    pub fn new(
        model: &'a mut ValueModel,
        adapter: &mut TargetAdapter,
        spec: &Spec,
        start_ms: i64,
    ) -> anyhow::Result<Self> {
        let period_ms = model.sample_period_ms()?.max(1);
        let mut keys = Vec::with_capacity(spec.points as usize);
        let mut first = 0u32;
        while first < spec.points {
            let count = (spec.points - first).min(10_000);
            let tags = model.tags(spec.seed, first, count)?;
            let got = adapter.point_keys(&tags)?;
            if got.len() != tags.len() {
                return Err(err(
                    format!("target {} gave {} point keys for {} points", adapter.name(), got.len(), tags.len()),
                    "the adapter's point-keys must return one key per point; report this to the adapter's author",
                ));
            }
            keys.extend(got);
            first += count;
        }
        let mut order: Vec<u32> = (0..keys.len() as u32).collect();
        order.sort_by(|a, b| keys[*a as usize].as_bytes().cmp(keys[*b as usize].as_bytes()));
        Ok(RowSource {
            model,
            seed: spec.seed,
            keys,
            order,
            interval_ms: spec.interval_ms,
            period_ms,
            start_ms,
            block: None,
        })
    }

    pub fn points(&self) -> usize {
        self.keys.len()
    }

    /// Each point's key, by point index.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// Every point's value at interval `k` (0-based from the window's start).
    fn interval_values(&mut self, k: u64) -> anyhow::Result<Vec<f64>> {
        let n = self.keys.len() as u64;
        let t = self.start_ms + (k * self.interval_ms) as i64;
        let sample = t as u64 / self.period_ms;
        let mut values = Vec::with_capacity(n as usize);
        let mut first = 0u64;
        while first < n {
            let count = (n - first).min(50_000);
            values.extend(self.model.sample(self.seed, first as u32, count as u32, sample)?);
            first += count;
        }
        Ok(values)
    }

    /// The rows of `tile`, point by point in key order, each point's
    /// intervals in time order, handed to `each` as (point index, ts ms,
    /// value). Returns the rows.
    pub fn tile_rows(&mut self, tile: &Tile, mut each: impl FnMut(usize, i64, f64)) -> anyhow::Result<u64> {
        if self.block.as_ref().map(|(k0, v)| (*k0, v.len() as u64)) != Some((tile.k0, tile.intervals)) {
            self.block = None;
            let values = (tile.k0..tile.k0 + tile.intervals)
                .map(|k| self.interval_values(k))
                .collect::<anyhow::Result<Vec<_>>>()?;
            self.block = Some((tile.k0, values));
        }
        let Some((_, values)) = &self.block else { unreachable!("sampled above") };
        let n = self.keys.len() as u64;
        for &p in &self.order[tile.g0 as usize..(tile.g0 + tile.points) as usize] {
            let p = p as u64;
            for (j, vals) in values.iter().enumerate() {
                let t = self.start_ms + ((tile.k0 + j as u64) * self.interval_ms) as i64;
                each(p as usize, t + ((p * self.interval_ms) / n) as i64, vals[p as usize]);
            }
        }
        Ok(tile.rows())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many cells (interval, point) the tiles from `from` cover; fails
    /// on a cell covered twice. A bitmap, not a set: a million points by 20
    /// intervals is 20 million cells.
    fn covered(t: Tiling, from: Done) -> u64 {
        let (n, total) = (t.points, t.intervals_total);
        let mut seen = vec![false; (n * total) as usize];
        let mut count = 0;
        for tile in t.tiles_from(from) {
            for k in tile.k0..tile.k0 + tile.intervals {
                for g in tile.g0..tile.g0 + tile.points {
                    let cell = &mut seen[(k * n + g) as usize];
                    assert!(!*cell, "cell ({k}, {g}) in two tiles");
                    *cell = true;
                    count += 1;
                }
            }
        }
        count
    }

    #[test]
    fn tiles_cover_every_row_once_and_resume_exactly() {
        for (n, total) in [(1000, 1440), (100_000, 96), (2500, 7), (1, 3), (1_000_000, 20), (4001, 1000)] {
            let t = Tiling::new(n, total);
            assert!(t.group_points * t.block_intervals <= CHUNK_ROWS.max(t.group_points), "{t:?}");
            assert!(t.points * t.block_intervals <= BLOCK_TILES_MAX * CHUNK_ROWS, "block too big: {t:?}");
            // Every cell once (the bitmap has exactly n x total cells).
            assert_eq!(covered(t, Done::default()), n * total, "{t:?}");
            // Resuming after any tile gives exactly the tiles after it (so,
            // with the cover above, exactly the rest), and rows_done counts
            // what came before.
            let all: Vec<Tile> = t.tiles_from(Done::default()).collect();
            for (i, tile) in all.iter().enumerate().step_by(7) {
                let rest: Vec<Tile> = t.tiles_from(tile.done_after).collect();
                assert_eq!(rest, all[i + 1..], "{t:?} after {tile:?}");
                let rest_rows: u64 = rest.iter().map(Tile::rows).sum();
                assert_eq!(t.rows_done(tile.done_after) + rest_rows, n * total, "{t:?} after {tile:?}");
            }
            // A stored shape gives the same tiles.
            assert_eq!(Tiling::stored(n, total, t.group_points, t.block_intervals), t);
        }
        assert_eq!(Tiling::new(100_000, 96).group_points, 2000);
        assert_eq!(Tiling::new(1000, 1440).block_intervals, 200);
    }
}
