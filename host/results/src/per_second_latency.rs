//! Intended-time latency by wall-clock second: one HdrHistogram per second
//! an answer arrived in, from which the step's per-second p99 is read.
//!
//! A histogram's counts array costs 1–5 KB whatever it holds (2 significant
//! figures, ms up to a minute), and every connection keeps one per second of
//! the step: over an hour-long soak that grew scalebench's RSS by about
//! 20 MB/h. Answers on one connection arrive in wall-clock order, so once one
//! arrives in a later second the earlier second is done: it is kept packed in
//! HdrHistogram's V2 encoding (tens to hundreds of bytes, zero runs
//! collapsed) and unpacked only when read or merged. Only the current second
//! stays open. The test `an_hour_of_answers_packs_into_a_fraction_of_open_histograms`
//! measures both forms on the same hour of answers.

use std::collections::BTreeMap;

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;

/// A second's latency histogram, in ms.
pub type SecondHistogram = Histogram<u32>;

fn new_histogram() -> SecondHistogram {
    let mut h = Histogram::new(2).expect("2 significant figures");
    h.auto(true);
    h
}

fn pack(h: &SecondHistogram) -> Vec<u8> {
    let mut out = Vec::new();
    V2Serializer::new().serialize(h, &mut out).expect("serializing a histogram into memory");
    out.shrink_to_fit();
    out
}

fn unpack(bytes: &[u8]) -> SecondHistogram {
    let mut h: SecondHistogram = Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .expect("a histogram this process packed itself");
    h.auto(true);
    h
}

/// Latency histograms by second: the current one open, the closed ones packed.
#[derive(Debug, Clone, Default)]
pub struct PerSecondLatency {
    open: Option<(i64, SecondHistogram)>,
    closed: BTreeMap<i64, Vec<u8>>,
}

impl PerSecondLatency {
    /// `n` answers in `second`, each `ms` after its intended time.
    pub fn record_n(&mut self, second: i64, ms: u64, n: u32) {
        match &mut self.open {
            Some((s, h)) if *s == second => {
                let _ = h.record_n(ms, n);
                return;
            }
            Some((s, _)) if *s > second => {
                // Late (a clock step back): into its packed second.
                let mut h = self.closed.get(&second).map(|b| unpack(b)).unwrap_or_else(new_histogram);
                let _ = h.record_n(ms, n);
                self.closed.insert(second, pack(&h));
                return;
            }
            _ => {}
        }
        self.close_open();
        let mut h = self.closed.remove(&second).map(|b| unpack(&b)).unwrap_or_else(new_histogram);
        let _ = h.record_n(ms, n);
        self.open = Some((second, h));
    }

    /// Pack the open second (added to what was packed for it already).
    fn close_open(&mut self) {
        if let Some((s, mut h)) = self.open.take() {
            if let Some(b) = self.closed.get(&s) {
                let _ = h.add(unpack(b));
            }
            self.closed.insert(s, pack(&h));
        }
    }

    /// The histogram of `second`, if any answer arrived in it.
    pub fn get(&self, second: i64) -> Option<SecondHistogram> {
        match &self.open {
            Some((s, h)) if *s == second => Some(h.clone()),
            _ => self.closed.get(&second).map(|b| unpack(b)),
        }
    }

    /// Every second with answers, in order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, SecondHistogram)> + '_ {
        let mut seconds: Vec<i64> = self.closed.keys().copied().collect();
        if let Some((s, _)) = &self.open {
            if !self.closed.contains_key(s) {
                seconds.push(*s);
                seconds.sort_unstable();
            }
        }
        seconds.into_iter().filter_map(move |s| {
            let packed = self.closed.get(&s).map(|b| unpack(b));
            let open = self.open.as_ref().filter(|(o, _)| *o == s).map(|(_, h)| h.clone());
            match (packed, open) {
                (Some(mut a), Some(b)) => {
                    let _ = a.add(b);
                    Some((s, a))
                }
                (a, b) => a.or(b).map(|h| (s, h)),
            }
        })
    }

    /// How many seconds have answers.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_none() && self.closed.is_empty()
    }

    /// Add another record's seconds to these (histograms summed).
    pub fn add(&mut self, other: &PerSecondLatency) {
        self.close_open();
        for (s, h) in other.iter() {
            let mut mine = self.closed.get(&s).map(|b| unpack(b)).unwrap_or_else(new_histogram);
            let _ = mine.add(h);
            self.closed.insert(s, pack(&mine));
        }
    }

    /// Bytes held on the heap: the open histogram's counts and the packed seconds.
    pub fn heap_bytes(&self) -> usize {
        let open = self.open.as_ref().map_or(0, |(_, h)| h.distinct_values() * std::mem::size_of::<u32>());
        let entry = std::mem::size_of::<i64>() + std::mem::size_of::<Vec<u8>>();
        open + self.closed.values().map(|b| b.capacity() + entry).sum::<usize>()
    }
}

impl PartialEq for PerSecondLatency {
    fn eq(&self, other: &PerSecondLatency) -> bool {
        self.iter().eq(other.iter())
    }
}

impl FromIterator<(i64, SecondHistogram)> for PerSecondLatency {
    fn from_iter<I: IntoIterator<Item = (i64, SecondHistogram)>>(seconds: I) -> PerSecondLatency {
        let mut p = PerSecondLatency::default();
        for (s, h) in seconds {
            let mut mine = p.closed.get(&s).map(|b| unpack(b)).unwrap_or_else(new_histogram);
            let _ = mine.add(h);
            p.closed.insert(s, pack(&mine));
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers at 1,000 a second in batches of 10, latencies 1–400 ms with a
    /// tail to 5 s: what one connection of a soak step sees.
    fn an_hour(mut each: impl FnMut(i64, u64, u32)) {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for s in 0..3600i64 {
            for _ in 0..100 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let ms = if x.is_multiple_of(100) { 400 + x % 4600 } else { 1 + x % 400 };
                each(s, ms, 10);
            }
        }
    }

    #[test]
    fn an_hour_of_answers_packs_into_a_fraction_of_open_histograms() {
        let mut packed = PerSecondLatency::default();
        let mut open: BTreeMap<i64, SecondHistogram> = BTreeMap::new();
        an_hour(|s, ms, n| {
            packed.record_n(s, ms, n);
            let _ = open.entry(s).or_insert_with(new_histogram).record_n(ms, n);
        });
        let open_bytes: usize = open.values().map(|h| h.distinct_values() * 4).sum();
        let packed_bytes = packed.heap_bytes();
        eprintln!(
            "one connection, one hour at 1,000 answers/s: {} KB packed, {} KB as open histograms",
            packed_bytes >> 10,
            open_bytes >> 10
        );
        assert!(packed_bytes * 4 < open_bytes, "packed {packed_bytes} B, open {open_bytes} B");
        // Nothing is lost in the packing: every second reads as it was recorded.
        for (s, h) in &open {
            assert_eq!(packed.get(*s).as_ref(), Some(h), "second {s}");
            assert_eq!(packed.get(*s).unwrap().value_at_quantile(0.99), h.value_at_quantile(0.99));
        }
        assert_eq!(packed.len(), 3600);
    }

    #[test]
    fn late_answers_and_merges_land_in_their_own_second() {
        let mut a = PerSecondLatency::default();
        a.record_n(10, 5, 1);
        a.record_n(11, 7, 2);
        a.record_n(10, 9, 1); // a clock step back
        a.record_n(11, 3, 1);
        let mut b = PerSecondLatency::default();
        b.record_n(11, 100, 1);
        b.record_n(12, 1, 1);
        a.add(&b);
        let counts: Vec<(i64, u64)> = a.iter().map(|(s, h)| (s, h.len())).collect();
        assert_eq!(counts, vec![(10, 2), (11, 4), (12, 1)]);
        assert_eq!(a.get(10).unwrap().max(), 9);
        assert_eq!(a.get(11).unwrap().max(), 100);
        assert!(a.get(13).is_none());
        let again: PerSecondLatency = a.iter().collect();
        assert_eq!(again, a);
    }
}
