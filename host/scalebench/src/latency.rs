//! Acknowledgement latency, measured the coordinated-omission-safe way.
//!
//! Every message carries its *intended* send time: when the schedule said it
//! was due (the producer's slot), whether or not the generator could hand it
//! over then. Each acknowledgement is recorded twice, as wrk2 and
//! HdrHistogram do: from the intended time (what a client of the SUT would
//! have waited, including any time the message sat behind a full window or
//! a blocked socket) and from the actual send (service time). Both go into
//! HdrHistograms (µs, 3 significant figures) for the soak, and the intended
//! time also per wall-clock second of arrival (ms, 2 significant figures,
//! small while latencies are), for the per-second series.
//!
//! The same recorder tracks the longest *silence*: a stretch during which a
//! reading was waiting (due and not yet answered) and the SUT answered
//! nothing on that connection. It does not depend on the generator's
//! buffers: a reading held in our channel, our in-flight window or the
//! socket waits from its intended time either way.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::per_second_latency::PerSecondLatency;

/// When a message was due and when it went out (ms since the Unix epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timing {
    pub intended_ms: i64,
    pub sent_ms: i64,
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

/// One connection's (or, merged, one step's) latency record. On the wire
/// (a worker's report to its coordinator) the histograms travel in
/// HdrHistogram's V2 deflate format, base64 in JSON, so merging after the
/// trip is exact.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "RecorderWire", try_from = "RecorderWire")]
pub struct Recorder {
    /// Readings due before this (the soak's start) are not in the step's
    /// histograms or silences; `i64::MIN` records everything.
    pub from_ms: i64,
    pub intended_us: Histogram<u64>,
    pub service_us: Histogram<u64>,
    /// Intended-time latency (ms) by wall-clock second the answer arrived
    /// (closed seconds packed: see [`PerSecondLatency`]).
    pub per_second_ms: PerSecondLatency,
    /// Whether per-second histograms are kept.
    pub per_second: bool,
    /// Whether anything is recorded at all (the generator benchmark
    /// measures the recording's cost by turning it off).
    pub enabled: bool,
    last_answer_ms: Option<i64>,
    /// Earliest wait of readings that ended unanswered (an error, a broken
    /// connection) since the last answer.
    unanswered_since_ms: Option<i64>,
    pub longest_silence: Option<Silence>,
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
    per_second_ms: BTreeMap<i64, String>,
    per_second: bool,
    enabled: bool,
    last_answer_ms: Option<i64>,
    unanswered_since_ms: Option<i64>,
    longest_silence: Option<Silence>,
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
            per_second_ms: r.per_second_ms.iter().map(|(s, h)| (s, histogram_to_wire(&h))).collect(),
            per_second: r.per_second,
            enabled: r.enabled,
            last_answer_ms: r.last_answer_ms,
            unanswered_since_ms: r.unanswered_since_ms,
            longest_silence: r.longest_silence,
        }
    }
}

impl TryFrom<RecorderWire> for Recorder {
    type Error = String;
    fn try_from(w: RecorderWire) -> Result<Recorder, String> {
        let mut seconds = Vec::with_capacity(w.per_second_ms.len());
        for (s, h) in &w.per_second_ms {
            seconds.push((*s, histogram_from_wire(h)?));
        }
        let per_second_ms: PerSecondLatency = seconds.into_iter().collect();
        Ok(Recorder {
            from_ms: w.from_ms,
            intended_us: histogram_from_wire(&w.intended_us)?,
            service_us: histogram_from_wire(&w.service_us)?,
            per_second_ms,
            per_second: w.per_second,
            enabled: w.enabled,
            last_answer_ms: w.last_answer_ms,
            unanswered_since_ms: w.unanswered_since_ms,
            longest_silence: w.longest_silence,
        })
    }
}

impl Recorder {
    pub fn new(from_ms: i64) -> Recorder {
        Recorder {
            from_ms,
            intended_us: step_histogram(),
            service_us: step_histogram(),
            per_second_ms: PerSecondLatency::default(),
            per_second: true,
            enabled: true,
            last_answer_ms: None,
            unanswered_since_ms: None,
            longest_silence: None,
        }
    }

    /// The SUT answered (acknowledged or refused) a message carrying `n`
    /// readings at `at_ms`. Only acknowledgements go into the histograms.
    pub fn answered(&mut self, t: Timing, n: u64, at_ms: i64, acked: bool) {
        if !self.enabled {
            return;
        }
        let waited_from = self.last_answer_ms.map_or(t.intended_ms, |l| l.max(t.intended_ms));
        let since = self.unanswered_since_ms.map_or(waited_from, |u| u.min(waited_from));
        self.note_silence(since, at_ms);
        self.unanswered_since_ms = None;
        self.last_answer_ms = Some(self.last_answer_ms.map_or(at_ms, |l| l.max(at_ms)));
        if !acked || n == 0 {
            return;
        }
        let intended_ms = (at_ms - t.intended_ms).max(0);
        if self.per_second {
            self.per_second_ms.record_n(at_ms.div_euclid(1000), intended_ms.max(1) as u64, n as u32);
        }
        if t.intended_ms >= self.from_ms {
            let _ = self.intended_us.record_n((intended_ms * 1000).max(1) as u64, n);
            let _ = self.service_us.record_n(((at_ms - t.sent_ms).max(0) * 1000).max(1) as u64, n);
        }
    }

    /// A message ended without an answer (an error, a lost connection).
    pub fn unanswered(&mut self, t: Timing) {
        let since = self.last_answer_ms.map_or(t.intended_ms, |l| l.max(t.intended_ms));
        self.unanswered_since_ms = Some(self.unanswered_since_ms.map_or(since, |u| u.min(since)));
    }

    /// The transport is done at `at_ms`; `waiting` is true when readings
    /// were still unanswered (in flight or never sent), since `oldest_ms`
    /// when known. A silence that never ended ends here.
    pub fn close(&mut self, at_ms: i64, waiting: bool, oldest_ms: Option<i64>) {
        let mut since = self.unanswered_since_ms;
        if waiting {
            let w = match (self.last_answer_ms, oldest_ms) {
                (Some(l), Some(o)) => l.max(o),
                (Some(l), None) => l,
                (None, Some(o)) => o,
                (None, None) => return,
            };
            since = Some(since.map_or(w, |s| s.min(w)));
        }
        if let Some(s) = since {
            self.note_silence(s, at_ms);
        }
        self.unanswered_since_ms = None;
    }

    fn note_silence(&mut self, since_ms: i64, to_ms: i64) {
        let from_ms = since_ms.max(self.from_ms);
        if to_ms <= from_ms {
            return;
        }
        let s = Silence { from_ms, to_ms };
        if self.longest_silence.is_none_or(|l| s.len_ms() > l.len_ms()) {
            self.longest_silence = Some(s);
        }
    }

    /// Add another connection's record (histograms summed, the longest silence kept).
    pub fn merge(&mut self, o: &Recorder) {
        let _ = self.intended_us.add(&o.intended_us);
        let _ = self.service_us.add(&o.service_us);
        self.per_second_ms.add(&o.per_second_ms);
        if let Some(s) = o.longest_silence {
            if self.longest_silence.is_none_or(|l| s.len_ms() > l.len_ms()) {
                self.longest_silence = Some(s);
            }
        }
        self.last_answer_ms = match (self.last_answer_ms, o.last_answer_ms) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }

    /// Intended-time latency p99 (s) of the answers that arrived in second `s`.
    pub fn p99_in_second_s(&self, s: i64) -> Option<f64> {
        self.per_second_ms.get(s).filter(|h| !h.is_empty()).map(|h| h.value_at_quantile(0.99) as f64 / 1e3)
    }
}

/// Quantiles of one latency histogram, in seconds; all None when nothing
/// was recorded (never zero).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Quantiles {
    /// Readings recorded (weighted: a message of n readings counts n).
    pub count: u64,
    pub p50_s: Option<f64>,
    pub p90_s: Option<f64>,
    pub p99_s: Option<f64>,
    pub p999_s: Option<f64>,
    pub max_s: Option<f64>,
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(intended_ms: i64, sent_ms: i64) -> Timing {
        Timing { intended_ms, sent_ms }
    }

    #[test]
    fn latency_counts_from_the_intended_time_and_from_the_send() {
        let mut r = Recorder::new(0);
        // Due at 1000, held back in our buffers until 4000, acked at 4010.
        r.answered(t(1000, 4000), 1, 4010, true);
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
        r.answered(t(9_000, 9_000), 5, 9_001, true);
        assert!(r.intended_us.is_empty());
        assert_eq!(Quantiles::of(&r.intended_us), Quantiles::default(), "unmeasured is None, never 0");
        r.answered(t(10_000, 10_000), 5, 10_002, true);
        assert_eq!(r.intended_us.len(), 5, "weighted by readings");
    }

    #[test]
    fn a_silence_is_the_same_whether_the_reading_waited_in_our_buffers_or_in_the_sut() {
        // Big window: sent on time at 20 s, answered at 40 s.
        let mut big = Recorder::new(0);
        big.answered(t(19_990, 19_990), 1, 19_991, true);
        big.answered(t(20_000, 20_000), 1, 40_000, true);
        // Small window: the same reading sat in our channel until 40 s.
        let mut small = Recorder::new(0);
        small.answered(t(19_990, 19_990), 1, 19_991, true);
        small.answered(t(20_000, 39_990), 1, 40_000, true);
        assert_eq!(big.longest_silence, small.longest_silence);
        assert_eq!(big.longest_silence, Some(Silence { from_ms: 20_000, to_ms: 40_000 }));
    }

    #[test]
    fn quick_answers_at_a_low_rate_are_no_silence() {
        let mut r = Recorder::new(0);
        for k in 0..10 {
            r.answered(t(k * 10_000, k * 10_000), 1, k * 10_000 + 2, true);
        }
        assert_eq!(r.longest_silence.unwrap().len_ms(), 2);
    }

    #[test]
    fn errors_and_a_silence_that_never_ends_are_closed_at_the_end() {
        let mut r = Recorder::new(0);
        r.answered(t(1_000, 1_000), 1, 1_001, true);
        r.unanswered(t(2_000, 2_000));
        r.close(9_000, false, None);
        assert_eq!(r.longest_silence, Some(Silence { from_ms: 2_000, to_ms: 9_000 }));
        let mut r = Recorder::new(0);
        r.answered(t(1_000, 1_000), 1, 1_001, true);
        r.close(30_000, true, Some(1_500));
        assert_eq!(r.longest_silence, Some(Silence { from_ms: 1_500, to_ms: 30_000 }));
        // Nothing waiting: nothing to close.
        let mut r = Recorder::new(0);
        r.answered(t(1_000, 1_000), 1, 1_001, true);
        r.close(30_000, false, None);
        assert_eq!(r.longest_silence.unwrap().len_ms(), 1);
    }

    #[test]
    fn merging_keeps_the_longest_silence_and_sums_histograms() {
        let mut a = Recorder::new(0);
        a.answered(t(0, 0), 2, 5_000, true);
        let mut b = Recorder::new(0);
        b.answered(t(0, 0), 3, 1_000, true);
        a.merge(&b);
        assert_eq!(a.intended_us.len(), 5);
        assert_eq!(a.longest_silence.unwrap().len_ms(), 5_000);
        assert_eq!(a.per_second_ms.len(), 2);
    }

    #[test]
    fn a_record_survives_the_wire_exactly() {
        let mut a = Recorder::new(0);
        a.answered(t(0, 0), 2, 5_000, true);
        a.answered(t(100, 150), 7, 1_250, true);
        a.unanswered(t(6_000, 6_000));
        let json = serde_json::to_string(&a).unwrap();
        let b: Recorder = serde_json::from_str(&json).unwrap();
        assert_eq!(b.intended_us, a.intended_us);
        assert_eq!(b.service_us, a.service_us);
        assert_eq!(b.per_second_ms, a.per_second_ms);
        assert_eq!(b.longest_silence, a.longest_silence);
        assert_eq!((b.last_answer_ms, b.unanswered_since_ms), (a.last_answer_ms, a.unanswered_since_ms));
        assert_eq!(Quantiles::of(&b.intended_us), Quantiles::of(&a.intended_us));
    }

    #[test]
    fn refusals_end_a_silence_but_are_not_latency() {
        let mut r = Recorder::new(0);
        r.answered(t(0, 0), 4, 100, false);
        assert!(r.intended_us.is_empty());
        assert_eq!(r.longest_silence.unwrap().len_ms(), 100);
    }
}
