//! PostgreSQL's binary formats as the host speaks them to plugins: how a
//! [`SqlValue`] parameter binds (by the type the server infers for its
//! placeholder) and how a result column converts back (by its type), as the
//! module docs of [`crate::services`] list them. No I/O here.

use std::error::Error as StdError;

use bytes::{BufMut, BytesMut};
use plugin_runtime::types::SqlValue;
use postgres::types::{Format, FromSql, IsNull, Kind, ToSql, Type};

// ---------------------------------------------------------------- parameters

/// A [`SqlValue`] bound to a placeholder; see the module docs of [`crate::services`].
#[derive(Debug)]
pub(super) struct Param<'a>(pub(super) &'a SqlValue);

fn binary_target(v: &SqlValue, ty: &Type) -> bool {
    match v {
        SqlValue::Null => true,
        SqlValue::Int(_) => matches!(*ty, Type::INT8 | Type::INT4 | Type::INT2 | Type::FLOAT8 | Type::FLOAT4),
        SqlValue::Float(_) => matches!(*ty, Type::FLOAT8 | Type::FLOAT4),
        SqlValue::Boolean(_) => *ty == Type::BOOL,
        SqlValue::Text(_) => false,
    }
}

fn float_text(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f == f64::INFINITY {
        "Infinity".into()
    } else if f == f64::NEG_INFINITY {
        "-Infinity".into()
    } else {
        // Shortest text that reads back as the same f64.
        format!("{f:?}")
    }
}

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        let range = |i: i64, t: &str| format!("parameter {i} is out of range for {t}");
        if !binary_target(self.0, ty) {
            let text = match self.0 {
                SqlValue::Int(i) => i.to_string(),
                SqlValue::Float(f) => float_text(*f),
                SqlValue::Boolean(b) => b.to_string(),
                SqlValue::Text(s) => s.clone(),
                SqlValue::Null => unreachable!("null binds in binary"),
            };
            out.put_slice(text.as_bytes());
            return Ok(IsNull::No);
        }
        match (self.0, ty) {
            (SqlValue::Null, _) => return Ok(IsNull::Yes),
            (SqlValue::Int(i), &Type::INT8) => out.put_i64(*i),
            (SqlValue::Int(i), &Type::INT4) => out.put_i32(i32::try_from(*i).map_err(|_| range(*i, "int4"))?),
            (SqlValue::Int(i), &Type::INT2) => out.put_i16(i16::try_from(*i).map_err(|_| range(*i, "int2"))?),
            (SqlValue::Int(i), &Type::FLOAT8) => out.put_f64(*i as f64),
            (SqlValue::Int(i), &Type::FLOAT4) => out.put_f32(*i as f32),
            (SqlValue::Float(f), &Type::FLOAT8) => out.put_f64(*f),
            (SqlValue::Float(f), &Type::FLOAT4) => out.put_f32(*f as f32),
            (SqlValue::Boolean(b), &Type::BOOL) => out.put_u8(*b as u8),
            _ => unreachable!("binary_target covers these"),
        }
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn to_sql_checked(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        self.to_sql(ty, out)
    }

    fn encode_format(&self, ty: &Type) -> Format {
        if binary_target(self.0, ty) {
            Format::Binary
        } else {
            Format::Text
        }
    }
}

// ------------------------------------------------------------------- results

/// One result value as the host decodes it: a value, or a type it cannot convert.
pub(super) enum Cell {
    Value(SqlValue),
    Unsupported(String),
}

impl<'a> FromSql<'a> for Cell {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Cell, Box<dyn StdError + Sync + Send>> {
        Ok(decode(ty, raw)?.map(Cell::Value).unwrap_or_else(|| Cell::Unsupported(type_label(ty))))
    }

    fn from_sql_null(_: &Type) -> Result<Cell, Box<dyn StdError + Sync + Send>> {
        Ok(Cell::Value(SqlValue::Null))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

pub(super) fn type_label(ty: &Type) -> String {
    match ty.kind() {
        Kind::Array(inner) => format!("{}[]", inner.name()),
        _ => ty.name().to_string(),
    }
}

fn be<const N: usize>(raw: &[u8]) -> Result<[u8; N], String> {
    raw.try_into().map_err(|_| format!("expected {N} bytes, got {}", raw.len()))
}

fn utf8(raw: &[u8]) -> Result<String, String> {
    String::from_utf8(raw.to_vec()).map_err(|e| format!("not UTF-8: {e}"))
}

/// Decode a binary value; `Ok(None)` for a type the host does not convert.
fn decode(ty: &Type, raw: &[u8]) -> Result<Option<SqlValue>, String> {
    let v = match *ty {
        Type::BOOL => SqlValue::Boolean(be::<1>(raw)?[0] != 0),
        Type::INT2 => SqlValue::Int(i16::from_be_bytes(be(raw)?) as i64),
        Type::INT4 => SqlValue::Int(i32::from_be_bytes(be(raw)?) as i64),
        Type::INT8 => SqlValue::Int(i64::from_be_bytes(be(raw)?)),
        Type::OID => SqlValue::Int(u32::from_be_bytes(be(raw)?) as i64),
        Type::FLOAT4 => SqlValue::Float(f32::from_be_bytes(be(raw)?) as f64),
        Type::FLOAT8 => SqlValue::Float(f64::from_be_bytes(be(raw)?)),
        Type::NUMERIC => {
            let text = numeric_text(raw)?;
            SqlValue::Float(text.parse::<f64>().map_err(|e| format!("numeric {text:?}: {e}"))?)
        }
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::JSON | Type::UNKNOWN | Type::CHAR => {
            SqlValue::Text(utf8(raw)?)
        }
        Type::JSONB => match raw.split_first() {
            Some((1, rest)) => SqlValue::Text(utf8(rest)?),
            _ => return Err("jsonb: unknown binary version".into()),
        },
        Type::TIMESTAMPTZ => SqlValue::Text(timestamp_text(i64::from_be_bytes(be(raw)?), true)),
        Type::TIMESTAMP => SqlValue::Text(timestamp_text(i64::from_be_bytes(be(raw)?), false)),
        Type::DATE => SqlValue::Text(date_text(i32::from_be_bytes(be(raw)?))),
        Type::UUID => {
            let b: [u8; 16] = be(raw)?;
            let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
            SqlValue::Text(format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..]))
        }
        Type::BYTEA => SqlValue::Text(format!("\\x{}", raw.iter().map(|x| format!("{x:02x}")).collect::<String>())),
        _ if ty.name() == "citext" => SqlValue::Text(utf8(raw)?),
        _ => return Ok(None),
    };
    Ok(Some(v))
}

/// The exact decimal text of a binary `numeric`.
fn numeric_text(raw: &[u8]) -> Result<String, String> {
    if raw.len() < 8 {
        return Err(format!("numeric: {} bytes, need at least 8", raw.len()));
    }
    let rd = |i: usize| u16::from_be_bytes([raw[i], raw[i + 1]]);
    let ndigits = rd(0) as usize;
    let weight = rd(2) as i16 as i32;
    let sign = rd(4);
    let dscale = rd(6) as usize;
    match sign {
        0xC000 => return Ok("NaN".into()),
        0xD000 => return Ok("Infinity".into()),
        0xF000 => return Ok("-Infinity".into()),
        0x0000 | 0x4000 => {}
        s => return Err(format!("numeric: unknown sign {s:#x}")),
    }
    if raw.len() != 8 + 2 * ndigits {
        return Err(format!("numeric: {} bytes for {ndigits} digits", raw.len()));
    }
    let digits: Vec<u16> = (0..ndigits).map(|i| rd(8 + 2 * i)).collect();
    let digit = |pos: i32| -> u16 {
        // pos = power of 10000; digits[0] has power `weight`.
        let idx = weight - pos;
        if idx >= 0 && (idx as usize) < digits.len() {
            digits[idx as usize]
        } else {
            0
        }
    };
    let mut s = String::new();
    if sign == 0x4000 {
        s.push('-');
    }
    if weight < 0 {
        s.push('0');
    } else {
        for pos in (0..=weight).rev() {
            let d = digit(pos);
            if pos == weight {
                s += &d.to_string();
            } else {
                s += &format!("{d:04}");
            }
        }
    }
    if dscale > 0 {
        s.push('.');
        let mut frac = String::new();
        let mut pos = -1;
        while frac.len() < dscale {
            frac += &format!("{:04}", digit(pos));
            pos -= 1;
        }
        frac.truncate(dscale);
        s += &frac;
    }
    Ok(s)
}

/// Days between 1970-01-01 and PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_DAYS: i64 = 10_957;

fn year_text(y: i64) -> String {
    if y <= 0 {
        // PostgreSQL prints year 0 as "0001 BC".
        format!("{:04} BC", 1 - y)
    } else {
        format!("{y:04}")
    }
}

/// A PostgreSQL timestamp (µs since 2000-01-01) as RFC 3339; `utc` adds `Z`.
pub fn timestamp_text(us: i64, utc: bool) -> String {
    if us == i64::MAX {
        return "infinity".into();
    }
    if us == i64::MIN {
        return "-infinity".into();
    }
    let secs = us.div_euclid(1_000_000);
    let micros = us.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400) + PG_EPOCH_DAYS;
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = crate::clock::civil_from_days(days);
    let mut frac = String::new();
    if micros != 0 {
        frac = format!(".{micros:06}");
        while frac.ends_with('0') {
            frac.pop();
        }
    }
    let (date, bc) = match year_text(y).split_once(' ') {
        Some((yy, bc)) => (format!("{yy}-{m:02}-{d:02}"), format!(" {bc}")),
        None => (format!("{}-{m:02}-{d:02}", year_text(y)), String::new()),
    };
    format!("{date}T{:02}:{:02}:{:02}{frac}{}{bc}", sod / 3600, sod / 60 % 60, sod % 60, if utc { "Z" } else { "" })
}

/// A PostgreSQL date (days since 2000-01-01) as `YYYY-MM-DD`.
pub fn date_text(days: i32) -> String {
    match days {
        i32::MAX => "infinity".into(),
        i32::MIN => "-infinity".into(),
        _ => {
            let (y, m, d) = crate::clock::civil_from_days(days as i64 + PG_EPOCH_DAYS);
            match year_text(y).split_once(' ') {
                Some((yy, bc)) => format!("{yy}-{m:02}-{d:02} {bc}"),
                None => format!("{}-{m:02}-{d:02}", year_text(y)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(ndigits: u16, weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut v = Vec::new();
        for x in [ndigits, weight as u16, sign, dscale].iter().chain(digits) {
            v.extend_from_slice(&x.to_be_bytes());
        }
        v
    }

    #[test]
    fn numeric_decoding() {
        // 12.345: weight 0, digits [12, 3450], dscale 3
        assert_eq!(numeric_text(&numeric(2, 0, 0, 3, &[12, 3450])).unwrap(), "12.345");
        // -0.0012: weight -1, digits [12], dscale 4
        assert_eq!(numeric_text(&numeric(1, -1, 0x4000, 4, &[12])).unwrap(), "-0.0012");
        // 1000000: weight 1, digits [100] (100 * 10000)
        assert_eq!(numeric_text(&numeric(1, 1, 0, 0, &[100])).unwrap(), "1000000");
        // 0 with scale 2
        assert_eq!(numeric_text(&numeric(0, 0, 0, 2, &[])).unwrap(), "0.00");
        assert_eq!(numeric_text(&numeric(0, 0, 0xC000, 0, &[])).unwrap(), "NaN");
        assert!(numeric_text(&[0, 1]).is_err());
    }

    #[test]
    fn timestamps() {
        assert_eq!(timestamp_text(0, true), "2000-01-01T00:00:00Z");
        assert_eq!(timestamp_text(500_000, true), "2000-01-01T00:00:00.5Z");
        assert_eq!(timestamp_text(-1, false), "1999-12-31T23:59:59.999999");
        // 2026-11-08T00:33:11Z = 1794097991 unix s
        let us = (1_794_097_991 - 946_684_800) * 1_000_000;
        assert_eq!(timestamp_text(us, true), "2026-11-08T00:33:11Z");
        assert_eq!(timestamp_text(i64::MAX, true), "infinity");
        assert_eq!(date_text(0), "2000-01-01");
        assert_eq!(date_text(-1), "1999-12-31");
        assert_eq!(date_text(366), "2001-01-01");
    }

    #[test]
    fn params_choose_format() {
        let i = SqlValue::Int(5);
        assert!(matches!(Param(&i).encode_format(&Type::INT4), Format::Binary));
        assert!(matches!(Param(&i).encode_format(&Type::NUMERIC), Format::Text));
        let mut out = BytesMut::new();
        assert!(Param(&SqlValue::Int(1 << 40)).to_sql(&Type::INT4, &mut out).is_err());
        let t = SqlValue::Text("2026-01-01T00:00:00Z".into());
        assert!(matches!(Param(&t).encode_format(&Type::TIMESTAMPTZ), Format::Text));
        Param(&t).to_sql(&Type::TIMESTAMPTZ, &mut out).unwrap();
        assert_eq!(&out[..], b"2026-01-01T00:00:00Z");
        assert_eq!(float_text(f64::INFINITY), "Infinity");
        assert_eq!(float_text(0.1), "0.1");
    }
}
