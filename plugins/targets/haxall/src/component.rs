//! Component glue: WIT types in, pure modules, WIT types out; HTTP through
//! the host's http-client import, the SCRAM nonce from its entropy import.

/// World `target-adapter-http-history-plugin`: target-adapter plus
/// http-ingest (headers for the host's HTTP transport, and judging its
/// responses) plus history-sink (prefill through hisWrite).
mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit",
        world: "target-adapter-http-history-plugin",
    });
}

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

use bindings::exports::scalebench::plugin::history_sink::{Guest as HistoryGuest, HisWritePlan, HistoryPlan};
use bindings::exports::scalebench::plugin::http_ingest::Guest as HttpIngestGuest;
use bindings::exports::scalebench::plugin::target_adapter::{
    EncodedBatch, Guest, Message, Plan, StoragePlan, TransportPlan,
};
use bindings::scalebench::plugin::types::{
    HttpRequest, HttpResponse, LogLevel, PerSecond, PluginInfo, PluginKind, Readings, Stat, TagInfo, Window,
};
use bindings::scalebench::plugin::{entropy, http_client, logging};

use crate::params::{self, Params};
use crate::scram;
use crate::wire::{his_read_answer, his_read_request, ingest_answer, Encoded, Msg, Tag, Wire};

thread_local! {
    static WIRE: RefCell<Wire> = RefCell::new(Wire::new(Params::default()));
    static TOKEN: RefCell<Option<String>> = const { RefCell::new(None) };
    /// Whether the server held no record tagged scalebench when this
    /// instance first looked (then nothing it commits can collide).
    static SERVER_WAS_EMPTY: Cell<Option<bool>> = const { Cell::new(None) };
}

fn params() -> Params {
    WIRE.with(|w| w.borrow().params.clone())
}

fn tag(t: TagInfo) -> Tag {
    Tag { index: t.index, kind: t.kind, unit: t.unit, site: t.site, equip: t.equip, label: t.label, markers: t.markers }
}

fn msg(m: Msg) -> Message {
    Message { address: m.address, payload: m.payload }
}

/// The bearer token, logging in with SCRAM first when a user is configured.
fn auth_header(p: &Params, fresh: bool) -> Result<Option<String>, String> {
    if p.user.is_empty() {
        return Ok(None);
    }
    if !fresh {
        if let Some(t) = TOKEN.with(|t| t.borrow().clone()) {
            return Ok(Some(format!("BEARER authToken={t}")));
        }
    }
    let nonce = scram::nonce_from(&entropy::random_bytes(18));
    let about = p.path("about");
    let mut send = |auth: &str| -> Result<(u16, Vec<(String, String)>), String> {
        let r = http_client::send(&HttpRequest {
            method: "GET".into(),
            service: p.service.clone(),
            path: about.clone(),
            headers: vec![("Authorization".into(), auth.into())],
            body: Vec::new(),
        })?;
        Ok((r.status, r.headers))
    };
    let token = scram::login(&p.user, &p.password, &nonce, &mut send)?;
    logging::log(LogLevel::Info, &format!("logged in to {} as {} (SCRAM-SHA-256)", p.service, p.user));
    TOKEN.with(|t| *t.borrow_mut() = Some(token.clone()));
    Ok(Some(format!("BEARER authToken={token}")))
}

/// POST (or GET without a body) to an op; answers asked for as Haystack JSON.
/// Logs in again once when the token was refused. Err on an error grid.
fn call(p: &Params, op: &str, body: Option<String>) -> Result<serde_json::Value, String> {
    let bytes = call_raw(p, op, body)?;
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("{op}: answer is not Haystack JSON: {e}"))?;
    if v["meta"].get("err").is_some() {
        return Err(format!("{op}: server error: {}", v["meta"]["dis"].as_str().unwrap_or("(no dis)")));
    }
    Ok(v)
}

fn call_raw(p: &Params, op: &str, body: Option<String>) -> Result<Vec<u8>, String> {
    for attempt in 0..2 {
        let mut headers = vec![("Accept".to_string(), "application/json".to_string())];
        if let Some(a) = auth_header(p, attempt > 0)? {
            headers.push(("Authorization".into(), a));
        }
        let (method, body) = match &body {
            Some(b) => {
                headers.push(("Content-Type".into(), "text/zinc; charset=utf-8".into()));
                ("POST", b.clone().into_bytes())
            }
            None => ("GET", Vec::new()),
        };
        let r = http_client::send(&HttpRequest {
            method: method.into(),
            service: p.service.clone(),
            path: p.path(op),
            headers,
            body,
        })?;
        if (r.status == 401 || r.status == 403) && attempt == 0 && !p.user.is_empty() {
            continue;
        }
        if r.status != 200 {
            return Err(format!(
                "{op}: HTTP {} {}",
                r.status,
                String::from_utf8_lossy(&r.body).chars().take(300).collect::<String>()
            ));
        }
        return Ok(r.body);
    }
    unreachable!()
}

/// An error for a record the server does not know ("unknown rec @x" here,
/// `UnknownRecErr` in Haxall).
fn unknown_rec(e: &str) -> bool {
    e.to_ascii_lowercase().replace(' ', "").contains("unknownrec")
}

fn his_read(p: &Params, ids: &[String], range: &str, mut each: impl FnMut(i64, Option<f64>)) -> Result<(), String> {
    for chunk in ids.chunks(p.his_read_batch as usize) {
        let body = call_raw(p, "hisRead", Some(his_read_request(chunk, range)))?;
        match his_read_answer(&body, &mut each) {
            Ok(_) => {}
            // A record the server no longer knows (it lost its database)
            // holds nothing: read the batch's ids one by one, counting an
            // unknown one as empty, so the loss is measured, not an error.
            Err(e) if unknown_rec(&e) && chunk.len() > 1 => {
                for id in chunk {
                    let body = call_raw(p, "hisRead", Some(his_read_request(std::slice::from_ref(id), range)))?;
                    match his_read_answer(&body, &mut each) {
                        Err(e) if unknown_rec(&e) => {}
                        r => {
                            r?;
                        }
                    }
                }
            }
            Err(e) if unknown_rec(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

struct Haxall;

impl Guest for Haxall {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "haxall".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: "0.1.0".into(),
            kind: PluginKind::TargetAdapter,
            summary: "Haystack server (Haxall) over HTTP: commit topology, Zinc hisWrite readings, hisRead counting, SCRAM-SHA-256".into(),
            params_schema: params::SCHEMA.into(),
            default_params: params::DEFAULT_JSON.into(),
        }
    }

    fn configure(params_json: String) -> Result<Plan, String> {
        let p = Params::from_json(&params_json)?;
        let plan = Plan {
            transport: TransportPlan::Http,
            storage: StoragePlan::Http(p.service.clone()),
            services: vec![p.service.clone()],
        };
        let mut wire = Wire::new(p);
        // The canary's records are committed by `preflight`, before the
        // host's one-reading check; topology leaves them out.
        wire.canary_in_topology = false;
        WIRE.with(|w| *w.borrow_mut() = wire);
        TOKEN.with(|t| *t.borrow_mut() = None);
        SERVER_WAS_EMPTY.with(|c| c.set(None));
        Ok(plan)
    }

    fn addresses(points: Vec<TagInfo>) -> Vec<String> {
        let tags: Vec<Tag> = points.into_iter().map(tag).collect();
        WIRE.with(|w| w.borrow_mut().addresses(&tags))
    }

    /// Records the server already holds (a prefill made them) are left
    /// out: a `commit` "add" of an id that exists is an error.
    fn topology(points: Vec<TagInfo>) -> Vec<Message> {
        let tags: Vec<Tag> = points.into_iter().map(tag).collect();
        let existing = match held_records(&params(), &tags) {
            Ok(e) => e,
            Err(e) => {
                // No error channel in topology: say why, then trap so the run stops.
                let e = format!("haxall: cannot tell which records the server already holds: {e}");
                logging::log(LogLevel::Error, &e);
                panic!("{e}");
            }
        };
        WIRE.with(|w| w.borrow_mut().topology_except(&tags, &existing)).into_iter().map(msg).collect()
    }

    fn encode(batch: Readings) -> EncodedBatch {
        let mut out = Encoded::default();
        let r = WIRE.with(|w| w.borrow_mut().encode_into(&batch.points, &batch.values, &batch.ts_ms, &mut out));
        if let Err(e) = r {
            // No error channel in encode: say why, then trap so the run stops.
            logging::log(LogLevel::Error, &e);
            panic!("{e}");
        }
        EncodedBatch { address_of: out.address_of, ends: out.ends, payload: out.payload, carries: out.carries }
    }

    fn canary(seq: u64, ts_ms: i64) -> Message {
        msg(WIRE.with(|w| w.borrow_mut().canary(seq, ts_ms)))
    }

    fn preflight() -> Result<(), String> {
        let p = params();
        let about = call(&p, "about", None)?;
        let row = &about["rows"][0];
        let s = |k: &str| row[k]["val"].as_str().or_else(|| row[k].as_str()).unwrap_or("?").to_string();
        logging::log(
            LogLevel::Info,
            &format!("{}: {} {} (Haystack {})", p.service, s("productName"), s("productVersion"), s("haystackVersion")),
        );
        // Point records a prefill made are this run's own; a canary is
        // left only by an earlier run, and its history would be taken for
        // this run's canaries.
        let canary = WIRE.with(|w| w.borrow().canary_id());
        if !held(&p, &[canary.clone(), format!("{}.canarySite", p.id_prefix)])?.is_empty() {
            return Err(format!(
                "{} already holds the lag canary @{canary} of an earlier run: its readings would be taken for this run's canaries. Start from an empty server or set another `id-prefix`.",
                p.service
            ));
        }
        // The canary's site and point, so a canary can land before step 1.
        for grid in WIRE.with(|w| w.borrow().canary_records()) {
            call(&p, "commit", Some(grid))?;
        }
        Ok(())
    }

    fn stored(window: Window) -> Result<Vec<PerSecond>, String> {
        let p = params();
        let (ids, range) = WIRE.with(|w| {
            let w = w.borrow();
            (w.point_ids(), w.range(window.start_ms, window.end_ms))
        });
        let mut per: BTreeMap<i64, u64> = BTreeMap::new();
        his_read(&p, &ids, &range, |ts, _| {
            if ts >= window.start_ms && ts < window.end_ms {
                *per.entry(ts.div_euclid(1000) * 1000).or_insert(0) += 1;
            }
        })?;
        Ok(per.into_iter().map(|(second_ms, count)| PerSecond { second_ms, count }).collect())
    }

    fn canaries_stored(from_seq: u64) -> Result<Vec<u64>, String> {
        let p = params();
        let (id, first) = WIRE.with(|w| {
            let w = w.borrow();
            (w.canary_id(), w.first_canary_ms)
        });
        let Some(first) = first else { return Ok(Vec::new()) };
        let range = WIRE.with(|w| w.borrow().range_from(first));
        let mut seqs = Vec::new();
        his_read(&p, &[id], &range, |_, v| {
            if let Some(v) = v {
                if v >= 0.0 && v.fract() == 0.0 && (v as u64) >= from_seq {
                    seqs.push(v as u64);
                }
            }
        })?;
        seqs.sort_unstable();
        seqs.dedup();
        Ok(seqs)
    }

    fn stats() -> Result<Vec<Stat>, String> {
        let p = params();
        let about = call(&p, "about", None)?;
        let row = &about["rows"][0];
        let mut out = Vec::new();
        for k in ["productName", "productVersion", "haystackVersion", "serverName"] {
            if let Some(v) = row[k]["val"].as_str().or_else(|| row[k].as_str()) {
                out.push(Stat { name: format!("haystack.{k}"), number: None, text: Some(v.to_string()) });
            }
        }
        let pts = call(&p, "read", Some("ver:\"3.0\"\nfilter\n\"scalebench and point and his\"\n".into()))?;
        let n = pts["rows"].as_array().map_or(0, |r| r.len());
        out.push(Stat { name: "haystack.points".into(), number: Some(n as f64), text: None });
        Ok(out)
    }
}

/// Of `ids`, those the server holds as records tagged scalebench (a
/// missing id reads as a row of nulls, or of the id alone).
fn held(p: &Params, ids: &[String]) -> Result<BTreeSet<String>, String> {
    let mut out = BTreeSet::new();
    for chunk in ids.chunks(5000) {
        let mut g = String::from("ver:\"3.0\"\nid\n");
        for id in chunk {
            g.push('@');
            g.push_str(id);
            g.push('\n');
        }
        let found = call(p, "read", Some(g))?;
        for row in found["rows"].as_array().into_iter().flatten() {
            if row.get("scalebench").map_or(true, |v| v.is_null()) {
                continue;
            }
            if let Some(id) = row["id"]["val"].as_str() {
                out.insert(id.to_string());
            }
        }
    }
    Ok(out)
}

/// The records of `tags` the server already holds; no read at all once
/// the server was seen without any record tagged scalebench.
fn held_records(p: &Params, tags: &[Tag]) -> Result<BTreeSet<String>, String> {
    if tags.is_empty() {
        return Ok(BTreeSet::new());
    }
    let empty = match SERVER_WAS_EMPTY.with(|c| c.get()) {
        Some(e) => e,
        None => {
            let any = call(p, "read", Some("ver:\"3.0\"\nfilter,limit\n\"scalebench\",1\n".into()))?;
            let e = any["rows"].as_array().map_or(true, |r| r.is_empty());
            SERVER_WAS_EMPTY.with(|c| c.set(Some(e)));
            e
        }
    };
    if empty {
        return Ok(BTreeSet::new());
    }
    let ids = WIRE.with(|w| w.borrow().record_ids(tags));
    held(p, &ids)
}

impl HistoryGuest for Haxall {
    /// History goes in as live readings do: hisWrite grids of this
    /// adapter's `encode`, `his-write-batch` readings of one point each.
    fn describe() -> Result<HistoryPlan, String> {
        let p = params();
        Ok(HistoryPlan::HisWrite(HisWritePlan { service: p.service.clone(), readings_per_request: p.his_write_batch }))
    }

    fn point_keys(points: Vec<TagInfo>) -> Vec<String> {
        WIRE.with(|w| {
            let w = w.borrow();
            points.into_iter().map(|t| w.point_id(&tag(t))).collect()
        })
    }
}

impl HttpIngestGuest for Haxall {
    /// Zinc in and out, and the bearer token when a user is configured:
    /// a fresh login on every call (the host asks once per step per
    /// address, and again after a 401/403, so a refused token is replaced).
    fn headers(_address: String) -> Result<Vec<(String, String)>, String> {
        let p = params();
        let mut h = vec![
            ("Content-Type".to_string(), "text/zinc; charset=utf-8".to_string()),
            ("Accept".to_string(), "text/zinc".to_string()),
        ];
        if let Some(a) = auth_header(&p, true)? {
            h.push(("Authorization".into(), a));
        }
        Ok(h)
    }

    /// An error grid (meta `err`) answered with HTTP 200 is not an ack.
    fn judge(_address: String, response: HttpResponse) -> Result<(), String> {
        ingest_answer(&response.body)
    }
}

bindings::export!(Haxall with_types_in bindings);
