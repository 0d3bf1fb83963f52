//! A JetStream row: a throwaway stream per row, publishers that count acks
//! (async window or sync), the stream's count afterwards.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::anyhow;

use super::client::{connect, landed_on, mib, node_of, payload, rate, warmup_payload};
use super::plan::{JsSpec, Plan};
use super::record::ThroughputRow;
use super::ACK_WINDOW;

pub(super) fn js_row_shell(spec: &JsSpec) -> ThroughputRow {
    ThroughputRow {
        name: spec.name.clone(),
        kind: "jetstream".into(),
        mode: format!(
            "jetstream {} r={}, {}",
            spec.storage,
            spec.replicas,
            if spec.sync { "sync acks".to_string() } else { format!("async acks (window {ACK_WINDOW})") }
        ),
        storage: Some(spec.storage.clone()),
        replicas: Some(spec.replicas),
        publish: if spec.sync {
            "sync, one ack at a time".into()
        } else {
            format!("async acks, window {ACK_WINDOW} per publisher")
        },
        publishers: spec.publishers,
        subscribers: 0,
        payload_bytes: spec.payload_bytes,
        planned: spec.messages,
        ..Default::default()
    }
}

pub(super) async fn js_row(
    urls: &[String],
    tag: &str,
    index: usize,
    spec: &JsSpec,
    plan: &Plan,
) -> anyhow::Result<ThroughputRow> {
    use async_nats::jetstream::{self, stream};
    let mut row = js_row_shell(spec);
    let stream_name = format!("SCALEBENCH_STUDY_{tag}_{index}");
    let base = format!("bench.js.{tag}.{index}");
    let admin = connect(&urls[0], &format!("study-{}-admin", spec.name), 1024).await?;
    let js = jetstream::new(admin.clone());
    let config = stream::Config {
        name: stream_name.clone(),
        subjects: vec![format!("{base}.>")],
        storage: if spec.storage == "memory" { stream::StorageType::Memory } else { stream::StorageType::File },
        num_replicas: spec.replicas as usize,
        ..Default::default()
    };
    if let Err(e) = js.create_stream(config).await {
        let msg = e.to_string();
        if msg.contains("insufficient resources") || msg.contains("replicas") {
            row.skipped = Some(format!("the target cannot place {} replicas: {msg}", spec.replicas));
            return Ok(row);
        }
        return Err(anyhow!("create stream {stream_name}: {msg}"));
    }
    let result = js_publish_phase(urls, &base, spec, plan, &mut row).await;
    // Count what the stream holds, then remove it (ours only).
    let mut stored = None;
    if let Ok(mut s) = js.get_stream(&stream_name).await {
        if let Ok(info) = s.info().await {
            stored = Some(info.state.messages);
        }
    }
    if let Err(e) = js.delete_stream(&stream_name).await {
        row.note.push_str(&format!("; could not delete stream {stream_name}: {e}"));
    }
    let _ = admin.drain().await;
    let warmups = result?;
    row.stored = stored.map(|s| s.saturating_sub(warmups));
    Ok(row)
}

/// Publishers, warm-up, the measured phase. Returns the warm-up messages
/// that landed in the stream.
///
/// Long on purpose: publishers, warm-up and the measured phase share the row's stream, clients and clocks.
pub(super) async fn js_publish_phase(
    urls: &[String],
    base: &str,
    spec: &JsSpec,
    plan: &Plan,
    row: &mut ThroughputRow,
) -> anyhow::Result<u64> {
    use async_nats::jetstream;
    let mut clients = Vec::new();
    for k in 0..spec.publishers as usize {
        clients.push(connect(node_of(urls, k), &format!("study-{}-pub{k}", spec.name), 1024).await?);
    }
    row.note = landed_on(&clients, &[]);
    let contexts: Vec<jetstream::Context> = clients.iter().cloned().map(jetstream::new).collect();
    // Warm-up: one acked publish per publisher (the stream leader may still be settling).
    let warm_subject = async_nats::Subject::from(format!("{base}.w"));
    let mut warmups = 0u64;
    for (k, js) in contexts.iter().enumerate() {
        let mut last_err = String::new();
        let mut ok = false;
        for _ in 0..50 {
            match js.publish(warm_subject.clone(), warmup_payload(k as u32)).await {
                Ok(f) => match f.await {
                    Ok(_) => {
                        ok = true;
                        break;
                    }
                    Err(e) => last_err = e.to_string(),
                },
                Err(e) => last_err = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if !ok {
            return Err(anyhow!("warm-up publish of publisher {k} never acked: {last_err}"));
        }
        warmups += 1;
    }

    let subject = async_nats::Subject::from(format!("{base}.m"));
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(plan.row_time_cap_s);
    let mut tasks = Vec::new();
    for (k, js) in contexts.into_iter().enumerate() {
        let share =
            spec.messages / spec.publishers as u64 + u64::from((k as u64) < spec.messages % spec.publishers as u64);
        let subject = subject.clone();
        let body = payload(spec.payload_bytes, k as u32, 0);
        let sync = spec.sync;
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let mut acked = 0u64;
            let mut errors = 0u64;
            let mut first_err: Option<String> = None;
            let mut capped = false;
            let mut window = VecDeque::with_capacity(ACK_WINDOW);
            for i in 0..share {
                if i % 64 == 0 && Instant::now() > deadline {
                    capped = true;
                    break;
                }
                let fut = match js.publish(subject.clone(), body.clone()).await {
                    Ok(f) => f,
                    Err(e) => {
                        errors += 1;
                        first_err.get_or_insert(e.to_string());
                        continue;
                    }
                };
                if sync {
                    match fut.await {
                        Ok(_) => acked += 1,
                        Err(e) => {
                            errors += 1;
                            first_err.get_or_insert(e.to_string());
                        }
                    }
                } else {
                    window.push_back(fut);
                    if window.len() >= ACK_WINDOW {
                        if let Some(f) = window.pop_front() {
                            match f.await {
                                Ok(_) => acked += 1,
                                Err(e) => {
                                    errors += 1;
                                    first_err.get_or_insert(e.to_string());
                                }
                            }
                        }
                    }
                }
            }
            while let Some(f) = window.pop_front() {
                match f.await {
                    Ok(_) => acked += 1,
                    Err(e) => {
                        errors += 1;
                        first_err.get_or_insert(e.to_string());
                    }
                }
            }
            (acked, errors, first_err, capped, start.elapsed(), Instant::now())
        }));
    }
    let mut end = t0;
    for t in tasks {
        let (acked, errors, first_err, capped, took, fin) = t.await?;
        row.published += acked;
        row.errors += errors;
        if row.first_error.is_none() {
            row.first_error = first_err;
        }
        row.capped |= capped;
        row.per_publisher_msgs_per_s.push(rate(acked, took.as_secs_f64()));
        end = end.max(fin);
    }
    let secs = (end - t0).as_secs_f64();
    row.pub_seconds = secs;
    row.pub_msgs_per_s = rate(row.published, secs);
    row.pub_mib_per_s = mib(row.pub_msgs_per_s * spec.payload_bytes as f64);
    for c in clients {
        let _ = c.drain().await;
    }
    Ok(warmups)
}
