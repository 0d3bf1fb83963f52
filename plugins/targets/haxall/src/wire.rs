//! Records, hisWrite grids and hisRead requests/answers for one run.
//!
//! Ids: site `@<prefix>.s<site>`, equip `@<prefix>.s<site>.e<equip>`, point
//! `@<prefix>.s<site>.e<equip>.<label>` (label made Ref-safe), canary
//! `@<prefix>.canary`. They are given in the `commit` "add" rows so readings
//! and reads can name points without reading ids back.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::params::Params;
use crate::zinc::{self, Tz};

#[derive(Debug, Clone, PartialEq)]
pub struct Tag {
    pub index: u32,
    pub kind: String,
    pub unit: String,
    pub site: u32,
    pub equip: u32,
    pub label: String,
    pub markers: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Msg {
    pub address: String,
    pub payload: Vec<u8>,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Encoded {
    pub address_of: Vec<u32>,
    pub ends: Vec<u32>,
    pub payload: Vec<u8>,
    pub carries: Vec<u32>,
}

/// Haystack unit of a tag unit, when the Haystack unit database has it
/// (docHaystack/Units); other units (e.g. "count") are left off the record
/// and the values, since a server that checks units would refuse them.
pub fn haystack_unit(unit: &str) -> Option<&str> {
    const KNOWN: &[&str] = &[
        "°C", "°F", "K", "%", "bar", "mbar", "Pa", "kPa", "psi", "m³/h", "m³/s", "L/s", "L/min", "gal/min", "mm/s",
        "m/s", "Hz", "rpm", "V", "A", "W", "kW", "kWh", "ppm", "s", "min", "h",
    ];
    KNOWN.iter().copied().find(|u| *u == unit)
}

/// Rows of Haystack markers on a point: the tag's markers that are valid tag
/// names, except those the Haystack defs give a non-marker value (`enum` is a Str).
fn point_markers(t: &Tag) -> impl Iterator<Item = &str> {
    t.markers
        .iter()
        .map(|s| s.as_str())
        .filter(|m| zinc::is_tag_name(m) && !matches!(*m, "enum" | "kind" | "unit" | "tz" | "his" | "point" | "id"))
}

pub struct Point {
    pub id: String,
    pub unit: Option<String>,
}

pub struct Wire {
    pub params: Params,
    tz: Tz,
    points: Vec<Option<Point>>,
    sites: BTreeSet<u32>,
    equips: BTreeSet<(u32, u32)>,
    canary_sent: bool,
    /// The first `topology` call adds the canary's records (true by
    /// default); false when they are committed by other means
    /// ([`Wire::canary_records`], from the component's `preflight`).
    pub canary_in_topology: bool,
    /// Payload ts of the first canary: canaries are read back from there.
    pub first_canary_ms: Option<i64>,
}

impl Wire {
    pub fn new(params: Params) -> Wire {
        let tz = params.tz();
        Wire {
            params,
            tz,
            points: Vec::new(),
            sites: BTreeSet::new(),
            equips: BTreeSet::new(),
            canary_sent: false,
            canary_in_topology: true,
            first_canary_ms: None,
        }
    }

    pub fn site_id(&self, site: u32) -> String {
        format!("{}.s{site}", self.params.id_prefix)
    }
    pub fn equip_id(&self, site: u32, equip: u32) -> String {
        format!("{}.s{site}.e{equip}", self.params.id_prefix)
    }
    pub fn point_id(&self, t: &Tag) -> String {
        format!("{}.s{}.e{}.{}", self.params.id_prefix, t.site, t.equip, zinc::ref_safe(&t.label))
    }
    pub fn canary_id(&self) -> String {
        format!("{}.canary", self.params.id_prefix)
    }

    fn register(&mut self, t: &Tag) {
        let i = t.index as usize;
        if self.points.len() <= i {
            self.points.resize_with(i + 1, || None);
        }
        self.points[i] = Some(Point { id: self.point_id(t), unit: haystack_unit(&t.unit).map(String::from) });
    }

    /// Ids of every point registered so far, in tag order.
    pub fn point_ids(&self) -> Vec<String> {
        self.points.iter().flatten().map(|p| p.id.clone()).collect()
    }

    pub fn addresses(&mut self, tags: &[Tag]) -> Vec<String> {
        let a = self.params.address("hisWrite");
        tags.iter()
            .map(|t| {
                self.register(t);
                a.clone()
            })
            .collect()
    }

    /// `commit` "add" grids: new sites, new equips, then points (1,000 rows a
    /// message), and the canary point with the first call.
    pub fn topology(&mut self, tags: &[Tag]) -> Vec<Msg> {
        if !self.canary_in_topology {
            self.canary_sent = true;
        }
        let addr = self.params.address("commit");
        let tz = self.tz.name.clone();
        let mut out = Vec::new();
        for t in tags {
            self.register(t);
        }
        let new_sites: Vec<u32> = tags
            .iter()
            .map(|t| t.site)
            .filter(|s| !self.sites.contains(s))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !new_sites.is_empty() || !self.canary_sent {
            let mut g = String::from("ver:\"3.0\" commit:\"add\"\nid,dis,site,scalebench,tz\n");
            for s in &new_sites {
                let _ = write!(g, "@{},", self.site_id(*s));
                zinc::write_str(&mut g, &format!("scalebench site {s}"));
                g.push_str(",M,M,");
                zinc::write_str(&mut g, &tz);
                g.push('\n');
                self.sites.insert(*s);
            }
            if !self.canary_sent {
                // The canary's own site, so it never depends on the plant's shape.
                let _ = write!(g, "@{}.canarySite,\"scalebench canary site\",M,M,", self.params.id_prefix);
                zinc::write_str(&mut g, &tz);
                g.push('\n');
            }
            out.push(Msg { address: addr.clone(), payload: g.into_bytes() });
        }
        let new_equips: Vec<(u32, u32)> = tags
            .iter()
            .map(|t| (t.site, t.equip))
            .filter(|e| !self.equips.contains(e))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !new_equips.is_empty() {
            for chunk in new_equips.chunks(1000) {
                let mut g = String::from("ver:\"3.0\" commit:\"add\"\nid,dis,equip,scalebench,siteRef\n");
                for (s, e) in chunk {
                    let _ = write!(g, "@{},", self.equip_id(*s, *e));
                    zinc::write_str(&mut g, &format!("scalebench equip {e}"));
                    let _ = writeln!(g, ",M,M,@{}", self.site_id(*s));
                    self.equips.insert((*s, *e));
                }
                out.push(Msg { address: addr.clone(), payload: g.into_bytes() });
            }
        }
        for chunk in tags.chunks(1000) {
            let markers: BTreeSet<&str> = chunk.iter().flat_map(point_markers).collect();
            let mut g = String::from(
                "ver:\"3.0\" commit:\"add\"\nid,dis,point,his,scalebench,kind,unit,tz,equipRef,siteRef,sbIndex",
            );
            for m in &markers {
                g.push(',');
                g.push_str(m);
            }
            g.push('\n');
            for t in chunk {
                let _ = write!(g, "@{},", self.point_id(t));
                zinc::write_str(&mut g, &format!("s{} e{} {}", t.site, t.equip, t.label));
                g.push_str(",M,M,M,\"Number\",");
                if let Some(u) = haystack_unit(&t.unit) {
                    zinc::write_str(&mut g, u);
                }
                g.push(',');
                zinc::write_str(&mut g, &tz);
                let _ = write!(g, ",@{},@{},{}", self.equip_id(t.site, t.equip), self.site_id(t.site), t.index);
                let own: BTreeSet<&str> = point_markers(t).collect();
                for m in &markers {
                    g.push(',');
                    if own.contains(m) {
                        g.push('M');
                    }
                }
                g.push('\n');
            }
            out.push(Msg { address: addr.clone(), payload: g.into_bytes() });
        }
        if !self.canary_sent {
            let mut g = String::from("ver:\"3.0\" commit:\"add\"\nid,dis,point,his,scalebench,kind,tz,siteRef\n");
            let _ = write!(g, "@{},\"scalebench lag canary\",M,M,M,\"Number\",", self.canary_id());
            zinc::write_str(&mut g, &tz);
            let _ = writeln!(g, ",@{}.canarySite", self.params.id_prefix);
            out.push(Msg { address: addr, payload: g.into_bytes() });
            self.canary_sent = true;
        }
        out
    }

    /// Ids of the site, equip and point records `tags` need, each once.
    pub fn record_ids(&self, tags: &[Tag]) -> Vec<String> {
        let sites: BTreeSet<u32> = tags.iter().map(|t| t.site).collect();
        let equips: BTreeSet<(u32, u32)> = tags.iter().map(|t| (t.site, t.equip)).collect();
        let mut ids: Vec<String> = sites.into_iter().map(|s| self.site_id(s)).collect();
        ids.extend(equips.into_iter().map(|(s, e)| self.equip_id(s, e)));
        ids.extend(tags.iter().map(|t| self.point_id(t)));
        ids
    }

    /// [`Wire::topology`] leaving out the records the server already holds
    /// (`existing`, by id): a prefill made them, or a prefill is run again.
    /// Every tag is still registered, so its readings can be encoded.
    pub fn topology_except(&mut self, tags: &[Tag], existing: &BTreeSet<String>) -> Vec<Msg> {
        if existing.is_empty() {
            return self.topology(tags);
        }
        for t in tags {
            self.register(t);
            if existing.contains(&self.site_id(t.site)) {
                self.sites.insert(t.site);
            }
            if existing.contains(&self.equip_id(t.site, t.equip)) {
                self.equips.insert((t.site, t.equip));
            }
        }
        let missing: Vec<Tag> = tags.iter().filter(|t| !existing.contains(&self.point_id(t))).cloned().collect();
        if missing.is_empty() && self.canary_sent {
            return Vec::new();
        }
        self.topology(&missing)
    }

    /// `commit` "add" grids of the canary's own site and point: what the
    /// first `topology` call adds, for committing before any topology.
    pub fn canary_records(&self) -> Vec<String> {
        let tz = &self.tz.name;
        let mut site = format!(
            "ver:\"3.0\" commit:\"add\"\nid,dis,site,scalebench,tz\n@{}.canarySite,\"scalebench canary site\",M,M,",
            self.params.id_prefix
        );
        zinc::write_str(&mut site, tz);
        site.push('\n');
        let mut point = String::from("ver:\"3.0\" commit:\"add\"\nid,dis,point,his,scalebench,kind,tz,siteRef\n");
        let _ = write!(point, "@{},\"scalebench lag canary\",M,M,M,\"Number\",", self.canary_id());
        zinc::write_str(&mut point, tz);
        let _ = writeln!(point, ",@{}.canarySite", self.params.id_prefix);
        vec![site, point]
    }

    /// hisWrite grids of at most `his-write-batch` readings each. Readings of
    /// one point only: the plain form (grid meta `id`, columns `ts`,`val`).
    /// Several points: the batch form (column `ts`, then `v0`, `v1`, ... each
    /// with an `id` column meta, a row per distinct timestamp).
    pub fn encode_into(
        &mut self,
        points: &[u32],
        values: &[f64],
        ts_ms: &[i64],
        out: &mut Encoded,
    ) -> Result<(), String> {
        if points.len() != values.len() || points.len() != ts_ms.len() {
            return Err(format!(
                "haxall encode: batch lists differ in length ({}, {}, {})",
                points.len(),
                values.len(),
                ts_ms.len()
            ));
        }
        let max = self.params.his_write_batch as usize;
        let mut start = 0;
        while start < points.len() {
            // Grow the message until it is full or would hold one (point, ts) twice.
            let mut seen: BTreeSet<(u32, i64)> = BTreeSet::new();
            let mut end = start;
            while end < points.len() && end - start < max && seen.insert((points[end], ts_ms[end])) {
                end += 1;
            }
            let idx: Vec<usize> = (start..end).collect();
            for &i in &idx {
                if self.points.get(points[i] as usize).is_none_or(|p| p.is_none()) {
                    return Err(format!(
                        "haxall encode: reading for point {} that no `addresses` call named",
                        points[i]
                    ));
                }
            }
            let body = self.his_write_grid(&idx, points, values, ts_ms);
            out.payload.extend_from_slice(body.as_bytes());
            out.ends.push(out.payload.len() as u32);
            out.address_of.push(points[start]);
            out.carries.push((end - start) as u32);
            start = end;
        }
        Ok(())
    }

    fn point(&self, p: u32) -> &Point {
        self.points[p as usize].as_ref().expect("checked")
    }

    fn his_write_grid(&self, idx: &[usize], points: &[u32], values: &[f64], ts_ms: &[i64]) -> String {
        let mut cols: Vec<u32> = Vec::new();
        let mut col_of: BTreeMap<u32, usize> = BTreeMap::new();
        for &i in idx {
            col_of.entry(points[i]).or_insert_with(|| {
                cols.push(points[i]);
                cols.len() - 1
            });
        }
        let mut order: Vec<usize> = idx.to_vec();
        order.sort_by_key(|&i| ts_ms[i]);
        let mut g =
            String::with_capacity(64 + idx.len() * 48 + if cols.len() > 1 { idx.len() * cols.len() } else { 0 });
        if cols.len() == 1 {
            let p = self.point(cols[0]);
            let _ = write!(g, "ver:\"3.0\" id:@{}\nts,val\n", p.id);
            for &i in &order {
                zinc::write_datetime(&mut g, ts_ms[i], &self.tz);
                g.push(',');
                zinc::write_number(&mut g, values[i], p.unit.as_deref());
                g.push('\n');
            }
            return g;
        }
        g.push_str("ver:\"3.0\"\nts");
        for (c, p) in cols.iter().enumerate() {
            let _ = write!(g, ",v{c} id:@{}", self.point(*p).id);
        }
        g.push('\n');
        let mut k = 0;
        while k < order.len() {
            let ts = ts_ms[order[k]];
            let mut row: Vec<Option<usize>> = vec![None; cols.len()];
            while k < order.len() && ts_ms[order[k]] == ts {
                row[col_of[&points[order[k]]]] = Some(order[k]);
                k += 1;
            }
            zinc::write_datetime(&mut g, ts, &self.tz);
            for (c, cell) in row.iter().enumerate() {
                g.push(',');
                if let Some(i) = cell {
                    zinc::write_number(&mut g, values[*i], self.point(cols[c]).unit.as_deref());
                }
            }
            g.push('\n');
        }
        g
    }

    /// The canary: a plain hisWrite of `seq` to the canary point.
    pub fn canary(&mut self, seq: u64, ts_ms: i64) -> Msg {
        if self.first_canary_ms.is_none_or(|f| ts_ms < f) {
            self.first_canary_ms = Some(ts_ms);
        }
        let mut g = format!("ver:\"3.0\" id:@{}\nts,val\n", self.canary_id());
        zinc::write_datetime(&mut g, ts_ms, &self.tz);
        let _ = writeln!(g, ",{seq}");
        Msg { address: self.params.address("hisWrite"), payload: g.into_bytes() }
    }

    /// Zinc `range` of the half-open window: `{dateTime},{dateTime}` (the
    /// adapter still counts only readings inside the window, so a server that
    /// takes the end inclusively does not change the count).
    pub fn range(&self, start_ms: i64, end_ms: i64) -> String {
        let mut r = String::new();
        zinc::write_datetime(&mut r, start_ms, &self.tz);
        r.push(',');
        zinc::write_datetime(&mut r, end_ms, &self.tz);
        r
    }

    /// The range from `start_ms` to now: a single `{dateTime}`.
    pub fn range_from(&self, start_ms: i64) -> String {
        let mut r = String::new();
        zinc::write_datetime(&mut r, start_ms, &self.tz);
        r
    }
}

/// A hisRead request. One id: the plain form (one row: `id`, `range`).
/// Several: the batch form (grid meta `range`, one row per `id`).
pub fn his_read_request(ids: &[String], range: &str) -> String {
    let mut g = String::new();
    if ids.len() == 1 {
        g.push_str("ver:\"3.0\"\nid,range\n");
        let _ = write!(g, "@{},", ids[0]);
        zinc::write_str(&mut g, range);
        g.push('\n');
    } else {
        g.push_str("ver:\"3.0\" range:");
        zinc::write_str(&mut g, range);
        g.push_str("\nid\n");
        for id in ids {
            let _ = writeln!(g, "@{id}");
        }
    }
    g
}

/// Readings in a hisRead answer asked for as Haystack JSON
/// (`Accept: application/json`): for each row, the `ts` and every other
/// non-null cell (`val`, or `v0`, `v1`, ... in the batch form). Calls
/// `each(ts_ms, value)` per reading. An error grid is an Err with its `dis`.
pub fn his_read_answer(body: &[u8], mut each: impl FnMut(i64, Option<f64>)) -> Result<usize, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("hisRead answer is not JSON: {e}"))?;
    let meta = &v["meta"];
    if meta.get("err").is_some() {
        return Err(format!("hisRead: server error: {}", meta["dis"].as_str().unwrap_or("(no dis)")));
    }
    let rows = v["rows"].as_array().ok_or("hisRead answer has no rows")?;
    let mut n = 0;
    for row in rows {
        let obj = row.as_object().ok_or("hisRead row is not an object")?;
        let ts = obj.get("ts").ok_or("hisRead row has no ts")?;
        let ts_str =
            ts.get("val").and_then(|x| x.as_str()).or_else(|| ts.as_str()).ok_or("hisRead ts is not a dateTime")?;
        // Haystack JSON v3 writes "t:2024-...Z UTC".
        let ts_ms = zinc::parse_datetime(ts_str.trim_start_matches("t:"))
            .ok_or_else(|| format!("hisRead ts {ts_str:?} is not a dateTime"))?;
        for (k, cell) in obj {
            if k == "ts" || cell.is_null() {
                continue;
            }
            let num = cell.get("val").and_then(|x| x.as_f64()).or_else(|| cell.as_f64());
            each(ts_ms, num);
            n += 1;
        }
    }
    Ok(n)
}

/// Is the answer to a hisWrite or commit an acknowledgement? A Haystack
/// server answers an op error with HTTP 200 and an error grid: grid meta
/// `err` (a marker) and `dis`. Zinc (`ver:"3.0" err dis:"..."`) or Haystack
/// JSON (`{"meta":{"err":...}}`). Err carries the server's `dis`.
pub fn ingest_answer(body: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(body);
    let t = text.trim_start();
    if t.starts_with('{') {
        let v: serde_json::Value =
            serde_json::from_str(t).map_err(|e| format!("answer is neither a Zinc grid nor Haystack JSON: {e}"))?;
        if v["meta"].get("err").is_some() {
            return Err(format!("error grid: {}", v["meta"]["dis"].as_str().unwrap_or("(no dis)")));
        }
        return Ok(());
    }
    let meta = t.lines().next().unwrap_or("");
    if !meta.starts_with("ver:") {
        return Err(format!("answer is not a Zinc grid: {:?}", meta.chars().take(80).collect::<String>()));
    }
    let names = meta_names(meta);
    if names.iter().any(|(n, _)| n == "err") {
        let dis = names.into_iter().find(|(n, _)| n == "dis").and_then(|(_, v)| v).unwrap_or_else(|| "(no dis)".into());
        return Err(format!("error grid: {dis}"));
    }
    Ok(())
}

/// The tag names of a Zinc grid's meta line, with their value when it is a
/// string; names inside strings are not names.
fn meta_names(line: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '"' {
            zinc::read_str(&mut chars);
            continue;
        }
        if !(c.is_ascii_lowercase()) {
            continue;
        }
        let mut name = String::from(c);
        while let Some(&d) = chars.peek() {
            if d.is_ascii_alphanumeric() || d == '_' {
                name.push(d);
                chars.next();
            } else {
                break;
            }
        }
        let mut val = None;
        if chars.peek() == Some(&':') {
            chars.next();
            if chars.peek() == Some(&'"') {
                chars.next();
                val = Some(zinc::read_str(&mut chars));
            } else {
                while chars.peek().is_some_and(|d| !d.is_whitespace()) {
                    chars.next();
                }
            }
        }
        out.push((name, val));
    }
    out
}

#[cfg(test)]
pub mod tests {
    use super::*;

    pub fn tag(index: u32, site: u32, equip: u32, label: &str, unit: &str) -> Tag {
        Tag {
            index,
            kind: "temperature".into(),
            unit: unit.into(),
            site,
            equip,
            label: label.into(),
            markers: vec!["point".into(), "sensor".into(), "temp".into(), "enum".into()],
        }
    }

    fn wire(batch: u32) -> Wire {
        Wire::new(Params { his_write_batch: batch, ..Params::default() })
    }

    #[test]
    fn topology_commits_sites_equips_points_and_canary() {
        let mut w = wire(10);
        let tags = vec![tag(0, 0, 0, "temp-1", "°C"), tag(1, 0, 1, "count 2", "count")];
        let m = w.topology(&tags);
        assert_eq!(m.len(), 4);
        assert!(m.iter().all(|m| m.address == "api /api/commit"));
        let s = |i: usize| String::from_utf8(m[i].payload.clone()).unwrap();
        assert_eq!(s(0), "ver:\"3.0\" commit:\"add\"\nid,dis,site,scalebench,tz\n@sb.s0,\"scalebench site 0\",M,M,\"UTC\"\n@sb.canarySite,\"scalebench canary site\",M,M,\"UTC\"\n");
        assert_eq!(s(1), "ver:\"3.0\" commit:\"add\"\nid,dis,equip,scalebench,siteRef\n@sb.s0.e0,\"scalebench equip 0\",M,M,@sb.s0\n@sb.s0.e1,\"scalebench equip 1\",M,M,@sb.s0\n");
        assert_eq!(
            s(2),
            "ver:\"3.0\" commit:\"add\"\nid,dis,point,his,scalebench,kind,unit,tz,equipRef,siteRef,sbIndex,sensor,temp\n\
             @sb.s0.e0.temp-1,\"s0 e0 temp-1\",M,M,M,\"Number\",\"°C\",\"UTC\",@sb.s0.e0,@sb.s0,0,M,M\n\
             @sb.s0.e1.count_2,\"s0 e1 count 2\",M,M,M,\"Number\",,\"UTC\",@sb.s0.e1,@sb.s0,1,M,M\n"
        );
        assert!(s(3).contains("@sb.canary,\"scalebench lag canary\",M,M,M,\"Number\",\"UTC\",@sb.canarySite"));
        // A second step adds only what is new.
        let m = w.topology(&[tag(2, 0, 1, "x", "")]);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn topology_leaves_out_records_the_server_holds() {
        let mut w = wire(10);
        w.canary_in_topology = false;
        let tags = vec![tag(0, 0, 0, "a", ""), tag(1, 0, 0, "b", ""), tag(2, 1, 0, "c", "")];
        let ids = w.record_ids(&tags);
        assert_eq!(ids, ["sb.s0", "sb.s1", "sb.s0.e0", "sb.s1.e0", "sb.s0.e0.a", "sb.s0.e0.b", "sb.s1.e0.c"]);
        // Everything there (a prefill made it): nothing to commit, all registered.
        let all: BTreeSet<String> = ids.iter().cloned().collect();
        assert!(w.topology_except(&tags, &all).is_empty());
        assert_eq!(w.point_ids().len(), 3);
        // Site 0 and its equip and point `a` there: only `b`, then site 1, its equip and `c`.
        let mut w = wire(10);
        w.canary_in_topology = false;
        let some: BTreeSet<String> = ["sb.s0", "sb.s0.e0", "sb.s0.e0.a"].iter().map(|s| s.to_string()).collect();
        let m = w.topology_except(&tags, &some);
        let text: Vec<String> = m.iter().map(|m| String::from_utf8(m.payload.clone()).unwrap()).collect();
        assert_eq!(m.len(), 3, "{text:?}");
        assert!(text[0].contains("@sb.s1,") && !text[0].contains("@sb.s0,"));
        assert!(text[1].contains("@sb.s1.e0,") && !text[1].contains("@sb.s0.e0,"));
        assert!(
            text[2].contains("@sb.s0.e0.b,") && text[2].contains("@sb.s1.e0.c,") && !text[2].contains("@sb.s0.e0.a,")
        );
        assert_eq!(w.point_ids().len(), 3);
    }

    #[test]
    fn encode_single_and_batch_forms() {
        let mut w = wire(3);
        w.addresses(&[tag(0, 0, 0, "a", "°C"), tag(1, 0, 0, "b", "count")]);
        let mut e = Encoded::default();
        let t0 = 1_714_564_800_000;
        w.encode_into(
            &[0, 1, 0, 0, 0],
            &[1.5, 2.0, 3.0, 4.0, f64::NAN],
            &[t0, t0, t0 + 250, t0 + 1000, t0 + 2000],
            &mut e,
        )
        .unwrap();
        assert_eq!(e.carries, vec![3, 2]);
        assert_eq!(e.address_of, vec![0, 0]);
        let a = std::str::from_utf8(&e.payload[..e.ends[0] as usize]).unwrap();
        assert_eq!(
            a,
            "ver:\"3.0\"\nts,v0 id:@sb.s0.e0.a,v1 id:@sb.s0.e0.b\n\
             2024-05-01T12:00:00Z UTC,1.5°C,2\n2024-05-01T12:00:00.250Z UTC,3°C,\n"
        );
        let b = std::str::from_utf8(&e.payload[e.ends[0] as usize..]).unwrap();
        assert_eq!(
            b,
            "ver:\"3.0\" id:@sb.s0.e0.a\nts,val\n2024-05-01T12:00:01Z UTC,4°C\n2024-05-01T12:00:02Z UTC,NaN\n"
        );
    }

    #[test]
    fn encode_splits_on_repeated_point_and_ts() {
        let mut w = wire(100);
        w.addresses(&[tag(0, 0, 0, "a", "")]);
        let mut e = Encoded::default();
        w.encode_into(&[0, 0, 0], &[1.0, 2.0, 3.0], &[5, 5, 6], &mut e).unwrap();
        assert_eq!(e.carries, vec![1, 2]);
        assert!(w.encode_into(&[7], &[1.0], &[1], &mut e).unwrap_err().contains("point 7"));
    }

    #[test]
    fn canary_and_reads() {
        let mut w = wire(10);
        let m = w.canary(42, 1_714_564_800_000);
        assert_eq!(m.address, "api /api/hisWrite");
        assert_eq!(
            String::from_utf8(m.payload).unwrap(),
            "ver:\"3.0\" id:@sb.canary\nts,val\n2024-05-01T12:00:00Z UTC,42\n"
        );
        assert_eq!(w.range(0, 1000), "1970-01-01T00:00:00Z UTC,1970-01-01T00:00:01Z UTC");
        assert_eq!(his_read_request(&["a".into()], "today"), "ver:\"3.0\"\nid,range\n@a,\"today\"\n");
        assert_eq!(his_read_request(&["a".into(), "b".into()], "today"), "ver:\"3.0\" range:\"today\"\nid\n@a\n@b\n");
    }

    #[test]
    fn reads_json_answers() {
        let body = br#"{"_kind":"grid","meta":{"ver":"3.0"},"cols":[{"name":"ts"},{"name":"v0"},{"name":"v1"}],
          "rows":[{"ts":{"_kind":"dateTime","val":"2024-05-01T12:00:00Z","tz":"UTC"},"v0":{"_kind":"number","val":1.5}},
                  {"ts":{"_kind":"dateTime","val":"2024-05-01T12:00:00.5Z","tz":"UTC"},"v0":{"_kind":"number","val":2},"v1":{"_kind":"number","val":3}}]}"#;
        let mut got = Vec::new();
        assert_eq!(his_read_answer(body, |t, v| got.push((t, v))).unwrap(), 3);
        assert_eq!(got[2], (1_714_564_800_500, Some(3.0)));
        let err = br#"{"_kind":"grid","meta":{"ver":"3.0","err":{"_kind":"marker"},"dis":"nope"},"cols":[{"name":"empty"}],"rows":[]}"#;
        assert!(his_read_answer(err, |_, _| ()).unwrap_err().contains("nope"));
    }

    #[test]
    fn ingest_answers_error_grids_are_not_acks() {
        assert!(ingest_answer(b"ver:\"3.0\"\nempty\n").is_ok());
        let e =
            ingest_answer(b"ver:\"3.0\" err dis:\"point \\\"x\\\" unknown\" errTrace:\"...\"\nempty\n").unwrap_err();
        assert!(e.contains("point \"x\" unknown"), "{e}");
        // "err" inside a string is not the marker.
        assert!(ingest_answer(b"ver:\"3.0\" dis:\"no err here\"\nempty\n").is_ok());
        assert!(ingest_answer(
            br#"{"_kind":"grid","meta":{"ver":"3.0","err":{"_kind":"marker"},"dis":"nope"},"cols":[],"rows":[]}"#
        )
        .unwrap_err()
        .contains("nope"));
        assert!(ingest_answer(br#"{"_kind":"grid","meta":{"ver":"3.0"},"cols":[],"rows":[]}"#).is_ok());
        assert!(ingest_answer(b"<html>oops</html>").is_err());
    }
}
