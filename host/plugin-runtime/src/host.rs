//! What plugins may ask the host for. The runtime routes each import of a
//! plugin to a [`HostServices`] that the caller provides: scalebench's gives
//! HTTP and SQL against the run's own stack only, and times them.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits};

/// The store's limits, and how much linear memory the instance holds now
/// (what a plugin costs per point is measured, not guessed).
pub struct Limiter {
    pub(crate) inner: StoreLimits,
    pub(crate) memory_bytes: usize,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let ok = self.inner.memory_growing(current, desired, maximum)?;
        if ok {
            self.memory_bytes += desired.saturating_sub(current);
        }
        Ok(ok)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.inner.memory_grow_failed(error)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.inner.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::adapter::scalebench::plugin::{entropy, http_client, logging, sql_client, types};
use crate::types::{HttpRequest, HttpResponse, LogLevel, SqlRows, SqlValue};

/// Side effects performed for plugins. Every method names the calling plugin
/// so logs and timings can say who asked.
pub trait HostServices: Send + Sync {
    fn log(&self, plugin: &str, level: LogLevel, message: &str) {
        let level = match level {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        };
        eprintln!("[{plugin}] {level}: {message}");
    }

    fn http(&self, plugin: &str, request: HttpRequest) -> Result<HttpResponse, String> {
        let _ = request;
        Err(format!("{plugin}: this run offers no HTTP services"))
    }

    fn sql(&self, plugin: &str, database: &str, statement: &str, params: &[SqlValue]) -> Result<SqlRows, String> {
        let _ = (statement, params);
        Err(format!("{plugin}: this run offers no database `{database}`"))
    }
}

/// Services for runs without a stack (`gen`, `plugins inspect`): logging only.
pub struct NoServices;
impl HostServices for NoServices {}

/// Everything a plugin's store holds.
pub(crate) struct StoreState {
    pub plugin: String,
    pub services: Arc<dyn HostServices>,
    pub limits: Limiter,
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    /// The guest's stderr (a panic message lands here), bounded.
    pub stderr: MemoryOutputPipe,
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl types::Host for StoreState {}

impl logging::Host for StoreState {
    fn log(&mut self, level: LogLevel, message: String) {
        self.services.log(&self.plugin, level, &message);
    }
}

impl http_client::Host for StoreState {
    fn send(&mut self, request: HttpRequest) -> Result<HttpResponse, String> {
        self.services.http(&self.plugin, request)
    }
}

impl sql_client::Host for StoreState {
    fn query(&mut self, database: String, statement: String, params: Vec<SqlValue>) -> Result<SqlRows, String> {
        self.services.sql(&self.plugin, &database, &statement, &params)
    }
}

impl entropy::Host for StoreState {
    fn random_bytes(&mut self, len: u32) -> Vec<u8> {
        use std::io::Read;
        let mut buf = vec![0u8; len.min(4096) as usize];
        if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
            let _ = f.read_exact(&mut buf);
        }
        buf
    }
}
