//! Prefill of SQL targets: binary COPY in tiles of points × intervals
//! ([`super::tiles`]) into the table the adapter names (`sql-copy` plans),
//! over two connections side by side (one PostgreSQL backend uses one core;
//! index upkeep, not the loading loop, is what a row costs). Each tile is
//! one transaction that also advances a progress marker (table
//! `scalebench_prefill`, which scalebench creates), committed in order, so:
//! - a rerun of the same job adds nothing twice (the marker says it is done);
//! - Ctrl-C finishes the chunk in flight, and a rerun resumes after the last
//!   committed chunk: the row count is exact, never a chunk twice or half;
//! - readings already stored under the table's key (live readings, another
//!   job's history) are left alone: a chunk that meets one is written again
//!   through a staging table with `ON CONFLICT DO NOTHING`.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use plugin_runtime::history_types::SqlCopyPlan;
use plugin_runtime::{TargetAdapter, ValueModel};

use super::tiles::{Done, RowSource, Tile, Tiling};
use super::{err, ms_to_utc, window, Progress, Report, Spec};

/// Connections writing chunks side by side (committed in order).
const WRITERS: usize = 2;
/// Bytes handed to the COPY stream per write (writing a row at a time is the
/// slow way: each write costs the same fixed overhead).
const WRITE_BYTES: usize = 256 * 1024;
/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
const PG_EPOCH_US: i64 = 946_684_800_000_000;
/// The progress marker's table, in the target's database.
pub const MARKER_TABLE: &str = "scalebench_prefill";

/// `"a"."b"` from `a.b`: the adapter's table name, quoted part by part.
pub fn quote_name(name: &str) -> String {
    name.split('.').map(|p| format!("\"{}\"", p.replace('"', "\"\""))).collect::<Vec<_>>().join(".")
}

/// One chunk: a tile's rows as COPY bytes, and its place in the run's order.
struct Chunk {
    seq: u64,
    tile: Tile,
    bytes: Vec<u8>,
}

/// Binary COPY of (text, timestamptz, float8) rows.
pub mod binary {
    use super::PG_EPOCH_US;

    pub const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
    pub const TRAILER: &[u8] = &[0xff, 0xff];

    /// The constant head of a point's rows: field count and the key text.
    pub fn row_head(key: &str) -> Vec<u8> {
        let mut v = Vec::with_capacity(6 + key.len());
        v.extend_from_slice(&3i16.to_be_bytes());
        v.extend_from_slice(&(key.len() as i32).to_be_bytes());
        v.extend_from_slice(key.as_bytes());
        v
    }

    pub fn push_row(out: &mut Vec<u8>, head: &[u8], ts_ms: i64, value: f64) {
        out.extend_from_slice(head);
        out.extend_from_slice(&8i32.to_be_bytes());
        out.extend_from_slice(&(ts_ms * 1000 - PG_EPOCH_US).to_be_bytes());
        out.extend_from_slice(&8i32.to_be_bytes());
        out.extend_from_slice(&value.to_bits().to_be_bytes());
    }
}

struct Job {
    id: String,
    start_ms: i64,
    end_ms: i64,
    intervals_total: u64,
    tiling: Tiling,
    done: Done,
    rows_before: u64,
    resumed: bool,
}

fn pg_err(what: &str, e: postgres::Error) -> anyhow::Error {
    let detail = e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| e.to_string());
    err(
        format!("{what}: {detail}"),
        "check the stack's PostgreSQL is up and the table exists (the historian creates point_history when it starts)",
    )
}

/// Check the table's columns have the types binary COPY will send.
fn check_columns(client: &mut postgres::Client, plan: &SqlCopyPlan) -> anyhow::Result<()> {
    let rows = client
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
             WHERE a.attrelid = to_regclass($1::text) AND a.attnum > 0 AND NOT a.attisdropped",
            &[&plan.table],
        )
        .map_err(|e| pg_err("reading the table's columns", e))?;
    if rows.is_empty() {
        return Err(err(
            format!("table `{}` does not exist in database service `{}`", plan.table, plan.database),
            "start the SUT's ingester once so it creates its table, then prefill",
        ));
    }
    let have: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    for (col, ty) in [
        (&plan.point_column, "text"),
        (&plan.ts_column, "timestamp with time zone"),
        (&plan.value_column, "double precision"),
    ] {
        match have.iter().find(|(n, _)| n == col) {
            None => {
                return Err(err(
                    format!("table `{}` has no column `{col}`", plan.table),
                    "check the adapter's params (table name)",
                ))
            }
            Some((_, t)) if t != ty => {
                return Err(err(
                    format!("column `{col}` of `{}` is {t}; prefill writes {ty}", plan.table),
                    "prefill writes (text, timestamptz, double precision) rows; use a table of that shape",
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

fn open_job(client: &mut postgres::Client, key: &str, spec: &Spec, dest: &str) -> anyhow::Result<Job> {
    // Columns added since the first marker tables: a job without a tile
    // shape was written a whole interval of every point at a time.
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {MARKER_TABLE} (id text PRIMARY KEY, destination text NOT NULL, \
             start_ms bigint NOT NULL, end_ms bigint NOT NULL, intervals_total bigint NOT NULL, \
             intervals_done bigint NOT NULL DEFAULT 0, rows_written bigint NOT NULL DEFAULT 0, \
             started_at timestamptz NOT NULL DEFAULT now(), finished_at timestamptz); \
             ALTER TABLE {MARKER_TABLE} ADD COLUMN IF NOT EXISTS points_done bigint NOT NULL DEFAULT 0, \
             ADD COLUMN IF NOT EXISTS tile_points bigint, ADD COLUMN IF NOT EXISTS tile_intervals bigint"
        ))
        .map_err(|e| pg_err("creating the progress marker table", e))?;
    let n = spec.points as u64;
    if let Some(r) = client
        .query_opt(
            &format!("SELECT start_ms, end_ms, intervals_total, intervals_done, rows_written, points_done, tile_points, tile_intervals FROM {MARKER_TABLE} WHERE id = $1"),
            &[&key],
        )
        .map_err(|e| pg_err("reading the progress marker", e))?
    {
        let (s, e, t, d, w, pd): (i64, i64, i64, i64, i64, i64) = (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5));
        let (tp, ti): (Option<i64>, Option<i64>) = (r.get(6), r.get(7));
        let tiling = match (tp, ti) {
            (Some(tp), Some(ti)) => Tiling::stored(n, t as u64, tp as u64, ti as u64),
            _ => Tiling::whole_intervals(n, t as u64),
        };
        let done = Done { intervals: d as u64, points: pd as u64 };
        return Ok(Job { id: key.into(), start_ms: s, end_ms: e, intervals_total: t as u64, tiling, done, rows_before: w as u64, resumed: d > 0 || pd > 0 });
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis() as i64;
    let (s, e, t) = window(spec, now);
    let tiling = Tiling::new(n, t);
    client
        .execute(
            &format!("INSERT INTO {MARKER_TABLE} (id, destination, start_ms, end_ms, intervals_total, tile_points, tile_intervals) VALUES ($1, $2, $3, $4, $5, $6, $7)"),
            &[&key, &dest, &s, &e, &(t as i64), &(tiling.group_points as i64), &(tiling.block_intervals as i64)],
        )
        .map_err(|e| pg_err("writing the progress marker", e))?;
    Ok(Job {
        id: key.into(),
        start_ms: s,
        end_ms: e,
        intervals_total: t,
        tiling,
        done: Done::default(),
        rows_before: 0,
        resumed: false,
    })
}

/// The job's key: everything that decides which rows it writes, except the window.
pub fn job_key(spec: &Spec, plan: &SqlCopyPlan) -> String {
    format!("{}/{} {}", plan.database, plan.table, spec.readings_key())
}

struct Writer {
    client: postgres::Client,
    copy_direct: String,
    copy_stage: String,
    insert_from_stage: String,
    marker_update: String,
    stage_made: bool,
    /// A chunk met stored readings: write the rest through the staging table.
    staged: bool,
}

impl Writer {
    fn new(client: postgres::Client, plan: &SqlCopyPlan) -> Writer {
        let t = quote_name(&plan.table);
        let (p, ts, v) = (quote_name(&plan.point_column), quote_name(&plan.ts_column), quote_name(&plan.value_column));
        let keys: Vec<String> = plan.key_columns.iter().map(|k| quote_name(k)).collect();
        let conflict = if keys.is_empty() {
            "ON CONFLICT DO NOTHING".to_string()
        } else {
            format!("ON CONFLICT ({}) DO NOTHING", keys.join(", "))
        };
        Writer {
            client,
            copy_direct: format!("COPY {t} ({p}, {ts}, {v}) FROM STDIN (FORMAT binary)"),
            copy_stage: "COPY scalebench_prefill_stage (point, ts, value) FROM STDIN (FORMAT binary)".into(),
            insert_from_stage: format!(
                "INSERT INTO {t} ({p}, {ts}, {v}) SELECT point, ts, value FROM scalebench_prefill_stage {conflict}"
            ),
            marker_update: format!(
                "UPDATE {MARKER_TABLE} SET intervals_done = $2, points_done = $4, rows_written = rows_written + $3, \
                 finished_at = CASE WHEN $2 >= intervals_total THEN now() END WHERE id = $1"
            ),
            stage_made: false,
            staged: false,
        }
    }

    fn stream(tx: &mut postgres::Transaction<'_>, statement: &str, bytes: &[u8]) -> Result<u64, postgres::Error> {
        let mut w = tx.copy_in(statement)?;
        let mut io = || -> std::io::Result<()> {
            w.write_all(binary::HEADER)?;
            for piece in bytes.chunks(WRITE_BYTES) {
                w.write_all(piece)?;
            }
            w.write_all(binary::TRAILER)
        };
        if let Err(e) = io() {
            // The server's error (e.g. a key already stored) surfaces at finish.
            drop(e);
        }
        w.finish()
    }

    /// Write one chunk and advance the marker, in one transaction; the
    /// marker is advanced and the transaction committed only once `turn`
    /// says every earlier chunk is committed (chunks are written side by
    /// side, committed in order, so the marker never claims a gap).
    /// Returns (rows added, rows already stored).
    fn write(&mut self, job: &str, chunk: &Chunk, turn: &Turns) -> anyhow::Result<(u64, u64)> {
        let (intervals_done, points_done) =
            (chunk.tile.done_after.intervals as i64, chunk.tile.done_after.points as i64);
        if !self.staged {
            let mut tx = self.client.transaction().map_err(|e| pg_err("starting a transaction", e))?;
            match Self::stream(&mut tx, &self.copy_direct, &chunk.bytes) {
                Ok(n) => {
                    turn.wait_for(chunk.seq)?;
                    tx.execute(&self.marker_update, &[&job, &intervals_done, &(n as i64), &points_done])
                        .map_err(|e| pg_err("advancing the progress marker", e))?;
                    tx.commit().map_err(|e| pg_err("committing a chunk", e))?;
                    return Ok((n, 0));
                }
                Err(e) if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) => {
                    drop(tx);
                    self.staged = true;
                }
                Err(e) => return Err(pg_err("writing a chunk with COPY", e)),
            }
        }
        let mut tx = self.client.transaction().map_err(|e| pg_err("starting a transaction", e))?;
        if !self.stage_made {
            tx.batch_execute("CREATE TEMP TABLE IF NOT EXISTS scalebench_prefill_stage (point text, ts timestamptz, value float8) ON COMMIT DELETE ROWS")
                .map_err(|e| pg_err("creating the staging table", e))?;
        }
        let n = Self::stream(&mut tx, &self.copy_stage, &chunk.bytes)
            .map_err(|e| pg_err("writing a chunk to the staging table", e))?;
        // ON CONFLICT waits for another writer's uncommitted rows of the
        // same key; chunks never share a key, but wait for the turn first
        // anyway so the two writers can never wait on each other.
        turn.wait_for(chunk.seq)?;
        let added =
            tx.execute(&self.insert_from_stage, &[]).map_err(|e| pg_err("moving a chunk from the staging table", e))?;
        tx.execute(&self.marker_update, &[&job, &intervals_done, &(added as i64), &points_done])
            .map_err(|e| pg_err("advancing the progress marker", e))?;
        tx.commit().map_err(|e| pg_err("committing a chunk", e))?;
        self.stage_made = true;
        Ok((added, n - added))
    }
}

/// Connect the host's own write connection.
pub fn connect(conn: &str) -> anyhow::Result<postgres::Client> {
    crate::pg_connect::connect(conn).map_err(|e| anyhow::anyhow!("connecting to the target's PostgreSQL: {e}"))
}

/// Run one COPY job to completion or until `stop`. `conn` is the
/// connection string of the plan's database service. Blocking.
///
/// Long on purpose: one job's loop: the resume point, the COPY in flight, its commit and the progress share its state.
#[allow(clippy::too_many_arguments)]
pub fn run(
    spec: &Spec,
    model: &mut ValueModel,
    adapter: &mut TargetAdapter,
    plan: &SqlCopyPlan,
    conn: &str,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
    on_start: &dyn Fn(&Report),
) -> anyhow::Result<Report> {
    let plan = plan.clone();
    let dest = format!("{} / {}", plan.database, plan.table);
    let key = job_key(spec, &plan);
    let conn = conn.to_string();

    // Every PostgreSQL call happens on the writer thread (the sync client
    // must not run inside the caller's async runtime).
    let (job_tx, job_rx) = sync_channel::<anyhow::Result<Job>>(1);
    let (chunk_tx, chunk_rx) = sync_channel::<Chunk>(2);
    let writer_plan = plan.clone();
    let writer_spec = spec.clone();
    let writer_progress = progress.clone();
    let writer =
        std::thread::Builder::new().name("prefill-writer".into()).spawn(move || -> anyhow::Result<Written> {
            let setup = (|| {
                let mut client = connect(&conn)?;
                check_columns(&mut client, &writer_plan)?;
                let job = open_job(&mut client, &key, &writer_spec, &dest)?;
                Ok((client, job))
            })();
            let (client, job) = match setup {
                Ok(x) => x,
                Err(e) => {
                    let msg = format!("{e:#}");
                    let _ = job_tx.send(Err(e));
                    return Err(anyhow::anyhow!(msg));
                }
            };
            let id = job.id.clone();
            let job_done_before = job.done;
            // More writers, each on a connection of its own: one PostgreSQL
            // backend uses one core, and index upkeep, not the loading loop,
            // is what a chunk costs.
            let mut writers = vec![Writer::new(client, &writer_plan)];
            for _ in 1..WRITERS {
                match connect(&conn) {
                    Ok(c) => writers.push(Writer::new(c, &writer_plan)),
                    Err(e) => {
                        let msg = format!("{e:#}");
                        let _ = job_tx.send(Err(e));
                        return Err(anyhow::anyhow!(msg));
                    }
                }
            }
            let _ = job_tx.send(Ok(job));
            write_chunks(writers, &id, job_done_before, chunk_rx, &writer_progress)
        })?;

    let job = match job_rx.recv() {
        Ok(Ok(j)) => j,
        Ok(Err(e)) => {
            let _ = writer.join();
            return Err(e);
        }
        Err(_) => {
            return Err(writer
                .join()
                .map_err(|_| anyhow::anyhow!("the prefill writer stopped unexpectedly"))?
                .err()
                .unwrap_or_else(|| anyhow::anyhow!("the prefill writer stopped unexpectedly")))
        }
    };
    let mut report = Report {
        target: spec.target_name.clone(),
        model: spec.model_name.clone(),
        destination: format!("{} / {}", plan.database, plan.table),
        points: spec.points as u64,
        interval_s: spec.interval_ms as f64 / 1000.0,
        days: spec.days,
        start_ms: job.start_ms,
        end_ms: job.end_ms,
        start_utc: ms_to_utc(job.start_ms),
        end_utc: ms_to_utc(job.end_ms),
        intervals_total: job.intervals_total,
        rows_total: job.intervals_total * spec.points as u64,
        rows_before: job.rows_before,
        resumed: job.resumed,
        ..Default::default()
    };
    on_start(&report);

    let t0 = Instant::now();
    let mut produce = || -> anyhow::Result<()> {
        let mut src = RowSource::new(model, adapter, spec, job.start_ms)?;
        let heads: Vec<Vec<u8>> = src.keys().iter().map(|k| binary::row_head(k)).collect();
        for (seq, tile) in job.tiling.tiles_from(job.done).enumerate() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let mut bytes = Vec::with_capacity((tile.rows() * 50) as usize);
            src.tile_rows(&tile, |p, ts, v| binary::push_row(&mut bytes, &heads[p], ts, v))?;
            if chunk_tx.send(Chunk { seq: seq as u64, tile, bytes }).is_err() {
                break; // the writer stopped; its error is reported below
            }
        }
        Ok(())
    };
    let produced = produce();
    drop(chunk_tx);
    let written = writer.join().map_err(|_| anyhow::anyhow!("the prefill writer stopped unexpectedly"))?;
    let (added, existing, chunks, done) = written?;
    produced?;
    report.duration_s = t0.elapsed().as_secs_f64();
    report.rows_added = added;
    report.rows_already_stored = existing;
    report.chunks = chunks;
    report.rows_per_s = if report.duration_s > 0.0 { (added + existing) as f64 / report.duration_s } else { 0.0 };
    report.complete = done.intervals >= job.intervals_total;
    report.interrupted = stop.load(Ordering::Relaxed) && !report.complete;
    Ok(report)
}

/// A writer stopped because another one failed (that one's error is the one to report).
#[derive(Debug, thiserror::Error)]
#[error("another prefill writer failed")]
struct OtherWriterFailed;

/// Whose turn it is to commit: the first chunk (by its place in this run's
/// order, from 0) not yet committed. A writer that fails marks the turns
/// broken, so no other waits forever.
struct Turns {
    next: Mutex<(u64, bool)>,
    changed: Condvar,
}

impl Turns {
    fn new() -> Turns {
        Turns { next: Mutex::new((0, false)), changed: Condvar::new() }
    }

    /// Wait until every chunk before chunk `seq` is committed.
    fn wait_for(&self, seq: u64) -> anyhow::Result<()> {
        let mut g = self.next.lock().unwrap_or_else(|p| p.into_inner());
        while g.0 != seq && !g.1 {
            g = self.changed.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        if g.1 {
            return Err(OtherWriterFailed.into());
        }
        Ok(())
    }

    fn committed(&self, next: u64) {
        self.next.lock().unwrap_or_else(|p| p.into_inner()).0 = next;
        self.changed.notify_all();
    }

    fn broken(&self) {
        self.next.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.changed.notify_all();
    }
}

/// (rows added, rows already stored, chunks, where the job stands after the last chunk)
type Written = (u64, u64, u64, Done);

/// Write the chunks of `rx` over every writer's connection side by side,
/// committing them in order.
fn write_chunks(
    writers: Vec<Writer>,
    job: &str,
    done_before: Done,
    rx: Receiver<Chunk>,
    progress: &Progress,
) -> anyhow::Result<Written> {
    let rx = Mutex::new(rx);
    let turns = Turns::new();
    let results: Vec<anyhow::Result<Written>> = std::thread::scope(|s| {
        let handles: Vec<_> = writers
            .into_iter()
            .map(|mut w| {
                let (rx, turns) = (&rx, &turns);
                s.spawn(move || -> anyhow::Result<Written> {
                    let (mut added, mut existing, mut chunks, mut done) = (0, 0, 0, done_before);
                    loop {
                        // Take the next chunk in order; the lock is held only to receive.
                        let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        let Ok(chunk) = next else { break };
                        let r = w.write(job, &chunk, turns);
                        let (a, e) = match r {
                            Ok(x) => x,
                            Err(e) => {
                                turns.broken();
                                return Err(e);
                            }
                        };
                        debug_assert_eq!(a + e, chunk.tile.rows());
                        turns.committed(chunk.seq + 1);
                        done = done.max(chunk.tile.done_after);
                        added += a;
                        existing += e;
                        chunks += 1;
                        progress.rows_done.fetch_add(chunk.tile.rows(), Ordering::Relaxed);
                    }
                    Ok((added, existing, chunks, done))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a prefill writer stopped unexpectedly"))))
            .collect()
    });
    // The first real error, not "another writer failed".
    let mut total: Written = (0, 0, 0, done_before);
    let mut first_err = None;
    for r in results {
        match r {
            Ok((a, e, c, d)) => {
                total.0 += a;
                total.1 += e;
                total.2 += c;
                total.3 = total.3.max(d);
            }
            Err(e)
                if first_err.is_none()
                    || first_err.as_ref().is_some_and(|f: &anyhow::Error| f.is::<OtherWriterFailed>()) =>
            {
                first_err = Some(e)
            }
            Err(_) => {}
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(total),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_rows_are_pg_binary_copy() {
        let mut out = Vec::new();
        let head = binary::row_head("s0/e0/t1");
        binary::push_row(&mut out, &head, 946_684_800_001, 1.5);
        assert_eq!(&out[..2], &3i16.to_be_bytes());
        assert_eq!(&out[2..6], &8i32.to_be_bytes());
        assert_eq!(&out[6..14], b"s0/e0/t1");
        assert_eq!(&out[18..26], &1000i64.to_be_bytes());
        assert_eq!(&out[30..38], &1.5f64.to_bits().to_be_bytes());
        assert_eq!(binary::HEADER.len(), 19);
    }

    #[test]
    fn window_is_whole_intervals_ending_before_now() {
        let spec = Spec {
            points: 10,
            days: 1.0 / 24.0,
            interval_ms: 5000,
            seed: 1,
            end_ms: None,
            model_name: "m".into(),
            model_params: "{}".into(),
            target_name: "t".into(),
            target_params: "{}".into(),
        };
        let (s, e, n) = window(&spec, 1_000_000_003_000);
        assert_eq!(n, 720);
        assert_eq!(e % 5000, 0);
        assert!(e <= 1_000_000_003_000);
        assert_eq!(e - s, 3_600_000);
        assert_eq!(quote_name("public.point_history"), "\"public\".\"point_history\"");
    }
}
