//! Test plugin: a target adapter built from a stale copy of the contract
//! (its wit has no `stats`, as an adapter written before it was added). The
//! host must name the export that does not match and say to copy the wit.

mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "target-adapter-plugin" });
}
use bindings::exports::scalebench::plugin::target_adapter::{EncodedBatch, Guest, Message, Plan, StoragePlan, TransportPlan};
use bindings::scalebench::plugin::types::{PerSecond, PluginInfo, PluginKind, Readings, TagInfo, Window};

struct Odd;

impl Guest for Odd {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "bad-stale-wit".into(),
            version: "0.1.0".into(),
            abi: "0.1.0".into(),
            kind: PluginKind::TargetAdapter,
            summary: "an adapter for a system no built-in stack runs".into(),
            params_schema: "{}".into(),
            default_params: "{}".into(),
        }
    }
    fn configure(_p: String) -> Result<Plan, String> {
        // HTTP ingest counted in a SQL store no built-in stack has beside an
        // HTTP server: the run must name the missing service.
        Ok(Plan { transport: TransportPlan::Http, storage: StoragePlan::Sql("timescale".into()), services: vec!["haystack".into(), "timescale".into()] })
    }
    fn addresses(points: Vec<TagInfo>) -> Vec<String> {
        points.iter().map(|_| "haystack /api/hisWrite".to_string()).collect()
    }
    fn topology(_points: Vec<TagInfo>) -> Vec<Message> {
        Vec::new()
    }
    fn encode(batch: Readings) -> EncodedBatch {
        EncodedBatch { address_of: vec![], ends: vec![], payload: vec![], carries: vec![batch.points.len() as u32; 0] }
    }
    fn canary(seq: u64, _ts_ms: i64) -> Message {
        Message { address: "haystack /api/canary".into(), payload: seq.to_string().into_bytes() }
    }
    fn preflight() -> Result<(), String> {
        Ok(())
    }
    fn stored(_w: Window) -> Result<Vec<PerSecond>, String> {
        Ok(Vec::new())
    }
    fn canaries_stored(_from: u64) -> Result<Vec<u64>, String> {
        Ok(Vec::new())
    }
}

bindings::export!(Odd with_types_in bindings);
