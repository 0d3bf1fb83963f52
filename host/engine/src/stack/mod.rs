//! Stack drivers: who runs the system under test for a run, behind one
//! trait ([`StackDriver`]). A driver provides services by name and kind (the
//! adapter's plan says which it needs), health (restarts, exits, OOM kills
//! read from the processes or containers themselves), resource samples, a
//! crash hook (`signal`) and teardown.
//!
//! Drivers: `local` (mosquitto + PostgreSQL + the reference historian as
//! child processes), `local-nats` (a nats-server cluster), `external` (URLs
//! of a stack someone else runs) and `docker` (a compose project run through
//! the Docker Engine API). Adding a target kind adds one driver here and one
//! carrier in `transport`.

pub mod bare_mosquitto;
pub mod compose;
#[cfg(feature = "docker")]
pub mod docker;
#[cfg(feature = "docker")]
pub mod docker_tls;
pub mod external;
pub mod local;
pub mod start;
pub mod watch;
#[cfg(feature = "docker")]
pub mod watch_container;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use crate::future::BoxFuture;
use crate::results::ServiceHealth;

/// CPU seconds, memory and block I/O of one service (process group or
/// container) at one instant.
#[derive(Debug, Clone)]
pub struct ProcSample {
    pub name: String,
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    /// The service's memory cap, where it has one.
    pub mem_limit_bytes: Option<u64>,
    /// Bytes read and written to block devices so far, where measured.
    pub blkio_read_bytes: Option<u64>,
    pub blkio_write_bytes: Option<u64>,
    pub at: Instant,
}

impl ProcSample {
    pub fn new(name: String, cpu_seconds: f64, rss_bytes: u64, at: Instant) -> ProcSample {
        ProcSample {
            name,
            cpu_seconds,
            rss_bytes,
            mem_limit_bytes: None,
            blkio_read_bytes: None,
            blkio_write_bytes: None,
            at,
        }
    }
}

/// What a service is, as a target's plan names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceKind {
    Mqtt,
    Postgres,
    Nats,
    Http,
}

impl ServiceKind {
    pub fn describe(self) -> &'static str {
        match self {
            ServiceKind::Mqtt => "an MQTT broker",
            ServiceKind::Postgres => "a PostgreSQL database",
            ServiceKind::Nats => "a NATS server",
            ServiceKind::Http => "an HTTP service",
        }
    }
}

/// One service a stack provides.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The name plans and plugins use ("broker", "postgres", "nats", …).
    pub name: String,
    pub kind: ServiceKind,
    /// `mqtt://host:port`, a PostgreSQL connection string, comma-separated
    /// `nats://` URLs, or `http://host:port`.
    pub address: String,
}

/// A stack a run drives; see the module docs.
pub trait StackDriver: Send {
    /// "local", "local-nats", "docker", "external".
    fn kind(&self) -> &'static str;
    fn services(&self) -> Vec<Endpoint>;
    /// Bring back any service that exited (a supervisor, as a container
    /// runtime's restart policy is); one line per event.
    fn supervise(&mut self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(async { Vec::new() })
    }
    /// Supervise now, however recently the last pass ran: called once after
    /// the drain so an exit near the end of the load is not missed.
    fn supervise_now(&mut self) -> BoxFuture<'_, Vec<String>> {
        self.supervise()
    }
    /// Restarts, exits and OOM kills per service since the stack started.
    /// None: this stack's processes are not visible (unmeasured, never zero).
    fn health_totals(&mut self) -> Option<BTreeMap<String, ServiceHealth>> {
        None
    }
    /// CPU, memory (and block I/O) per service now.
    fn sample_processes(&mut self) -> Vec<ProcSample> {
        Vec::new()
    }
    /// The services `signal` takes, by name (what `--kill nats-*` matches).
    fn signal_names(&self) -> Vec<String> {
        Vec::new()
    }
    /// Settings the stack's services were started with that bear on
    /// durability (e.g. JetStream's `sync_interval`), for the result.
    fn settings(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    /// Send `signal` to a service by name without telling its supervisor
    /// (the crash hook): the kill is then detected, not declared.
    fn signal(&mut self, service: &str, signal: i32) -> Result<(), String> {
        let _ = signal;
        Err(format!("cannot signal `{service}`: the {} stack's processes are not scalebench's", self.kind()))
    }
    /// Where the stack keeps its data (watched for free space), if it is ours.
    fn data_dir(&self) -> Option<PathBuf> {
        None
    }
    /// CPU and memory caps of the stack's services, for the result.
    fn caps(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("cpu".to_string(), "none (uncapped)".to_string())])
    }
    /// Stop everything the driver started (nothing it did not).
    fn stop(self: Box<Self>);

    /// The first service of `kind`.
    fn service_of_kind(&self, kind: ServiceKind) -> Option<Endpoint> {
        self.services().into_iter().find(|e| e.kind == kind)
    }

    /// "broker (an MQTT broker), postgres (a PostgreSQL database)".
    fn describe_services(&self) -> String {
        let v: Vec<String> = self.services().iter().map(|e| format!("{} ({})", e.name, e.kind.describe())).collect();
        if v.is_empty() {
            "nothing".into()
        } else {
            v.join(", ")
        }
    }
}

/// What happened to each service between two health readings.
pub fn health_delta(
    before: &BTreeMap<String, ServiceHealth>,
    after: &BTreeMap<String, ServiceHealth>,
) -> BTreeMap<String, ServiceHealth> {
    after
        .iter()
        .map(|(name, a)| {
            let b = before.get(name).cloned().unwrap_or_default();
            (
                name.clone(),
                ServiceHealth {
                    restarts: a.restarts.saturating_sub(b.restarts),
                    oom_kills: a.oom_kills.saturating_sub(b.oom_kills),
                    oom_measured: a.oom_measured,
                    exits: a.exits.iter().skip(b.exits.len()).cloned().collect(),
                    state: a.state.clone(),
                },
            )
        })
        .collect()
}

/// `--service NAME=URL` → (name, base URL), or why not (in the user's words).
pub fn parse_service(s: &str) -> Result<(String, String), String> {
    let (name, url) =
        s.split_once('=').ok_or_else(|| format!("--service {s}: give NAME=URL, e.g. api=http://127.0.0.1:28080"))?;
    let (name, url) = (name.trim(), url.trim());
    if name.is_empty() {
        return Err(format!("--service {s}: the service needs a name before `=`, e.g. api=http://127.0.0.1:28080"));
    }
    if !url.starts_with("http://") && !url.starts_with("https://") {
        return Err(format!("--service {s}: the URL must start with http:// or https://"));
    }
    Ok((name.to_string(), url.to_string()))
}

/// Host and port of an `http(s)://[user@]host[:port][/path][?query][#fragment]`
/// base URL (port 80, or 443 for https, when none), as an HTTP client connects to them: the
/// isolation guard checks this port, so a port that does not read is an
/// error, never a silent 80.
pub fn url_host_port(url: &str) -> Result<(String, u16), String> {
    let default_port = if url.trim().starts_with("https://") { 443 } else { 80 };
    let rest = url.trim().trim_start_matches("https://").trim_start_matches("http://");
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    // An IPv6 host is bracketed: its colons are not the port's.
    let split = match hostport.find(']') {
        Some(end) if hostport.starts_with('[') => (&hostport[..=end], hostport[end + 1..].strip_prefix(':')),
        _ => hostport.rsplit_once(':').map_or((hostport, None), |(h, p)| (h, Some(p))),
    };
    match split {
        (h, None | Some("")) => Ok((h.to_string(), default_port)),
        (h, Some(p)) => match p.parse::<u16>() {
            Ok(port) => Ok((h.to_string(), port)),
            Err(_) => Err(format!("{url}: `{p}` is not a port number (0 to 65535); give http://host:port")),
        },
    }
}

/// Parse `mqtt://host:port` (or `host:port`); `mqtts://host:port` is the
/// same with TLS (port 8883 when none is given).
pub fn parse_mqtt_url(url: &str) -> Result<(String, u16), String> {
    let tls = mqtt_url_is_tls(url);
    let rest = ["mqtts://", "ssl://", "mqtt://", "tcp://"].iter().find_map(|p| url.strip_prefix(p)).unwrap_or(url);
    if rest.contains("://") {
        return Err(format!("{url}: an MQTT URL starts with mqtt:// (plain) or mqtts:// (TLS)"));
    }
    let rest = rest.trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| format!("bad port in MQTT URL {url:?}"))?),
        None => (rest, if tls { 8883 } else { 1883 }),
    };
    if host.is_empty() {
        return Err(format!("no host in MQTT URL {url:?}; expected mqtt://host:port"));
    }
    Ok((host.to_string(), port))
}

/// `mqtts://` (or `ssl://`): the broker is reached over TLS.
pub fn mqtt_url_is_tls(url: &str) -> bool {
    url.starts_with("mqtts://") || url.starts_with("ssl://")
}
