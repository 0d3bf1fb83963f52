//! Civil dates from and to days since 1970-01-01, without a date library
//! (Howard Hinnant's algorithms; proleptic Gregorian, year 0 is 1 BC).
//! Plugins that write or read timestamps build their own formats on these:
//! the reading envelope's ISO-8601, the haxall adapter's Zinc date-times.

/// (year, month 1..=12, day 1..=31) of a count of days since 1970-01-01,
/// valid for every i64 day count that epoch milliseconds can produce.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

/// Days since 1970-01-01 of a civil date (the inverse of [`civil_from_days`]).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 } as i64;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every day from 1600 to 2400 against a naive day-by-day calendar walk,
    /// both ways.
    #[test]
    fn civil_matches_a_calendar_walk() {
        fn leap(y: i64) -> bool {
            (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
        }
        let dim = |y: i64, m: u32| match m {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            _ if leap(y) => 29,
            _ => 28,
        };
        // 1600-01-01 is day -135140 relative to 1970-01-01.
        let (mut y, mut m, mut d) = (1600i64, 1u32, 1u32);
        for days in -135_140i64..157_000 {
            assert_eq!(civil_from_days(days), (y, m, d), "day {days}");
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
            d += 1;
            if d > dim(y, m) {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
    }

    #[test]
    fn known_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(days_from_civil(0, 1, 1)), (0, 1, 1));
        assert_eq!(civil_from_days(days_from_civil(-1, 12, 31)), (-1, 12, 31));
        assert_eq!(civil_from_days(days_from_civil(10_000, 1, 1)), (10_000, 1, 1));
    }
}
