//! nats-server with JetStream as child processes on loopback: one node, or N
//! nodes clustered with routes on 127.0.0.1 so that `replicas = 3` is real.
//!
//! ```no_run
//! # fn demo() -> Result<(), local_stack::StackError> {
//! use local_stack::nats::{NatsCluster, NatsOptions};
//! let mut cluster = NatsCluster::start(NatsOptions::new("/var/tmp/scalebench-nats", 3))?; // guards, start, readiness
//! println!("{:?} {:?}", cluster.client_urls(), cluster.monitor_urls());
//! let varz = cluster.varz(0)?;                           // /varz of node 0 as JSON
//! cluster.kill_node(1, libc::SIGKILL)?;                   // crash one node …
//! cluster.restart_node(1)?;                               // … and bring it back (waits until it is ready)
//! cluster.kill(2, libc::SIGKILL)?;                        // or crash it behind the supervisor's back …
//! let events = cluster.supervise();                       // … which finds the exit and restarts it
//! let health = cluster.health();                          // nats-0, nats-1, …: exits, restarts, OOM kills
//! cluster.stop();                                         // also done on Drop
//! # let _ = varz; Ok(()) }
//! ```
//!
//! # What `start` does
//! 1. Ports: three per node (client, cluster route, HTTP monitoring), all on
//!    127.0.0.1; given in [`NatsOptions::ports`] or picked free in
//!    20000-29999 ([`guard::pick_free_ports`]). Every port passes
//!    [`guard::check_port`]: live defaults (4222, 6222, 8222, …), ports outside
//!    2xxxx and taken ports are refused with a `hint:`.
//! 2. One config file per node, `run_dir/nats/n<i>/nats.conf`: `server_name`
//!    `n<i>`, client listener, monitoring (`http`) listener, JetStream with
//!    `store_dir` `run_dir/nats/n<i>/js` and bounded memory / file stores,
//!    and (N > 1) a cluster block with routes to every node.
//! 3. Each node: `nats-server -c nats.conf`, output appended to
//!    `run_dir/nats/logs/n<i>.log`, in its own process group with
//!    `PR_SET_PDEATHSIG=SIGKILL` (start the cluster from a long-lived
//!    thread, as for [`crate::LocalStack`]).
//! 4. Readiness, bounded by [`NatsOptions::ready_timeout`]: every node's
//!    `/healthz` answers 200 (in a cluster nats-server answers 503 until
//!    JetStream has contact with a meta leader); in a cluster, every node's
//!    `/jsz` also names a meta leader and counts a meta cluster of N, and
//!    `/varz` counts at least N-1 routes,
//!    so that a stream with replicas = N can be placed at once.
//!
//! A cluster that fails to start stops what it started. Errors name the node,
//! its ports and the last lines of its log, and end with a `hint:` line.
//!
//! # Teardown
//! [`NatsCluster::stop`] and `Drop`: SIGTERM to each node's process group, a
//! few seconds' grace, then SIGKILL; store directories stay under `run_dir`.
//!
//! The crate's [`crate::Service`] enum has no NATS variant, so process
//! handling reuses the crate's machinery under a placeholder tag and every
//! error this module returns is phrased by this module (never "mosquitto").
//!
//! (Over 700 lines: one service per file, as in the rest of this crate; a
//! cluster's start, routes, supervision, kills and /varz belong together.)

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::health::{self, ServiceHealth, Tracker};
use crate::process::{self, ServiceProc};
use crate::{guard, log_tail, Service, StackError};

const HOST: &str = "127.0.0.1";
/// Tag handed to the crate's process helpers (which want a [`Service`]); it
/// never shows in this module's errors.
const PROC_TAG: Service = Service::Mosquitto;

/// The ports of one node, all on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodePorts {
    /// Client connections (`nats://127.0.0.1:client`).
    pub client: u16,
    /// Cluster routes (used only when the cluster has more than one node).
    pub cluster: u16,
    /// HTTP monitoring (`/varz`, `/jsz`, `/healthz`).
    pub monitor: u16,
}

/// Everything [`NatsCluster::start`] needs.
#[derive(Debug, Clone)]
pub struct NatsOptions {
    /// Everything goes under `run_dir/nats` (created if missing).
    pub run_dir: PathBuf,
    /// Number of nodes: 1 (standalone JetStream) or more (clustered; 3 makes
    /// replicas = 3 real). At most 7.
    pub nodes: usize,
    /// One entry per node; empty = pick free 2xxxx ports.
    pub ports: Vec<NodePorts>,
    /// nats-server binary; `None` = PATH, then /usr/sbin/nats-server.
    pub bin: Option<PathBuf>,
    /// Cluster name (N > 1).
    pub cluster_name: String,
    /// JetStream `max_memory_store` per node, bytes (default 1 GiB).
    pub max_memory_store: u64,
    /// JetStream `max_file_store` per node, bytes (default 8 GiB).
    pub max_file_store: u64,
    /// Bound on the wait for every node to be ready (default 30 s).
    pub ready_timeout: Duration,
    /// Further config lines appended to every node's config file as given
    /// (e.g. `write_deadline: "10s"`).
    pub extra_config: String,
    /// JetStream `sync_interval`: "always" (fsync every write) or a
    /// duration ("10s"); None = the server's default (2 minutes), under
    /// which a crash of every node may lose what was acknowledged but not
    /// yet written to disk. Needs nats-server 2.10 or later.
    pub sync_interval: Option<String>,
    /// Client listeners TLS-only with this certificate (`tls://` URLs);
    /// None: plain. Routes and monitoring stay on loopback, plain.
    pub tls: Option<crate::StackTls>,
}

impl NatsOptions {
    /// `nodes` nodes under `run_dir`, ports picked at start.
    pub fn new(run_dir: impl Into<PathBuf>, nodes: usize) -> Self {
        NatsOptions {
            run_dir: run_dir.into(),
            nodes,
            ports: Vec::new(),
            bin: None,
            cluster_name: "scalebench".into(),
            max_memory_store: 1 << 30,
            max_file_store: 8 << 30,
            ready_timeout: Duration::from_secs(30),
            extra_config: String::new(),
            sync_interval: None,
            tls: None,
        }
    }

    fn validate(&self) -> Result<(), StackError> {
        if self.nodes == 0 || self.nodes > 7 {
            return Err(StackError::InvalidOptions {
                problem: format!("a NATS cluster of {} nodes", self.nodes),
                hint: "use --nodes 1 (standalone JetStream) or 3 (replicas = 3)".into(),
            });
        }
        if !self.ports.is_empty() && self.ports.len() != self.nodes {
            return Err(StackError::InvalidOptions {
                problem: format!("{} port sets given for {} nodes", self.ports.len(), self.nodes),
                hint: "give one NodePorts per node, or none to pick free 2xxxx ports".into(),
            });
        }
        if self.run_dir.as_os_str().is_empty() {
            return Err(StackError::InvalidOptions {
                problem: "run_dir is empty".into(),
                hint: "give the NATS cluster a directory of its own, e.g. under /var/tmp".into(),
            });
        }
        if self.cluster_name.is_empty()
            || !self.cluster_name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(StackError::InvalidOptions {
                problem: format!(
                    "cluster name {:?} is empty or has characters other than letters, digits, - and _",
                    self.cluster_name
                ),
                hint: "use a plain name such as scalebench".into(),
            });
        }
        Ok(())
    }
}

/// CPU time and memory of one node at one instant (see [`crate::ProcessSample`]:
/// the same /proc reading, keyed by node instead of service).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSample {
    /// Node index (0-based) and its `server_name`.
    pub node: usize,
    pub name: String,
    /// Pid of the node's nats-server (its process group id).
    pub pid: u32,
    /// Live processes in the node's group and family (1 for nats-server).
    pub processes: usize,
    /// CPU seconds (user + system). CPU % = Δcpu_seconds / Δwall × 100.
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    pub at: Instant,
}

struct Node {
    index: usize,
    name: String,
    ports: NodePorts,
    dir: PathBuf,
    conf: PathBuf,
    log: PathBuf,
    proc: Option<ServiceProc>,
    /// Supervision record (service name `nats-<i>`).
    tracker: Tracker,
}

impl Node {
    fn describe(&self) -> String {
        format!(
            "nats-server node {} ({}; client {HOST}:{}, cluster {HOST}:{}, monitor {HOST}:{})",
            self.index, self.name, self.ports.client, self.ports.cluster, self.ports.monitor
        )
    }
}

/// A running NATS cluster (or single node). Stops every node on
/// [`stop`](Self::stop) and on Drop.
pub struct NatsCluster {
    opts: NatsOptions,
    bin: PathBuf,
    /// `nats-server --version` of `bin` ("v2.9.10"), if it answered.
    version: Option<String>,
    nodes: Vec<Node>,
}

impl NatsCluster {
    /// Guard the ports, write the configs, start every node and wait until
    /// all are ready (in a cluster: JetStream meta leader known and routes up
    /// on every node). On error, whatever was started is stopped.
    pub fn start(opts: NatsOptions) -> Result<NatsCluster, StackError> {
        opts.validate()?;
        let bin = find_nats_server(opts.bin.as_deref())?;
        let version = version_of(&bin);
        if let Some(sync) = &opts.sync_interval {
            check_sync_interval(sync, &bin, version.as_deref())?;
        }
        let ports = if opts.ports.is_empty() {
            let p = guard::pick_free_ports(opts.nodes * 3)?;
            p.chunks(3).map(|c| NodePorts { client: c[0], cluster: c[1], monitor: c[2] }).collect()
        } else {
            opts.ports.clone()
        };
        check_ports(&ports)?;

        let base = opts.run_dir.join("nats");
        let logs = base.join("logs");
        let nodes: Vec<Node> = ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let dir = base.join(format!("n{i}"));
                Node {
                    index: i,
                    name: format!("n{i}"),
                    ports: *p,
                    conf: dir.join("nats.conf"),
                    dir,
                    log: logs.join(format!("n{i}.log")),
                    proc: None,
                    tracker: Tracker::new(format!("nats-{i}")),
                }
            })
            .collect();
        for d in std::iter::once(&logs).chain(nodes.iter().map(|n| &n.dir)) {
            std::fs::create_dir_all(d).map_err(|e| {
                StackError::io(format!("cannot create {}", d.display()), e, "choose a writable run directory")
            })?;
        }
        let routes: Vec<u16> = ports.iter().map(|p| p.cluster).collect();
        for n in &nodes {
            let conf = node_config(&opts, n, &routes);
            std::fs::write(&n.conf, conf).map_err(|e| {
                StackError::io(format!("cannot write {}", n.conf.display()), e, "choose a writable run directory")
            })?;
        }

        let mut cluster = NatsCluster { opts, bin, version, nodes };
        // On any error `cluster` is dropped, which stops what was started.
        for i in 0..cluster.nodes.len() {
            cluster.spawn_node(i)?;
        }
        let deadline = Instant::now() + cluster.opts.ready_timeout;
        for i in 0..cluster.nodes.len() {
            cluster.wait_node_ready(i, deadline)?;
        }
        for n in &mut cluster.nodes {
            if let Some(pid) = n.proc.as_ref().map(|p| p.pid()) {
                n.tracker.started(pid);
            }
        }
        Ok(cluster)
    }

    fn spawn_node(&mut self, i: usize) -> Result<(), StackError> {
        let n = &mut self.nodes[i];
        let mut cmd = Command::new(&self.bin);
        cmd.arg("-c").arg(&n.conf);
        let what = n.describe();
        let p = process::spawn(PROC_TAG, cmd, &n.log, None).map_err(|e| match e {
            StackError::Io { source, .. } => StackError::io(
                format!("cannot start {what} ({})", self.bin.display()),
                source,
                "check the nats-server binary path and permissions (apt-get install nats-server)",
            ),
            other => other,
        })?;
        n.proc = Some(p);
        Ok(())
    }

    /// Wait until node `i` answers `/healthz` with 200 and, in a cluster,
    /// names a JetStream meta leader and has its routes up.
    fn wait_node_ready(&mut self, i: usize, deadline: Instant) -> Result<(), StackError> {
        let want_routes = self.nodes.len() - 1;
        let clustered = self.nodes.len() > 1;
        let started = Instant::now();
        let mut last;
        loop {
            let node = &mut self.nodes[i];
            if let Some(status) = node.proc.as_mut().and_then(|p| p.exit_status()) {
                return Err(StackError::io(
                    format!("{} exited while starting ({status})", node.describe()),
                    std::io::Error::other(format!(
                        "last lines of {}:\n{}",
                        node.log.display(),
                        log_tail(&node.log, 20)
                    )),
                    format!("read {}; nats-server -c {} -t checks the config", node.log.display(), node.conf.display()),
                ));
            }
            let peers: Vec<(String, u16)> = self.nodes.iter().map(|n| (n.name.clone(), n.ports.monitor)).collect();
            let node = &mut self.nodes[i];
            match node_ready(node.ports.monitor, clustered, want_routes, &node.name, &peers) {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
            if Instant::now() >= deadline {
                let node = &self.nodes[i];
                return Err(StackError::io(
                    format!("{} was not ready within {:?}", node.describe(), started.elapsed()),
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "last check: {last}\nlast lines of {}:\n{}",
                            node.log.display(),
                            log_tail(&node.log, 20)
                        ),
                    ),
                    format!(
                        "read {}; a loaded machine may need a longer ready_timeout (now {:?})",
                        node.log.display(),
                        self.opts.ready_timeout
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn node_index(&self, i: usize) -> Result<(), StackError> {
        if i >= self.nodes.len() {
            return Err(StackError::InvalidOptions {
                problem: format!(
                    "there is no NATS node {i} (the cluster has {} nodes, 0..{})",
                    self.nodes.len(),
                    self.nodes.len()
                ),
                hint: "use a node index below the node count".into(),
            });
        }
        Ok(())
    }

    // ---- accessors --------------------------------------------------------

    /// Client URLs of every node: `nats://127.0.0.1:<client port>`
    /// (`tls://` when the cluster is TLS-only).
    pub fn client_urls(&self) -> Vec<String> {
        let scheme = if self.opts.tls.is_some() { "tls" } else { "nats" };
        self.nodes.iter().map(|n| format!("{scheme}://{HOST}:{}", n.ports.client)).collect()
    }

    /// Monitoring base URLs of every node: `http://127.0.0.1:<monitor port>`.
    pub fn monitor_urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| format!("http://{HOST}:{}", n.ports.monitor)).collect()
    }

    /// Ports of every node.
    pub fn ports(&self) -> Vec<NodePorts> {
        self.nodes.iter().map(|n| n.ports).collect()
    }

    /// What bears on durability: the server's version and JetStream's
    /// sync interval, as this cluster was started.
    pub fn settings(&self) -> std::collections::BTreeMap<String, String> {
        let mut m = std::collections::BTreeMap::new();
        m.insert("nats.server_version".to_string(), self.version.clone().unwrap_or_else(|| "unknown".into()));
        m.insert(
            "nats.sync_interval".to_string(),
            self.opts.sync_interval.clone().unwrap_or_else(|| DEFAULT_SYNC_INTERVAL.into()),
        );
        m
    }

    /// Number of nodes (running or not).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn options(&self) -> &NatsOptions {
        &self.opts
    }

    /// The nats-server binary in use.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Log file of node `i` (panics on a bad index).
    pub fn log_path(&self, i: usize) -> &Path {
        &self.nodes[i].log
    }

    /// Store directory (JetStream `store_dir`) of node `i` (panics on a bad index).
    pub fn store_dir(&self, i: usize) -> PathBuf {
        self.nodes[i].dir.join("js")
    }

    /// (node index, pid) of every running node.
    pub fn pids(&self) -> Vec<(usize, u32)> {
        self.nodes.iter().filter_map(|n| n.proc.as_ref().map(|p| (n.index, p.pid()))).collect()
    }

    /// Pids of every live process of the cluster.
    pub fn all_pids(&self) -> Vec<u32> {
        self.pids().into_iter().flat_map(|(_, leader)| process::service_pids(leader)).collect()
    }

    /// Is node `i`'s nats-server running?
    pub fn is_running(&mut self, i: usize) -> bool {
        self.nodes.get_mut(i).and_then(|n| n.proc.as_mut()).is_some_and(|p| p.exit_status().is_none())
    }

    /// CPU seconds and RSS of every running node.
    pub fn sample_processes(&self) -> Vec<NodeSample> {
        self.nodes
            .iter()
            .filter_map(|n| {
                let p = n.proc.as_ref()?;
                let s = process::sample_group(PROC_TAG, p.pid());
                Some(NodeSample {
                    node: n.index,
                    name: n.name.clone(),
                    pid: s.pid,
                    processes: s.processes,
                    cpu_seconds: s.cpu_seconds,
                    rss_bytes: s.rss_bytes,
                    at: s.at,
                })
            })
            .collect()
    }

    /// GET `path` (e.g. `/varz`, `/jsz?streams=true`) from node `i`'s
    /// monitoring port and parse the body as JSON.
    pub fn monitor_json(&self, i: usize, path: &str) -> Result<serde_json::Value, StackError> {
        self.node_index(i)?;
        let n = &self.nodes[i];
        let (status, body) = http_get(n.ports.monitor, path).map_err(|e| {
            StackError::io(
                format!("GET {path} from {}", n.describe()),
                std::io::Error::other(e),
                "is the node running? see its log",
            )
        })?;
        if status != 200 {
            return Err(StackError::io(
                format!("GET {path} from {}", n.describe()),
                std::io::Error::other(format!("HTTP {status}: {}", body.trim())),
                "is the node running? see its log",
            ));
        }
        serde_json::from_str(&body).map_err(|e| {
            StackError::io(
                format!("GET {path} from {}: body is not JSON", n.describe()),
                std::io::Error::other(e),
                "see the node's log",
            )
        })
    }

    /// `/varz` of node `i` (connections, in_msgs, out_msgs, cpu, mem, version, …).
    pub fn varz(&self, i: usize) -> Result<serde_json::Value, StackError> {
        self.monitor_json(i, "/varz")
    }

    /// `/jsz` of node `i` (JetStream usage and meta cluster).
    pub fn jsz(&self, i: usize) -> Result<serde_json::Value, StackError> {
        self.monitor_json(i, "/jsz")
    }

    // ---- failures and recovery ------------------------------------------

    /// Send `signal` (e.g. `libc::SIGKILL`) to node `i` and wait (≤10 s, then
    /// SIGKILL) until it is gone. Its store directory stays.
    pub fn kill_node(&mut self, i: usize, signal: i32) -> Result<(), StackError> {
        self.node_index(i)?;
        let n = &mut self.nodes[i];
        let mut p = n.proc.take().ok_or_else(|| StackError::InvalidOptions {
            problem: format!("{} is not running", n.describe()),
            hint: "start it again with restart_node()".into(),
        })?;
        p.stop(signal, Duration::from_secs(10));
        n.tracker.wanted = false;
        n.tracker.health.running = false;
        n.tracker.pending_exit = p.last_status().map(health::describe_exit);
        Ok(())
    }

    /// Start node `i` again (stopping a running one first with SIGTERM) with
    /// the same config, ports and store directory, and wait until it is ready
    /// (in a cluster: routes up and a meta leader known).
    pub fn restart_node(&mut self, i: usize) -> Result<(), StackError> {
        self.node_index(i)?;
        if let Some(mut p) = self.nodes[i].proc.take() {
            p.stop(libc::SIGTERM, Duration::from_secs(10));
            self.nodes[i].tracker.pending_exit = p.last_status().map(health::describe_exit);
        }
        self.nodes[i].tracker.wanted = true;
        self.start_node_again(i)
    }

    /// Spawn node `i` (whose old process is gone) and wait until it is ready.
    fn start_node_again(&mut self, i: usize) -> Result<(), StackError> {
        self.spawn_node_again(i)?;
        let deadline = Instant::now() + self.opts.ready_timeout;
        self.wait_node_ready(i, deadline)
    }

    /// Start node `i` again once its port is free (a killed server's socket
    /// is closed with it); not waited for.
    fn spawn_node_again(&mut self, i: usize) -> Result<(), StackError> {
        let ports = self.nodes[i].ports;
        let deadline = Instant::now() + Duration::from_secs(5);
        while guard::port_free(ports.client).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.spawn_node(i)
    }

    /// A restart that failed: the node is stopped and tried again in 5 s.
    fn restart_failed(&mut self, i: usize, exit: Option<String>, e: &StackError, events: &mut Vec<String>) {
        let n = &mut self.nodes[i];
        let name = n.tracker.health.service.clone();
        if let Some(mut p) = n.proc.take() {
            p.stop(libc::SIGKILL, Duration::from_secs(2));
        }
        n.tracker.health.running = false;
        n.tracker.retry_after = Some(Instant::now() + Duration::from_secs(5));
        let why = health::one_line(e);
        events.push(match exit {
            Some(desc) => format!("{name}: {desc}; restart failed: {why}"),
            None => format!("{name}: restart failed again: {why}"),
        });
    }

    // ---- supervision ------------------------------------------------------

    /// Send `signal` to node `i`'s process group without telling the
    /// supervisor: the next [`supervise`](Self::supervise) finds the exit as
    /// an unexpected one and starts the node again. Returns once the signal
    /// is sent.
    pub fn kill(&mut self, i: usize, signal: i32) -> Result<(), StackError> {
        self.node_index(i)?;
        let n = &self.nodes[i];
        let pid = n.proc.as_ref().map(|p| p.pid()).ok_or_else(|| StackError::InvalidOptions {
            problem: format!("{} is not running", n.describe()),
            hint: "call supervise() to bring it back, or restart_node()".into(),
        })?;
        process::signal_service(pid, signal).map_err(|e| {
            StackError::io(
                format!("cannot send signal {signal} to {} (pid {pid})", n.describe()),
                e,
                "run the harness as the user that started the cluster",
            )
        })
    }

    /// Look at every node once; for each whose nats-server exited, or whose
    /// pid changed, record the exit, start it again (same config, ports and
    /// store; waits until it is ready, as [`restart_node`](Self::restart_node))
    /// and return one line per event, e.g.
    /// `nats-1: killed by signal 9 (SIGKILL); restarted`. Nothing happened =
    /// one `try_wait` per node. A restart that fails leaves the node marked
    /// not running, is returned as an event and is tried again no sooner than
    /// 5 s later. Blocking (like `restart_node`): from async code, wrap it in
    /// `tokio::task::block_in_place`.
    pub fn supervise(&mut self) -> Vec<String> {
        let mut events = Vec::new();
        let mut down: Vec<(usize, Option<String>)> = Vec::new();
        for i in 0..self.nodes.len() {
            let n = &mut self.nodes[i];
            let name = n.tracker.health.service.clone();
            let state = n.proc.as_mut().map(|p| (p.pid(), p.try_status()));
            let exit = match state {
                Some((pid, Ok(None))) => {
                    let t = &mut n.tracker;
                    if t.last_pid != Some(pid) {
                        let desc = t.pending_exit.take().unwrap_or_else(|| "stopped and replaced".into());
                        let old = t.last_pid;
                        t.record(desc.clone());
                        t.health.restarts += 1;
                        t.started(pid);
                        let was = old.map(|p| format!(" (pid {p} → {pid})")).unwrap_or_default();
                        events.push(format!("{name}: {desc}; restarted{was}"));
                    }
                    continue;
                }
                Some((_, Ok(Some(status)))) => Some(n.tracker.exited(Some(status), "")),
                Some((_, Err(e))) => Some(n.tracker.exited(None, &format!("ended (cannot be waited for: {e})"))),
                None => {
                    if !n.tracker.wanted || n.tracker.retry_after.is_some_and(|at| Instant::now() < at) {
                        continue;
                    }
                    None
                }
            };
            if let Some(mut p) = self.nodes[i].proc.take() {
                p.stop(libc::SIGKILL, Duration::from_secs(2));
            }
            down.push((i, exit));
        }
        // Every node that is down starts before any is waited for: a node
        // of a cluster whose other nodes are down too is ready only once
        // they are back (a whole cluster killed at once comes back together).
        let mut started = Vec::new();
        for (i, exit) in down {
            match self.spawn_node_again(i) {
                Ok(()) => started.push((i, exit)),
                Err(e) => self.restart_failed(i, exit, &e, &mut events),
            }
        }
        let deadline = Instant::now() + self.opts.ready_timeout;
        for (i, exit) in started {
            match self.wait_node_ready(i, deadline) {
                Ok(()) => {
                    let n = &mut self.nodes[i];
                    let name = n.tracker.health.service.clone();
                    let pid = n.proc.as_ref().map(|p| p.pid());
                    if let Some(pid) = pid {
                        n.tracker.started(pid);
                    }
                    n.tracker.health.restarts += 1;
                    let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
                    events.push(match exit {
                        Some(desc) => format!("{name}: {desc}; restarted{pid}"),
                        None => format!("{name}: restarted{pid} after an earlier failed restart"),
                    });
                }
                Err(e) => self.restart_failed(i, exit, &e, &mut events),
            }
        }
        events
    }

    /// Health of every node (`nats-0`, `nats-1`, …), cumulative since start.
    pub fn health(&mut self) -> Vec<ServiceHealth> {
        self.nodes
            .iter_mut()
            .map(|n| {
                let (running, pid) = match n.proc.as_mut() {
                    Some(p) => (matches!(p.try_status(), Ok(None)), Some(p.pid())),
                    None => (false, None),
                };
                n.tracker.snapshot(running, pid)
            })
            .collect()
    }

    /// Stop every node (SIGTERM, a few seconds' grace, then SIGKILL). Blocks
    /// until the processes are gone.
    pub fn stop(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        for n in self.nodes.iter_mut().rev() {
            if let Some(p) = n.proc.as_ref() {
                p.signal_group(libc::SIGTERM);
            }
        }
        for n in self.nodes.iter_mut().rev() {
            if let Some(mut p) = n.proc.take() {
                p.stop(libc::SIGTERM, Duration::from_secs(5));
            }
        }
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// The version line of a nats-server binary (`nats-server: v2.9.10`), or an error.
pub fn server_version(bin: Option<&Path>) -> Result<String, StackError> {
    let bin = find_nats_server(bin)?;
    let out = Command::new(&bin)
        .arg("--version")
        .output()
        .map_err(|e| StackError::io(format!("cannot run {} --version", bin.display()), e, "check the binary"))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `nats-server --version` of `bin`: "v2.9.10".
fn version_of(bin: &Path) -> Option<String> {
    let out = std::process::Command::new(bin).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    version_in(&text)
}

/// `sync_interval` is "always" or a duration, and the server knows it (2.10+).
fn check_sync_interval(sync: &str, bin: &Path, version: Option<&str>) -> Result<(), StackError> {
    check_sync_value(sync)?;
    if knows_sync_interval(version) {
        return Ok(());
    }
    Err(StackError::InvalidOptions {
        problem: format!(
            "nats-server {} at {} does not know sync_interval (JetStream's disk sync setting came in 2.10)",
            version.unwrap_or("of unknown version"),
            bin.display()
        ),
        hint: "put a nats-server 2.10 or later first on PATH (scripts/setup.sh installs one under /var/tmp/scalebench-py/bin), or leave the sync interval at the server's default".into(),
    })
}

/// How a result names JetStream's sync interval when none was set.
pub const DEFAULT_SYNC_INTERVAL: &str = "2m (the server's default)";

/// `sync` reads as JetStream's `sync_interval`: "always" or a duration
/// such as 10s.
pub fn check_sync_value(sync: &str) -> Result<(), StackError> {
    let duration = sync.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    if sync != "always" && (duration.is_empty() || duration.parse::<f64>().is_err() || duration.len() == sync.len()) {
        return Err(StackError::InvalidOptions {
            problem: format!("a JetStream sync interval of `{sync}`"),
            hint: "give always (write every message to disk before acknowledging it) or a duration such as 10s".into(),
        });
    }
    Ok(())
}

/// Does a nats-server of `version` ("v2.15.1", as `--version` prints it)
/// know `sync_interval` (2.10 or later)? An unknown version does not.
pub fn knows_sync_interval(version: Option<&str>) -> bool {
    let minor = |v: &str| -> Option<(u32, u32)> {
        let mut it = v.trim_start_matches('v').split('.');
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    };
    version.and_then(minor).is_some_and(|v| v >= (2, 10))
}

/// The version word of `nats-server --version`'s output ("nats-server:
/// v2.9.10" gives "v2.9.10").
pub fn version_in(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|w| w.starts_with('v') && w[1..].starts_with(|c: char| c.is_ascii_digit()))
        .map(String::from)
}

/// Locate nats-server: `given`, else PATH, then /usr/sbin/nats-server.
pub fn find_nats_server(given: Option<&Path>) -> Result<PathBuf, StackError> {
    let candidates: Vec<PathBuf> = match given {
        Some(p) => vec![p.to_path_buf()],
        None => std::env::var_os("PATH")
            .map(|paths| std::env::split_paths(&paths).map(|d| d.join("nats-server")).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .chain([PathBuf::from("/usr/sbin/nats-server"), PathBuf::from("/usr/bin/nats-server")])
            .collect(),
    };
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| StackError::NotFound {
        what: "nats-server".into(),
        looked: if given.is_some() {
            candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        } else {
            "PATH, /usr/sbin/nats-server, /usr/bin/nats-server".into()
        },
        hint: "install it: apt-get install nats-server".into(),
    })
}

/// Every port through the guard (live defaults, 2xxxx, free), and no port twice.
fn check_ports(ports: &[NodePorts]) -> Result<(), StackError> {
    let mut seen: Vec<(u16, String)> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        for (kind, port) in [("client", p.client), ("cluster", p.cluster), ("monitor", p.monitor)] {
            let what = format!("nats-server node {i} {kind} port");
            if let Some((_, other)) = seen.iter().find(|(q, _)| *q == port) {
                return Err(StackError::InvalidOptions {
                    problem: format!("{what} {port} is also {other}"),
                    hint: "give every node and listener its own 2xxxx port (or none, to pick free ones)".into(),
                });
            }
            seen.push((port, what.clone()));
            guard::check_port(PROC_TAG, port).map_err(|e| match e {
                StackError::LiveDefaultPort { port, .. } => StackError::InvalidOptions {
                    problem: format!("{what} {port} is a live default port (live systems use it); the local stack never binds it"),
                    hint: "leave the ports empty to pick free 2xxxx ports, or give free ports in 20000-29999".into(),
                },
                StackError::PortOutOfRange { port, .. } => StackError::InvalidOptions {
                    problem: format!("{what} {port} is outside 20000-29999, the range kept for scalebench's own stacks"),
                    hint: "leave the ports empty to pick free 2xxxx ports, or give free ports in 20000-29999".into(),
                },
                StackError::PortTaken { port, detail, .. } => StackError::InvalidOptions {
                    problem: format!("{what} 127.0.0.1:{port} is already in use ({detail})"),
                    hint: format!("stop whatever holds it (see `ss -ltnp | grep :{port}`), or leave the ports empty to pick free ones"),
                },
                other => other,
            })?;
        }
    }
    Ok(())
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

fn node_config(opts: &NatsOptions, n: &Node, routes: &[u16]) -> String {
    let mut c = format!(
        "# written by local-stack; every start rewrites it\n\
         server_name: {name}\n\
         listen: \"{HOST}:{client}\"\n\
         http: \"{HOST}:{monitor}\"\n\
         jetstream {{\n  store_dir: {store}\n  max_memory_store: {mem}\n  max_file_store: {file}\n{sync}}}\n",
        name = quote(&n.name),
        client = n.ports.client,
        monitor = n.ports.monitor,
        store = quote(&n.dir.join("js").display().to_string()),
        mem = opts.max_memory_store,
        file = opts.max_file_store,
        sync = match opts.sync_interval.as_deref() {
            None => String::new(),
            Some("always") => "  sync_interval: always\n".into(),
            Some(d) => format!("  sync_interval: {}\n", quote(d)),
        },
    );
    if routes.len() > 1 {
        let list = routes.iter().map(|p| format!("\"nats://{HOST}:{p}\"")).collect::<Vec<_>>().join(", ");
        c.push_str(&format!(
            "cluster {{\n  name: {name}\n  listen: \"{HOST}:{port}\"\n  routes: [{list}]\n}}\n",
            name = quote(&opts.cluster_name),
            port = n.ports.cluster,
        ));
    }
    if let Some(t) = &opts.tls {
        c.push_str(&format!(
            "tls {{\n  cert_file: {}\n  key_file: {}\n}}\n",
            quote(&t.cert.display().to_string()),
            quote(&t.key.display().to_string())
        ));
    }
    if !opts.extra_config.is_empty() {
        c.push_str(&opts.extra_config);
        c.push('\n');
    }
    c
}

/// One readiness check of a node through its monitoring port. `peers` are
/// every node's (server_name, monitor port): a node restarted into a running
/// cluster may go on counting fewer meta peers than the cluster has (seen in
/// CI: 2 of 3 for 30 s after a second SIGKILL of one node), so then the
/// count is the meta leader's, when the leader holds this node as current.
fn node_ready(
    monitor: u16,
    clustered: bool,
    want_routes: usize,
    name: &str,
    peers: &[(String, u16)],
) -> Result<(), String> {
    let (status, body) = http_get(monitor, "/healthz")?;
    if status != 200 {
        return Err(format!("/healthz answered {status}: {}", body.trim()));
    }
    if clustered {
        let (_, body) = http_get(monitor, "/jsz")?;
        let jsz: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("/jsz is not JSON: {e}"))?;
        let leader = jsz.pointer("/meta_cluster/leader").and_then(|v| v.as_str()).unwrap_or("");
        if leader.is_empty() {
            return Err("/jsz names no JetStream meta leader yet".into());
        }
        // Right after a leader is known a node may still count fewer peers.
        if let Some(size) = jsz.pointer("/meta_cluster/cluster_size").and_then(|v| v.as_u64()) {
            if (size as usize) < want_routes + 1 && !leader_holds_current(leader, name, want_routes + 1, peers) {
                return Err(format!(
                    "/jsz counts a meta cluster of {size}, want {}, and the meta leader {leader} does not count \
                     {name} as a current member of {} yet",
                    want_routes + 1,
                    want_routes + 1
                ));
            }
        }
        let (_, body) = http_get(monitor, "/varz")?;
        let varz: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("/varz is not JSON: {e}"))?;
        let routes = varz.get("routes").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
        if routes < want_routes {
            return Err(format!("/varz counts {routes} routes, want {want_routes}"));
        }
    }
    Ok(())
}

/// Whether the meta leader `leader` (another node) counts a meta cluster of
/// at least `want` and lists `name` among its replicas as current.
fn leader_holds_current(leader: &str, name: &str, want: usize, peers: &[(String, u16)]) -> bool {
    let Some((_, port)) = peers.iter().find(|(n, _)| n == leader && n != name) else {
        return false;
    };
    let Ok((200, body)) = http_get(*port, "/jsz") else {
        return false;
    };
    let Ok(jsz) = serde_json::from_str::<serde_json::Value>(&body) else {
        return false;
    };
    let size = jsz.pointer("/meta_cluster/cluster_size").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
    let current = jsz.pointer("/meta_cluster/replicas").and_then(|v| v.as_array()).is_some_and(|r| {
        r.iter().any(|p| {
            p.get("name").and_then(|v| v.as_str()) == Some(name)
                && p.get("current").and_then(|v| v.as_bool()) == Some(true)
        })
    });
    size >= want && current
}

/// A plain HTTP/1.0 GET to 127.0.0.1:`port` (bounded: 1 s to connect, 3 s to
/// answer). Returns (status, body).
fn http_get(port: u16, path: &str) -> Result<(u16, String), String> {
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    let mut s = TcpStream::connect_timeout(&addr.into(), Duration::from_secs(1))
        .map_err(|e| format!("connect {HOST}:{port}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(3))).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(Duration::from_secs(3))).map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {HOST}:{port}\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("send request: {e}"))?;
    let mut buf = Vec::new();
    s.take(16 << 20).read_to_end(&mut buf).map_err(|e| format!("read answer from {HOST}:{port}: {e}"))?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("no HTTP answer from {HOST}:{port}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("bad status line from {HOST}:{port}: {:?}", head.lines().next().unwrap_or("")))?;
    Ok((status, body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_has_cluster_block_only_for_clusters() {
        let opts = NatsOptions::new("/tmp/x", 3);
        let n = Node {
            index: 1,
            name: "n1".into(),
            ports: NodePorts { client: 21001, cluster: 21002, monitor: 21003 },
            dir: PathBuf::from("/tmp/x/nats/n1"),
            conf: PathBuf::from("/tmp/x/nats/n1/nats.conf"),
            log: PathBuf::from("/tmp/x/nats/logs/n1.log"),
            proc: None,
            tracker: Tracker::new("nats-1"),
        };
        let c = node_config(&opts, &n, &[21002, 22002, 23002]);
        assert!(c.contains("listen: \"127.0.0.1:21001\""), "{c}");
        assert!(c.contains("http: \"127.0.0.1:21003\""), "{c}");
        assert!(c.contains("store_dir: \"/tmp/x/nats/n1/js\""), "{c}");
        assert!(
            c.contains("routes: [\"nats://127.0.0.1:21002\", \"nats://127.0.0.1:22002\", \"nats://127.0.0.1:23002\"]"),
            "{c}"
        );
        let single = node_config(&opts, &n, &[21002]);
        assert!(!single.contains("cluster"), "{single}");
        assert!(!single.contains("sync_interval"), "{single}");
        let always = NatsOptions { sync_interval: Some("always".into()), ..NatsOptions::new("/tmp/x", 1) };
        assert!(node_config(&always, &n, &[21002]).contains("  sync_interval: always\n}"), "{single}");
        let ten = NatsOptions { sync_interval: Some("10s".into()), ..NatsOptions::new("/tmp/x", 1) };
        assert!(node_config(&ten, &n, &[21002]).contains("  sync_interval: \"10s\"\n}"), "{single}");
    }

    #[test]
    fn a_sync_interval_the_server_cannot_take_is_refused_in_words() {
        let bin = Path::new("/usr/sbin/nats-server");
        let e = check_sync_interval("always", bin, Some("v2.9.10")).unwrap_err().to_string();
        assert!(e.contains("nats-server v2.9.10 at /usr/sbin/nats-server does not know sync_interval"), "{e}");
        assert!(check_sync_interval("always", bin, Some("v2.15.1")).is_ok());
        assert!(check_sync_interval("10s", bin, Some("v2.10.0")).is_ok());
        let e = check_sync_interval("often", bin, Some("v2.15.1")).unwrap_err().to_string();
        assert!(e.contains("`often`") && e.contains("always"), "{e}");
    }

    #[test]
    fn refuses_live_default_ports() {
        let free = guard::pick_free_ports(2).unwrap();
        for ports in [
            NodePorts { client: 4222, cluster: free[0], monitor: free[1] },
            NodePorts { client: free[0], cluster: 6222, monitor: free[1] },
            NodePorts { client: free[0], cluster: free[1], monitor: 8222 },
        ] {
            let e = check_ports(&[ports]).unwrap_err().to_string();
            assert!(e.contains("live default") && e.contains("nats-server node 0") && e.contains("hint:"), "{e}");
            assert!(!e.contains("mosquitto"), "{e}");
        }
        let e =
            check_ports(&[NodePorts { client: free[0], cluster: free[0], monitor: free[1] }]).unwrap_err().to_string();
        assert!(e.contains("also"), "{e}");
    }

    #[test]
    fn validates_node_count() {
        assert!(NatsOptions::new("/tmp/x", 0).validate().is_err());
        assert!(NatsOptions::new("/tmp/x", 8).validate().is_err());
        assert!(NatsOptions::new("/tmp/x", 3).validate().is_ok());
    }
}
