//! Component glue: WIT types in, pure modules, WIT types out.

use std::cell::RefCell;

use scalebench_plugin_sdk::target_adapter::exports::scalebench::plugin::target_adapter::{
    EncodedBatch, Guest, JetstreamPlan, Message, Plan, StoragePlan, TransportPlan,
};
use scalebench_plugin_sdk::target_adapter::scalebench::plugin::logging;
use scalebench_plugin_sdk::target_adapter::scalebench::plugin::types::{
    LogLevel, PerSecond, PluginInfo, PluginKind, Readings, Stat, TagInfo, Window,
};

use crate::params::{self, Params, HOST_COUNTS};
use crate::wire::{Encoded, Msg, Tag, Wire};

thread_local! {
    static WIRE: RefCell<Wire> = RefCell::new(Wire::new(Params::default()));
}

fn tag(t: TagInfo) -> Tag {
    Tag { index: t.index, kind: t.kind, unit: t.unit, site: t.site, equip: t.equip, label: t.label, markers: t.markers }
}

fn msg(m: Msg) -> Message {
    Message { address: m.address, payload: m.payload }
}

struct NatsJetStream;

impl Guest for NatsJetStream {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "nats-jetstream".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            abi: scalebench_plugin_sdk::ABI_VERSION.into(),
            kind: PluginKind::TargetAdapter,
            summary: "NATS JetStream: one {point,value,ts} message per reading on <prefix>.s<site>.e<equip>.<label>, stored messages counted by the host in the stream".into(),
            params_schema: params::SCHEMA.into(),
            default_params: params::DEFAULT_JSON.into(),
        }
    }

    fn configure(params_json: String) -> Result<Plan, String> {
        let p = Params::from_json(&params_json)?;
        let plan = p.plan();
        let js = plan.jetstream;
        let out = Plan {
            transport: TransportPlan::NatsJetstream(JetstreamPlan {
                stream_name: js.stream_name,
                subjects: js.subjects,
                storage: js.storage,
                replicas: js.replicas,
                max_msgs: js.max_msgs,
            }),
            storage: StoragePlan::Jetstream(plan.storage_stream),
            services: plan.services,
        };
        // A new configuration starts a new run: forget the points of the last one.
        WIRE.with(|w| *w.borrow_mut() = Wire::new(p));
        Ok(out)
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

    /// Nothing to check here: for storage-plan `jetstream` the host creates
    /// or inspects the stream itself.
    fn preflight() -> Result<(), String> {
        Ok(())
    }

    fn stored(_window: Window) -> Result<Vec<PerSecond>, String> {
        Err(HOST_COUNTS.into())
    }

    fn canaries_stored(_from_seq: u64) -> Result<Vec<u64>, String> {
        Err(HOST_COUNTS.into())
    }

    fn stats() -> Result<Vec<Stat>, String> {
        let stats = WIRE.with(|w| w.borrow().params.stats());
        Ok(stats.into_iter().map(|s| Stat { name: s.name, number: s.number, text: s.text }).collect())
    }
}

scalebench_plugin_sdk::export_target_adapter!(NatsJetStream);
