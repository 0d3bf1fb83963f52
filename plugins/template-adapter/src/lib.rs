//! A minimal target adapter: readings as JSON over HTTP to a service of the
//! run's stack, counted back through HTTP. Copy this crate to write an
//! adapter of your own; docs/plugin-authoring.md explains every call.
//!
//! The wire (an ingest API of your own making, or one to adapt):
//! - `POST <path>/topology`: JSON lines `{"index","label","site","equip","kind","unit"}`, one per point;
//! - `POST <path>/ingest`: `[{"point":<index>,"value":<f64>,"ts":<ms>}, ...]`;
//! - `POST <path>/canary`: `{"seq":<n>,"ts":<ms>}`;
//! - `GET <path>/stored?start=<ms>&end=<ms>`: `[[<second ms>, <count>], ...]`;
//! - `GET <path>/canaries?from=<seq>`: `[<seq>, ...]`;
//! - `GET <path>/count`: 200 when the server is up (`preflight`).
//! An answer with a JSON `"error"` field is not an acknowledgement (`judge`).

mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "target-adapter-http-plugin",
    });
}

use std::cell::RefCell;
use std::fmt::Write as _;

use bindings::exports::scalebench::plugin::http_ingest::Guest as HttpIngest;
use bindings::exports::scalebench::plugin::target_adapter::{EncodedBatch, Guest, Message, Plan, StoragePlan, TransportPlan};
use bindings::scalebench::plugin::http_client;
use bindings::scalebench::plugin::types::{HttpRequest, HttpResponse, PerSecond, PluginInfo, PluginKind, Readings, Stat, TagInfo, Window};

/// Readings per request.
const BATCH: usize = 500;

#[derive(Clone)]
struct Params {
    /// The stack service readings go to ("ingest").
    service: String,
    /// Path prefix of the API under the service's base URL ("" or "/v1").
    path: String,
}

thread_local! {
    static PARAMS: RefCell<Params> = RefCell::new(Params { service: "ingest".into(), path: String::new() });
}

fn params() -> Params {
    PARAMS.with(|p| p.borrow().clone())
}

fn address(p: &Params, op: &str) -> String {
    format!("{} {}/{op}", p.service, p.path)
}

/// GET `op` on the service; the body as JSON.
fn get(p: &Params, op: &str) -> Result<serde_json::Value, String> {
    let r = http_client::send(&HttpRequest {
        method: "GET".into(),
        service: p.service.clone(),
        path: format!("{}/{op}", p.path),
        headers: vec![("Accept".into(), "application/json".into())],
        body: Vec::new(),
    })?;
    if r.status != 200 {
        return Err(format!("GET {op}: HTTP {}", r.status));
    }
    serde_json::from_slice(&r.body).map_err(|e| format!("GET {op}: answer is not JSON: {e}"))
}

struct Template;

impl Guest for Template {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "template-adapter".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: "0.1.0".into(),
            kind: PluginKind::TargetAdapter,
            summary: "JSON readings over HTTP to an ingest API, counted back over HTTP (template to copy)".into(),
            params_schema: r#"{"type":"object","additionalProperties":false,"properties":{"service":{"type":"string","default":"ingest"},"path":{"type":"string","default":""}}}"#.into(),
            default_params: r#"{"service":"ingest","path":""}"#.into(),
        }
    }

    fn configure(params_json: String) -> Result<Plan, String> {
        let v: serde_json::Value = serde_json::from_str(if params_json.trim().is_empty() { "{}" } else { &params_json }).map_err(|e| format!("params are not JSON: {e}"))?;
        let obj = v.as_object().ok_or("params must be a JSON object")?;
        if let Some(k) = obj.keys().find(|k| *k != "service" && *k != "path") {
            return Err(format!("unknown param `{k}` (this adapter takes `service` and `path`)"));
        }
        let p = Params {
            service: obj.get("service").and_then(|s| s.as_str()).unwrap_or("ingest").to_string(),
            path: obj.get("path").and_then(|s| s.as_str()).unwrap_or("").trim_end_matches('/').to_string(),
        };
        let plan = Plan { transport: TransportPlan::Http, storage: StoragePlan::Http(p.service.clone()), services: vec![p.service.clone()] };
        PARAMS.with(|x| *x.borrow_mut() = p);
        Ok(plan)
    }

    fn addresses(points: Vec<TagInfo>) -> Vec<String> {
        let a = address(&params(), "ingest");
        points.iter().map(|_| a.clone()).collect()
    }

    fn topology(points: Vec<TagInfo>) -> Vec<Message> {
        let p = params();
        let mut body = String::new();
        for t in &points {
            let _ = writeln!(body, "{}", serde_json::json!({"index": t.index, "label": t.label, "site": t.site, "equip": t.equip, "kind": t.kind, "unit": t.unit}));
        }
        vec![Message { address: address(&p, "topology"), payload: body.into_bytes() }]
    }

    fn encode(batch: Readings) -> EncodedBatch {
        let mut out = EncodedBatch { address_of: Vec::new(), ends: Vec::new(), payload: Vec::new(), carries: Vec::new() };
        let n = batch.points.len();
        let mut i = 0;
        while i < n {
            let end = (i + BATCH).min(n);
            let mut s = String::from("[");
            for j in i..end {
                if j > i {
                    s.push(',');
                }
                let _ = write!(s, "{{\"point\":{},\"value\":{},\"ts\":{}}}", batch.points[j], json_number(batch.values[j]), batch.ts_ms[j]);
            }
            s.push(']');
            out.payload.extend_from_slice(s.as_bytes());
            out.ends.push(out.payload.len() as u32);
            out.address_of.push(batch.points[i]);
            out.carries.push((end - i) as u32);
            i = end;
        }
        out
    }

    fn canary(seq: u64, ts_ms: i64) -> Message {
        Message { address: address(&params(), "canary"), payload: format!("{{\"seq\":{seq},\"ts\":{ts_ms}}}").into_bytes() }
    }

    fn preflight() -> Result<(), String> {
        get(&params(), "count").map(|_| ())
    }

    fn stored(window: Window) -> Result<Vec<PerSecond>, String> {
        let v = get(&params(), &format!("stored?start={}&end={}", window.start_ms, window.end_ms))?;
        let rows = v.as_array().ok_or("stored: answer is not a list")?;
        rows.iter()
            .map(|r| match (r[0].as_i64(), r[1].as_u64()) {
                (Some(second_ms), Some(count)) => Ok(PerSecond { second_ms, count }),
                _ => Err(format!("stored: bad row {r}")),
            })
            .collect()
    }

    fn canaries_stored(from_seq: u64) -> Result<Vec<u64>, String> {
        let v = get(&params(), &format!("canaries?from={from_seq}"))?;
        Ok(v.as_array().ok_or("canaries: answer is not a list")?.iter().filter_map(|s| s.as_u64()).collect())
    }

    fn stats() -> Result<Vec<Stat>, String> {
        Ok(Vec::new())
    }
}

impl HttpIngest for Template {
    fn headers(_address: String) -> Result<Vec<(String, String)>, String> {
        Ok(vec![("Content-Type".into(), "application/json".into())])
    }

    fn judge(_address: String, response: HttpResponse) -> Result<(), String> {
        match serde_json::from_slice::<serde_json::Value>(&response.body) {
            Ok(v) if v.get("error").is_some() => Err(format!("the server refused it: {}", v["error"])),
            _ => Ok(()),
        }
    }
}

/// JSON has no NaN or infinity: send null for them.
fn json_number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

bindings::export!(Template with_types_in bindings);
