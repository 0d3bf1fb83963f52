//! A probe set: two SQL reads of a historian's table of readings (`point`,
//! `ts`, `value`: `point_history`, as the reference historian and the Baler
//! wire contract have it), timed while the load runs, and judged by `check`.
//! Rules of the probe-set world: `setup` runs once per step with the run's
//! points (up to 65,536 of them) and returns the probes; the host runs each
//! once cold and five times warm (SQL read-only, on the run's own database)
//! and holds the warm median to the budget budgets.json gives the probe's
//! name under this set's name (`info().name`); `check` sees every answer and
//! returns Err when it is not a valid one; BTreeMap, never HashMap (its
//! default hasher imports wasi:random, which the host refuses).

mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "probe-set-plugin" });
}

use bindings::exports::scalebench::plugin::probe_set::{Guest, Probe, ProbeRequest, ProbeResponse, SqlProbe};
use bindings::scalebench::plugin::types::{PluginInfo, PluginKind, SqlRows, SqlValue, TagInfo};

/// The stack's database service: the host runs the probes' SQL there.
const DATABASE: &str = "postgres";

// Probe names are matched against budgets.json. These two reuse the names
// (and the meaning) of two `historian-sql` probes, so the budgets of this set
// can start as a copy of those: budgets.json needs a "template-probes" entry
// under "probe_sets" with "latest-all" and "day-1" (or pass --budgets).
const LATEST_ALL: &str = "latest-all";
const DAY_1: &str = "day-1";

const SCHEMA: &str = r#"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","additionalProperties":false,"properties":{
  "table":{"type":"string","default":"point_history","description":"the historian's table of readings (point text, ts timestamptz, value float8), optionally schema-qualified"}}}"#;
const DEFAULTS: &str = r#"{"table":"point_history"}"#;

/// The table to read, from the params; Err names the problem.
fn table(params_json: &str) -> Result<String, String> {
    let text = if params_json.trim().is_empty() { "{}" } else { params_json };
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("params are not JSON: {e}"))?;
    let obj = v.as_object().ok_or("params must be a JSON object such as {\"table\":\"point_history\"}")?;
    if let Some(k) = obj.keys().find(|k| k.as_str() != "table") {
        return Err(format!("unknown param `{k}`: this probe set takes only `table`"));
    }
    let table = match obj.get("table") {
        None => "point_history",
        Some(serde_json::Value::String(s)) => s.as_str(),
        Some(other) => return Err(format!("`table` must be a string, not {other}")),
    };
    let ident = |s: &str| {
        s.len() <= 63
            && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if table.split('.').count() > 2 || !table.split('.').all(ident) {
        return Err(format!(
            "`table` {table:?} is not a plain SQL name (letters, digits, '_', optionally schema.table)"
        ));
    }
    Ok(table.to_string())
}

fn sql(name: &str, description: String, statement: String, params: Vec<SqlValue>) -> Probe {
    Probe {
        name: name.into(),
        description,
        request: ProbeRequest::Sql(SqlProbe { database: DATABASE.into(), statement, params }),
    }
}

/// An integer however the host decoded it.
fn int(v: &SqlValue) -> Option<i64> {
    match v {
        SqlValue::Int(i) => Some(*i),
        SqlValue::Float(f) if f.fract() == 0.0 => Some(*f as i64),
        SqlValue::Text(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn finite(v: &SqlValue) -> bool {
    match v {
        SqlValue::Int(_) => true,
        SqlValue::Float(f) => f.is_finite(),
        SqlValue::Text(s) => s.trim().parse::<f64>().is_ok_and(f64::is_finite),
        _ => false,
    }
}

/// Where each of `wanted` is among the answer's columns; Err names the first missing.
fn columns(name: &str, rows: &SqlRows, wanted: &[&str]) -> Result<Vec<usize>, String> {
    wanted
        .iter()
        .map(|w| {
            rows.columns
                .iter()
                .position(|c| c == w)
                .ok_or_else(|| format!("{name}: column `{w}` missing from the answer (columns: {:?})", rows.columns))
        })
        .collect()
}

struct Probes;

impl Guest for Probes {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "template-probes".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: "0.1.0".into(),
            kind: PluginKind::ProbeSet,
            summary: "a historian's reads as SQL: the latest value of every point, a day of one point".into(),
            params_schema: SCHEMA.into(),
            default_params: DEFAULTS.into(),
        }
    }

    fn setup(params_json: String, points: Vec<TagInfo>) -> Result<Vec<Probe>, String> {
        let t = table(&params_json)?;
        // Time comes back as epoch milliseconds: sql-value has no timestamp.
        let mut probes = vec![sql(
            LATEST_ALL,
            "an operator opens the overview: the latest value of every point".into(),
            format!(
                "SELECT DISTINCT ON (point) point, (extract(epoch FROM ts) * 1000)::bigint AS ts_ms, value \
                 FROM {t} WHERE point <> 'canary/lag' ORDER BY point, ts DESC"
            ),
            vec![],
        )];
        // The run's first point, by the id the Baler wire stores it under.
        if let Some(p) = points.iter().min_by_key(|p| p.index) {
            let id = format!("s{}/e{}/{}", p.site, p.equip, p.label);
            probes.push(sql(
                DAY_1,
                format!("an engineer looks at one day of one point's trend ({id})"),
                format!(
                    "SELECT (extract(epoch FROM ts) * 1000)::bigint AS ts_ms, value FROM {t} \
                     WHERE point = $1::text AND ts >= now() - interval '1 day' ORDER BY ts"
                ),
                vec![SqlValue::Text(id)],
            ));
        }
        Ok(probes)
    }

    /// An answer is valid when it has the probe's columns, at least one row,
    /// an integer `ts_ms` and a finite `value` in every row.
    fn check(name: String, response: ProbeResponse) -> Result<(), String> {
        let rows = match response {
            ProbeResponse::Sql(rows) => rows,
            ProbeResponse::Http(r) => {
                return Err(format!("{name}: expected SQL rows, got an HTTP answer (status {})", r.status))
            }
        };
        let wanted: &[&str] = match name.as_str() {
            LATEST_ALL => &["point", "ts_ms", "value"],
            DAY_1 => &["ts_ms", "value"],
            _ => return Err(format!("{name}: not a probe of this set ({LATEST_ALL}, {DAY_1})")),
        };
        let at = columns(&name, &rows, wanted)?;
        let (ts, value) = (at[at.len() - 2], at[at.len() - 1]);
        if rows.rows.is_empty() {
            return Err(format!(
                "{name}: no rows: readings are not reaching the table, or the read ran before the first ones landed"
            ));
        }
        for (i, row) in rows.rows.iter().enumerate() {
            if row.len() != rows.columns.len() {
                return Err(format!("{name}: row {i} has {} values for {} columns", row.len(), rows.columns.len()));
            }
            if int(&row[ts]).is_none() {
                return Err(format!("{name}: row {i}: ts_ms is {:?}, not an integer", row[ts]));
            }
            if !finite(&row[value]) {
                return Err(format!("{name}: row {i}: value is {:?}, not a finite number", row[value]));
            }
        }
        Ok(())
    }
}

bindings::export!(Probes with_types_in bindings);
