//! Phase 3: the last acks, every acknowledged canary stored, stored counts stable.

use super::*;

/// The longest a count read from the store itself is asked again (within
/// the drain's timeout). A whole JetStream cluster killed at once: a loaded
/// 2-core machine saw its stream unreadable for 45 s after publishes were
/// acknowledged again; asked for longer, it is counted, not unmeasured.
const COUNT_RETRY_MAX: Duration = Duration::from_secs(60);

pub(super) struct Drained {
    pub(super) counts: AckCounts,
    pub(super) sent: Vec<(u64, i64)>,
    pub(super) stored_by_second: BTreeMap<i64, u64>,
    pub(super) stream_note: Option<String>,
    pub(super) drain_note: Option<String>,
    /// Storage could not be counted (e.g. it never answered after a fault):
    /// stored is then not measured, never zero.
    pub(super) stored_error: Option<String>,
}

pub(super) async fn drain(
    env: &Env<'_>,
    session: &mut Session,
    transport: Box<dyn Transport>,
    o: &Offered,
) -> anyhow::Result<Drained> {
    let cfg = env.cfg;
    let canary_acks = transport.canary_acks();
    let counts = transport.finish(Duration::from_secs(if o.interrupted { 2 } else { 30 })).await;
    let sent: Vec<(u64, i64)> = o.live.canaries.lock().unwrap().clone();
    if canary_acks.is_some() {
        let mut s = o.seen.lock().unwrap();
        for (seq, ts) in &sent {
            if let Some(at) = counts.canary_acked_at.get(seq) {
                s.seen.insert(*seq, (*ts, *at));
            }
        }
    }
    // Every canary the SUT acknowledged stored (the last one follows the last
    // reading), or the drain timeout. A canary never acknowledged is
    // unknown, not lost: nothing says the SUT took it, so it is not waited for.
    let expected: Vec<u64> = sent
        .iter()
        .map(|(seq, _)| *seq)
        .filter(|seq| !session.carrier.acks_expected() || counts.canary_acked_at.contains_key(seq))
        .collect();
    let drain_deadline = Instant::now() + if o.interrupted { Duration::from_secs(2) } else { cfg.drain_timeout };
    while Instant::now() < drain_deadline {
        if expected.iter().all(|seq| o.seen.lock().unwrap().seen.contains_key(seq)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    o.stop_poll.store(true, Ordering::Relaxed);
    let window = Window { start_ms: o.report.start_ms, end_ms: o.report.end_ms };
    let acked_total: u64 = counts
        .acked_by_second
        .range(window.start_ms.div_euclid(1000)..window.end_ms.div_euclid(1000) + 1)
        .map(|(_, n)| n)
        .sum();
    let stream_note = session.count.failure().await;
    let mut drain_note = None;
    let mut stored_error = None;
    let stored_by_second = if !session.count.settles() {
        // A count read from the store itself (a JetStream stream) fails
        // while the store is still coming back (a whole cluster restarted
        // mid-step has no leader for a while): asked again each second, for
        // the drain's timeout (at most 60 s), before it is unmeasured.
        let retry = if o.interrupted { Duration::from_secs(2) } else { env.cfg.drain_timeout.min(COUNT_RETRY_MAX) };
        let give_up = Instant::now() + retry;
        loop {
            match session.count.stored(window).await {
                Ok(b) => break b,
                Err(e) if Instant::now() >= give_up => {
                    stored_error = Some(format!("{e:#}"));
                    break BTreeMap::new();
                }
                Err(e) => {
                    tracing::info!("  the stored count cannot be read yet ({e:#}); asking again");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    } else {
        // Stored counts must hold still over several reads (or reach acked).
        let stable_deadline =
            Instant::now() + if o.interrupted { Duration::from_secs(2) } else { Duration::from_secs(60) };
        let mut last_sum = u64::MAX;
        let mut stable = 0u32;
        loop {
            let by_second = match session.count.stored(window).await {
                Ok(b) => b,
                Err(e) => {
                    stored_error = Some(format!("{e:#}"));
                    break BTreeMap::new();
                }
            };
            let sum: u64 = by_second.values().sum();
            stable = if sum == last_sum { stable + 1 } else { 0 };
            last_sum = sum;
            if sum >= acked_total || stable + 1 >= STABLE_READS {
                break by_second;
            }
            if Instant::now() >= stable_deadline {
                drain_note = Some(format!(
                    "stored counts still changing when the drain deadline came ({sum} of {acked_total} acked)"
                ));
                break by_second;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    Ok(Drained { counts, sent, stored_by_second, stream_note, drain_note, stored_error })
}
