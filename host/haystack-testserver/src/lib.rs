//! A small Haystack HTTP server for tests: `about`, `read` (filter or id),
//! `commit` (add/update/remove), `hisWrite` and `hisRead` (plain and batch
//! forms), `close`, with SCRAM-SHA-256 auth per the Haystack auth spec or no
//! auth. Histories live in memory. It stands in for Haxall where Haxall
//! cannot run; every place it differs from the standard and from Haxall is
//! listed in docs/haystack-test-server.md.
//!
//! Built on rusty-haystack-core (Zinc/JSON codecs, the entity graph and its
//! filter engine, SCRAM primitives); the ops are written here.
//!
//! (Over 700 lines on purpose: the ops of one small server, each beside its
//! helpers, in the order the Haystack HTTP spec lists them.)

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use chrono::{DateTime, FixedOffset, NaiveDate, TimeZone, Utc};
use haystack_core::auth::{
    derive_credentials, server_first_message, server_verify_final, ScramCredentials, ScramHandshake,
};
use haystack_core::codecs::codec_for;
use haystack_core::data::{HCol, HDict, HGrid};
use haystack_core::graph::{EntityGraph, SharedGraph};
use haystack_core::kinds::{HDateTime, HRef, Kind, Number};
use parking_lot::{Mutex, RwLock};
use rand::RngCore;

mod encode;
use encode::Format;

/// How the server is set up.
#[derive(Clone, Debug)]
pub struct Config {
    pub bind: String,
    pub port: u16,
    /// (user, password); None = no auth.
    pub auth: Option<(String, String)>,
    pub scram_iterations: u32,
    /// Keep at most this many samples per point (oldest dropped); 0 = unlimited.
    pub his_cap: usize,
    /// Calibration fault: answer every Nth hisWrite with an error grid
    /// (HTTP 200) and store nothing of it; 0 = never.
    pub error_one_in: u64,
    /// Calibration fault: hisWrite requests that arrive this long after
    /// start are never answered (the connection hangs).
    pub stall_after: Option<Duration>,
    /// Bearer tokens expire this long after login (403 afterwards, as a
    /// session timeout would); None = never.
    pub token_ttl: Option<Duration>,
    /// HTTPS only, with this certificate chain and key (PEM); None = plain HTTP.
    pub tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: 0,
            auth: None,
            scram_iterations: 10_000,
            his_cap: 0,
            error_one_in: 0,
            stall_after: None,
            token_ttl: None,
            tls: None,
        }
    }
}

/// What the calibration faults did, by point id (`GET /test/faults`).
#[derive(Default)]
struct Faults {
    his_writes: AtomicU64,
    rejected_requests: AtomicU64,
    /// Readings in refused hisWrite requests, by point id.
    rejected_readings: Mutex<BTreeMap<String, u64>>,
    stalled_requests: AtomicU64,
    /// Switched on by `POST /test/huge-answers`: every hisWrite from then on
    /// is answered with [`HUGE_ANSWER_BYTES`] and stores nothing.
    huge_answers_on: AtomicBool,
    huge_answers: AtomicU64,
    /// Bytes of huge answers produced for the connection (what the client read, give or take its socket buffers).
    huge_answer_bytes: AtomicU64,
}

enum Handshake {
    /// After HELLO: the user named, waiting for client-first.
    Hello(String, Instant),
    /// After server-first: waiting for client-final.
    First(ScramHandshake, Instant),
}

struct Auth {
    user: String,
    creds: ScramCredentials,
    handshakes: Mutex<HashMap<String, Handshake>>,
    /// Bearer token → (user, when issued).
    tokens: RwLock<HashMap<String, (String, Instant)>>,
    /// Tokens older than this are refused (403); None = never expire.
    token_ttl: Option<Duration>,
}

/// Samples of one point by epoch ms.
type Series = BTreeMap<i64, Kind>;

pub struct AppState {
    graph: SharedGraph,
    his: RwLock<HashMap<String, Series>>,
    auth: Option<Auth>,
    his_cap: usize,
    booted: DateTime<Utc>,
    started: Instant,
    ids: AtomicU64,
    error_one_in: u64,
    stall_after: Option<Duration>,
    faults: Faults,
}

type Shared = Arc<AppState>;

fn random_token(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    rand::thread_rng().fill_bytes(&mut b);
    URL_SAFE_NO_PAD.encode(b)
}

/// An error grid (meta `err`, `dis`), answered with HTTP 200 as Haystack servers do for op errors.
fn err_grid(msg: impl Into<String>) -> HGrid {
    let mut meta = HDict::new();
    meta.set("err", Kind::Marker);
    meta.set("dis", Kind::Str(msg.into()));
    HGrid::from_parts(meta, vec![HCol::new("empty")], vec![])
}

/// Answer `grid` in the format the request's `Accept` asks for (Zinc, or
/// Haystack JSON for `application/vnd.haystack+json` / `application/json`).
fn respond(status: StatusCode, grid: &HGrid, headers: &HeaderMap) -> Response {
    let accept = headers.get_all("accept").iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>().join(",");
    let format = Format::for_accept(&accept);
    match format.encode(grid) {
        Ok(body) => (status, [("content-type", format.content_type())], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("encoding error: {e}")).into_response(),
    }
}

fn ok(grid: &HGrid, headers: &HeaderMap) -> Response {
    respond(StatusCode::OK, grid, headers)
}

fn decode(body: &Bytes, headers: &HeaderMap) -> Result<HGrid, String> {
    let ct = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("text/zinc");
    let ct = ct.trim().to_ascii_lowercase();
    let json = ct.starts_with("application/json") || ct.starts_with("application/vnd.haystack+json");
    let mime = if json { "application/json" } else { "text/zinc" };
    let text = std::str::from_utf8(body).map_err(|_| "request body is not UTF-8".to_string())?;
    // rusty-haystack-core's Zinc decoder panics on some malformed grids (a
    // multi-byte character where a date-time's seconds stand): a bad request
    // gets an error grid, never a dropped connection.
    let codec = codec_for(mime).expect("built-in codec");
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| codec.decode_grid(text)))
        .map_err(|_| format!("cannot decode request grid: it is not valid {mime}"))?
        .map_err(|e| format!("cannot decode request grid: {e}"))
}

/// The instant to the millisecond, as Haystack servers write times.
fn to_ms(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(t.timestamp_millis()).unwrap_or(t)
}

fn about_grid(state: &AppState) -> HGrid {
    let mut row = HDict::new();
    let now = to_ms(Utc::now()).fixed_offset();
    row.set("haystackVersion", Kind::Str("4.0".into()));
    row.set("serverName", Kind::Str("scalebench-haystack-testserver".into()));
    row.set("serverTime", Kind::DateTime(HDateTime::new(now, "UTC")));
    row.set("serverBootTime", Kind::DateTime(HDateTime::new(to_ms(state.booted).fixed_offset(), "UTC")));
    row.set("productName", Kind::Str("scalebench haystack-testserver".into()));
    row.set("productVersion", Kind::Str(env!("CARGO_PKG_VERSION").into()));
    row.set("vendorName", Kind::Str("scalebench".into()));
    row.set("tz", Kind::Str("UTC".into()));
    let cols = [
        "haystackVersion",
        "serverName",
        "serverTime",
        "serverBootTime",
        "productName",
        "productVersion",
        "vendorName",
        "tz",
    ]
    .iter()
    .map(|c| HCol::new(*c))
    .collect();
    HGrid::from_parts(HDict::new(), cols, vec![row])
}

fn parse_params(h: &str) -> (String, HashMap<String, String>) {
    let h = h.trim();
    let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
    let params = rest
        .split(',')
        .filter_map(|p| p.trim().split_once('=').map(|(k, v)| (k.trim().to_string(), v.trim().to_string())))
        .collect();
    (scheme.to_ascii_uppercase(), params)
}

fn unauthorized(www: String) -> Response {
    (StatusCode::UNAUTHORIZED, [("www-authenticate", www)], "").into_response()
}

fn b64url_to_std(s: &str) -> Result<Vec<u8>, String> {
    URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).map_err(|e| format!("bad base64url: {e}"))
}

/// The bearer token's user, when auth is on and the request carries a valid one.
// The refusal is the answer itself, made once per refused request: not worth boxing.
#[allow(clippy::result_large_err)]
fn check_bearer(state: &AppState, headers: &HeaderMap) -> Result<(), Response> {
    let Some(auth) = &state.auth else { return Ok(()) };
    let h = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
    let (scheme, p) = parse_params(h);
    if scheme == "BEARER" {
        if let Some(t) = p.get("authToken") {
            if auth.tokens.read().get(t).is_some_and(|(_, at)| auth.token_ttl.is_none_or(|ttl| at.elapsed() < ttl)) {
                return Ok(());
            }
        }
        return Err((StatusCode::FORBIDDEN, "invalid or expired authToken").into_response());
    }
    Err(unauthorized("HELLO".into()))
}

/// GET /about: the about grid, or the SCRAM exchange when auth is on.
async fn about(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let Some(auth) = &state.auth else { return ok(&about_grid(&state), &headers) };
    let h = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
    let (scheme, p) = parse_params(h);
    match scheme.as_str() {
        "BEARER" => match check_bearer(&state, &headers) {
            Ok(()) => ok(&about_grid(&state), &headers),
            Err(r) => r,
        },
        "HELLO" => {
            let user = p.get("username").and_then(|u| b64url_to_std(u).ok()).and_then(|b| String::from_utf8(b).ok());
            let Some(user) = user else {
                return (StatusCode::BAD_REQUEST, "HELLO needs username=<base64url>").into_response();
            };
            let token = random_token(12);
            let mut hs = auth.handshakes.lock();
            hs.retain(|_, h| match h {
                Handshake::Hello(_, t) | Handshake::First(_, t) => t.elapsed() < Duration::from_secs(60),
            });
            hs.insert(token.clone(), Handshake::Hello(user, Instant::now()));
            unauthorized(format!("SCRAM handshakeToken={token}, hash=SHA-256"))
        }
        "SCRAM" => {
            let (Some(token), Some(data)) = (p.get("handshakeToken"), p.get("data")) else {
                return (StatusCode::BAD_REQUEST, "SCRAM needs handshakeToken and data").into_response();
            };
            let Ok(msg) = b64url_to_std(data).map(|b| String::from_utf8_lossy(&b).into_owned()) else {
                return (StatusCode::BAD_REQUEST, "SCRAM data is not base64url").into_response();
            };
            let prev = auth.handshakes.lock().remove(token);
            match prev {
                Some(Handshake::Hello(user, _)) => {
                    // client-first: n,,n=<user>,r=<nonce>
                    let bare = msg.strip_prefix("n,,").unwrap_or("");
                    // The user name as sent (still escaped) and as meant.
                    let mut raw_name = "";
                    let mut name = None;
                    let mut nonce = None;
                    for part in bare.split(',') {
                        if let Some(v) = part.strip_prefix("n=") {
                            raw_name = v;
                            name = Some(v.replace("=2C", ",").replace("=3D", "="));
                        } else if let Some(v) = part.strip_prefix("r=") {
                            nonce = Some(v.to_string());
                        }
                    }
                    let (Some(name), Some(nonce)) = (name, nonce) else {
                        return (StatusCode::BAD_REQUEST, "malformed SCRAM client-first message").into_response();
                    };
                    if name != user || name != auth.user {
                        return respond(StatusCode::FORBIDDEN, &err_grid("authentication failed"), &headers);
                    }
                    let (hs, first_std) = server_first_message(raw_name, &nonce, &auth.creds);
                    let first = STANDARD.decode(first_std).expect("core writes base64");
                    auth.handshakes.lock().insert(token.clone(), Handshake::First(hs, Instant::now()));
                    unauthorized(format!(
                        "SCRAM handshakeToken={token}, hash=SHA-256, data={}",
                        URL_SAFE_NO_PAD.encode(first)
                    ))
                }
                Some(Handshake::First(hs, _)) => match server_verify_final(&hs, &STANDARD.encode(msg.as_bytes())) {
                    Ok(sig) => {
                        let auth_token = random_token(24);
                        auth.tokens.write().insert(auth_token.clone(), (hs.username.clone(), Instant::now()));
                        let fin = format!("v={}", STANDARD.encode(sig));
                        (
                            StatusCode::OK,
                            [(
                                "authentication-info",
                                format!("authToken={auth_token}, data={}", URL_SAFE_NO_PAD.encode(fin)),
                            )],
                            "",
                        )
                            .into_response()
                    }
                    Err(_) => respond(StatusCode::FORBIDDEN, &err_grid("authentication failed"), &headers),
                },
                None => (StatusCode::FORBIDDEN, "unknown or expired handshakeToken").into_response(),
            }
        }
        _ => unauthorized("HELLO".into()),
    }
}

async fn close(State(state): State<Shared>, headers: HeaderMap) -> Response {
    if let Some(auth) = &state.auth {
        let h = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
        let (_, p) = parse_params(h);
        if let Some(t) = p.get("authToken") {
            auth.tokens.write().remove(t);
        }
    }
    ok(&HGrid::new(), &headers)
}

fn grid_of(rows: Vec<HDict>) -> HGrid {
    let mut names: Vec<String> = Vec::new();
    for r in &rows {
        for n in r.tag_names() {
            if !names.iter().any(|x| x == n) {
                names.push(n.to_string());
            }
        }
    }
    names.sort();
    if let Some(i) = names.iter().position(|n| n == "id") {
        let id = names.remove(i);
        names.insert(0, id);
    }
    HGrid::from_parts(HDict::new(), names.into_iter().map(HCol::new).collect(), rows)
}

/// Entities matching a filter. Evaluated over every record with the core's
/// filter evaluator: the graph's indexed `read_all` misses Ref equality
/// (`equipRef==@x` finds nothing in rusty-haystack-core 0.8.1).
fn read_filter(graph: &SharedGraph, filter: &str, limit: usize) -> Result<Vec<HDict>, String> {
    let all = graph.all_entities();
    if filter.trim() == "*" {
        let mut all = all;
        if limit > 0 {
            all.truncate(limit);
        }
        return Ok(all);
    }
    let ast = haystack_core::filter::parse_filter(filter).map_err(|e| format!("read: bad filter: {e}"))?;
    let by_id: HashMap<String, &HDict> = all
        .iter()
        .filter_map(|d| match d.get("id") {
            Some(Kind::Ref(r)) => Some((r.val.clone(), d)),
            _ => None,
        })
        .collect();
    let resolve = |r: &HRef| by_id.get(&r.val).copied();
    let mut out = Vec::new();
    for d in &all {
        if haystack_core::filter::matches(&ast, d, Some(&resolve)) {
            out.push(d.clone());
            if limit > 0 && out.len() >= limit {
                break;
            }
        }
    }
    Ok(out)
}

async fn read(State(state): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(r) = check_bearer(&state, &headers) {
        return r;
    }
    let req = match decode(&body, &headers) {
        Ok(g) => g,
        Err(e) => return ok(&err_grid(e), &headers),
    };
    if req.col("filter").is_some() {
        let Some(row) = req.row(0) else { return ok(&err_grid("read: request has no rows"), &headers) };
        let Some(Kind::Str(filter)) = row.get("filter") else {
            return ok(&err_grid("read: filter must be a Str"), &headers);
        };
        let limit = match row.get("limit") {
            Some(Kind::Number(n)) if n.val >= 1.0 => n.val as usize,
            _ => 0,
        };
        let rows = read_filter(&state.graph, filter, limit);
        return match rows {
            Ok(rows) => ok(&grid_of(rows), &headers),
            Err(e) => ok(&err_grid(e), &headers),
        };
    }
    if req.col("id").is_some() {
        let rows = req
            .rows
            .iter()
            .filter_map(|r| match r.get("id") {
                Some(Kind::Ref(r)) => Some(state.graph.get(&r.val).unwrap_or_else(|| {
                    let mut d = HDict::new();
                    d.set("id", Kind::Ref(HRef::from_val(r.val.clone())));
                    d
                })),
                _ => None,
            })
            .collect();
        return ok(&grid_of(rows), &headers);
    }
    ok(&err_grid("read: request needs a filter or an id column"), &headers)
}

async fn commit(State(state): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(r) = check_bearer(&state, &headers) {
        return r;
    }
    let req = match decode(&body, &headers) {
        Ok(g) => g,
        Err(e) => return ok(&err_grid(e), &headers),
    };
    let mode = match req.meta.get("commit") {
        Some(Kind::Str(s)) => s.clone(),
        _ => return ok(&err_grid("commit: grid meta needs commit:\"add\"|\"update\"|\"remove\""), &headers),
    };
    let mut out = Vec::new();
    for row in &req.rows {
        let mut rec = HDict::new();
        for (k, v) in row.iter() {
            if !matches!(v, Kind::Null) {
                rec.set(k, v.clone());
            }
        }
        let id = match rec.get("id") {
            Some(Kind::Ref(r)) => Some(r.val.clone()),
            _ => None,
        };
        let r = match mode.as_str() {
            "add" => {
                let id = id.unwrap_or_else(|| {
                    format!("r{:x}-{}", state.booted.timestamp(), state.ids.fetch_add(1, Ordering::Relaxed))
                });
                rec.set("id", Kind::Ref(HRef::from_val(id.clone())));
                state.graph.add(rec).map(|_| id).map_err(|e| format!("commit add: {e}"))
            }
            "update" => match id {
                Some(id) => state.graph.update(&id, rec).map(|_| id).map_err(|e| format!("commit update: {e}")),
                None => Err("commit update: row without id".into()),
            },
            "remove" => match id {
                Some(id) => {
                    state.his.write().remove(&id);
                    state.graph.remove(&id).map(|_| id).map_err(|e| format!("commit remove: {e}"))
                }
                None => Err("commit remove: row without id".into()),
            },
            m => Err(format!("commit: unknown mode {m:?}")),
        };
        match r {
            Ok(id) => {
                if mode != "remove" {
                    out.push(state.graph.get(&id).unwrap_or_default());
                }
            }
            Err(e) => return ok(&err_grid(e), &headers),
        }
    }
    ok(&grid_of(out), &headers)
}

/// The point record of a his id, checked as a his point.
fn his_point(state: &AppState, id: &str) -> Result<HDict, String> {
    let rec = state.graph.get(id).ok_or_else(|| format!("unknown rec @{id}"))?;
    if !rec.has("his") {
        return Err(format!("@{id} is not a his point (no his tag)"));
    }
    Ok(rec)
}

fn check_value(rec: &HDict, id: &str, ts: &HDateTime, val: &Kind) -> Result<(), String> {
    if let Some(Kind::Str(tz)) = rec.get("tz") {
        if *tz != ts.tz_name {
            return Err(format!("hisWrite @{id}: timestamp tz {} does not match point tz {tz}", ts.tz_name));
        }
    }
    let Kind::Number(n) = val else { return Ok(()) };
    if let Some(Kind::Str(kind)) = rec.get("kind") {
        if kind != "Number" {
            return Err(format!("hisWrite @{id}: Number value for a {kind} point"));
        }
    }
    // A value's unit must be the point's; a unitless value is taken in the
    // point's unit; a unit on a point without one is refused.
    match (&n.unit, rec.get("unit")) {
        (Some(u), Some(Kind::Str(pu))) if u != pu => {
            Err(format!("hisWrite @{id}: unit {u} does not match point unit {pu}"))
        }
        (Some(u), None) => Err(format!("hisWrite @{id}: value has unit {u} but the point has no unit")),
        _ => Ok(()),
    }
}

async fn his_write(State(state): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(r) = check_bearer(&state, &headers) {
        return r;
    }
    let req = match decode(&body, &headers) {
        Ok(g) => g,
        Err(e) => return ok(&err_grid(e), &headers),
    };
    // (column name, point id) of each value column.
    let cols: Vec<(String, String)> = match req.meta.get("id") {
        Some(Kind::Ref(r)) => vec![("val".into(), r.val.clone())],
        _ => req
            .cols
            .iter()
            .filter(|c| c.name != "ts")
            .filter_map(|c| match c.meta.get("id") {
                Some(Kind::Ref(r)) => Some((c.name.clone(), r.val.clone())),
                _ => None,
            })
            .collect(),
    };
    if cols.is_empty() {
        return ok(&err_grid("hisWrite: grid meta id, or value columns with id meta, required"), &headers);
    }
    if let Some(r) = injected_fault(&state, &req, &cols, &headers).await {
        return r;
    }
    let mut recs = Vec::new();
    for (_, id) in &cols {
        match his_point(&state, id) {
            Ok(r) => recs.push(r),
            Err(e) => return ok(&err_grid(format!("hisWrite: {e}")), &headers),
        }
    }
    let mut batch: Vec<Vec<(i64, Kind)>> = vec![Vec::new(); cols.len()];
    for (i, row) in req.rows.iter().enumerate() {
        let Some(Kind::DateTime(ts)) = row.get("ts") else {
            return ok(&err_grid(format!("hisWrite: row {i} has no ts DateTime")), &headers);
        };
        for (c, (name, id)) in cols.iter().enumerate() {
            let Some(val) = row.get(name) else { continue };
            if matches!(val, Kind::Null) {
                continue;
            }
            if let Err(e) = check_value(&recs[c], id, ts, val) {
                return ok(&err_grid(e), &headers);
            }
            let val = match val {
                Kind::Number(n) => Kind::Number(Number::new(n.val, None)),
                v => v.clone(),
            };
            batch[c].push((ts.dt.timestamp_millis(), val));
        }
    }
    {
        let mut his = state.his.write();
        for ((_, id), items) in cols.iter().zip(batch) {
            let series = his.entry(id.clone()).or_default();
            series.extend(items);
            if state.his_cap > 0 {
                while series.len() > state.his_cap {
                    series.pop_first();
                }
            }
        }
    }
    ok(&HGrid::new(), &headers)
}

/// The calibration faults of hisWrite: a stall (never answers) or every
/// Nth request refused with an error grid, its readings counted by id.
async fn injected_fault(
    state: &Shared,
    req: &HGrid,
    cols: &[(String, String)],
    headers: &HeaderMap,
) -> Option<Response> {
    let n = state.faults.his_writes.fetch_add(1, Ordering::Relaxed) + 1;
    if state.faults.huge_answers_on.load(Ordering::Relaxed) {
        return Some(huge_answer(state));
    }
    if state.stall_after.is_some_and(|d| state.started.elapsed() >= d) {
        state.faults.stalled_requests.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    if state.error_one_in == 0 || !n.is_multiple_of(state.error_one_in) {
        return None;
    }
    state.faults.rejected_requests.fetch_add(1, Ordering::Relaxed);
    let mut by_id = state.faults.rejected_readings.lock();
    for row in &req.rows {
        for (name, id) in cols {
            if row.get(name).is_some_and(|v| !matches!(v, Kind::Null)) {
                *by_id.entry(id.clone()).or_default() += 1;
            }
        }
    }
    Some(ok(
        &err_grid(format!("injected fault: hisWrite request {n} refused (--error-one-in {})", state.error_one_in)),
        headers,
    ))
}

/// Size of a huge answer: a gigabyte, more than any client should read.
const HUGE_ANSWER_BYTES: u64 = 1 << 30;

/// A gigabyte answered with HTTP 200 (Content-Length set), produced 64 KiB
/// at a time as the client reads, each chunk counted: a client that stops
/// reading early shows as few bytes produced.
fn huge_answer(state: &Shared) -> Response {
    const CHUNK: u64 = 64 << 10;
    state.faults.huge_answers.fetch_add(1, Ordering::Relaxed);
    let (st, chunk) = (state.clone(), Bytes::from(vec![b' '; CHUNK as usize]));
    let body = futures_util::stream::unfold(0u64, move |sent| {
        let (st, chunk) = (st.clone(), chunk.clone());
        async move {
            if sent >= HUGE_ANSWER_BYTES {
                return None;
            }
            st.faults.huge_answer_bytes.fetch_add(CHUNK, Ordering::Relaxed);
            Some((Ok::<_, std::io::Error>(chunk), sent + CHUNK))
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/zinc; charset=utf-8")
        .header("content-length", HUGE_ANSWER_BYTES)
        .body(axum::body::Body::from_stream(body))
        .expect("a valid response")
}

/// `POST /test/huge-answers`: from now on every hisWrite is answered with a
/// gigabyte (a calibration fault a test switches on mid-run).
async fn huge_answers_on(State(state): State<Shared>) -> Response {
    state.faults.huge_answers_on.store(true, Ordering::Relaxed);
    ([("content-type", "application/json")], "{\"huge_answers\":true}").into_response()
}

/// `GET /test/faults`: what the calibration faults did, as JSON (not Haystack).
async fn faults(State(state): State<Shared>) -> Response {
    let f = &state.faults;
    let by_id: Vec<String> = f.rejected_readings.lock().iter().map(|(k, v)| format!("{:?}:{v}", k)).collect();
    let body = format!(
        "{{\"his_writes\":{},\"rejected_requests\":{},\"stalled_requests\":{},\"huge_answers\":{},\"huge_answer_bytes\":{},\"rejected_readings\":{{{}}}}}",
        f.his_writes.load(Ordering::Relaxed),
        f.rejected_requests.load(Ordering::Relaxed),
        f.stalled_requests.load(Ordering::Relaxed),
        f.huge_answers.load(Ordering::Relaxed),
        f.huge_answer_bytes.load(Ordering::Relaxed),
        by_id.join(",")
    );
    ([("content-type", "application/json")], body).into_response()
}

/// `GET /test/his-count`: how many points hold history and how many
/// readings they hold in all, with the oldest and newest timestamp (ms), as
/// JSON (not Haystack): what a test compares exact counts against without
/// reading millions of readings back through hisRead.
async fn his_count(State(state): State<Shared>) -> Response {
    let his = state.his.read();
    let (mut readings, mut first, mut last) = (0u64, i64::MAX, i64::MIN);
    for series in his.values() {
        readings += series.len() as u64;
        if let (Some((a, _)), Some((b, _))) = (series.first_key_value(), series.last_key_value()) {
            first = first.min(*a);
            last = last.max(*b);
        }
    }
    let points = his.values().filter(|s| !s.is_empty()).count();
    let body = if readings == 0 {
        format!("{{\"points\":{points},\"readings\":0}}")
    } else {
        format!("{{\"points\":{points},\"readings\":{readings},\"first_ms\":{first},\"last_ms\":{last}}}")
    };
    ([("content-type", "application/json")], body).into_response()
}

fn day_start(d: NaiveDate) -> i64 {
    Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0).unwrap()).timestamp_millis()
}

fn parse_dt(s: &str) -> Option<i64> {
    let iso = s.trim().split(' ').next()?;
    DateTime::<FixedOffset>::parse_from_rfc3339(iso).ok().map(|d| d.timestamp_millis())
}

/// A hisRead range as a half-open [start, end) in epoch ms. Dates are UTC days.
pub fn parse_range(range: &str, now_ms: i64) -> Result<(i64, i64), String> {
    let (start, end) = parse_range_ends(range, now_ms)?;
    if start > end {
        return Err(format!("bad range {range:?}: it ends before it starts"));
    }
    Ok((start, end))
}

fn parse_range_ends(range: &str, now_ms: i64) -> Result<(i64, i64), String> {
    let r = range.trim();
    let today = DateTime::<Utc>::from_timestamp_millis(now_ms).unwrap().date_naive();
    let day = |d: NaiveDate| (day_start(d), day_start(d) + 86_400_000);
    match r {
        "today" => return Ok(day(today)),
        "yesterday" => return Ok(day(today.pred_opt().unwrap())),
        _ => {}
    }
    let parts: Vec<&str> = r.splitn(2, ',').map(str::trim).collect();
    let date = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok();
    match parts.as_slice() {
        [one] => {
            if let Some(d) = date(one) {
                Ok(day(d))
            } else if let Some(t) = parse_dt(one) {
                Ok((t, i64::MAX))
            } else {
                Err(format!("bad range {range:?}"))
            }
        }
        [a, b] => {
            if let (Some(x), Some(y)) = (date(a), date(b)) {
                Ok((day(x).0, day(y).1))
            } else if let (Some(x), Some(y)) = (parse_dt(a), parse_dt(b)) {
                Ok((x, y))
            } else {
                Err(format!("bad range {range:?}"))
            }
        }
        _ => Err(format!("bad range {range:?}")),
    }
}

fn dt(ms: i64) -> Kind {
    Kind::DateTime(HDateTime::new(DateTime::<Utc>::from_timestamp_millis(ms).unwrap().fixed_offset(), "UTC"))
}

/// hisRead off the server's two async workers: a read of an hour of a
/// thousand points builds and encodes megabytes, and on a worker it held
/// every hisWrite behind it (a loaded test run saw the transport held back
/// about a second at 200 readings/s while the probes read mid-soak). The
/// history lock is held only to copy the samples out.
async fn his_read(State(state): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    tokio::task::spawn_blocking(move || his_read_now(&state, &headers, &body))
        .await
        .unwrap_or_else(|e| (axum::http::StatusCode::INTERNAL_SERVER_ERROR, format!("hisRead: {e}")).into_response())
}

fn his_read_now(state: &Shared, headers: &HeaderMap, body: &Bytes) -> Response {
    if let Err(r) = check_bearer(state, headers) {
        return r;
    }
    let req = match decode(body, headers) {
        Ok(g) => g,
        Err(e) => return ok(&err_grid(e), headers),
    };
    let ids: Vec<String> = req
        .rows
        .iter()
        .filter_map(|r| match r.get("id") {
            Some(Kind::Ref(r)) => Some(r.val.clone()),
            _ => None,
        })
        .collect();
    if ids.is_empty() {
        return ok(&err_grid("hisRead: request needs an id"), headers);
    }
    let range = match (req.meta.get("range"), req.row(0).and_then(|r| r.get("range"))) {
        (Some(Kind::Str(s)), _) | (None, Some(Kind::Str(s))) => s.clone(),
        _ => return ok(&err_grid("hisRead: range Str required (row, or grid meta for a batch)"), headers),
    };
    let (start, end) = match parse_range(&range, Utc::now().timestamp_millis()) {
        Ok(r) => r,
        Err(e) => return ok(&err_grid(format!("hisRead: {e}")), headers),
    };
    for id in &ids {
        if let Err(e) = his_point(state, id) {
            return ok(&err_grid(format!("hisRead: {e}")), headers);
        }
    }
    let samples: Vec<Vec<(i64, Kind)>> = {
        let his = state.his.read();
        ids.iter()
            .map(|id| {
                his.get(id).map(|s| s.range(start..end).map(|(t, v)| (*t, v.clone())).collect()).unwrap_or_default()
            })
            .collect()
    };
    let mut meta = HDict::new();
    meta.set("hisStart", dt(start));
    meta.set("hisEnd", dt(end.min(Utc::now().timestamp_millis().max(start))));
    if ids.len() == 1 && req.meta.get("range").is_none() {
        meta.set("id", Kind::Ref(HRef::from_val(ids[0].clone())));
        let rows = samples
            .into_iter()
            .flatten()
            .map(|(t, v)| {
                let mut d = HDict::new();
                d.set("ts", dt(t));
                d.set("val", v);
                d
            })
            .collect();
        return ok(&HGrid::from_parts(meta, vec![HCol::new("ts"), HCol::new("val")], rows), headers);
    }
    let mut rows: BTreeMap<i64, HDict> = BTreeMap::new();
    let mut cols = vec![HCol::new("ts")];
    for (i, (id, series)) in ids.iter().zip(samples).enumerate() {
        let name = format!("v{i}");
        let mut c = HCol::new(name.clone());
        c.meta.set("id", Kind::Ref(HRef::from_val(id.clone())));
        cols.push(c);
        for (t, v) in series {
            rows.entry(t)
                .or_insert_with(|| {
                    let mut d = HDict::new();
                    d.set("ts", dt(t));
                    d
                })
                .set(name.clone(), v);
        }
    }
    ok(&HGrid::from_parts(meta, cols, rows.into_values().collect()), headers)
}

/// Build the router and its state.
pub fn app(cfg: &Config) -> Router {
    let auth = cfg.auth.as_ref().map(|(user, pw)| {
        let mut salt = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut salt);
        Auth {
            user: user.clone(),
            creds: derive_credentials(pw, &salt, cfg.scram_iterations),
            handshakes: Mutex::new(HashMap::new()),
            tokens: RwLock::new(HashMap::new()),
            token_ttl: cfg.token_ttl,
        }
    });
    let state: Shared = Arc::new(AppState {
        graph: SharedGraph::new(EntityGraph::new()),
        his: RwLock::new(HashMap::new()),
        auth,
        his_cap: cfg.his_cap,
        booted: Utc::now(),
        started: Instant::now(),
        ids: AtomicU64::new(0),
        error_one_in: cfg.error_one_in,
        stall_after: cfg.stall_after,
        faults: Faults::default(),
    });
    Router::new()
        .route("/api/about", get(about).post(about))
        .route("/api/close", post(close))
        .route("/api/read", post(read))
        .route("/api/commit", post(commit))
        .route("/api/hisWrite", post(his_write))
        .route("/api/hisRead", post(his_read))
        .route("/test/faults", get(faults))
        .route("/test/huge-answers", post(huge_answers_on))
        .route("/test/his-count", get(his_count))
        .layer(axum::extract::DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(state)
}

/// Bind and serve in the background; returns the bound address.
pub async fn spawn(cfg: Config) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind((cfg.bind.as_str(), cfg.port)).await?;
    let addr = listener.local_addr()?;
    let app = app(&cfg);
    let h = match &cfg.tls {
        None => tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        }),
        Some((cert, key)) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(server_tls(cert, key)?));
            tokio::spawn(serve_tls(listener, acceptor, app))
        }
    };
    Ok((addr, h))
}

fn server_tls(cert: &std::path::Path, key: &std::path::Path) -> anyhow::Result<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow::anyhow!("--tls-cert {}: {e:?}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| anyhow::anyhow!("--tls-key {}: {e:?}", key.display()))?;
    Ok(rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?)
}

/// Accept TCP, complete TLS, serve HTTP/1.1 with keep-alive on each
/// connection; a failed handshake drops that connection only.
async fn serve_tls(listener: tokio::net::TcpListener, acceptor: tokio_rustls::TlsAcceptor, app: Router) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else { continue };
        let _ = tcp.set_nodelay(true);
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                .await;
        });
    }
}

// ---- command line ----------------------------------------------------------

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    about = "A small Haystack server for tests: about, read, commit, hisWrite, hisRead; SCRAM-SHA-256 or no auth. Not Haxall."
)]
pub struct Args {
    /// Port to listen on (0: any free port; the ready file says which).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// SCRAM user; with --password-file. Without both, the server runs without auth.
    #[arg(long, requires = "password_file")]
    user: Option<String>,
    /// File holding the user's password (trailing newline ignored).
    #[arg(long, requires = "user")]
    password_file: Option<PathBuf>,
    /// PBKDF2 iterations of the stored SCRAM credentials.
    #[arg(long, default_value_t = 10_000)]
    scram_iterations: u32,
    /// Keep at most this many samples per point, dropping the oldest (0: unlimited).
    /// Haxall keeps 1,000 per point in memory unless configured.
    #[arg(long, default_value_t = 0)]
    his_cap: usize,
    /// Written once listening: "port=<port>\n".
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// Calibration: answer every Nth hisWrite with an error grid (HTTP 200), storing nothing of it.
    #[arg(long, value_name = "N", default_value_t = 0)]
    error_one_in: u64,
    /// Calibration: never answer hisWrite requests that arrive this many seconds after start.
    #[arg(long, value_name = "SECONDS")]
    stall_after: Option<f64>,
    /// Bearer tokens expire this many seconds after login (403 afterwards).
    #[arg(long, value_name = "SECONDS")]
    token_ttl: Option<f64>,
    /// Serve HTTPS only, with this certificate chain (PEM); with --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

/// The server's command line (`haystack-testserver …`, or
/// `scalebench haystack-testserver …` as the local stack starts it).
pub fn main_with_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> anyhow::Result<()> {
    let a = Args::parse_from(args);
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?.block_on(serve(a))
}

async fn serve(a: Args) -> anyhow::Result<()> {
    let auth = match (&a.user, &a.password_file) {
        (Some(u), Some(f)) => {
            let pw = std::fs::read_to_string(f).with_context(|| format!("reading --password-file {}", f.display()))?;
            let pw = pw.trim_end_matches(['\n', '\r']).to_string();
            anyhow::ensure!(!pw.is_empty(), "--password-file {} is empty", f.display());
            Some((u.clone(), pw))
        }
        _ => None,
    };
    let cfg = crate::Config {
        bind: a.bind.clone(),
        port: a.port,
        auth,
        scram_iterations: a.scram_iterations,
        his_cap: a.his_cap,
        error_one_in: a.error_one_in,
        stall_after: a.stall_after.map(Duration::from_secs_f64),
        token_ttl: a.token_ttl.map(Duration::from_secs_f64),
        tls: a.tls_cert.clone().zip(a.tls_key.clone()),
    };
    let with_auth = cfg.auth.is_some();
    let scheme = if cfg.tls.is_some() { "https" } else { "http" };
    let (addr, handle) = crate::spawn(cfg).await?;
    eprintln!(
        "haystack-testserver listening on {scheme}://{addr}/api/ ({})",
        if with_auth { "SCRAM-SHA-256" } else { "no auth" }
    );
    if let Some(p) = &a.ready_file {
        std::fs::write(p, format!("port={}\n", addr.port()))
            .with_context(|| format!("writing --ready-file {}", p.display()))?;
    }
    tokio::select! {
        _ = handle => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let now = 1_714_564_800_000; // 2024-05-01T12:00Z
        assert_eq!(parse_range("today", now).unwrap(), (1_714_521_600_000, 1_714_608_000_000));
        assert_eq!(parse_range("yesterday", now).unwrap().0, 1_714_435_200_000);
        assert_eq!(parse_range("2024-05-01,2024-05-02", now).unwrap(), (1_714_521_600_000, 1_714_694_400_000));
        assert_eq!(parse_range("2024-05-01T12:00:00Z UTC,2024-05-01T12:00:01.5Z UTC", now).unwrap(), (now, now + 1500));
        assert_eq!(parse_range("2024-05-01T07:00:00-05:00 New_York", now).unwrap(), (now, i64::MAX));
        assert!(parse_range("soon", now).is_err());
        // A year written with three digits is year 24: the range ends before it starts.
        let reversed = parse_range("2024-05-01,024-05-02", now).unwrap_err();
        assert!(reversed.contains("ends before it starts"), "{reversed}");
    }
}
