//! A core NATS pub/sub row: fire-and-forget publishers, subscribers that
//! each receive every message (fan-out counted apart).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::client::{connect, is_warmup, landed_on, mib, node_of, payload, rate, warm_up};
use super::plan::{CoreSpec, Plan};
use super::record::ThroughputRow;

/// Long on purpose: one row of the study as it runs: connections, warm-up, the timed phase and its counts share the row's clients and clocks.
pub(super) async fn core_row(
    urls: &[String],
    tag: &str,
    spec: &CoreSpec,
    plan: &Plan,
) -> anyhow::Result<ThroughputRow> {
    let subject = async_nats::Subject::from(format!("bench.core.{tag}.{}", spec.name));
    let cap = (spec.messages as usize + 4096).clamp(65_536, 1 << 21);
    let mut sub_clients = Vec::new();
    let mut subs = Vec::new();
    for k in 0..spec.subscribers as usize {
        let c = connect(node_of(urls, k + 1), &format!("study-{}-sub{k}", spec.name), cap).await?;
        let s = c.subscribe(subject.clone()).await?;
        c.flush().await?;
        sub_clients.push(c);
        subs.push(s);
    }
    let mut pubs = Vec::new();
    for k in 0..spec.publishers as usize {
        pubs.push(connect(node_of(urls, k), &format!("study-{}-pub{k}", spec.name), 1024).await?);
    }
    warm_up(&pubs, &mut subs, &subject).await?;
    let landed = landed_on(&pubs, &sub_clients);

    let cap_time = Duration::from_secs_f64(plan.row_time_cap_s);
    let idle = Duration::from_secs_f64(plan.idle_timeout_s);
    let t0 = Instant::now();
    let deadline = t0 + cap_time;
    let (stop_tx, _) = tokio::sync::watch::channel(false);
    let counters: Vec<Arc<AtomicU64>> = (0..subs.len()).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let mut sub_tasks = Vec::new();
    for (k, mut s) in subs.into_iter().enumerate() {
        let counter = counters[k].clone();
        let mut stop = stop_tx.subscribe();
        let expected = spec.messages;
        sub_tasks.push(tokio::spawn(async move {
            let mut count = 0u64;
            let mut last = None;
            loop {
                tokio::select! {
                    biased;
                    m = s.next() => match m {
                        Some(m) => {
                            if !is_warmup(&m.payload) {
                                count += 1;
                                last = Some(Instant::now());
                                counter.store(count, Ordering::Relaxed);
                                if count >= expected { break; }
                            }
                        }
                        None => break,
                    },
                    _ = stop.changed() => break,
                }
            }
            (count, last)
        }));
    }
    let mut pub_tasks = Vec::new();
    for (k, p) in pubs.iter().cloned().enumerate() {
        let share =
            spec.messages / spec.publishers as u64 + u64::from((k as u64) < spec.messages % spec.publishers as u64);
        let subject = subject.clone();
        let body = payload(spec.payload_bytes, k as u32, 0);
        pub_tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let mut sent = 0u64;
            let mut capped = false;
            let mut err = None;
            for i in 0..share {
                if i % 1024 == 0 && Instant::now() > deadline {
                    capped = true;
                    break;
                }
                if let Err(e) = p.publish(subject.clone(), body.clone()).await {
                    err = Some(e.to_string());
                    break;
                }
                sent += 1;
            }
            if let Err(e) = p.flush().await {
                err.get_or_insert(e.to_string());
            }
            (sent, start.elapsed(), Instant::now(), capped, err)
        }));
    }
    let mut published = 0;
    let mut pub_end = t0;
    let mut per_pub = Vec::new();
    let mut capped = false;
    let mut errors = 0;
    let mut first_error = None;
    for t in pub_tasks {
        let (sent, took, end, c, err) = t.await?;
        published += sent;
        pub_end = pub_end.max(end);
        per_pub.push(rate(sent, took.as_secs_f64()));
        capped |= c;
        if let Some(e) = err {
            errors += 1;
            first_error.get_or_insert(e);
        }
    }
    // Wait for the deliveries: all in, or nothing new for `idle`, or the cap.
    let expected_total = published * spec.subscribers as u64;
    let mut last_total = 0;
    let mut last_change = Instant::now();
    let hard_stop = deadline + idle;
    for _ in 0..100_000 {
        let total: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        if total >= expected_total || Instant::now() > hard_stop {
            break;
        }
        if total != last_total {
            last_total = total;
            last_change = Instant::now();
        } else if last_change.elapsed() > idle {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = stop_tx.send(true);
    let mut delivered = 0;
    let mut sub_end = t0;
    for t in sub_tasks {
        let (count, last) = t.await?;
        delivered += count;
        if let Some(l) = last {
            sub_end = sub_end.max(l);
        }
    }
    for c in pubs.iter().chain(sub_clients.iter()) {
        let _ = c.drain().await;
    }
    let pub_s = (pub_end - t0).as_secs_f64();
    let sub_s = (sub_end - t0).as_secs_f64();
    let size = spec.payload_bytes as f64;
    let mut note = landed;
    if delivered < expected_total {
        note.push_str(&format!("; {} deliveries missing (slow consumer or time cap)", expected_total - delivered));
    }
    Ok(ThroughputRow {
        name: spec.name.clone(),
        kind: "core".into(),
        mode: "core pub/sub".into(),
        storage: None,
        replicas: None,
        publish: "fire-and-forget".into(),
        publishers: spec.publishers,
        subscribers: spec.subscribers,
        payload_bytes: spec.payload_bytes,
        planned: spec.messages,
        published,
        delivered,
        expected_deliveries: expected_total,
        stored: None,
        pub_seconds: pub_s,
        sub_seconds: sub_s,
        pub_msgs_per_s: rate(published, pub_s),
        pub_mib_per_s: mib(rate(published, pub_s) * size),
        sub_msgs_per_s: Some(rate(delivered, sub_s)),
        sub_mib_per_s: Some(mib(rate(delivered, sub_s) * size)),
        aggregate_msgs_per_s: Some(rate(published + delivered, pub_s.max(sub_s))),
        per_publisher_msgs_per_s: per_pub,
        errors,
        first_error,
        capped,
        skipped: None,
        note,
    })
}
