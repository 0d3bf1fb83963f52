//! HTTP transport: every message is POSTed to `<service base URL><path>`
//! (the message's address is `"<service> <path>"`), over a pool of
//! keep-alive connections (hyper), with a bounded number of requests in
//! flight per connection task. Same shape as MQTT and NATS: bounded channels
//! of batches, acknowledgements counted per second of payload ts and of
//! arrival, memory bounded by channel capacity + requests in flight.
//!
//! - **Ack.** A message is acknowledged only when the response is 2xx *and*
//!   the adapter's `judge` accepts it (a Haystack server answers an op
//!   error with HTTP 200 and an error grid). A refused response counts its
//!   readings as rejected (`readings_rejected`), with a sample of why.
//! - **Headers** (Content-Type, Authorization …) come from the adapter's
//!   `headers(address)`, asked once per transport per address and again
//!   after a 401 or 403, when the message is sent once more (a token that
//!   expired is replaced; a second refusal counts the readings as rejected).
//! - **Pushback.** When a connection task's window is full it waits for a
//!   response; that wait is `held_back_s`.
//! - **Errors.** A request that fails (connection refused, reset) or
//!   outlives `request_timeout` is an error, never an ack; the first few
//!   distinct messages are kept. An answer larger than [`MAX_ANSWER_BYTES`]
//!   is read no further and never handed to `judge`: it is refused.
//! - **Adapter faults.** When `headers` or `judge` itself fails (it traps,
//!   outruns its time or memory limit, breaks the contract), that is no
//!   answer of the SUT's: the first such fault is kept in [`Live`] for the
//!   step to end on, the message's outcome is unknown, and the adapter is
//!   not called again by this transport.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;

use super::pool::Pool;
use super::Live;
use super::{AckCounts, Batch, Carries, Message};
use crate::clock::now_ns;
use crate::latency::Timing;
use plugin_runtime::PluginError;

/// Largest response body the transport reads: an ingest answer is small,
/// but a Haystack `commit` answers the 1,000 records it committed (~300 KB).
/// Bounds memory at window × connections × this, at worst.
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// What an adapter says about its HTTP messages: what goes with them, and
/// whether a 2xx response is an acknowledgement.
///
/// The outer `Err` is the adapter failing as a plugin (named by plugin and
/// call); the inner one is the adapter's own answer (no headers for this
/// address, or not an acknowledgement, and why).
pub trait IngestRules: Send + Sync {
    fn headers(&self, address: &str) -> Result<Result<Vec<(String, String)>, String>, PluginError>;
    fn judge(
        &self,
        address: &str,
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> Result<Result<(), String>, PluginError>;
    /// Whether answers are judged by the adapter (its `http-ingest`), not
    /// taken as acknowledged on any 2xx.
    fn judged_by_adapter(&self) -> bool {
        false
    }
    /// Whose `judge` this is, for messages ("plugin haxall").
    fn judge_of(&self) -> String {
        "the adapter".into()
    }
}

/// What `plugins inspect` and `run` say of an HTTP adapter without the
/// `http-ingest` export.
pub const NO_HTTP_INGEST: &str = "this HTTP adapter has no http-ingest export: it sends no Content-Type; any 2xx counts as acknowledged (an error answered with HTTP 200 would count as stored). Export http-ingest to set headers and judge answers: see docs/plugin-authoring.md";

/// No adapter rules: no headers but `content_type`, every 2xx is an ack.
pub struct PlainRules {
    pub content_type: String,
}

impl IngestRules for PlainRules {
    fn headers(&self, _address: &str) -> Result<Result<Vec<(String, String)>, String>, PluginError> {
        Ok(Ok(vec![("Content-Type".into(), self.content_type.clone())]))
    }
    fn judge(&self, _: &str, _: u16, _: Vec<(String, String)>, _: Vec<u8>) -> Result<Result<(), String>, PluginError> {
        Ok(Ok(()))
    }
}

/// The adapter's own rules, on an instance of its own (`http-ingest`).
pub struct AdapterRules(pub Arc<Mutex<plugin_runtime::TargetAdapter>>);

impl IngestRules for AdapterRules {
    fn headers(&self, address: &str) -> Result<Result<Vec<(String, String)>, String>, PluginError> {
        match self.0.lock().unwrap_or_else(|p| p.into_inner()).http_headers(address) {
            Ok(h) => Ok(Ok(h)),
            // The adapter's own refusal (a login that failed): this message's error.
            Err(e @ PluginError::Returned { .. }) => Ok(Err(e.to_string())),
            Err(e) => Err(e),
        }
    }
    fn judge(
        &self,
        address: &str,
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> Result<Result<(), String>, PluginError> {
        let r = plugin_runtime::types::HttpResponse { status, headers, body };
        self.0.lock().unwrap_or_else(|p| p.into_inner()).judge(address, &r)
    }
    fn judged_by_adapter(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).has_http_ingest()
    }
    fn judge_of(&self) -> String {
        format!("plugin {}", self.0.lock().unwrap_or_else(|p| p.into_inner()).name())
    }
}

#[derive(Clone)]
pub struct HttpConfig {
    /// Service name → base URL (`http://host:port`, optionally with a path).
    pub bases: BTreeMap<String, String>,
    /// Connection tasks (the producer's senders).
    pub connections: u32,
    /// Requests in flight per connection task.
    pub window: usize,
    pub request_timeout: Duration,
    pub channel_batches: usize,
    pub rules: Arc<dyn IngestRules>,
}

/// Where a message goes: `"<service> <path>"` → URL, or why not.
pub fn url_for(bases: &BTreeMap<String, String>, address: &str) -> Result<String, String> {
    let (service, path) =
        address.split_once(' ').ok_or_else(|| format!("address {address:?} is not \"<service> <path>\""))?;
    let base = bases.get(service).ok_or_else(|| {
        format!(
            "address {address:?} names service `{service}`, which this stack does not have (it has {})",
            bases.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })?;
    if !path.starts_with('/') || path.starts_with("//") {
        return Err(format!("address {address:?}: the path must start with a single /"));
    }
    Ok(format!("{}{path}", base.trim_end_matches('/')))
}

type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

pub struct HttpTransport {
    pool: Pool,
    /// Requests in flight per connection (what is lost if the drain ends first).
    in_flight: Vec<Arc<AtomicU64>>,
}

/// Headers per address, shared by a transport's connection tasks.
#[derive(Default)]
struct HeaderCache(Mutex<HashMap<Arc<str>, Arc<Vec<(String, String)>>>>);

struct Shared {
    cfg: HttpConfig,
    client: HttpClient,
    headers: HeaderCache,
    live: Arc<Live>,
    /// An acknowledged answer has been described for the result already.
    answered: std::sync::atomic::AtomicBool,
}

impl HttpTransport {
    pub fn start(cfg: &HttpConfig) -> HttpTransport {
        let live = Arc::new(Live::default());
        let client: HttpClient = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(cfg.window.max(1) * cfg.connections.max(1) as usize)
            .build(crate::tls::https_connector(cfg.bases.values().any(|b| b.starts_with("https://"))));
        let shared = Arc::new(Shared {
            cfg: cfg.clone(),
            client,
            headers: HeaderCache::default(),
            live: live.clone(),
            answered: Default::default(),
        });
        let mut pool = Pool::new(live.clone());
        let mut in_flight = Vec::new();
        for _ in 0..cfg.connections.max(1) {
            let (shared, n) = (shared.clone(), Arc::new(AtomicU64::new(0)));
            in_flight.push(n.clone());
            pool.open(cfg.channel_batches, |rx, counts| tokio::spawn(run_connection(shared, rx, counts, n)));
        }
        live.connected.store(cfg.connections.max(1) as u64, Ordering::Relaxed);
        HttpTransport { pool, in_flight }
    }

    /// Stop taking batches, let the requests in flight answer until
    /// `drain` is up; requests still unanswered then are lost in flight.
    pub async fn finish(self, drain: Duration) -> AckCounts {
        let deadline = tokio::time::Instant::now() + drain;
        let mut all = AckCounts::default();
        let live = self.pool.live.clone();
        for (c, in_flight) in self.pool.conns.into_iter().zip(self.in_flight) {
            drop(c.tx);
            let mut task = c.task;
            let timed_out = tokio::time::timeout_at(deadline, &mut task).await.is_err();
            if timed_out {
                task.abort();
                c.counts.lock().unwrap().lost_in_flight += in_flight.load(Ordering::Relaxed);
            }
            let mut counts = c.counts.lock().unwrap();
            if !timed_out {
                counts.input_drained = true;
            }
            counts.close(now_ns());
            counts.input_drained = true;
            all.merge(&counts);
        }
        live.add_seconds_to(&mut all);
        all
    }
}

/// The outcome of one request: status, headers and body (None: larger
/// than [`MAX_ANSWER_BYTES`], not read further), or why none came.
type Answer = Result<(u16, Vec<(String, String)>, Option<Vec<u8>>), String>;

async fn run_connection(
    shared: Arc<Shared>,
    mut rx: mpsc::Receiver<Batch>,
    counts: Arc<Mutex<AckCounts>>,
    in_flight: Arc<AtomicU64>,
) {
    let window = shared.cfg.window.max(1);
    let mut outstanding = FuturesUnordered::new();
    loop {
        let batch = tokio::select! {
            biased;
            Some((m, t, v)) = outstanding.next(), if !outstanding.is_empty() => {
                in_flight.fetch_sub(1, Ordering::Relaxed);
                count(&shared, &counts, &m, t, v);
                continue;
            }
            b = rx.recv() => match b { Some(b) => b, None => break },
        };
        for m in batch {
            if outstanding.len() >= window {
                let waited = Instant::now();
                while outstanding.len() >= window {
                    if let Some((m, t, v)) = outstanding.next().await {
                        in_flight.fetch_sub(1, Ordering::Relaxed);
                        count(&shared, &counts, &m, t, v);
                    }
                }
                counts.lock().unwrap().held_back_s += waited.elapsed().as_secs_f64();
            }
            let readings = if let Carries::Readings { n, .. } = m.carries { n as u64 } else { 0 };
            {
                let mut c = counts.lock().unwrap();
                c.published += 1;
                c.queued += 1;
                c.readings_published += readings;
            }
            shared.live.published.fetch_add(1, Ordering::Relaxed);
            in_flight.fetch_add(1, Ordering::Relaxed);
            let s = shared.clone();
            // The answer is judged inside the request's own future: a judge
            // call never holds up this loop, the other requests in flight or
            // the next batch.
            outstanding.push(async move {
                let t = m.sent_now();
                let r = post(&s, &m).await;
                let v = judge(&s, &m, r);
                (m, t, v)
            });
        }
    }
    while let Some((m, t, v)) = outstanding.next().await {
        in_flight.fetch_sub(1, Ordering::Relaxed);
        count(&shared, &counts, &m, t, v);
    }
}

/// The adapter failed as a plugin earlier: it is not called again.
fn adapter_failed(shared: &Shared) -> Option<String> {
    shared.live.plugin_fault.lock().unwrap().as_ref().map(|e| format!("not sent: {}", first_line(e)))
}

/// Keep the first fault of the adapter's own for the step to end on: its
/// cause, not a later call's "unusable instance" that may settle first.
fn keep_fault(shared: &Shared, e: PluginError) -> String {
    let text = first_line(&e);
    let mut kept = shared.live.plugin_fault.lock().unwrap();
    if kept.is_none() || matches!(*kept, Some(PluginError::Poisoned { .. })) {
        *kept = Some(e);
    }
    text
}

fn first_line(e: &PluginError) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

/// Headers for `address`, from the cache or the adapter.
async fn headers_for(shared: &Arc<Shared>, address: &Arc<str>) -> Result<Arc<Vec<(String, String)>>, String> {
    if let Some(h) = shared.headers.0.lock().unwrap().get(address) {
        return Ok(h.clone());
    }
    if let Some(why) = adapter_failed(shared) {
        return Err(why);
    }
    let (rules, a) = (shared.cfg.rules.clone(), address.clone());
    let h = tokio::task::spawn_blocking(move || rules.headers(&a)).await.map_err(|e| format!("headers: {e}"))?;
    let h = h.map_err(|e| keep_fault(shared, e))??;
    let h = Arc::new(h);
    shared.headers.0.lock().unwrap().insert(address.clone(), h.clone());
    Ok(h)
}

/// POST a message; after a 401 or 403, once more with headers asked for
/// again (the adapter logs in afresh: a token that expired is replaced).
async fn post(shared: &Arc<Shared>, m: &Message) -> Answer {
    let first = post_once(shared, m).await;
    match first {
        Ok((401 | 403, _, _)) => {
            shared.headers.0.lock().unwrap().remove(&m.address);
            post_once(shared, m).await
        }
        other => other,
    }
}

async fn post_once(shared: &Arc<Shared>, m: &Message) -> Answer {
    let url = url_for(&shared.cfg.bases, &m.address)?;
    let headers = headers_for(shared, &m.address).await.map_err(|e| format!("no headers for {}: {e}", m.address))?;
    let mut req = hyper::Request::post(url.as_str());
    for (k, v) in headers.iter() {
        req = req.header(k.as_str(), v.as_str());
    }
    let req = req.body(Full::new(m.payload.clone())).map_err(|e| format!("cannot build a request to {url}: {e}"))?;
    let timeout = shared.cfg.request_timeout;
    let exchange = async {
        let resp = shared.client.request(req).await.map_err(|e| describe_error(&url, &e))?;
        let status = resp.status().as_u16();
        let hs = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        let body = match http_body_util::Limited::new(resp.into_body(), MAX_ANSWER_BYTES).collect().await {
            Ok(b) => Some(b.to_bytes().to_vec()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => None,
            Err(e) => return Err(format!("POST {url}: reading the answer: {e}")),
        };
        Ok((status, hs, body))
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(r) => r,
        Err(_) => Err(format!("POST {url}: no answer within {} s", timeout.as_secs_f64())),
    }
}

/// "HTTP 200: ver:\"3.0\" …": the status and the first bytes of an answer.
pub fn describe_answer(status: u16, body: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(body).chars().take(120).collect();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        format!("HTTP {status} with an empty body")
    } else {
        format!("HTTP {status}: {text}")
    }
}

fn describe_error(url: &str, e: &hyper_util::client::legacy::Error) -> String {
    let mut s = format!("POST {url}: {e}");
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s.push_str(&format!(": {inner}"));
        src = inner.source();
    }
    s
}

/// What became of one request, once its answer is judged.
enum Verdict {
    /// Acknowledged; the answer arrived at `at` (ms). `answer` describes it
    /// when it is the transport's first acknowledged answer.
    Ack { at: i64, answer: Option<String> },
    /// Answered with a refusal.
    Refused { at: i64, why: String },
    /// No answer (or the adapter failed judging it): the outcome is unknown.
    Unanswered(String),
}

/// Judge an answer: the status and size first, then the adapter's `judge`.
///
/// `judge` runs right here, on the async worker that read the answer: a
/// call takes about 5 µs, and its plugin deadline (3 s, the same for every
/// call) bounds how long a runaway one can hold that worker before the
/// step ends on it. Handing each answer to another thread cost more than
/// the call (measured with `bench http`: a blocking-pool task per answer
/// or a judge thread fed by a queue took 75–90 µs of client CPU per
/// request against plain hyper's 35–45, and inline 45–55), and a client
/// that spends more CPU per request than the plain client takes it from
/// the server it measures on a small machine.
fn judge(shared: &Arc<Shared>, m: &Message, r: Answer) -> Verdict {
    let at = now_ns();
    let refused = |why: String| Verdict::Refused { at, why };
    match r {
        Err(e) => Verdict::Unanswered(e),
        Ok((status, _, None)) => refused(format!(
            "HTTP {status} from {}: an answer larger than {} MiB, read no further and not handed to `judge` of {}",
            m.address,
            MAX_ANSWER_BYTES >> 20,
            shared.cfg.rules.judge_of()
        )),
        Ok((status, _, Some(body))) if !(200..300).contains(&status) => {
            let text: String = String::from_utf8_lossy(&body).chars().take(200).collect();
            refused(format!("HTTP {status} from {}: {}", m.address, text.trim()))
        }
        Ok((_, _, Some(_))) if adapter_failed(shared).is_some() => {
            Verdict::Unanswered(adapter_failed(shared).unwrap_or_default())
        }
        Ok((status, hs, Some(body))) => {
            let answer = (!shared.answered.swap(true, Ordering::Relaxed)).then(|| describe_answer(status, &body));
            match shared.cfg.rules.judge(&m.address, status, hs, body) {
                Ok(Ok(())) => Verdict::Ack { at, answer },
                Ok(Err(why)) => refused(format!("{} refused: {why}", m.address)),
                // The adapter failed, not the SUT: the outcome is unknown.
                Err(e) => Verdict::Unanswered(keep_fault(shared, e)),
            }
        }
    }
}

/// Count a judged request.
fn count(shared: &Shared, counts: &Mutex<AckCounts>, m: &Message, t: Timing, v: Verdict) {
    let (live, mut c) = (&shared.live, counts.lock().unwrap());
    match v {
        Verdict::Ack { at, answer } => {
            if c.first_answer.is_none() {
                c.first_answer = answer;
            }
            super::count_ack(&mut c, live, m.carries, t, at);
        }
        Verdict::Refused { at, why } => super::count_refused(&mut c, live, m.carries, t, at, why),
        Verdict::Unanswered(why) => super::count_unanswered(&mut c, live, m.carries, t, Some(why)),
    }
}

/// HTTP ingest as a [`super::Carrier`].
pub struct HttpCarrier {
    pub cfg: HttpConfig,
}

impl super::Carrier for HttpCarrier {
    fn describe(&self) -> String {
        let services: Vec<String> = self.cfg.bases.iter().map(|(k, v)| format!("{k} at {v}")).collect();
        format!(
            "HTTP {} ({} connections × {} requests in flight)",
            services.join(", "),
            self.cfg.connections,
            self.cfg.window
        )
    }
    fn open(&self) -> super::BoxFuture<'_, anyhow::Result<Box<dyn super::Transport>>> {
        Box::pin(async move { Ok(Box::new(HttpTransport::start(&self.cfg)) as Box<dyn super::Transport>) })
    }
    fn acks_expected(&self) -> bool {
        true
    }
    fn ack_means_stored(&self) -> bool {
        false
    }
    fn acknowledger(&self) -> &'static str {
        "the server"
    }
    fn unstored_hint(&self, counts: &super::AckCounts) -> String {
        let answered = counts.first_answer.as_deref().map(|a| format!("it answered {a}; ")).unwrap_or_default();
        if self.cfg.rules.judged_by_adapter() {
            format!("{answered}the adapter's http-ingest judged that an acknowledgement, yet the reading is not stored: check the adapter's path and body against the server, and that the server stores what it accepts")
        } else {
            format!("{answered}the adapter has no http-ingest export, so it sends no Content-Type and any 2xx counts as acknowledged: export http-ingest and judge the answer (docs/plugin-authoring.md), and check the adapter's path")
        }
    }
}

impl super::Transport for HttpTransport {
    fn pool(&self) -> &Pool {
        &self.pool
    }
    fn finish(self: Box<Self>, drain: Duration) -> super::BoxFuture<'static, AckCounts> {
        Box::pin(HttpTransport::finish(*self, drain))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_resolve_against_the_stack_only() {
        let bases: BTreeMap<String, String> = [("api".to_string(), "http://127.0.0.1:28080/".to_string())].into();
        assert_eq!(url_for(&bases, "api /api/hisWrite").unwrap(), "http://127.0.0.1:28080/api/hisWrite");
        assert!(url_for(&bases, "gateway /x").unwrap_err().contains("`gateway`"));
        assert!(url_for(&bases, "api //evil/x").is_err());
        assert!(url_for(&bases, "api").is_err());
    }
}
