//! report.md, in the spirit of the messaging study this project started from: summary, where it ran, results,
//! hypotheses checked against the numbers, threats to validity, how to
//! reproduce. One function per section, in the order they appear.

use std::fmt::Write as _;

use super::{core, count, delay, gib, js, ms, opt, ran, stand_line, threats, NOT_SUPPORTED, SUPPORTED};
use scalebench_results::study::record::{StudyResult, ThroughputRow};

/// report.md: the sections in order, each written by a function of its own.
pub fn markdown(res: &StudyResult) -> String {
    let mut m = String::new();
    header(&mut m, res);
    executive_summary(&mut m, res);
    where_it_ran(&mut m, res);
    results(&mut m, res);
    methodology(&mut m, res);
    reproducing(&mut m, res);
    m
}

/// Title, what the study is, and a warning when the run did not complete.
fn header(m: &mut String, res: &StudyResult) {
    let stand = stand_line(res);
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
}

/// ## 1. Executive summary: the machine, the headline rates and delays, the verdicts.
fn executive_summary(m: &mut String, res: &StudyResult) {
    let hw = &res.hardware;
    let core1 = core(res, 1, 1, 128);
    let js_r3_1 = js(res, "file", 3, 1, 128, false);
    let js_sync = res.throughput.iter().find(|r| r.kind == "jetstream" && r.publish.starts_with("sync") && ran(r));
    let ping = delay(res, "ping");
    let flood = delay(res, "flood");
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
}

/// ## 2. Where it ran: the process/broker picture and the stand's facts.
fn where_it_ran(m: &mut String, res: &StudyResult) {
    let hw = &res.hardware;
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
}

/// ## 3. Results: brokers, then the core, JetStream and delay tables, then the charts.
fn results(m: &mut String, res: &StudyResult) {
    host_and_brokers(m, res);
    core_table(m, res);
    jetstream_table(m, res);
    delay_table(m, res);
    chart_links(m, res);
}

/// ### Host and brokers: /varz before and after, server processes from /proc.
fn host_and_brokers(m: &mut String, res: &StudyResult) {
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
}

/// ### Core NATS throughput (fan-out counted, never beside JetStream writes).
fn core_table(m: &mut String, res: &StudyResult) {
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
}

/// ### JetStream publish with acks: unique durable writes.
fn jetstream_table(m: &mut String, res: &StudyResult) {
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
}

/// ### Delay: ping and flood.
fn delay_table(m: &mut String, res: &StudyResult) {
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
}

/// ### Charts: each chart inline and linked.
fn chart_links(m: &mut String, res: &StudyResult) {
    let _ = writeln!(m, "### Charts\n");
    for c in &res.charts {
        let _ = writeln!(m, "#### {}\n\n![{}]({})\n\n[{}]({})\n", c.title, c.title, c.file, c.file, c.file);
    }
}

/// ## 4. Study methodology: question, hypotheses and verdicts, variables,
/// procedure, threats to validity and notes.
fn methodology(m: &mut String, res: &StudyResult) {
    question_and_hypotheses(m, res);
    variables(m, res);
    procedure(m, res);
    threats_and_notes(m, res);
}

/// ### 4.1 Question and 4.2 hypotheses with their verdicts.
fn question_and_hypotheses(m: &mut String, res: &StudyResult) {
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
}

/// ### 4.3 Independent and 4.4 dependent variables.
fn variables(m: &mut String, res: &StudyResult) {
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
}

/// ### 4.5 Controls and procedure.
fn procedure(m: &mut String, res: &StudyResult) {
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
}

/// ### 4.6 Threats to validity, then the run's notes.
fn threats_and_notes(m: &mut String, res: &StudyResult) {
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
}

/// ## 5. Reproducing this study: this run's command line and the same study's.
fn reproducing(m: &mut String, res: &StudyResult) {
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
}

fn verdict_mark(v: &str) -> &'static str {
    match v {
        SUPPORTED => "**supported**",
        NOT_SUPPORTED => "**not supported**",
        _ => "*not tested*",
    }
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
