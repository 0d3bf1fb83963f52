//! Health of a stack someone else runs (`--watch`): a process by pid, a
//! container on a reachable Docker engine, or a health URL. What is watched
//! is measured like scalebench's own stacks (restarts, exits, OOM kills
//! where the source has them, CPU and memory where it can be read); what is
//! not watched stays unmeasured, and the step says so.
//!
//! Never intrusive: a watched process or container that exits is recorded,
//! not restarted (it is not scalebench's), and nothing is ever signalled.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use local_stack::ForeignProcess;

use super::ProcSample;
use crate::clock::utc_now;
use crate::results::ServiceHealth;

/// What `--watch SERVICE=…` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Pid(u32),
    Docker(String),
    Url(String),
}

/// One `--watch SERVICE=pid:PID|docker:CONTAINER|url:HEALTH_URL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchSpec {
    pub service: String,
    pub source: Source,
}

const WATCH_FORMS: &str = "give SERVICE=pid:PID, SERVICE=docker:CONTAINER or SERVICE=url:http://HOST:PORT/PATH";

/// Parse one `--watch` value, or say what is wrong in the user's words.
pub fn parse(s: &str) -> Result<WatchSpec, String> {
    let (service, what) = s.split_once('=').ok_or_else(|| format!("--watch {s}: {WATCH_FORMS}"))?;
    let service = service.trim();
    if service.is_empty() {
        return Err(format!("--watch {s}: name the service before `=` (e.g. historian=pid:4242)"));
    }
    let (kind, value) = what.split_once(':').ok_or_else(|| format!("--watch {s}: {WATCH_FORMS}"))?;
    let value = value.trim();
    let source = match kind.trim() {
        "pid" => Source::Pid(
            value.parse().map_err(|_| format!("--watch {s}: `{value}` is not a process id (a whole number)"))?,
        ),
        "docker" if !value.is_empty() => Source::Docker(value.to_string()),
        "url" if value.starts_with("http://") => Source::Url(value.to_string()),
        "url" => {
            return Err(format!(
                "--watch {s}: the health URL must start with http:// (an https health URL is not watched yet)"
            ))
        }
        other => return Err(format!("--watch {s}: unknown kind `{other}`; {WATCH_FORMS}")),
    };
    Ok(WatchSpec { service: service.to_string(), source })
}

/// How often a health URL is asked, and how long an answer may take.
const URL_EVERY: Duration = Duration::from_secs(1);
const URL_TIMEOUT: Duration = Duration::from_secs(2);
/// Docker inspect is an API round trip per container: once a second is plenty.
const INSPECT_EVERY: Duration = Duration::from_secs(1);

enum Watched {
    Process {
        process: ForeignProcess,
        gone: bool,
    },
    #[cfg(feature = "docker")]
    Container(super::watch_container::WatchedContainer),
    Url {
        health: Arc<Mutex<ServiceHealth>>,
        stop: Arc<AtomicBool>,
    },
}

/// Every `--watch` of a run, and what each has seen since the run started.
pub struct Watchers {
    watched: Vec<(String, Watched)>,
    health: BTreeMap<String, ServiceHealth>,
    last_check: Option<Instant>,
}

/// Why a watch cannot start, in the user's words.
fn cannot(spec: &WatchSpec, why: impl std::fmt::Display) -> String {
    format!("--watch {}: {why}", spec.service)
}

impl Watchers {
    /// Find what each spec names now: a watched process must be running, a
    /// container must exist on the engine, a health URL must answer.
    pub async fn start(specs: &[WatchSpec]) -> Result<Watchers, String> {
        let mut watched = Vec::new();
        let mut health = BTreeMap::new();
        for spec in specs {
            let running = ServiceHealth { state: "running".into(), ..Default::default() };
            let w = match &spec.source {
                Source::Pid(pid) => {
                    let process = ForeignProcess::find(*pid).ok_or_else(|| {
                        cannot(spec, format!("no process {pid} is running; give the pid of the service's main process"))
                    })?;
                    Watched::Process { process, gone: false }
                }
                #[cfg(feature = "docker")]
                Source::Docker(name) => Watched::Container(
                    super::watch_container::WatchedContainer::open(name).await.map_err(|e| cannot(spec, e))?,
                ),
                #[cfg(not(feature = "docker"))]
                Source::Docker(_) => {
                    return Err(cannot(spec, crate::error::left_out("Watching a Docker container")));
                }
                Source::Url(url) => {
                    if let Err(e) = probe(url) {
                        return Err(cannot(spec, format!("{url} does not answer as healthy before the run: {e}")));
                    }
                    let shared = Arc::new(Mutex::new(running.clone()));
                    let stop = Arc::new(AtomicBool::new(false));
                    spawn_poller(url.clone(), shared.clone(), stop.clone());
                    Watched::Url { health: shared, stop }
                }
            };
            let mut h = running;
            h.oom_measured = matches!(spec.source, Source::Docker(_));
            health.insert(spec.service.clone(), h);
            watched.push((spec.service.clone(), w));
        }
        Ok(Watchers { watched, health, last_check: None })
    }

    pub fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }

    /// Look at every watched service (at most once a second unless `now`);
    /// one line per event.
    pub async fn check(&mut self, now: bool) -> Vec<String> {
        if !now && self.last_check.is_some_and(|t| t.elapsed() < INSPECT_EVERY) {
            return Vec::new();
        }
        self.last_check = Some(Instant::now());
        let mut events = Vec::new();
        for (service, w) in &mut self.watched {
            let h = self.health.entry(service.clone()).or_default();
            match w {
                Watched::Process { process, gone } => {
                    if !*gone && !process.alive() {
                        *gone = true;
                        h.exits.push(format!(
                            "process {} is gone at {} (not scalebench's child: its exit status cannot be read)",
                            process.pid,
                            utc_now()
                        ));
                        h.state = "gone".into();
                        events.push(format!("{service}: watched process {} is gone", process.pid));
                    }
                }
                #[cfg(feature = "docker")]
                Watched::Container(c) => c.poll(service, h, &mut events).await,
                Watched::Url { health, .. } => {
                    let seen = health.lock().unwrap().clone();
                    if seen.exits.len() > h.exits.len() {
                        events.extend(seen.exits[h.exits.len()..].iter().map(|e| format!("{service}: {e}")));
                    }
                    *h = seen;
                }
            }
        }
        events
    }

    /// Restarts, exits and OOM kills per watched service since the run began.
    pub fn totals(&self) -> BTreeMap<String, ServiceHealth> {
        self.health.clone()
    }

    /// CPU and memory of watched processes and containers now.
    pub async fn samples(&self) -> Vec<ProcSample> {
        let mut out = Vec::new();
        for (service, w) in &self.watched {
            match w {
                Watched::Process { process, .. } => {
                    if let Some((cpu, rss)) = process.usage() {
                        out.push(ProcSample::new(service.clone(), cpu, rss, Instant::now()));
                    }
                }
                #[cfg(feature = "docker")]
                Watched::Container(c) => out.extend(c.sample(service).await),
                Watched::Url { .. } => {}
            }
        }
        out
    }
}

impl Drop for Watchers {
    fn drop(&mut self) {
        for (_, w) in &self.watched {
            if let Watched::Url { stop, .. } = w {
                stop.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// One GET of a health URL: Ok for a 2xx answer in time.
fn probe(url: &str) -> Result<(), String> {
    let agent = ureq::AgentBuilder::new().timeout(URL_TIMEOUT).redirects(0).user_agent("scalebench").build();
    match agent.get(url).call() {
        Ok(r) if (200..300).contains(&r.status()) => Ok(()),
        Ok(r) => Err(format!("HTTP {}", r.status())),
        Err(ureq::Error::Status(code, _)) => Err(format!("HTTP {code}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Ask `url` every second on a thread of its own (a slow answer never holds
/// up the step's loop); each outage is one exit, its end one restart.
fn spawn_poller(url: String, health: Arc<Mutex<ServiceHealth>>, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let mut down_since: Option<Instant> = None;
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            let answer = probe(&url);
            let mut h = health.lock().unwrap();
            match (answer, down_since) {
                (Err(e), None) => {
                    down_since = Some(t);
                    h.exits.push(format!("health URL {url} failed at {}: {e}", utc_now()));
                    h.state = "unhealthy".into();
                }
                (Ok(()), Some(since)) => {
                    // Back after an outage: counted as a restart (the outage
                    // itself is already an exit).
                    h.restarts += 1;
                    let outage = since.elapsed().as_secs_f64();
                    if let Some(last) = h.exits.last_mut() {
                        last.push_str(&format!(" (answered again after {outage:.1} s)"));
                    }
                    h.state = "running".into();
                    down_since = None;
                }
                _ => {}
            }
            drop(h);
            std::thread::sleep(URL_EVERY.saturating_sub(t.elapsed()));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_forms() {
        assert_eq!(parse("historian=pid:4242").unwrap().source, Source::Pid(4242));
        assert_eq!(parse("db=docker:pg-1").unwrap().source, Source::Docker("pg-1".into()));
        assert_eq!(
            parse("api=url:http://127.0.0.1:28080/about").unwrap(),
            WatchSpec { service: "api".into(), source: Source::Url("http://127.0.0.1:28080/about".into()) }
        );
    }

    #[test]
    fn bad_watches_say_what_to_give() {
        assert!(parse("historian").unwrap_err().contains("SERVICE=pid:PID"));
        assert!(parse("historian=pid:abc").unwrap_err().contains("not a process id"));
        assert!(parse("=pid:1").unwrap_err().contains("name the service"));
        assert!(parse("x=ssh:host").unwrap_err().contains("unknown kind `ssh`"));
        assert!(parse("x=url:https://h/").unwrap_err().contains("http://"));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_watched_process_that_ends_is_an_exit() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let spec = parse(&format!("svc=pid:{}", child.id())).unwrap();
        let mut w = Watchers::start(&[spec]).await.unwrap();
        assert!(w.check(true).await.is_empty());
        assert_eq!(w.totals()["svc"].state, "running");
        assert!(!w.samples().await.is_empty(), "a live process has CPU and memory");
        child.kill().unwrap();
        child.wait().unwrap();
        let events = w.check(true).await;
        assert_eq!(events.len(), 1, "{events:?}");
        let h = &w.totals()["svc"];
        assert_eq!((h.state.as_str(), h.exits.len()), ("gone", 1), "{h:?}");
        assert!(!h.oom_measured, "a process's OOM kills cannot be read from outside");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn watching_what_is_not_there_is_refused() {
        let e = Watchers::start(&[parse("svc=pid:4000000").unwrap()]).await.err().unwrap();
        assert!(e.contains("no process 4000000 is running"), "{e}");
        let e = Watchers::start(&[parse("api=url:http://127.0.0.1:1/health").unwrap()]).await.err().unwrap();
        assert!(e.contains("does not answer"), "{e}");
    }
}
