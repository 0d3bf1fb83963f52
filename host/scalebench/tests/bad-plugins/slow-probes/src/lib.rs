//! Test plugin: a probe set whose one probe is slow on purpose
//! (`SELECT pg_sleep(sleep_s)`), to show that a slow probe cannot delay the
//! canary poll (lag) and that probes count only while the load runs.
use scalebench_plugin_sdk::probe_set::exports::scalebench::plugin::probe_set::{Guest, Probe, ProbeRequest, ProbeResponse, SqlProbe};
use scalebench_plugin_sdk::probe_set::scalebench::plugin::types::{PluginInfo, PluginKind, SqlValue, TagInfo};

struct Slow;

impl Guest for Slow {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "bad-slow-probes".into(),
            version: "0.1.0".into(),
            abi: scalebench_plugin_sdk::ABI_VERSION.into(),
            kind: PluginKind::ProbeSet,
            summary: "one probe that sleeps in PostgreSQL".into(),
            params_schema: "{}".into(),
            default_params: "{\"sleep_s\": 2}".into(),
        }
    }
    fn setup(params_json: String, _points: Vec<TagInfo>) -> Result<Vec<Probe>, String> {
        let sleep: f64 = params_json
            .split("\"sleep_s\"")
            .nth(1)
            .and_then(|r| r.trim_start_matches([' ', ':']).split([',', '}']).next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(2.0);
        Ok(vec![Probe {
            name: "slow".into(),
            description: "sleeps in the database".into(),
            request: ProbeRequest::Sql(SqlProbe {
                database: "postgres".into(),
                statement: "SELECT pg_sleep($1::float8)::text AS slept".into(),
                params: vec![SqlValue::Float(sleep)],
            }),
        }])
    }
    fn check(_name: String, _response: ProbeResponse) -> Result<(), String> {
        Ok(())
    }
}

scalebench_plugin_sdk::export_probe_set!(Slow);
