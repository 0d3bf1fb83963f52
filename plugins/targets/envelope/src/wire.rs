//! Reading envelopes, tags messages and the canary, for any [`Addressing`].
//! Pure: an adapter's component glue only converts WIT types.
//!
//! Tags are written in Haystack JSON (v3) style: markers are `"m:"`, refs are
//! `"r:<id>"`, other strings plain (`"s:"`-prefixed if they look typed).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::iso::SecondCache;

/// The point id the canary's envelope carries (the historian's `point` column).
pub const CANARY_POINT: &str = "canary/lag";

/// Metadata of one point: the fields of WIT `tag-info`.
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

impl Tag {
    /// `s<site>/e<equip>/<label>`: the envelope's `point` and the stored
    /// `point` (the label as given, whatever an address makes of it).
    pub fn point_id(&self) -> String {
        format!("s{}/e{}/{}", self.site, self.equip, self.label)
    }
    pub fn equip_id(&self) -> String {
        format!("s{}/e{}", self.site, self.equip)
    }
}

/// One message: address (topic, subject, ...) and payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Msg {
    pub address: String,
    pub payload: Vec<u8>,
}

/// WIT `encoded-batch`, natively.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Encoded {
    pub address_of: Vec<u32>,
    pub ends: Vec<u32>,
    pub payload: Vec<u8>,
    pub carries: Vec<u32>,
}

/// Why a batch could not be encoded.
#[derive(Debug, Clone, PartialEq)]
pub enum EncodeError {
    /// A reading names a tag index that no `addresses`/`topology` call registered.
    UnknownPoint(u32),
    /// points, values and ts-ms of the batch differ in length.
    Lengths(usize, usize, usize),
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EncodeError::UnknownPoint(i) => write!(
                f,
                "encode: tag index {i} was never passed to `addresses` or `topology`; the host must register points before sending their readings"
            ),
            EncodeError::Lengths(p, v, t) => {
                write!(f, "encode: readings lists differ in length (points {p}, values {v}, ts-ms {t})")
            }
        }
    }
}

/// Where each message goes: the one thing that differs between the systems
/// that speak this envelope (MQTT topics, NATS subjects, ...). Adapters
/// implement it for their params.
pub trait Addressing {
    /// Address of a point's readings (its entry in the `addresses` table).
    fn reading_address(&self, t: &Tag) -> String;
    /// Address of the tags message of equip `equip` of site `site`.
    fn equip_tags_address(&self, site: u32, equip: u32) -> String;
    /// Address of a point's tags message.
    fn point_tags_address(&self, t: &Tag) -> String;
    /// Address of the lag canary.
    fn canary_address(&self) -> String;
}

fn hs_str(s: &str) -> Value {
    // A Haystack JSON v3 string that would read as typed ("m:", "n:12") gets "s:".
    if s.as_bytes().get(1) == Some(&b':') {
        Value::String(format!("s:{s}"))
    } else {
        Value::String(s.to_string())
    }
}
fn marker() -> Value {
    Value::String("m:".into())
}
fn href(id: &str) -> Value {
    Value::String(format!("r:{id}"))
}

/// Append a reading's value as a JSON number: integers (|v| < 1e15) through
/// itoa, others as the shortest form that round-trips (ryu). JSON has no NaN
/// or infinity: those become `null`, which neither the historian nor a
/// counting host takes for a reading, so a model that emits them shows up as
/// loss rather than as silently changed data.
#[inline]
pub fn write_value(out: &mut Vec<u8>, v: f64) {
    if !v.is_finite() {
        out.extend_from_slice(b"null");
    } else if v.abs() < 1e15 && v == (v as i64) as f64 && !(v == 0.0 && v.is_sign_negative()) {
        out.extend_from_slice(itoa::Buffer::new().format(v as i64).as_bytes());
    } else {
        out.extend_from_slice(ryu::Buffer::new().format_finite(v).as_bytes());
    }
}

/// What the adapter knows of the run: params and every point registered so far.
pub struct Wire<A> {
    /// The adapter's params; through [`Addressing`] they say where messages go.
    pub params: A,
    /// Envelope heads `{"point":"s1/e2/temp1","value":` of every known point,
    /// back to back; `head_at[tag index]` is (start, len), len 0 = unknown.
    heads: Vec<u8>,
    head_at: Vec<(u32, u32)>,
    /// Tag indexes of each equip (site, equip) already described by
    /// `topology` (ids are read back from `heads`: 4 bytes a point, not a string).
    equip_points: BTreeMap<(u32, u32), Vec<u32>>,
    /// Tag indexes whose point already appears in its equip's `points`.
    listed: Vec<bool>,
    second: SecondCache,
}

const TS_FIELD: &[u8] = b",\"ts\":\"";
const TAIL: &[u8] = b"\"}";

impl<A: Addressing> Wire<A> {
    pub fn new(params: A) -> Wire<A> {
        Wire {
            params,
            heads: Vec::new(),
            head_at: Vec::new(),
            equip_points: BTreeMap::new(),
            listed: Vec::new(),
            second: SecondCache::default(),
        }
    }

    /// Remember what encoding a reading of `t` needs.
    pub fn register(&mut self, t: &Tag) {
        let i = t.index as usize;
        if self.head_at.len() <= i {
            self.head_at.resize(i + 1, (0, 0));
        }
        let mut head = Vec::with_capacity(64);
        head.extend_from_slice(b"{\"point\":");
        serde_json::to_writer(&mut head, &t.point_id()).expect("string to JSON");
        head.extend_from_slice(b",\"value\":");
        let (s, l) = self.head_at[i];
        if l as usize == head.len() && self.heads[s as usize..(s + l) as usize] == head[..] {
            return; // already registered with the same identity
        }
        let start = self.heads.len();
        self.heads.extend_from_slice(&head);
        self.head_at[i] = (start as u32, head.len() as u32);
    }

    /// Point ids of every registered point (what storage keys rows by), in
    /// tag order: what this run writes, so counts can be limited to it.
    pub fn point_ids(&self) -> Vec<String> {
        (0..self.head_at.len()).filter_map(|i| self.point_id_of(i)).collect()
    }

    /// The point id of registered tag `i`, read back from its envelope head.
    fn point_id_of(&self, i: usize) -> Option<String> {
        const HEAD: usize = b"{\"point\":".len();
        const VALUE: usize = b",\"value\":".len();
        let (s, l) = *self.head_at.get(i)?;
        let (s, l) = (s as usize, l as usize);
        if l <= HEAD + VALUE {
            return None;
        }
        serde_json::from_slice::<String>(&self.heads[s + HEAD..s + l - VALUE]).ok()
    }

    /// The address table for `tags`, registering them.
    pub fn addresses(&mut self, tags: &[Tag]) -> Vec<String> {
        tags.iter()
            .map(|t| {
                self.register(t);
                self.params.reading_address(t)
            })
            .collect()
    }

    /// Tags messages for `tags` (the points new in this step): for each equip
    /// that gained points, its equip tags message (all its points so far),
    /// then the tags message of each of its new points.
    pub fn topology(&mut self, tags: &[Tag]) -> Vec<Msg> {
        let mut order: Vec<(u32, u32)> = Vec::new();
        let mut groups: BTreeMap<(u32, u32), Vec<&Tag>> = BTreeMap::new();
        for t in tags {
            self.register(t);
            groups
                .entry((t.site, t.equip))
                .or_insert_with(|| {
                    order.push((t.site, t.equip));
                    Vec::new()
                })
                .push(t);
        }
        let mut out = Vec::with_capacity(tags.len() + order.len());
        for key in order {
            let group = &groups[&key];
            let first = group[0];
            let is_new = !self.equip_points.contains_key(&key);
            let ids = self.equip_points.entry(key).or_default();
            let mut grew = false;
            for t in group {
                let i = t.index as usize;
                if self.listed.len() <= i {
                    self.listed.resize(i + 1, false);
                }
                if !self.listed[i] {
                    self.listed[i] = true;
                    ids.push(t.index);
                    grew = true;
                }
            }
            if is_new || grew {
                let ids: Vec<String> =
                    self.equip_points[&key].iter().filter_map(|i| self.point_id_of(*i as usize)).collect();
                let mut tags = Map::new();
                tags.insert("id".into(), href(&first.equip_id()));
                tags.insert("dis".into(), hs_str(&format!("Site {} Equip {}", first.site, first.equip)));
                tags.insert("equip".into(), marker());
                tags.insert("siteRef".into(), href(&format!("s{}", first.site)));
                let tags = Value::Object(tags).to_string();
                let payload = serde_json::json!({ "tags": tags, "points": ids });
                out.push(Msg {
                    address: self.params.equip_tags_address(first.site, first.equip),
                    payload: payload.to_string().into_bytes(),
                });
            }
            for t in group {
                out.push(Msg { address: self.params.point_tags_address(t), payload: point_tags(t).into_bytes() });
            }
        }
        out
    }

    /// Encode a batch into `out` (cleared first): one message per reading,
    /// `address_of[i]` = the reading's tag index, `carries[i]` = 1.
    pub fn encode_into(
        &mut self,
        points: &[u32],
        values: &[f64],
        ts_ms: &[i64],
        out: &mut Encoded,
    ) -> Result<(), EncodeError> {
        let n = points.len();
        if values.len() != n || ts_ms.len() != n {
            return Err(EncodeError::Lengths(n, values.len(), ts_ms.len()));
        }
        out.address_of.clear();
        out.address_of.extend_from_slice(points);
        out.ends.clear();
        out.ends.reserve(n);
        out.carries.clear();
        out.carries.resize(n, 1);
        out.payload.clear();
        out.payload.reserve(n * 80);
        let heads = &self.heads;
        for i in 0..n {
            let p = points[i];
            let (s, l) = match self.head_at.get(p as usize) {
                Some(&(s, l)) if l != 0 => (s as usize, l as usize),
                _ => return Err(EncodeError::UnknownPoint(p)),
            };
            let buf = &mut out.payload;
            buf.extend_from_slice(&heads[s..s + l]);
            write_value(buf, values[i]);
            buf.extend_from_slice(TS_FIELD);
            self.second.write(buf, ts_ms[i]);
            buf.extend_from_slice(TAIL);
            out.ends.push(buf.len() as u32);
        }
        Ok(())
    }

    pub fn encode(&mut self, points: &[u32], values: &[f64], ts_ms: &[i64]) -> Result<Encoded, EncodeError> {
        let mut out = Encoded::default();
        self.encode_into(points, values, ts_ms, &mut out)?;
        Ok(out)
    }

    /// The lag canary: `{"point":"canary/lag","value":<seq>,"ts":"<iso>"}`.
    pub fn canary(&mut self, seq: u64, ts_ms: i64) -> Msg {
        let mut p = Vec::with_capacity(80);
        p.extend_from_slice(b"{\"point\":\"canary/lag\",\"value\":");
        p.extend_from_slice(itoa::Buffer::new().format(seq).as_bytes());
        p.extend_from_slice(TS_FIELD);
        SecondCache::default().write(&mut p, ts_ms);
        p.extend_from_slice(TAIL);
        Msg { address: self.params.canary_address(), payload: p }
    }
}

/// A point's tags: id, dis, point marker, its markers, kind, unit (omitted
/// when unitless), equipRef, siteRef.
pub fn point_tags(t: &Tag) -> String {
    let mut m = Map::new();
    for mk in &t.markers {
        if !mk.is_empty() {
            m.insert(mk.clone(), marker());
        }
    }
    m.insert("point".into(), marker());
    m.insert("id".into(), href(&t.point_id()));
    m.insert("dis".into(), hs_str(&format!("Site {} Equip {} {}", t.site, t.equip, t.label)));
    m.insert("kind".into(), hs_str(&t.kind));
    if !t.unit.is_empty() {
        m.insert("unit".into(), hs_str(&t.unit));
    }
    m.insert("equipRef".into(), href(&t.equip_id()));
    m.insert("siteRef".into(), href(&format!("s{}", t.site)));
    Value::Object(m).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{json, plant, tag};
    use crate::iso::iso;

    /// Addresses as `<prefix>/<what>`, enough to see which message went where.
    struct Slashes;

    impl Addressing for Slashes {
        fn reading_address(&self, t: &Tag) -> String {
            format!("p/{}", t.point_id())
        }
        fn equip_tags_address(&self, site: u32, equip: u32) -> String {
            format!("p/s{site}/e{equip}/equip/tags")
        }
        fn point_tags_address(&self, t: &Tag) -> String {
            format!("p/{}/tags", t.point_id())
        }
        fn canary_address(&self) -> String {
            "p/canary/lag".into()
        }
    }

    fn wire() -> Wire<Slashes> {
        Wire::new(Slashes)
    }

    #[test]
    fn addresses_come_from_the_addressing() {
        let mut w = wire();
        let a = w.addresses(&[tag(0, 1, 2, "temp1"), tag(1, 1, 2, "flow1")]);
        assert_eq!(a, ["p/s1/e2/temp1", "p/s1/e2/flow1"]);
        assert_eq!(w.canary(0, 0).address, "p/canary/lag");
        let msgs = w.topology(&[tag(2, 1, 3, "temp1")]);
        let addrs: Vec<&str> = msgs.iter().map(|m| m.address.as_str()).collect();
        assert_eq!(addrs, ["p/s1/e3/equip/tags", "p/s1/e3/temp1/tags"]);
    }

    #[test]
    fn encode_envelopes() {
        let mut w = wire();
        w.addresses(&[tag(0, 1, 2, "temp1"), tag(5, 1, 2, "count1")]);
        let vals = [21.5, 42.0, -0.0, 1e-7, f64::NAN, 1e300, -3.0, 0.1 + 0.2];
        let pts = [0, 5, 0, 5, 0, 5, 0, 5];
        let ts: Vec<i64> = (0..8).map(|i| 1_796_047_200_123 + i * 400).collect();
        let e = w.encode(&pts, &vals, &ts).unwrap();
        assert_eq!(e.address_of, pts);
        assert_eq!(e.carries, [1; 8]);
        assert_eq!(e.ends.len(), 8);
        assert_eq!(*e.ends.last().unwrap() as usize, e.payload.len());
        let first = std::str::from_utf8(&e.payload[..e.ends[0] as usize]).unwrap();
        assert_eq!(first, r#"{"point":"s1/e2/temp1","value":21.5,"ts":"2026-11-30T14:00:00.123Z"}"#);
        let mut start = 0;
        for i in 0..8 {
            let msg = &e.payload[start..e.ends[i] as usize];
            start = e.ends[i] as usize;
            let v = json(msg);
            let o = v.as_object().unwrap();
            assert_eq!(o.len(), 3);
            assert_eq!(o["point"], if pts[i] == 0 { "s1/e2/temp1" } else { "s1/e2/count1" });
            assert_eq!(o["ts"], iso(ts[i]).as_str());
            if vals[i].is_nan() {
                assert!(o["value"].is_null());
            } else {
                assert_eq!(o["value"].as_f64().unwrap().to_bits(), vals[i].to_bits(), "{i}: round trip");
            }
        }
        let second = std::str::from_utf8(&e.payload[e.ends[0] as usize..e.ends[1] as usize]).unwrap();
        assert_eq!(second, r#"{"point":"s1/e2/count1","value":42,"ts":"2026-11-30T14:00:00.523Z"}"#);
    }

    #[test]
    fn encode_refuses_unknown_points_and_bad_lengths() {
        let mut w = wire();
        w.addresses(&[tag(0, 0, 0, "a")]);
        assert_eq!(w.encode(&[0, 3], &[1.0, 2.0], &[0, 0]), Err(EncodeError::UnknownPoint(3)));
        assert_eq!(w.encode(&[0], &[1.0, 2.0], &[0]), Err(EncodeError::Lengths(1, 2, 1)));
        assert!(EncodeError::UnknownPoint(3).to_string().contains("tag index 3"));
        assert_eq!(w.encode(&[], &[], &[]).unwrap(), Encoded::default());
    }

    #[test]
    fn labels_are_json_escaped() {
        let mut w = wire();
        w.addresses(&[tag(0, 0, 0, "we\"ird\\")]);
        let e = w.encode(&[0], &[1.0], &[0]).unwrap();
        assert_eq!(json(&e.payload)["point"], "s0/e0/we\"ird\\");
    }

    #[test]
    fn reregistering_a_point_keeps_or_replaces_its_head() {
        let mut w = wire();
        w.addresses(&[tag(0, 0, 0, "a")]);
        w.addresses(&[tag(0, 0, 0, "a")]);
        assert_eq!(json(&w.encode(&[0], &[1.0], &[0]).unwrap().payload)["point"], "s0/e0/a");
        w.addresses(&[tag(0, 0, 0, "b")]);
        assert_eq!(json(&w.encode(&[0], &[1.0], &[0]).unwrap().payload)["point"], "s0/e0/b");
    }

    #[test]
    fn canary() {
        let mut w = wire();
        let m = w.canary(17, 1_796_047_200_123);
        assert_eq!(m.address, "p/canary/lag");
        assert_eq!(
            std::str::from_utf8(&m.payload).unwrap(),
            r#"{"point":"canary/lag","value":17,"ts":"2026-11-30T14:00:00.123Z"}"#
        );
        let v = json(&w.canary(u64::MAX, -5).payload);
        assert_eq!(v["point"], CANARY_POINT);
        assert_eq!(v["value"].as_u64(), Some(u64::MAX));
        assert_eq!(v["ts"], "1969-12-31T23:59:59.995Z");
    }

    #[test]
    fn topology_equips_before_points_once_each() {
        let mut w = wire();
        let tags = plant(25); // equips 0, 1 complete; equip 2 has 5 of its points
        let msgs = w.topology(&tags);
        assert_eq!(msgs.len(), 3 + 25);
        let mut seen_equips = std::collections::BTreeSet::new();
        for m in &msgs {
            let v = json(&m.payload);
            if m.address.ends_with("/equip/tags") {
                let o = v.as_object().unwrap();
                assert_eq!(o.len(), 2);
                let inner = json(o["tags"].as_str().unwrap().as_bytes());
                assert_eq!(inner["equip"], "m:");
                let id = inner["id"].as_str().unwrap().strip_prefix("r:").unwrap().to_string();
                assert_eq!(m.address, format!("p/{id}/equip/tags"));
                assert_eq!(inner["siteRef"], "r:s0");
                assert!(inner["dis"].is_string());
                for p in o["points"].as_array().unwrap() {
                    assert!(p.as_str().unwrap().starts_with(&format!("{id}/")));
                }
                seen_equips.insert(id);
            } else {
                let id = v["id"].as_str().unwrap().strip_prefix("r:").unwrap();
                assert_eq!(m.address, format!("p/{id}/tags"));
                let equip = v["equipRef"].as_str().unwrap().strip_prefix("r:").unwrap();
                assert!(seen_equips.contains(equip), "point {id} before its equip");
                for k in ["point", "sensor", "temp"] {
                    assert_eq!(v[k], "m:");
                }
                assert_eq!(v["kind"], "temperature");
                assert_eq!(v["unit"], "°C");
                assert!(v["dis"].is_string());
            }
        }
        let e0 = json(&msgs[0].payload);
        assert_eq!(msgs[0].address, "p/s0/e0/equip/tags");
        assert_eq!(e0["points"].as_array().unwrap().len(), 10);
        assert_eq!(e0["points"][0], "s0/e0/temp1");
        assert_eq!(msgs[1].address, "p/s0/e0/temp1/tags");

        // The next step offers points 25..40: equip 2 gains 5 (its equip message
        // is re-sent with all 10), equip 3 is new, equips 0 and 1 are not repeated.
        let all = plant(40);
        let msgs = w.topology(&all[25..]);
        let equips: Vec<&str> =
            msgs.iter().filter(|m| m.address.ends_with("/equip/tags")).map(|m| m.address.as_str()).collect();
        assert_eq!(equips, ["p/s0/e2/equip/tags", "p/s0/e3/equip/tags"]);
        assert_eq!(json(&msgs[0].payload)["points"].as_array().unwrap().len(), 10);
        // topology registered the points for encode too
        assert!(w.encode(&[39], &[1.0], &[0]).is_ok());
        // Offering the same points again repeats point tags but no equip message.
        let again = w.topology(&all[30..40]);
        assert_eq!(again.len(), 10);
    }

    #[test]
    fn unitless_points_and_typed_looking_strings() {
        let mut t = tag(0, 0, 0, "state1");
        t.unit = String::new();
        t.kind = "x:y".into();
        let v = json(point_tags(&t).as_bytes());
        assert!(v.get("unit").is_none());
        assert_eq!(v["kind"], "s:x:y");
    }

    /// Native encode rate; prints, asserts nothing about speed. Run with
    /// `cargo test --release -p reading-envelope encode_rate -- --nocapture`.
    #[test]
    fn encode_rate() {
        let points = 100_000u32;
        let mut w = wire();
        w.addresses(&plant(points));
        let batch = 5_000usize;
        let idx: Vec<u32> = (0..batch as u32).collect();
        let vals: Vec<f64> = (0..batch).map(|i| 20.0 + (i as f64) * 0.0137).collect();
        let base = 1_796_047_200_000i64;
        let mut out = Encoded::default();
        let mut ts = vec![0i64; batch];
        let rounds = if cfg!(debug_assertions) { 40 } else { 400 };
        let t0 = std::time::Instant::now();
        let mut bytes = 0usize;
        for r in 0..rounds {
            let first = (r * batch) as u32 % points;
            let ids: Vec<u32> = idx.iter().map(|i| first + i).collect();
            // readings spread evenly over 5 s, as the generator sends them
            for (i, t) in ts.iter_mut().enumerate() {
                *t = base + (r * batch + i) as i64;
            }
            w.encode_into(&ids, &vals, &ts, &mut out).unwrap();
            bytes += out.payload.len();
        }
        let dt = t0.elapsed().as_secs_f64();
        let n = (rounds * batch) as f64;
        println!(
            "reading-envelope encode: {:.2} M readings/s natively ({} readings in {:.3} s, {:.1} bytes/reading{})",
            n / dt / 1e6,
            n,
            dt,
            bytes as f64 / n,
            if cfg!(debug_assertions) { ", DEBUG build" } else { "" }
        );
    }
}
