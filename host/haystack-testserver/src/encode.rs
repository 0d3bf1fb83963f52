//! Answers in Zinc and Haystack JSON (v4, "Hayson"), written the way Haystack
//! servers write them. rusty-haystack-core's encoders are used for every
//! scalar except dateTime, which the core writes as `+00:00 UTC`; here a zero
//! offset is `Z` (`2024-05-01T12:00:00.250Z UTC`), as haystack-java, Fantom
//! and Haxall write it. A JSON grid carries `meta.ver` = "3.0", as the
//! Haystack JSON grid encoding requires.

use haystack_core::codecs::json::v4 as json4;
use haystack_core::codecs::zinc;
use haystack_core::codecs::{shared, CodecError};
use haystack_core::data::{HDict, HGrid};
use haystack_core::kinds::{HDateTime, Kind};
use serde_json::{Map, Value};

/// The formats an answer can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Zinc,
    /// Haystack JSON v4; the content type is the one the client asked for
    /// (`application/vnd.haystack+json` or `application/json`).
    Json(&'static str),
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Zinc => "text/zinc; charset=utf-8",
            Format::Json("application/vnd.haystack+json") => "application/vnd.haystack+json; charset=utf-8",
            Format::Json(_) => "application/json; charset=utf-8",
        }
    }

    /// The answer's format for an `Accept` header: the media type with the
    /// highest q among Zinc (`text/zinc`), Haystack JSON
    /// (`application/vnd.haystack+json`, `application/json`) and wildcards,
    /// the first listed on a tie; Zinc when nothing listed is one of those.
    pub fn for_accept(accept: &str) -> Format {
        let mut best: Option<(f32, Format)> = None;
        for item in accept.split(',') {
            let mut parts = item.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let mut q = 1.0f32;
            for p in parts {
                if let Some(v) = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")) {
                    q = v.trim().parse().unwrap_or(0.0);
                }
            }
            let format = match media.as_str() {
                "text/zinc" | "text/*" | "*/*" => Format::Zinc,
                "application/vnd.haystack+json" => Format::Json("application/vnd.haystack+json"),
                "application/json" | "application/*" => Format::Json("application/json"),
                _ => continue,
            };
            if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
                best = Some((q, format));
            }
        }
        best.map(|(_, f)| f).unwrap_or(Format::Zinc)
    }

    pub fn encode(self, grid: &HGrid) -> Result<String, CodecError> {
        match self {
            Format::Zinc => zinc_grid(grid),
            Format::Json(_) => json_grid(grid),
        }
    }
}

/// `2024-05-01T12:00:00.25Z UTC`; a non-zero offset as `-05:00 New_York`.
fn zinc_datetime(t: &HDateTime) -> String {
    let mut s = json_datetime_val(t);
    if !t.tz_name.is_empty() {
        s.push(' ');
        s.push_str(&t.tz_name);
    }
    s
}

/// The ISO part of a dateTime: `Z` for a zero offset.
fn json_datetime_val(t: &HDateTime) -> String {
    use chrono::{Offset as _, Timelike as _};
    let mut s = t.dt.format("%Y-%m-%dT%H:%M:%S").to_string();
    s.push_str(&shared::format_frac_seconds(t.dt.nanosecond()));
    if t.dt.offset().fix().local_minus_utc() == 0 {
        s.push('Z');
    } else {
        s.push_str(&t.dt.format("%:z").to_string());
    }
    s
}

fn zinc_scalar(v: &Kind) -> Result<String, CodecError> {
    match v {
        Kind::DateTime(t) => Ok(zinc_datetime(t)),
        Kind::List(items) => {
            let parts = items.iter().map(zinc_scalar).collect::<Result<Vec<_>, _>>()?;
            Ok(format!("[{}]", parts.join(", ")))
        }
        Kind::Dict(d) => Ok(format!("{{{}}}", zinc_tags(d)?)),
        other => zinc::encode_scalar(other),
    }
}

/// Tags as Zinc meta / inline dict content: markers by name, others `name:value`.
fn zinc_tags(d: &HDict) -> Result<String, CodecError> {
    let mut parts = Vec::new();
    for (k, v) in d.sorted_tags() {
        if matches!(v, Kind::Marker) {
            parts.push(k.to_string());
        } else {
            parts.push(format!("{k}:{}", zinc_scalar(v)?));
        }
    }
    Ok(parts.join(" "))
}

pub fn zinc_grid(grid: &HGrid) -> Result<String, CodecError> {
    let mut buf = String::from("ver:\"3.0\"");
    if !grid.meta.is_empty() {
        buf.push(' ');
        buf.push_str(&zinc_tags(&grid.meta)?);
    }
    buf.push('\n');
    if grid.cols.is_empty() {
        buf.push_str("empty\n");
    } else {
        for (i, col) in grid.cols.iter().enumerate() {
            if i > 0 {
                buf.push(',');
            }
            buf.push_str(&col.name);
            if !col.meta.is_empty() {
                buf.push(' ');
                buf.push_str(&zinc_tags(&col.meta)?);
            }
        }
        buf.push('\n');
    }
    for row in &grid.rows {
        for (i, col) in grid.cols.iter().enumerate() {
            if i > 0 {
                buf.push(',');
            }
            match row.get(&col.name) {
                Some(v) => buf.push_str(&zinc_scalar(v)?),
                None => buf.push('N'),
            }
        }
        buf.push('\n');
    }
    Ok(buf)
}

fn json_kind(v: &Kind) -> Result<Value, CodecError> {
    match v {
        Kind::DateTime(t) => {
            let mut m = Map::new();
            m.insert("_kind".into(), Value::String("dateTime".into()));
            m.insert("val".into(), Value::String(json_datetime_val(t)));
            if !t.tz_name.is_empty() {
                m.insert("tz".into(), Value::String(t.tz_name.clone()));
            }
            Ok(Value::Object(m))
        }
        Kind::List(items) => Ok(Value::Array(items.iter().map(json_kind).collect::<Result<_, _>>()?)),
        Kind::Dict(d) => json_dict(d),
        Kind::Grid(g) => json_grid_value(g).map(Value::Object),
        other => json4::encode_kind(other),
    }
}

fn json_dict(d: &HDict) -> Result<Value, CodecError> {
    let mut m = Map::new();
    for (k, v) in d.sorted_tags() {
        m.insert(k.to_string(), json_kind(v)?);
    }
    Ok(Value::Object(m))
}

fn json_grid_value(grid: &HGrid) -> Result<Map<String, Value>, CodecError> {
    let mut m = Map::new();
    m.insert("_kind".into(), Value::String("grid".into()));
    let mut meta = match json_dict(&grid.meta)? {
        Value::Object(o) => o,
        _ => Map::new(),
    };
    meta.insert("ver".into(), Value::String("3.0".into()));
    m.insert("meta".into(), Value::Object(meta));
    let mut cols = Vec::with_capacity(grid.cols.len());
    for col in &grid.cols {
        let mut c = Map::new();
        c.insert("name".into(), Value::String(col.name.clone()));
        if !col.meta.is_empty() {
            c.insert("meta".into(), json_dict(&col.meta)?);
        }
        cols.push(Value::Object(c));
    }
    m.insert("cols".into(), Value::Array(cols));
    let rows = grid.rows.iter().map(json_dict).collect::<Result<Vec<_>, _>>()?;
    m.insert("rows".into(), Value::Array(rows));
    Ok(m)
}

pub fn json_grid(grid: &HGrid) -> Result<String, CodecError> {
    serde_json::to_string(&json_grid_value(grid)?).map_err(|e| CodecError::Encode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{FixedOffset, TimeZone};
    use haystack_core::data::HCol;
    use haystack_core::kinds::{HRef, Number};

    fn grid() -> HGrid {
        let utc = FixedOffset::east_opt(0).unwrap().timestamp_millis_opt(1_714_564_800_250).unwrap();
        let ny = FixedOffset::west_opt(5 * 3600).unwrap().timestamp_millis_opt(1_714_564_800_000).unwrap();
        let mut meta = HDict::new();
        meta.set("id", Kind::Ref(HRef::from_val("p")));
        meta.set("hisStart", Kind::DateTime(HDateTime::new(utc, "UTC")));
        let mut row = HDict::new();
        row.set("ts", Kind::DateTime(HDateTime::new(utc, "UTC")));
        row.set("val", Kind::Number(Number::new(21.5, Some("°C".into()))));
        row.set("note", Kind::Str("2024-05-01T12:00:00+00:00 UTC".into()));
        row.set("ny", Kind::List(vec![Kind::DateTime(HDateTime::new(ny, "New_York"))]));
        HGrid::from_parts(meta, ["ts", "val", "note", "ny"].iter().map(|c| HCol::new(*c)).collect(), vec![row])
    }

    #[test]
    fn zinc_writes_utc_as_z_and_leaves_strings_and_other_offsets_alone() {
        let z = zinc_grid(&grid()).unwrap();
        assert_eq!(
            z,
            "ver:\"3.0\" hisStart:2024-05-01T12:00:00.25Z UTC id:@p\nts,val,note,ny\n\
             2024-05-01T12:00:00.25Z UTC,21.5°C,\"2024-05-01T12:00:00+00:00 UTC\",[2024-05-01T07:00:00-05:00 New_York]\n"
        );
        // The core reads it back to the same instants.
        let back = zinc::decode_grid(&z).unwrap();
        assert_eq!(back.rows[0].get("ts"), grid().rows[0].get("ts"));
    }

    #[test]
    fn json_writes_utc_as_z_with_ver_in_meta() {
        let j: Value = serde_json::from_str(&json_grid(&grid()).unwrap()).unwrap();
        assert_eq!(j["meta"]["ver"], "3.0");
        assert_eq!(j["rows"][0]["ts"]["val"], "2024-05-01T12:00:00.25Z");
        assert_eq!(j["rows"][0]["ts"]["tz"], "UTC");
        assert_eq!(j["rows"][0]["ny"][0]["val"], "2024-05-01T07:00:00-05:00");
        assert_eq!(j["rows"][0]["note"], "2024-05-01T12:00:00+00:00 UTC");
        assert_eq!(j["rows"][0]["val"]["unit"], "°C");
    }

    #[test]
    fn accept_picks_the_highest_q_then_the_first_listed() {
        let j = Format::Json("application/json");
        let h = Format::Json("application/vnd.haystack+json");
        assert_eq!(Format::for_accept(""), Format::Zinc);
        assert_eq!(Format::for_accept("application/vnd.haystack+json"), h);
        assert_eq!(Format::for_accept("application/json"), j);
        assert_eq!(Format::for_accept("text/zinc,application/vnd.haystack+json"), Format::Zinc);
        assert_eq!(Format::for_accept("text/zinc;q=0.5, application/vnd.haystack+json"), h);
        assert_eq!(Format::for_accept("text/html, application/json;q=0.9"), j);
        assert_eq!(Format::for_accept("text/html"), Format::Zinc);
        assert_eq!(h.content_type(), "application/vnd.haystack+json; charset=utf-8");
    }
}
