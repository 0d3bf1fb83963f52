//! Typed wrappers, one per world. Each owns a store and an instance; every
//! call goes through `Guarded::call`, which sets the deadline and turns any
//! failure into a [`PluginError`]. After a trap the instance is poisoned and
//! refuses further calls; load the plugin again to start afresh.

use std::sync::Arc;

use wasmtime::Store;

use crate::bindings::{adapter, history, http_ingest, model, probe, probe_answer};
use crate::host::{HostServices, StoreState};
use crate::runtime::{classify, Limits, Plugin, Runtime, StoreMaker};
use crate::types::{PerSecond, PluginInfo, PluginKind, Readings, Stat, TagInfo, Window};
use crate::validate::{World, CONTRACT_VERSION};
use crate::PluginError;

/// Records of the target-adapter interface (plan, message, encoded batch ...).
pub mod adapter_types {
    pub use crate::bindings::adapter::exports::scalebench::plugin::target_adapter::*;
}

/// Records of the optional history-sink interface (prefill plans).
pub mod history_types {
    pub use crate::bindings::history::exports::scalebench::plugin::history_sink::*;
}

/// Records of the probe-set interface (probe, probe request and response).
pub mod probe_types {
    pub use crate::bindings::probe::exports::scalebench::plugin::probe_set::*;
}

/// The host's per-point calls (`tags`, `addresses`, `topology`) go in
/// slices of at most this many points: what one call moves between host and
/// plugin then stays a few MiB (a tag is ~100 bytes), far below the per-call
/// data limit ([`Limits::call_data_bytes`]) and the plugin's memory limit,
/// whatever the run's point count.
pub const POINTS_PER_CALL: usize = 16_384;

/// Most header bytes an adapter's `headers` may give for one request
/// (names, values and their separators). HTTP servers refuse far less
/// (hyper and nginx: 8 to 64 KiB in all), and the transport sends them with
/// every request: megabytes of headers are an adapter's bug, named as one.
pub const MAX_HEADER_BYTES: usize = 64 << 10;

struct Guarded<B> {
    name: String,
    store: Store<StoreState>,
    bindings: B,
    limits: Limits,
    ticks: u64,
    poisoned: bool,
}

impl<B> Guarded<B> {
    fn call<R>(
        &mut self,
        call: &str,
        f: impl FnOnce(&B, &mut Store<StoreState>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        if self.poisoned {
            return Err(PluginError::Poisoned { plugin: self.name.clone(), call: call.into() });
        }
        self.store.set_epoch_deadline(self.ticks);
        match f(&self.bindings, &mut self.store) {
            Ok(r) => Ok(r),
            Err(e) => {
                self.poisoned = true;
                Err(classify(e, &self.name, call, &self.limits, &self.store.data().stderr))
            }
        }
    }

    /// Linear memory the instance holds now, in bytes.
    fn memory_bytes(&self) -> u64 {
        self.store.data().limits.memory_bytes as u64
    }

    fn returned<R>(&self, call: &str, r: Result<R, String>) -> Result<R, PluginError> {
        r.map_err(|message| PluginError::Returned { plugin: self.name.clone(), call: call.into(), message })
    }
}

fn expect_world(plugin: &Plugin, world: World) -> Result<(), PluginError> {
    if plugin.world != world {
        return Err(PluginError::UnknownWorld {
            plugin: plugin.name.clone(),
            reason: format!("it is a {} plugin, but a {} plugin is needed here", plugin.world, world),
        });
    }
    Ok(())
}

fn check_info(plugin: &Plugin, info: &PluginInfo, kind: PluginKind) -> Result<(), PluginError> {
    if !info.abi.starts_with("0.1.") {
        return Err(PluginError::Abi {
            plugin: plugin.name.clone(),
            found: info.abi.clone(),
            supported: CONTRACT_VERSION.into(),
            culprit: "its wit package matches, but its info() reports".into(),
        });
    }
    if info.kind != kind {
        return Err(PluginError::UnknownWorld {
            plugin: plugin.name.clone(),
            reason: format!("its info() says kind {:?} but it exports the {} world", info.kind, plugin.world),
        });
    }
    Ok(())
}

fn instantiate_err(plugin: &Plugin, limits: &Limits, store: &Store<StoreState>, e: wasmtime::Error) -> PluginError {
    match classify(e, &plugin.name, "instantiate", limits, &store.data().stderr) {
        PluginError::Trap { plugin, detail, .. } => PluginError::Instantiate { plugin, detail },
        other => other,
    }
}

/// Binding the `export` interface failed: its functions or types are not
/// the ones this host's contract has (a stale or newer copy of the wit).
fn mismatch(plugin: &Plugin, export: &str, e: wasmtime::Error) -> PluginError {
    let name = plugin
        .exports
        .iter()
        .find(|n| n.split('@').next().is_some_and(|p| p.ends_with(&format!("/{export}"))))
        .cloned()
        .unwrap_or_else(|| format!("scalebench:plugin/{export}"));
    PluginError::Mismatch { plugin: plugin.name.clone(), export: name, detail: format!("{e:#}") }
}

/// A loaded value model.
pub struct ValueModel {
    g: Guarded<model::ValueModelPlugin>,
    pub info: PluginInfo,
}

impl ValueModel {
    pub fn instantiate(rt: &Runtime, plugin: &Plugin) -> Result<ValueModel, PluginError> {
        expect_world(plugin, World::ValueModel)?;
        let maker = rt.store_maker();
        let mut store = maker.new_store(plugin, Arc::new(crate::NoServices));
        store.set_epoch_deadline(maker.ticks());
        let instance = match rt.linker_model.instantiate(&mut store, &plugin.component) {
            Ok(i) => i,
            Err(e) => return Err(instantiate_err(plugin, &maker.limits, &store, e)),
        };
        let bindings = match model::ValueModelPlugin::new(&mut store, &instance) {
            Ok(b) => b,
            Err(e) => return Err(mismatch(plugin, "value-model", e)),
        };
        let mut g = Guarded {
            name: plugin.name.clone(),
            store,
            bindings,
            limits: maker.limits,
            ticks: maker.ticks(),
            poisoned: false,
        };
        let info = g.call("info", |b, s| b.scalebench_plugin_value_model().call_info(s))?;
        check_info(plugin, &info, PluginKind::ValueModel)?;
        Ok(ValueModel { g, info })
    }

    pub fn name(&self) -> &str {
        &self.g.name
    }

    /// Linear memory the instance holds now, in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.g.memory_bytes()
    }

    pub fn configure(&mut self, params_json: &str) -> Result<(), PluginError> {
        let r = self.g.call("configure", |b, s| b.scalebench_plugin_value_model().call_configure(s, params_json))?;
        self.g.returned("configure", r)
    }

    pub fn sample_period_ms(&mut self) -> Result<u64, PluginError> {
        self.g.call("sample-period-ms", |b, s| b.scalebench_plugin_value_model().call_sample_period_ms(s))
    }

    /// Metadata of tags first .. first+count, asked for in slices of
    /// [`POINTS_PER_CALL`] so no point count trips a per-call limit.
    pub fn tags(&mut self, seed: u64, first: u32, count: u32) -> Result<Vec<TagInfo>, PluginError> {
        let mut out = Vec::with_capacity(count as usize);
        let mut at = first;
        let end = first.saturating_add(count);
        while at < end {
            let n = (end - at).min(POINTS_PER_CALL as u32);
            let got = self.g.call("tags", |b, s| b.scalebench_plugin_value_model().call_tags(s, seed, at, n))?;
            if got.len() != n as usize {
                return Err(PluginError::Contract {
                    plugin: self.g.name.clone(),
                    call: "tags".into(),
                    problem: format!("asked for {n} tags from index {at}, it described {}", got.len()),
                });
            }
            out.extend(got);
            at += n;
        }
        Ok(out)
    }

    pub fn sample(&mut self, seed: u64, first: u32, count: u32, sample: u64) -> Result<Vec<f64>, PluginError> {
        self.g.call("sample", |b, s| b.scalebench_plugin_value_model().call_sample(s, seed, first, count, sample))
    }

    pub fn series(&mut self, seed: u64, tag: u32, start: u64, count: u32) -> Result<Vec<f64>, PluginError> {
        self.g.call("series", |b, s| b.scalebench_plugin_value_model().call_series(s, seed, tag, start, count))
    }
}

/// A loaded probe set.
pub struct ProbeSet {
    g: Guarded<ProbeBindings>,
    pub info: PluginInfo,
    /// What [`ProbeSet::renew`] instantiates again.
    source: (StoreMaker, Plugin, Arc<dyn HostServices>),
}

struct ProbeBindings {
    main: probe::ProbeSetPlugin,
    /// The optional `probe-answer` export (added within 0.1; older probe sets lack it).
    answer: Option<probe_answer::ProbeAnswerExports>,
}

impl ProbeSet {
    pub fn instantiate(
        rt: &Runtime,
        plugin: &Plugin,
        services: Arc<dyn HostServices>,
    ) -> Result<ProbeSet, PluginError> {
        expect_world(plugin, World::ProbeSet)?;
        Self::instantiate_from((rt.store_maker().clone(), plugin.clone(), services))
    }

    fn instantiate_from(source: (StoreMaker, Plugin, Arc<dyn HostServices>)) -> Result<ProbeSet, PluginError> {
        let (maker, plugin, services) = &source;
        let mut store = maker.new_store(plugin, services.clone());
        store.set_epoch_deadline(maker.ticks());
        let instance = match maker.linker_host.instantiate(&mut store, &plugin.component) {
            Ok(i) => i,
            Err(e) => return Err(instantiate_err(plugin, &maker.limits, &store, e)),
        };
        let main = match probe::ProbeSetPlugin::new(&mut store, &instance) {
            Ok(b) => b,
            Err(e) => return Err(mismatch(plugin, "probe-set", e)),
        };
        // Present means it must bind: a probe-answer of the wrong shape is an error, not "absent".
        let answer = match optional_export(plugin, "probe-answer") {
            None => None,
            Some(_) => match probe_answer::ProbeAnswerExports::new(&mut store, &instance) {
                Ok(a) => Some(a),
                Err(e) => return Err(mismatch(plugin, "probe-answer", e)),
            },
        };
        let bindings = ProbeBindings { main, answer };
        let mut g = Guarded {
            name: plugin.name.clone(),
            store,
            bindings,
            limits: maker.limits,
            ticks: maker.ticks(),
            poisoned: false,
        };
        let info = g.call("info", |b, s| b.main.scalebench_plugin_probe_set().call_info(s))?;
        check_info(plugin, &info, PluginKind::ProbeSet)?;
        Ok(ProbeSet { g, info, source })
    }

    /// Replace the instance with a fresh one of the same plugin: the memory
    /// its calls grew goes back to the system (a WebAssembly memory never
    /// shrinks, and judging an hour of 1,000 points' rows grows a probe
    /// set's by tens of MB). What the plugin kept between calls is gone: call
    /// `setup` again. On an error the instance is left as it was.
    pub fn renew(&mut self) -> Result<(), PluginError> {
        *self = Self::instantiate_from(self.source.clone())?;
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.g.name
    }

    /// Linear memory the instance holds now, in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.g.memory_bytes()
    }

    pub fn setup(&mut self, params_json: &str, points: &[TagInfo]) -> Result<Vec<probe_types::Probe>, PluginError> {
        let r = self.g.call("setup", |b, s| b.main.scalebench_plugin_probe_set().call_setup(s, params_json, points))?;
        self.g.returned("setup", r)
    }

    /// Ok(Err(reason)) when the plugin judges the response invalid.
    pub fn check(
        &mut self,
        name: &str,
        response: &probe_types::ProbeResponse,
    ) -> Result<Result<(), String>, PluginError> {
        self.g.call("check", |b, s| b.main.scalebench_plugin_probe_set().call_check(s, name, response))
    }

    /// Does this probe set size its HTTP answers (does it export `probe-answer`)?
    pub fn sizes_answers(&self) -> bool {
        self.g.bindings.answer.is_some()
    }

    /// Readings or records the HTTP answer to `name` holds, as the probe set
    /// counts them; Ok(None) when it cannot tell or has no `probe-answer`.
    pub fn answer_size(
        &mut self,
        name: &str,
        response: &crate::types::HttpResponse,
    ) -> Result<Option<u64>, PluginError> {
        if !self.sizes_answers() {
            return Ok(None);
        }
        self.g.call("size", |b, s| {
            b.answer.as_ref().expect("checked").scalebench_plugin_probe_answer().call_size(s, name, response)
        })
    }
}

/// A loaded target adapter.
pub struct TargetAdapter {
    g: Guarded<AdapterBindings>,
    pub info: PluginInfo,
}

struct AdapterBindings {
    main: adapter::TargetAdapterPlugin,
    /// The optional `history-sink` export (added within 0.1; older adapters lack it).
    history: Option<history::HistorySinkExports>,
    /// The optional `http-ingest` export (added within 0.1; older adapters lack it).
    http: Option<http_ingest::HttpIngestExports>,
}

/// Does the component export `history-sink` of a 0.1 contract?
fn history_export(plugin: &Plugin) -> Option<&str> {
    optional_export(plugin, "history-sink")
}

/// Does the component export the optional interface `name` of a 0.1 contract?
fn optional_export<'a>(plugin: &'a Plugin, name: &str) -> Option<&'a str> {
    let prefix = format!("scalebench:plugin/{name}@");
    plugin
        .exports
        .iter()
        .map(String::as_str)
        .find(|e| e.strip_prefix(prefix.as_str()).is_some_and(|v| v.starts_with("0.1.")))
}

impl TargetAdapter {
    pub fn instantiate(
        rt: &Runtime,
        plugin: &Plugin,
        services: Arc<dyn HostServices>,
    ) -> Result<TargetAdapter, PluginError> {
        expect_world(plugin, World::TargetAdapter)?;
        let maker = rt.store_maker();
        let mut store = maker.new_store(plugin, services);
        store.set_epoch_deadline(maker.ticks());
        let instance = match maker.linker_host.instantiate(&mut store, &plugin.component) {
            Ok(i) => i,
            Err(e) => return Err(instantiate_err(plugin, &maker.limits, &store, e)),
        };
        let main = match adapter::TargetAdapterPlugin::new(&mut store, &instance) {
            Ok(b) => b,
            Err(e) => return Err(mismatch(plugin, "target-adapter", e)),
        };
        // Present means it must bind: a history-sink of the wrong shape is an error, not "absent".
        let history = match history_export(plugin) {
            None => None,
            Some(_) => match history::HistorySinkExports::new(&mut store, &instance) {
                Ok(h) => Some(h),
                Err(e) => return Err(mismatch(plugin, "history-sink", e)),
            },
        };
        let http = match optional_export(plugin, "http-ingest") {
            None => None,
            Some(_) => match http_ingest::HttpIngestExports::new(&mut store, &instance) {
                Ok(h) => Some(h),
                Err(e) => return Err(mismatch(plugin, "http-ingest", e)),
            },
        };
        let bindings = AdapterBindings { main, history, http };
        let mut g = Guarded {
            name: plugin.name.clone(),
            store,
            bindings,
            limits: maker.limits,
            ticks: maker.ticks(),
            poisoned: false,
        };
        let info = g.call("info", |b, s| b.main.scalebench_plugin_target_adapter().call_info(s))?;
        check_info(plugin, &info, PluginKind::TargetAdapter)?;
        Ok(TargetAdapter { g, info })
    }

    pub fn name(&self) -> &str {
        &self.g.name
    }

    /// Linear memory the instance holds now, in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.g.memory_bytes()
    }

    pub fn configure(&mut self, params_json: &str) -> Result<adapter_types::Plan, PluginError> {
        let r = self
            .g
            .call("configure", |b, s| b.main.scalebench_plugin_target_adapter().call_configure(s, params_json))?;
        self.g.returned("configure", r)
    }

    /// The address table for `points`, asked for in slices of
    /// [`POINTS_PER_CALL`]; one entry per point.
    pub fn addresses(&mut self, points: &[TagInfo]) -> Result<Vec<String>, PluginError> {
        let mut out = Vec::with_capacity(points.len());
        for slice in points.chunks(POINTS_PER_CALL) {
            let got =
                self.g.call("addresses", |b, s| b.main.scalebench_plugin_target_adapter().call_addresses(s, slice))?;
            if got.len() != slice.len() {
                return Err(PluginError::Contract {
                    plugin: self.g.name.clone(),
                    call: "addresses".into(),
                    problem: format!(
                        "gave {} addresses for {} points (one per point is expected)",
                        got.len(),
                        slice.len()
                    ),
                });
            }
            out.extend(got);
        }
        Ok(out)
    }

    /// Topology messages for `points` in one call: callers pass slices of
    /// [`POINTS_PER_CALL`] and send each slice's messages before asking for
    /// the next, so 1M points never sit in memory as messages at once (an
    /// adapter describes an equip again when it gains points in a later
    /// slice, as it does between steps).
    pub fn topology(&mut self, points: &[TagInfo]) -> Result<Vec<adapter_types::Message>, PluginError> {
        self.g.call("topology", |b, s| b.main.scalebench_plugin_target_adapter().call_topology(s, points))
    }

    pub fn encode(&mut self, batch: &Readings) -> Result<adapter_types::EncodedBatch, PluginError> {
        self.g.call("encode", |b, s| b.main.scalebench_plugin_target_adapter().call_encode(s, batch))
    }

    pub fn canary(&mut self, seq: u64, ts_ms: i64) -> Result<adapter_types::Message, PluginError> {
        self.g.call("canary", |b, s| b.main.scalebench_plugin_target_adapter().call_canary(s, seq, ts_ms))
    }

    pub fn preflight(&mut self) -> Result<(), PluginError> {
        let r = self.g.call("preflight", |b, s| b.main.scalebench_plugin_target_adapter().call_preflight(s))?;
        self.g.returned("preflight", r)
    }

    pub fn stored(&mut self, window: Window) -> Result<Vec<PerSecond>, PluginError> {
        let r = self.g.call("stored", |b, s| b.main.scalebench_plugin_target_adapter().call_stored(s, window))?;
        self.g.returned("stored", r)
    }

    pub fn canaries_stored(&mut self, from_seq: u64) -> Result<Vec<u64>, PluginError> {
        let r = self.g.call("canaries-stored", |b, s| {
            b.main.scalebench_plugin_target_adapter().call_canaries_stored(s, from_seq)
        })?;
        self.g.returned("canaries-stored", r)
    }

    pub fn stats(&mut self) -> Result<Vec<Stat>, PluginError> {
        let r = self.g.call("stats", |b, s| b.main.scalebench_plugin_target_adapter().call_stats(s))?;
        self.g.returned("stats", r)
    }

    /// Can this adapter write history (does it export `history-sink`)?
    pub fn has_history(&self) -> bool {
        self.g.bindings.history.is_some()
    }

    /// How the target takes history; Ok(None) when the adapter cannot prefill.
    pub fn history_plan(&mut self) -> Result<Option<history_types::HistoryPlan>, PluginError> {
        if !self.has_history() {
            return Ok(None);
        }
        let r = self.g.call("describe", |b, s| {
            b.history.as_ref().expect("checked").scalebench_plugin_history_sink().call_describe(s)
        })?;
        self.g.returned("describe", r).map(Some)
    }

    /// Stored keys of these points (empty when the adapter cannot prefill).
    pub fn point_keys(&mut self, points: &[TagInfo]) -> Result<Vec<String>, PluginError> {
        if !self.has_history() {
            return Ok(Vec::new());
        }
        self.g.call("point-keys", |b, s| {
            b.history.as_ref().expect("checked").scalebench_plugin_history_sink().call_point_keys(s, points)
        })
    }

    /// Does this adapter say what goes with its HTTP messages and judge the
    /// responses (does it export `http-ingest`)?
    pub fn has_http_ingest(&self) -> bool {
        self.g.bindings.http.is_some()
    }

    /// Headers for requests to `address`; empty when the adapter has no `http-ingest`.
    pub fn http_headers(&mut self, address: &str) -> Result<Vec<(String, String)>, PluginError> {
        if !self.has_http_ingest() {
            return Ok(Vec::new());
        }
        let r = self.g.call("headers", |b, s| {
            b.http.as_ref().expect("checked").scalebench_plugin_http_ingest().call_headers(s, address)
        })?;
        let headers = self.g.returned("headers", r)?;
        let bytes: usize = headers.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
        if bytes > MAX_HEADER_BYTES {
            return Err(PluginError::Contract {
                plugin: self.g.name.clone(),
                call: "headers".into(),
                problem: format!(
                    "gave {} KiB of headers for {address}; at most {} KiB go with a request (HTTP servers refuse more)",
                    bytes >> 10,
                    MAX_HEADER_BYTES >> 10
                ),
            });
        }
        Ok(headers)
    }

    /// Ok(Err(reason)) when the adapter says a 2xx response is not an ack;
    /// Ok(Ok(())) for every response when it has no `http-ingest`.
    pub fn judge(
        &mut self,
        address: &str,
        response: &crate::types::HttpResponse,
    ) -> Result<Result<(), String>, PluginError> {
        if !self.has_http_ingest() {
            return Ok(Ok(()));
        }
        self.g.call("judge", |b, s| {
            b.http.as_ref().expect("checked").scalebench_plugin_http_ingest().call_judge(s, address, response)
        })
    }
}
