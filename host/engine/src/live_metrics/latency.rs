//! Ack latency as Prometheus histograms: the step's own HdrHistograms
//! (the ones its result reports, from the soak's start) binned into fixed
//! buckets when a scrape asks, so recording costs the load nothing more.
//!
//! The buckets ([`BOUNDS_S`]) are Prometheus' 1–2.5–5 series from 100 µs
//! to 60 s. A bucket's bound holds to the histograms' precision: 1 µs up
//! to 2 ms, three significant figures above.

use serde::{Deserialize, Serialize};

use crate::transport::AckCounts;

/// Upper bounds of the buckets, in seconds (`le`); `+Inf` follows.
pub const BOUNDS_S: [f64; 18] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// The same bounds in whole µs, as the histograms count.
const BOUNDS_US: [u64; 18] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// One histogram in buckets: counts per bucket (not cumulative), the last
/// one `+Inf`, and the exact sum of the values.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Buckets {
    pub counts: Vec<u64>,
    pub sum_s: f64,
}

impl Buckets {
    fn empty() -> Buckets {
        Buckets { counts: vec![0; BOUNDS_S.len() + 1], sum_s: 0.0 }
    }

    /// Bin every value of `h` (µs).
    fn add_histogram(&mut self, h: &hdrhistogram::Histogram<u64>, sum_us: u64) {
        if self.counts.len() != BOUNDS_S.len() + 1 {
            *self = Buckets::empty();
        }
        for v in h.iter_recorded() {
            let us = v.value_iterated_to();
            let i = BOUNDS_US.partition_point(|&b| b < us);
            self.counts[i] += v.count_at_value();
        }
        self.sum_s += sum_us as f64 / 1e6;
    }

    pub fn add(&mut self, o: &Buckets) {
        if self.counts.len() != BOUNDS_S.len() + 1 {
            *self = Buckets::empty();
        }
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.sum_s += o.sum_s;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(le, count in this bucket)`, as the encoder takes them.
    pub fn pairs(&self) -> Vec<(f64, u64)> {
        BOUNDS_S.iter().copied().chain([f64::INFINITY]).zip(self.counts.iter().copied()).collect()
    }
}

/// A step's ack latency so far, in buckets: from the intended send time and
/// from the send.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyBuckets {
    pub intended: Buckets,
    pub service: Buckets,
}

impl LatencyBuckets {
    pub fn of(counts: &AckCounts) -> LatencyBuckets {
        let mut l = LatencyBuckets { intended: Buckets::empty(), service: Buckets::empty() };
        l.add_counts(counts);
        l
    }

    pub fn add_counts(&mut self, c: &AckCounts) {
        self.intended.add_histogram(&c.latency.intended_us, c.latency.intended_sum_us);
        self.service.add_histogram(&c.latency.service_us, c.latency.service_sum_us);
    }

    pub fn add(&mut self, o: &LatencyBuckets) {
        self.intended.add(&o.intended);
        self.service.add(&o.service);
    }

    /// Every connection's record, each locked in turn.
    pub fn of_connections(conns: &[std::sync::Arc<std::sync::Mutex<AckCounts>>]) -> LatencyBuckets {
        let mut l = LatencyBuckets::of(&AckCounts::default());
        for c in conns {
            l.add_counts(&c.lock().unwrap());
        }
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::Timing;
    use crate::transport::Carries;

    #[test]
    fn values_fall_in_the_bucket_whose_bound_they_do_not_exceed_and_the_sum_is_exact() {
        let mut c = AckCounts::default();
        let ack = |c: &mut AckCounts, us: i64, n: u32| {
            c.record_ack(Carries::Readings { n, ts_s: 0 }, Timing { intended_ns: 0, sent_ns: 0 }, us * 1_000);
        };
        ack(&mut c, 100, 1); // on the 100 µs bound: in it
        ack(&mut c, 101, 2); // just above: the 250 µs bucket
        ack(&mut c, 3_000_000, 1); // 3 s: the 5 s bucket
        ack(&mut c, 90_000_000, 1); // 90 s: +Inf
        let b = LatencyBuckets::of(&c);
        assert_eq!(b.intended.counts[0], 1);
        assert_eq!(b.intended.counts[1], 2);
        assert_eq!(b.intended.counts[14], 1, "{:?}", b.intended.pairs());
        assert_eq!(b.intended.counts[18], 1);
        assert_eq!(b.intended.count(), 5);
        assert!((b.intended.sum_s - (100e-6 + 2.0 * 101e-6 + 3.0 + 90.0)).abs() < 1e-9, "{}", b.intended.sum_s);
        assert_eq!(b.intended.pairs().last(), Some(&(f64::INFINITY, 1)));
        let mut twice = b.clone();
        twice.add(&b);
        assert_eq!(twice.intended.count(), 10);
    }
}
