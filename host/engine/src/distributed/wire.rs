//! The worker's control API: what the coordinator and a worker say to each
//! other, as JSON over HTTP (documented in docs/scale-out.md).
//!
//! | call | body | answer |
//! |---|---|---|
//! | `GET /v1/health` | | `ok` |
//! | `GET /v1/clock` | | [`Clock`] (the worker's wall clock) |
//! | `POST /v1/init` | [`Init`] | [`Ready`]: plugins loaded, transport reachable |
//! | `POST /v1/prepare` | [`Prepare`] | [`Ready`]: the step's points known, connections open |
//! | `POST /v1/start` | [`Start`] | [`Ready`]: load scheduled from `start_ms` |
//! | `GET /v1/status?since=SEQ` | | [`Status`] (the heartbeat, once a second; its per-second figures changed since heartbeat `SEQ`, or all of them) |
//! | `GET /v1/result` | | [`Final`] once the step drained (202 before) |
//! | `POST /v1/stop` | | stops any load |
//!
//! Every call but `GET /v1/health` carries `Authorization: Bearer TOKEN`
//! ([`super::token`]); without it a worker answers 401 with [`Failure`].
//! Errors answer 4xx/5xx with [`Failure`]. A worker that hears nothing from
//! its coordinator for [`COORDINATOR_SILENCE`] stops its load; a running
//! producer stops itself sooner, at [`HEARTBEAT_LOST`] without a call, the
//! silence after which the coordinator counts the worker lost (so a worker
//! frozen and thawed never sends a burst the step no longer expects).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::loadgen::ProducerReport;
use crate::transport::AckCounts;

/// The port a worker listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 27100;
/// A worker that does not answer its heartbeat for this long is lost.
pub const HEARTBEAT_LOST: Duration = Duration::from_secs(3);
/// A worker stops its load when its coordinator has been silent this long.
pub const COORDINATOR_SILENCE: Duration = Duration::from_secs(10);
/// Largest clock offset between a worker and the coordinator a step accepts:
/// per-second series are compared across workers by wall-clock second.
pub const MAX_CLOCK_OFFSET_MS: i64 = 100;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Clock {
    pub now_ms: i64,
}

/// What a process is: its version, the binary it runs and the plugin
/// contract it speaks. A coordinator refuses workers that differ before
/// step 1, naming both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Build {
    pub version: String,
    /// The first 16 hex digits of the running executable's sha256: the
    /// same binary (as `scripts/docker-images.sh` copies into the worker
    /// image) has the same id.
    pub build_id: String,
    pub contract: String,
}

impl Build {
    /// This process.
    pub fn this() -> Build {
        static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let build_id = ID.get_or_init(|| {
            std::env::current_exe()
                .and_then(std::fs::read)
                .map(|bytes| plugin_runtime::wasm_sha256(&bytes).chars().take(16).collect())
                .unwrap_or_else(|_| "unknown".into())
        });
        Build {
            version: env!("CARGO_PKG_VERSION").into(),
            build_id: build_id.clone(),
            contract: plugin_runtime::CONTRACT_VERSION.into(),
        }
    }

    /// In words: "scalebench 0.1.0, build 1a2b…, plugin contract 0.1.0".
    pub fn words(&self) -> String {
        format!("scalebench {}, build {}, plugin contract {}", self.version, self.build_id, self.contract)
    }
}

/// A plugin, by what the user called it and its component bytes (base64).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PluginBytes {
    pub name: String,
    pub wasm_b64: String,
}

/// A service the worker connects to (the coordinator's stack, already
/// checked by its isolation guard).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Service {
    pub name: String,
    /// "mqtt", "postgres", "nats", "http".
    pub kind: String,
    pub address: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Init {
    pub run_id: String,
    /// This worker's shard: `index` of `count`.
    pub index: u32,
    pub count: u32,
    pub model: PluginBytes,
    pub model_params: String,
    pub target: PluginBytes,
    pub target_params: String,
    pub seed: u64,
    pub services: Vec<Service>,
    pub connections: u32,
    pub inflight: u16,
    pub http_window: u32,
    pub mqtt_user: Option<String>,
    pub mqtt_password: Option<String>,
    /// MQTT protocol level (4 when a coordinator does not say).
    #[serde(default = "mqtt_v311")]
    pub mqtt_version: u8,
    /// Client ids of this worker's connections start with this (unique
    /// across workers: run id and index).
    pub client_id_prefix: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Prepare {
    /// The step's points (the worker learns tags and addresses up to here).
    pub points: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Start {
    pub points: u64,
    /// The schedule's start, on the coordinator's clock (ms since the epoch).
    pub start_ms: i64,
    pub interval_ms: u64,
    pub warmup_ms: u64,
    pub duration_ms: u64,
    /// The value model's sample period (the coordinator's, so values match).
    pub sample_period_ms: u64,
    /// How long the worker waits for its last acknowledgements after the load.
    pub drain_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ready {
    pub index: u32,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Waiting for `init`.
    Idle,
    /// Initialised or prepared, no load running.
    Ready,
    /// Offering load.
    Running,
    /// The load ended; waiting for the last acknowledgements.
    Draining,
    /// The step's result is ready.
    Done,
    /// Something failed; see `error`.
    Failed,
}

/// The heartbeat: live counters of the current step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    pub index: u32,
    pub state: State,
    pub offered: u64,
    pub acked: u64,
    pub behind_ms: u64,
    pub errors: u64,
    pub now_ms: i64,
    pub error: Option<String>,
    /// Readings refused so far.
    #[serde(default)]
    pub refused: u64,
    /// Ack latency so far, in the endpoint's buckets (the coordinator's
    /// `--metrics-listen` adds every worker's).
    #[serde(default)]
    pub latency: Option<crate::live_metrics::LatencyBuckets>,
    /// This heartbeat's number in the step (1, 2, …): the next call's
    /// `since`, so the next answer carries only the seconds that changed.
    #[serde(default)]
    pub seq: u64,
    /// The step's per-second figures so far: the seconds that changed since
    /// heartbeat `since` (their whole values), or every second when the
    /// worker no longer holds that heartbeat. A coordinator keeps them, so
    /// a worker lost mid-step still counts up to its last heartbeat.
    #[serde(default)]
    pub seconds: Seconds,
    /// The producer stopped itself: no call from the coordinator for
    /// [`HEARTBEAT_LOST`].
    #[serde(default)]
    pub off_leash: bool,
}

/// A worker's per-second figures, each a map from Unix second to readings:
/// what a step's series and outcomes are built from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Seconds {
    /// Offered, by second of payload ts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub offered_by_second: BTreeMap<i64, u64>,
    /// Offered, by wall-clock second of hand-over.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub offered_by_wall_second: BTreeMap<i64, u64>,
    /// Acknowledged, by second of payload ts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub acked_by_second: BTreeMap<i64, u64>,
    /// Acknowledged, by wall-clock second the ack arrived.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub acked_by_arrival_second: BTreeMap<i64, u64>,
    /// Refused, by second of payload ts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused_by_second: BTreeMap<i64, u64>,
    /// Refused, by wall-clock second the answer arrived.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused_by_arrival_second: BTreeMap<i64, u64>,
}

impl Seconds {
    fn maps(&self) -> [&BTreeMap<i64, u64>; 6] {
        [
            &self.offered_by_second,
            &self.offered_by_wall_second,
            &self.acked_by_second,
            &self.acked_by_arrival_second,
            &self.refused_by_second,
            &self.refused_by_arrival_second,
        ]
    }

    fn maps_mut(&mut self) -> [&mut BTreeMap<i64, u64>; 6] {
        [
            &mut self.offered_by_second,
            &mut self.offered_by_wall_second,
            &mut self.acked_by_second,
            &mut self.acked_by_arrival_second,
            &mut self.refused_by_second,
            &mut self.refused_by_arrival_second,
        ]
    }

    /// The seconds whose value differs from `before`'s (every value only
    /// grows, and no second goes away).
    pub fn changed_since(&self, before: &Seconds) -> Seconds {
        let mut out = Seconds::default();
        for ((now, was), into) in self.maps().into_iter().zip(before.maps()).zip(out.maps_mut()) {
            for (s, v) in now {
                if was.get(s) != Some(v) {
                    into.insert(*s, *v);
                }
            }
        }
        out
    }

    /// Take the values `newer` carries (whole values, not increments).
    pub fn apply(&mut self, newer: &Seconds) {
        for (into, from) in self.maps_mut().into_iter().zip(newer.maps()) {
            into.extend(from.iter().map(|(s, v)| (*s, *v)));
        }
    }

    pub fn offered(&self) -> u64 {
        self.offered_by_second.values().sum()
    }

    pub fn acked(&self) -> u64 {
        self.acked_by_second.values().sum()
    }

    pub fn refused(&self) -> u64 {
        self.refused_by_second.values().sum()
    }
}

/// A worker's figures for one step, once drained.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Final {
    pub index: u32,
    pub report: ProducerReport,
    pub counts: AckCounts,
    /// The worker process's CPU seconds over the step.
    pub cpu_s: f64,
    pub rss_bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Failure {
    pub error: String,
}

fn mqtt_v311() -> u8 {
    4
}
