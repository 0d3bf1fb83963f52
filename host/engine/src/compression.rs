//! What a series costs once compressed the way time-series stores compress
//! it: Gorilla's XOR encoding for float values and delta-of-delta for
//! timestamps (Pelkonen et al., 2015; TimescaleDB's and others' float and
//! timestamp codecs are of this family). Counts bits, writes nothing.
//!
//! This is why a load test fed with noise misjudges storage (a TimescaleDB measurement of 10 M readings:
//! 1.69 bytes per plant-shaped reading against 8.57 for uniform noise):
//! repeated and neighbouring values XOR to few bits, random ones do not.

/// Bits to store `values` in Gorilla's XOR encoding.
pub fn gorilla_value_bits(values: &[f64]) -> u64 {
    let Some(first) = values.first() else { return 0 };
    let mut bits = 64u64;
    let mut prev = first.to_bits();
    // The previous meaningful-bits window (leading zeros, meaningful length).
    let mut window: Option<(u32, u32)> = None;
    for v in &values[1..] {
        let cur = v.to_bits();
        let x = prev ^ cur;
        prev = cur;
        if x == 0 {
            bits += 1;
            continue;
        }
        let lead = x.leading_zeros().min(31);
        let trail = x.trailing_zeros();
        let len = 64 - lead - trail;
        match window {
            Some((wl, wlen)) if lead >= wl && trail >= 64 - wl - wlen => bits += 2 + wlen as u64,
            _ => {
                bits += 2 + 5 + 6 + len as u64;
                window = Some((lead, len));
            }
        }
    }
    bits
}

/// Bits to store `ts` (ms) with delta-of-delta encoding.
pub fn delta_of_delta_bits(ts: &[i64]) -> u64 {
    match ts.len() {
        0 => return 0,
        1 => return 64,
        _ => {}
    }
    let mut bits = 64 + 64; // first timestamp, first delta
    let mut prev_delta = ts[1] - ts[0];
    for w in ts.windows(2).skip(1) {
        let delta = w[1] - w[0];
        let dod = delta - prev_delta;
        prev_delta = delta;
        bits += match dod {
            0 => 1,
            -63..=64 => 2 + 7,
            -255..=256 => 3 + 9,
            -2047..=2048 => 4 + 12,
            _ => 4 + 32,
        };
    }
    bits
}

/// Compressed bytes per reading of one series sampled every `period_ms`.
pub fn bytes_per_reading(values: &[f64], period_ms: i64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let ts: Vec<i64> = (0..values.len() as i64).map(|i| i * period_ms).collect();
    (gorilla_value_bits(values) + delta_of_delta_bits(&ts)) as f64 / 8.0 / values.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_series_cost_a_bit_a_value() {
        let v = vec![21.5; 1001];
        assert_eq!(gorilla_value_bits(&v), 64 + 1000);
        let ts: Vec<i64> = (0..1001).map(|i| i * 1000).collect();
        assert_eq!(delta_of_delta_bits(&ts), 128 + 999);
    }

    #[test]
    fn random_values_cost_most_of_their_64_bits() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let v: Vec<f64> = (0..10_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 11) as f64 / (1u64 << 53) as f64 * 100.0
            })
            .collect();
        let b = bytes_per_reading(&v, 1000);
        assert!(b > 6.5 && b < 9.0, "{b}");
    }
}
