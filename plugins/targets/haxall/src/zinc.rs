//! Just enough Zinc (https://project-haystack.org/doc/docHaystack/Zinc) to
//! write the grids the adapter sends (commit, hisWrite, hisRead requests) and
//! to recognise an error grid; plus ISO date-times from and to epoch ms
//! without a date library. Responses the adapter must read row by row are
//! asked for as Haystack JSON (see `his`).

use std::fmt::Write as _;

use scalebench_plugin_sdk::date::{civil_from_days, days_from_civil};

/// A time zone the adapter can write timestamps in without a tz database:
/// `UTC`, or the fixed-offset Haystack zones `GMT+n` / `GMT-n` (POSIX sign:
/// `GMT+5` is five hours *behind* UTC, like `Etc/GMT+5`).
#[derive(Debug, Clone, PartialEq)]
pub struct Tz {
    pub name: String,
    /// Offset east of UTC, in minutes.
    pub offset_min: i32,
}

impl Tz {
    pub fn utc() -> Tz {
        Tz { name: "UTC".into(), offset_min: 0 }
    }

    pub fn parse(name: &str) -> Result<Tz, String> {
        if name == "UTC" {
            return Ok(Tz::utc());
        }
        if let Some(rest) = name.strip_prefix("GMT") {
            let (sign, digits) = match rest.as_bytes().first() {
                Some(b'+') => (-1, &rest[1..]),
                Some(b'-') => (1, &rest[1..]),
                _ => return Err(format!("time zone {name:?}: expected GMT+n or GMT-n")),
            };
            let h: i32 = digits.parse().map_err(|_| format!("time zone {name:?}: expected GMT+n or GMT-n"))?;
            if !(0..=14).contains(&h) {
                return Err(format!("time zone {name:?}: offset out of range"));
            }
            return Ok(Tz { name: name.into(), offset_min: sign * h * 60 });
        }
        Err(format!(
            "time zone {name:?} needs a tz database the adapter does not carry; use \"UTC\" or a fixed-offset zone \"GMT+n\"/\"GMT-n\""
        ))
    }
}

/// Zinc DateTime of epoch `ms` in `tz`: `2024-05-01T12:00:00.250Z UTC`,
/// `2024-05-01T07:00:00-05:00 GMT+5`. Milliseconds only when not zero.
pub fn write_datetime(out: &mut String, ms: i64, tz: &Tz) {
    let local = ms + tz.offset_min as i64 * 60_000;
    let days = local.div_euclid(86_400_000);
    let in_day = local.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s, frac) = (in_day / 3_600_000, in_day / 60_000 % 60, in_day / 1000 % 60, in_day % 1000);
    let _ = write!(out, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
    if frac != 0 {
        let _ = write!(out, ".{frac:03}");
    }
    if tz.offset_min == 0 {
        out.push('Z');
    } else {
        let sign = if tz.offset_min < 0 { '-' } else { '+' };
        let a = tz.offset_min.abs();
        let _ = write!(out, "{sign}{:02}:{:02}", a / 60, a % 60);
    }
    out.push(' ');
    out.push_str(&tz.name);
}

/// Epoch ms of an ISO-8601 date-time with an offset (`Z` or `±hh:mm`),
/// optionally followed by a space and a zone name (Zinc) which is ignored:
/// the offset already fixes the instant.
pub fn parse_datetime(s: &str) -> Option<i64> {
    let s = s.split(' ').next()?;
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    // Digits only: `parse` alone would take a sign (`2024-+5-01`).
    let num = |r: std::ops::Range<usize>| {
        let t = s.get(r)?;
        t.bytes().all(|b| b.is_ascii_digit()).then(|| t.parse::<i64>().ok())?
    };
    let (y, mo, d, h, mi, sec) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    let mut i = 19;
    let mut frac_ms = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = &s[start..i];
        let mut ms_digits: String = digits.chars().take(3).collect();
        while ms_digits.len() < 3 {
            ms_digits.push('0');
        }
        frac_ms = ms_digits.parse().ok()?;
    }
    let offset_min = match b.get(i)? {
        b'Z' => 0,
        c @ (b'+' | b'-') => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            if oh > 14 || om > 59 {
                return None;
            }
            let o = oh * 60 + om;
            if *c == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    // A field out of range (month 13, 25 o'clock, February 30th) is no
    // instant: refused, never wrapped into another one.
    if !(1..=12).contains(&mo) || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    let days = days_from_civil(y, mo as u32, d as u32);
    if d < 1 || civil_from_days(days) != (y, mo as u32, d as u32) {
        return None;
    }
    Some(((days * 86_400 + h * 3600 + mi * 60 + sec) - offset_min * 60) * 1000 + frac_ms)
}

/// A Zinc Str literal.
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '$' => out.push_str("\\$"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A Zinc Str literal's text, read after its opening quote up to the closing
/// one: the inverse of [`write_str`] (`\n`, `\r`, `\t`, `\uXXXX`, and any
/// other escaped character as itself).
pub fn read_str(chars: &mut impl Iterator<Item = char>) -> String {
    let mut s = String::new();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => s.push('\n'),
                Some('r') => s.push('\r'),
                Some('t') => s.push('\t'),
                Some('b') => s.push('\u{8}'),
                Some('f') => s.push('\u{c}'),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    s.extend(u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32));
                }
                Some(e) => s.push(e),
                None => break,
            },
            '"' => break,
            c => s.push(c),
        }
    }
    s
}

/// Is `c` allowed in a Haystack Ref id?
pub fn is_ref_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '-' | '.' | '~')
}

/// Replace every character a Ref may not hold with `_`.
pub fn ref_safe(s: &str) -> String {
    s.chars().map(|c| if is_ref_char(c) { c } else { '_' }).collect()
}

/// Is `s` a valid tag (column) name: lower-case letter, then letters, digits, `_`?
pub fn is_tag_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_lowercase()) && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// A Zinc Number, with its unit when it has one. Non-finite values are the
/// Zinc keywords `NaN`, `INF`, `-INF` (which take no unit).
pub fn write_number(out: &mut String, v: f64, unit: Option<&str>) {
    if v.is_nan() {
        out.push_str("NaN");
        return;
    }
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "INF" } else { "-INF" });
        return;
    }
    if v == v.trunc() && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        // Rust's shortest round-trip form; exponents as Zinc writes them.
        let _ = write!(out, "{v:?}");
    }
    if let Some(u) = unit {
        out.push_str(u);
    }
}

/// Does the Zinc grid's meta (its first line) carry the `err` marker?
/// Returns the `dis` message when it does.
pub fn error_grid(body: &str) -> Option<String> {
    let first = body.lines().next()?;
    let mut in_str = false;
    let mut esc = false;
    let mut token = String::new();
    let mut tokens: Vec<(String, usize)> = Vec::new();
    for (i, c) in first.char_indices() {
        if in_str {
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                token.clear();
            }
            ' ' => {
                if !token.is_empty() {
                    tokens.push((std::mem::take(&mut token), i));
                }
            }
            _ => token.push(c),
        }
    }
    if !token.is_empty() {
        tokens.push((token, first.len()));
    }
    if !tokens.iter().any(|(t, _)| t == "err" || t == "err:M") {
        return None;
    }
    // The dis:"..." text, if any.
    let dis = first.find("dis:\"").map(|at| read_str(&mut first[at + 5..].chars()));
    Some(dis.unwrap_or_else(|| "error grid without dis".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes_round_trip() {
        let mut s = String::new();
        write_datetime(&mut s, 1_714_564_800_250, &Tz::utc());
        assert_eq!(s, "2024-05-01T12:00:00.250Z UTC");
        assert_eq!(parse_datetime(&s), Some(1_714_564_800_250));
        let mut s = String::new();
        write_datetime(&mut s, 1_714_564_800_000, &Tz::parse("GMT+5").unwrap());
        assert_eq!(s, "2024-05-01T07:00:00-05:00 GMT+5");
        assert_eq!(parse_datetime(&s), Some(1_714_564_800_000));
        assert_eq!(parse_datetime("1969-12-31T23:59:59.9Z"), Some(-100));
        assert_eq!(parse_datetime("2024-02-29T00:00:00.123456+01:00"), Some(1_709_161_200_123));
        assert_eq!(parse_datetime("2024-02-29"), None);
        for ms in [0i64, 1, 999, 86_399_999, 951_782_400_000, 4_102_444_800_000, -62_135_596_800_000] {
            let mut s = String::new();
            write_datetime(&mut s, ms, &Tz::utc());
            assert_eq!(parse_datetime(&s), Some(ms), "{s}");
        }
    }

    #[test]
    fn tz_names() {
        assert_eq!(Tz::parse("GMT-3").unwrap().offset_min, 180);
        assert!(Tz::parse("New_York").unwrap_err().contains("tz database"));
        assert!(Tz::parse("GMT+99").is_err());
    }

    #[test]
    fn scalars() {
        let mut s = String::new();
        write_str(&mut s, "a\"b\\c$d\ne");
        assert_eq!(s, r#""a\"b\\c\$d\ne""#);
        let mut s = String::new();
        for (v, u) in
            [(3.0, Some("°C")), (-0.5, None), (1e21, None), (f64::NAN, Some("bar")), (f64::NEG_INFINITY, None)]
        {
            write_number(&mut s, v, u);
            s.push(',');
        }
        assert_eq!(s, "3°C,-0.5,1e21,NaN,-INF,");
        assert_eq!(ref_safe("s0.e1/temp 2"), "s0.e1_temp_2");
        assert!(is_tag_name("his") && !is_tag_name("His") && !is_tag_name("a-b"));
    }

    #[test]
    fn error_grids() {
        assert_eq!(
            error_grid("ver:\"3.0\" err dis:\"bad \\\"thing\\\"\" errTrace:\"x\"\nempty\n").as_deref(),
            Some("bad \"thing\"")
        );
        assert_eq!(error_grid("ver:\"3.0\" dis:\"not an err here\"\nempty\n"), None);
        assert_eq!(error_grid("ver:\"3.0\"\nid,dis\n@a,\"err\"\n"), None);
        assert!(error_grid("ver:\"3.0\" err\nempty\n").is_some());
    }
}
