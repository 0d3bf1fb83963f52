//! The clock, in one place: one monotonic clock at nanosecond resolution,
//! read as nanoseconds since the Unix epoch.
//!
//! [`now_ns`] is `Instant` (CLOCK_MONOTONIC: never steps back, never jumps
//! with NTP) anchored once, at first use, to the wall clock. Every duration
//! scalebench reports (a reading's intended, sent and answered instants, a
//! probe's time, a silence) is a difference of two readings of it, so none
//! is ever derived from millisecond wall-clock stamps; and because it reads
//! as epoch time, the same numbers place a reading in its wall-clock second
//! (acks by second of arrival, payload timestamps) without a second clock.
//! Over a run it drifts from the system's wall clock only by what NTP slews
//! (parts per million), which no rate or second boundary can see.
//!
//! The one calendar conversion of the host lives here too ([`civil_from_days`]):
//! result timestamps, run ids and PostgreSQL's date and timestamp texts all
//! go through it. This module imports nothing from the crate, so any module
//! (the result schema included) can use it without a cycle.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The resolution of [`now_ns`] as scalebench records latencies: histograms
/// count whole microseconds, so a figure below 1 µs is shown as "< 1 µs".
pub const LATENCY_RESOLUTION_NS: i64 = 1_000;

/// A deliberate error of this process's clock, in ms (0 unless a test asks
/// for one with `scalebench worker --test-clock-offset-ms`): how the
/// coordinator's clock-skew check is calibrated.
static OFFSET_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Set this process's clock error (tests of the skew check only).
pub fn set_offset_ms(ms: i64) {
    OFFSET_MS.store(ms, std::sync::atomic::Ordering::Relaxed);
}

/// The monotonic clock's anchor: an `Instant` and the wall clock (ns since
/// the epoch) read together.
fn anchor() -> &'static (Instant, i64) {
    static ANCHOR: OnceLock<(Instant, i64)> = OnceLock::new();
    ANCHOR.get_or_init(|| {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0);
        (Instant::now(), wall)
    })
}

/// Now, in nanoseconds since the Unix epoch, on the monotonic clock.
#[inline]
pub fn now_ns() -> i64 {
    let (at, wall) = anchor();
    wall + at.elapsed().as_nanos() as i64 + OFFSET_MS.load(std::sync::atomic::Ordering::Relaxed) * 1_000_000
}

/// The instant `ns` (since the epoch, as [`now_ns`] reads) as an `Instant`,
/// for sleeping until it.
pub fn instant_of(ns: i64) -> Instant {
    let now_i = Instant::now();
    let now = now_ns();
    if ns >= now {
        now_i + std::time::Duration::from_nanos((ns - now) as u64)
    } else {
        now_i.checked_sub(std::time::Duration::from_nanos((now - ns) as u64)).unwrap_or(now_i)
    }
}

/// Now, in milliseconds since the Unix epoch (the same clock as [`now_ns`]).
pub fn now_ms() -> i64 {
    now_ns().div_euclid(1_000_000)
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
    fn the_clock_is_monotonic_at_nanoseconds_and_reads_as_epoch_time() {
        let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i64;
        let a = super::now_ns();
        assert!((a - wall).abs() < 1_000_000_000, "epoch time: {a} vs wall {wall}");
        let mut last = a;
        let mut distinct = 0;
        for _ in 0..10_000 {
            let t = super::now_ns();
            assert!(t >= last, "never steps back");
            distinct += (t != last) as u32;
            last = t;
        }
        // At ns resolution consecutive reads differ (at ms they would not).
        assert!(distinct > 1_000, "{distinct} distinct readings of 10,000");
        assert_eq!(super::now_ms(), super::now_ns().div_euclid(1_000_000));
    }

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
