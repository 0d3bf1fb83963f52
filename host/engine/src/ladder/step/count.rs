//! Phase 4: stored vs acked per second of payload ts, and the wall-clock rates.

use super::*;

pub(super) struct Counted {
    pub(super) acked: u64,
    pub(super) stored: u64,
    pub(super) missing: u64,
    pub(super) beyond: u64,
    pub(super) short: Vec<String>,
    pub(super) short_count: u64,
    pub(super) soak_s: f64,
    pub(super) offered_rps: f64,
    pub(super) achieved_rps: f64,
    pub(super) slowest_5s: Option<f64>,
    pub(super) stored_rps_by_payload: f64,
    pub(super) stored_rps: Option<f64>,
    pub(super) broker: BTreeMap<String, BrokerCounter>,
    pub(super) dropped: Option<f64>,
    pub(super) series: Series,
    pub(super) ack_latency: AckLatency,
    pub(super) store: StoreFigures,
}

/// The step's per-second series, second 0 being the load's first.
/// `stored` is None where the stored count was not measured.
pub(super) fn series(
    r: &ProducerReport,
    counts: &AckCounts,
    stored: Option<&BTreeMap<i64, u64>>,
    soak_from_ms: i64,
) -> Series {
    let start = r.start_ms.div_euclid(1000);
    let last_key = |m: &BTreeMap<i64, u64>| m.keys().next_back().copied().unwrap_or(start);
    let end = [
        (r.end_ms - 1).div_euclid(1000),
        last_key(&r.offered_by_wall_second),
        last_key(&counts.acked_by_arrival_second),
        last_key(&counts.refused_by_arrival_second),
    ]
    .into_iter()
    .max()
    .unwrap_or(start)
    .max(start);
    let per = |m: &BTreeMap<i64, u64>| (start..=end).map(|s| m.get(&s).copied().unwrap_or(0)).collect::<Vec<u64>>();
    let empty = BTreeMap::new();
    let stored_in_load: BTreeMap<i64, u64> =
        stored.unwrap_or(&empty).range(start..r.end_ms.div_euclid(1000) + 1).map(|(k, v)| (*k, *v)).collect();
    let get = |m: &BTreeMap<i64, u64>, s: i64| m.get(&s).copied().unwrap_or(0);
    // The same per-second arithmetic as the step's outcomes: ok is what
    // was acked and stored, lost what was acked and not stored; readings
    // of a second outside the load's window are not the step's.
    let in_load = |s: i64| s * 1000 >= r.start_ms && s * 1000 < r.end_ms;
    let acked = |s: i64| if in_load(s) { get(&counts.acked_by_second, s) } else { 0 };
    let by_payload = |f: &dyn Fn(i64) -> u64| (start..=end).map(f).collect::<Vec<u64>>();
    let ok_by_payload = stored.map(|_| by_payload(&|s| get(&stored_in_load, s).min(acked(s))));
    let lost_by_payload = stored.map(|_| by_payload(&|s| acked(s).saturating_sub(get(&stored_in_load, s))));
    let unknown_by_payload = by_payload(&|s| {
        get(&r.offered_by_second, s).saturating_sub(get(&counts.acked_by_second, s) + get(&counts.refused_by_second, s))
    });
    Series {
        start_unix_s: start,
        soak_from_s: (soak_from_ms - start * 1000) as f64 / 1e3,
        load_end_s: (r.end_ms - start * 1000) as f64 / 1e3,
        offered: per(&r.offered_by_wall_second),
        acked: per(&counts.acked_by_arrival_second),
        refused: per(&counts.refused_by_arrival_second),
        stored_by_payload: per(&stored_in_load),
        ack_latency_p99_s: (start..=end).map(|s| counts.latency.p99_in_second_s(s)).collect(),
        ok_by_payload,
        lost_by_payload,
        unknown_by_payload,
        store_round_trip: Vec::new(),
        stored_by_arrival: Vec::new(),
    }
}

/// The store's round trip and stored-by-arrival, second by second of the series.
pub(super) fn store_series(s: &mut Series, rec: &super::store_watch::StoreRecord) {
    let (start, len) = (s.start_unix_s, s.offered.len() as i64);
    let end = start + len - 1;
    s.store_round_trip = (start..=end).map(|k| rec.round_trip.get(&k).copied()).collect();
    s.stored_by_arrival = super::store_watch::stored_by_arrival(&rec.written, start, end);
}

/// What the store watch saw, placed in the soak: silences from the soak's
/// start (as the ack silences are), round trips of the answered requests.
pub(super) fn store_figures(rec: &super::store_watch::StoreRecord, soak_from_ms: i64) -> StoreFigures {
    let mut answered: Vec<f64> = rec
        .round_trip
        .values()
        .filter_map(|s| match s {
            StoreSecond::Answered(t) | StoreSecond::Failed(t) => Some(*t),
            StoreSecond::NoAnswerFor(_) => None,
        })
        .collect();
    answered.sort_by(f64::total_cmp);
    let waiting = rec.round_trip.values().filter(|s| matches!(s, StoreSecond::NoAnswerFor(_))).count() as u64;
    let silences = crate::latency::joined(&rec.silences)
        .into_iter()
        .filter(|s| s.to_ms > soak_from_ms)
        .map(|s| {
            let from_ms = s.from_ms.max(soak_from_ms);
            SilenceSpan {
                from_soak_s: (from_ms - soak_from_ms) as f64 / 1e3,
                to_soak_s: (s.to_ms - soak_from_ms) as f64 / 1e3,
                len_s: (s.to_ms - from_ms) as f64 / 1e3,
            }
        })
        .collect();
    StoreFigures {
        store: rec.store.clone(),
        answered: answered.len() as u64,
        seconds_without_answer: waiting,
        round_trip_p50_s: crate::probes::median(&answered),
        round_trip_max_s: answered.last().copied(),
        silences,
    }
}

/// Latency quantiles and the longest silence, placed in the soak.
pub(super) fn ack_latency(counts: &AckCounts, soak_from_ms: i64) -> AckLatency {
    let l = &counts.latency;
    let mut a = AckLatency {
        intended: crate::latency::Quantiles::of(&l.intended_us),
        service: crate::latency::Quantiles::of(&l.service_us),
        send_lag: crate::latency::Quantiles::of(&l.send_lag_us),
        resolution_s: Some(crate::latency::RESOLUTION_S),
        silences: crate::latency::joined(&l.silences)
            .into_iter()
            .map(|s| SilenceSpan {
                from_soak_s: (s.from_ms - soak_from_ms) as f64 / 1e3,
                to_soak_s: (s.to_ms - soak_from_ms) as f64 / 1e3,
                len_s: s.len_ms() as f64 / 1e3,
            })
            .collect(),
        ..Default::default()
    };
    match l.longest_silence {
        Some(sil) => {
            a.longest_silence_s = Some(sil.len_ms() as f64 / 1e3);
            a.silence_from_soak_s = Some((sil.from_ms - soak_from_ms) as f64 / 1e3);
            a.silence_to_soak_s = Some((sil.to_ms - soak_from_ms) as f64 / 1e3);
            // Total when no connection had any answer in the silence's whole
            // seconds; a silence shorter than that holds no whole second (and
            // an empty range, start past end, is not a range a map can take).
            // A reader that fell behind (a busy host) counts answers that
            // reached its socket just before the silence a second late: in a
            // silence of 3 whole seconds or more, the first is not looked at.
            let (first, end) = (sil.from_ms.div_euclid(1000) + 1, sil.to_ms.div_euclid(1000));
            let first = if end - first >= 3 { first + 1 } else { first };
            let inner = first..end;
            a.silence_total = !inner.is_empty()
                && counts.acked_by_arrival_second.range(inner.clone()).all(|(_, n)| *n == 0)
                && counts.refused_by_arrival_second.range(inner).all(|(_, n)| *n == 0);
        }
        // Answers came and none waited: no silence, measured.
        None if counts.settled_msgs > 0 => a.longest_silence_s = Some(0.0),
        None => {}
    }
    a
}

pub(super) async fn count(env: &Env<'_>, _session: &Session, o: &Offered, d: &Drained) -> anyhow::Result<Counted> {
    let cfg = env.cfg;
    let r = &o.report;
    // Per second of payload ts.
    let (mut acked, mut stored, mut missing, mut short_count) = (0u64, 0u64, 0u64, 0u64);
    let mut short = Vec::new();
    // Counted stored beyond what was acknowledged in the same second: never
    // "ok" (a second's acks cap it), but said, since only unacknowledged
    // readings the store kept, or a count of one reading twice, make them.
    let beyond: u64 = d
        .stored_by_second
        .iter()
        .filter(|(sec, _)| **sec * 1000 >= r.start_ms && **sec * 1000 < r.end_ms)
        .map(|(sec, s)| s.saturating_sub(d.counts.acked_by_second.get(sec).copied().unwrap_or(0)))
        .sum();
    for (sec, a) in &d.counts.acked_by_second {
        let ms = sec * 1000;
        if ms < r.start_ms || ms >= r.end_ms {
            continue;
        }
        let s = d.stored_by_second.get(sec).copied().unwrap_or(0);
        acked += a;
        stored += s.min(*a);
        missing += a.saturating_sub(s);
        if (s as f64) < 0.99 * *a as f64 {
            short_count += 1;
            if short.len() < 10 {
                short.push(format!("{sec}: {s}/{a}"));
            }
        }
    }
    // On the wall clock: the soak is [start + warm-up, end) of the load.
    let soak_from_ms = r.start_ms + cfg.warmup.as_millis() as i64;
    let soak_to_ms = r.end_ms.max(soak_from_ms + 1);
    let soak_s = (soak_to_ms - soak_from_ms) as f64 / 1e3;
    let in_soak = |m: &BTreeMap<i64, u64>| -> u64 {
        m.range(soak_from_ms.div_euclid(1000)..soak_to_ms.div_euclid(1000)).map(|(_, n)| n).sum()
    };
    let offered_rps = in_soak(&r.offered_by_wall_second) as f64 / soak_s;
    let achieved_rps = in_soak(&d.counts.acked_by_arrival_second) as f64 / soak_s;
    let mut slowest_5s: Option<f64> = None;
    let (first, last) = (soak_from_ms.div_euclid(1000), soak_to_ms.div_euclid(1000));
    let mut w = first;
    while w + SLOWEST_WINDOW_S <= last {
        let n: u64 = d.counts.acked_by_arrival_second.range(w..w + SLOWEST_WINDOW_S).map(|(_, n)| n).sum();
        let rate = n as f64 / SLOWEST_WINDOW_S as f64;
        slowest_5s = Some(slowest_5s.map_or(rate, |m: f64| m.min(rate)));
        w += 1;
    }
    let stored_soak: u64 =
        d.stored_by_second.range(soak_from_ms.div_euclid(1000)..soak_to_ms.div_euclid(1000)).map(|(_, n)| n).sum();
    let stored_rps = match (o.written_at_soak_start, o.written_at_end) {
        (Some((t0, n0)), Some((t1, n1))) if t1 > t0 => Some((n1 - n0).max(0.0) / t1.duration_since(t0).as_secs_f64()),
        _ => None,
    };
    let (broker, dropped) = match env.sys {
        Some(s) => {
            let c = s.step(&o.sys_before, o.load_ended).await;
            (c.counters, c.dropped)
        }
        None => (BTreeMap::new(), None),
    };
    let soak_from_ms = r.start_ms + cfg.warmup.as_millis() as i64;
    Ok(Counted {
        acked,
        stored,
        missing,
        beyond,
        short,
        short_count,
        soak_s,
        offered_rps,
        achieved_rps,
        slowest_5s,
        stored_rps_by_payload: stored_soak as f64 / soak_s,
        stored_rps,
        broker,
        dropped,
        series: {
            let mut s = series(r, &d.counts, d.stored_error.is_none().then_some(&d.stored_by_second), soak_from_ms);
            store_series(&mut s, &o.store);
            s
        },
        ack_latency: ack_latency(&d.counts, soak_from_ms),
        store: store_figures(&o.store, soak_from_ms),
    })
}
