//! The probes and the judging of their answers, as plain data.

use crate::params::Params;
use crate::zinc;

/// A point record as the server has it: its id and the equip it is on.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub id: String,
    pub equip_ref: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Req {
    pub name: String,
    pub description: String,
    pub method: String,
    pub path: String,
    /// Zinc request grid; empty for GET.
    pub body: String,
    /// The answer's format. hisRead answers are asked for as Haystack JSON:
    /// a batch hisRead grid has one row per distinct timestamp and a column
    /// per point, and plant points report at staggered offsets, so in Zinc
    /// (a cell per column, `N` when empty) 1,000 points over an hour of
    /// 5-second readings are ~36k rows × 1,000 cells, tens of MiB; JSON
    /// rows carry only the cells that hold a value (measured: the Zinc
    /// answer passed 64 MiB at the 2,500-point step of a 60 s + 30 s ladder).
    pub accept: &'static str,
}

const ZINC: &str = "text/zinc";
const JSON: &str = "application/json";

/// The request that finds the points to read: point records with history,
/// as a Haystack user would find them (no id scheme assumed).
pub fn find_points(limit: u32) -> String {
    format!("ver:\"3.0\"\nfilter,limit\n\"point and his\",{limit}\n")
}

/// A ref cell of a Haystack JSON grid, v4 (`{"_kind":"ref","val":"a.b"}`)
/// or v3 (`"r:a.b dis"`).
fn json_ref(v: &serde_json::Value) -> Option<String> {
    if let Some(s) = v.as_str() {
        let r = s.strip_prefix("r:")?;
        return Some(r.split(' ').next().unwrap_or(r).to_string());
    }
    v.get("val").and_then(|x| x.as_str()).map(String::from)
}

/// Points of a `read` answer (Haystack JSON): id and equipRef of each row.
pub fn parse_points(body: &[u8]) -> Result<Vec<Point>, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("the point read did not answer a JSON grid: {e}"))?;
    if v["meta"].get("err").is_some() {
        return Err(format!("the point read answered an error grid: {}", v["meta"]["dis"]));
    }
    let rows = v["rows"].as_array().ok_or("the point read answered a grid without rows")?;
    Ok(rows
        .iter()
        .filter_map(|r| Some(Point { id: json_ref(&r["id"])?, equip_ref: json_ref(&r["equipRef"]) }))
        .collect())
}

fn his_read_batch(ids: &[String], range: &str) -> String {
    let mut g = String::from("ver:\"3.0\" range:");
    zinc::write_str(&mut g, range);
    g.push_str("\nid\n");
    for id in ids {
        g.push('@');
        g.push_str(id);
        g.push('\n');
    }
    g
}

fn read_filter(filter: &str) -> String {
    let mut g = String::from("ver:\"3.0\"\nfilter\n");
    zinc::write_str(&mut g, filter);
    g.push('\n');
    g
}

/// The probes. `hour_range` is the last hour as a Zinc range (from the
/// server's clock), or None to fall back to `today`.
pub fn setup(p: &Params, points: &[Point], hour_range: Option<String>) -> (Vec<Req>, Vec<String>) {
    let mut notes = Vec::new();
    let path = |op: &str| format!("{}/{}", p.api_path, op);
    let mut out = vec![
        Req {
            name: "read-point".into(),
            description: "read filter point: every point record".into(),
            method: "POST".into(),
            path: path("read"),
            body: read_filter("point"),
            accept: ZINC,
        },
        Req {
            name: "read-equip".into(),
            description: "read filter equip: every equip record".into(),
            method: "POST".into(),
            path: path("read"),
            body: read_filter("equip"),
            accept: ZINC,
        },
    ];
    if let Some(first) = points.first() {
        let ids: Vec<String> = points.iter().filter(|t| t.equip_ref == first.equip_ref).map(|t| t.id.clone()).collect();
        out.push(Req {
            name: "his-read-today".into(),
            description: format!(
                "hisRead today of the {} points of one equip (readAll(equip) then one batch hisRead)",
                ids.len()
            ),
            method: "POST".into(),
            path: path("hisRead"),
            body: his_read_batch(&ids, "today"),
            accept: JSON,
        });
        let n = (p.his_read_points as usize).min(points.len());
        if n < p.his_read_points as usize {
            notes.push(format!("his-read-{}: the server has only {n} points with history", p.his_read_points));
        }
        let ids: Vec<String> = points[..n].iter().map(|t| t.id.clone()).collect();
        let range = hour_range.unwrap_or_else(|| {
            notes.push("no serverTime in /about: his-read probe reads today instead of the last hour".into());
            "today".into()
        });
        out.push(Req {
            name: format!("his-read-{}", p.his_read_points),
            description: format!("batch hisRead of {n} points for the last hour"),
            method: "POST".into(),
            path: path("hisRead"),
            body: his_read_batch(&ids, &range),
            accept: JSON,
        });
    } else {
        // The same probes whether or not the server could be asked (their
        // names are their budgets): reads of no point, said in a note.
        notes.push("no point records with history found on the server: the hisRead probes read no point".into());
        for (name, range) in [
            ("his-read-today".to_string(), "today".to_string()),
            (format!("his-read-{}", p.his_read_points), hour_range.unwrap_or_else(|| "today".into())),
        ] {
            out.push(Req {
                name,
                description: "hisRead of no point (none found on the server)".into(),
                method: "POST".into(),
                path: path("hisRead"),
                body: his_read_batch(&[], &range),
                accept: JSON,
            });
        }
    }
    out.push(Req {
        name: "about".into(),
        description: "GET about".into(),
        method: "GET".into(),
        path: path("about"),
        body: String::new(),
        accept: ZINC,
    });
    (out, notes)
}

/// Judge an answer: HTTP 200, and not an error grid (Zinc or JSON).
/// `read-*` answers must hold at least one record.
pub fn check(name: &str, status: u16, body: &[u8]) -> Result<(), String> {
    if status != 200 {
        return Err(format!(
            "{name}: HTTP {status}: {}",
            String::from_utf8_lossy(body).chars().take(200).collect::<String>()
        ));
    }
    let text = std::str::from_utf8(body).map_err(|_| format!("{name}: answer is not UTF-8"))?;
    let trimmed = text.trim_start();
    let rows = if trimmed.starts_with('{') {
        let g = json_grid(trimmed).map_err(|e| format!("{name}: bad JSON grid: {e}"))?;
        if g.meta.get("err").is_some() {
            return Err(format!(
                "{name}: error grid: {}",
                g.meta.get("dis").and_then(|d| d.as_str()).unwrap_or("(no dis)")
            ));
        }
        g.rows.rows as usize
    } else {
        if !trimmed.starts_with("ver:") {
            return Err(format!("{name}: answer is not a Zinc grid: {}", trimmed.chars().take(80).collect::<String>()));
        }
        if let Some(dis) = zinc::error_grid(trimmed) {
            return Err(format!("{name}: error grid: {dis}"));
        }
        trimmed.lines().filter(|l| !l.trim().is_empty()).count().saturating_sub(2)
    };
    if name.starts_with("read-") && rows == 0 {
        return Err(format!("{name}: no records: the run's topology is not on the server"));
    }
    Ok(())
}

/// A Haystack JSON grid read for its meta and the size of its rows only:
/// a batch hisRead of 1,000 points over an hour of 5-second readings is
/// ~80 MB of JSON (a row per distinct timestamp); held as a
/// `serde_json::Value` it would take several times that in the plugin's
/// memory, counted as it streams by it takes none.
#[derive(serde::Deserialize)]
struct JsonGrid {
    #[serde(default)]
    meta: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    rows: RowCount,
}

/// Rows of a grid, and the values in them (cells of every column but `ts`
/// that are not null).
#[derive(Default)]
struct RowCount {
    rows: u64,
    values: u64,
}

impl<'de> serde::Deserialize<'de> for RowCount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Rows;
        impl<'de> serde::de::Visitor<'de> for Rows {
            type Value = RowCount;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of rows")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<RowCount, A::Error> {
                let mut c = RowCount::default();
                while let Some(Cells(n)) = seq.next_element()? {
                    c.rows += 1;
                    c.values += n;
                }
                Ok(c)
            }
        }
        d.deserialize_seq(Rows)
    }
}

/// One row: how many of its cells hold a value (`ts` left out).
struct Cells(u64);

impl<'de> serde::Deserialize<'de> for Cells {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Row;
        impl<'de> serde::de::Visitor<'de> for Row {
            type Value = Cells;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a row (an object)")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Cells, A::Error> {
                let mut n = 0;
                while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let v: Option<serde::de::IgnoredAny> = map.next_value()?;
                    if k != "ts" && v.is_some() {
                        n += 1;
                    }
                }
                Ok(Cells(n))
            }
        }
        d.deserialize_map(Row)
    }
}

fn json_grid(text: &str) -> Result<JsonGrid, serde_json::Error> {
    serde_json::from_str(text)
}

/// How much an accepted answer holds: a hisRead answer (JSON) the values in
/// it (cells of the value columns, the `ts` column left out), any other
/// answer its rows (records). None when the answer is not a grid.
pub fn size(name: &str, body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?.trim_start();
    if text.starts_with('{') {
        let g = json_grid(text).ok()?;
        return Some(if name.starts_with("his-read") { g.rows.values } else { g.rows.rows });
    }
    if !text.starts_with("ver:") {
        return None;
    }
    Some(text.lines().filter(|l| !l.trim().is_empty()).count().saturating_sub(2) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(n: u32) -> Vec<Point> {
        (0..n)
            .map(|i| Point { id: format!("sb.s0.e{}.t{}", i / 4, i % 4), equip_ref: Some(format!("sb.s0.e{}", i / 4)) })
            .collect()
    }

    #[test]
    fn finds_points_through_the_server_in_either_json_encoding() {
        let v4 = br#"{"_kind":"grid","meta":{"ver":"3.0"},"cols":[{"name":"id"},{"name":"equipRef"}],
            "rows":[{"id":{"_kind":"ref","val":"x.p1","dis":"P1"},"equipRef":{"_kind":"ref","val":"x.e1"}},{"id":{"_kind":"ref","val":"x.p2"}}]}"#;
        let pts = parse_points(v4).unwrap();
        assert_eq!(pts[0], Point { id: "x.p1".into(), equip_ref: Some("x.e1".into()) });
        assert_eq!(pts[1], Point { id: "x.p2".into(), equip_ref: None });
        let v3 = br#"{"meta":{"ver":"3.0"},"cols":[],"rows":[{"id":"r:my.pt Pump 1","equipRef":"r:my.eq"}]}"#;
        assert_eq!(parse_points(v3).unwrap(), [Point { id: "my.pt".into(), equip_ref: Some("my.eq".into()) }]);
        assert!(parse_points(br#"{"meta":{"ver":"3.0","err":"m:","dis":"s:no"},"rows":[]}"#)
            .unwrap_err()
            .contains("error grid"));
        assert_eq!(find_points(1000), "ver:\"3.0\"\nfilter,limit\n\"point and his\",1000\n");
    }

    #[test]
    fn the_same_probes_when_the_server_has_no_points() {
        let (r, notes) = setup(&Params::default(), &[], None);
        let names: Vec<&str> = r.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["read-point", "read-equip", "his-read-today", "his-read-1000", "about"]);
        assert!(notes[0].contains("no point records"), "{notes:?}");
    }

    #[test]
    fn builds_probes() {
        let (r, notes) =
            setup(&Params::default(), &pts(10), Some("2024-05-01T11:00:00Z UTC,2024-05-01T12:00:00Z UTC".into()));
        let names: Vec<&str> = r.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["read-point", "read-equip", "his-read-today", "his-read-1000", "about"]);
        let accepts: Vec<&str> = r.iter().map(|x| x.accept).collect();
        assert_eq!(accepts, [ZINC, ZINC, JSON, JSON, ZINC], "hisRead answers as JSON (only the cells with values)");
        assert_eq!(r[0].body, "ver:\"3.0\"\nfilter\n\"point\"\n");
        assert_eq!(
            r[2].body,
            "ver:\"3.0\" range:\"today\"\nid\n@sb.s0.e0.t0\n@sb.s0.e0.t1\n@sb.s0.e0.t2\n@sb.s0.e0.t3\n"
        );
        assert!(r[3].body.starts_with(
            "ver:\"3.0\" range:\"2024-05-01T11:00:00Z UTC,2024-05-01T12:00:00Z UTC\"\nid\n@sb.s0.e0.t0\n"
        ));
        assert_eq!(r[3].body.lines().count(), 12);
        assert_eq!(r[4].method, "GET");
        assert_eq!(notes.len(), 1);
    }

    #[test]
    fn sizes_answers() {
        let his = br#"{"_kind":"grid","meta":{"ver":"3.0"},"cols":[{"name":"ts"},{"name":"v0"},{"name":"v1"}],
            "rows":[{"ts":{"_kind":"dateTime","val":"2024-05-01T11:00:00Z","tz":"UTC"},"v0":1.5},
                    {"ts":{"_kind":"dateTime","val":"2024-05-01T11:00:01Z","tz":"UTC"},"v0":2,"v1":3},
                    {"ts":{"_kind":"dateTime","val":"2024-05-01T11:00:02Z","tz":"UTC"}}]}"#;
        assert_eq!(size("his-read-1000", his), Some(3), "values, not rows or timestamps");
        assert_eq!(size("read-point", his), Some(3), "records of any other read");
        assert_eq!(
            size("his-read-today", br#"{"_kind":"grid","meta":{"ver":"3.0"},"cols":[{"name":"empty"}],"rows":[]}"#),
            Some(0)
        );
        assert_eq!(size("read-point", b"ver:\"3.0\"\nid,dis\n@a,\"A\"\n@b,\"B\"\n"), Some(2));
        assert_eq!(size("about", b"<html>"), None);
    }

    #[test]
    fn checks_answers() {
        assert!(check("about", 200, b"ver:\"3.0\"\nhaystackVersion\n\"4.0\"\n").is_ok());
        assert!(check("read-point", 200, b"ver:\"3.0\"\nempty\n").unwrap_err().contains("no records"));
        assert!(check("his-read-today", 200, b"ver:\"3.0\" err dis:\"boom\"\nempty\n").unwrap_err().contains("boom"));
        assert!(check(
            "x",
            200,
            br#"{"_kind":"grid","meta":{"ver":"3.0","err":{"_kind":"marker"},"dis":"bad"},"cols":[],"rows":[]}"#
        )
        .unwrap_err()
        .contains("bad"));
        assert!(check("x", 500, b"oops").unwrap_err().contains("500"));
        assert!(check("x", 200, b"<html>").unwrap_err().contains("not a Zinc"));
    }
}
