//! Shared source of the hostile adapters (`judge-loop`, `huge-headers`,
//! `midstep-hog`), included by each with `#[path]`: an honest, minimal
//! adapter for the Haystack test server (the template adapter's wire, fixed
//! params: service `api`, path `/api`, ids `sb.*`), so a ladder's first step
//! measures normally. Points from index [`LATE_FROM`] on (what a second
//! step of 400 points adds to a first of 200) are written to
//! `api /api/hisWrite?late`: a fixture misbehaves on those, in the middle
//! of a run. Each fixture supplies the hooks at its crate root:
//! `before_encode(points)`, `extra_headers(address)`, `before_judge(address)`.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use scalebench_plugin_sdk::http_ingest::exports::scalebench::plugin::http_ingest::Guest as HttpIngest;
use scalebench_plugin_sdk::target_adapter::exports::scalebench::plugin::target_adapter::{EncodedBatch, Guest, Message, Plan, StoragePlan, TransportPlan};
use scalebench_plugin_sdk::target_adapter::scalebench::plugin::http_client;
use scalebench_plugin_sdk::target_adapter::scalebench::plugin::types::{HttpRequest, PerSecond, PluginInfo, PluginKind, Readings, Stat, TagInfo, Window};
use scalebench_plugin_sdk::target_adapter::scalebench::plugin::types::HttpResponse;

/// First point index written to the "late" address.
pub const LATE_FROM: u32 = 200;
const WRITE: &str = "api /api/hisWrite";
const LATE_WRITE: &str = "api /api/hisWrite?late";

#[derive(Default)]
struct State {
    ids: Vec<String>,
    sites: BTreeSet<u32>,
    equips: BTreeSet<(u32, u32)>,
    first_canary_ms: Option<i64>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

fn call(op: &str, grid: String) -> Result<serde_json::Value, String> {
    let r = http_client::send(&HttpRequest {
        method: "POST".into(),
        service: "api".into(),
        path: format!("/api/{op}"),
        headers: vec![("Content-Type".into(), "text/zinc; charset=utf-8".into()), ("Accept".into(), "application/json".into())],
        body: grid.into_bytes(),
    })?;
    if r.status != 200 {
        return Err(format!("{op}: HTTP {}", r.status));
    }
    let v: serde_json::Value = serde_json::from_slice(&r.body).map_err(|e| format!("{op}: not JSON: {e}"))?;
    if v["meta"].get("err").is_some() {
        return Err(format!("{op}: error grid: {}", v["meta"]["dis"]));
    }
    Ok(v)
}

fn zinc_time(out: &mut String, ms: i64) {
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, mo, d) = scalebench_plugin_sdk::date::civil_from_days(days);
    let (h, mi, s, milli) = (rest / 3_600_000, rest / 60_000 % 60, rest / 1000 % 60, rest % 1000);
    let _ = write!(out, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z UTC");
}

fn parse_time(v: &str) -> Option<i64> {
    let n = |a: usize, b: usize| v.get(a..b)?.parse::<i64>().ok();
    let days = scalebench_plugin_sdk::date::days_from_civil(n(0, 4)?, n(5, 7)? as u32, n(8, 10)? as u32);
    let mut ms = ((days * 24 + n(11, 13)?) * 60 + n(14, 16)?) * 60_000 + n(17, 19)? * 1000;
    if v.as_bytes().get(19) == Some(&b'.') {
        let frac: String = v[20..].chars().take_while(|c| c.is_ascii_digit()).collect();
        ms += format!("{frac:0<3}")[..3].parse::<i64>().ok()?;
    }
    Some(ms)
}

fn range(start: i64, end: i64) -> String {
    let (mut a, mut b) = (String::new(), String::new());
    zinc_time(&mut a, start);
    zinc_time(&mut b, end);
    format!("\"{a},{b}\"")
}

fn his_read(ids: &[String], range: &str, mut each: impl FnMut(i64, Option<f64>)) -> Result<(), String> {
    for chunk in ids.chunks(500) {
        let mut g = format!("ver:\"3.0\" range:{range}\nid\n");
        for id in chunk {
            let _ = writeln!(g, "@{id}");
        }
        let v = call("hisRead", g)?;
        for row in v["rows"].as_array().into_iter().flatten() {
            let Some(ts) = row["ts"]["val"].as_str().and_then(parse_time) else { continue };
            for (k, cell) in row.as_object().into_iter().flatten() {
                if k != "ts" && !cell.is_null() {
                    each(ts, cell.as_f64().or_else(|| cell["val"].as_f64()));
                }
            }
        }
    }
    Ok(())
}

struct Hostile;

impl Guest for Hostile {
    fn info() -> PluginInfo {
        PluginInfo {
            name: env!("CARGO_PKG_NAME").into(),
            version: "0.1.0".into(),
            abi: scalebench_plugin_sdk::ABI_VERSION.into(),
            kind: PluginKind::TargetAdapter,
            summary: "a hostile Haystack adapter (tests/bad-plugins)".into(),
            params_schema: "{}".into(),
            default_params: "{}".into(),
        }
    }
    fn configure(_p: String) -> Result<Plan, String> {
        Ok(Plan { transport: TransportPlan::Http, storage: StoragePlan::Http("api".into()), services: vec!["api".into()] })
    }
    fn addresses(points: Vec<TagInfo>) -> Vec<String> {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            for t in &points {
                if s.ids.len() <= t.index as usize {
                    s.ids.resize(t.index as usize + 1, String::new());
                }
                s.ids[t.index as usize] = format!("sb.p{}", t.index);
            }
        });
        points.iter().map(|t| if t.index >= LATE_FROM { LATE_WRITE } else { WRITE }.to_string()).collect()
    }
    fn topology(points: Vec<TagInfo>) -> Vec<Message> {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            let mut sites = String::from("ver:\"3.0\" commit:\"add\"\nid,dis,site,tz\n");
            let mut equips = String::from("ver:\"3.0\" commit:\"add\"\nid,dis,equip,siteRef\n");
            let mut pts = String::from("ver:\"3.0\" commit:\"add\"\nid,dis,point,his,kind,tz,equipRef,siteRef\n");
            let mut out = Vec::new();
            let (mut new_sites, mut new_equips) = (0, 0);
            for t in &points {
                if s.sites.insert(t.site) {
                    let _ = writeln!(sites, "@sb.s{},\"site\",M,\"UTC\"", t.site);
                    new_sites += 1;
                }
                if s.equips.insert((t.site, t.equip)) {
                    let _ = writeln!(equips, "@sb.s{}.e{},\"equip\",M,@sb.s{}", t.site, t.equip, t.site);
                    new_equips += 1;
                }
                let _ = writeln!(pts, "@sb.p{},\"point\",M,M,\"Number\",\"UTC\",@sb.s{}.e{},@sb.s{}", t.index, t.site, t.equip, t.site);
            }
            for (n, g) in [(new_sites, sites), (new_equips, equips), (points.len(), pts)] {
                if n > 0 {
                    out.push(Message { address: "api /api/commit".into(), payload: g.into_bytes() });
                }
            }
            out
        })
    }
    fn encode(batch: Readings) -> EncodedBatch {
        crate::before_encode(&batch.points);
        let mut out = EncodedBatch { address_of: Vec::new(), ends: Vec::new(), payload: Vec::new(), carries: Vec::new() };
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
                    let _ = writeln!(g, ",{}", batch.values[*i]);
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
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            s.first_canary_ms = Some(s.first_canary_ms.map_or(ts_ms, |f| f.min(ts_ms)));
        });
        let mut g = String::from("ver:\"3.0\" id:@sb.canary\nts,val\n");
        zinc_time(&mut g, ts_ms);
        let _ = writeln!(g, ",{seq}");
        Message { address: WRITE.into(), payload: g.into_bytes() }
    }
    fn preflight() -> Result<(), String> {
        call("commit", "ver:\"3.0\" commit:\"add\"\nid,dis,site,tz\n@sb.canarySite,\"canary site\",M,\"UTC\"\n".into())?;
        call("commit", "ver:\"3.0\" commit:\"add\"\nid,dis,point,his,kind,tz,siteRef\n@sb.canary,\"lag canary\",M,M,\"Number\",\"UTC\",@sb.canarySite\n".into())?;
        Ok(())
    }
    fn stored(w: Window) -> Result<Vec<PerSecond>, String> {
        let ids: Vec<String> = STATE.with(|s| s.borrow().ids.iter().filter(|i| !i.is_empty()).cloned().collect());
        let mut per: BTreeMap<i64, u64> = BTreeMap::new();
        his_read(&ids, &range(w.start_ms, w.end_ms), |ts, _| {
            if ts >= w.start_ms && ts < w.end_ms {
                *per.entry(ts.div_euclid(1000) * 1000).or_insert(0) += 1;
            }
        })?;
        Ok(per.into_iter().map(|(second_ms, count)| PerSecond { second_ms, count }).collect())
    }
    fn canaries_stored(from_seq: u64) -> Result<Vec<u64>, String> {
        let Some(first) = STATE.with(|s| s.borrow().first_canary_ms) else { return Ok(Vec::new()) };
        let mut seqs = Vec::new();
        his_read(&["sb.canary".into()], &range(first - 1000, first + 172_800_000), |_, v| {
            if let Some(v) = v.filter(|v| *v >= from_seq as f64 && v.fract() == 0.0) {
                seqs.push(v as u64);
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

impl HttpIngest for Hostile {
    fn headers(address: String) -> Result<Vec<(String, String)>, String> {
        let mut h = vec![("Content-Type".into(), "text/zinc; charset=utf-8".into()), ("Accept".into(), "text/zinc".into())];
        h.extend(crate::extra_headers(&address));
        Ok(h)
    }
    fn judge(address: String, response: HttpResponse) -> Result<(), String> {
        crate::before_judge(&address);
        let text = String::from_utf8_lossy(&response.body);
        let meta = text.lines().next().unwrap_or("");
        if !meta.starts_with("ver:") || meta.split_whitespace().any(|w| w == "err") {
            return Err(format!("not an ok grid: {}", meta.chars().take(80).collect::<String>()));
        }
        Ok(())
    }
}

scalebench_plugin_sdk::export_target_adapter!(Hostile);
scalebench_plugin_sdk::export_http_ingest!(Hostile);
