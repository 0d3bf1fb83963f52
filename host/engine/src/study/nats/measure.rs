//! Running the plan: the rows in order (core, JetStream, ping, flood) on one
//! runtime, a progress line per row, a row that failed kept as such.

use std::time::Duration;

use anyhow::anyhow;

use super::client::connect;
use super::core_rows::core_row;
use super::delay::{flood_row, ping_row};
use super::jetstream::{js_row, js_row_shell};
use super::plan::{human, size_name, Plan};
use super::record::{DelayRow, ServerIdent, ThroughputRow};

#[derive(Default)]
pub(super) struct Collected {
    pub(super) servers: Vec<ServerIdent>,
    pub(super) throughput: Vec<ThroughputRow>,
    pub(super) delay: Vec<DelayRow>,
    pub(super) fatal: Option<String>,
}

pub(super) async fn measure(
    urls: &[String],
    plan: &Plan,
    tag: &str,
    local_nodes: Option<usize>,
    out: &mut Collected,
) -> anyhow::Result<()> {
    // Who is there: one connection per URL.
    for (i, url) in urls.iter().enumerate() {
        let c = connect(url, &format!("study-info-{i}"), 1024).await?;
        let info = c.server_info();
        out.servers.push(ServerIdent {
            url: url.clone(),
            server_name: info.server_name.clone(),
            version: info.version.clone(),
            cluster: info.cluster.clone(),
            jetstream: info.jetstream,
        });
        drop(c);
    }
    // A row that outlives this (a server gone, a client stuck) is cut off:
    // every row is bounded in time, not only in count.
    let row_bound = Duration::from_secs_f64(plan.row_time_cap_s * 2.0 + 30.0);
    let bounded = |e: tokio::time::error::Elapsed| anyhow!("the row did not finish within {row_bound:?} ({e})");
    for spec in &plan.core {
        let row = match tokio::time::timeout(row_bound, core_row(urls, tag, spec, plan))
            .await
            .map_err(bounded)
            .and_then(|r| r)
        {
            Ok(r) => r,
            Err(e) => failed_row(spec.name.clone(), "core", format!("{e:#}")),
        };
        progress(&row);
        out.throughput.push(row);
    }
    for (i, spec) in plan.jetstream.iter().enumerate() {
        let row = if local_nodes.is_some_and(|n| (spec.replicas as usize) > n) {
            let mut r = js_row_shell(spec);
            r.skipped = Some(format!(
                "replicas={} needs at least {} JetStream servers; this run has {} node(s) (--nodes {})",
                spec.replicas,
                spec.replicas,
                local_nodes.unwrap_or(0),
                local_nodes.unwrap_or(0)
            ));
            r
        } else {
            match tokio::time::timeout(row_bound, js_row(urls, tag, i, spec, plan))
                .await
                .map_err(bounded)
                .and_then(|r| r)
            {
                Ok(r) => r,
                Err(e) => {
                    let mut r = js_row_shell(spec);
                    r.errors = 1;
                    r.first_error = Some(format!("{e:#}"));
                    r
                }
            }
        };
        progress(&row);
        out.throughput.push(row);
    }
    let ping = tokio::time::timeout(row_bound, ping_row(urls, tag, plan))
        .await
        .map_err(bounded)
        .and_then(|r| r)
        .unwrap_or_else(|e| DelayRow {
            name: format!("ping-{}-{}", human(plan.ping_count), size_name(plan.ping_payload_bytes)),
            kind: "ping".into(),
            error: Some(format!("{e:#}")),
            ..Default::default()
        });
    progress_delay(&ping);
    out.delay.push(ping);
    for spec in &plan.floods {
        let row = tokio::time::timeout(row_bound, flood_row(urls, tag, spec, plan))
            .await
            .map_err(bounded)
            .and_then(|r| r)
            .unwrap_or_else(|e| DelayRow {
                name: spec.name.clone(),
                kind: "flood".into(),
                publishers: spec.publishers,
                payload_bytes: spec.payload_bytes,
                count: spec.messages,
                error: Some(format!("{e:#}")),
                ..Default::default()
            });
        progress_delay(&row);
        out.delay.push(row);
    }
    Ok(())
}

pub(super) fn progress(r: &ThroughputRow) {
    if let Some(s) = &r.skipped {
        tracing::info!("  {:<28} skipped: {s}", r.name);
    } else if r.kind == "core" {
        tracing::info!(
            "  {:<28} pub {:>10.0} msgs/s  deliveries {:>10.0} msgs/s  ({} of {} delivered){}",
            r.name,
            r.pub_msgs_per_s,
            r.sub_msgs_per_s.unwrap_or(0.0),
            r.delivered,
            r.expected_deliveries,
            r.first_error.as_deref().map(|e| format!("  error: {e}")).unwrap_or_default()
        );
    } else {
        tracing::info!(
            "  {:<28} acked {:>9.0} writes/s  ({} acked, {} stored, {} errors){}",
            r.name,
            r.pub_msgs_per_s,
            r.published,
            r.stored.map(|s| s.to_string()).unwrap_or_else(|| "?".into()),
            r.errors,
            r.first_error.as_deref().map(|e| format!("  error: {e}")).unwrap_or_default()
        );
    }
}

pub(super) fn progress_delay(r: &DelayRow) {
    match &r.error {
        Some(e) => tracing::warn!("  {:<28} error: {e}", r.name),
        None => tracing::info!(
            "  {:<28} p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms  ({} of {})",
            r.name,
            r.p50_ms,
            r.p99_ms,
            r.max_ms,
            r.received,
            r.count
        ),
    }
}

pub(super) fn failed_row(name: String, kind: &str, error: String) -> ThroughputRow {
    ThroughputRow { name, kind: kind.into(), errors: 1, first_error: Some(error), ..Default::default() }
}
