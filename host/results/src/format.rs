//! Numbers as people read them, in one place: the results table, the
//! reports, `compare` and the chart labels all format through here, so a
//! rate or a lag reads the same everywhere. A value that was not measured is
//! "n/m", never 0 (see [`NOT_MEASURED`]).
//!
//! Not here: what a number means or which fields are shown (that is the
//! views' business: `report`, `compare`).

/// How an unmeasured value is shown, everywhere.
pub const NOT_MEASURED: &str = "n/m";

/// `1234567` → "1,234,567".
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// [`thousands`], by the name `gen --bench` and the ladder use.
pub fn group(n: u64) -> String {
    thousands(n)
}

/// A count or rate rounded to a whole number, with separators; "-" if not finite.
pub fn whole(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let r = x.round();
    if r < 0.0 {
        format!("-{}", thousands((-r) as u64))
    } else {
        thousands(r as u64)
    }
}

/// A value that may not have been measured: [`whole`], or "n/m", never 0.
pub fn measured(x: Option<f64>) -> String {
    x.map(whole).unwrap_or_else(|| NOT_MEASURED.into())
}

/// Seconds as "0.45 s", "19.3 s", "1,234 s".
pub fn seconds(s: f64) -> String {
    if !s.is_finite() {
        "-".into()
    } else if s.abs() < 10.0 {
        format!("{s:.2} s")
    } else if s.abs() < 100.0 {
        format!("{s:.1} s")
    } else {
        format!("{} s", whole(s))
    }
}

/// [`seconds`], or "n/m" when not measured.
pub fn measured_seconds(s: Option<f64>) -> String {
    s.map(seconds).unwrap_or_else(|| NOT_MEASURED.into())
}

/// A latency in the unit that suits it ("92 µs", "12.3 ms", "1.25 s"), or
/// "< 1 µs" when below the histogram's `resolution_s`: a figure below its
/// resolution is never shown as a number. "n/m" when not measured.
pub fn latency(s: Option<f64>, resolution_s: Option<f64>) -> String {
    let Some(s) = s.filter(|s| s.is_finite()) else {
        return NOT_MEASURED.into();
    };
    if let Some(r) = resolution_s.filter(|r| *r > 0.0 && s < *r) {
        return format!("< {}", latency(Some(r), None));
    }
    if s < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 1.0 {
        let ms = s * 1e3;
        if ms < 10.0 {
            format!("{ms:.2} ms")
        } else {
            format!("{ms:.1} ms")
        }
    } else {
        seconds(s)
    }
}

/// A fraction as a percentage with two decimals: 0.9969 → "99.69%".
pub fn percent(ratio: f64) -> String {
    if ratio.is_finite() {
        format!("{:.2}%", ratio * 100.0)
    } else {
        "-".into()
    }
}

/// Bytes in binary units: "812 KiB", "1.4 GiB".
pub fn bytes(b: f64) -> String {
    if !b.is_finite() {
        return "-".into();
    }
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut u = 0;
    while v.abs() >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v.abs() >= 100.0 {
        format!("{v:.0} {}", UNITS[u])
    } else if v.abs() >= 10.0 {
        format!("{v:.1} {}", UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// [`bytes`], or "n/m" when not measured.
pub fn measured_bytes(b: Option<f64>) -> String {
    b.map(bytes).unwrap_or_else(|| NOT_MEASURED.into())
}

/// Compact number for chart labels: 950, 12.3k, 1.25M, 0.456, 0.0123.
pub fn compact(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        return "n/a".into();
    }
    if a >= 1e9 {
        format!("{}G", trim(v / 1e9, 2))
    } else if a >= 1e6 {
        format!("{}M", trim(v / 1e6, 2))
    } else if a >= 1e3 && v.fract() == 0.0 && v % 1000.0 == 0.0 {
        format!("{}k", trim(v / 1e3, 0))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3, 1))
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(v, 2)
    } else if a == 0.0 {
        "0".into()
    } else {
        // Three significant digits below 1.
        let digits = (-a.log10().floor()) as usize + 2;
        trim(v, digits.min(9))
    }
}

fn trim(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The change from `base` to `new`, with its sign, as text formatted by
/// `fmt`, and relative: "+1,234 (+5.2%)", "-0.12 s (-40.0%)", "±0".
/// Either side unmeasured: "n/m".
pub fn delta(new: Option<f64>, base: Option<f64>, fmt: fn(f64) -> String) -> String {
    let (Some(n), Some(b)) = (new, base) else { return NOT_MEASURED.into() };
    if !n.is_finite() || !b.is_finite() {
        return "-".into();
    }
    let d = n - b;
    let shown = fmt(d.abs());
    if shown == fmt(0.0) {
        return format!("±{shown}");
    }
    let sign = if d > 0.0 { '+' } else { '-' };
    if b != 0.0 {
        format!("{sign}{shown} ({sign}{:.1}%)", (d / b * 100.0).abs())
    } else {
        format!("{sign}{shown}")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn latencies_read_in_their_unit_and_never_below_their_resolution() {
        assert_eq!(super::latency(Some(92e-6), Some(1e-6)), "92 µs");
        assert_eq!(super::latency(Some(0.0), Some(1e-6)), "< 1 µs");
        assert_eq!(super::latency(Some(0.0123), Some(1e-6)), "12.3 ms");
        assert_eq!(super::latency(Some(0.00512), Some(1e-6)), "5.12 ms");
        assert_eq!(super::latency(Some(2.5), Some(1e-6)), "2.50 s");
        assert_eq!(super::latency(None, Some(1e-6)), "n/m");
        // Old results (ms histograms): a 1 ms resolution.
        assert_eq!(super::latency(Some(0.0001), Some(1e-3)), "< 1.00 ms");
    }

    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(whole(5089.6), "5,090");
        assert_eq!(whole(-5089.6), "-5,090");
        assert_eq!(measured(None), "n/m");
        assert_eq!(measured(Some(0.0)), "0");
        assert_eq!(seconds(0.454), "0.45 s");
        assert_eq!(seconds(19.34), "19.3 s");
        assert_eq!(seconds(1234.0), "1,234 s");
        assert_eq!(measured_seconds(None), "n/m");
        assert_eq!(percent(0.9969), "99.69%");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1536.0), "1.50 KiB");
        assert_eq!(bytes(87.0 * 1024.0 * 1024.0), "87.0 MiB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.00 GiB");
        assert_eq!(measured_bytes(None), "n/m");
    }

    #[test]
    fn compact_labels() {
        assert_eq!(compact(662_227.0), "662.2k");
        assert_eq!(compact(1_760_599.0), "1.76M");
        assert_eq!(compact(14_330.0), "14.3k");
        assert_eq!(compact(950.0), "950");
        assert_eq!(compact(1_000.0), "1k");
        assert_eq!(compact(2_648.0), "2648");
        assert_eq!(compact(1.14), "1.14");
        assert_eq!(compact(0.456), "0.456");
        assert_eq!(compact(0.0), "0");
    }

    #[test]
    fn deltas_carry_their_sign() {
        assert_eq!(delta(Some(1100.0), Some(1000.0), whole), "+100 (+10.0%)");
        assert_eq!(delta(Some(900.0), Some(1000.0), whole), "-100 (-10.0%)");
        assert_eq!(delta(Some(1000.2), Some(1000.0), whole), "±0");
        assert_eq!(delta(Some(0.3), Some(0.5), seconds), "-0.20 s (-40.0%)");
        assert_eq!(delta(None, Some(1.0), whole), "n/m");
        assert_eq!(delta(Some(5.0), Some(0.0), whole), "+5");
    }
}
