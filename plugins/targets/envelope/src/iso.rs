//! ISO-8601 UTC date-times with milliseconds, written from epoch ms without
//! any date library: `2026-11-30T14:00:00.123Z`.

use scalebench_plugin_sdk::date::civil_from_days;

#[inline]
fn two(out: &mut [u8], at: usize, v: u32) {
    out[at] = b'0' + (v / 10) as u8;
    out[at + 1] = b'0' + (v % 10) as u8;
}

/// The formatted second `YYYY-MM-DDTHH:MM:SS` of the last second asked for:
/// consecutive readings of a batch nearly always share it.
pub struct SecondCache {
    second: i64,
    len: usize,
    buf: [u8; 40],
}

impl Default for SecondCache {
    fn default() -> Self {
        SecondCache { second: i64::MIN, len: 0, buf: [0; 40] }
    }
}

impl SecondCache {
    fn fill(&mut self, second: i64) {
        let days = second.div_euclid(86_400);
        let sod = second.rem_euclid(86_400) as u32;
        let (y, m, d) = civil_from_days(days);
        let b = &mut self.buf;
        let mut at = 0;
        if (0..=9999).contains(&y) {
            let y = y as u32;
            two(b, 0, y / 100);
            two(b, 2, y % 100);
            at = 4;
        } else {
            // ISO-8601 expanded year (as JavaScript's toISOString writes it):
            // a sign and at least six digits.
            b[0] = if y < 0 { b'-' } else { b'+' };
            at += 1;
            let mut digits = itoa::Buffer::new();
            let s = digits.format(y.unsigned_abs());
            for _ in s.len()..6 {
                b[at] = b'0';
                at += 1;
            }
            b[at..at + s.len()].copy_from_slice(s.as_bytes());
            at += s.len();
        }
        b[at] = b'-';
        two(b, at + 1, m);
        b[at + 3] = b'-';
        two(b, at + 4, d);
        b[at + 6] = b'T';
        two(b, at + 7, sod / 3600);
        b[at + 9] = b':';
        two(b, at + 10, sod / 60 % 60);
        b[at + 12] = b':';
        two(b, at + 13, sod % 60);
        self.len = at + 15;
        self.second = second;
    }

    /// Append the ISO-8601 form of `ms` (epoch milliseconds, UTC) to `out`.
    #[inline]
    pub fn write(&mut self, out: &mut Vec<u8>, ms: i64) {
        let second = ms.div_euclid(1000);
        let milli = ms.rem_euclid(1000) as u32;
        if second != self.second {
            self.fill(second);
        }
        out.extend_from_slice(&self.buf[..self.len]);
        out.extend_from_slice(&[
            b'.',
            b'0' + (milli / 100) as u8,
            b'0' + (milli / 10 % 10) as u8,
            b'0' + (milli % 10) as u8,
            b'Z',
        ]);
    }
}

/// The ISO-8601 form of `ms` as a String (tests, canaries: not the hot path).
pub fn iso(ms: i64) -> String {
    let mut out = Vec::with_capacity(32);
    SecondCache::default().write(&mut out, ms);
    String::from_utf8(out).expect("ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1), "1970-01-01T00:00:00.001Z");
        assert_eq!(iso(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(iso(1_796_047_200_123), "2026-11-30T14:00:00.123Z");
        // Leap days: 2000 (divisible by 400), 2024; 1900 and 2100 are not leap years.
        assert_eq!(iso(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso(951_868_800_000), "2000-03-01T00:00:00.000Z");
        assert_eq!(iso(1_709_164_800_000), "2024-02-29T00:00:00.000Z");
        assert_eq!(iso(1_709_251_199_999), "2024-02-29T23:59:59.999Z");
        assert_eq!(iso(-2_203_891_200_000), "1900-03-01T00:00:00.000Z"); // day after 1900-02-28
        assert_eq!(iso(-2_203_891_200_001), "1900-02-28T23:59:59.999Z");
        assert_eq!(iso(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
        assert_eq!(iso(1_735_689_599_999), "2024-12-31T23:59:59.999Z");
        assert_eq!(iso(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
        assert_eq!(iso(253_402_300_800_000), "+010000-01-01T00:00:00.000Z");
        assert_eq!(iso(-62_167_219_200_000), "0000-01-01T00:00:00.000Z");
        assert_eq!(iso(-62_167_219_200_001), "-000001-12-31T23:59:59.999Z");
    }

    #[test]
    fn cache_follows_second_changes() {
        let mut c = SecondCache::default();
        let mut out = Vec::new();
        for ms in [1_796_047_200_999, 1_796_047_201_000, 1_796_047_200_500, -1, 0] {
            out.clear();
            c.write(&mut out, ms);
            assert_eq!(std::str::from_utf8(&out).unwrap(), iso(ms));
        }
        assert_eq!(iso(1_796_047_201_000), "2026-11-30T14:00:01.000Z");
    }
}
