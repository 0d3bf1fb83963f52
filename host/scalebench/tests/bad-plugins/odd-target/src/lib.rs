//! Test plugin: a third-party target adapter whose plan asks for what no
//! built-in stack has (HTTP ingest counted in a SQL store named `timescale`).
//! The host must say what is missing, in words, not panic.
use scalebench_plugin_sdk::target_adapter::exports::scalebench::plugin::target_adapter::{EncodedBatch, Guest, Message, Plan, StoragePlan, TransportPlan};
use scalebench_plugin_sdk::target_adapter::scalebench::plugin::types::{PerSecond, PluginInfo, PluginKind, Readings, Stat, TagInfo, Window};

struct Odd;

impl Guest for Odd {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "bad-odd-target".into(),
            version: "0.1.0".into(),
            abi: scalebench_plugin_sdk::ABI_VERSION.into(),
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
    fn stats() -> Result<Vec<Stat>, String> {
        Ok(Vec::new())
    }
}

scalebench_plugin_sdk::export_target_adapter!(Odd);
