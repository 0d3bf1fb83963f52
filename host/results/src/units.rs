//! Point counts, step lists and durations as users write them (`2.5k`,
//! `1k,2.5k,5k`, `500ms`, `15m`), parsed with errors in their words, and
//! written back the same way. The parsers are the command line's
//! `value_parser`s: clap shows their message after the flag and the value.

use std::time::Duration;

/// `10k`, `2.5k`, `1M`, `500` → points.
pub fn parse_points(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k') | Some('K') => (&t[..t.len() - 1], 1_000.0),
        Some('m') | Some('M') => (&t[..t.len() - 1], 1_000_000.0),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| format!("`{t}` is not a point count (examples: 500, 2.5k, 1M)"))?;
    let points = (v * mult).round();
    if !(1.0..=50_000_000.0).contains(&points) {
        return Err(format!("`{t}` is out of range: a step has between 1 and 50M points"));
    }
    Ok(points as u64)
}

pub fn parse_steps(s: &str) -> Result<Vec<u64>, String> {
    let steps: Vec<u64> = s.split(',').filter(|x| !x.trim().is_empty()).map(parse_points).collect::<Result<_, _>>()?;
    if steps.is_empty() {
        return Err("--steps is empty; give a list such as 1k,2.5k,5k".into());
    }
    if steps.windows(2).any(|w| w[1] <= w[0]) {
        return Err(format!("--steps must increase: {s}"));
    }
    Ok(steps)
}

/// `100k,1M`: point counts in any order (each as [`parse_points`]).
pub fn parse_point_list(s: &str) -> Result<Vec<u64>, String> {
    s.split(',').map(parse_points).collect()
}

/// Points as a user writes them, read back by [`parse_points`]: 500, 2.5k, 1M.
pub fn points_text(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(100_000) {
        format!("{}M", n as f64 / 1e6)
    } else if n >= 1_000 && n.is_multiple_of(100) {
        format!("{}k", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

/// A duration as a user writes it, read back by [`parse_duration`]: 1h, 15m, 30s, 500ms.
pub fn duration_text(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0 => "0s".into(),
        _ if ms.is_multiple_of(3_600_000) => format!("{}h", ms / 3_600_000),
        _ if ms.is_multiple_of(60_000) => format!("{}m", ms / 60_000),
        _ if ms.is_multiple_of(1_000) => format!("{}s", ms / 1_000),
        _ => format!("{ms}ms"),
    }
}

/// `500ms`, `30s`, `15m`, `1h`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, unit) = t.find(|c: char| c.is_ascii_alphabetic()).map(|i| (&t[..i], &t[i..])).unwrap_or((t, "s"));
    let v: f64 = num.parse().map_err(|_| format!("`{t}` is not a duration (examples: 500ms, 30s, 15m, 1h)"))?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        other => return Err(format!("unknown unit `{other}` in `{t}`; use ms, s, m or h")),
    };
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(format!("`{t}` is not a valid duration"));
    }
    // `from_secs_f64` panics past about 585 billion years.
    Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("`{t}` is too long a duration (examples: 500ms, 30s, 15m, 1h)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_and_durations_parse_or_say_why_not() {
        assert_eq!(parse_steps("1k,2.5k,1M").unwrap(), vec![1000, 2500, 1_000_000]);
        assert!(parse_steps("1k,abc").unwrap_err().contains("abc"));
        assert!(parse_steps("2k,1k").unwrap_err().contains("increase"));
        assert!(parse_steps("").is_err());
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("5 parsecs").is_err());
        // Found by the fuzz target: panicked in Duration::from_secs_f64.
        assert!(parse_duration("99999999999999999999h").unwrap_err().contains("too long"));
        assert_eq!(parse_point_list("100k,1M,5k").unwrap(), vec![100_000, 1_000_000, 5_000]);
        assert!(parse_point_list("1k,x").unwrap_err().contains("`x`"));
    }

    #[test]
    fn points_and_durations_are_written_back_as_they_parse() {
        for s in ["500", "1k", "2.5k", "10k", "250k", "1M", "1.5M", "12345"] {
            assert_eq!(points_text(parse_points(s).unwrap()), s);
        }
        for s in ["0s", "500ms", "1500ms", "10s", "30s", "15m", "90m", "1h", "25h"] {
            assert_eq!(duration_text(parse_duration(s).unwrap()), s);
        }
    }
}
