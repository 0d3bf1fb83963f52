//! Threats to validity: the fixed ones of this stand, and those the data shows.

use scalebench_results::study::record::StudyResult;

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
