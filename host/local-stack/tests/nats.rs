//! nats-server under local-stack: a single JetStream node and a 3-node
//! cluster on free 2xxxx loopback ports start, serve, and stop leaving no
//! process behind; the guard refuses live default ports. One cluster at a
//! time (the machine has few cores).
//!
//! Run: `cargo test --release -p local-stack --test nats`

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use local_stack::nats::{NatsCluster, NatsOptions, NodePorts};
use local_stack::{guard, pid_alive};

static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

struct TempRun(PathBuf);

impl TempRun {
    fn new(name: &str) -> Self {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let p = std::env::temp_dir().join(format!("local-stack-nats-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempRun(p)
    }
}

impl Drop for TempRun {
    fn drop(&mut self) {
        if std::env::var_os("KEEP_RUN_DIR").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Connect to a client URL and read the server's INFO line.
fn info_line(url: &str) -> String {
    let addr = url.trim_start_matches("nats://");
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).expect("INFO line");
    line
}

fn wait_gone(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|&p| pid_alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&p| pid_alive(p)).collect();
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

fn port_closed(port: u16) -> bool {
    guard::port_free(port).is_ok()
}

#[test]
fn single_node_starts_serves_and_stops() {
    let _l = one_at_a_time();
    let run = TempRun::new("single");
    let cluster = NatsCluster::start(NatsOptions::new(&run.0, 1)).unwrap_or_else(|e| panic!("start:\n{e}"));
    let urls = cluster.client_urls();
    assert_eq!(urls.len(), 1);
    let info = info_line(&urls[0]);
    assert!(info.starts_with("INFO ") && info.contains("\"jetstream\":true"), "{info}");
    let varz = cluster.varz(0).expect("varz");
    assert!(varz["version"].as_str().is_some_and(|v| !v.is_empty()), "{varz}");
    let jsz = cluster.jsz(0).expect("jsz");
    assert!(jsz["config"]["store_dir"].as_str().is_some_and(|d| d.starts_with(run.0.to_str().unwrap())), "{jsz}");
    for p in cluster.ports() {
        for port in [p.client, p.cluster, p.monitor] {
            assert!((20000..=29999).contains(&port), "{port}");
        }
    }
    let samples = cluster.sample_processes();
    assert_eq!(samples.len(), 1);
    assert!(samples[0].rss_bytes > 0 && samples[0].processes >= 1, "{samples:?}");
    let pids = cluster.all_pids();
    assert!(!pids.is_empty());
    let ports = cluster.ports();
    cluster.stop();
    wait_gone(&pids);
    assert!(port_closed(ports[0].client) && port_closed(ports[0].monitor));
}

#[test]
fn three_node_cluster_has_meta_leader_survives_a_kill_and_stops() {
    let _l = one_at_a_time();
    let run = TempRun::new("cluster");
    let mut cluster = NatsCluster::start(NatsOptions::new(&run.0, 3)).unwrap_or_else(|e| panic!("start:\n{e}"));
    assert_eq!(cluster.client_urls().len(), 3);
    assert_eq!(cluster.monitor_urls().len(), 3);
    for i in 0..3 {
        let jsz = cluster.jsz(i).expect("jsz");
        assert!(jsz["meta_cluster"]["leader"].as_str().is_some_and(|l| !l.is_empty()), "node {i}: {jsz}");
        assert_eq!(jsz["meta_cluster"]["cluster_size"].as_u64(), Some(3), "node {i}: {jsz}");
        let varz = cluster.varz(i).expect("varz");
        assert!(varz["routes"].as_u64().unwrap_or(0) >= 2, "node {i}: {varz}");
        let info = info_line(&cluster.client_urls()[i]);
        assert!(info.contains("\"jetstream\":true"), "{info}");
    }
    let all_before = cluster.all_pids();
    assert_eq!(cluster.pids().len(), 3);

    // Crash node 1, bring it back: same ports, cluster whole again.
    let (_, pid1) = cluster.pids()[1];
    cluster.kill_node(1, libc::SIGKILL).expect("kill");
    wait_gone(&[pid1]);
    assert!(!cluster.is_running(1));
    assert_eq!(cluster.pids().len(), 2);
    assert!(cluster.kill_node(1, libc::SIGKILL).unwrap_err().to_string().contains("hint:"));
    cluster.restart_node(1).unwrap_or_else(|e| panic!("restart:\n{e}"));
    assert!(cluster.is_running(1));
    assert!(cluster.varz(1).expect("varz")["routes"].as_u64().unwrap_or(0) >= 2);
    assert!(cluster.kill_node(7, libc::SIGKILL).is_err());

    let all = cluster.all_pids();
    cluster.stop();
    wait_gone(&all);
    wait_gone(&all_before);
}

#[test]
fn drop_stops_every_node() {
    let _l = one_at_a_time();
    let run = TempRun::new("drop");
    let pids = {
        let cluster = NatsCluster::start(NatsOptions::new(&run.0, 3)).unwrap_or_else(|e| panic!("start:\n{e}"));
        cluster.all_pids()
    };
    assert_eq!(pids.len(), 3);
    wait_gone(&pids);
}

#[test]
fn guard_refuses_live_default_port_4222() {
    let _l = one_at_a_time();
    let run = TempRun::new("guard");
    let free = guard::pick_free_ports(2).unwrap();
    let mut opts = NatsOptions::new(&run.0, 1);
    opts.ports = vec![NodePorts { client: 4222, cluster: free[0], monitor: free[1] }];
    let e = NatsCluster::start(opts).err().expect("4222 must be refused").to_string();
    assert!(e.contains("4222") && e.contains("live default") && e.contains("hint:"), "{e}");
    // Nothing was started, nothing was written.
    assert!(!run.0.join("nats").exists());

    let mut opts = NatsOptions::new(&run.0, 1);
    opts.ports = vec![NodePorts { client: free[0], cluster: free[1], monitor: 31000 }];
    let e = NatsCluster::start(opts).err().expect("31000 must be refused").to_string();
    assert!(e.contains("31000") && e.contains("20000-29999") && e.contains("hint:"), "{e}");
}

#[test]
fn readiness_failure_names_the_node_and_ends_with_a_hint() {
    let _l = one_at_a_time();
    let run = TempRun::new("bad");
    let mut opts = NatsOptions::new(&run.0, 1);
    // An invalid config line: nats-server refuses to start.
    opts.extra_config = "this is { not valid".into();
    opts.ready_timeout = Duration::from_secs(10);
    let e = NatsCluster::start(opts).err().expect("bad config must fail").to_string();
    eprintln!("{e}");
    assert!(e.contains("nats-server node 0") && e.contains("hint:"), "{e}");
    assert!(e.contains("last lines of"), "{e}");
}

// Supervision: a node killed through kill() or from outside is found by the
// next supervise() from its exit status and restarted; a clean cluster
// reports nothing.
#[test]
fn supervise_detects_and_restarts_a_killed_node() {
    let _l = one_at_a_time();
    let run = TempRun::new("supervise");
    let mut cluster = NatsCluster::start(NatsOptions::new(&run.0, 3)).unwrap_or_else(|e| panic!("start:\n{e}"));
    for _ in 0..20 {
        assert!(cluster.supervise().is_empty());
    }
    let h = cluster.health();
    assert_eq!(h.iter().map(|h| h.service.as_str()).collect::<Vec<_>>(), ["nats-0", "nats-1", "nats-2"]);
    assert!(h.iter().all(|h| h.running && h.restarts == 0 && h.exits.is_empty()), "{h:?}");

    let supervise_until_event = |c: &mut NatsCluster| {
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            let ev = c.supervise();
            if !ev.is_empty() || Instant::now() > deadline {
                return ev;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };

    let old = cluster.pids()[1].1;
    cluster.kill(1, libc::SIGKILL).expect("kill");
    let ev = supervise_until_event(&mut cluster);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(ev[0].starts_with("nats-1: killed by signal 9 (SIGKILL); restarted"), "{ev:?}");
    let new = cluster.pids()[1].1;
    assert!(new != old && pid_alive(new) && !pid_alive(old));
    assert!(info_line(&cluster.client_urls()[1]).starts_with("INFO "));

    // From outside, with a plain kill(2) on the pid.
    // SAFETY: plain syscall on our own child's pid.
    assert_eq!(unsafe { libc::kill(new as libc::pid_t, libc::SIGKILL) }, 0);
    let ev = supervise_until_event(&mut cluster);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(ev[0].starts_with("nats-1: killed by signal 9 (SIGKILL); restarted"), "{ev:?}");

    let h = cluster.health();
    assert_eq!(h[1].restarts, 2, "{h:?}");
    assert_eq!(h[1].exits, vec!["killed by signal 9 (SIGKILL)".to_string(); 2]);
    assert!(h[1].running && h[1].pid.is_some_and(pid_alive), "{h:?}");
    assert!(h[0].restarts == 0 && h[2].restarts == 0, "{h:?}");
    let all = cluster.all_pids();
    cluster.stop();
    wait_gone(&all);
}
