//! The study's verdicts, charts and Markdown report (in the spirit of the
//! messaging study this project started from: summary, where it ran, results, hypotheses checked against the
//! numbers, threats to validity). Fan-out counts (deliveries, pub+sub
//! aggregates) are always kept apart from unique JetStream writes.
//!
//! One concept per file: [`hypotheses`] (H1–H5 and their verdicts),
//! [`charts`] (the four SVG charts), [`markdown`] (report.md, one function
//! per section) and [`threats`] (threats to validity). This module holds the
//! lookups and number formats they share.

use scalebench_results::study::record::{DelayRow, StudyResult, ThroughputRow};

mod charts;
mod hypotheses;
mod markdown;
mod threats;

pub use charts::write_charts;
pub use hypotheses::{evaluate_hypotheses, H1, H2, H3, H4, H5};
pub use markdown::markdown;
pub use threats::threats;

/// The study's report for a finished record, in its results directory: the
/// hypotheses' verdicts and the charts go into the record, report.md beside
/// it. The engine's `run_study` calls this before it writes study.json.
pub fn draw(result: &mut StudyResult, out_dir: &std::path::Path) -> anyhow::Result<()> {
    result.hypotheses = evaluate_hypotheses(result);
    result.charts = write_charts(result, out_dir)?;
    let path = out_dir.join("report.md");
    crate::atomic_file::write(&path, markdown(result).as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

pub const SUPPORTED: &str = "supported";
pub const NOT_SUPPORTED: &str = "not supported";
pub const NOT_TESTED: &str = "not tested";

/// `12,345` (rounded): [`crate::format::whole`], with the study's "n/a"
/// for a value that is not finite.
pub fn count(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    crate::format::whole(v)
}

fn ms(v: f64) -> String {
    format!("{v:.3} ms")
}

fn ran(r: &ThroughputRow) -> bool {
    r.skipped.is_none() && r.published > 0 && r.pub_msgs_per_s > 0.0
}

fn core(res: &StudyResult, pubs: u32, subs: u32, size: usize) -> Option<&ThroughputRow> {
    res.throughput.iter().find(|r| {
        r.kind == "core" && r.publishers == pubs && r.subscribers == subs && r.payload_bytes == size && ran(r)
    })
}

fn js<'a>(
    res: &'a StudyResult,
    storage: &str,
    replicas: u32,
    pubs: u32,
    size: usize,
    sync: bool,
) -> Option<&'a ThroughputRow> {
    res.throughput.iter().find(|r| {
        r.kind == "jetstream"
            && r.storage.as_deref() == Some(storage)
            && r.replicas == Some(replicas)
            && r.publishers == pubs
            && r.payload_bytes == size
            && r.publish.starts_with("sync") == sync
            && ran(r)
    })
}

fn delay<'a>(res: &'a StudyResult, kind: &str) -> Option<&'a DelayRow> {
    res.delay.iter().find(|d| d.kind == kind && d.error.is_none() && d.received > 0)
}

fn stand_line(res: &StudyResult) -> String {
    let hw = &res.hardware;
    let what = match (res.target.kind.as_str(), res.target.nodes) {
        ("local", Some(1)) => "1 local nats-server".to_string(),
        ("local", Some(n)) => format!("{n} local nats-servers"),
        _ => format!("external cluster ({} URL(s))", res.target.client_urls.len()),
    };
    format!(
        "{what}, {} CPU(s), {}{}, run {}",
        hw.nproc,
        res.servers.first().map(|s| format!("nats-server {}", s.version)).unwrap_or_default(),
        if res.plan.quick { ", --quick" } else { "" },
        res.run_id
    )
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "—".into())
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests;
