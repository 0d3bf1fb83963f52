//! Tests against the real processes: mosquitto, PostgreSQL and the reference
//! historian on free 2xxxx ports under a temporary directory. Stacks run one
//! at a time (a process-wide lock): the machine has few cores.
//!
//! Run: `CARGO_TARGET_DIR=/var/tmp/scalebench-target cargo test --release -p local-stack`

use std::collections::HashSet;
use std::time::{Duration, Instant};

use local_stack::{pid_alive, LocalStack, Service, StackError, StackOptions};

mod common;
use common::*;

// (a) starts, passes the one-reading check, stop() leaves no process behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_checks_and_stops_cleanly() {
    let _one = one_stack_at_a_time().await;
    let run = TempRun::new("a");
    let stack = start(&run, |_| {}).await;

    let pids = stack.pids();
    assert_eq!(pids.len(), 3, "{pids:?}");
    for (service, p) in &pids {
        assert!(pid_alive(*p), "{service} (pid {p}) should be alive");
    }
    // The check row was deleted; the schema is there.
    let c = pg(&stack).await;
    let n: i64 = c.query_one("SELECT count(*) FROM point_history", &[]).await.unwrap().get(0);
    assert_eq!(n, 0, "the readiness check row must be deleted");
    let fsync: String = c.query_one("SHOW fsync", &[]).await.unwrap().get(0);
    let sync: String = c.query_one("SHOW synchronous_commit", &[]).await.unwrap().get(0);
    assert_eq!((fsync.as_str(), sync.as_str()), ("on", "on"));
    drop(c);
    let mut stats = stack.historian_stats().expect("stats");
    for _ in 0..30 {
        if stats.stored >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await; // rewritten every second
        stats = stack.historian_stats().expect("stats");
    }
    assert!(stats.stored >= 1, "the check reading went through the historian: {stats:?}");

    let s1 = stack.sample_processes();
    assert_eq!(s1.len(), 3);
    for s in &s1 {
        assert!(s.rss_bytes > 0 && s.processes >= 1 && s.cpu_seconds >= 0.0, "{s:?}");
    }
    let pg_sample = s1.iter().find(|s| s.service == Service::Postgres).unwrap();
    assert!(pg_sample.processes > 1, "postgres group includes its backends: {pg_sample:?}");

    let all = stack.all_pids();
    assert!(all.len() >= 4, "postgres has backends too: {all:?}");
    stack.stop();
    for p in &all {
        assert!(!pid_alive(*p), "pid {p} still alive after stop()");
    }
}

// (b) SIGKILL the historian while readings flow, restart it: every reading
// the broker acknowledged ends up in point_history exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acked_readings_survive_historian_sigkill() {
    let _one = one_stack_at_a_time().await;
    let run = TempRun::new("b");
    let mut stack = start(&run, |_| {}).await;
    let c = pg(&stack).await;
    let (host, port) = (stack.mqtt_host().to_string(), stack.mqtt_port());

    const N: u64 = 30_000;
    let publisher = tokio::spawn(async move { publish_readings(&host, port, "crash", N, 5_000).await });
    tokio::time::sleep(Duration::from_secs(2)).await;
    let stored_before_kill = stored_ids(&c, "crash").await.len();
    stack.kill_historian(libc::SIGKILL).expect("kill");
    tokio::time::sleep(Duration::from_secs(2)).await;
    stack.restart_historian().await.expect("restart");
    let acked = publisher.await.expect("publisher");
    assert!(
        stored_before_kill > 0 && (stored_before_kill as u64) < N,
        "kill must land mid-flow ({stored_before_kill})"
    );
    assert_eq!(acked.len() as u64, N, "the broker should ack every publish");

    // Wait (bounded) until every acked reading is stored.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut ids = stored_ids(&c, "crash").await;
    while Instant::now() < deadline {
        let set: HashSet<u64> = ids.iter().copied().collect();
        if acked.iter().all(|id| set.contains(id)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        ids = stored_ids(&c, "crash").await;
    }
    let set: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(set.len(), ids.len(), "a reading is stored more than once");
    let missing: Vec<u64> = acked.iter().filter(|id| !set.contains(id)).copied().take(10).collect();
    assert!(
        missing.is_empty(),
        "acked but not stored (first 10): {missing:?}; stored {} of {}",
        set.len(),
        acked.len()
    );
    assert!(set.iter().all(|id| *id < N));
    let stats = stack.historian_stats().unwrap();
    eprintln!("crash test: stored before kill {stored_before_kill}, after restart {stats:?}");
    stack.stop();
}

// (c) --drop-one-in 50: stored = acked - dropped, exactly, matching the stats file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_one_in_is_exact() {
    let _one = one_stack_at_a_time().await;
    let run = TempRun::new("c");
    let stack = start(&run, |o| o.historian.drop_one_in = Some(50)).await;
    let c = pg(&stack).await;
    let before = stack.historian_stats().unwrap();

    const N: u64 = 5_000;
    let acked = publish_readings(stack.mqtt_host(), stack.mqtt_port(), "drop", N, 5_000).await;
    assert_eq!(acked.len() as u64, N);

    // Wait (bounded) until the historian handled all of them.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut stats = stack.historian_stats().unwrap();
    while Instant::now() < deadline {
        let done = stats.stored + stats.dropped + stats.duplicates >= before.received + N
            && stats.received >= before.received + N;
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        stats = stack.historian_stats().unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1100)).await; // one more stats write
    stats = stack.historian_stats().unwrap();

    let rows = stored_ids(&c, "drop").await.len() as u64;
    let dropped = stats.dropped - before.dropped;
    eprintln!("drop test: acked {} rows {rows} dropped {dropped} stats {stats:?} (before {before:?})", acked.len());
    assert_eq!(stats.received - before.received, N, "{stats:?}");
    assert!((N / 50 - 1..=N / 50 + 1).contains(&dropped), "dropped {dropped}");
    assert_eq!(rows, acked.len() as u64 - dropped, "stored = acked - dropped");
    assert_eq!(stats.stored - before.stored, rows, "stats file agrees with point_history");
    assert_eq!(stats.malformed, 0);
    stack.stop();
}

// (d) a live default port, or a taken one, is refused with a clear message.
#[tokio::test]
async fn live_default_or_taken_port_is_refused() {
    let run = TempRun::new("d");
    let mut opts = StackOptions::new(&run.0);
    opts.mqtt_port = 1883;
    let err = LocalStack::start(opts).await.err().expect("must refuse 1883");
    let msg = err.to_string();
    assert!(matches!(err, StackError::LiveDefaultPort { port: 1883, .. }), "{msg}");
    assert!(msg.contains("1883") && msg.contains("live default") && msg.contains("hint: pass --base-port"), "{msg}");

    let mut opts = StackOptions::for_tests(&run.0).unwrap();
    opts.pg_port = 5432;
    let err = LocalStack::start(opts).await.err().expect("must refuse 5432");
    assert!(matches!(err, StackError::LiveDefaultPort { service: Service::Postgres, port: 5432 }), "{err}");

    let opts = StackOptions::for_tests(&run.0).unwrap();
    let _holder = std::net::TcpListener::bind(("127.0.0.1", opts.mqtt_port)).unwrap();
    let port = opts.mqtt_port;
    let err = LocalStack::start(opts).await.err().expect("must refuse a taken port");
    let msg = err.to_string();
    assert!(matches!(err, StackError::PortTaken { .. }), "{msg}");
    assert!(msg.contains(&port.to_string()) && msg.contains("already in use") && msg.contains("hint:"), "{msg}");
    // Nothing was started: the run dir holds no service files.
    assert!(!run.0.join("pg").exists() && !run.0.join("logs").exists());
}
