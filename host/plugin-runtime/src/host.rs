//! What plugins may ask the host for. The runtime routes each import of a
//! plugin to a [`HostServices`] that the caller provides: scalebench's gives
//! HTTP and SQL against the run's own stack only, and times them.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::StoreLimits;
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
    pub limits: StoreLimits,
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
