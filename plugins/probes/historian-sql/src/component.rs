//! Component glue: WIT types in, pure modules, WIT types out.

use std::cell::RefCell;

use scalebench_plugin_sdk::probe_set::exports::scalebench::plugin::probe_set::{
    Guest, Probe, ProbeRequest, ProbeResponse, SqlProbe,
};
use scalebench_plugin_sdk::probe_set::scalebench::plugin::logging;
use scalebench_plugin_sdk::probe_set::scalebench::plugin::types::{
    LogLevel, PluginInfo, PluginKind, SqlValue, TagInfo,
};

use crate::params::{self, Params};
use crate::probes::{self, Plan, Point, Rows, Value};

thread_local! {
    static PLAN: RefCell<Plan> = RefCell::new(Plan::default());
}

fn to_wit(v: Value) -> SqlValue {
    match v {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Boolean(b),
        Value::Int(i) => SqlValue::Int(i),
        Value::Float(f) => SqlValue::Float(f),
        Value::Text(s) => SqlValue::Text(s),
    }
}

fn from_wit(v: SqlValue) -> Value {
    match v {
        SqlValue::Null => Value::Null,
        SqlValue::Boolean(b) => Value::Bool(b),
        SqlValue::Int(i) => Value::Int(i),
        SqlValue::Float(f) => Value::Float(f),
        SqlValue::Text(s) => Value::Text(s),
    }
}

struct HistorianSql;

impl Guest for HistorianSql {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "historian-sql".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: scalebench_plugin_sdk::ABI_VERSION.into(),
            kind: PluginKind::ProbeSet,
            summary: "a historian's reads as SQL on point_history: latest of every point, an hour of 1,000 points, a day of one".into(),
            params_schema: params::SCHEMA.into(),
            default_params: params::DEFAULT_JSON.into(),
        }
    }

    fn setup(params_json: String, points: Vec<TagInfo>) -> Result<Vec<Probe>, String> {
        let p = Params::from_json(&params_json)?;
        let points: Vec<Point> = points
            .into_iter()
            .map(|t| Point { index: t.index, site: t.site, equip: t.equip, label: t.label })
            .collect();
        let (list, plan, notes) = probes::setup(&p, &points);
        for n in notes {
            logging::log(LogLevel::Warn, &n);
        }
        PLAN.with(|s| *s.borrow_mut() = plan);
        Ok(list
            .into_iter()
            .map(|x| Probe {
                name: x.name,
                description: x.description,
                request: ProbeRequest::Sql(SqlProbe {
                    database: x.database,
                    statement: x.statement,
                    params: x.params.into_iter().map(to_wit).collect(),
                }),
            })
            .collect())
    }

    fn check(name: String, response: ProbeResponse) -> Result<(), String> {
        let rows = match response {
            ProbeResponse::Sql(r) => Rows {
                columns: r.columns,
                rows: r.rows.into_iter().map(|row| row.into_iter().map(from_wit).collect()).collect(),
            },
            ProbeResponse::Http(h) => {
                return Err(format!("{name}: expected SQL rows, got an HTTP response (status {})", h.status))
            }
        };
        PLAN.with(|s| probes::check(&s.borrow(), &name, &rows))
    }
}

scalebench_plugin_sdk::export_probe_set!(HistorianSql);
