//! The wall clock, in one place: milliseconds since the Unix epoch. Every
//! rate that a pass rule reads is measured on it (acks by second of arrival,
//! the load's wall-clock end), beside the payload timestamps the schedule
//! gives each reading.
//!
//! The one calendar conversion of the host lives here too ([`civil_from_days`]):
//! result timestamps, run ids and PostgreSQL's date and timestamp texts all
//! go through it. This module imports nothing from the crate, so any module
//! (the result schema included) can use it without a cycle.

use std::time::{SystemTime, UNIX_EPOCH};

/// A deliberate error of this process's clock, in ms (0 unless a test asks
/// for one with `scalebench worker --test-clock-offset-ms`): how the
/// coordinator's clock-skew check is calibrated.
static OFFSET_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Set this process's clock error (tests of the skew check only).
pub fn set_offset_ms(ms: i64) {
    OFFSET_MS.store(ms, std::sync::atomic::Ordering::Relaxed);
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
        + OFFSET_MS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Now, in RFC 3339 UTC (`2026-12-01T02:31:03.120Z`).
pub fn utc_now() -> String {
    format_utc(now_ms())
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`; year 0 is 1 BC).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `2026-11-30T14:00:00.123Z` from milliseconds since the Unix epoch.
pub fn format_utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z", sod / 3600, sod % 3600 / 60, sod % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_utc() {
        assert_eq!(super::format_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::format_utc(1_796_047_200_123), "2026-11-30T14:00:00.123Z");
        assert_eq!(super::format_utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(super::format_utc(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn civil_from_days_walks_the_calendar() {
        // Day by day across four centuries, against month lengths.
        let (mut y, mut m, mut d) = (1900i64, 1u32, 1u32);
        let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        for day in -25_567..(-25_567 + 146_097) {
            assert_eq!(super::civil_from_days(day), (y, m, d), "day {day}");
            let len = match m {
                2 if leap(y) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            d += 1;
            if d > len {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
    }
}
