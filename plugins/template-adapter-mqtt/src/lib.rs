//! A target adapter over MQTT that speaks the Baler wire contract, so it runs
//! as it is against scalebench's local stack (mosquitto, the reference
//! historian, PostgreSQL): one JSON envelope per reading,
//! `{"point":"s1/e2/temp","value":21.5,"ts":"2026-11-30T14:00:00.123Z"}`, on
//! `<prefix>/s<site>/e<equip>/<label>` (QoS 1, retained); the historian stores
//! it as a row of `<table>` (point, ts, value), counted back here with SQL.
//! Rules of the target-adapter world: the adapter describes, the host does
//! (sends, runs the SQL read-only, times both); each instance the host loads
//! (encoder, counter, canary) learns the run's points from its own calls;
//! `stored` counts what the server really holds, canaries excluded; BTreeMap,
//! never HashMap (its default hasher imports wasi:random, which the host refuses).

mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "target-adapter-plugin" });
}

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write as _;

use bindings::exports::scalebench::plugin::target_adapter::{
    EncodedBatch, Guest, Message, MqttPlan, Plan, StoragePlan, TransportPlan,
};
use bindings::scalebench::plugin::sql_client;
use bindings::scalebench::plugin::types::{
    PerSecond, PluginInfo, PluginKind, Readings, SqlRows, SqlValue, Stat, TagInfo, Window,
};

/// The stack's database service: the host runs this adapter's SQL there.
const DATABASE: &str = "postgres";
/// The lag canary's point id, as the historian stores it.
const CANARY_POINT: &str = "canary/lag";

const SCHEMA: &str = r#"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","additionalProperties":false,"properties":{
  "prefix":{"type":"string","default":"fbf/scale","description":"MQTT topic prefix of readings, tags and the canary (the reference historian subscribes fbf/#)"},
  "table":{"type":"string","default":"point_history","description":"the historian's table of readings, optionally schema-qualified"}}}"#;
const DEFAULTS: &str = r#"{"prefix":"fbf/scale","table":"point_history"}"#;

#[derive(Clone)]
struct Params {
    prefix: String,
    table: String,
}

fn parse_params(json: &str) -> Result<Params, String> {
    let text = if json.trim().is_empty() { "{}" } else { json };
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("params are not JSON: {e}"))?;
    let obj = v.as_object().ok_or("params must be a JSON object such as {\"prefix\":\"fbf/scale\"}")?;
    if let Some(k) = obj.keys().find(|k| !["prefix", "table"].contains(&k.as_str())) {
        return Err(format!("unknown param `{k}`: this adapter takes `prefix` and `table`"));
    }
    let get = |k: &str, default: &str| match obj.get(k) {
        None => Ok(default.to_string()),
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("`{k}` must be a string, not {other}")),
    };
    let p = Params { prefix: get("prefix", "fbf/scale")?, table: get("table", "point_history")? };
    if p.prefix.is_empty() || p.prefix.starts_with('/') || p.prefix.ends_with('/') || p.prefix.contains(['+', '#']) {
        return Err(format!(
            "`prefix` {:?} is not a topic prefix such as \"fbf/scale\" (no leading or trailing '/', no '+' or '#')",
            p.prefix
        ));
    }
    let ident = |s: &str| {
        s.len() <= 63
            && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if p.table.split('.').count() > 2 || !p.table.split('.').all(ident) {
        return Err(format!(
            "`table` {:?} is not a plain SQL name (letters, digits, '_', optionally schema.table)",
            p.table
        ));
    }
    Ok(p)
}

/// What one instance knows: its params, the run's point ids by tag index
/// (from `addresses` and `topology`), and the points of each equip described.
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

fn params() -> Params {
    STATE.with(|s| s.borrow().params.clone())
}

/// `s<site>/e<equip>/<label>`: the envelope's `point`, and the stored one.
fn point_id(t: &TagInfo) -> String {
    format!("s{}/e{}/{}", t.site, t.equip, t.label)
}

fn topic(p: &Params, t: &TagInfo) -> String {
    format!("{}/{}", p.prefix, point_id(t))
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

/// `{"point":"<id>","value":<value>,"ts":"<ISO-8601 UTC, ms>"}`. NaN and
/// infinities have no JSON form: `null`, which the historian refuses (loss).
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

// ---- SQL, run by the host on the stack's database ----------------------------

fn query(what: &str, statement: &str, params: &[SqlValue]) -> Result<SqlRows, String> {
    sql_client::query(DATABASE, statement, params)
        .map_err(|e| format!("{what} failed on database service `{DATABASE}` (is the stack's PostgreSQL up?): {e}"))
}

/// An integer however the host decoded it.
fn int(v: Option<&SqlValue>) -> Option<i64> {
    match v? {
        SqlValue::Int(i) => Some(*i),
        SqlValue::Float(f) if f.fract() == 0.0 => Some(*f as i64),
        SqlValue::Text(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A PostgreSQL array literal of text: `{"a","b\"c"}`.
fn text_array(items: &[String]) -> String {
    let quoted: Vec<String> =
        items.iter().map(|s| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))).collect();
    format!("{{{}}}", quoted.join(","))
}

struct Adapter;

impl Guest for Adapter {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "template-adapter-mqtt".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: "0.1.0".into(),
            kind: PluginKind::TargetAdapter,
            summary: "MQTT QoS 1 retained {point,value,ts} envelopes (the Baler wire), stored rows counted with SQL"
                .into(),
            params_schema: SCHEMA.into(),
            default_params: DEFAULTS.into(),
        }
    }

    fn configure(params_json: String) -> Result<Plan, String> {
        let p = parse_params(&params_json)?;
        // A new configuration starts a new run: forget the points of the last one.
        STATE.with(|s| *s.borrow_mut() = State { params: p, ids: Vec::new(), equips: BTreeMap::new() });
        Ok(Plan {
            transport: TransportPlan::Mqtt(MqttPlan { qos: 1, retain: true }),
            storage: StoragePlan::Sql(DATABASE.into()),
            services: vec!["broker".into(), DATABASE.into()],
        })
    }

    fn addresses(points: Vec<TagInfo>) -> Vec<String> {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            remember(&mut s, &points);
            points.iter().map(|t| topic(&s.params, t)).collect()
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
                let address = format!("{}/s{site}/e{equip}/equip/tags", s.params.prefix);
                out.push(Message { address, payload: payload.to_string().into_bytes() });
                for t in group {
                    out.push(Message { address: format!("{}/tags", topic(&s.params, t)), payload: point_tags(t).into_bytes() });
                }
            }
            out
        })
    }

    /// One message per reading, sent to the reading's own topic (its tag index
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
        let p = params();
        let mut payload = Vec::new();
        envelope(&mut payload, CANARY_POINT, seq as f64, ts_ms);
        Message { address: format!("{}/canary/lag", p.prefix), payload }
    }

    /// The table exists and holds no canaries of an earlier run (they would
    /// be taken for this run's).
    fn preflight() -> Result<(), String> {
        let t = params().table;
        let found =
            query("checking the table exists", "SELECT to_regclass($1::text)::text", &[SqlValue::Text(t.clone())])?;
        if matches!(found.rows.first().and_then(|r| r.first()), None | Some(SqlValue::Null)) {
            return Err(format!("table `{t}` does not exist: start the historian (it creates the table) before the run, or give `table`"));
        }
        let statement = format!("SELECT count(*)::bigint FROM (SELECT 1 FROM {t} WHERE point = $1::text LIMIT 1) AS c");
        let left = query("looking for canaries of an earlier run", &statement, &[SqlValue::Text(CANARY_POINT.into())])?;
        if int(left.rows.first().and_then(|r| r.first())) != Some(0) {
            return Err(format!("table `{t}` already holds `{CANARY_POINT}` rows of an earlier run: empty it (TRUNCATE {t}) or start a fresh stack"));
        }
        Ok(())
    }

    /// Rows of this run's points whose payload ts is in the window, per second.
    fn stored(window: Window) -> Result<Vec<PerSecond>, String> {
        let (t, ids) = STATE.with(|s| {
            let s = s.borrow();
            (s.params.table.clone(), s.ids.iter().filter(|id| !id.is_empty()).cloned().collect::<Vec<_>>())
        });
        if ids.is_empty() || window.end_ms <= window.start_ms {
            return Ok(Vec::new());
        }
        let statement = format!(
            "SELECT (floor(extract(epoch FROM h.ts)) * 1000)::bigint, count(*)::bigint \
             FROM {t} h JOIN unnest($3::text::text[]) AS run(point) ON h.point = run.point \
             WHERE h.ts >= timestamptz 'epoch' + $1::bigint * interval '1 millisecond' \
               AND h.ts < timestamptz 'epoch' + $2::bigint * interval '1 millisecond' \
             GROUP BY 1 ORDER BY 1"
        );
        let params = [SqlValue::Int(window.start_ms), SqlValue::Int(window.end_ms), SqlValue::Text(text_array(&ids))];
        let rows = query("counting stored readings", &statement, &params)?;
        rows.rows
            .iter()
            .map(|r| match (int(r.first()), int(r.get(1))) {
                (Some(second_ms), Some(count)) if count >= 0 => Ok(PerSecond { second_ms, count: count as u64 }),
                _ => Err(format!("stored: expected rows of (second_ms, count), got {r:?}")),
            })
            .collect()
    }

    fn canaries_stored(from_seq: u64) -> Result<Vec<u64>, String> {
        let t = params().table;
        let statement =
            format!("SELECT DISTINCT value::bigint FROM {t} WHERE point = $1::text AND value >= $2::bigint ORDER BY 1");
        let from = i64::try_from(from_seq).unwrap_or(i64::MAX);
        let rows =
            query("reading stored canaries", &statement, &[SqlValue::Text(CANARY_POINT.into()), SqlValue::Int(from)])?;
        Ok(rows.rows.iter().filter_map(|r| int(r.first())).filter_map(|s| u64::try_from(s).ok()).collect())
    }

    /// Durability settings (live) and sizes: names docs/plugin-contract.md lists.
    fn stats() -> Result<Vec<Stat>, String> {
        let statement = "SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('full_page_writes'), \
                         pg_total_relation_size(to_regclass($1::text))::bigint, pg_database_size(current_database())::bigint";
        let rows = query("reading durability settings and sizes", statement, &[SqlValue::Text(params().table)])?;
        let row = rows.rows.first().ok_or("stats: the database answered no row")?;
        let text = |i: usize| match row.get(i) {
            Some(SqlValue::Text(s)) => Some(s.clone()),
            _ => None,
        };
        let number = |i: usize| int(row.get(i)).map(|n| n as f64);
        Ok(vec![
            Stat { name: "durability.fsync".into(), number: None, text: text(0) },
            Stat { name: "durability.synchronous_commit".into(), number: None, text: text(1) },
            Stat { name: "durability.full_page_writes".into(), number: None, text: text(2) },
            Stat { name: "db.table_bytes".into(), number: number(3), text: None },
            Stat { name: "db.database_bytes".into(), number: number(4), text: None },
        ])
    }
}

bindings::export!(Adapter with_types_in bindings);
