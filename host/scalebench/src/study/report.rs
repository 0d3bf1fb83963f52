//! The study's verdicts, charts and Markdown report (in the spirit of seed
//! 003: summary, where it ran, results, hypotheses checked against the
//! numbers, threats to validity). Fan-out counts (deliveries, pub+sub
//! aggregates) are always kept apart from unique JetStream writes.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;

use super::nats::{ChartFile, DelayRow, Hypothesis, StudyResult, ThroughputRow};
use crate::chart::{BarChart, Series};

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

fn h(id: &str, statement: &str, verdict: &str, evidence: String) -> Hypothesis {
    Hypothesis { id: id.into(), statement: statement.into(), verdict: verdict.into(), evidence }
}

pub const H1: &str = "Core vs JetStream: fire-and-forget core NATS publishes at least 10x as many messages/s as JetStream file storage with replicas=3 and acks (1 publisher, 128 B, async window), because a durable publish waits for a majority of replicas.";
pub const H2: &str = "JetStream parallelism: going from 1 to 4 publishers raises JetStream acked writes/s, but sub-linearly (more than 1.05x, less than 4x): the replicated log, not the publishers, is the limit.";
pub const H3: &str =
    "Storage: memory storage acks more writes/s than file storage at the same replicas and publisher count.";
pub const H4: &str =
    "Replication: replicas=1 acks more writes/s than replicas=3 at the same storage and publisher count.";
pub const H5: &str = "Burst delay: flood delay (publish a burst, then drain) is far above ping delay (p50 at least 10x), because it is queueing time that grows with the backlog, not the network path.";

/// H1–H5 checked against the rows.
pub fn evaluate_hypotheses(res: &StudyResult) -> Vec<Hypothesis> {
    let mut out = Vec::new();

    // H1
    let core1 = core(res, 1, 1, 128);
    let js_r3 = js(res, "file", 3, 1, 128, false);
    out.push(match (core1, js_r3) {
        (Some(c), Some(j)) => {
            let ratio = c.pub_msgs_per_s / j.pub_msgs_per_s;
            h(
                "H1",
                H1,
                if ratio >= 10.0 { SUPPORTED } else { NOT_SUPPORTED },
                format!(
                    "{}: {} msgs/s sent vs {}: {} acked writes/s = {ratio:.1}x",
                    c.name,
                    count(c.pub_msgs_per_s),
                    j.name,
                    count(j.pub_msgs_per_s)
                ),
            )
        }
        (c, _) => {
            let mut ev = "no JetStream file r=3 row ran (replicas=3 needs 3 nodes)".to_string();
            if let (Some(c), Some(j1)) = (c, js(res, "file", 1, 1, 128, false)) {
                let _ = write!(
                    ev,
                    "; for reference, against file r=1 ({}): {:.1}x",
                    j1.name,
                    c.pub_msgs_per_s / j1.pub_msgs_per_s
                );
            }
            h("H1", H1, NOT_TESTED, ev)
        }
    });

    // H2
    let pair = match (js(res, "file", 3, 1, 128, false), js(res, "file", 3, 4, 128, false)) {
        (Some(a), Some(b)) => Some((a, b, "")),
        _ => match (js(res, "file", 1, 1, 128, false), js(res, "file", 1, 4, 128, false)) {
            (Some(a), Some(b)) => Some((a, b, " (file r=1: no r=3 rows on this stand)")),
            _ => None,
        },
    };
    out.push(match pair {
        Some((one, four, why)) => {
            let ratio = four.pub_msgs_per_s / one.pub_msgs_per_s;
            let verdict = if ratio > 1.05 && ratio < 4.0 { SUPPORTED } else { NOT_SUPPORTED };
            let reading = if ratio <= 1.05 {
                "adding publishers did not raise the rate"
            } else if ratio >= 4.0 {
                "the rate grew linearly or better"
            } else {
                "more, but far from 4x"
            };
            h(
                "H2",
                H2,
                verdict,
                format!(
                    "{}: {} vs {}: {} acked writes/s = {ratio:.2}x: {reading}{why}",
                    one.name,
                    count(one.pub_msgs_per_s),
                    four.name,
                    count(four.pub_msgs_per_s)
                ),
            )
        }
        None => h("H2", H2, NOT_TESTED, "no pair of 1- and 4-publisher JetStream file rows ran".into()),
    });

    // H3 and H4: pairwise comparisons.
    let compare =
        |id: &str, statement: &str, pairs: Vec<(Option<&ThroughputRow>, Option<&ThroughputRow>)>, missing: &str| {
            let pairs: Vec<(&ThroughputRow, &ThroughputRow)> =
                pairs.into_iter().filter_map(|(a, b)| Some((a?, b?))).collect();
            if pairs.is_empty() {
                return h(id, statement, NOT_TESTED, missing.into());
            }
            let mut ev = Vec::new();
            let mut all = true;
            for (better, worse) in &pairs {
                let ratio = better.pub_msgs_per_s / worse.pub_msgs_per_s;
                all &= ratio > 1.0;
                ev.push(format!(
                    "{} {} vs {} {} ({ratio:.2}x)",
                    better.name,
                    count(better.pub_msgs_per_s),
                    worse.name,
                    count(worse.pub_msgs_per_s)
                ));
            }
            h(id, statement, if all { SUPPORTED } else { NOT_SUPPORTED }, format!("acked writes/s: {}", ev.join("; ")))
        };
    out.push(compare(
        "H3",
        H3,
        vec![
            (js(res, "memory", 1, 1, 128, false), js(res, "file", 1, 1, 128, false)),
            (js(res, "memory", 1, 4, 128, false), js(res, "file", 1, 4, 128, false)),
            (js(res, "memory", 3, 1, 128, false), js(res, "file", 3, 1, 128, false)),
            (js(res, "memory", 3, 4, 128, false), js(res, "file", 3, 4, 128, false)),
        ],
        "no memory/file pair at the same replicas and publishers ran",
    ));
    out.push(compare(
        "H4",
        H4,
        vec![
            (js(res, "file", 1, 1, 128, false), js(res, "file", 3, 1, 128, false)),
            (js(res, "file", 1, 4, 128, false), js(res, "file", 3, 4, 128, false)),
            (js(res, "memory", 1, 1, 128, false), js(res, "memory", 3, 1, 128, false)),
            (js(res, "memory", 1, 4, 128, false), js(res, "memory", 3, 4, 128, false)),
        ],
        "no r=1/r=3 pair ran (replicas=3 needs 3 nodes)",
    ));

    // H5
    out.push(match (delay(res, "ping"), delay(res, "flood")) {
        (Some(p), Some(f)) => {
            let ratio = f.p50_ms / p.p50_ms.max(1e-6);
            let all: Vec<String> = res
                .delay
                .iter()
                .filter(|d| d.kind == "flood" && d.error.is_none() && d.received > 0)
                .map(|d| format!("{} p50 {}", d.name, ms(d.p50_ms)))
                .collect();
            h(
                "H5",
                H5,
                if ratio >= 10.0 { SUPPORTED } else { NOT_SUPPORTED },
                format!(
                    "{} p50 {} vs {} p50 {} = {ratio:.0}x (floods: {})",
                    f.name,
                    ms(f.p50_ms),
                    p.name,
                    ms(p.p50_ms),
                    all.join(", ")
                ),
            )
        }
        _ => h("H5", H5, NOT_TESTED, "the ping or flood row did not produce delays".into()),
    });
    out
}

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

fn verdict_mark(v: &str) -> &'static str {
    match v {
        SUPPORTED => "**supported**",
        NOT_SUPPORTED => "**not supported**",
        _ => "*not tested*",
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "—".into())
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

/// report.md.
pub fn markdown(res: &StudyResult) -> String {
    let mut m = String::new();
    let hw = &res.hardware;
    let stand = stand_line(res);
    let core1 = core(res, 1, 1, 128);
    let js_r3_1 = js(res, "file", 3, 1, 128, false);
    let js_sync = res.throughput.iter().find(|r| r.kind == "jetstream" && r.publish.starts_with("sync") && ran(r));
    let ping = delay(res, "ping");
    let flood = delay(res, "flood");

    let _ = writeln!(m, "# NATS message speed — scalebench study `{}`\n", res.run_id);
    let _ = writeln!(
        m,
        "Core NATS vs JetStream on this machine: publisher counts, payload sizes, storage, replicas, ping vs flood delay \
         (after the NATS messaging study this project started from). {stand}. Data: [study.json](study.json).\n"
    );
    if res.ended_because != "completed" {
        let _ = writeln!(
            m,
            "> **This run did not complete: {}.** The rows below are what was measured before it stopped.\n",
            res.ended_because
        );
    }

    // 1. Executive summary
    let _ = writeln!(m, "## 1. Executive summary\n");
    let _ = writeln!(m, "| Item | This run |\n|---|---|");
    let _ = writeln!(
        m,
        "| Machine | {} ({}), {} CPU(s) `{}`, {} RAM |",
        hw.hostname,
        hw.cpu_model,
        hw.nproc,
        hw.cpu_affinity,
        gib(hw.ram_bytes)
    );
    let _ = writeln!(
        m,
        "| Brokers | {} |",
        match res.target.kind.as_str() {
            "local" => format!(
                "{} nats-server node(s) started by the study on 127.0.0.1 ({})",
                res.target.nodes.unwrap_or(0),
                res.target.server_binary.as_deref().unwrap_or("version unknown")
            ),
            _ => format!("external: {}", res.target.client_urls.join(", ")),
        }
    );
    let _ = writeln!(m, "| Client | {} in this process |", res.client_library);
    let _ = writeln!(m, "| Host load before | `{}` |", res.host_before.loadavg);
    let _ = writeln!(m, "| Host load after | `{}` |", res.host_after.loadavg);
    if let Some(c) = core1 {
        let _ = writeln!(m, "| Core 1p1s 128 B publish | {} msgs/s sent |", count(c.pub_msgs_per_s));
    }
    match js_r3_1 {
        Some(j) => {
            let _ =
                writeln!(m, "| JetStream file r=3, 1p, 128 B, async | {} acked writes/s |", count(j.pub_msgs_per_s));
        }
        None => {
            let _ = writeln!(m, "| JetStream file r=3 | not run (replicas=3 needs 3 nodes) |");
        }
    }
    if let Some(j) = js_sync {
        let _ = writeln!(
            m,
            "| JetStream {} r={}, 1p, {} B, sync (one ack at a time) | {} acked writes/s |",
            j.storage.as_deref().unwrap_or(""),
            j.replicas.unwrap_or(0),
            j.payload_bytes,
            count(j.pub_msgs_per_s)
        );
    }
    if let Some(p) = ping {
        let _ = writeln!(m, "| Ping p50 / p99 | {} / {} |", ms(p.p50_ms), ms(p.p99_ms));
    }
    if let Some(f) = flood {
        let _ = writeln!(m, "| Flood ({}) p50 / p99 | {} / {} |", f.name, ms(f.p50_ms), ms(f.p99_ms));
    }
    let _ = writeln!(m, "| Wall time | {:.1} s ({}) |", res.wall_seconds, res.ended_because);
    let _ = writeln!(m);
    let verdicts: Vec<String> = res.hypotheses.iter().map(|h| format!("{} {}", h.id, h.verdict)).collect();
    let _ = writeln!(m, "Hypotheses: {}. Section 4.2 gives the numbers behind each verdict.\n", verdicts.join("; "));
    let _ = writeln!(
        m,
        "Durable product traffic is the JetStream rows (acked unique writes). Core rows are fire-and-forget; their delivery \
         and aggregate columns count fan-out and are never set beside JetStream writes. Ping is one message in flight; \
         flood is a burst drained afterwards (queueing time).\n"
    );

    // 2. Where it ran
    let _ = writeln!(m, "## 2. Where it ran\n");
    let _ = writeln!(m, "Every process of this study ran on **{}**; all traffic stayed on 127.0.0.1.\n", hw.hostname);
    let _ = writeln!(m, "```");
    let _ = writeln!(
        m,
        "scalebench study nats  (one process: tokio, 2 workers; every publisher/subscriber its own connection)"
    );
    let _ = writeln!(m, "   |  NATS client protocol, 127.0.0.1 only");
    let _ = writeln!(m, "   v");
    let nodes: Vec<String> = res
        .servers
        .iter()
        .map(|s| {
            format!(
                "{} {}",
                if s.server_name.is_empty() { "?" } else { &s.server_name },
                s.url.trim_start_matches("nats://")
            )
        })
        .collect();
    let _ = writeln!(m, "{}", nodes.join("  ==routes==  "));
    if let Some(d) = &res.target.store_dir {
        let _ = writeln!(m, "JetStream store_dir under {d}");
    }
    let _ = writeln!(m, "```\n");
    let _ = writeln!(m, "| | |\n|---|---|");
    let _ = writeln!(m, "| CPU | {} × {} (affinity `{}`) |", hw.nproc, hw.cpu_model, hw.cpu_affinity);
    let _ = writeln!(m, "| RAM | {} |", gib(hw.ram_bytes));
    let _ = writeln!(m, "| Kernel | {} |", hw.kernel);
    let _ = writeln!(m, "| Disk free (results dir) | {} |", gib(hw.disk_free_bytes));
    let _ = writeln!(
        m,
        "| Load avg before / after | {:.2} / {:.2} (1 min) |",
        res.host_before.load_1m, res.host_after.load_1m
    );
    let versions: Vec<String> = res.servers.iter().map(|s| format!("{} {}", s.server_name, s.version)).collect();
    let _ = writeln!(m, "| Servers | {} |", versions.join(", "));
    let _ = writeln!(m, "| Client URLs | {} |", res.target.client_urls.join(", "));
    let _ = writeln!(
        m,
        "| Monitoring | {} |",
        if res.target.monitor_urls.is_empty() { "none given".into() } else { res.target.monitor_urls.join(", ") }
    );
    let _ = writeln!(
        m,
        "| scalebench | {} {} |",
        res.scalebench_version,
        res.scalebench_commit.as_deref().unwrap_or("(commit unknown)")
    );
    let _ = writeln!(m, "| Command | `{}` |", res.command_line.join(" ").replace('|', "\\|"));
    let _ = writeln!(m);

    // 3. Results
    let _ = writeln!(m, "## 3. Results\n");
    let _ = writeln!(m, "### Host and brokers\n");
    for (label, snaps) in [("Before", &res.varz_before), ("After", &res.varz_after)] {
        let _ = writeln!(m, "{label} (`/varz`):\n");
        if snaps.is_empty() {
            let _ = writeln!(m, "not recorded (no monitoring URL).\n");
            continue;
        }
        let _ = writeln!(m, "| Node | connections | routes | in_msgs | out_msgs | slow consumers | cpu % | mem | jetstream |\n|---|---:|---:|---:|---:|---:|---:|---:|---|");
        for s in snaps.iter() {
            match &s.error {
                Some(e) => {
                    let _ = writeln!(m, "| {} | error: {} | | | | | | | |", s.monitor_url, e.replace('|', "/"));
                }
                None => {
                    let _ = writeln!(
                        m,
                        "| {} | {} | {} | {} | {} | {} | {:.0} | {:.1} MiB | {} |",
                        s.server_name,
                        s.connections,
                        s.routes,
                        count(s.in_msgs as f64),
                        count(s.out_msgs as f64),
                        s.slow_consumers,
                        s.cpu,
                        s.mem_bytes as f64 / 1048576.0,
                        s.jetstream
                    );
                }
            }
        }
        let _ = writeln!(m);
    }
    if !res.server_processes.is_empty() {
        let _ = writeln!(m, "Server processes over the measured part (from /proc):\n");
        let _ = writeln!(m, "| Node | pid | CPU seconds | avg CPU % | RSS after |\n|---|---:|---:|---:|---:|");
        for p in &res.server_processes {
            let _ = writeln!(
                m,
                "| {} | {} | {:.1} | {:.0} | {:.1} MiB |",
                p.node,
                p.pid,
                p.cpu_seconds,
                p.cpu_percent,
                p.rss_bytes_after as f64 / 1048576.0
            );
        }
        let _ = writeln!(m);
    }

    let _ = writeln!(m, "### Core NATS throughput (fire-and-forget; deliveries count fan-out)\n");
    let _ = writeln!(
        m,
        "| Run | Pubs | Subs | Size | Published | Pub msgs/s | Pub MiB/s | Delivered (fan-out) | Deliveries/s | Deliveries MiB/s | Aggregate pub+deliveries/s | Note |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in res.throughput.iter().filter(|r| r.kind == "core") {
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} B | {} | {} | {:.2} | {} of {} | {} | {} | {} | {} |",
            r.name,
            r.publishers,
            r.subscribers,
            r.payload_bytes,
            count(r.published as f64),
            count(r.pub_msgs_per_s),
            r.pub_mib_per_s,
            count(r.delivered as f64),
            count(r.expected_deliveries as f64),
            opt(r.sub_msgs_per_s, count),
            opt(r.sub_mib_per_s, |v| format!("{v:.2}")),
            opt(r.aggregate_msgs_per_s, count),
            row_note(r)
        );
    }
    let _ = writeln!(m);
    let _ = writeln!(m, "### JetStream publish with acks (unique durable writes)\n");
    let _ = writeln!(
        m,
        "| Run | Storage | Replicas | Pubs | Size | Publish | Acked | Stored | Acked writes/s | MiB/s | Per-publisher writes/s (min / max) | Errors | Note |\n\
         |---|---|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---|"
    );
    for r in res.throughput.iter().filter(|r| r.kind == "jetstream") {
        if let Some(why) = &r.skipped {
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} B | {} | — | — | skipped | — | — | — | {} |",
                r.name,
                r.storage.as_deref().unwrap_or(""),
                r.replicas.unwrap_or(0),
                r.publishers,
                r.payload_bytes,
                r.publish,
                why.replace('|', "/")
            );
            continue;
        }
        let spread = if r.per_publisher_msgs_per_s.is_empty() {
            "—".to_string()
        } else {
            let lo = r.per_publisher_msgs_per_s.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = r.per_publisher_msgs_per_s.iter().copied().fold(0.0, f64::max);
            format!("{} / {}", count(lo), count(hi))
        };
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} B | {} | {} | {} | {} | {:.2} | {} | {} | {} |",
            r.name,
            r.storage.as_deref().unwrap_or(""),
            r.replicas.unwrap_or(0),
            r.publishers,
            r.payload_bytes,
            r.publish,
            count(r.published as f64),
            r.stored.map(|s| count(s as f64)).unwrap_or_else(|| "?".into()),
            count(r.pub_msgs_per_s),
            r.pub_mib_per_s,
            spread,
            r.errors,
            row_note(r)
        );
    }
    let _ = writeln!(m);
    let _ = writeln!(m, "### Delay (publish call → delivery to the subscriber)\n");
    let _ = writeln!(m, "| Run | Kind | Count | Received | Pubs | Size | min | avg | p50 | p90 | p99 | max | Note |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for d in &res.delay {
        if let Some(e) = &d.error {
            let _ = writeln!(
                m,
                "| {} | {} | {} | — | {} | {} B | | | | | | | error: {} |",
                d.name,
                d.kind,
                d.count,
                d.publishers,
                d.payload_bytes,
                e.replace('|', "/")
            );
            continue;
        }
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} | {} B | {} | {} | {} | {} | {} | {} | {} |",
            d.name,
            if d.kind == "ping" { "ping (one in flight)" } else { "flood (burst, then drain)" },
            d.count,
            d.received,
            d.publishers,
            d.payload_bytes,
            ms(d.min_ms),
            ms(d.avg_ms),
            ms(d.p50_ms),
            ms(d.p90_ms),
            ms(d.p99_ms),
            ms(d.max_ms),
            d.note.replace('|', "/")
        );
    }
    let _ = writeln!(m);
    let _ = writeln!(m, "### Charts\n");
    for c in &res.charts {
        let _ = writeln!(m, "#### {}\n\n![{}]({})\n\n[{}]({})\n", c.title, c.title, c.file, c.file, c.file);
    }

    // 4. Methodology
    let _ = writeln!(m, "## 4. Study methodology\n");
    let _ = writeln!(m, "### 4.1 Question\n");
    let _ = writeln!(
        m,
        "On this machine, what message throughput and delay do core NATS and JetStream deliver at several loads, \
         and which part is the limiter for durable (acked) traffic?\n"
    );
    let _ = writeln!(m, "### 4.2 Hypotheses (stated before the run) and verdicts\n");
    let _ = writeln!(m, "| | Hypothesis | Verdict | Evidence |\n|---|---|---|---|");
    for hy in &res.hypotheses {
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} |",
            hy.id,
            hy.statement,
            verdict_mark(&hy.verdict),
            hy.evidence.replace('|', "/")
        );
    }
    let _ = writeln!(m);
    let _ = writeln!(m, "### 4.3 Independent variables\n");
    let _ = writeln!(m, "| Factor | Levels |\n|---|---|");
    let _ = writeln!(m, "| Transport | core NATS pub/sub; JetStream publish with acks |");
    let _ = writeln!(m, "| Storage / replicas | file r=3, file r=1, memory r=1, memory r=3 |");
    let _ =
        writeln!(m, "| Ack mode | async (window {} per publisher); sync (one ack at a time) |", res.plan.ack_window);
    let _ = writeln!(
        m,
        "| Publishers | 1, 4, 8 |\n| Subscribers | 0 (JetStream publish-only), 1, 4, 8 |\n| Payload | 128 B, 1 KiB |"
    );
    let counts: Vec<String> = res
        .plan
        .core
        .iter()
        .map(|c| c.messages)
        .chain(res.plan.jetstream.iter().map(|j| j.messages))
        .chain(res.plan.floods.iter().map(|f| f.messages))
        .collect::<std::collections::BTreeSet<u64>>()
        .into_iter()
        .map(|n| count(n as f64))
        .collect();
    let _ = writeln!(m, "| Messages per row | {} |", counts.join(", "));
    let _ = writeln!(m, "| Delay mode | ping ({} round trips) vs flood (burst, then drain) |\n", res.plan.ping_count);
    let _ = writeln!(m, "### 4.4 Dependent variables\n");
    let _ = writeln!(m, "| Metric | Instrument | Unit |\n|---|---|---|");
    let _ = writeln!(m, "| Publish rate | core: messages handed to the client, up to the flush (PING/PONG) that proves the server read them; JetStream: acks received; / time to the last flush or ack | msgs/s, MiB/s (2^20 B) |");
    let _ = writeln!(
        m,
        "| Delivery rate | deliveries across all subscribers / time to the last delivery | msgs/s (fan-out counted) |"
    );
    let _ = writeln!(m, "| Aggregate | (published + deliveries) / the longer time | msgs/s (fan-out counted; never beside JetStream writes) |");
    let _ = writeln!(m, "| Publisher spread | each publisher's own rate | msgs/s (not delay) |");
    let _ = writeln!(m, "| Stored | stream message count after the row, warm-up excluded | messages |");
    let _ = writeln!(m, "| Delay | publish call → delivery, one monotonic clock in one process, HDR histogram (3 digits) | ms: min, avg, p50, p90, p99, max |");
    let _ = writeln!(m, "| Host load | /proc/loadavg before and after | load average |");
    let _ =
        writeln!(m, "| Broker counters | /varz of each node before and after | connections, in/out msgs, cpu, mem |\n");
    let _ = writeln!(m, "### 4.5 Controls and procedure\n");
    let _ = writeln!(m, "1. Snapshot host load and every node's /varz; identify each server (INFO: name, version).");
    let _ = writeln!(m, "2. Core ladder: for each row, subscribers connect and subscribe, publishers connect; a warm-up proves every subscriber hears every publisher; then the clock starts. Publisher k uses node k mod n, subscriber k node k+1 mod n.");
    let _ = writeln!(m, "3. JetStream ladder: per row a throwaway stream (`SCALEBENCH_STUDY_*`, subjects `bench.js.*`) with the row's storage and replicas; one acked warm-up publish per publisher; the measured publishes; the stream's count; the stream is deleted.");
    let _ = writeln!(m, "4. Ping: publisher on the first node, subscriber on the last (one route hop in a cluster); next publish after the previous one arrived.");
    let _ = writeln!(m, "5. Flood: publishers send the burst while the subscriber holds off; then it drains.");
    let _ = writeln!(
        m,
        "6. Snapshot /varz and host load again; stop the local nodes; write study.json, the charts and this report.\n"
    );
    let _ = writeln!(m, "Every row is bounded: at most {:.0} s of publishing, and a subscriber that hears nothing for {:.0} s after the publishers finished is done. Only throwaway subjects (`bench.*`) and streams (`SCALEBENCH_STUDY_*`) are used.\n", res.plan.row_time_cap_s, res.plan.idle_timeout_s);

    let _ = writeln!(m, "### 4.6 Threats to validity\n");
    let _ = writeln!(m, "| Threat | Effect on numbers |\n|---|---|");
    for (t, e) in threats(res) {
        let _ = writeln!(m, "| {t} | {e} |");
    }
    let _ = writeln!(m);
    if !res.notes.is_empty() {
        let _ = writeln!(m, "### Notes\n");
        for n in &res.notes {
            let _ = writeln!(m, "- {n}");
        }
        let _ = writeln!(m);
    }
    let _ = writeln!(m, "## 5. Reproducing this study\n");
    let _ = writeln!(m, "This run's command line:\n\n```\n{}\n```\n", res.command_line.join(" "));
    let mut cmd = String::from("scalebench study nats");
    if res.plan.quick {
        cmd.push_str(" --quick");
    }
    match res.target.kind.as_str() {
        "local" => {
            let _ = write!(cmd, " --nodes {}", res.target.nodes.unwrap_or(3));
        }
        _ => {
            let _ = write!(cmd, " --url {}", res.target.client_urls.join(","));
            if !res.target.monitor_urls.is_empty() {
                let _ = write!(cmd, " --monitor-url {}", res.target.monitor_urls.join(","));
            }
        }
    }
    let _ = writeln!(m, "The same study from the command line:\n\n```\n{cmd}\n```\n");
    let _ = writeln!(m, "Each run writes a new `results/<utc>/` with study.json, report.md, charts/ and (local stand) logs/, so H1–H5 can be compared run against run.");
    m
}

fn row_note(r: &ThroughputRow) -> String {
    let mut parts = Vec::new();
    if r.capped {
        parts.push("hit the time cap".to_string());
    }
    if let Some(e) = &r.first_error {
        parts.push(format!("error: {e}"));
    }
    if !r.note.is_empty() {
        parts.push(r.note.clone());
    }
    parts.join("; ").replace('|', "/")
}

/// Threats to validity: the fixed ones of this stand, and those the data shows.
pub fn threats(res: &StudyResult) -> Vec<(String, String)> {
    let hw = &res.hardware;
    let mut t: Vec<(String, String)> = Vec::new();
    let local = res.target.kind == "local";
    t.push((
        format!("Shared {}-CPU host", hw.nproc),
        format!(
            "Brokers, the bench client and anything else on the machine share {} CPU(s) (load {:.2} before, {:.2} after). Load during the run is part of the result, not noise to ignore.",
            hw.nproc, res.host_before.load_1m, res.host_after.load_1m
        ),
    ));
    t.push((
        "Client and server on the same CPUs".into(),
        "The client's own cost is inside every number; on the core rows the client may well be the limiter, not nats-server.".into(),
    ));
    if local {
        t.push(("Loopback only".into(), "No NIC, no real network delay; routes between nodes are loopback TCP. Ping delay is a floor, not a LAN figure.".into()));
        if res.target.nodes.unwrap_or(1) > 1 {
            t.push((
                "One failure domain".into(),
                "Three replicas are three processes on one host and one disk: replicas=3 measures the replication protocol's cost, not disk or host HA.".into(),
            ));
        }
        t.push((
            "What an ack means".into(),
            "nats-server acks a JetStream publish once the stream's replicas have it (quorum) and it is written to the OS; with default settings the file store is fsynced periodically, not per message. Acked is not fsynced.".into(),
        ));
    }
    if res.plan.quick {
        t.push((
            "Short runs (--quick)".into(),
            "Seconds of traffic per row: start-up effects weigh more, no compaction, no page-cache pressure. Use the full study for numbers to quote.".into(),
        ));
    } else {
        t.push((
            "Short runs".into(),
            "Seconds to a minute of traffic per row: no multi-hour soak, compaction or page-cache eviction.".into(),
        ));
    }
    t.push(("No TLS, no auth".into(), "Production auth and TLS cost CPU: do not read these as post-TLS rates.".into()));
    t.push((
        "Fan-out aggregate".into(),
        "Core deliveries and the pub+deliveries aggregate count every subscriber's copy. Never compare those columns with JetStream unique writes.".into(),
    ));
    t.push((
        "Flood is not a round trip".into(),
        "Flood delay is queueing of a burst the subscriber drains afterwards; mixing it with ping percentiles would tell a false 'NATS is slow' story.".into(),
    ));
    t.push((
        "One client library".into(),
        format!(
            "{}; numbers differ from the nats CLI's bench (different batching, and it reports rate spread, not delay).",
            res.client_library
        ),
    ));
    // What the data shows.
    let capped: Vec<&str> = res.throughput.iter().filter(|r| r.capped).map(|r| r.name.as_str()).collect();
    if !capped.is_empty() {
        t.push((
            "Rows cut by the time cap".into(),
            format!("{}: they published less than planned; their rates cover what was sent.", capped.join(", ")),
        ));
    }
    let errs: Vec<String> =
        res.throughput.iter().filter(|r| r.errors > 0).map(|r| format!("{} ({} errors)", r.name, r.errors)).collect();
    if !errs.is_empty() {
        t.push(("Errors".into(), format!("{}: see the rows' notes.", errs.join(", "))));
    }
    let short: Vec<String> = res
        .throughput
        .iter()
        .filter(|r| r.kind == "core" && r.skipped.is_none() && r.delivered < r.expected_deliveries)
        .map(|r| format!("{} ({} of {})", r.name, r.delivered, r.expected_deliveries))
        .collect();
    if !short.is_empty() {
        t.push((
            "Missing deliveries".into(),
            format!("{}: core NATS drops for slow consumers; the delivery rate covers what arrived.", short.join(", ")),
        ));
    }
    let unstored: Vec<String> = res
        .throughput
        .iter()
        .filter(|r| r.kind == "jetstream" && r.stored.is_some_and(|s| s < r.published))
        .map(|r| format!("{} ({} stored of {} acked)", r.name, r.stored.unwrap_or(0), r.published))
        .collect();
    if !unstored.is_empty() {
        t.push((
            "Acked but not stored".into(),
            format!("{}: acked writes missing from the stream.", unstored.join(", ")),
        ));
    }
    let slow: u64 = res
        .varz_after
        .iter()
        .map(|v| v.slow_consumers)
        .sum::<u64>()
        .saturating_sub(res.varz_before.iter().map(|v| v.slow_consumers).sum());
    if slow > 0 {
        t.push((
            "Slow consumers".into(),
            format!("The servers counted {slow} new slow-consumer event(s) during the run."),
        ));
    }
    let skipped: Vec<&str> = res.throughput.iter().filter(|r| r.skipped.is_some()).map(|r| r.name.as_str()).collect();
    if !skipped.is_empty() {
        t.push((
            "Rows not run".into(),
            format!(
                "{}: see the JetStream table for why; hypotheses that need them are 'not tested'.",
                skipped.join(", ")
            ),
        ));
    }
    t.into_iter().map(|(a, b)| (a.replace('|', "/"), b.replace('|', "/"))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::nats::{ChartFile, Plan, StudyResult, Target};

    fn core_row(p: u32, s: u32, rate: f64) -> ThroughputRow {
        ThroughputRow {
            name: format!("core-{p}p{s}s"),
            kind: "core".into(),
            publishers: p,
            subscribers: s,
            payload_bytes: 128,
            published: 1000,
            delivered: 1000 * s as u64,
            expected_deliveries: 1000 * s as u64,
            pub_msgs_per_s: rate,
            sub_msgs_per_s: Some(rate * s as f64),
            aggregate_msgs_per_s: Some(rate * (1 + s) as f64),
            publish: "fire-and-forget".into(),
            ..Default::default()
        }
    }

    fn js_row(storage: &str, r: u32, p: u32, rate: Option<f64>) -> ThroughputRow {
        ThroughputRow {
            name: format!("js-{storage}-r{r}-{p}p"),
            kind: "jetstream".into(),
            storage: Some(storage.into()),
            replicas: Some(r),
            publishers: p,
            payload_bytes: 128,
            publish: "async acks, window 256 per publisher".into(),
            published: if rate.is_some() { 1000 } else { 0 },
            stored: rate.map(|_| 1000),
            pub_msgs_per_s: rate.unwrap_or(0.0),
            skipped: if rate.is_none() { Some("replicas=3 needs at least 3 JetStream servers".into()) } else { None },
            ..Default::default()
        }
    }

    fn delay_row(kind: &str, p50: f64) -> DelayRow {
        DelayRow {
            name: format!("{kind}-x"),
            kind: kind.into(),
            count: 100,
            received: 100,
            min_ms: p50 / 2.0,
            avg_ms: p50,
            p50_ms: p50,
            p90_ms: p50 * 1.5,
            p99_ms: p50 * 2.0,
            max_ms: p50 * 3.0,
            ..Default::default()
        }
    }

    fn study(throughput: Vec<ThroughputRow>, delay: Vec<DelayRow>) -> StudyResult {
        StudyResult {
            schema: crate::study::nats::SCHEMA.into(),
            run_id: "20261130T150000Z".into(),
            started_utc: String::new(),
            finished_utc: String::new(),
            wall_seconds: 1.0,
            ended_because: "completed".into(),
            command_line: vec!["scalebench".into(), "study".into(), "nats".into()],
            scalebench_version: "0.1.0".into(),
            scalebench_commit: None,
            client_library: "test".into(),
            target: Target { kind: "local".into(), nodes: Some(3), ..Default::default() },
            plan: Plan::new(true),
            hardware: Default::default(),
            servers: vec![],
            host_before: Default::default(),
            host_after: Default::default(),
            varz_before: vec![],
            varz_after: vec![],
            server_processes: vec![],
            throughput,
            delay,
            hypotheses: vec![],
            charts: vec![ChartFile { file: "charts/a.svg".into(), title: "A <chart>".into() }],
            notes: vec![],
        }
    }

    fn verdicts(s: &StudyResult) -> Vec<String> {
        evaluate_hypotheses(s).into_iter().map(|h| format!("{} {}", h.id, h.verdict)).collect()
    }

    #[test]
    fn hypotheses_on_a_cluster() {
        let s = study(
            vec![
                core_row(1, 1, 500_000.0),
                js_row("file", 3, 1, Some(10_000.0)),
                js_row("file", 3, 4, Some(18_000.0)),
                js_row("file", 1, 1, Some(20_000.0)),
                js_row("file", 1, 4, Some(30_000.0)),
                js_row("memory", 1, 1, Some(40_000.0)),
                js_row("memory", 1, 4, Some(25_000.0)), // below file r=1 4p: H3 fails on this pair
                js_row("memory", 3, 1, Some(15_000.0)),
                js_row("memory", 3, 4, Some(20_000.0)),
            ],
            vec![delay_row("ping", 0.2), delay_row("flood", 50.0)],
        );
        assert_eq!(verdicts(&s), ["H1 supported", "H2 supported", "H3 not supported", "H4 supported", "H5 supported"]);
        let h3 = &evaluate_hypotheses(&s)[2];
        assert!(h3.evidence.contains("js-memory-r1-4p 25,000 vs js-file-r1-4p 30,000 (0.83x)"), "{}", h3.evidence);
    }

    #[test]
    fn hypotheses_on_a_single_node_are_not_tested_where_replicas_3_is_missing() {
        let s = study(
            vec![
                core_row(1, 1, 500_000.0),
                js_row("file", 3, 1, None),
                js_row("file", 3, 4, None),
                js_row("file", 1, 1, Some(20_000.0)),
                js_row("file", 1, 4, Some(19_500.0)),
                js_row("memory", 1, 1, Some(40_000.0)),
                js_row("memory", 1, 4, Some(45_000.0)),
            ],
            vec![delay_row("ping", 0.2), delay_row("flood", 1.0)],
        );
        assert_eq!(
            verdicts(&s),
            ["H1 not tested", "H2 not supported", "H3 supported", "H4 not tested", "H5 not supported"]
        );
        let h = evaluate_hypotheses(&s);
        assert!(h[0].evidence.contains("against file r=1") && h[0].evidence.contains("25.0x"), "{}", h[0].evidence);
        assert!(h[1].evidence.contains("file r=1") && h[1].evidence.contains("did not raise"), "{}", h[1].evidence);
    }

    #[test]
    fn report_states_hypotheses_threats_and_links_charts() {
        let mut s = study(vec![core_row(1, 1, 500_000.0), js_row("file", 3, 1, None)], vec![delay_row("ping", 0.2)]);
        s.throughput[0].capped = true;
        s.hypotheses = evaluate_hypotheses(&s);
        let md = markdown(&s);
        for id in ["| H1 |", "| H2 |", "| H3 |", "| H4 |", "| H5 |"] {
            assert!(md.contains(id), "{id}");
        }
        assert!(md.contains("](charts/a.svg)"));
        assert!(md.contains("Rows cut by the time cap") && md.contains("Rows not run"));
        assert!(md.contains("*not tested*"));
        assert!(md.contains("scalebench study nats --quick --nodes 3"));
        let dir = tempfile::tempdir().unwrap();
        let charts = write_charts(&s, dir.path()).unwrap();
        assert_eq!(charts.len(), 4);
        for c in &charts {
            assert!(dir.path().join(&c.file).is_file());
        }
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(count(0.0), "0");
        assert_eq!(count(999.4), "999");
        assert_eq!(count(1_760_599.0), "1,760,599");
        assert_eq!(count(-12_345.0), "-12,345");
        assert_eq!(count(f64::NAN), "n/a");
    }
}
