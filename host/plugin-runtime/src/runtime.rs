//! The engine, loading, and the guarded call path shared by every world.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store, StoreLimitsBuilder};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::WasiCtxBuilder;

use crate::cache::{self, Cache, Source};
use crate::host::{HostServices, StoreState};
use crate::validate::{self, World};
use crate::PluginError;

/// The epoch advances this often; deadlines are whole ticks.
const TICK: Duration = Duration::from_millis(5);
const STDERR_CAPACITY: usize = 16 * 1024;

/// Per-instance limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest a single call into the plugin may run (host imports included).
    pub call_timeout: Duration,
    /// Most linear memory one instance may grow to.
    pub memory_bytes: u64,
    /// Most data one call may move from the plugin to the host (strings and
    /// lists it returns or passes to an import): wasmtime's per-call
    /// "hostcall fuel". The host's own per-point calls are sliced
    /// ([`crate::POINTS_PER_CALL`]) so that a correct plugin stays far
    /// below it at any point count.
    pub call_data_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { call_timeout: Duration::from_secs(30), memory_bytes: 1 << 30, call_data_bytes: 128 << 20 }
    }
}

/// A compiled, validated plugin, ready to instantiate.
#[derive(Clone)]
pub struct Plugin {
    /// What the user called it: a built-in name or the path they gave.
    pub name: String,
    pub world: World,
    pub sha256: String,
    pub size_bytes: usize,
    /// Imports and exports, as found in the component.
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    /// Whether this load hit the compile cache.
    pub from_cache: bool,
    pub load_time: Duration,
    pub(crate) component: Component,
}

pub struct Runtime {
    /// The engine, the limits and the host world's linker.
    maker: StoreMaker,
    cache: Cache,
    stop_ticker: Arc<AtomicBool>,
    pub(crate) linker_model: Linker<StoreState>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

fn add_wasi_shims(linker: &mut Linker<StoreState>) -> anyhow::Result<()> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::p2::bindings::{cli, sync::io};
    // Only the shims std imports: no filesystem, sockets, clocks or random.
    cli::exit::add_to_linker::<StoreState, WasiCli>(linker, StoreState::cli)?;
    cli::environment::add_to_linker::<StoreState, WasiCli>(linker, StoreState::cli)?;
    cli::stdin::add_to_linker::<StoreState, WasiCli>(linker, StoreState::cli)?;
    cli::stdout::add_to_linker::<StoreState, WasiCli>(linker, StoreState::cli)?;
    cli::stderr::add_to_linker::<StoreState, WasiCli>(linker, StoreState::cli)?;
    cli::terminal_input::add_to_linker::<StoreState, WasiCli>(linker, StoreState::cli)?;
    cli::terminal_output::add_to_linker::<StoreState, WasiCli>(linker, StoreState::cli)?;
    cli::terminal_stdin::add_to_linker::<StoreState, WasiCli>(linker, StoreState::cli)?;
    cli::terminal_stdout::add_to_linker::<StoreState, WasiCli>(linker, StoreState::cli)?;
    cli::terminal_stderr::add_to_linker::<StoreState, WasiCli>(linker, StoreState::cli)?;
    wasmtime_wasi::p2::bindings::sync::io::error::add_to_linker::<StoreState, HasSelf<ResourceTable>>(linker, |s| {
        &mut s.table
    })?;
    io::poll::add_to_linker::<StoreState, HasSelf<ResourceTable>>(linker, |s| &mut s.table)?;
    io::streams::add_to_linker::<StoreState, HasSelf<ResourceTable>>(linker, |s| &mut s.table)?;
    Ok(())
}

impl Runtime {
    /// A runtime with the default cache directory.
    pub fn new(limits: Limits) -> anyhow::Result<Runtime> {
        Self::with_cache_dir(limits, cache::default_dir())
    }

    pub fn with_cache_dir(limits: Limits, cache_dir: Option<PathBuf>) -> anyhow::Result<Runtime> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        config.wasm_component_model(true);
        let engine = Engine::new(&config)?;

        let stop = Arc::new(AtomicBool::new(false));
        {
            let engine = engine.weak();
            let stop = stop.clone();
            std::thread::Builder::new().name("wasm-epoch".into()).spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    match engine.upgrade() {
                        Some(e) => e.increment_epoch(),
                        None => break,
                    }
                }
            })?;
        }

        let mut linker_model = Linker::new(&engine);
        add_wasi_shims(&mut linker_model)?;
        crate::bindings::model::ValueModelPlugin::add_to_linker::<StoreState, HasSelf<StoreState>>(
            &mut linker_model,
            |s| s,
        )?;
        let mut linker_host = Linker::new(&engine);
        add_wasi_shims(&mut linker_host)?;
        crate::bindings::adapter::TargetAdapterPlugin::add_to_linker::<StoreState, HasSelf<StoreState>>(
            &mut linker_host,
            |s| s,
        )?;

        let cache = Cache::new(&engine, cache_dir);
        let maker = StoreMaker { engine, limits, linker_host };
        Ok(Runtime { maker, cache, stop_ticker: stop, linker_model })
    }

    pub fn engine(&self) -> &Engine {
        &self.maker.engine
    }

    /// What every plugin this runtime instantiates may use.
    pub fn limits(&self) -> &Limits {
        &self.maker.limits
    }

    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache.dir.as_deref()
    }

    /// Load a plugin file.
    pub fn load_path(&self, path: &Path) -> Result<Plugin, PluginError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| PluginError::Read { plugin: name.clone(), source })?;
        self.load_bytes(&name, &bytes)
    }

    /// Load a plugin from bytes; `name` is how errors will refer to it.
    pub fn load_bytes(&self, name: &str, bytes: &[u8]) -> Result<Plugin, PluginError> {
        let started = Instant::now();
        validate::check_header(name, bytes)?;
        let sha256 = cache::wasm_sha256(bytes);
        let (component, source) = self
            .cache
            .get_or_compile(self.engine(), &sha256, bytes)
            .map_err(|e| PluginError::Compile { plugin: name.into(), detail: format!("{e:#}") })?;
        let ty = component.component_type();
        let imports: Vec<String> = ty.imports(self.engine()).map(|(n, _)| n.to_string()).collect();
        let exports: Vec<String> = ty.exports(self.engine()).map(|(n, _)| n.to_string()).collect();
        let world = validate::check_world(name, &exports, &imports)?;
        Ok(Plugin {
            name: name.into(),
            world,
            sha256,
            size_bytes: bytes.len(),
            imports,
            exports,
            from_cache: source == Source::Cache,
            load_time: started.elapsed(),
            component,
        })
    }

    /// What a store and a host-world instance need: the runtime's own,
    /// or a clone of it to instantiate again where the runtime is not at hand.
    pub(crate) fn store_maker(&self) -> &StoreMaker {
        &self.maker
    }
}

/// What a new store and instance of a host-world plugin need: clonable, so
/// an instance can be made again where its [`Runtime`] is not at hand (a
/// probe set renewed on the probes' own thread). The engine is shared, so
/// the runtime's ticker still bounds every call.
#[derive(Clone)]
pub(crate) struct StoreMaker {
    engine: Engine,
    pub(crate) limits: Limits,
    pub(crate) linker_host: Linker<StoreState>,
}

impl StoreMaker {
    pub(crate) fn new_store(&self, plugin: &Plugin, services: Arc<dyn HostServices>) -> Store<StoreState> {
        new_store(&self.engine, &self.limits, plugin, services)
    }

    pub(crate) fn ticks(&self) -> u64 {
        ticks(&self.limits)
    }
}

fn new_store(engine: &Engine, limits: &Limits, plugin: &Plugin, services: Arc<dyn HostServices>) -> Store<StoreState> {
    let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
    let wasi = WasiCtxBuilder::new().stderr(stderr.clone()).build();
    let store_limits = StoreLimitsBuilder::new()
        .memory_size(limits.memory_bytes as usize)
        .trap_on_grow_failure(true)
        .instances(16)
        .build();
    let state = StoreState {
        plugin: plugin.name.clone(),
        services,
        limits: crate::host::Limiter { inner: store_limits, memory_bytes: 0 },
        wasi,
        table: ResourceTable::new(),
        stderr,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limits);
    store.set_hostcall_fuel(limits.call_data_bytes as usize);
    store.epoch_deadline_trap();
    store
}

fn ticks(limits: &Limits) -> u64 {
    (limits.call_timeout.as_millis() as u64 / TICK.as_millis() as u64).max(1)
}

/// Turn a wasmtime error from a call into a [`PluginError`] naming the
/// plugin, the call and the cause.
pub(crate) fn classify(
    err: wasmtime::Error,
    plugin: &str,
    call: &str,
    limits: &Limits,
    stderr: &MemoryOutputPipe,
) -> PluginError {
    if let Some(wasmtime::Trap::Interrupt) = err.downcast_ref::<wasmtime::Trap>() {
        return PluginError::Timeout { plugin: plugin.into(), call: call.into(), limit: limits.call_timeout };
    }
    let chain = format!("{err:#}");
    if chain.contains("fuel allocated for hostcalls has been exhausted") {
        return PluginError::CallData { plugin: plugin.into(), call: call.into(), limit_bytes: limits.call_data_bytes };
    }
    if chain.contains("forcing trap when growing memory") || chain.contains("memory allocation of") {
        return PluginError::OutOfMemory { plugin: plugin.into(), call: call.into(), limit_bytes: limits.memory_bytes };
    }
    let mut detail = match err.downcast_ref::<wasmtime::Trap>() {
        Some(trap) => trap.to_string(),
        None => err.root_cause().to_string(),
    };
    let guest_said = String::from_utf8_lossy(&stderr.contents()).trim().to_string();
    if !guest_said.is_empty() {
        let tail: String = guest_said.chars().rev().take(600).collect::<Vec<_>>().into_iter().rev().collect();
        detail = format!("{detail}; the plugin wrote: {tail}");
    }
    PluginError::Trap { plugin: plugin.into(), call: call.into(), detail }
}
