//! The study's four SVG charts, drawn by [`crate::chart`].

use std::path::Path;

use anyhow::Context as _;

use super::stand_line;
use crate::chart::{BarChart, Series};
use scalebench_results::study::record::{ChartFile, DelayRow, StudyResult, ThroughputRow};

/// The four charts, written under `dir/charts/`.
pub fn write_charts(res: &StudyResult, dir: &Path) -> anyhow::Result<Vec<ChartFile>> {
    let charts_dir = dir.join("charts");
    std::fs::create_dir_all(&charts_dir).with_context(|| format!("cannot create {}", charts_dir.display()))?;
    let stand = stand_line(res);
    let core_rows: Vec<&ThroughputRow> = res.throughput.iter().filter(|r| r.kind == "core").collect();
    let js_rows: Vec<&ThroughputRow> = res.throughput.iter().filter(|r| r.kind == "jetstream").collect();
    let val = |r: &ThroughputRow, v: f64| if r.skipped.is_none() && v > 0.0 { Some(v) } else { None };

    let mut charts = Vec::new();
    let mut put = |file: &str, chart: BarChart| -> anyhow::Result<()> {
        let path = charts_dir.join(file);
        std::fs::write(&path, chart.render().text).with_context(|| format!("cannot write {}", path.display()))?;
        charts.push(ChartFile { file: format!("charts/{file}"), title: chart.title.clone() });
        Ok(())
    };

    put(
        "throughput-core.svg",
        BarChart {
            title: "Core NATS per load: published vs delivered".into(),
            subtitle: stand.clone(),
            value_label: "messages per second".into(),
            categories: core_rows.iter().map(|r| r.name.clone()).collect(),
            series: vec![
                Series {
                    name: "published msgs/s (unique)".into(),
                    values: core_rows.iter().map(|r| val(r, r.pub_msgs_per_s)).collect(),
                },
                Series {
                    name: "delivered msgs/s (fan-out: x subscribers)".into(),
                    values: core_rows.iter().map(|r| val(r, r.sub_msgs_per_s.unwrap_or(0.0))).collect(),
                },
            ],
            log_scale: false,
            note:
                "Deliveries count every subscriber's copy (fan-out); do not compare them with JetStream unique writes."
                    .into(),
            markers: None,
        },
    )?;
    put(
        "throughput-jetstream.svg",
        BarChart {
            title: "JetStream per load: acked unique writes".into(),
            subtitle: stand.clone(),
            value_label: "acked writes per second".into(),
            categories: js_rows.iter().map(|r| r.name.clone()).collect(),
            series: vec![Series {
                name: "acked unique writes/s".into(),
                values: js_rows.iter().map(|r| val(r, r.pub_msgs_per_s)).collect(),
            }],
            log_scale: false,
            note: "Each message counted once, when its ack arrived. 'not run': skipped (see report.md).".into(),
            markers: None,
        },
    )?;
    let both: Vec<&ThroughputRow> = core_rows.iter().chain(js_rows.iter()).copied().collect();
    put(
        "core-vs-jetstream-log.svg",
        BarChart {
            title: "Publish rate: core NATS vs JetStream (log scale)".into(),
            subtitle: stand.clone(),
            value_label: "unique messages per second".into(),
            categories: both.iter().map(|r| r.name.clone()).collect(),
            series: vec![
                Series {
                    name: "core: sent/s, fire-and-forget".into(),
                    values: both
                        .iter()
                        .map(|r| if r.kind == "core" { val(r, r.pub_msgs_per_s) } else { None })
                        .collect(),
                },
                Series {
                    name: "JetStream: acked unique writes/s".into(),
                    values: both
                        .iter()
                        .map(|r| if r.kind == "jetstream" { val(r, r.pub_msgs_per_s) } else { None })
                        .collect(),
                },
            ],
            log_scale: true,
            note: "Unique publishes only: no fan-out deliveries and no pub+sub aggregate in this chart.".into(),
            markers: None,
        },
    )?;
    let delays: Vec<&DelayRow> = res.delay.iter().filter(|d| d.error.is_none() && d.received > 0).collect();
    type Pick = fn(&DelayRow) -> f64;
    let pct: [(&str, Pick); 5] = [
        ("min", |d| d.min_ms),
        ("p50", |d| d.p50_ms),
        ("p90", |d| d.p90_ms),
        ("p99", |d| d.p99_ms),
        ("max", |d| d.max_ms),
    ];
    put(
        "delay-log.svg",
        BarChart {
            title: "Delay percentiles: ping vs flood (log scale)".into(),
            subtitle: stand,
            value_label: "milliseconds, publish call to delivery".into(),
            categories: pct.iter().map(|(n, _)| n.to_string()).collect(),
            series: delays
                .iter()
                .map(|d| Series {
                    name: format!("{} ({})", d.name, d.kind),
                    values: pct.iter().map(|(_, f)| Some(f(d))).collect(),
                })
                .collect(),
            log_scale: true,
            note: "Ping: one message in flight. Flood: burst, then drain (queueing time, not a round trip).".into(),
            markers: None,
        },
    )?;
    Ok(charts)
}
