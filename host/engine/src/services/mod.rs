//! The host services a run hands its plugins ([`plugin_runtime::HostServices`]):
//! SQL and HTTP against the run's own stack only, every request timed.
//!
//! - **Services.** A [`StackServices`] knows two maps, fixed when it is made:
//!   database service name → PostgreSQL connection string, and HTTP service
//!   name → base URL (`http://127.0.0.1:28080`). A plugin names a service;
//!   anything not in the map is refused with a message that lists the known
//!   ones. HTTP goes only to `<base URL><path>`: the path must start with `/`,
//!   redirects are not followed and a `Host` header is refused, so a plugin
//!   cannot reach anything the run did not name.
//! - **Connections.** One connection per (role, database service), opened
//!   lazily, behind a `Mutex`. A role is who asks: the counting adapter, the
//!   canary poller, the probe set ([`Scoped`] hands a plugin its role), so a
//!   slow probe never delays the canary poll and so never inflates lag.
//!   [`StackServices::close_role`] closes a role's connections: the probes
//!   close theirs when they are done, so the SUT's backend that served them
//!   gives back what a large read made it allocate, rather than holding it
//!   for the rest of the run (an hour-long soak saw PostgreSQL keep 80 MB).
//!   [`StackServices::pg_roundtrip`] uses a connection of its own too.
//! - **Read-only.** Every plugin statement runs in a transaction opened
//!   `READ ONLY` (and every connection has `default_transaction_read_only`),
//!   so a target or probe set cannot write the rows it then counts: an
//!   INSERT, UPDATE, DELETE or DDL is refused by the server.
//!   When a statement fails because the connection is closed, the host
//!   reconnects once and runs it again; statements sent through here are
//!   expected to be reads (probes, counting, stats), so this is safe.
//!   Every connection gets `statement_timeout` = the services' timeout.
//! - **Statements** are prepared unnamed per call (parse + bind, two round
//!   trips on every call, no plan cache), so the 6th run of a probe is planned
//!   the same way as the 1st: no switch to a generic plan mid-measurement.
//! - **Parameters** ([`SqlValue`]) bind by the type the server infers for the
//!   placeholder: `int` → int8/int4/int2 (range-checked), float8/float4, or
//!   its decimal text for any other type (numeric, text, ...); `float` →
//!   float8/float4 or its text (`NaN`, `Infinity`); `boolean` → bool or
//!   `true`/`false`; `text` → sent in text format, so the server parses it as
//!   whatever the placeholder is (text, timestamptz, uuid, an array literal
//!   ...); `null` → NULL of any type. Casting placeholders (`$1::bigint`)
//!   keeps this unambiguous.
//! - **Result columns** convert by their PostgreSQL type: int2/int4/int8/oid →
//!   `int`; float4/float8 → `float`; numeric → `float` (decoded exactly to its
//!   decimal text, then parsed; `NaN`/`Infinity` kept); bool → `boolean`;
//!   text/varchar/bpchar/name/"char"/json/jsonb/unknown/citext → `text`;
//!   timestamptz → `text`, RFC 3339 in UTC (`2026-11-08T00:33:11.5Z`,
//!   fraction only when non-zero, `infinity`/`-infinity` as such);
//!   timestamp → the same without `Z` (it has no zone); date → `YYYY-MM-DD`;
//!   uuid → its usual text; bytea → `\x<hex>`, as PostgreSQL prints it. The
//!   extended protocol returns binary values and the host cannot ask for
//!   `::text` after the fact, so **any other type is an error** that names
//!   the column and its type and says to cast it (`col::text`) in the
//!   statement. NULL is `null` for every type.
//! - **Timing.** [`StackServices::timed_sql`] and [`StackServices::timed_http`]
//!   return the duration of the request itself: for SQL from sending the
//!   statement to the last row converted (excluding opening a connection and
//!   waiting for the mutex); for HTTP from sending the request to the last
//!   byte of the body (a new TCP connection is part of it, as for any
//!   client). Every request is also kept, per plugin, in a small log
//!   ([`StackServices::timings`], the last [`TIMING_LOG_LEN`]).
//!
//! The `postgres` crate is synchronous and runs its own small runtime: call
//! the SQL methods from plain threads (or `spawn_blocking`), never from inside
//! an async task. Dropping a `StackServices` anywhere is fine: its
//! connections are closed on a thread of their own.
//!
//! One concept per file: this module holds [`StackServices`] itself (its
//! maps, the timing log, the plugin-facing [`HostServices`] impls and
//! [`Scoped`]); `sql` its PostgreSQL connections and statements; `http` its
//! HTTP requests; `pg_codec` how [`SqlValue`] parameters bind and result
//! columns convert (PostgreSQL's binary formats).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{anyhow, bail};
use plugin_runtime::types::{HttpRequest, HttpResponse, LogLevel, SqlRows, SqlValue};
use plugin_runtime::HostServices;

mod http;
mod pg_codec;
mod sql;

pub use crate::pg_connect::pg_error;
pub use http::MAX_HTTP_BODY_BYTES;
pub use pg_codec::{date_text, timestamp_text};

/// How many requests per plugin [`StackServices::timings`] keeps.
pub const TIMING_LOG_LEN: usize = 256;
/// One request the host performed for a plugin (or for a probe).
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// "sql" or "http".
    pub kind: &'static str,
    pub service: String,
    /// The statement's first 80 characters, or "GET /path".
    pub what: String,
    pub duration: Duration,
    /// False when the request failed (its error is not kept here).
    pub ok: bool,
}

type Conn = Mutex<Option<postgres::Client>>;

/// The role whose connection a request uses when none is given.
pub const DEFAULT_ROLE: &str = "plugins";
/// The probe set's role: its `setup` reads and every timed probe run.
pub const PROBES_ROLE: &str = "probes";

/// SQL and HTTP against the run's own stack, timed; see the module docs.
pub struct StackServices {
    databases: BTreeMap<String, crate::pg_connect::PgTarget>,
    /// Connections by "role/service", made on first use.
    conns: Mutex<HashMap<String, std::sync::Arc<Conn>>>,
    ping_conns: HashMap<String, Conn>,
    http_bases: BTreeMap<String, String>,
    agent: ureq::Agent,
    timeout: Duration,
    verbose: bool,
    log: Mutex<HashMap<String, VecDeque<Timing>>>,
}

fn known(names: impl Iterator<Item = impl AsRef<str>>) -> String {
    let v: Vec<String> = names.map(|n| format!("`{}`", n.as_ref())).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

impl StackServices {
    /// Default timeout of one SQL statement (server-side `statement_timeout`),
    /// one connection attempt, and one HTTP request.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    /// `databases`: service name → PostgreSQL connection string (key=value or
    /// `postgresql://` URL); `http`: service name → base URL (`http://host:port`
    /// or `https://…`, optionally with a path prefix). Nothing is connected yet.
    pub fn new(databases: BTreeMap<String, String>, http: BTreeMap<String, String>) -> anyhow::Result<StackServices> {
        let mut dbs = BTreeMap::new();
        for (name, conn) in databases {
            let mut cfg = crate::pg_connect::parse(&conn).map_err(|e| anyhow!("database service `{name}`: {e}"))?;
            if cfg.config.get_application_name().is_none() {
                cfg.config.application_name("scalebench");
            }
            dbs.insert(name, cfg);
        }
        let mut bases = BTreeMap::new();
        for (name, url) in http {
            let url = url.trim().trim_end_matches('/').to_string();
            let Some(rest) = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")) else {
                bail!("HTTP service `{name}`: base URL {url:?} must start with http:// or https://");
            };
            if rest.is_empty() || rest.starts_with('/') || rest.contains(['?', '#', '@']) {
                bail!(
                    "HTTP service `{name}`: base URL {url:?} needs a host[:port], and no query, fragment or user info"
                );
            }
            bases.insert(name, url);
        }
        let conns = Mutex::new(HashMap::new());
        let ping_conns = dbs.keys().map(|k| (k.clone(), Mutex::new(None))).collect();
        let mut s = StackServices {
            databases: dbs,
            conns,
            ping_conns,
            http_bases: bases,
            agent: ureq::Agent::new(),
            timeout: Self::DEFAULT_TIMEOUT,
            verbose: false,
            log: Mutex::new(HashMap::new()),
        };
        s.agent = s.make_agent();
        Ok(s)
    }

    /// Limit of one SQL statement, connection attempt and HTTP request.
    pub fn with_timeout(mut self, timeout: Duration) -> StackServices {
        self.timeout = timeout.max(Duration::from_millis(1));
        self.agent = self.make_agent();
        self
    }

    /// Also print plugins' `debug` and `trace` log lines (default: info and up).
    pub fn with_verbose_logs(mut self, verbose: bool) -> StackServices {
        self.verbose = verbose;
        self
    }

    fn make_agent(&self) -> ureq::Agent {
        crate::tls::http_agent(ureq::AgentBuilder::new().timeout(self.timeout).redirects(0).user_agent("scalebench"))
    }

    pub fn database_names(&self) -> Vec<String> {
        self.databases.keys().cloned().collect()
    }

    pub fn http_names(&self) -> Vec<String> {
        self.http_bases.keys().cloned().collect()
    }

    /// Requests performed for `plugin`, oldest first (the last [`TIMING_LOG_LEN`]).
    pub fn timings(&self, plugin: &str) -> Vec<Timing> {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.get(plugin).map(|q| q.iter().cloned().collect()).unwrap_or_default()
    }

    /// Like [`Self::timings`], and forget them.
    pub fn take_timings(&self, plugin: &str) -> Vec<Timing> {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.remove(plugin).map(Vec::from).unwrap_or_default()
    }

    fn record(&self, plugin: &str, t: Timing) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let q = log.entry(plugin.to_string()).or_default();
        if q.len() >= TIMING_LOG_LEN {
            q.pop_front();
        }
        q.push_back(t);
    }
}

impl HostServices for StackServices {
    fn log(&self, plugin: &str, level: LogLevel, message: &str) {
        let level = match level {
            LogLevel::Trace if !self.verbose => return,
            LogLevel::Debug if !self.verbose => return,
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        };
        for line in message.lines() {
            tracing::info!("[{plugin}] {level}: {line}");
        }
    }

    fn http(&self, plugin: &str, request: HttpRequest) -> Result<HttpResponse, String> {
        self.timed_http(plugin, &request).0
    }

    fn sql(&self, plugin: &str, database: &str, statement: &str, params: &[SqlValue]) -> Result<SqlRows, String> {
        self.timed_sql(plugin, database, statement, params).0
    }
}

/// The run's services as one role sees them: its SQL goes over that role's
/// own connections (see the module docs).
pub struct Scoped {
    pub services: std::sync::Arc<StackServices>,
    pub role: &'static str,
}

impl Scoped {
    pub fn shared(services: &std::sync::Arc<StackServices>, role: &'static str) -> std::sync::Arc<dyn HostServices> {
        std::sync::Arc::new(Scoped { services: services.clone(), role })
    }
}

impl HostServices for Scoped {
    fn log(&self, plugin: &str, level: LogLevel, message: &str) {
        self.services.log(plugin, level, message)
    }

    fn http(&self, plugin: &str, request: HttpRequest) -> Result<HttpResponse, String> {
        self.services.timed_http(plugin, &request).0
    }

    fn sql(&self, plugin: &str, database: &str, statement: &str, params: &[SqlValue]) -> Result<SqlRows, String> {
        self.services.timed_sql_as(self.role, plugin, database, statement, params).0
    }
}

impl Drop for StackServices {
    /// The sync `postgres` client shuts its connection down by blocking on a
    /// runtime of its own, which panics inside an async context: the last
    /// reference may be dropped there, so close connections on a plain thread.
    fn drop(&mut self) {
        let roles: Vec<std::sync::Arc<Conn>> =
            self.conns.get_mut().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, c)| c).collect();
        let conns: Vec<Conn> = self.ping_conns.drain().map(|(_, c)| c).collect();
        close_on_a_plain_thread((roles, conns));
    }
}

/// Drop `connections` on a thread of their own and wait for it: the sync
/// `postgres` client shuts its connection down by blocking on a runtime of
/// its own, which panics inside an async context.
fn close_on_a_plain_thread<T: Send + 'static>(connections: T) {
    let _ = std::thread::spawn(move || drop(connections)).join();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_services_and_paths() {
        let s = StackServices::new(
            [("postgres".to_string(), "host=127.0.0.1 port=1 user=x".to_string())].into(),
            [("api".to_string(), "http://127.0.0.1:1/".to_string())].into(),
        )
        .unwrap();
        let (r, d) = s.timed_sql("p", "mysql", "SELECT 1", &[]);
        let e = r.unwrap_err();
        assert!(e.contains("unknown database service `mysql`") && e.contains("`postgres`"), "{e}");
        assert!(d.is_none());
        assert_eq!(s.url_for("api", "/x?y=1").unwrap(), "http://127.0.0.1:1/x?y=1");
        assert!(
            s.url_for("gateway", "/").unwrap_err().contains("known")
                || s.url_for("gateway", "/").unwrap_err().contains("`api`")
        );
        assert!(s.url_for("api", "//evil.example/x").is_err());
        assert!(s.url_for("api", "x").is_err());
        let req = HttpRequest {
            method: "GET".into(),
            service: "api".into(),
            path: "/".into(),
            headers: vec![("Host".into(), "elsewhere".into())],
            body: vec![],
        };
        assert!(s.timed_http("p", &req).0.unwrap_err().contains("Host"));
        assert!(StackServices::new(BTreeMap::new(), [("a".to_string(), "ftp://x".to_string())].into()).is_err());
        assert!(StackServices::new(BTreeMap::new(), [("a".to_string(), "https://x".to_string())].into()).is_ok());
        assert!(StackServices::new(BTreeMap::new(), [("a".to_string(), "http://u@x".to_string())].into()).is_err());
    }
}
