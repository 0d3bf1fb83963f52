//! Acknowledgement latency, measured the coordinated-omission-safe way.
//!
//! Every message carries its *intended* send time: the exact instant the
//! schedule's even spread gives its (first) reading, whether or not the
//! generator could hand it over then. Each acknowledgement is recorded as
//! wrk2 and HdrHistogram do: from the intended time (what a client of the
//! SUT would have waited, including any time the message sat behind a full
//! window or a blocked socket) and from the actual send (service time),
//! with the pacing's own lateness (send lag: sent − intended, 0 when sent
//! early) beside them. A message handed over before its instant (a slot's
//! readings go out together at the slot's start) is timed from its send:
//! latency from intended time is never below service time.
//!
//! Every instant comes from one monotonic clock at ns resolution
//! ([`crate::clock::now_ns`]): intended is the schedule's instant, sent is
//! when the bytes were handed to the socket, answered is when the
//! acknowledgement was read. The histograms count whole microseconds (3
//! significant figures for the soak, 2 per wall-clock second of arrival),
//! so their resolution is 1 µs ([`RESOLUTION_S`]): a quantile of 0 reads
//! "< 1 µs", never a number.
//!
//! The same recorder tracks *silences*: stretches during which a reading was
//! waiting (due and not yet answered) and the SUT answered nothing on that
//! connection. They do not depend on the generator's buffers: a reading held
//! in our channel, our in-flight window or the socket waits from its
//! intended time either way. The longest is kept, and every one of at least
//! [`NOTED_SILENCE_MS`], so a step with several stalls names each.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::per_second_latency::PerSecondLatency;

/// The resolution of every latency histogram, in seconds (whole µs).
pub const RESOLUTION_S: f64 = crate::clock::LATENCY_RESOLUTION_NS as f64 / 1e9;

/// Silences at least this long (ms) are kept one by one.
pub const NOTED_SILENCE_MS: i64 = 1_000;
/// At most this many are kept per record (the longest is always kept).
const MAX_NOTED_SILENCES: usize = 1_000;

/// When a message was due and when it went out (ns since the Unix epoch,
/// on the monotonic clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timing {
    pub intended_ns: i64,
    pub sent_ns: i64,
}

/// A stretch with readings waiting and no answer, ms since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Silence {
    pub from_ms: i64,
    pub to_ms: i64,
}

impl Silence {
    pub fn len_ms(&self) -> i64 {
        self.to_ms - self.from_ms
    }
}

/// Silences of several connections as one list of stretches: overlapping
/// ones joined (while one connection waited unanswered, the stall went on),
/// in time order.
pub fn joined(silences: &[Silence]) -> Vec<Silence> {
    let mut v: Vec<Silence> = silences.to_vec();
    v.sort_by_key(|s| (s.from_ms, s.to_ms));
    let mut out: Vec<Silence> = Vec::with_capacity(v.len());
    for s in v {
        match out.last_mut() {
            Some(l) if s.from_ms <= l.to_ms => l.to_ms = l.to_ms.max(s.to_ms),
            _ => out.push(s),
        }
    }
    out
}

/// One connection's (or, merged, one step's) latency record. On the wire
/// (a worker's report to its coordinator) the histograms travel in
/// HdrHistogram's V2 deflate format, base64 in JSON, so merging after the
/// trip is exact.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "RecorderWire", try_from = "RecorderWire")]
pub struct Recorder {
    /// Readings due before this (the soak's start, ms since the epoch) are
    /// not in the step's histograms or silences; `i64::MIN` records everything.
    pub from_ms: i64,
    /// From intended send time, µs.
    pub intended_us: Histogram<u64>,
    /// From the actual send (service time), µs.
    pub service_us: Histogram<u64>,
    /// Exact sums of what `intended_us` and `service_us` hold (µs), for
    /// the live endpoint's histograms (`live_metrics`).
    pub intended_sum_us: u64,
    pub service_sum_us: u64,
    /// Sent − intended (0 when sent early), µs: the pacing's own lateness.
    pub send_lag_us: Histogram<u64>,
    /// Intended-time latency (µs) by wall-clock second the answer arrived
    /// (closed seconds packed: see [`PerSecondLatency`]).
    pub per_second_us: PerSecondLatency,
    /// Whether per-second histograms are kept.
    pub per_second: bool,
    /// Whether anything is recorded at all (the generator benchmark
    /// measures the recording's cost by turning it off).
    pub enabled: bool,
    last_answer_ns: Option<i64>,
    /// Earliest wait of readings that ended unanswered (an error, a broken
    /// connection) since the last answer.
    unanswered_since_ns: Option<i64>,
    pub longest_silence: Option<Silence>,
    /// Every silence of at least [`NOTED_SILENCE_MS`] (the first
    /// [`MAX_NOTED_SILENCES`]), in the order they ended.
    pub silences: Vec<Silence>,
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder::new(i64::MIN)
    }
}

fn step_histogram() -> Histogram<u64> {
    let mut h = Histogram::new(3).expect("3 significant figures");
    h.auto(true);
    h
}

/// [`Recorder`] as it travels.
#[derive(Serialize, Deserialize)]
struct RecorderWire {
    from_ms: i64,
    intended_us: String,
    service_us: String,
    #[serde(default)]
    intended_sum_us: u64,
    #[serde(default)]
    service_sum_us: u64,
    send_lag_us: String,
    per_second_us: BTreeMap<i64, String>,
    /// Seconds settled to their p99 (µs; null: not known).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    per_second_p99_us: BTreeMap<i64, Option<u64>>,
    per_second: bool,
    enabled: bool,
    last_answer_ns: Option<i64>,
    unanswered_since_ns: Option<i64>,
    longest_silence: Option<Silence>,
    silences: Vec<Silence>,
}

fn histogram_to_wire<T: hdrhistogram::Counter>(h: &Histogram<T>) -> String {
    use base64::Engine as _;
    let mut out = Vec::new();
    hdrhistogram::serialization::Serializer::serialize(
        &mut hdrhistogram::serialization::V2DeflateSerializer::new(),
        h,
        &mut out,
    )
    .expect("serializing a histogram into memory");
    base64::engine::general_purpose::STANDARD.encode(out)
}

fn histogram_from_wire<T: hdrhistogram::Counter>(s: &str) -> Result<Histogram<T>, String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(s).map_err(|e| format!("latency histogram: {e}"))?;
    let mut h: Histogram<T> = hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(|e| format!("latency histogram: {e:?}"))?;
    h.auto(true);
    Ok(h)
}

impl From<Recorder> for RecorderWire {
    fn from(r: Recorder) -> RecorderWire {
        RecorderWire {
            from_ms: r.from_ms,
            intended_us: histogram_to_wire(&r.intended_us),
            service_us: histogram_to_wire(&r.service_us),
            intended_sum_us: r.intended_sum_us,
            service_sum_us: r.service_sum_us,
            send_lag_us: histogram_to_wire(&r.send_lag_us),
            per_second_us: r.per_second_us.iter().map(|(s, h)| (s, histogram_to_wire(&h))).collect(),
            per_second_p99_us: r.per_second_us.settled().clone(),
            per_second: r.per_second,
            enabled: r.enabled,
            last_answer_ns: r.last_answer_ns,
            unanswered_since_ns: r.unanswered_since_ns,
            longest_silence: r.longest_silence,
            silences: r.silences,
        }
    }
}

impl TryFrom<RecorderWire> for Recorder {
    type Error = String;
    fn try_from(w: RecorderWire) -> Result<Recorder, String> {
        let mut seconds = Vec::with_capacity(w.per_second_us.len());
        for (s, h) in &w.per_second_us {
            seconds.push((*s, histogram_from_wire(h)?));
        }
        let mut per_second_us: PerSecondLatency = seconds.into_iter().collect();
        for (s, p99) in w.per_second_p99_us {
            per_second_us.add_settled(s, p99);
        }
        Ok(Recorder {
            from_ms: w.from_ms,
            intended_us: histogram_from_wire(&w.intended_us)?,
            service_us: histogram_from_wire(&w.service_us)?,
            intended_sum_us: w.intended_sum_us,
            service_sum_us: w.service_sum_us,
            send_lag_us: histogram_from_wire(&w.send_lag_us)?,
            per_second_us,
            per_second: w.per_second,
            enabled: w.enabled,
            last_answer_ns: w.last_answer_ns,
            unanswered_since_ns: w.unanswered_since_ns,
            longest_silence: w.longest_silence,
            silences: w.silences,
        })
    }
}

/// Whole microseconds of a non-negative span of ns (below 1 µs: 0, which
/// reads "< 1 µs").
#[inline]
fn us(ns: i64) -> u64 {
    (ns.max(0) / 1_000) as u64
}

impl Recorder {
    pub fn new(from_ms: i64) -> Recorder {
        Recorder {
            from_ms,
            intended_us: step_histogram(),
            service_us: step_histogram(),
            intended_sum_us: 0,
            service_sum_us: 0,
            send_lag_us: step_histogram(),
            per_second_us: PerSecondLatency::default(),
            per_second: true,
            enabled: true,
            last_answer_ns: None,
            unanswered_since_ns: None,
            longest_silence: None,
            silences: Vec::new(),
        }
    }

    /// The SUT answered (acknowledged or refused) a message carrying `n`
    /// readings at `at_ns`. Only acknowledgements go into the histograms.
    #[inline]
    pub fn answered(&mut self, t: Timing, n: u64, at_ns: i64, acked: bool) {
        if !self.enabled {
            return;
        }
        let waited_from = self.last_answer_ns.map_or(t.intended_ns, |l| l.max(t.intended_ns));
        let since = self.unanswered_since_ns.map_or(waited_from, |u| u.min(waited_from));
        if at_ns - since >= 1_000_000 {
            self.note_silence(since, at_ns);
        }
        self.unanswered_since_ns = None;
        self.last_answer_ns = Some(self.last_answer_ns.map_or(at_ns, |l| l.max(at_ns)));
        if !acked || n == 0 {
            return;
        }
        // Sent before its instant (with its slot): timed from the send.
        let from_intended = us(at_ns - t.intended_ns.min(t.sent_ns));
        if self.per_second {
            self.per_second_us.record_n(at_ns.div_euclid(1_000_000_000), from_intended, n as u32);
        }
        if t.intended_ns >= self.from_ms.saturating_mul(1_000_000) {
            let service = us(at_ns - t.sent_ns);
            let _ = self.intended_us.record_n(from_intended, n);
            let _ = self.service_us.record_n(service, n);
            self.intended_sum_us = self.intended_sum_us.saturating_add(from_intended.saturating_mul(n));
            self.service_sum_us = self.service_sum_us.saturating_add(service.saturating_mul(n));
            let _ = self.send_lag_us.record_n(us(t.sent_ns - t.intended_ns), n);
        }
    }

    /// A message ended without an answer (an error, a lost connection).
    pub fn unanswered(&mut self, t: Timing) {
        let since = self.last_answer_ns.map_or(t.intended_ns, |l| l.max(t.intended_ns));
        self.unanswered_since_ns = Some(self.unanswered_since_ns.map_or(since, |u| u.min(since)));
    }

    /// The transport is done at `at_ns`; `waiting` is true when readings
    /// were still unanswered (in flight or never sent), since `oldest_ns`
    /// when known. A silence that never ended ends here.
    pub fn close(&mut self, at_ns: i64, waiting: bool, oldest_ns: Option<i64>) {
        let mut since = self.unanswered_since_ns;
        if waiting {
            let w = match (self.last_answer_ns, oldest_ns) {
                (Some(l), Some(o)) => l.max(o),
                (Some(l), None) => l,
                (None, Some(o)) => o,
                (None, None) => return,
            };
            since = Some(since.map_or(w, |s| s.min(w)));
        }
        if let Some(s) = since {
            self.note_silence(s, at_ns);
        }
        self.unanswered_since_ns = None;
    }

    fn note_silence(&mut self, since_ns: i64, to_ns: i64) {
        let from_ms = since_ns.div_euclid(1_000_000).max(self.from_ms);
        let to_ms = to_ns.div_euclid(1_000_000);
        if to_ms <= from_ms {
            return;
        }
        let s = Silence { from_ms, to_ms };
        if self.longest_silence.is_none_or(|l| s.len_ms() > l.len_ms()) {
            self.longest_silence = Some(s);
        }
        if s.len_ms() >= NOTED_SILENCE_MS && self.silences.len() < MAX_NOTED_SILENCES {
            self.silences.push(s);
        }
    }

    /// Add another connection's record (histograms summed, the longest silence kept).
    pub fn merge(&mut self, o: &Recorder) {
        let _ = self.intended_us.add(&o.intended_us);
        let _ = self.service_us.add(&o.service_us);
        let _ = self.send_lag_us.add(&o.send_lag_us);
        self.intended_sum_us = self.intended_sum_us.saturating_add(o.intended_sum_us);
        self.service_sum_us = self.service_sum_us.saturating_add(o.service_sum_us);
        self.per_second_us.add(&o.per_second_us);
        if let Some(s) = o.longest_silence {
            if self.longest_silence.is_none_or(|l| s.len_ms() > l.len_ms()) {
                self.longest_silence = Some(s);
            }
        }
        let room = MAX_NOTED_SILENCES.saturating_sub(self.silences.len());
        self.silences.extend(o.silences.iter().take(room).copied());
        self.last_answer_ns = match (self.last_answer_ns, o.last_answer_ns) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }

    /// Intended-time latency p99 (s) of the answers that arrived in second `s`.
    pub fn p99_in_second_s(&self, s: i64) -> Option<f64> {
        self.per_second_us.p99(s).map(|us| us as f64 / 1e6)
    }
}

/// Quantiles of one latency histogram (µs), in seconds; all None when
/// nothing was recorded (never zero). A quantile of 0 is below the
/// resolution ([`RESOLUTION_S`]): shown as "< 1 µs", never as a number.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Quantiles {
    /// Readings recorded (weighted: a message of n readings counts n).
    pub count: u64,
    pub p50_s: Option<f64>,
    pub p90_s: Option<f64>,
    pub p99_s: Option<f64>,
    pub p999_s: Option<f64>,
    pub max_s: Option<f64>,
    /// The smallest value recorded (the floor's fastest round trip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_s: Option<f64>,
}

impl Quantiles {
    pub fn of(h: &Histogram<u64>) -> Quantiles {
        if h.is_empty() {
            return Quantiles::default();
        }
        let q = |x: f64| Some(h.value_at_quantile(x) as f64 / 1e6);
        Quantiles {
            count: h.len(),
            p50_s: q(0.5),
            p90_s: q(0.9),
            p99_s: q(0.99),
            p999_s: q(0.999),
            max_s: Some(h.max() as f64 / 1e6),
            min_s: Some(h.min() as f64 / 1e6),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A timing in ms (the tests' unit), on the ns clock.
    fn t(intended_ms: i64, sent_ms: i64) -> Timing {
        Timing { intended_ns: intended_ms * 1_000_000, sent_ns: sent_ms * 1_000_000 }
    }

    /// ms → ns.
    fn ms(x: i64) -> i64 {
        x * 1_000_000
    }

    #[test]
    fn microseconds_are_recorded_as_microseconds_and_below_one_reads_as_zero() {
        let mut r = Recorder::new(0);
        let base = 1_000_000_000_000i64;
        // Sent 30 µs after its instant, answered 92.5 µs after the send.
        r.answered(Timing { intended_ns: base, sent_ns: base + 30_000 }, 1, base + 122_500, true);
        let i = Quantiles::of(&r.intended_us);
        let s = Quantiles::of(&r.service_us);
        let l = Quantiles::of(&r.send_lag_us);
        assert!((s.p50_s.unwrap() - 92e-6).abs() < 1e-6, "{s:?}");
        assert!((i.p50_s.unwrap() - 122e-6).abs() < 1e-6, "{i:?}");
        assert!((l.p50_s.unwrap() - 30e-6).abs() < 1e-6, "{l:?}");
        // 400 ns: below the resolution, recorded as 0 (read as "< 1 µs").
        let mut r = Recorder::new(0);
        r.answered(Timing { intended_ns: base, sent_ns: base }, 1, base + 400, true);
        assert_eq!(Quantiles::of(&r.service_us).p50_s, Some(0.0));
    }

    #[test]
    fn a_reading_sent_before_its_instant_is_timed_from_its_send() {
        let mut r = Recorder::new(0);
        // Due at 1,008 ms, sent with its slot at 1,000 ms, answered at 1,001 ms.
        r.answered(t(1_008, 1_000), 1, ms(1_001), true);
        let i = Quantiles::of(&r.intended_us);
        assert!((i.p50_s.unwrap() - 0.001).abs() < 1e-5, "never below service time: {i:?}");
        assert_eq!(Quantiles::of(&r.send_lag_us).p50_s, Some(0.0), "early is no lag");
    }

    #[test]
    fn every_long_silence_is_kept_and_joined_across_connections() {
        let mut a = Recorder::new(0);
        let mut b = Recorder::new(0);
        for k in 0..3i64 {
            let at = 10_000 + k * 20_000;
            a.answered(t(at - 10, at - 10), 1, ms(at - 9), true);
            a.answered(t(at, at), 1, ms(at + 6_000), true);
            b.answered(t(at + 1_000, at + 1_000), 1, ms(at + 6_500), true);
        }
        a.merge(&b);
        let stalls: Vec<_> = joined(&a.silences).into_iter().filter(|s| s.len_ms() > 5_000).collect();
        assert_eq!(stalls.len(), 3, "{stalls:?}");
        assert_eq!(stalls[0], Silence { from_ms: 10_000, to_ms: 16_500 });
    }

    #[test]
    fn latency_counts_from_the_intended_time_and_from_the_send() {
        let mut r = Recorder::new(0);
        // Due at 1000, held back in our buffers until 4000, acked at 4010.
        r.answered(t(1000, 4000), 1, ms(4010), true);
        let i = Quantiles::of(&r.intended_us);
        let s = Quantiles::of(&r.service_us);
        assert!((i.max_s.unwrap() - 3.01).abs() < 0.01, "{i:?}");
        assert!((s.max_s.unwrap() - 0.01).abs() < 0.001, "{s:?}");
        // Per second: 2 significant figures (within 1 %).
        assert!((r.p99_in_second_s(4).unwrap() - 3.01).abs() < 0.03, "{:?}", r.p99_in_second_s(4));
        assert_eq!(r.p99_in_second_s(3), None, "no answer in second 3: None, never 0");
    }

    #[test]
    fn readings_due_before_the_soak_are_not_in_the_step_histograms() {
        let mut r = Recorder::new(10_000);
        r.answered(t(9_000, 9_000), 5, ms(9_001), true);
        assert!(r.intended_us.is_empty());
        assert_eq!(Quantiles::of(&r.intended_us), Quantiles::default(), "unmeasured is None, never 0");
        r.answered(t(10_000, 10_000), 5, ms(10_002), true);
        assert_eq!(r.intended_us.len(), 5, "weighted by readings");
    }

    #[test]
    fn a_silence_is_the_same_whether_the_reading_waited_in_our_buffers_or_in_the_sut() {
        // Big window: sent on time at 20 s, answered at 40 s.
        let mut big = Recorder::new(0);
        big.answered(t(19_990, 19_990), 1, ms(19_991), true);
        big.answered(t(20_000, 20_000), 1, ms(40_000), true);
        // Small window: the same reading sat in our channel until 40 s.
        let mut small = Recorder::new(0);
        small.answered(t(19_990, 19_990), 1, ms(19_991), true);
        small.answered(t(20_000, 39_990), 1, ms(40_000), true);
        assert_eq!(big.longest_silence, small.longest_silence);
        assert_eq!(big.longest_silence, Some(Silence { from_ms: 20_000, to_ms: 40_000 }));
    }

    #[test]
    fn quick_answers_at_a_low_rate_are_no_silence() {
        let mut r = Recorder::new(0);
        for k in 0..10 {
            r.answered(t(k * 10_000, k * 10_000), 1, ms(k * 10_000 + 2), true);
        }
        assert_eq!(r.longest_silence.unwrap().len_ms(), 2);
    }

    #[test]
    fn errors_and_a_silence_that_never_ends_are_closed_at_the_end() {
        let mut r = Recorder::new(0);
        r.answered(t(1_000, 1_000), 1, ms(1_001), true);
        r.unanswered(t(2_000, 2_000));
        r.close(ms(9_000), false, None);
        assert_eq!(r.longest_silence, Some(Silence { from_ms: 2_000, to_ms: 9_000 }));
        let mut r = Recorder::new(0);
        r.answered(t(1_000, 1_000), 1, ms(1_001), true);
        r.close(ms(30_000), true, Some(ms(1_500)));
        assert_eq!(r.longest_silence, Some(Silence { from_ms: 1_500, to_ms: 30_000 }));
        // Nothing waiting: nothing to close.
        let mut r = Recorder::new(0);
        r.answered(t(1_000, 1_000), 1, ms(1_001), true);
        r.close(ms(30_000), false, None);
        assert_eq!(r.longest_silence.unwrap().len_ms(), 1);
    }

    #[test]
    fn merging_keeps_the_longest_silence_and_sums_histograms() {
        let mut a = Recorder::new(0);
        a.answered(t(0, 0), 2, ms(5_000), true);
        let mut b = Recorder::new(0);
        b.answered(t(0, 0), 3, ms(1_000), true);
        a.merge(&b);
        assert_eq!(a.intended_us.len(), 5);
        assert_eq!(a.longest_silence.unwrap().len_ms(), 5_000);
        assert_eq!(a.per_second_us.len(), 2);
    }

    #[test]
    fn a_record_survives_the_wire_exactly() {
        let mut a = Recorder::new(0);
        a.answered(t(0, 0), 2, ms(5_000), true);
        a.answered(t(100, 150), 7, ms(1_250), true);
        a.unanswered(t(6_000, 6_000));
        a.per_second_us.add_settled(-5, Some(1_234));
        a.per_second_us.add_settled(-4, None);
        let json = serde_json::to_string(&a).unwrap();
        let b: Recorder = serde_json::from_str(&json).unwrap();
        assert_eq!(b.intended_us, a.intended_us);
        assert_eq!(b.service_us, a.service_us);
        assert_eq!(b.per_second_us, a.per_second_us);
        assert_eq!((b.p99_in_second_s(-5), b.p99_in_second_s(-4)), (Some(0.001234), None));
        assert_eq!(b.longest_silence, a.longest_silence);
        assert_eq!((b.last_answer_ns, b.unanswered_since_ns), (a.last_answer_ns, a.unanswered_since_ns));
        assert_eq!(Quantiles::of(&b.intended_us), Quantiles::of(&a.intended_us));
    }

    #[test]
    fn refusals_end_a_silence_but_are_not_latency() {
        let mut r = Recorder::new(0);
        r.answered(t(0, 0), 4, ms(100), false);
        assert!(r.intended_us.is_empty());
        assert_eq!(r.longest_silence.unwrap().len_ms(), 100);
    }
}
