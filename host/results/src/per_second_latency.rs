//! Intended-time latency by wall-clock second: one HdrHistogram per second
//! an answer arrived in, from which the step's per-second p99 is read.
//!
//! A histogram's counts array costs 1–5 KB whatever it holds (2 significant
//! figures, ms up to a minute), and every connection keeps one per second of
//! the step. Three measures keep that bounded:
//! - Answers on one connection arrive in wall-clock order, so once one
//!   arrives in a later second the earlier second is done: it is kept packed
//!   in HdrHistogram's V2 encoding (hundreds of bytes, zero runs collapsed)
//!   and unpacked only when read or merged. Only the current second stays
//!   open.
//! - A connection hands its packed seconds to the transport's shared record
//!   as it closes them ([`PerSecondLatency::take_closed`],
//!   [`PerSecondLatency::add_packed`]): one merged histogram per second for
//!   the whole transport instead of one per connection (a heap profile of an
//!   hour-long soak step found these histograms, four connections' worth,
//!   to be 63% of the step's growth, about 7 MB/h).
//! - Once no answer can arrive in a second any more (it is
//!   [`SETTLED_AFTER_S`] behind the clock), the shared record keeps only the
//!   figure the result reads from it, its p99 ([`PerSecondLatency::settle_before`]).
//!   A distributed worker does not settle: its coordinator merges the
//!   workers' histograms. An answer that still arrives in a settled second
//!   (it cannot be merged into a p99) makes that second's p99 unknown,
//!   never a number.
//!
//! The tests `an_hour_of_answers_packs_into_a_fraction_of_open_histograms`
//! and `settled_seconds_read_as_the_merged_histograms_would` measure each
//! form on the same hour of answers.

use std::collections::BTreeMap;

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;

/// A second's latency histogram, in ms.
pub type SecondHistogram = Histogram<u32>;

/// A second is settled (no answer can arrive in it any more) this many
/// seconds after it ended: an answer is stamped when it is read, and
/// counted a moment later.
pub const SETTLED_AFTER_S: i64 = 5;

/// The quantile the result reads from each second.
const QUANTILE: f64 = 0.99;

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

/// A second's histogram as handed over: open, or packed.
enum Given {
    Histogram(SecondHistogram),
    Packed(Vec<u8>),
}

impl Given {
    fn histogram(self) -> SecondHistogram {
        match self {
            Given::Histogram(h) => h,
            Given::Packed(bytes) => unpack(&bytes),
        }
    }
}

/// Latency histograms by second: the current one open, the closed ones
/// packed, the settled ones reduced to their p99.
#[derive(Debug, Clone, Default)]
pub struct PerSecondLatency {
    open: Option<(i64, SecondHistogram)>,
    closed: BTreeMap<i64, Vec<u8>>,
    /// Settled seconds: their p99, None where answers arrived after the
    /// second was settled (the p99 of all of them is not known).
    settled: BTreeMap<i64, Option<u64>>,
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

    /// Whether seconds are closed and packed (ready to hand over).
    #[inline]
    pub fn has_closed(&self) -> bool {
        !self.closed.is_empty()
    }

    /// The closed seconds, packed, taken out (the open one stays).
    pub fn take_closed(&mut self) -> BTreeMap<i64, Vec<u8>> {
        std::mem::take(&mut self.closed)
    }

    /// Add seconds packed by [`PerSecondLatency::take_closed`].
    pub fn add_packed(&mut self, seconds: BTreeMap<i64, Vec<u8>>) {
        for (s, bytes) in seconds {
            self.add_second(s, Given::Packed(bytes));
        }
    }

    /// Add one second's histogram to what is kept for it.
    fn add_second(&mut self, s: i64, given: Given) {
        if let Some(p99) = self.settled.get_mut(&s) {
            // Settled already: the p99 of all its answers cannot be told.
            *p99 = None;
            return;
        }
        // An open second of the same number stays apart: `get` sums the two.
        let sum = match (self.closed.remove(&s), given) {
            (None, Given::Packed(bytes)) => bytes,
            (None, Given::Histogram(h)) => pack(&h),
            (Some(mine), given) => {
                let mut sum = unpack(&mine);
                let _ = sum.add(given.histogram());
                pack(&sum)
            }
        };
        self.closed.insert(s, sum);
    }

    /// A settled second read from elsewhere (a worker's report).
    pub fn add_settled(&mut self, second: i64, p99: Option<u64>) {
        let known = !self.settled.contains_key(&second) && !self.closed.contains_key(&second);
        self.closed.remove(&second);
        self.settled.insert(second, if known { p99 } else { None });
    }

    /// Keep only the p99 of every closed second before `second` (they are
    /// settled: no answer can arrive in them any more).
    pub fn settle_before(&mut self, second: i64) {
        if self.open.as_ref().is_some_and(|(s, _)| *s < second) {
            self.close_open();
        }
        let later = self.closed.split_off(&second);
        for (s, bytes) in std::mem::replace(&mut self.closed, later) {
            let h = unpack(&bytes);
            self.add_settled(s, (!h.is_empty()).then(|| h.value_at_quantile(QUANTILE)));
        }
    }

    /// The p99 (µs) of the answers that arrived in `second`; None when none
    /// did, or when it is not known (answers arrived after it was settled).
    pub fn p99(&self, second: i64) -> Option<u64> {
        match (self.settled.get(&second), self.get(second)) {
            (Some(p99), None) => *p99,
            // Answers recorded after the second settled.
            (Some(_), Some(_)) => None,
            (None, h) => h.filter(|h| !h.is_empty()).map(|h| h.value_at_quantile(QUANTILE)),
        }
    }

    /// The histogram of `second`, if any answer arrived in it and it is not settled.
    pub fn get(&self, second: i64) -> Option<SecondHistogram> {
        match &self.open {
            Some((s, h)) if *s == second => {
                let mut h = h.clone();
                if let Some(b) = self.closed.get(&second) {
                    let _ = h.add(unpack(b));
                }
                Some(h)
            }
            _ => self.closed.get(&second).map(|b| unpack(b)),
        }
    }

    /// Every second with answers and a histogram (not settled), in order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, SecondHistogram)> + '_ {
        let mut seconds: Vec<i64> = self.closed.keys().copied().collect();
        if let Some((s, _)) = &self.open {
            if !self.closed.contains_key(s) {
                seconds.push(*s);
                seconds.sort_unstable();
            }
        }
        seconds.into_iter().filter_map(move |s| self.get(s).map(|h| (s, h)))
    }

    /// The settled seconds and their p99 (µs; None: not known), in order.
    pub fn settled(&self) -> &BTreeMap<i64, Option<u64>> {
        &self.settled
    }

    /// How many seconds have answers (with a histogram or settled).
    pub fn len(&self) -> usize {
        let histograms: Vec<i64> = self.iter().map(|(s, _)| s).collect();
        histograms.len() + self.settled.keys().filter(|s| histograms.binary_search(s).is_err()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_none() && self.closed.is_empty() && self.settled.is_empty()
    }

    /// Add another record's seconds to these (histograms summed; a second
    /// settled on either side and answered on the other is not known).
    pub fn add(&mut self, other: &PerSecondLatency) {
        self.close_open();
        for (s, h) in other.iter() {
            self.add_second(s, Given::Histogram(h));
        }
        for (s, p) in &other.settled {
            self.add_settled(*s, *p);
        }
    }

    /// Bytes held on the heap: the open histogram's counts, the packed
    /// seconds and the settled ones.
    pub fn heap_bytes(&self) -> usize {
        let open = self.open.as_ref().map_or(0, |(_, h)| h.distinct_values() * std::mem::size_of::<u32>());
        let entry = std::mem::size_of::<i64>() + std::mem::size_of::<Vec<u8>>();
        let settled = self.settled.len() * (std::mem::size_of::<i64>() + std::mem::size_of::<Option<u64>>());
        open + self.closed.values().map(|b| b.capacity() + entry).sum::<usize>() + settled
    }
}

impl PartialEq for PerSecondLatency {
    fn eq(&self, other: &PerSecondLatency) -> bool {
        self.iter().eq(other.iter()) && self.settled == other.settled
    }
}

impl FromIterator<(i64, SecondHistogram)> for PerSecondLatency {
    fn from_iter<I: IntoIterator<Item = (i64, SecondHistogram)>>(seconds: I) -> PerSecondLatency {
        let mut p = PerSecondLatency::default();
        for (s, h) in seconds {
            p.add_second(s, Given::Histogram(h));
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers at 1,000 a second in batches of 10, latencies 1–400 ms with a
    /// tail to 5 s: what one connection of a soak step sees.
    fn an_hour(each: impl FnMut(i64, u64, u32)) {
        an_hour_from(0x9e37_79b9_7f4a_7c15, each)
    }

    fn an_hour_from(seed: u64, mut each: impl FnMut(i64, u64, u32)) {
        let mut x: u64 = seed;
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

    /// Four connections' hours as a transport keeps them: each hands its
    /// closed seconds to one shared record, which settles them
    /// [`SETTLED_AFTER_S`] behind; every second's p99 reads as the four
    /// histograms merged at the end would give it, in a fraction of the memory.
    #[test]
    fn settled_seconds_read_as_the_merged_histograms_would() {
        let seeds = [0x9e37_79b9_7f4a_7c15u64, 0x0123_4567_89ab_cdef, 0x5555_aaaa_3333_cccc, 0x0f0f_f0f0_1234_5678];
        let mut merged: BTreeMap<i64, SecondHistogram> = BTreeMap::new();
        let mut kept_apart: Vec<PerSecondLatency> = vec![PerSecondLatency::default(); seeds.len()];
        let mut answers: Vec<(i64, usize, u64, u32)> = Vec::new();
        for (k, seed) in seeds.iter().enumerate() {
            an_hour_from(*seed, |s, ms, n| answers.push((s, k, ms, n)));
        }
        answers.sort_by_key(|a| a.0); // the connections interleave in time
        let mut conns: Vec<PerSecondLatency> = vec![PerSecondLatency::default(); seeds.len()];
        let mut shared = PerSecondLatency::default();
        let mut most_shared = 0;
        for (s, k, ms, n) in answers {
            let _ = merged.entry(s).or_insert_with(new_histogram).record_n(ms, n);
            kept_apart[k].record_n(s, ms, n);
            conns[k].record_n(s, ms, n);
            if conns[k].has_closed() {
                shared.add_packed(conns[k].take_closed());
                shared.settle_before(s - SETTLED_AFTER_S);
                most_shared = most_shared.max(shared.closed.len());
            }
        }
        let held: usize = shared.heap_bytes() + conns.iter().map(|c| c.heap_bytes()).sum::<usize>();
        let apart: usize = kept_apart.iter().map(|c| c.heap_bytes()).sum();
        eprintln!(
            "four connections, one hour at 1,000 answers/s each: {} KB shared and settled, {} KB packed apart",
            held >> 10,
            apart >> 10
        );
        assert!(held * 10 < apart, "shared and settled {held} B, packed apart {apart} B");
        assert!(most_shared <= SETTLED_AFTER_S as usize + 2, "{most_shared} seconds left unsettled");
        for c in &conns {
            shared.add(c);
        }
        for (s, h) in &merged {
            assert_eq!(shared.p99(*s), Some(h.value_at_quantile(QUANTILE)), "second {s}");
        }
        assert_eq!(shared.len(), 3600);
        assert_eq!(shared.p99(3600), None, "a second without answers has no p99");
    }

    #[test]
    fn an_answer_after_its_second_settled_makes_its_p99_unknown() {
        let mut shared = PerSecondLatency::default();
        let mut conn = PerSecondLatency::default();
        conn.record_n(10, 50, 100);
        conn.record_n(11, 7, 1);
        shared.add_packed(conn.take_closed());
        shared.settle_before(11);
        assert_eq!(shared.p99(10), Some(50));
        // Another connection's answer in second 10, counted after it settled.
        let mut late = PerSecondLatency::default();
        late.record_n(10, 900, 1);
        late.record_n(12, 1, 1);
        shared.add_packed(late.take_closed());
        assert_eq!(shared.p99(10), None, "merged into a p99 it would be a guess");
        // An answer recorded into a settled second of the same record.
        shared.record_n(9, 5, 1);
        shared.add_settled(8, Some(3));
        shared.record_n(8, 5, 1);
        assert_eq!(shared.p99(8), None);
        shared.settle_before(13);
        assert_eq!(shared.p99(8), None);
        assert_eq!(shared.p99(9), Some(5));
        // Two settled records of the same second cannot be merged either.
        let mut a = PerSecondLatency::default();
        a.add_settled(20, Some(4));
        let mut b = PerSecondLatency::default();
        b.add_settled(20, Some(6));
        b.add_settled(21, Some(6));
        a.add(&b);
        assert_eq!((a.p99(20), a.p99(21)), (None, Some(6)));
    }
}
