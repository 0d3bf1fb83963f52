//! Test plugin: an HTTP adapter built with the SDK's `http-ingest` export
//! beside its target adapter (world `target-adapter-http-plugin` from two
//! export macros): the host must find the export and not warn. Its path is
//! wrong on purpose (`/api/nowhere`): the one-reading check must lead with
//! the server's refusal and status.
use scalebench_plugin_sdk::target_adapter::exports::scalebench::plugin::target_adapter::{EncodedBatch, Guest, Message, Plan, StoragePlan, TransportPlan};
use scalebench_plugin_sdk::target_adapter::scalebench::plugin::types::{PerSecond, PluginInfo, PluginKind, Readings, Stat, TagInfo, Window};

struct Odd;

use scalebench_plugin_sdk::http_ingest::exports::scalebench::plugin::http_ingest::Guest as HttpIngest;
use scalebench_plugin_sdk::target_adapter::scalebench::plugin::types::HttpResponse;

impl HttpIngest for Odd {
    fn headers(_address: String) -> Result<Vec<(String, String)>, String> {
        Ok(vec![("Content-Type".into(), "text/zinc".into())])
    }
    fn judge(_address: String, response: HttpResponse) -> Result<(), String> {
        if response.body.starts_with(b"ver:") { Ok(()) } else { Err("not a grid".into()) }
    }
}

impl Guest for Odd {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "bad-judged-http".into(),
            version: "0.1.0".into(),
            abi: scalebench_plugin_sdk::ABI_VERSION.into(),
            kind: PluginKind::TargetAdapter,
            summary: "an adapter for a system no built-in stack runs".into(),
            params_schema: "{}".into(),
            default_params: "{}".into(),
        }
    }
    fn configure(_p: String) -> Result<Plan, String> {
        Ok(Plan { transport: TransportPlan::Http, storage: StoragePlan::Http("api".into()), services: vec!["api".into()] })
    }
    fn addresses(points: Vec<TagInfo>) -> Vec<String> {
        points.iter().map(|_| "api /api/nowhere".to_string()).collect()
    }
    fn topology(_points: Vec<TagInfo>) -> Vec<Message> {
        Vec::new()
    }
    fn encode(batch: Readings) -> EncodedBatch {
        EncodedBatch { address_of: vec![], ends: vec![], payload: vec![], carries: vec![batch.points.len() as u32; 0] }
    }
    fn canary(seq: u64, _ts_ms: i64) -> Message {
        Message { address: "api /api/nowhere".into(), payload: seq.to_string().into_bytes() }
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
scalebench_plugin_sdk::export_http_ingest!(Odd);
