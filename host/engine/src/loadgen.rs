//! The load generator's producer: readings for every point once per
//! interval, spread evenly across it, plus a lag canary every 2 s.
//!
//! Point `p` of `N` is due at `interval_start + p * interval / N`. Time is cut
//! into slots (10 ms, or longer when few points are due); each slot's points
//! are a contiguous tag range, so one `sample` call into the value model and
//! one `encode` call into the adapter serve the whole slot. The producer runs
//! on its own thread (it owns the plugin instances) and hands batches to the
//! transport's bounded channels; when they are full it waits, and that wait
//! is measured (channel wait, behind schedule) rather than buffered in memory.
//!
//! Each reading's payload ts is its scheduled time, so acknowledgements and
//! stored rows are compared per second of the schedule; canaries carry their
//! scheduled time too, so lag includes any backlog of the generator's own.
//! The load ends at its wall-clock end: what the schedule held but could not
//! be handed to the transport by then is "not offered", never sent late.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use plugin_runtime::types::Readings;
use plugin_runtime::PluginError;
use tokio::sync::mpsc;

use crate::clock::now_ms;
use crate::target::{Adapter, Model};
use crate::transport::{Batch, Carries, Message};

pub const CANARY_EVERY: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Points 0..points report.
    pub points: u32,
    pub interval: Duration,
    pub seed: u64,
    /// How long to offer load.
    pub duration: Duration,
    /// Sample period of the value model (sample index = ts / period).
    pub sample_period_ms: u64,
    /// First canary sequence number to use (continues across steps).
    pub first_canary_seq: u64,
    /// When the schedule starts (ms since the epoch, a whole second);
    /// None: the next whole second at least 200 ms ahead ([`start_ms_after`]).
    pub start_ms: Option<i64>,
    /// Which of the schedule's readings this producer offers: all of them,
    /// a worker's shard, or none (a coordinator that only sends canaries).
    pub share: Share,
    /// Whether this producer sends the lag canaries (one per run sends them).
    pub canaries: bool,
}

/// Which readings of the schedule a producer offers. Shards split every
/// slot's contiguous point range into `count` contiguous parts, so each
/// worker offers 1/count of every slot (never a burst of its own) and the
/// union of the shards is exactly the one-process schedule: the same
/// points, at the same scheduled times, with the same values. Which part a
/// shard takes turns with the slot's number, so slots of fewer points than
/// workers still spread evenly over them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Share {
    All,
    Shard { index: u32, count: u32 },
    None,
}

impl Share {
    /// The part of slot number `slot`'s points `[first, last)` this share offers.
    pub fn range(self, first: u64, last: u64, slot: u64) -> (u64, u64) {
        match self {
            Share::All => (first, last),
            Share::None => (first, first),
            Share::Shard { index, count } => {
                let (n, len) = (count.max(1) as u64, last - first);
                let part = (index as u64 + slot) % n;
                (first + len * part / n, first + len * (part + 1) / n)
            }
        }
    }
}

/// The schedule's start for a load asked for at `now_ms`: a whole second
/// at least 200 ms ahead, so per-second windows of payload ts cover whole
/// seconds of load.
pub fn start_ms_after(now_ms: i64) -> i64 {
    (now_ms + 200).div_euclid(1000) * 1000 + 1000
}

/// Live view of the producer, for progress lines and samples.
#[derive(Debug, Default)]
pub struct ProducerLive {
    pub readings_offered: AtomicU64,
    pub behind_ms: AtomicU64,
    /// Canaries sent: (seq, ts_ms).
    pub canaries: Mutex<Vec<(u64, i64)>>,
    /// Readings offered so far, by second: what a worker's heartbeat
    /// carries, so its seconds count up to the moment it is lost.
    pub seconds: Mutex<OfferedSeconds>,
    /// A worker's leash: the producer stops itself once no call from its
    /// coordinator came for this long ([`Leash`]).
    pub leash: Option<Leash>,
    /// The producer stopped itself at the end of its leash.
    pub off_leash: AtomicBool,
}

/// Readings offered, by second of payload ts and by wall-clock second of
/// hand-over (Unix s).
#[derive(Debug, Default, Clone)]
pub struct OfferedSeconds {
    pub by_payload: BTreeMap<i64, u64>,
    pub by_wall: BTreeMap<i64, u64>,
}

/// When the producer last heard from whoever watches it, and how long a
/// silence it takes before it stops: a worker frozen past its coordinator's
/// patience stops, instead of catching up with a burst nobody counts.
#[derive(Debug, Clone)]
pub struct Leash {
    /// [`crate::clock::now_ns`] of the last call.
    pub contact_ns: Arc<std::sync::atomic::AtomicI64>,
    pub silence: Duration,
}

impl ProducerLive {
    /// Whether the leash (if any) has run out; marks it so.
    fn leash_ran_out(&self) -> bool {
        let Some(l) = &self.leash else { return false };
        let silent_ns = crate::clock::now_ns() - l.contact_ns.load(Ordering::Relaxed);
        if silent_ns >= l.silence.as_nanos() as i64 {
            self.off_leash.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ProducerReport {
    /// Readings the schedule holds for the whole window.
    pub readings_scheduled: u64,
    /// Readings handed to the transport before the wall-clock end.
    pub readings_offered: u64,
    /// Readings handed over, by wall-clock second of hand-over (Unix s).
    pub offered_by_wall_second: BTreeMap<i64, u64>,
    /// Readings handed over, by second of payload ts (the schedule's
    /// second): what each second's outcomes (ok, lost, unknown) add up to.
    #[serde(default)]
    pub offered_by_second: BTreeMap<i64, u64>,
    /// Seconds the producer waited because the transport's channels were
    /// full: the transport (and behind it the SUT) did not take the load.
    pub channel_wait_s: f64,
    pub slots: u64,
    pub behind_max_s: f64,
    pub behind_p95_s: f64,
    /// Window of scheduled payload ts, ms since the epoch: [start, end).
    pub start_ms: i64,
    pub end_ms: i64,
    pub next_canary_seq: u64,
    /// Stopped before the end (Ctrl-C, live-safety, a closed transport).
    pub stopped_early: bool,
    /// The wall-clock end came with readings of the schedule still unsent.
    pub cut_at_wall_end: bool,
}

impl ProducerReport {
    /// Add the report of a producer that ran beside this one (a worker):
    /// counts and per-second offers summed; waits, slots and lateness the
    /// longest (side by side, the longest is the wall time); either one
    /// stopped early or cut at the wall-clock end, so is the sum.
    pub fn add_side_by_side(&mut self, w: &ProducerReport) {
        self.readings_scheduled += w.readings_scheduled;
        self.readings_offered += w.readings_offered;
        for (sec, k) in &w.offered_by_wall_second {
            *self.offered_by_wall_second.entry(*sec).or_default() += k;
        }
        for (sec, k) in &w.offered_by_second {
            *self.offered_by_second.entry(*sec).or_default() += k;
        }
        self.channel_wait_s = self.channel_wait_s.max(w.channel_wait_s);
        self.slots = self.slots.max(w.slots);
        self.behind_max_s = self.behind_max_s.max(w.behind_max_s);
        self.behind_p95_s = self.behind_p95_s.max(w.behind_p95_s);
        self.stopped_early |= w.stopped_early;
        self.cut_at_wall_end |= w.cut_at_wall_end;
    }
}

/// Plugins travel into the producer thread and back.
pub struct Plugins {
    pub model: Box<dyn Model>,
    pub adapter: Box<dyn Adapter>,
}

/// Readings of the schedule `share` holds: the closed form for all of them,
/// otherwise the producer's own slot arithmetic, slot by slot.
pub fn scheduled_in_share(points: u32, interval: Duration, duration: Duration, share: Share) -> u64 {
    let n = points.max(1) as u64;
    let interval_ms = interval.as_millis().max(1) as u64;
    let duration_ms = duration.as_millis() as u64;
    if share == Share::All {
        return scheduled_readings(n, interval_ms, duration_ms);
    }
    let slot = slot_ms(points, interval);
    let mut total = 0;
    let mut k = 0;
    while k * interval_ms < duration_ms {
        let mut j = 0;
        while j * slot < interval_ms && k * interval_ms + j * slot < duration_ms {
            let hi_off = ((j + 1) * slot).min(interval_ms).min(duration_ms - k * interval_ms);
            let first = (j * slot * n).div_ceil(interval_ms);
            let last = (hi_off * n).div_ceil(interval_ms).min(n);
            if last > first {
                let (lo, hi) = share.range(first, last, k * interval_ms.div_ceil(slot) + j);
                total += hi - lo;
            }
            j += 1;
        }
        k += 1;
    }
    total
}

/// Readings the schedule holds for `n` points every `interval_ms` over
/// `duration_ms` (a reading is due at `k*interval + p*interval/n`).
pub fn scheduled_readings(n: u64, interval_ms: u64, duration_ms: u64) -> u64 {
    let full = duration_ms / interval_ms;
    let rem = duration_ms % interval_ms;
    full * n + (rem * n).div_ceil(interval_ms).min(n)
}

/// Run the producer on the calling thread until the wall-clock end of
/// The producer's slot: aim for 10 ms, but no smaller than needed for ~1
/// reading each and never longer than 250 ms (a canary must not wait long).
pub fn slot_ms(points: u32, interval: Duration) -> u64 {
    let interval_ms = interval.as_millis().max(1) as u64;
    let per_ms = points.max(1) as f64 / interval_ms as f64;
    ((1.0 / per_ms).ceil() as u64).clamp(10, 250).min(interval_ms)
}

/// Most readings one slot hands to one connection (one batch).
pub fn batch_readings_max(points: u32, interval: Duration, connections: u32) -> u64 {
    let interval_ms = interval.as_millis().max(1) as u64;
    (slot_ms(points, interval) * points.max(1) as u64).div_ceil(interval_ms).div_ceil(connections.max(1) as u64) + 1
}

/// `spec.duration` or `stop`. `addresses[tag]` is where readings of `tag` go.
/// What the schedule held but could not be handed over by the end is not
/// offered: the load never runs past its wall-clock window.
///
/// Long on purpose: one pacing loop (interval, slot, batch) whose locals — the schedule's position, the batches and what each carries, the seconds handed over, the next canary — every part of it reads and writes; the parts that share nothing are the helpers below (`send_until`, the batch and canary builders).
pub fn produce(
    plugins: &mut Plugins,
    spec: &LoadSpec,
    addresses: &[Arc<str>],
    senders: &[mpsc::Sender<Batch>],
    live: &ProducerLive,
    stop: &AtomicBool,
) -> Result<ProducerReport, PluginError> {
    let n = spec.points.max(1) as u64;
    let interval_ms = spec.interval.as_millis().max(1) as u64;
    let slot_ms = slot_ms(spec.points, spec.interval);
    let slots_per_interval = interval_ms.div_ceil(slot_ms);
    let conns = senders.len().max(1) as u64;
    let period = spec.sample_period_ms.max(1);

    let start_wall = now_ms();
    let start_ms = spec.start_ms.filter(|s| *s >= start_wall).unwrap_or_else(|| start_ms_after(start_wall));
    // The schedule's start on the monotonic clock every instant is read from.
    let start_instant = crate::clock::instant_of(start_ms * 1_000_000);
    let duration_ms = spec.duration.as_millis() as u64;
    let end_ms = start_ms + duration_ms as i64;
    let end_instant = start_instant + spec.duration;

    let mut hist = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000, 2).unwrap();
    let mut behind_max_ms = 0u64;
    let mut canary_seq = spec.first_canary_seq;
    // Canaries are scheduled like readings: every 2 s of the schedule, each
    // stamped with its scheduled time, so lag includes any backlog of ours.
    let mut next_canary_ms = start_ms;
    let mut offered = 0u64;
    let mut batch_seconds: Vec<(i64, u64)> = Vec::new();
    let mut waited = Duration::ZERO;
    let mut slots = 0u64;
    let mut stopped_early = false;
    let mut cut_at_wall_end = false;
    let mut batches: Vec<(Batch, u64)> = (0..conns).map(|_| (Vec::new(), 0)).collect();
    let mut canaries_in_batch: Vec<(u64, i64)> = Vec::new();

    'outer: for k in 0.. {
        let interval_start_ms = start_ms + (k * interval_ms) as i64;
        if interval_start_ms >= end_ms {
            break;
        }
        for j in 0..slots_per_interval {
            if stop.load(Ordering::Relaxed) || live.leash_ran_out() {
                stopped_early = true;
                break 'outer;
            }
            let slot_start_ms = interval_start_ms + (j * slot_ms) as i64;
            if slot_start_ms >= end_ms {
                break 'outer;
            }
            let due = start_instant + Duration::from_millis((slot_start_ms - start_ms) as u64);
            let now = Instant::now();
            if now >= end_instant {
                cut_at_wall_end = true;
                break 'outer;
            }
            if now < due {
                live.behind_ms.store(0, Ordering::Relaxed);
                std::thread::sleep(due - now);
            } else {
                let late = (now - due).as_millis() as u64;
                behind_max_ms = behind_max_ms.max(late);
                live.behind_ms.store(late, Ordering::Relaxed);
                let _ = hist.record(late.max(1));
            }
            slots += 1;

            // Points due in this slot: offsets in [j*slot, (j+1)*slot).
            let lo_off = j * slot_ms;
            // Never past the end of the load: readings stay inside the window.
            let hi_off = ((j + 1) * slot_ms).min(interval_ms).min((end_ms - interval_start_ms) as u64);
            let first = (lo_off * n).div_ceil(interval_ms);
            let last = (hi_off * n).div_ceil(interval_ms).min(n);
            let (first, last) = spec.share.range(first, last.max(first), k * slots_per_interval + j);
            if last > first {
                let points: Vec<u32> = (first as u32..last as u32).collect();
                let ts_ms: Vec<i64> =
                    (first..last).map(|p| interval_start_ms + ((p * interval_ms) / n) as i64).collect();
                // Each reading carries the sample of its own timestamp
                // (ts / sample period, as the contract and `gen` say): one
                // model call per run of points inside one sample period.
                let mut values = Vec::with_capacity(points.len());
                let mut at = 0usize;
                while at < points.len() {
                    let sample = ts_ms[at] as u64 / period;
                    let run = ts_ms[at..].iter().take_while(|t| **t as u64 / period == sample).count();
                    values.extend(plugins.model.sample(spec.seed, points[at], run as u32, sample)?);
                    at += run;
                }
                let readings = Readings { points, values, ts_ms };
                let enc = plugins.adapter.encode(&readings)?;
                check_encoded(plugins.adapter.name(), &enc, addresses.len(), readings.points.len())?;
                // Each message is due at the exact instant of its first
                // reading in the interval's even spread (ns), not its slot's start.
                let interval_ns = interval_ms * 1_000_000;
                let instant = |r: usize| {
                    let p = first + r as u64;
                    // 64-bit unless point × interval overflows it (u128 then).
                    let off = p
                        .checked_mul(interval_ns)
                        .map_or_else(|| (p as u128 * interval_ns as u128 / n as u128) as u64, |x| x / n);
                    interval_start_ms * 1_000_000 + off as i64
                };
                split_encoded(enc, &readings, addresses, instant, |tag, m, carries| {
                    let (batch, carried) = &mut batches[(tag as u64 % conns) as usize];
                    batch.push(m);
                    *carried += carries as u64;
                });
            }

            // The canary rides the same connections and queues as the load.
            while spec.canaries && next_canary_ms <= slot_start_ms && next_canary_ms < end_ms {
                let m = plugins.adapter.canary(canary_seq, next_canary_ms)?;
                let address: Arc<str> = Arc::from(m.address.as_str());
                batches[0].0.push(Message {
                    address,
                    payload: Bytes::from(m.payload),
                    carries: Carries::Canary { seq: canary_seq },
                    intended_ns: next_canary_ms * 1_000_000,
                });
                canaries_in_batch.push((canary_seq, next_canary_ms));
                canary_seq += 1;
                next_canary_ms += CANARY_EVERY.as_millis() as i64;
            }

            for (c, (batch, carried)) in batches.iter_mut().enumerate() {
                if batch.is_empty() {
                    continue;
                }
                let b = std::mem::take(batch);
                let readings = std::mem::take(carried);
                by_payload_second(&b, &mut batch_seconds);
                match send_until(&senders[c], b, stop, end_instant, &mut waited, Some((due, live))) {
                    Sent::Yes => {
                        offered += readings;
                        {
                            let mut seconds = live.seconds.lock().unwrap();
                            *seconds.by_wall.entry(now_ms().div_euclid(1000)).or_default() += readings;
                            for (sec, n) in batch_seconds.drain(..) {
                                *seconds.by_payload.entry(sec).or_default() += n;
                            }
                        }
                        live.readings_offered.fetch_add(readings, Ordering::Relaxed);
                        if c == 0 {
                            live.canaries.lock().unwrap().append(&mut canaries_in_batch);
                        }
                    }
                    Sent::Deadline => {
                        cut_at_wall_end = true;
                        break 'outer;
                    }
                    Sent::Stopped => {
                        stopped_early = true;
                        break 'outer;
                    }
                }
            }
        }
    }

    // A last canary after the last reading: once it is stored, everything
    // sent before it on connection 0 has passed the same queue. It may wait
    // a little past the end for room in the channel, never long.
    if !stopped_early && spec.canaries {
        let ts = now_ms().min(end_ms);
        let m = plugins.adapter.canary(canary_seq, ts)?;
        let batch = vec![Message {
            address: Arc::from(m.address.as_str()),
            payload: Bytes::from(m.payload),
            carries: Carries::Canary { seq: canary_seq },
            intended_ns: ts * 1_000_000,
        }];
        let mut extra = Duration::ZERO;
        let deadline = Instant::now().max(end_instant) + Duration::from_secs(5);
        if send_until(&senders[0], batch, stop, deadline, &mut extra, None) == Sent::Yes {
            live.canaries.lock().unwrap().push((canary_seq, ts));
            canary_seq += 1;
        }
    }

    let OfferedSeconds { by_payload: offered_by_second, by_wall: offered_by_wall_second } =
        live.seconds.lock().unwrap().clone();
    Ok(ProducerReport {
        readings_scheduled: scheduled_in_share(spec.points, spec.interval, spec.duration, spec.share),
        readings_offered: offered,
        offered_by_wall_second,
        offered_by_second,
        channel_wait_s: waited.as_secs_f64(),
        slots,
        behind_max_s: behind_max_ms as f64 / 1e3,
        behind_p95_s: if hist.is_empty() { 0.0 } else { hist.value_at_quantile(0.95) as f64 / 1e3 },
        start_ms,
        // Stopped early: the window ends on the last whole second, so no
        // second is compared half-offered.
        end_ms: if stopped_early { now_ms().min(end_ms).div_euclid(1000) * 1000 } else { end_ms },
        next_canary_seq: canary_seq,
        stopped_early,
        cut_at_wall_end,
    })
}

/// The readings a batch carries, by second of payload ts, into `out`
/// (cleared first; a slot's readings fall in one or two seconds).
fn by_payload_second(batch: &Batch, out: &mut Vec<(i64, u64)>) {
    out.clear();
    for m in batch {
        if let Carries::Readings { n, ts_s } = m.carries {
            match out.iter_mut().find(|(s, _)| *s == ts_s) {
                Some((_, k)) => *k += n as u64,
                None => out.push((ts_s, n as u64)),
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Sent {
    Yes,
    /// The wall-clock end came first: the batch is not offered.
    Deadline,
    /// Stopped, or the channel closed.
    Stopped,
}

/// Hand a batch to a connection, waiting while its channel is full, but
/// never past `deadline` or `stop`: a broker that stops acknowledging must
/// not pin the producer (and Ctrl-C) forever. Time spent waiting adds to
/// `waited`; while it waits, the live view shows how far behind the slot
/// due at `due` the producer is (not only when it reaches its next slot).
fn send_until(
    tx: &mpsc::Sender<Batch>,
    mut batch: Batch,
    stop: &AtomicBool,
    deadline: Instant,
    waited: &mut Duration,
    behind: Option<(Instant, &ProducerLive)>,
) -> Sent {
    let mut since: Option<Instant> = None;
    let out = loop {
        match tx.try_send(batch) {
            Ok(()) => break Sent::Yes,
            Err(mpsc::error::TrySendError::Closed(_)) => break Sent::Stopped,
            Err(mpsc::error::TrySendError::Full(b)) => {
                if stop.load(Ordering::Relaxed) {
                    break Sent::Stopped;
                }
                let now = Instant::now();
                since.get_or_insert(now);
                if now >= deadline {
                    break Sent::Deadline;
                }
                batch = b;
                if let Some((due, live)) = behind {
                    live.behind_ms.store(now.saturating_duration_since(due).as_millis() as u64, Ordering::Relaxed);
                }
                // Channels hold several slots of work: 1 ms of latency costs
                // nothing, and fewer wake-ups leave the CPU to the server.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    };
    if let Some(t) = since {
        *waited += t.elapsed();
    }
    out
}

/// An adapter's encoded batch must be self-consistent before the host
/// slices it: a bad plugin is an error naming it, not a panic.
/// The messages of an encoded batch (checked by [`check_encoded`]), each
/// with the tag of its first reading and the readings it carries.
pub fn split_encoded(
    enc: plugin_runtime::adapter_types::EncodedBatch,
    readings: &Readings,
    addresses: &[Arc<str>],
    intended_ns: impl Fn(usize) -> i64,
    mut each: impl FnMut(u32, Message, u32),
) {
    let payload = Bytes::from(enc.payload);
    let mut begin = 0usize;
    let mut reading_idx = 0usize;
    for i in 0..enc.ends.len() {
        let end = enc.ends[i] as usize;
        let carries = enc.carries.get(i).copied().unwrap_or(1);
        let r = reading_idx.min(readings.points.len().saturating_sub(1));
        let tag = readings.points[r];
        let ts_s = readings.ts_ms[r].div_euclid(1000);
        let address = addresses[enc.address_of[i] as usize].clone();
        each(
            tag,
            Message {
                address,
                payload: payload.slice(begin..end),
                carries: Carries::Readings { n: carries, ts_s },
                intended_ns: intended_ns(r),
            },
            carries,
        );
        begin = end;
        reading_idx += carries as usize;
    }
}

pub fn check_encoded(
    plugin: &str,
    enc: &plugin_runtime::adapter_types::EncodedBatch,
    addresses: usize,
    readings: usize,
) -> Result<(), PluginError> {
    let bad = |why: String| PluginError::Contract { plugin: plugin.to_string(), call: "encode".into(), problem: why };
    if enc.address_of.len() != enc.ends.len() {
        return Err(bad(format!("address-of has {} entries but ends has {}", enc.address_of.len(), enc.ends.len())));
    }
    let mut prev = 0u32;
    for (i, &e) in enc.ends.iter().enumerate() {
        if e < prev || e as usize > enc.payload.len() {
            return Err(bad(format!(
                "ends[{i}] = {e} is out of order or past the payload ({} bytes)",
                enc.payload.len()
            )));
        }
        prev = e;
    }
    if let Some(a) = enc.address_of.iter().find(|a| **a as usize >= addresses) {
        return Err(bad(format!("address-of names address {a}, but the table has {addresses}")));
    }
    let carried: u64 = enc.carries.iter().map(|c| *c as u64).sum();
    if !enc.carries.is_empty() && carried != readings as u64 {
        return Err(bad(format!("messages carry {carried} readings, but {readings} were given")));
    }
    Ok(())
}

/// Send topology messages for new points through the transport and count them.
pub fn topology_messages(
    adapter: &mut dyn Adapter,
    new_points: &[plugin_runtime::types::TagInfo],
) -> Result<Vec<Message>, PluginError> {
    Ok(adapter
        .topology(new_points)?
        .into_iter()
        .map(|m| Message {
            address: Arc::from(m.address.as_str()),
            payload: Bytes::from(m.payload),
            carries: Carries::Topology,
            intended_ns: crate::clock::now_ns(),
        })
        .collect())
}

#[cfg(test)]
mod share_tests {
    use super::*;

    #[test]
    fn shards_split_every_slot_and_their_union_is_the_whole_schedule() {
        for (points, interval_ms, duration_ms, workers) in [
            (1_000u32, 5_000u64, 30_000u64, 3u32),
            (1_000, 5_000, 12_000, 3),
            (2_500, 5_000, 12_500, 3),
            (7, 1_000, 4_300, 2),
            (100_000, 5_000, 20_000, 5),
        ] {
            let (i, d) = (Duration::from_millis(interval_ms), Duration::from_millis(duration_ms));
            let all = scheduled_in_share(points, i, d, Share::All);
            assert_eq!(all, scheduled_readings(points as u64, interval_ms, duration_ms));
            let shards: Vec<u64> = (0..workers)
                .map(|index| scheduled_in_share(points, i, d, Share::Shard { index, count: workers }))
                .collect();
            assert_eq!(shards.iter().sum::<u64>(), all, "{points} points, {workers} workers: {shards:?}");
            // Even, also when a slot holds fewer points than there are workers.
            for s in &shards {
                assert!(s.abs_diff(all / workers as u64) <= all / workers as u64 / 20 + 1, "{shards:?}");
            }
            assert_eq!(scheduled_in_share(points, i, d, Share::None), 0);
        }
        // Contiguous, disjoint, covering.
        let parts: Vec<(u64, u64)> = (0..3).map(|index| Share::Shard { index, count: 3 }.range(10, 21, 0)).collect();
        assert_eq!(parts, vec![(10, 13), (13, 17), (17, 21)]);
        let parts: Vec<(u64, u64)> = (0..3).map(|index| Share::Shard { index, count: 3 }.range(10, 21, 1)).collect();
        assert_eq!(parts, vec![(13, 17), (17, 21), (10, 13)], "the parts turn with the slot");
    }
}
