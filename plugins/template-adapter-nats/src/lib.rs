//! A target adapter over NATS JetStream: one JSON envelope per reading,
//! `{"point":"s1/e2/temp","value":21.5,"ts":"2026-11-30T14:00:00.123Z"}`, on
//! the subject `<subject_prefix>.s<site>.e<equip>.<label>`, into a stream the
//! host creates from the plan. The host publishes with JetStream acks and
//! counts what the stream stored itself (storage plan `jetstream`), so this
//! adapter has no counting to do. Rules of the target-adapter world: the
//! adapter describes, the host does and times; each instance the host loads
//! (encoder, counter, canary) learns the run's points from its own calls;
//! `encode` gets thousands of readings a call; BTreeMap, never HashMap (its
//! default hasher imports wasi:random, which the host refuses).

mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "target-adapter-plugin" });
}

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write as _;

use bindings::exports::scalebench::plugin::target_adapter::{
    EncodedBatch, Guest, JetstreamPlan, Message, Plan, StoragePlan, TransportPlan,
};
use bindings::scalebench::plugin::types::{PerSecond, PluginInfo, PluginKind, Readings, Stat, TagInfo, Window};

/// What `stored` and `canaries-stored` answer: they are never called for this plan.
const HOST_COUNTS: &str =
    "The host counts the stored messages in the JetStream stream itself; this adapter does not count.";

const SCHEMA: &str = r#"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","additionalProperties":false,"properties":{
  "stream":{"type":"string","default":"SCALE","description":"the JetStream stream (no '.', '*', '>', '/', '\\' or whitespace)"},
  "subject_prefix":{"type":"string","default":"scale.readings","description":"readings go to <subject_prefix>.s<site>.e<equip>.<label>"},
  "canary_subject":{"type":"string","default":"scale.canary.lag","description":"subject of the lag canary, outside subject_prefix"}}}"#;
const DEFAULTS: &str = r#"{"stream":"SCALE","subject_prefix":"scale.readings","canary_subject":"scale.canary.lag"}"#;

#[derive(Clone)]
struct Params {
    stream: String,
    subject_prefix: String,
    canary_subject: String,
}

/// Is `s` a literal subject: non-empty tokens, no wildcards, no whitespace?
fn literal_subject(s: &str) -> bool {
    !s.starts_with('$')
        && s.split('.').all(|t| !t.is_empty() && !t.contains(['*', '>']) && !t.contains(char::is_whitespace))
}

fn parse_params(json: &str) -> Result<Params, String> {
    let text = if json.trim().is_empty() { "{}" } else { json };
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("params are not JSON: {e}"))?;
    let obj = v.as_object().ok_or("params must be a JSON object such as {\"stream\":\"SCALE\"}")?;
    if let Some(k) = obj.keys().find(|k| !["stream", "subject_prefix", "canary_subject"].contains(&k.as_str())) {
        return Err(format!("unknown param `{k}`: this adapter takes `stream`, `subject_prefix` and `canary_subject`"));
    }
    let get = |k: &str, default: &str| match obj.get(k) {
        None => Ok(default.to_string()),
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("`{k}` must be a string, not {other}")),
    };
    let p = Params {
        stream: get("stream", "SCALE")?,
        subject_prefix: get("subject_prefix", "scale.readings")?,
        canary_subject: get("canary_subject", "scale.canary.lag")?,
    };
    if p.stream.is_empty()
        || p.stream.len() > 255
        || p.stream.contains(['.', '*', '>', '/', '\\'])
        || p.stream.contains(char::is_whitespace)
    {
        return Err(format!(
            "`stream` {:?} is not a stream name: 1 to 255 characters, no '.', '*', '>', '/', '\\' or whitespace",
            p.stream
        ));
    }
    for (k, s) in [("subject_prefix", &p.subject_prefix), ("canary_subject", &p.canary_subject)] {
        if !literal_subject(s) {
            return Err(format!("`{k}` {s:?} is not a literal subject: non-empty '.'-separated tokens, no '*', '>' or whitespace, not starting with '$'"));
        }
    }
    if p.canary_subject.starts_with(&format!("{}.", p.subject_prefix)) {
        return Err(format!(
            "`canary_subject` {:?} lies under `subject_prefix`: give a subject outside it",
            p.canary_subject
        ));
    }
    Ok(p)
}

/// What one instance knows: its params, the run's point ids by tag index,
/// and the points of each equip described so far.
struct State {
    params: Params,
    ids: Vec<String>,
    equips: BTreeMap<(u32, u32), Vec<String>>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State {
        params: parse_params("{}").expect("the defaults are valid"),
        ids: Vec::new(),
        equips: BTreeMap::new(),
    });
}

/// `s<site>/e<equip>/<label>`: the envelope's `point`.
fn point_id(t: &TagInfo) -> String {
    format!("s{}/e{}/{}", t.site, t.equip, t.label)
}

/// `<subject_prefix>.s<site>.e<equip>.<label>`, the label made one token
/// (labels are promised token-safe, so this normally changes nothing).
fn subject(p: &Params, t: &TagInfo) -> String {
    let token: String =
        t.label.chars().map(|c| if matches!(c, '.' | '*' | '>') || c.is_whitespace() { '_' } else { c }).collect();
    format!("{}.s{}.e{}.{}", p.subject_prefix, t.site, t.equip, if token.is_empty() { "_" } else { &token })
}

fn remember(s: &mut State, points: &[TagInfo]) {
    for t in points {
        let i = t.index as usize;
        if s.ids.len() <= i {
            s.ids.resize(i + 1, String::new());
        }
        s.ids[i] = point_id(t);
    }
}

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let (era, doe) = (z.div_euclid(146_097), z.rem_euclid(146_097));
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

/// `{"point":"<id>","value":<value>,"ts":"<ISO-8601 UTC, ms>"}`; NaN and
/// infinities have no JSON form and go as `null` (not a reading: loss).
fn envelope(out: &mut Vec<u8>, id: &str, value: f64, ts_ms: i64) {
    out.extend_from_slice(b"{\"point\":");
    serde_json::to_writer(&mut *out, id).expect("a string is JSON");
    if value.is_finite() {
        let _ = write!(out, ",\"value\":{value}");
    } else {
        out.extend_from_slice(b",\"value\":null");
    }
    let (days, ms) = (ts_ms.div_euclid(86_400_000), ts_ms.rem_euclid(86_400_000));
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s, milli) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    let _ = write!(out, ",\"ts\":\"{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z\"}}");
}

/// A point's tags, Haystack JSON style: markers "m:", refs "r:<id>".
fn point_tags(t: &TagInfo) -> String {
    let mut m = serde_json::Map::new();
    for marker in &t.markers {
        m.insert(marker.clone(), "m:".into());
    }
    m.insert("point".into(), "m:".into());
    m.insert("id".into(), format!("r:{}", point_id(t)).into());
    m.insert("dis".into(), format!("Site {} Equip {} {}", t.site, t.equip, t.label).into());
    m.insert("kind".into(), t.kind.clone().into());
    if !t.unit.is_empty() {
        m.insert("unit".into(), t.unit.clone().into());
    }
    m.insert("equipRef".into(), format!("r:s{}/e{}", t.site, t.equip).into());
    m.insert("siteRef".into(), format!("r:s{}", t.site).into());
    serde_json::Value::Object(m).to_string()
}

struct Adapter;

impl Guest for Adapter {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "template-adapter-nats".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: "0.1.0".into(),
            kind: PluginKind::TargetAdapter,
            summary: "NATS JetStream: one {point,value,ts} message per reading, stored messages counted by the host in the stream".into(),
            params_schema: SCHEMA.into(),
            default_params: DEFAULTS.into(),
        }
    }

    fn configure(params_json: String) -> Result<Plan, String> {
        let p = parse_params(&params_json)?;
        let plan = Plan {
            transport: TransportPlan::NatsJetstream(JetstreamPlan {
                stream_name: p.stream.clone(),
                // Readings and tags under the prefix first, then the canary's subject.
                subjects: vec![format!("{}.>", p.subject_prefix), p.canary_subject.clone()],
                storage: "file".into(),
                replicas: 1,
                max_msgs: 0,
            }),
            storage: StoragePlan::Jetstream(p.stream.clone()),
            services: vec!["nats".into()],
        };
        // A new configuration starts a new run: forget the points of the last one.
        STATE.with(|s| *s.borrow_mut() = State { params: p, ids: Vec::new(), equips: BTreeMap::new() });
        Ok(plan)
    }

    fn addresses(points: Vec<TagInfo>) -> Vec<String> {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            remember(&mut s, &points);
            points.iter().map(|t| subject(&s.params, t)).collect()
        })
    }

    /// For each equip that gained points: its tags message (every point of
    /// it so far), then the tags message of each new point.
    fn topology(points: Vec<TagInfo>) -> Vec<Message> {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            remember(&mut s, &points);
            let mut grown: BTreeMap<(u32, u32), Vec<&TagInfo>> = BTreeMap::new();
            for t in &points {
                let listed = s.equips.entry((t.site, t.equip)).or_default();
                let id = point_id(t);
                if !listed.contains(&id) {
                    listed.push(id);
                }
                grown.entry((t.site, t.equip)).or_default().push(t);
            }
            let mut out = Vec::new();
            for ((site, equip), group) in grown {
                let tags = serde_json::json!({"id": format!("r:s{site}/e{equip}"), "dis": format!("Site {site} Equip {equip}"), "equip": "m:", "siteRef": format!("r:s{site}")});
                let payload = serde_json::json!({"tags": tags.to_string(), "points": s.equips[&(site, equip)]});
                let address = format!("{}.s{site}.e{equip}.equip.tags", s.params.subject_prefix);
                out.push(Message { address, payload: payload.to_string().into_bytes() });
                for t in group {
                    out.push(Message { address: format!("{}.tags", subject(&s.params, t)), payload: point_tags(t).into_bytes() });
                }
            }
            out
        })
    }

    /// One message per reading, on the reading's own subject (its tag index
    /// in the host's address table).
    fn encode(batch: Readings) -> EncodedBatch {
        let n = batch.points.len();
        let mut out = EncodedBatch {
            address_of: batch.points.clone(),
            ends: Vec::with_capacity(n),
            payload: Vec::with_capacity(n * 80),
            carries: vec![1; n],
        };
        STATE.with(|s| {
            let s = s.borrow();
            for i in 0..n {
                let p = batch.points[i] as usize;
                let id = s.ids.get(p).filter(|id| !id.is_empty());
                // encode has no error channel: trap, and the host stops the run with this message.
                let id = id.unwrap_or_else(|| panic!("encode: point {p} was never passed to `addresses`"));
                envelope(&mut out.payload, id, batch.values[i], batch.ts_ms[i]);
                out.ends.push(out.payload.len() as u32);
            }
        });
        out
    }

    fn canary(seq: u64, ts_ms: i64) -> Message {
        let mut payload = Vec::new();
        envelope(&mut payload, "canary/lag", seq as f64, ts_ms);
        Message { address: STATE.with(|s| s.borrow().params.canary_subject.clone()), payload }
    }

    /// Nothing to check: the host creates or checks the stream itself.
    fn preflight() -> Result<(), String> {
        Ok(())
    }

    fn stored(_window: Window) -> Result<Vec<PerSecond>, String> {
        Err(HOST_COUNTS.into())
    }

    fn canaries_stored(_from_seq: u64) -> Result<Vec<u64>, String> {
        Err(HOST_COUNTS.into())
    }

    /// The stream as configured; its live state is the host's to read.
    fn stats() -> Result<Vec<Stat>, String> {
        let p = STATE.with(|s| s.borrow().params.clone());
        Ok(vec![
            Stat { name: "jetstream.stream".into(), number: None, text: Some(p.stream) },
            Stat { name: "jetstream.storage".into(), number: None, text: Some("file".into()) },
            Stat { name: "jetstream.replicas".into(), number: Some(1.0), text: None },
            Stat { name: "jetstream.max_msgs".into(), number: Some(0.0), text: None },
        ])
    }
}

bindings::export!(Adapter with_types_in bindings);
