//! Component glue: WIT types in, pure modules, WIT types out.

/// World `target-adapter-history-plugin`: target-adapter plus history-sink.
mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit",
        world: "target-adapter-history-plugin",
    });
}

use std::cell::RefCell;

use bindings::exports::scalebench::plugin::target_adapter::{
    EncodedBatch, Guest, Message, MqttPlan, Plan, StoragePlan, TransportPlan,
};
use bindings::scalebench::plugin::types::{
    LogLevel, PerSecond, PluginInfo, PluginKind, Readings, SqlValue, Stat, TagInfo, Window,
};
use bindings::scalebench::plugin::{logging, sql_client};

use bindings::exports::scalebench::plugin::history_sink::{Guest as HistoryGuest, HistoryPlan, SqlCopyPlan};

use crate::history;
use crate::params::{self, Params};
use crate::sql::{self, Db, Rows, Value};
use crate::wire::{Encoded, Msg, Tag, Wire};

thread_local! {
    static WIRE: RefCell<Wire> = RefCell::new(Wire::new(Params::default()));
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

/// The host's sql-client bound to the configured database service.
struct HostDb(String);

impl Db for HostDb {
    fn query(&self, statement: &str, params: Vec<Value>) -> Result<Rows, String> {
        let params: Vec<SqlValue> = params
            .into_iter()
            .map(|v| match v {
                Value::Null => SqlValue::Null,
                Value::Bool(b) => SqlValue::Boolean(b),
                Value::Int(i) => SqlValue::Int(i),
                Value::Float(f) => SqlValue::Float(f),
                Value::Text(s) => SqlValue::Text(s),
            })
            .collect();
        let r = sql_client::query(&self.0, statement, &params)?;
        Ok(Rows {
            columns: r.columns,
            rows: r
                .rows
                .into_iter()
                .map(|row| {
                    row.into_iter()
                        .map(|v| match v {
                            SqlValue::Null => Value::Null,
                            SqlValue::Boolean(b) => Value::Bool(b),
                            SqlValue::Int(i) => Value::Int(i),
                            SqlValue::Float(f) => Value::Float(f),
                            SqlValue::Text(s) => Value::Text(s),
                        })
                        .collect()
                })
                .collect(),
        })
    }
}

struct Baler;

impl Guest for Baler {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "baler".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: "0.1.0".into(),
            kind: PluginKind::TargetAdapter,
            summary: "Baler wire contract: MQTT QoS 1 retained {point,value,ts} readings, stored rows counted in Postgres point_history".into(),
            params_schema: params::SCHEMA.into(),
            default_params: params::DEFAULT_JSON.into(),
        }
    }

    fn configure(params_json: String) -> Result<Plan, String> {
        let p = Params::from_json(&params_json)?;
        let plan = Plan {
            transport: TransportPlan::Mqtt(MqttPlan { qos: 1, retain: true }),
            storage: StoragePlan::Sql(p.database.clone()),
            services: vec!["broker".into(), p.database.clone()],
        };
        // A new configuration starts a new run: forget the points of the last one.
        WIRE.with(|w| *w.borrow_mut() = Wire::new(p));
        Ok(plan)
    }

    fn addresses(points: Vec<TagInfo>) -> Vec<String> {
        let tags: Vec<Tag> = points.into_iter().map(tag).collect();
        WIRE.with(|w| w.borrow_mut().addresses(&tags))
    }

    fn topology(points: Vec<TagInfo>) -> Vec<Message> {
        let tags: Vec<Tag> = points.into_iter().map(tag).collect();
        WIRE.with(|w| w.borrow_mut().topology(&tags)).into_iter().map(msg).collect()
    }

    fn encode(batch: Readings) -> EncodedBatch {
        let mut out = Encoded::default();
        let r = WIRE.with(|w| w.borrow_mut().encode_into(&batch.points, &batch.values, &batch.ts_ms, &mut out));
        if let Err(e) = r {
            // The contract gives encode no error channel: say why, then trap so
            // the host stops the run instead of sending readings to nowhere.
            logging::log(LogLevel::Error, &e.to_string());
            panic!("{e}");
        }
        EncodedBatch { address_of: out.address_of, ends: out.ends, payload: out.payload, carries: out.carries }
    }

    fn canary(seq: u64, ts_ms: i64) -> Message {
        msg(WIRE.with(|w| w.borrow_mut().canary(seq, ts_ms)))
    }

    fn preflight() -> Result<(), String> {
        let p = params();
        for note in sql::preflight(&p, &HostDb(p.database.clone()))? {
            logging::log(LogLevel::Info, &note);
        }
        Ok(())
    }

    fn stored(window: Window) -> Result<Vec<PerSecond>, String> {
        let p = params();
        let points = WIRE.with(|w| w.borrow().point_ids());
        Ok(sql::stored(&p, &HostDb(p.database.clone()), window.start_ms, window.end_ms, &points)?
            .into_iter()
            .map(|(second_ms, count)| PerSecond { second_ms, count })
            .collect())
    }

    fn canaries_stored(from_seq: u64) -> Result<Vec<u64>, String> {
        let p = params();
        sql::canaries_stored(&p, &HostDb(p.database.clone()), from_seq)
    }

    fn stats() -> Result<Vec<Stat>, String> {
        let p = params();
        Ok(sql::stats(&p, &HostDb(p.database.clone()))?
            .into_iter()
            .map(|s| Stat { name: s.name, number: s.number, text: s.text })
            .collect())
    }
}

impl HistoryGuest for Baler {
    fn describe() -> Result<HistoryPlan, String> {
        let c = history::copy_plan(&params());
        Ok(HistoryPlan::SqlCopy(SqlCopyPlan {
            database: c.database,
            table: c.table,
            point_column: c.point_column,
            ts_column: c.ts_column,
            value_column: c.value_column,
            key_columns: c.key_columns,
        }))
    }

    fn point_keys(points: Vec<TagInfo>) -> Vec<String> {
        points.into_iter().map(|t| history::point_key(&tag(t))).collect()
    }
}

bindings::export!(Baler with_types_in bindings);
