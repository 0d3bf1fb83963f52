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

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::error::Error as StdError;
use std::io::Read;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use bytes::{BufMut, BytesMut};
use plugin_runtime::types::{HttpRequest, HttpResponse, LogLevel, SqlRows, SqlValue};
use plugin_runtime::HostServices;
use postgres::types::{Format, FromSql, IsNull, Kind, ToSql, Type};

/// How many requests per plugin [`StackServices::timings`] keeps.
pub const TIMING_LOG_LEN: usize = 256;
/// Largest HTTP response body the host reads for a plugin. A probe's read
/// can be large: a Haystack batch hisRead of 1,000 points over an hour of
/// 5-second history is ~82 MB of JSON (measured against the test server),
/// so the bound leaves room for three times that.
pub const MAX_HTTP_BODY_BYTES: u64 = 256 << 20;

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

/// SQL and HTTP against the run's own stack, timed; see the module docs.
pub struct StackServices {
    databases: BTreeMap<String, postgres::Config>,
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
    /// `postgresql://` URL); `http`: service name → base URL (`http://host:port`,
    /// optionally with a path prefix; no TLS). Nothing is connected yet.
    pub fn new(databases: BTreeMap<String, String>, http: BTreeMap<String, String>) -> anyhow::Result<StackServices> {
        let mut dbs = BTreeMap::new();
        for (name, conn) in databases {
            let mut cfg = postgres::Config::from_str(&conn)
                .map_err(|e| anyhow!("database service `{name}`: connection string is not valid: {e}"))?;
            if cfg.get_application_name().is_none() {
                cfg.application_name("scalebench");
            }
            dbs.insert(name, cfg);
        }
        let mut bases = BTreeMap::new();
        for (name, url) in http {
            let url = url.trim().trim_end_matches('/').to_string();
            let Some(rest) = url.strip_prefix("http://") else {
                bail!("HTTP service `{name}`: base URL {url:?} must start with http:// (this build has no TLS)");
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
        ureq::AgentBuilder::new().timeout(self.timeout).redirects(0).user_agent("scalebench").build()
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

    fn connect(&self, service: &str) -> Result<postgres::Client, String> {
        let mut cfg = self.databases[service].clone();
        if cfg.get_connect_timeout().is_none() {
            cfg.connect_timeout(self.timeout);
        }
        let mut client = cfg
            .connect(postgres::NoTls)
            .map_err(|e| format!("cannot connect to database service `{service}`: {}", pg_error(&e)))?;
        client
            .batch_execute(&format!(
                "SET statement_timeout = {}; SET default_transaction_read_only = on",
                self.timeout.as_millis().max(1)
            ))
            .map_err(|e| format!("database service `{service}`: cannot set statement_timeout: {}", pg_error(&e)))?;
        Ok(client)
    }

    fn conn_for<'a>(&'a self, map: &'a HashMap<String, Conn>, service: &str) -> Result<&'a Conn, String> {
        map.get(service).ok_or_else(|| {
            format!(
                "unknown database service `{service}`; this run's database services are: {}",
                known(self.databases.keys())
            )
        })
    }

    /// Run `f` on the service's connection: open it if needed, and when it
    /// fails because the connection is closed, reconnect once and run it again.
    /// The duration is `f`'s own, on the attempt that counted.
    fn with_conn<T>(
        &self,
        slot: &Conn,
        service: &str,
        mut f: impl FnMut(&mut postgres::Client) -> Result<(T, Duration), postgres::Error>,
    ) -> Result<(T, Duration), String> {
        let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
        let mut reconnected = false;
        loop {
            if guard.as_ref().is_none_or(|c| c.is_closed()) {
                *guard = None;
                *guard = Some(self.connect(service)?);
            }
            let client = guard.as_mut().expect("connected above");
            match f(client) {
                Ok(v) => return Ok(v),
                Err(e) if (e.is_closed() || client.is_closed()) && !reconnected => {
                    reconnected = true;
                    *guard = None;
                }
                Err(e) => return Err(pg_error(&e)),
            }
        }
    }

    /// The connection of `role` to `service`, made on first use.
    fn role_conn(&self, role: &str, service: &str) -> Result<std::sync::Arc<Conn>, String> {
        self.conn_for(&self.ping_conns, service)?;
        let mut map = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        Ok(map.entry(format!("{role}/{service}")).or_insert_with(|| std::sync::Arc::new(Mutex::new(None))).clone())
    }

    /// Run `statement` with `params` on database service `database`, timed,
    /// on the default role's connection.
    pub fn timed_sql(
        &self,
        plugin: &str,
        database: &str,
        statement: &str,
        params: &[SqlValue],
    ) -> (Result<SqlRows, String>, Option<Duration>) {
        self.timed_sql_as(DEFAULT_ROLE, plugin, database, statement, params)
    }

    /// Run `statement` with `params` on database service `database`, timed,
    /// read-only, on `role`'s own connection. The duration (prepare + query)
    /// is `None` when the request never ran (unknown service, no connection).
    pub fn timed_sql_as(
        &self,
        role: &str,
        plugin: &str,
        database: &str,
        statement: &str,
        params: &[SqlValue],
    ) -> (Result<SqlRows, String>, Option<Duration>) {
        let binds: Vec<Param> = params.iter().map(Param).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = binds.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let r = self.role_conn(role, database).and_then(|slot| {
            self.with_conn(&slot, database, |c| {
                let mut tx = c.build_transaction().read_only(true).start()?;
                let t0 = Instant::now();
                let stmt = tx.prepare(statement)?;
                let rows = tx.query(&stmt, &refs)?;
                let took = t0.elapsed();
                let converted = convert_rows(&stmt, &rows);
                tx.rollback()?;
                Ok((converted, took))
            })
        });
        let what: String = statement.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(80).collect();
        match r {
            Ok((converted, d)) => {
                let ok = converted.is_ok();
                self.record(plugin, Timing { kind: "sql", service: database.into(), what, duration: d, ok });
                (converted, Some(d))
            }
            Err(e) => {
                if self.databases.contains_key(database) {
                    self.record(
                        plugin,
                        Timing { kind: "sql", service: database.into(), what, duration: Duration::ZERO, ok: false },
                    );
                }
                (Err(e), None)
            }
        }
    }

    /// `SELECT 1` on database service `service`, timed, on a connection of its own.
    pub fn pg_roundtrip(&self, service: &str) -> anyhow::Result<Duration> {
        let slot = self.conn_for(&self.ping_conns, service).map_err(|e| anyhow!(e))?;
        let ((), d) = self
            .with_conn(slot, service, |c| {
                let t0 = Instant::now();
                c.simple_query("SELECT 1")?;
                Ok(((), t0.elapsed()))
            })
            .map_err(|e| anyhow!("SELECT 1 on database service `{service}`: {e}"))?;
        Ok(d)
    }

    /// The URL a request goes to, or why it may not go anywhere.
    pub fn url_for(&self, service: &str, path: &str) -> Result<String, String> {
        let base = self.http_bases.get(service).ok_or_else(|| {
            format!("unknown HTTP service `{service}`; this run's HTTP services are: {}", known(self.http_bases.keys()))
        })?;
        if !path.starts_with('/') || path.starts_with("//") {
            return Err(format!(
                "HTTP path {path:?} must start with a single `/` (the host adds the service's address)"
            ));
        }
        if path.chars().any(|c| c.is_ascii_control() || c == ' ' || c == '\\') {
            return Err(format!(
                "HTTP path {path:?} has spaces, backslashes or control characters; percent-encode them"
            ));
        }
        Ok(format!("{base}{path}"))
    }

    /// Perform `request` against the stack's HTTP service it names, timed.
    /// Any status comes back as a response (judging it is the caller's job);
    /// `Err` is for requests that got no response.
    pub fn timed_http(&self, plugin: &str, request: &HttpRequest) -> (Result<HttpResponse, String>, Option<Duration>) {
        let url = match self.url_for(&request.service, &request.path) {
            Ok(u) => u,
            Err(e) => return (Err(e), None),
        };
        let method = request.method.trim().to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
            return (Err(format!("HTTP method {:?} is not a method", request.method)), None);
        }
        let mut req = self.agent.request(&method, &url);
        for (k, v) in &request.headers {
            if k.eq_ignore_ascii_case("host") {
                return (
                    Err("a plugin may not set the Host header: the host addresses the stack's services".into()),
                    None,
                );
            }
            req = req.set(k, v);
        }
        let what = format!("{method} {}", request.path.chars().take(80).collect::<String>());
        let t0 = Instant::now();
        let sent = if request.body.is_empty() && matches!(method.as_str(), "GET" | "HEAD" | "DELETE" | "OPTIONS") {
            req.call()
        } else {
            req.send_bytes(&request.body)
        };
        let result = match sent {
            Ok(resp) | Err(ureq::Error::Status(_, resp)) => read_response(resp),
            Err(e) => Err(format!("{method} {} on HTTP service `{}`: {e}", request.path, request.service)),
        };
        let d = t0.elapsed();
        self.record(
            plugin,
            Timing { kind: "http", service: request.service.clone(), what, duration: d, ok: result.is_ok() },
        );
        (result, Some(d))
    }
}

fn read_response(resp: ureq::Response) -> Result<HttpResponse, String> {
    let status = resp.status();
    let mut headers = Vec::new();
    for name in resp.headers_names() {
        for v in resp.all(&name) {
            headers.push((name.clone(), v.to_string()));
        }
    }
    let mut body = Vec::new();
    resp.into_reader()
        .take(MAX_HTTP_BODY_BYTES + 1)
        .read_to_end(&mut body)
        .map_err(|e| format!("reading the HTTP response body (status {status}): {e}"))?;
    if body.len() as u64 > MAX_HTTP_BODY_BYTES {
        return Err(format!("HTTP response body is larger than {} MiB (status {status})", MAX_HTTP_BODY_BYTES >> 20));
    }
    Ok(HttpResponse { status, headers, body })
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
            eprintln!("[{plugin}] {level}: {line}");
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

/// A PostgreSQL error as one line: the server's message with its detail,
/// hint and position when it sent them.
pub fn pg_error(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = format!("{}: {} (SQLSTATE {})", db.severity(), db.message(), db.code().code());
        if let Some(d) = db.detail() {
            s += &format!("; detail: {d}");
        }
        if let Some(h) = db.hint() {
            s += &format!("; hint: {h}");
        }
        if let Some(postgres::error::ErrorPosition::Original(p)) = db.position() {
            s += &format!("; at character {p}");
        }
        return s;
    }
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let t = inner.to_string();
        if !s.contains(&t) {
            s += &format!(": {t}");
        }
        src = inner.source();
    }
    s
}

// ---------------------------------------------------------------- parameters

/// A [`SqlValue`] bound to a placeholder; see the module docs.
#[derive(Debug)]
struct Param<'a>(&'a SqlValue);

fn binary_target(v: &SqlValue, ty: &Type) -> bool {
    match v {
        SqlValue::Null => true,
        SqlValue::Int(_) => matches!(*ty, Type::INT8 | Type::INT4 | Type::INT2 | Type::FLOAT8 | Type::FLOAT4),
        SqlValue::Float(_) => matches!(*ty, Type::FLOAT8 | Type::FLOAT4),
        SqlValue::Boolean(_) => *ty == Type::BOOL,
        SqlValue::Text(_) => false,
    }
}

fn float_text(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f == f64::INFINITY {
        "Infinity".into()
    } else if f == f64::NEG_INFINITY {
        "-Infinity".into()
    } else {
        // Shortest text that reads back as the same f64.
        format!("{f:?}")
    }
}

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        let range = |i: i64, t: &str| format!("parameter {i} is out of range for {t}");
        if !binary_target(self.0, ty) {
            let text = match self.0 {
                SqlValue::Int(i) => i.to_string(),
                SqlValue::Float(f) => float_text(*f),
                SqlValue::Boolean(b) => b.to_string(),
                SqlValue::Text(s) => s.clone(),
                SqlValue::Null => unreachable!("null binds in binary"),
            };
            out.put_slice(text.as_bytes());
            return Ok(IsNull::No);
        }
        match (self.0, ty) {
            (SqlValue::Null, _) => return Ok(IsNull::Yes),
            (SqlValue::Int(i), &Type::INT8) => out.put_i64(*i),
            (SqlValue::Int(i), &Type::INT4) => out.put_i32(i32::try_from(*i).map_err(|_| range(*i, "int4"))?),
            (SqlValue::Int(i), &Type::INT2) => out.put_i16(i16::try_from(*i).map_err(|_| range(*i, "int2"))?),
            (SqlValue::Int(i), &Type::FLOAT8) => out.put_f64(*i as f64),
            (SqlValue::Int(i), &Type::FLOAT4) => out.put_f32(*i as f32),
            (SqlValue::Float(f), &Type::FLOAT8) => out.put_f64(*f),
            (SqlValue::Float(f), &Type::FLOAT4) => out.put_f32(*f as f32),
            (SqlValue::Boolean(b), &Type::BOOL) => out.put_u8(*b as u8),
            _ => unreachable!("binary_target covers these"),
        }
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn to_sql_checked(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        self.to_sql(ty, out)
    }

    fn encode_format(&self, ty: &Type) -> Format {
        if binary_target(self.0, ty) {
            Format::Binary
        } else {
            Format::Text
        }
    }
}

// ------------------------------------------------------------------- results

/// One result value as the host decodes it: a value, or a type it cannot convert.
enum Cell {
    Value(SqlValue),
    Unsupported(String),
}

impl<'a> FromSql<'a> for Cell {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Cell, Box<dyn StdError + Sync + Send>> {
        Ok(decode(ty, raw)?.map(Cell::Value).unwrap_or_else(|| Cell::Unsupported(type_label(ty))))
    }

    fn from_sql_null(_: &Type) -> Result<Cell, Box<dyn StdError + Sync + Send>> {
        Ok(Cell::Value(SqlValue::Null))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

fn type_label(ty: &Type) -> String {
    match ty.kind() {
        Kind::Array(inner) => format!("{}[]", inner.name()),
        _ => ty.name().to_string(),
    }
}

fn be<const N: usize>(raw: &[u8]) -> Result<[u8; N], String> {
    raw.try_into().map_err(|_| format!("expected {N} bytes, got {}", raw.len()))
}

fn utf8(raw: &[u8]) -> Result<String, String> {
    String::from_utf8(raw.to_vec()).map_err(|e| format!("not UTF-8: {e}"))
}

/// Decode a binary value; `Ok(None)` for a type the host does not convert.
fn decode(ty: &Type, raw: &[u8]) -> Result<Option<SqlValue>, String> {
    let v = match *ty {
        Type::BOOL => SqlValue::Boolean(be::<1>(raw)?[0] != 0),
        Type::INT2 => SqlValue::Int(i16::from_be_bytes(be(raw)?) as i64),
        Type::INT4 => SqlValue::Int(i32::from_be_bytes(be(raw)?) as i64),
        Type::INT8 => SqlValue::Int(i64::from_be_bytes(be(raw)?)),
        Type::OID => SqlValue::Int(u32::from_be_bytes(be(raw)?) as i64),
        Type::FLOAT4 => SqlValue::Float(f32::from_be_bytes(be(raw)?) as f64),
        Type::FLOAT8 => SqlValue::Float(f64::from_be_bytes(be(raw)?)),
        Type::NUMERIC => {
            let text = numeric_text(raw)?;
            SqlValue::Float(text.parse::<f64>().map_err(|e| format!("numeric {text:?}: {e}"))?)
        }
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::JSON | Type::UNKNOWN | Type::CHAR => {
            SqlValue::Text(utf8(raw)?)
        }
        Type::JSONB => match raw.split_first() {
            Some((1, rest)) => SqlValue::Text(utf8(rest)?),
            _ => return Err("jsonb: unknown binary version".into()),
        },
        Type::TIMESTAMPTZ => SqlValue::Text(timestamp_text(i64::from_be_bytes(be(raw)?), true)),
        Type::TIMESTAMP => SqlValue::Text(timestamp_text(i64::from_be_bytes(be(raw)?), false)),
        Type::DATE => SqlValue::Text(date_text(i32::from_be_bytes(be(raw)?))),
        Type::UUID => {
            let b: [u8; 16] = be(raw)?;
            let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
            SqlValue::Text(format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..]))
        }
        Type::BYTEA => SqlValue::Text(format!("\\x{}", raw.iter().map(|x| format!("{x:02x}")).collect::<String>())),
        _ if ty.name() == "citext" => SqlValue::Text(utf8(raw)?),
        _ => return Ok(None),
    };
    Ok(Some(v))
}

fn convert_rows(stmt: &postgres::Statement, rows: &[postgres::Row]) -> Result<SqlRows, String> {
    let columns: Vec<String> = stmt.columns().iter().map(|c| c.name().to_string()).collect();
    let mut out = Vec::with_capacity(rows.len());
    for (ri, row) in rows.iter().enumerate() {
        let mut vals = Vec::with_capacity(columns.len());
        for (ci, col) in stmt.columns().iter().enumerate() {
            match row.try_get::<_, Cell>(ci) {
                Ok(Cell::Value(v)) => vals.push(v),
                Ok(Cell::Unsupported(t)) => {
                    return Err(format!(
                        "column `{}` has type {t}, which the host does not convert; cast it in the statement, e.g. `{}::text` \
                         (converted: int2/4/8, oid, float4/8, numeric, bool, text-like, json/jsonb, timestamp[tz], date, uuid, bytea)",
                        col.name(),
                        col.name()
                    ))
                }
                Err(e) => return Err(format!("row {ri}, column `{}` ({}): {}", col.name(), type_label(col.type_()), pg_error(&e))),
            }
        }
        out.push(vals);
    }
    Ok(SqlRows { columns, rows: out })
}

/// The exact decimal text of a binary `numeric`.
fn numeric_text(raw: &[u8]) -> Result<String, String> {
    if raw.len() < 8 {
        return Err(format!("numeric: {} bytes, need at least 8", raw.len()));
    }
    let rd = |i: usize| u16::from_be_bytes([raw[i], raw[i + 1]]);
    let ndigits = rd(0) as usize;
    let weight = rd(2) as i16 as i32;
    let sign = rd(4);
    let dscale = rd(6) as usize;
    match sign {
        0xC000 => return Ok("NaN".into()),
        0xD000 => return Ok("Infinity".into()),
        0xF000 => return Ok("-Infinity".into()),
        0x0000 | 0x4000 => {}
        s => return Err(format!("numeric: unknown sign {s:#x}")),
    }
    if raw.len() != 8 + 2 * ndigits {
        return Err(format!("numeric: {} bytes for {ndigits} digits", raw.len()));
    }
    let digits: Vec<u16> = (0..ndigits).map(|i| rd(8 + 2 * i)).collect();
    let digit = |pos: i32| -> u16 {
        // pos = power of 10000; digits[0] has power `weight`.
        let idx = weight - pos;
        if idx >= 0 && (idx as usize) < digits.len() {
            digits[idx as usize]
        } else {
            0
        }
    };
    let mut s = String::new();
    if sign == 0x4000 {
        s.push('-');
    }
    if weight < 0 {
        s.push('0');
    } else {
        for pos in (0..=weight).rev() {
            let d = digit(pos);
            if pos == weight {
                s += &d.to_string();
            } else {
                s += &format!("{d:04}");
            }
        }
    }
    if dscale > 0 {
        s.push('.');
        let mut frac = String::new();
        let mut pos = -1;
        while frac.len() < dscale {
            frac += &format!("{:04}", digit(pos));
            pos -= 1;
        }
        frac.truncate(dscale);
        s += &frac;
    }
    Ok(s)
}

/// Days between 1970-01-01 and PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_DAYS: i64 = 10_957;

fn year_text(y: i64) -> String {
    if y <= 0 {
        // PostgreSQL prints year 0 as "0001 BC".
        format!("{:04} BC", 1 - y)
    } else {
        format!("{y:04}")
    }
}

/// A PostgreSQL timestamp (µs since 2000-01-01) as RFC 3339; `utc` adds `Z`.
pub fn timestamp_text(us: i64, utc: bool) -> String {
    if us == i64::MAX {
        return "infinity".into();
    }
    if us == i64::MIN {
        return "-infinity".into();
    }
    let secs = us.div_euclid(1_000_000);
    let micros = us.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400) + PG_EPOCH_DAYS;
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = crate::clock::civil_from_days(days);
    let mut frac = String::new();
    if micros != 0 {
        frac = format!(".{micros:06}");
        while frac.ends_with('0') {
            frac.pop();
        }
    }
    let (date, bc) = match year_text(y).split_once(' ') {
        Some((yy, bc)) => (format!("{yy}-{m:02}-{d:02}"), format!(" {bc}")),
        None => (format!("{}-{m:02}-{d:02}", year_text(y)), String::new()),
    };
    format!("{date}T{:02}:{:02}:{:02}{frac}{}{bc}", sod / 3600, sod / 60 % 60, sod % 60, if utc { "Z" } else { "" })
}

/// A PostgreSQL date (days since 2000-01-01) as `YYYY-MM-DD`.
pub fn date_text(days: i32) -> String {
    match days {
        i32::MAX => "infinity".into(),
        i32::MIN => "-infinity".into(),
        _ => {
            let (y, m, d) = crate::clock::civil_from_days(days as i64 + PG_EPOCH_DAYS);
            match year_text(y).split_once(' ') {
                Some((yy, bc)) => format!("{yy}-{m:02}-{d:02} {bc}"),
                None => format!("{}-{m:02}-{d:02}", year_text(y)),
            }
        }
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
        let _ = std::thread::spawn(move || drop((roles, conns))).join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(ndigits: u16, weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut v = Vec::new();
        for x in [ndigits, weight as u16, sign, dscale].iter().chain(digits) {
            v.extend_from_slice(&x.to_be_bytes());
        }
        v
    }

    #[test]
    fn numeric_decoding() {
        // 12.345: weight 0, digits [12, 3450], dscale 3
        assert_eq!(numeric_text(&numeric(2, 0, 0, 3, &[12, 3450])).unwrap(), "12.345");
        // -0.0012: weight -1, digits [12], dscale 4
        assert_eq!(numeric_text(&numeric(1, -1, 0x4000, 4, &[12])).unwrap(), "-0.0012");
        // 1000000: weight 1, digits [100] (100 * 10000)
        assert_eq!(numeric_text(&numeric(1, 1, 0, 0, &[100])).unwrap(), "1000000");
        // 0 with scale 2
        assert_eq!(numeric_text(&numeric(0, 0, 0, 2, &[])).unwrap(), "0.00");
        assert_eq!(numeric_text(&numeric(0, 0, 0xC000, 0, &[])).unwrap(), "NaN");
        assert!(numeric_text(&[0, 1]).is_err());
    }

    #[test]
    fn timestamps() {
        assert_eq!(timestamp_text(0, true), "2000-01-01T00:00:00Z");
        assert_eq!(timestamp_text(500_000, true), "2000-01-01T00:00:00.5Z");
        assert_eq!(timestamp_text(-1, false), "1999-12-31T23:59:59.999999");
        // 2026-11-08T00:33:11Z = 1794097991 unix s
        let us = (1_794_097_991 - 946_684_800) * 1_000_000;
        assert_eq!(timestamp_text(us, true), "2026-11-08T00:33:11Z");
        assert_eq!(timestamp_text(i64::MAX, true), "infinity");
        assert_eq!(date_text(0), "2000-01-01");
        assert_eq!(date_text(-1), "1999-12-31");
        assert_eq!(date_text(366), "2001-01-01");
    }

    #[test]
    fn params_choose_format() {
        let i = SqlValue::Int(5);
        assert!(matches!(Param(&i).encode_format(&Type::INT4), Format::Binary));
        assert!(matches!(Param(&i).encode_format(&Type::NUMERIC), Format::Text));
        let mut out = BytesMut::new();
        assert!(Param(&SqlValue::Int(1 << 40)).to_sql(&Type::INT4, &mut out).is_err());
        let t = SqlValue::Text("2026-01-01T00:00:00Z".into());
        assert!(matches!(Param(&t).encode_format(&Type::TIMESTAMPTZ), Format::Text));
        Param(&t).to_sql(&Type::TIMESTAMPTZ, &mut out).unwrap();
        assert_eq!(&out[..], b"2026-01-01T00:00:00Z");
        assert_eq!(float_text(f64::INFINITY), "Infinity");
        assert_eq!(float_text(0.1), "0.1");
    }

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
        assert!(StackServices::new(BTreeMap::new(), [("a".to_string(), "https://x".to_string())].into()).is_err());
        assert!(StackServices::new(BTreeMap::new(), [("a".to_string(), "http://u@x".to_string())].into()).is_err());
    }
}
