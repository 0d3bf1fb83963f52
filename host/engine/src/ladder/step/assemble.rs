//! Phase 5: the step result, what could not be measured, and the verdict.

use super::*;

/// Long on purpose: it builds the step's `StepResult` field by field from the phases' outputs; each figure's computation is a named function, what is left is the record.
#[allow(clippy::too_many_arguments)]
pub(super) async fn assemble(
    env: &Env<'_>,
    session: &Session,
    points: u64,
    topology: Topology,
    mut o: Offered,
    d: Drained,
    c: Counted,
    started_utc: String,
    step_started: Instant,
) -> (StepResult, verdict::Context) {
    let cfg = env.cfg;
    let target_rps = points as f64 / cfg.interval.as_secs_f64();
    if let Some(p) = o.poller.take() {
        let _ = p.join();
    }
    // Resources over the soak.
    let mut resources = BTreeMap::new();
    if let Some(start) = &o.soak_proc_start {
        for p in &o.soak_proc_end {
            if let Some(q) = start.iter().find(|q| q.name == p.name) {
                let wall = p.at.duration_since(q.at).as_secs_f64().max(1e-3);
                let mut r =
                    Resource { cpu_percent: (p.cpu_seconds - q.cpu_seconds) / wall * 100.0, ..Default::default() };
                r.rss_bytes_last = p.rss_bytes;
                r.rss_bytes_max = o
                    .proc_samples
                    .iter()
                    .flatten()
                    .filter(|x| x.name == p.name)
                    .map(|x| x.rss_bytes)
                    .max()
                    .unwrap_or(p.rss_bytes);
                r.cpu_percent_max =
                    o.samples.iter().filter_map(|s| s.cpu_percent.get(&p.name)).cloned().fold(0.0, f64::max);
                r.mem_limit_bytes = p.mem_limit_bytes;
                r.blkio_read_bytes = p.blkio_read_bytes.zip(q.blkio_read_bytes).map(|(a, b)| a.saturating_sub(b));
                r.blkio_write_bytes = p.blkio_write_bytes.zip(q.blkio_write_bytes).map(|(a, b)| a.saturating_sub(b));
                resources.insert(p.name.clone(), r);
            }
        }
    }
    let (db, durability) = read_stats(session, c.stored_rps).await;
    let soak_from_ms = o.report.start_ms + cfg.warmup.as_millis() as i64;
    let (lag, canaries) = {
        let seen = o.seen.lock().unwrap();
        let acked = &d.counts.canary_acked_at;
        (
            canary::summarize(&d.sent, &seen, acked, soak_from_ms),
            canary::records(&d.sent, &seen, acked, c.series.start_unix_s * 1000),
        )
    };

    let mut unmeasured = std::mem::take(&mut o.unmeasured);
    if let Some(e) = &d.stored_error {
        unmeasured.push(format!("stored readings: {e}"));
    }
    if let Some(sys) = env.sys.filter(|_| c.dropped.is_none()) {
        unmeasured.push(format!("broker drops: {}", sys.drops_unreadable()));
    }
    for p in o.probes.iter_mut() {
        if p.error.as_deref().is_some_and(|e| e.contains(crate::probes::NOT_UNDER_LOAD)) {
            unmeasured.push(format!("probe {}: {}", p.name, p.error.take().unwrap_or_default()));
            p.ok = true;
        }
    }
    if !d.counts.error_samples.is_empty() {
        tracing::warn!("  transport errors: {}", d.counts.error_samples.join("; "));
    }
    let r = &o.report;
    let counts = &d.counts;
    let generator_memory = generator_memory(session);
    let step = StepResult {
        points,
        status: Status::Pass,
        reasons: Vec::new(),
        target_rps,
        started_utc,
        duration_s: step_started.elapsed().as_secs_f64(),
        generator: Generator {
            published: counts.published,
            acked: counts.readings_acked,
            scheduled: r.readings_scheduled,
            offered: r.readings_offered,
            not_offered: r.readings_scheduled.saturating_sub(r.readings_offered),
            soak_s: c.soak_s,
            offered_rps: c.offered_rps,
            offered_ratio: c.offered_rps / target_rps,
            achieved_rps: c.achieved_rps,
            achieved_ratio: c.achieved_rps / target_rps,
            achieved_rps_min_5s: c.slowest_5s,
            held_back_s: counts.held_back_s,
            channel_wait_s: r.channel_wait_s,
            behind_schedule_max_s: r.behind_max_s,
            behind_schedule_p95_s: r.behind_p95_s,
            connections: cfg.connections.max(1),
            publish_errors: counts.errors,
            rejected: counts.readings_rejected,
            cpu_s: o.cpu_s,
            cpu_us_per_acked: if counts.readings_acked > 0 {
                o.cpu_s * 1e6 / counts.readings_acked as f64
            } else {
                0.0
            },
            rss_peak_bytes: hardware::self_peak_rss_bytes(),
            memory_bytes_per_point: Some(
                generator_memory.values().sum::<u64>() as f64 / session.tags.len().max(1) as f64,
            ),
            memory_bytes: generator_memory,
        },
        ingest: Ingest {
            acked: c.acked,
            stored: c.stored,
            stored_ratio: if c.acked > 0 { c.stored as f64 / c.acked as f64 } else { 1.0 },
            short_seconds: c.short,
            short_seconds_count: c.short_count,
            missing_acked: c.missing,
            stored_beyond_acked: c.beyond,
            stored_rps: c.stored_rps,
            stored_rps_source: o.written_source.clone(),
            stored_rps_by_payload: c.stored_rps_by_payload,
            stored_rate_ratio: c.stored_rps.filter(|_| c.achieved_rps > 0.0).map(|s| s / c.achieved_rps),
            stored_rps_per_host_cpu: c.stored_rps.map(|s| s / env.nproc as f64),
            broker_dropped_delta: c.dropped,
            rows_per_day_at_this_rate: c.stored_rps.map(|s| s * 86_400.0),
        },
        lag,
        broker: c.broker,
        resources,
        containers: BTreeMap::new(),
        samples: std::mem::take(&mut o.samples),
        probes: std::mem::take(&mut o.probes),
        db,
        durability,
        topology,
        unmeasured,
        live_safety: std::mem::take(&mut o.live_samples),
        outcomes: Outcomes {
            ok: d.stored_error.is_none().then_some(c.stored),
            lost: d.stored_error.is_none().then_some(c.missing),
            unknown: r.readings_offered.saturating_sub(counts.readings_acked + counts.readings_rejected),
            refused: counts.readings_rejected,
            not_offered: r.readings_scheduled.saturating_sub(r.readings_offered),
        },
        ack_latency: c.ack_latency,
        store: c.store,
        series: c.series,
        canaries,
        workers: Vec::new(),
        faults: std::mem::take(&mut o.faults),
    };
    let mut ctx = verdict::Context {
        interrupted: o.interrupted,
        disk_low: o.disk_low,
        live_safety: o.live_safety.clone(),
        rules: env.budgets.rules.clone(),
        stored_unmeasured: d.stored_error.is_some(),
        ..Default::default()
    };
    ctx.sut_failures.extend(d.stream_note);
    if counts.errors > 0 && session.carrier.ack_means_stored() {
        ctx.sut_failures.push(format!(
            "{} JetStream publish errors ({})",
            counts.errors,
            counts.error_samples.join("; ")
        ));
    }
    if counts.readings_rejected > 0 {
        ctx.refusals = counts.error_samples.clone();
    }
    ctx.sut_failures.extend(d.drain_note);
    if o.report.stopped_early && !o.interrupted && o.live_safety.is_none() {
        ctx.aborted = Some("the producer stopped early (transport closed)".into());
    }
    (step, ctx)
}

/// Durability (server-level and, where the target can tell, as the ingest
/// path sees it) and storage sizes, from the counting adapter's stats.
pub(super) async fn read_stats(session: &Session, stored_rps: Option<f64>) -> (Db, Durability) {
    let q = session.counter.clone();
    let stats = tokio::task::spawn_blocking(move || q.lock().unwrap().stats())
        .await
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or_default();
    let mut db = Db::default();
    let mut durability = Durability::default();
    for s in &stats {
        let v = match (&s.number, &s.text) {
            (Some(n), _) => serde_json::json!(n),
            (None, Some(t)) => serde_json::json!(t),
            _ => serde_json::Value::Null,
        };
        db.stats.insert(s.name.clone(), v);
        match s.name.as_str() {
            "durability.fsync" => durability.fsync = s.text.clone(),
            "durability.synchronous_commit" => durability.synchronous_commit = s.text.clone(),
            "durability.full_page_writes" => durability.full_page_writes = s.text.clone(),
            "durability.ingest.fsync" => durability.ingest_fsync = s.text.clone(),
            "durability.ingest.synchronous_commit" => durability.ingest_synchronous_commit = s.text.clone(),
            "durability.ingest.full_page_writes" => durability.ingest_full_page_writes = s.text.clone(),
            "db.table_bytes" => db.table_bytes = s.number,
            "db.rows_estimate" | "db.rows" => db.rows_estimate = s.number,
            "db.database_bytes" => db.database_bytes = s.number,
            _ => {}
        }
    }
    let on = |v: &Option<String>| v.as_deref() == Some("on");
    let server = on(&durability.fsync) && on(&durability.synchronous_commit) && on(&durability.full_page_writes);
    let ingest_known = durability.ingest_synchronous_commit.is_some();
    durability.scope = if ingest_known { "ingest path".into() } else { "server-level only".into() };
    durability.comparable = server
        && (!ingest_known
            || (on(&durability.ingest_fsync)
                && on(&durability.ingest_synchronous_commit)
                && on(&durability.ingest_full_page_writes)));
    let settings = &session.durability_settings;
    if let Some(storage) = settings.get("jetstream.storage") {
        let js = JetStreamDurability {
            storage: storage.clone(),
            replicas: settings.get("jetstream.replicas").and_then(|r| r.parse().ok()).unwrap_or(1),
            sync_interval: settings
                .get("nats.sync_interval")
                .cloned()
                .unwrap_or_else(|| "unknown (a server scalebench did not start)".into()),
            server_version: settings.get("nats.server_version").cloned(),
        };
        durability.scope = "stream and servers".into();
        durability.comparable = js.storage == "file" && js.sync_interval == "always";
        durability.jetstream = Some(js);
    }
    if let (Some(b), Some(r), Some(rps)) = (db.table_bytes, db.rows_estimate, stored_rps) {
        if r > 0.0 {
            db.bytes_per_row = Some(b / r);
            db.bytes_per_day_raw_at_this_rate = Some(b / r * rps * 86_400.0);
        }
    }
    (db, durability)
}
