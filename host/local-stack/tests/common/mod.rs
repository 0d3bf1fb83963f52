//! Helpers shared by the integration tests that run a real stack: a run
//! directory under the temp dir, the historian binary, one stack at a time,
//! a QoS 1 publisher that records which readings the broker acknowledged.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use local_stack::{LocalStack, StackOptions};
use rumqttc::{AsyncClient, Event, MqttOptions, Outgoing, Packet, QoS};

static STACK_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Stacks run one at a time within a test binary: the machine has few cores.
pub async fn one_stack_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    STACK_LOCK.lock().await
}

/// Build the historian (same profile, same target dir as this test binary)
/// and return its path.
pub fn historian_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("current exe");
        let profile_dir = exe.parent().and_then(Path::parent).expect("profile dir").to_path_buf();
        let target_dir = profile_dir.parent().expect("target dir").to_path_buf();
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(&workspace).env("CARGO_TARGET_DIR", &target_dir).args(["build", "-p", "reference-historian"]);
        // What cargo set for this test process describes this package, not
        // the build: ring's build script reruns when CARGO_MANIFEST_DIR
        // changes, so inheriting it rebuilt ring and everything above it
        // (about 40 s idle, over 100 s in the suite, every test process)
        // instead of finding the historian `make test` built.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            let of_this_package = ["CARGO_MANIFEST_", "CARGO_PKG_", "CARGO_CRATE_", "CARGO_BIN_", "CARGO_PRIMARY_"]
                .iter()
                .any(|p| key.starts_with(p))
                || key == "CARGO_TARGET_TMPDIR"
                || key == "OUT_DIR";
            if of_this_package {
                cmd.env_remove(key.as_ref());
            }
        }
        if release {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build -p reference-historian");
        assert!(status.success(), "cargo build -p reference-historian failed");
        let bin = profile_dir.join("reference-historian");
        assert!(bin.is_file(), "no historian binary at {}", bin.display());
        bin
    })
    .clone()
}

/// A run directory under the temp dir (reachable by the postgres user), removed on drop.
pub struct TempRun(pub PathBuf);

impl TempRun {
    pub fn new(name: &str) -> Self {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let p = std::env::temp_dir().join(format!("local-stack-test-{name}-{}-{nanos}", std::process::id()));
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

pub async fn start(run: &TempRun, tweak: impl FnOnce(&mut StackOptions)) -> LocalStack {
    let mut opts = StackOptions::for_tests(&run.0).expect("free ports");
    opts.historian.bin = Some(historian_bin());
    tweak(&mut opts);
    match LocalStack::start(opts).await {
        Ok(s) => s,
        Err(e) => panic!("stack did not start:\n{e}"),
    }
}

pub async fn pg(stack: &LocalStack) -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(&stack.postgres_conn(), tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(conn);
    c
}

/// Call `supervise()` (every 200 ms, as the harness does) until it reports
/// something or `within` passes; returns the events.
pub async fn supervise_until_event(stack: &mut LocalStack, within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    loop {
        let ev = stack.supervise().await;
        if !ev.is_empty() || Instant::now() > deadline {
            return ev;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Publish `n` readings (ids 0..n) at about `rate`/s with QoS 1 to
/// `fbf/scale/…`; point `{prefix}/p{id % 100}`, value = id, ts = base + id ms
/// (so every id has its own (point, ts)). Returns the ids the broker acked.
pub async fn publish_readings(host: &str, port: u16, prefix: &str, n: u64, rate: u64) -> HashSet<u64> {
    let mut o = MqttOptions::new(format!("test-pub-{prefix}-{}", std::process::id()), host, port);
    o.set_clean_session(true).set_keep_alive(Duration::from_secs(10)).set_inflight(500);
    let (client, mut eventloop) = AsyncClient::new(o, 1000);
    let base: i64 = 1_796_047_200_000;
    let prefix_owned = prefix.to_string();
    let publisher = tokio::spawn(async move {
        let per_tick = (rate / 100).max(1);
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        let mut id = 0u64;
        while id < n {
            tick.tick().await;
            for _ in 0..per_tick {
                if id >= n {
                    break;
                }
                let payload = serde_json::json!({
                    "point": format!("{prefix_owned}/p{}", id % 100),
                    "value": id as f64,
                    "ts": base + id as i64,
                })
                .to_string();
                let topic = format!("fbf/scale/s1/e{}/p{}", id % 7, id % 100);
                client.publish(topic, QoS::AtLeastOnce, false, payload).await.expect("publish");
                id += 1;
            }
        }
        client
    });
    // Publish requests are handled in order: the k-th Outgoing::Publish is id k.
    let mut next_id = 0u64;
    let mut by_pkid: HashMap<u16, u64> = HashMap::new();
    let mut acked = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(n / rate.max(1) + 60);
    while (acked.len() as u64) < n && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(1), eventloop.poll()).await {
            Ok(Ok(Event::Outgoing(Outgoing::Publish(pkid)))) => {
                by_pkid.insert(pkid, next_id);
                next_id += 1;
            }
            Ok(Ok(Event::Incoming(Packet::PubAck(a)))) => {
                if let Some(id) = by_pkid.remove(&a.pkid) {
                    acked.insert(id);
                }
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("publisher connection failed: {e}"),
            Err(_) => {}
        }
    }
    let client = publisher.await.expect("publisher task");
    let _ = client.disconnect().await;
    let _ = tokio::time::timeout(Duration::from_millis(200), eventloop.poll()).await;
    acked
}

pub async fn stored_ids(pg: &tokio_postgres::Client, prefix: &str) -> Vec<u64> {
    pg.query("SELECT value FROM point_history WHERE point LIKE $1", &[&format!("{prefix}/%")])
        .await
        .expect("query")
        .iter()
        .map(|r| r.get::<_, f64>(0) as u64)
        .collect()
}

/// Wait (bounded) until every id of `acked` is stored, or until the stored
/// count has not changed for `quiet`; returns the stored ids.
pub async fn drain(
    pg: &tokio_postgres::Client,
    prefix: &str,
    acked: &HashSet<u64>,
    quiet: Duration,
    max: Duration,
) -> Vec<u64> {
    let deadline = Instant::now() + max;
    let mut ids = stored_ids(pg, prefix).await;
    let mut last_change = Instant::now();
    let mut last_len = ids.len();
    while Instant::now() < deadline {
        let set: HashSet<u64> = ids.iter().copied().collect();
        if acked.iter().all(|id| set.contains(id)) || last_change.elapsed() > quiet {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        ids = stored_ids(pg, prefix).await;
        if ids.len() != last_len {
            last_len = ids.len();
            last_change = Instant::now();
        }
    }
    ids
}

/// Pids of every live process in `dir` (PostgreSQL's postmaster and backends).
pub fn pids_in_dir(dir: &Path) -> Vec<u32> {
    let want = std::fs::canonicalize(dir).unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| std::fs::read_link(format!("/proc/{p}/cwd")).is_ok_and(|c| c == want))
        .filter(|p| local_stack::pid_alive(*p))
        .collect()
}
