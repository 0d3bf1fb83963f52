//! A target adapter for a Haystack server over HTTP (Haxall, SkySpark, the
//! Haystack test server scalebench starts by itself), all standard ops under
//! `<api-path>`: topology as `commit` "add" of sites, equips and points (ids
//! `<id-prefix>.s<site>`, `<id-prefix>.s<site>.e<equip>`, `<id-prefix>.p<index>`);
//! readings as one Zinc `hisWrite` grid per point of a batch; the lag canary
//! as a `hisWrite` to `<id-prefix>.canary`; counting by batch `hisRead`. No
//! login: add SCRAM (see scalebench's haxall adapter) for a server that asks.
//! Rules of the target-adapter-http world: the adapter describes, the host
//! posts and times; each instance (encoder, counter, canary, ingest) learns
//! what it needs from its own calls; `judge` says whether a 2xx answer is an
//! acknowledgement (a Haystack error grid sent with HTTP 200 is not); BTreeMap,
//! never HashMap (its default hasher imports wasi:random, which the host refuses).

mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "target-adapter-http-plugin" });
}

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use bindings::exports::scalebench::plugin::http_ingest::Guest as HttpIngest;
use bindings::exports::scalebench::plugin::target_adapter::{
    EncodedBatch, Guest, Message, Plan, StoragePlan, TransportPlan,
};
use bindings::scalebench::plugin::http_client;
use bindings::scalebench::plugin::types::{
    HttpRequest, HttpResponse, PerSecond, PluginInfo, PluginKind, Readings, Stat, TagInfo, Window,
};

/// Point ids per hisRead request when counting.
const READ_BATCH: usize = 500;

#[derive(Clone)]
struct Params {
    /// The stack service of the Haystack API ("api").
    service: String,
    /// Path of the API under the service's base URL ("/api").
    api_path: String,
    /// First segment of every record id this adapter creates ("sb").
    id_prefix: String,
}

/// What one instance knows: its params, the run's point ids by tag index
/// (from `addresses`), the sites and equips it committed, its first canary.
struct State {
    params: Params,
    ids: Vec<String>,
    sites: BTreeSet<u32>,
    equips: BTreeSet<(u32, u32)>,
    first_canary_ms: Option<i64>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State {
        params: Params { service: "api".into(), api_path: "/api".into(), id_prefix: "sb".into() },
        ids: Vec::new(),
        sites: BTreeSet::new(),
        equips: BTreeSet::new(),
        first_canary_ms: None,
    });
}

fn params() -> Params {
    STATE.with(|s| s.borrow().params.clone())
}

fn address(p: &Params, op: &str) -> String {
    format!("{} {}/{op}", p.service, p.api_path)
}

/// POST a Zinc grid to `op`; the answer as Haystack JSON, or why not.
fn call(p: &Params, op: &str, grid: String) -> Result<serde_json::Value, String> {
    let r = http_client::send(&HttpRequest {
        method: "POST".into(),
        service: p.service.clone(),
        path: format!("{}/{op}", p.api_path),
        headers: vec![
            ("Content-Type".into(), "text/zinc; charset=utf-8".into()),
            ("Accept".into(), "application/json".into()),
        ],
        body: grid.into_bytes(),
    })?;
    if r.status != 200 {
        return Err(format!(
            "{op}: HTTP {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body).chars().take(200).collect::<String>()
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&r.body).map_err(|e| format!("{op}: the answer is not a JSON grid: {e}"))?;
    if v["meta"].get("err").is_some() {
        return Err(format!("{op}: error grid: {}", v["meta"]["dis"]));
    }
    Ok(v)
}

// ---- Zinc and time ----------------------------------------------------------

/// A Zinc string literal.
fn zinc_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '$' => out.push_str("\\$"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A Zinc number (NaN and infinities have their own spellings).
fn zinc_number(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "INF" } else { "-INF" });
    } else {
        let _ = write!(out, "{v}");
    }
}

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

/// (year, month, day) → days since 1970-01-01.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A Zinc UTC dateTime: `2026-12-03T05:00:00.123Z UTC`.
fn zinc_time(out: &mut String, ms: i64) {
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s, milli) = (rest / 3_600_000, rest / 60_000 % 60, rest / 1000 % 60, rest % 1000);
    let _ = write!(out, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z UTC");
}

/// Milliseconds of a Haystack JSON dateTime value (`2026-12-03T05:00:00.123Z`,
/// as this adapter writes them: UTC).
fn parse_time(v: &str) -> Option<i64> {
    let n = |a: usize, b: usize| v.get(a..b)?.parse::<i64>().ok();
    let days = days_from_civil(n(0, 4)?, n(5, 7)? as u32, n(8, 10)? as u32);
    let mut ms = ((days * 24 + n(11, 13)?) * 60 + n(14, 16)?) * 60_000 + n(17, 19)? * 1000;
    if v.as_bytes().get(19) == Some(&b'.') {
        let frac: String = v[20..].chars().take_while(|c| c.is_ascii_digit()).collect();
        let padded = format!("{frac:0<3}");
        ms += padded[..3].parse::<i64>().ok()?;
    }
    Some(ms)
}

/// A Zinc range from `start` to `end` (ms).
fn range(start: i64, end: i64) -> String {
    let mut s = String::new();
    zinc_time(&mut s, start);
    s.push(',');
    zinc_time(&mut s, end);
    let mut quoted = String::new();
    zinc_str(&mut quoted, &s);
    quoted
}

/// Call `each(ts_ms, value)` for every value the server holds for `ids` in `range`.
fn his_read(p: &Params, ids: &[String], range: &str, mut each: impl FnMut(i64, Option<f64>)) -> Result<(), String> {
    for chunk in ids.chunks(READ_BATCH) {
        let mut g = format!("ver:\"3.0\" range:{range}\nid\n");
        for id in chunk {
            let _ = writeln!(g, "@{id}");
        }
        let v = call(p, "hisRead", g)?;
        for row in v["rows"].as_array().into_iter().flatten() {
            let Some(ts) = row["ts"]["val"].as_str().and_then(parse_time) else { continue };
            for (k, cell) in row.as_object().into_iter().flatten() {
                if k == "ts" || cell.is_null() {
                    continue;
                }
                each(ts, cell.as_f64().or_else(|| cell["val"].as_f64()));
            }
        }
    }
    Ok(())
}

// ---- the adapter --------------------------------------------------------------

struct Adapter;

impl Guest for Adapter {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "template-adapter-http".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: "0.1.0".into(),
            kind: PluginKind::TargetAdapter,
            summary: "a Haystack server over HTTP: commit topology, Zinc hisWrite, hisRead counting, error grids judged".into(),
            params_schema: r#"{"type":"object","additionalProperties":false,"properties":{"service":{"type":"string","default":"api"},"api-path":{"type":"string","default":"/api"},"id-prefix":{"type":"string","default":"sb"}}}"#.into(),
            default_params: r#"{"service":"api","api-path":"/api","id-prefix":"sb"}"#.into(),
        }
    }

    fn configure(params_json: String) -> Result<Plan, String> {
        let text = if params_json.trim().is_empty() { "{}" } else { params_json.as_str() };
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("params are not JSON: {e}"))?;
        let obj = v.as_object().ok_or("params must be a JSON object")?;
        if let Some(k) = obj.keys().find(|k| !["service", "api-path", "id-prefix"].contains(&k.as_str())) {
            return Err(format!("unknown param `{k}` (this adapter takes `service`, `api-path` and `id-prefix`)"));
        }
        let get = |k: &str, d: &str| obj.get(k).and_then(|s| s.as_str()).unwrap_or(d).to_string();
        let p = Params {
            service: get("service", "api"),
            api_path: get("api-path", "/api").trim_end_matches('/').to_string(),
            id_prefix: get("id-prefix", "sb"),
        };
        let plan = Plan {
            transport: TransportPlan::Http,
            storage: StoragePlan::Http(p.service.clone()),
            services: vec![p.service.clone()],
        };
        STATE.with(|s| s.borrow_mut().params = p);
        Ok(plan)
    }

    fn addresses(points: Vec<TagInfo>) -> Vec<String> {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            for t in &points {
                let id = format!("{}.p{}", s.params.id_prefix, t.index);
                if s.ids.len() <= t.index as usize {
                    s.ids.resize(t.index as usize + 1, String::new());
                }
                s.ids[t.index as usize] = id;
            }
            let a = address(&s.params, "hisWrite");
            points.iter().map(|_| a.clone()).collect()
        })
    }

    fn topology(points: Vec<TagInfo>) -> Vec<Message> {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            let p = s.params.clone();
            let (prefix, commit) = (p.id_prefix.clone(), address(&p, "commit"));
            let mut out = Vec::new();
            let mut sites = String::from("ver:\"3.0\" commit:\"add\"\nid,dis,site,tz\n");
            let mut equips = String::from("ver:\"3.0\" commit:\"add\"\nid,dis,equip,siteRef\n");
            let (mut new_sites, mut new_equips) = (0, 0);
            for t in &points {
                if s.sites.insert(t.site) {
                    let _ = writeln!(sites, "@{prefix}.s{},\"site {}\",M,\"UTC\"", t.site, t.site);
                    new_sites += 1;
                }
                if s.equips.insert((t.site, t.equip)) {
                    let _ = writeln!(
                        equips,
                        "@{prefix}.s{}.e{},\"equip {}\",M,@{prefix}.s{}",
                        t.site, t.equip, t.equip, t.site
                    );
                    new_equips += 1;
                }
            }
            if new_sites > 0 {
                out.push(Message { address: commit.clone(), payload: sites.into_bytes() });
            }
            if new_equips > 0 {
                out.push(Message { address: commit.clone(), payload: equips.into_bytes() });
            }
            // Points, 1,000 records a commit.
            for chunk in points.chunks(1000) {
                let mut g = String::from("ver:\"3.0\" commit:\"add\"\nid,dis,point,his,kind,tz,equipRef,siteRef\n");
                for t in chunk {
                    let _ = write!(g, "@{prefix}.p{},", t.index);
                    zinc_str(&mut g, &format!("{} {}", t.label, t.index));
                    let _ =
                        writeln!(g, ",M,M,\"Number\",\"UTC\",@{prefix}.s{}.e{},@{prefix}.s{}", t.site, t.equip, t.site);
                }
                out.push(Message { address: commit.clone(), payload: g.into_bytes() });
            }
            out
        })
    }

    fn encode(batch: Readings) -> EncodedBatch {
        let mut out =
            EncodedBatch { address_of: Vec::new(), ends: Vec::new(), payload: Vec::new(), carries: Vec::new() };
        // One plain hisWrite per point: its readings of this batch.
        let mut by_point: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, p) in batch.points.iter().enumerate() {
            by_point.entry(*p).or_default().push(i);
        }
        STATE.with(|s| {
            let s = s.borrow();
            for (point, idx) in by_point {
                let mut g = format!("ver:\"3.0\" id:@{}\nts,val\n", s.ids[point as usize]);
                for i in &idx {
                    zinc_time(&mut g, batch.ts_ms[*i]);
                    g.push(',');
                    zinc_number(&mut g, batch.values[*i]);
                    g.push('\n');
                }
                out.payload.extend_from_slice(g.as_bytes());
                out.ends.push(out.payload.len() as u32);
                out.address_of.push(point);
                out.carries.push(idx.len() as u32);
            }
        });
        out
    }

    fn canary(seq: u64, ts_ms: i64) -> Message {
        let p = params();
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            s.first_canary_ms = Some(s.first_canary_ms.map_or(ts_ms, |f| f.min(ts_ms)));
        });
        let mut g = format!("ver:\"3.0\" id:@{}.canary\nts,val\n", p.id_prefix);
        zinc_time(&mut g, ts_ms);
        let _ = writeln!(g, ",{seq}");
        Message { address: address(&p, "hisWrite"), payload: g.into_bytes() }
    }

    fn preflight() -> Result<(), String> {
        let p = params();
        // The canary's site and point exist before the first canary lands.
        let prefix = &p.id_prefix;
        let held = call(&p, "read", format!("ver:\"3.0\"\nid\n@{prefix}.canary\n"))?;
        if held["rows"][0].get("point").is_some_and(|v| !v.is_null()) {
            return Err(format!("the server already holds @{prefix}.canary of an earlier run: its readings would be taken for this run's canaries. Start from an empty server or set another `id-prefix`."));
        }
        call(
            &p,
            "commit",
            format!("ver:\"3.0\" commit:\"add\"\nid,dis,site,tz\n@{prefix}.canarySite,\"canary site\",M,\"UTC\"\n"),
        )?;
        call(&p, "commit", format!("ver:\"3.0\" commit:\"add\"\nid,dis,point,his,kind,tz,siteRef\n@{prefix}.canary,\"lag canary\",M,M,\"Number\",\"UTC\",@{prefix}.canarySite\n"))?;
        Ok(())
    }

    fn stored(window: Window) -> Result<Vec<PerSecond>, String> {
        let p = params();
        let ids: Vec<String> = STATE.with(|s| s.borrow().ids.iter().filter(|i| !i.is_empty()).cloned().collect());
        let mut per: BTreeMap<i64, u64> = BTreeMap::new();
        his_read(&p, &ids, &range(window.start_ms, window.end_ms), |ts, _| {
            if ts >= window.start_ms && ts < window.end_ms {
                *per.entry(ts.div_euclid(1000) * 1000).or_insert(0) += 1;
            }
        })?;
        Ok(per.into_iter().map(|(second_ms, count)| PerSecond { second_ms, count }).collect())
    }

    fn canaries_stored(from_seq: u64) -> Result<Vec<u64>, String> {
        let p = params();
        let Some(first) = STATE.with(|s| s.borrow().first_canary_ms) else { return Ok(Vec::new()) };
        let mut seqs = Vec::new();
        // From the first canary to a day ahead (clocks differ a little).
        his_read(&p, &[format!("{}.canary", p.id_prefix)], &range(first - 1000, first + 172_800_000), |_, v| {
            if let Some(v) = v.filter(|v| *v >= 0.0 && v.fract() == 0.0) {
                if v as u64 >= from_seq {
                    seqs.push(v as u64);
                }
            }
        })?;
        seqs.sort_unstable();
        seqs.dedup();
        Ok(seqs)
    }

    fn stats() -> Result<Vec<Stat>, String> {
        Ok(Vec::new())
    }
}

impl HttpIngest for Adapter {
    fn headers(_address: String) -> Result<Vec<(String, String)>, String> {
        Ok(vec![("Content-Type".into(), "text/zinc; charset=utf-8".into()), ("Accept".into(), "text/zinc".into())])
    }

    /// A Haystack server answers an op it refused with HTTP 200 and an error
    /// grid (meta `err`): that is not an acknowledgement.
    fn judge(_address: String, response: HttpResponse) -> Result<(), String> {
        let text = String::from_utf8_lossy(&response.body);
        let meta = text.lines().next().unwrap_or("");
        if !meta.starts_with("ver:") {
            return Err(format!("the answer is not a Zinc grid: {}", meta.chars().take(80).collect::<String>()));
        }
        if meta.split_whitespace().any(|w| w == "err") {
            return Err(format!("error grid: {meta}"));
        }
        Ok(())
    }
}

bindings::export!(Adapter with_types_in bindings);
