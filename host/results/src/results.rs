//! Results of a run: data with a schema (docs/results.md), written as
//! `results/<run-id>-ladder.json` atomically after every step, so a crash or
//! Ctrl-C keeps the steps already measured. Printing is a view of this data
//! (see `commands::table`). Every number says its unit in its name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Bumped on any incompatible change of this file's shape.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    pub schema_version: u32,
    pub run_id: String,
    pub started_utc: String,
    pub finished_utc: Option<String>,
    /// The full command line, as typed.
    pub command_line: Vec<String>,
    pub target: String,
    pub model: String,
    pub probes: String,
    /// "local" or "external".
    pub stack: String,
    pub interval_s: f64,
    pub warmup_s: f64,
    pub soak_s: f64,
    pub hardware: Hardware,
    /// Commits of scalebench and, where known, of the SUT.
    pub commits: BTreeMap<String, String>,
    /// Plugins used: name -> sha256 of the component.
    pub plugins: BTreeMap<String, String>,
    /// CPU/memory caps of the stack, if any ("none" locally).
    pub caps: BTreeMap<String, String>,
    pub steps: Vec<StepResult>,
    /// Highest step that passed, in points.
    pub max_passing_points: Option<u64>,
    /// Why the run ended: "completed", "step failed", "interrupted", or an error.
    pub ended_because: String,
    /// The carrier's bare round trip before step 1: the floor every ack
    /// latency stands beside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<Floor>,
    /// History written into the SUT before step 1 (`--prefill-days`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<PrefillReport>,
    /// The connections to the SUT that used TLS, by service ("mqtt",
    /// "http:api"): protocol version and cipher suite as negotiated, and
    /// whether a client certificate was presented. Empty: no TLS.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tls: BTreeMap<String, Negotiated>,
    /// The resolved plan: every `run` flag's value (given, from `--plan` or
    /// `--again`, or default), by long name; `run --again` runs it again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plan: BTreeMap<String, PlanValue>,
}

/// One flag's value in a plan: a switch, a value, or a repeated flag's values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PlanValue {
    Flag(bool),
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Hardware {
    pub nproc: u32,
    pub cpu_model: String,
    /// CPUs this process may run on, e.g. "0-1".
    pub cpu_affinity: String,
    pub ram_bytes: u64,
    pub disk_free_bytes: u64,
    pub load_avg_1m: f64,
    pub load_avg_5m: f64,
    pub load_avg_15m: f64,
    pub kernel: String,
    pub hostname: String,
}

impl Hardware {
    /// The hardware of this machine; `dir` is where disk free is measured (the
    /// results directory or the stack's data directory).
    pub fn describe(dir: &Path) -> Hardware {
        use crate::hardware::*;
        let (l1, l5, l15) = crate::hardware::load_avg().unwrap_or((0.0, 0.0, 0.0));
        let (kernel, hostname) = crate::hardware::uname();
        Hardware {
            nproc: nproc(),
            cpu_model: cpu_model().unwrap_or_else(|| "unknown".into()),
            cpu_affinity: cpu_affinity().unwrap_or_default(),
            ram_bytes: ram_bytes().unwrap_or(0),
            disk_free_bytes: disk_free_bytes(dir).unwrap_or(0),
            load_avg_1m: l1,
            load_avg_5m: l5,
            load_avg_15m: l15,
            kernel,
            hostname,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    /// Every measured rule passed, on an external stack whose health
    /// nobody watched (`--watch`): restarts, exits and OOM kills are
    /// unmeasured, so this is never a plain pass. Counts for the ceiling,
    /// which says so.
    #[serde(rename = "pass-health-not-watched")]
    PassUnwatched,
    Fail,
    /// Not judged yet, or not judgeable: never a pass by default.
    #[default]
    Inconclusive,
    Interrupted,
}

impl Status {
    /// The status in words ("pass", "pass (health not watched)", …).
    pub fn words(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::PassUnwatched => "pass (health not watched)",
            Status::Fail => "fail",
            Status::Inconclusive => "inconclusive",
            Status::Interrupted => "interrupted",
        }
    }

    /// Pass, with or without watched health: the ladder climbs on.
    pub fn passed(self) -> bool {
        matches!(self, Status::Pass | Status::PassUnwatched)
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StepResult {
    pub points: u64,
    pub status: Status,
    /// Every reason the step did not pass, most important first.
    pub reasons: Vec<String>,
    pub target_rps: f64,
    pub started_utc: String,
    pub duration_s: f64,
    pub generator: Generator,
    pub ingest: Ingest,
    pub lag: Lag,
    /// Numeric $SYS counters of the broker: before, after, delta.
    pub broker: BTreeMap<String, BrokerCounter>,
    /// Per stack process / container: CPU and memory over the soak.
    pub resources: BTreeMap<String, Resource>,
    /// Restarts, OOM kills, exit status per service.
    pub containers: BTreeMap<String, ServiceHealth>,
    pub samples: Vec<Sample>,
    pub probes: Vec<ProbeResult>,
    pub db: Db,
    pub durability: Durability,
    pub topology: Topology,
    /// Metrics a pass rule needs that could not be read, and why. Any makes
    /// the step inconclusive: unmeasured is never zero.
    #[serde(default)]
    pub unmeasured: Vec<String>,
    /// Live-safety samples (host load per CPU, live URL latency).
    #[serde(default)]
    pub live_safety: Vec<LiveSample>,
    /// Acknowledgement latency from each reading's intended send time and
    /// from its actual send, over the soak; the longest silence.
    #[serde(default)]
    pub ack_latency: AckLatency,
    /// The store watched every second of the load: its round trip and silences.
    #[serde(default)]
    pub store: StoreFigures,
    /// Every reading offered, classified as Jepsen does.
    #[serde(default)]
    pub outcomes: Outcomes,
    /// Per wall-clock second of the step: offered, acked, refused, stored,
    /// ack latency p99.
    #[serde(default)]
    pub series: Series,
    /// Every canary: when it was sent, acknowledged and stored, its lag and outcome.
    #[serde(default)]
    pub canaries: Vec<CanaryRecord>,
    /// A distributed run: each worker's figures (the totals above include
    /// them); empty for a one-process run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerFigures>,
    /// Calibration faults (`--kill`, `--freeze`) as they were injected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<InjectedFault>,
}

/// A calibration fault the step injected, and when.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InjectedFault {
    pub service: String,
    /// "kill", "freeze" or "thaw".
    pub action: String,
    /// Seconds from the schedule's first second (what `--kill SERVICE:AFTER` counts from).
    pub at_load_s: f64,
}

/// One worker of a distributed step.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WorkerFigures {
    /// Its shard (1-based, as reports say it: worker 1 of 3).
    pub worker: u32,
    pub url: String,
    pub scheduled: u64,
    pub offered: u64,
    pub acked: u64,
    pub cpu_s: Option<f64>,
    pub behind_schedule_max_s: Option<f64>,
    /// Its clock minus the coordinator's at the barrier, and the round trip
    /// it was measured over (ms).
    pub clock_offset_ms: Option<i64>,
    pub clock_rtt_ms: Option<i64>,
    /// Lost mid-step, refused at the barrier, or could not offer its share.
    pub problem: Option<String>,
    /// Lost and never back: its figures end at its last heartbeat, this
    /// one (ms since the epoch); its seconds after it are missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_from_ms: Option<i64>,
    /// Lost, then back with its result after the load: readings it offered
    /// after it was counted lost (counted in its offered and the step's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_late: Option<u64>,
}

impl StepResult {
    /// The soak's start, ms since the epoch (when the series say so).
    pub fn soak_from_ms(&self) -> Option<i64> {
        (self.series.start_unix_s > 0).then(|| self.series.start_unix_s * 1000 + (self.series.soak_from_s * 1e3) as i64)
    }
}

/// Acknowledgement latency of a step's soak (see `latency.rs`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AckLatency {
    /// From each reading's intended (scheduled) send time: what a client of
    /// the SUT waited, whatever the generator's buffers held.
    pub intended: crate::latency::Quantiles,
    /// From the actual send (service time).
    pub service: crate::latency::Quantiles,
    /// The pacing's own lateness: when each reading was handed to the
    /// socket minus its intended instant (0 when it went out early).
    #[serde(default)]
    pub send_lag: crate::latency::Quantiles,
    /// The histograms' resolution (1 µs): a quantile below it is shown as
    /// "< 1 µs", never as a number. None in results written before it was
    /// recorded (their figures were millisecond-based).
    #[serde(default)]
    pub resolution_s: Option<f64>,
    /// Every stretch of at least a second with readings waiting and no
    /// answer (joined across connections), in time order: the verdict
    /// names each one longer than the silence limit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub silences: Vec<SilenceSpan>,
    /// The longest stretch with readings waiting and no answer from the SUT
    /// (on the connection that waited longest), in seconds; None when
    /// nothing was offered.
    pub longest_silence_s: Option<f64>,
    /// Where it lay, seconds from the soak's start.
    pub silence_from_soak_s: Option<f64>,
    pub silence_to_soak_s: Option<f64>,
    /// True when no connection had any answer in the silence's whole seconds.
    #[serde(default)]
    pub silence_total: bool,
}

/// One second of the store's round-trip series (`series.store_round_trip`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreSecond {
    /// The request asked in this second answered after this long (s).
    Answered(f64),
    /// The store answered with an error after this long (s).
    Failed(f64),
    /// A request was out with no answer yet, waiting this long (s).
    NoAnswerFor(f64),
}

/// The store watched every second of the load (its round trip and silences).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StoreFigures {
    /// The store in the user's words ("PostgreSQL (service `postgres`)");
    /// empty in results written before the store was watched.
    pub store: String,
    /// Round trips answered (with an answer or an error).
    pub answered: u64,
    /// Seconds in which a request was out with no answer yet.
    pub seconds_without_answer: u64,
    /// Round trip of the answered requests, seconds.
    pub round_trip_p50_s: Option<f64>,
    pub round_trip_max_s: Option<f64>,
    /// Every stretch of at least a second with a request out and no answer,
    /// placed in the soak; the verdict fails each one longer than the silence limit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub silences: Vec<SilenceSpan>,
}

/// A silence placed in the soak (seconds from its start).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SilenceSpan {
    pub from_soak_s: f64,
    pub to_soak_s: f64,
    pub len_s: f64,
}

/// The carrier's bare round trip, measured before step 1 on a connection of
/// its own: one message at a time, each sent when the last was answered.
/// No ack latency of a step can honestly be below it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Floor {
    /// What was timed ("MQTT PUBLISH → PUBACK", "JetStream publish → ack", …).
    pub carrier: String,
    /// Round trips asked for and answered.
    pub asked: u64,
    pub round_trip: crate::latency::Quantiles,
    /// The histogram's resolution (s).
    pub resolution_s: f64,
    /// Why there is no floor (the carrier did not answer), when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl Floor {
    /// The floor as one line: "p50 92 µs, p90 131 µs, p99 340 µs, min 71 µs
    /// (200 round trips: MQTT broker …, one message at a time)".
    pub fn line(&self) -> String {
        let f = self;
        let q = &f.round_trip;
        let r = Some(f.resolution_s);
        let figures = if q.count == 0 {
            crate::format::NOT_MEASURED.to_string()
        } else {
            format!(
                "p50 {}, p90 {}, p99 {}, min {}",
                crate::format::latency(q.p50_s, r),
                crate::format::latency(q.p90_s, r),
                crate::format::latency(q.p99_s, r),
                crate::format::latency(q.min_s, r)
            )
        };
        let problem = f.problem.as_ref().map(|p| format!("; {p}")).unwrap_or_default();
        format!(
            "{figures} ({} of {} round trips: {}{problem})",
            crate::format::thousands(q.count),
            crate::format::thousands(f.asked),
            f.carrier
        )
    }
}

/// Outcomes of the readings offered, as Jepsen classifies them: ok (acked
/// and stored), lost (acked, never stored: data loss), unknown (never
/// acknowledged: not loss); refused (answered with a refusal) and
/// not_offered (the wall-clock end came first) beside them. Where the
/// stored count could not be read, ok and lost are None: the acknowledged
/// readings are neither, unmeasured, never zero. (A result written before
/// outcomes were recorded reads as all zeros: "not recorded".)
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Outcomes {
    pub ok: Option<u64>,
    pub lost: Option<u64>,
    pub unknown: u64,
    pub refused: u64,
    pub not_offered: u64,
}

impl Default for Outcomes {
    fn default() -> Self {
        Outcomes { ok: Some(0), lost: Some(0), unknown: 0, refused: 0, not_offered: 0 }
    }
}

/// Per-second series of a step. Index k is the wall-clock second
/// `start_unix_s + k`; the load starts at index 0.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Series {
    pub start_unix_s: i64,
    /// Where the soak starts, seconds from `start_unix_s`.
    pub soak_from_s: f64,
    /// Where the load ends, seconds from `start_unix_s` (acks may follow in the drain).
    pub load_end_s: f64,
    /// Readings handed to the transport, by second of hand-over.
    pub offered: Vec<u64>,
    /// Readings acknowledged, by second the acknowledgement arrived.
    pub acked: Vec<u64>,
    /// Readings refused, by second the answer arrived.
    pub refused: Vec<u64>,
    /// Readings stored, by second of payload ts (the schedule's second).
    pub stored_by_payload: Vec<u64>,
    /// Intended-time ack latency p99 of the acks that arrived in the
    /// second, seconds; None where nothing was acknowledged.
    pub ack_latency_p99_s: Vec<Option<f64>>,
    /// The step's outcomes ([`Outcomes`]) by second of payload ts (index k
    /// is the schedule's second `start_unix_s + k`): readings acked and
    /// stored, acked and never stored, and never answered. ok and lost are
    /// None where the stored count was not measured (never zeros).
    #[serde(default)]
    pub ok_by_payload: Option<Vec<u64>>,
    #[serde(default)]
    pub lost_by_payload: Option<Vec<u64>>,
    #[serde(default)]
    pub unknown_by_payload: Vec<u64>,
    /// The store's round trip by wall-clock second: answered (with its
    /// time), failed, or no answer yet (how long it had waited); None where
    /// nothing was asked. See [`StoreFigures`].
    #[serde(default)]
    pub store_round_trip: Vec<Option<StoreSecond>>,
    /// Readings stored by wall-clock second of arrival, from the store's
    /// own write counter; None where the counter could not be read (never 0).
    #[serde(default)]
    pub stored_by_arrival: Vec<Option<f64>>,
}

/// One canary's life.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CanaryRecord {
    pub seq: u64,
    /// Scheduled send time, seconds from the series' start.
    pub sent_s: f64,
    /// When its acknowledgement arrived (None: never acknowledged).
    pub acked_s: Option<f64>,
    /// When storage was first seen holding it (None: never seen).
    pub stored_s: Option<f64>,
    pub lag_s: Option<f64>,
    /// "ok" (stored), "lost" (acknowledged, never stored) or "unknown" (never acknowledged).
    pub outcome: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Generator {
    pub published: u64,
    pub acked: u64,
    /// Readings the schedule held for the step's load window.
    #[serde(default)]
    pub scheduled: u64,
    /// Readings handed to the transport before the load's wall-clock end.
    #[serde(default)]
    pub offered: u64,
    /// scheduled − offered: never sent, because the wall-clock end came first.
    #[serde(default)]
    pub not_offered: u64,
    /// Wall-clock seconds of soak the rates below are measured over.
    #[serde(default)]
    pub soak_s: f64,
    /// Readings handed to the transport per wall-clock second of soak.
    #[serde(default)]
    pub offered_rps: f64,
    /// offered_rps / target_rps (below 99 % without pushback: a generator limit).
    pub offered_ratio: f64,
    /// Readings acknowledged per wall-clock second of soak, by when each ack arrived.
    pub achieved_rps: f64,
    /// achieved_rps / target_rps.
    #[serde(default)]
    pub achieved_ratio: f64,
    /// Lowest acknowledged rate over any 5 s of the soak (by arrival).
    #[serde(default)]
    pub achieved_rps_min_5s: Option<f64>,
    /// Seconds the transport was held back by the SUT (in-flight window
    /// full, socket writes blocked): the longest any connection was.
    #[serde(default)]
    pub held_back_s: f64,
    /// Seconds the producer waited on full transport channels.
    #[serde(default)]
    pub channel_wait_s: f64,
    /// How far behind its schedule the generator fell, worst case.
    pub behind_schedule_max_s: f64,
    pub behind_schedule_p95_s: f64,
    pub connections: u32,
    pub publish_errors: u64,
    /// Readings in messages the SUT answered but refused (HTTP: a non-2xx
    /// status or an answer the adapter judged not an ack, e.g. a Haystack
    /// error grid with HTTP 200): offered, never acknowledged.
    #[serde(default)]
    pub rejected: u64,
    /// Generator's own CPU seconds over the step, and per million acked.
    pub cpu_s: f64,
    pub cpu_us_per_acked: f64,
    pub rss_peak_bytes: u64,
    /// What the generator holds per point, measured: the session's point
    /// and address tables (host heap) and each plugin instance's linear
    /// memory ("model", "encoder", "counter", "probes"), in bytes.
    #[serde(default)]
    pub memory_bytes: BTreeMap<String, u64>,
    #[serde(default)]
    pub memory_bytes_per_point: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Ingest {
    /// Readings acknowledged by the transport, by second of payload ts, summed over the compared window.
    pub acked: u64,
    pub stored: u64,
    pub stored_ratio: f64,
    /// Seconds where stored < 99% of acked (first few), as "unix_s: stored/acked".
    pub short_seconds: Vec<String>,
    pub short_seconds_count: u64,
    /// Acknowledged readings that storage does not hold (sum over seconds of acked − stored).
    #[serde(default)]
    pub missing_acked: u64,
    /// Readings the adapter counted stored beyond those acknowledged in the
    /// same second of payload ts (summed over seconds; never part of
    /// `stored`, which each second's acks cap). Only unacknowledged readings
    /// the store kept (at most `outcomes.unknown`) or a count of one reading
    /// more than once make them: `plugins check` fails an adapter whose
    /// count exceeds what the unknown readings explain.
    #[serde(default)]
    pub stored_beyond_acked: u64,
    /// Rows the storage itself wrote per wall-clock second of soak (its own
    /// write counter, independent of timestamps); None when unmeasured.
    pub stored_rps: Option<f64>,
    /// Where stored_rps comes from (e.g. "pg_stat_user_tables inserts+updates").
    #[serde(default)]
    pub stored_rps_source: Option<String>,
    /// Stored readings per second of soak by payload ts (the per-second comparison's view).
    #[serde(default)]
    pub stored_rps_by_payload: f64,
    pub stored_rate_ratio: Option<f64>,
    pub stored_rps_per_host_cpu: Option<f64>,
    /// Broker drops over the step; None when they could not be read.
    pub broker_dropped_delta: Option<f64>,
    pub rows_per_day_at_this_rate: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Lag {
    pub canaries_sent: u64,
    /// Canaries acknowledged and never stored within the drain timeout.
    pub lost: u64,
    /// Canaries never acknowledged: their fate is unknown, not loss.
    #[serde(default)]
    pub unknown: u64,
    pub p50_s: Option<f64>,
    pub p95_s: Option<f64>,
    pub max_s: Option<f64>,
    pub first_third_median_s: Option<f64>,
    pub last_third_median_s: Option<f64>,
    /// How often storage was polled for canaries (bounds the lag's resolution).
    pub poll_interval_s: f64,
    /// The p95 lag limit the verdict applied (s); None in results written
    /// before it was recorded (reports then draw no limit).
    #[serde(default)]
    pub p95_limit_s: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BrokerCounter {
    pub before: Option<f64>,
    pub after: Option<f64>,
    pub delta: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Resource {
    /// 100 = one core, averaged over the soak.
    pub cpu_percent: f64,
    /// The service's memory cap, where it has one (Docker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_limit_bytes: Option<u64>,
    /// Block I/O over the soak, read and written bytes (Docker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blkio_read_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blkio_write_bytes: Option<u64>,
    pub cpu_percent_max: f64,
    pub rss_bytes_max: u64,
    pub rss_bytes_last: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServiceHealth {
    pub restarts: u32,
    pub oom_kills: u32,
    /// Whether OOM kills could be read (a cgroup counter); an OOM kill also
    /// shows as an exit by SIGKILL either way.
    #[serde(default)]
    pub oom_measured: bool,
    /// Every unexpected exit during the step, as the process ended.
    #[serde(default)]
    pub exits: Vec<String>,
    /// "running", or how it ended.
    pub state: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sample {
    pub elapsed_s: f64,
    pub acked_rps: f64,
    pub stored_rps: Option<f64>,
    pub lag_s: Option<f64>,
    pub pg_roundtrip_s: Option<f64>,
    /// The store did not answer this sample's requests (its write counter
    /// or `SELECT 1`) within this many seconds: no answer, which is not the
    /// same as not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_no_answer_s: Option<f64>,
    pub behind_schedule_s: f64,
    pub cpu_percent: BTreeMap<String, f64>,
    pub rss_bytes: BTreeMap<String, u64>,
    /// Memory cap per service (Docker stacks), beside rss_bytes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mem_limit_bytes: BTreeMap<String, u64>,
    /// Block I/O per service since its container started: [read, written] bytes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub blkio_bytes: BTreeMap<String, [u64; 2]>,
    /// Free bytes of the results disk and of the stack's data disk; None = unmeasured.
    #[serde(default)]
    pub disk_free_bytes: BTreeMap<String, Option<u64>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProbeResult {
    pub name: String,
    pub description: String,
    /// First run's time.
    pub cold_s: Option<f64>,
    /// Median of the warm runs.
    pub warm_median_s: Option<f64>,
    pub warm_runs_s: Vec<f64>,
    pub budget_s: Option<f64>,
    /// Where the budget comes from ("provisional" when it has no source yet).
    pub budget_source: Option<String>,
    pub ok: bool,
    /// What the last run's answer held (what the read really read): a SQL
    /// probe's rows, or for an HTTP probe what its probe set counts (a
    /// Haystack hisRead: its readings; a read: its records). Absent when
    /// the answer was not sized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// Why it failed: over budget, error, or the plugin's check said so.
    pub error: Option<String>,
    /// Something to know that is not a failure, e.g. "no budget in budgets.json".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Db {
    pub table_bytes: Option<f64>,
    pub rows_estimate: Option<f64>,
    pub bytes_per_row: Option<f64>,
    pub database_bytes: Option<f64>,
    pub bytes_per_day_raw_at_this_rate: Option<f64>,
    /// Every stat the adapter reported, by name.
    pub stats: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Durability {
    /// As the server reports them (SHOW on the harness's own session).
    pub fsync: Option<String>,
    pub synchronous_commit: Option<String>,
    pub full_page_writes: Option<String>,
    /// As the ingest path's own session sees them, where the target can tell
    /// (the reference historian records its session's settings).
    #[serde(default)]
    pub ingest_fsync: Option<String>,
    #[serde(default)]
    pub ingest_synchronous_commit: Option<String>,
    #[serde(default)]
    pub ingest_full_page_writes: Option<String>,
    /// "ingest path" when the ingest session's settings were read, else
    /// "server-level only".
    #[serde(default)]
    pub scope: String,
    /// True only if all three are on, end to end where that could be read;
    /// for a JetStream target, file storage synced on every write.
    pub comparable: bool,
    /// A JetStream target: how the stream and its servers keep what they
    /// acknowledge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jetstream: Option<JetStreamDurability>,
}

/// How a JetStream stream keeps what it acknowledges.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct JetStreamDurability {
    /// "file" or "memory".
    pub storage: String,
    pub replicas: u32,
    /// The servers' `sync_interval`: "always", a duration, "2m (the
    /// server's default)", or "unknown" for a server scalebench did not start.
    pub sync_interval: String,
    pub server_version: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Topology {
    pub new_points: u64,
    pub messages: u64,
    /// Time until every topology message was answered (acknowledged or
    /// refused) or the wait gave up after a minute without an answer.
    pub publish_s: f64,
    /// Topology messages the SUT refused or never acknowledged.
    #[serde(default)]
    pub not_acknowledged: u64,
}

/// The ceiling: the highest passing step below the first failure (with
/// `--continue-on-fail`, a pass above a failure is not a ceiling). The one
/// rule the ladder, the table, the report and compare use.
pub fn ceiling_of(steps: impl IntoIterator<Item = (u64, Status)>) -> Option<u64> {
    let mut best = None;
    for (points, status) in steps {
        match status {
            Status::Fail => break,
            s if s.passed() => best = Some(points),
            _ => {}
        }
    }
    best
}

impl RunResult {
    /// The run's ceiling, from its steps ([`ceiling_of`]).
    pub fn ceiling(&self) -> Option<u64> {
        ceiling_of(self.steps.iter().map(|s| (s.points, s.status)))
    }

    /// Whether the ceiling step passed on health nobody watched.
    pub fn ceiling_unwatched(&self) -> bool {
        let c = self.ceiling();
        self.steps.iter().any(|s| Some(s.points) == c && s.status == Status::PassUnwatched)
    }

    /// Write atomically: a temporary file in the same directory, then rename.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        crate::atomic_file::write(path, (text + "\n").as_bytes())
    }

    pub fn load(path: &Path) -> anyhow::Result<RunResult> {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        RunResult::parse(&text, path)
    }

    /// Read a result file's text; `path` only names it in errors.
    pub fn parse(text: &str, path: &Path) -> anyhow::Result<RunResult> {
        serde_json::from_str(text).map_err(|e| {
            let e = crate::serde_words::user_words(&e.to_string());
            anyhow::anyhow!("{} is not a scalebench ladder result: {e}", path.display())
        })
    }

    pub fn path_in(dir: &Path, run_id: &str) -> PathBuf {
        dir.join(format!("{run_id}-ladder.json"))
    }

    /// The result file a run wrote into `dir` (a directory of one run), if any.
    pub fn find_in(dir: &Path) -> Option<PathBuf> {
        std::fs::read_dir(dir)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.to_string_lossy().ends_with("-ladder.json"))
    }
}

/// A run id: UTC time, `20261130T140000Z`.
pub fn run_id_now() -> String {
    let s = crate::clock::utc_now();
    format!("{}{}{}T{}{}{}Z", &s[0..4], &s[5..7], &s[8..10], &s[11..13], &s[14..16], &s[17..19])
}

/// A run id from the clock that no file `<dir>/<id><suffix>` holds yet:
/// two runs started in the same second get `…Z` and `…Z-2`, so a result
/// already written is never overwritten.
pub fn fresh_run_id(dir: &Path, suffix: &str) -> String {
    let base = run_id_now();
    let mut id = base.clone();
    let mut k = 2;
    while dir.join(format!("{id}{suffix}")).exists() {
        id = format!("{base}-{k}");
        k += 1;
    }
    id
}

/// One live-safety sample, kept in the result.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LiveSample {
    pub elapsed_s: f64,
    pub load_per_cpu: Option<f64>,
    pub live_latency_s: Option<f64>,
    /// Why this sample was bad, if it was.
    pub bad: Option<String>,
}

/// What a TLS connection negotiated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Negotiated {
    /// e.g. "TLSv1.3".
    pub protocol: String,
    /// e.g. "TLS13_AES_256_GCM_SHA384".
    pub cipher_suite: String,
    /// A client certificate was configured (mutual TLS).
    pub client_certificate: bool,
}

#[cfg(test)]
mod tests {

    #[test]
    fn this_machine_is_described() {
        use crate::hardware::*;
        let h = super::Hardware::describe(std::path::Path::new("/definitely/not/here"));
        assert!(h.nproc >= 1);
        assert!(!h.cpu_affinity.is_empty(), "{h:?}");
        assert_eq!(
            h.nproc as usize,
            h.cpu_affinity
                .split(',')
                .map(|r| match r.split_once('-') {
                    Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
                    None => 1,
                })
                .sum::<usize>()
        );
        assert!(h.ram_bytes > 1 << 20, "{h:?}");
        assert!(h.disk_free_bytes > 0, "{h:?}");
        assert!(h.kernel.starts_with("Linux "), "{h:?}");
        assert!(!h.hostname.is_empty());
        // The peak read after the resident size: other tests allocate meanwhile.
        let rss = self_rss_bytes();
        assert!(rss > 0 && self_peak_rss_bytes() >= rss);
        let t0 = self_cpu_seconds();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(self_cpu_seconds() > t0);
    }
    #[test]
    fn a_fresh_run_id_never_names_a_result_already_written() {
        let dir = tempfile::tempdir().unwrap();
        let a = super::fresh_run_id(dir.path(), "-prefill.json");
        std::fs::write(dir.path().join(format!("{a}-prefill.json")), "{}").unwrap();
        let b = super::fresh_run_id(dir.path(), "-prefill.json");
        assert_ne!(a, b);
        assert!(!dir.path().join(format!("{b}-prefill.json")).exists());
    }
}

/// What a prefill did; goes into the result JSON (`prefill`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PrefillReport {
    pub target: String,
    pub model: String,
    /// Where the rows went (`database service / table`).
    pub destination: String,
    pub points: u64,
    pub interval_s: f64,
    pub days: f64,
    pub start_ms: i64,
    pub end_ms: i64,
    pub start_utc: String,
    pub end_utc: String,
    /// Intervals (samples per point) in the job's window.
    pub intervals_total: u64,
    /// points × intervals_total.
    pub rows_total: u64,
    /// Rows this job had written before this run (a resumed job).
    pub rows_before: u64,
    /// Rows this run wrote.
    pub rows_added: u64,
    /// Readings this run found already stored under the table's key, left alone.
    pub rows_already_stored: u64,
    pub complete: bool,
    pub interrupted: bool,
    /// This run continued a job an earlier run had started.
    pub resumed: bool,
    pub chunks: u64,
    pub duration_s: f64,
    /// rows_added / duration_s.
    pub rows_per_s: f64,
}
