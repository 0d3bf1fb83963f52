//! The delay rows: ping (one message in flight) and flood (a burst, then
//! drained), publish call → delivery on one monotonic clock.

use std::time::{Duration, Instant};

use anyhow::anyhow;
use futures_util::StreamExt;

use super::client::{connect, landed_on, node_of, parse_seq, payload, warm_up};
use super::plan::{human, size_name, FloodSpec, Plan};
use super::record::DelayRow;

pub(super) fn delay_stats(name: &str, kind: &str, hist: &hdrhistogram::Histogram<u64>) -> DelayRow {
    let ms = |ns: u64| ns as f64 / 1e6;
    let n = hist.len();
    DelayRow {
        name: name.into(),
        kind: kind.into(),
        received: n,
        min_ms: if n > 0 { ms(hist.min()) } else { 0.0 },
        avg_ms: if n > 0 { hist.mean() / 1e6 } else { 0.0 },
        p50_ms: ms(hist.value_at_quantile(0.50)),
        p90_ms: ms(hist.value_at_quantile(0.90)),
        p99_ms: ms(hist.value_at_quantile(0.99)),
        max_ms: ms(hist.max()),
        ..Default::default()
    }
}

pub(super) fn new_hist() -> anyhow::Result<hdrhistogram::Histogram<u64>> {
    // 1 ns .. 10 min, 3 significant digits.
    hdrhistogram::Histogram::<u64>::new_with_bounds(1, 600_000_000_000, 3).map_err(|e| anyhow!("histogram: {e}"))
}

pub(super) async fn ping_row(urls: &[String], tag: &str, plan: &Plan) -> anyhow::Result<DelayRow> {
    let name = format!("ping-{}-{}", human(plan.ping_count), size_name(plan.ping_payload_bytes));
    let subject = async_nats::Subject::from(format!("bench.lat.{tag}.ping"));
    let sub_client = connect(&urls[urls.len() - 1], "study-ping-sub", 65_536).await?;
    let mut sub = sub_client.subscribe(subject.clone()).await?;
    sub_client.flush().await?;
    let pub_client = connect(&urls[0], "study-ping-pub", 1024).await?;
    warm_up(std::slice::from_ref(&pub_client), std::slice::from_mut(&mut sub), &subject).await?;
    let landed = format!(
        "publisher on {}, subscriber on {}",
        pub_client.server_info().server_name,
        sub_client.server_info().server_name
    );

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u64, Instant)>();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let reader = tokio::spawn(async move {
        loop {
            tokio::select! {
                m = sub.next() => match m {
                    Some(m) => {
                        let at = Instant::now();
                        if let Some((_, seq)) = parse_seq(&m.payload) {
                            if tx.send((seq, at)).is_err() { break; }
                        }
                    }
                    None => break,
                },
                _ = stop_rx.changed() => break,
            }
        }
    });
    let mut hist = new_hist()?;
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(plan.row_time_cap_s);
    let mut lost = 0u64;
    let mut sent_n = 0u64;
    for seq in 0..plan.ping_count {
        if Instant::now() > deadline {
            break;
        }
        let body = payload(plan.ping_payload_bytes, 0, seq);
        let sent = Instant::now();
        pub_client.publish(subject.clone(), body).await?;
        sent_n += 1;
        // Wait for this one (older ones that arrive late are skipped).
        let wait_until = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            match tokio::time::timeout_at(wait_until, rx.recv()).await {
                Ok(Some((s, at))) if s == seq => {
                    hist.record((at - sent).as_nanos().max(1) as u64).ok();
                    break;
                }
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => {
                    lost += 1;
                    break;
                }
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let _ = stop_tx.send(true);
    let _ = reader.await;
    let _ = pub_client.drain().await;
    let _ = sub_client.drain().await;
    let mut row = delay_stats(&name, "ping", &hist);
    row.publishers = 1;
    row.payload_bytes = plan.ping_payload_bytes;
    row.count = sent_n;
    row.seconds = secs;
    row.note = format!(
        "{landed}; sequential: next publish after this one arrived{}",
        if lost > 0 { format!("; {lost} not seen within 2 s") } else { String::new() }
    );
    Ok(row)
}

pub(super) async fn flood_row(urls: &[String], tag: &str, spec: &FloodSpec, plan: &Plan) -> anyhow::Result<DelayRow> {
    let subject = async_nats::Subject::from(format!("bench.lat.{tag}.{}", spec.name));
    let cap = (spec.messages as usize + 4096).clamp(65_536, 1 << 21);
    let sub_client = connect(&urls[urls.len() - 1], &format!("study-{}-sub", spec.name), cap).await?;
    let mut sub = sub_client.subscribe(subject.clone()).await?;
    sub_client.flush().await?;
    let mut pubs = Vec::new();
    for k in 0..spec.publishers as usize {
        pubs.push(connect(node_of(urls, k), &format!("study-{}-pub{k}", spec.name), 1024).await?);
    }
    warm_up(&pubs, std::slice::from_mut(&mut sub), &subject).await?;
    let landed = landed_on(&pubs, std::slice::from_ref(&sub_client));

    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(plan.row_time_cap_s);
    let mut tasks = Vec::new();
    for (k, p) in pubs.iter().cloned().enumerate() {
        let share =
            spec.messages / spec.publishers as u64 + u64::from((k as u64) < spec.messages % spec.publishers as u64);
        let subject = subject.clone();
        let size = spec.payload_bytes;
        tasks.push(tokio::spawn(async move {
            let mut sent = Vec::with_capacity(share as usize);
            for seq in 0..share {
                if seq % 256 == 0 && Instant::now() > deadline {
                    break;
                }
                let body = payload(size, k as u32, seq);
                sent.push(Instant::now());
                if p.publish(subject.clone(), body).await.is_err() {
                    sent.pop();
                    break;
                }
            }
            let _ = p.flush().await;
            sent
        }));
    }
    let mut sent: Vec<Vec<Instant>> = Vec::new();
    for t in tasks {
        sent.push(t.await?);
    }
    let total: u64 = sent.iter().map(|v| v.len() as u64).sum();
    // Now drain: every message's delay is publish call → taken off the subscription.
    let mut hist = new_hist()?;
    let idle = Duration::from_secs_f64(plan.idle_timeout_s);
    let hard_stop = tokio::time::Instant::now() + Duration::from_secs_f64(plan.row_time_cap_s) + idle;
    let mut got = 0u64;
    while got < total {
        let wait = (tokio::time::Instant::now() + idle).min(hard_stop);
        match tokio::time::timeout_at(wait, sub.next()).await {
            Ok(Some(m)) => {
                let at = Instant::now();
                if let Some((k, seq)) = parse_seq(&m.payload) {
                    if let Some(s) = sent.get(k as usize).and_then(|v| v.get(seq as usize)) {
                        hist.record((at - *s).as_nanos().max(1) as u64).ok();
                        got += 1;
                    }
                }
            }
            _ => break,
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    for c in pubs.iter().chain(std::iter::once(&sub_client)) {
        let _ = c.drain().await;
    }
    let mut row = delay_stats(&spec.name, "flood", &hist);
    row.publishers = spec.publishers;
    row.payload_bytes = spec.payload_bytes;
    row.count = total;
    row.seconds = secs;
    row.note = format!(
        "{landed}; subscriber drained after the publishers finished{}",
        if got < total { format!("; {} not seen", total - got) } else { String::new() }
    );
    Ok(row)
}
