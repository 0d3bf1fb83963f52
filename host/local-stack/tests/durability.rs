//! The reference historian's ingest path under crashes, against the real
//! stack: readings are published at QoS 1 (every one PUBACKed by the broker),
//! then the historian or PostgreSQL is SIGKILLed mid-stream through
//! `LocalStack::kill`, and `supervise()` finds the exit and restarts it.
//!
//! - Safe mode (the default: PUBACK to the broker only after commit): after
//!   restart and drain, every acknowledged reading is in point_history.
//! - Control mode (`--ack-before-commit`): the historian acknowledges on
//!   arrival, so the broker forgets messages that were never committed; the
//!   same crash loses acknowledged readings, and the count shows it.
//!
//! And `ingest_session` records what the historian's own ingest connection
//! does for durability (`--session-setting synchronous_commit=off` shows as
//! off while the server says on).
//!
//! Run: `cargo test --release -p local-stack --test durability`

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{drain, one_stack_at_a_time, pg, publish_readings, start, supervise_until_event, TempRun};
use local_stack::{Service, StackOptions};

const N: u64 = 20_000;
const RATE: u64 = 5_000;

#[derive(Debug)]
#[allow(dead_code)] // printed
struct CrashResult {
    acked: usize,
    stored_before_kill: u64,
    stored: usize,
    lost: usize,
    events: Vec<String>,
}

/// Start a stack, publish N readings at RATE/s, SIGKILL `victim` after
/// 1.5 s, leave it down for `down`, let supervision restart it, drain, and
/// count acknowledged readings that are not stored.
async fn crash(name: &str, victim: Service, down: Duration, tweak: impl FnOnce(&mut StackOptions)) -> CrashResult {
    let t0 = Instant::now();
    let run = TempRun::new(name);
    let mut stack = start(&run, tweak).await;
    let (host, port) = (stack.mqtt_host().to_string(), stack.mqtt_port());
    let prefix = name.to_string();
    let publisher = tokio::spawn(async move { publish_readings(&host, port, &prefix, N, RATE).await });

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stored_before_kill = {
        let c = pg(&stack).await;
        common::stored_ids(&c, name).await.len() as u64
    };
    assert!(stored_before_kill < N, "the kill must land mid-stream");
    let old_pid = stack.pid(victim).unwrap();
    stack.kill(victim, libc::SIGKILL).expect("kill");
    tokio::time::sleep(down).await;
    let events = supervise_until_event(&mut stack, Duration::from_secs(15)).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].starts_with(&format!("{victim}: killed by signal 9 (SIGKILL); restarted")), "{events:?}");
    assert_ne!(stack.pid(victim), Some(old_pid));

    // Connect after the restart: a connection from before a PostgreSQL kill is gone.
    let c = pg(&stack).await;
    let acked = publisher.await.expect("publisher");
    assert_eq!(acked.len() as u64, N, "the broker acks every publish");
    // Drain: until everything acked is stored, or nothing changed for longer
    // than a batch wait and a reconnect back-off.
    let ids = drain(&c, name, &acked, Duration::from_secs(7), Duration::from_secs(30)).await;
    let set: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(set.len(), ids.len(), "a reading is stored more than once");
    assert!(stack.supervise().await.is_empty(), "nothing else happened");
    // In either mode the ingest path works again after the crash.
    stack.reading_check().await.expect("a reading is stored after the restart");
    let h = stack.health().into_iter().find(|h| h.service == victim.to_string()).unwrap();
    assert_eq!((h.restarts, h.exits.len()), (1, 1), "{h:?}");
    let lost = acked.iter().filter(|id| !set.contains(id)).count();
    let r = CrashResult { acked: acked.len(), stored_before_kill, stored: set.len(), lost, events };
    eprintln!("{name}: {r:?} in {:?}", t0.elapsed());
    stack.stop();
    r
}

/// A batch stays open 3 s (and may hold 50,000 readings), so a kill 1.5 s
/// into the stream always lands on a pending batch.
fn long_batches(o: &mut StackOptions) {
    o.historian.extra_args = vec!["--batch-wait-ms".into(), "3000".into(), "--batch-max".into(), "50000".into()];
}

/// Short batches, so that several meet PostgreSQL while it is down.
fn short_batches(o: &mut StackOptions) {
    o.historian.extra_args = vec!["--batch-wait-ms".into(), "300".into()];
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn historian_sigkill_safe_mode_loses_nothing() {
    let _one = one_stack_at_a_time().await;
    let r = crash("hist-safe", Service::Historian, Duration::ZERO, long_batches).await;
    assert_eq!(r.lost, 0, "ack after commit: no acknowledged reading may be lost: {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn historian_sigkill_control_mode_loses_acked_readings() {
    let _one = one_stack_at_a_time().await;
    let r = crash("hist-control", Service::Historian, Duration::ZERO, |o| {
        long_batches(o);
        o.historian.ack_before_commit = true;
    })
    .await;
    assert!(r.lost > 0, "ack before commit: the pending batch dies with the historian: {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigkill_safe_mode_loses_nothing_and_reconnects() {
    let _one = one_stack_at_a_time().await;
    let r = crash("pg-safe", Service::Postgres, Duration::from_millis(2500), short_batches).await;
    assert_eq!(r.lost, 0, "the historian must retry the batch PostgreSQL lost, acking only after commit: {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigkill_control_mode_loses_acked_readings() {
    let _one = one_stack_at_a_time().await;
    let r = crash("pg-control", Service::Postgres, Duration::from_millis(2500), |o| {
        short_batches(o);
        o.historian.ack_before_commit = true;
    })
    .await;
    assert!(r.lost > 0, "ack before commit: batches that met PostgreSQL down are gone: {r:?}");
}

async fn ingest_row(c: &tokio_postgres::Client, client: &str) -> (String, String, String, i32, std::time::SystemTime) {
    let r = c
        .query_one(
            "SELECT fsync, synchronous_commit, full_page_writes, pid, at FROM ingest_session WHERE client = $1",
            &[&client],
        )
        .await
        .expect("the historian's ingest_session row");
    (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))
}

// The ingest connection is made non-durable by a session setting while the
// server is durable: ingest_session shows it; a fresh connection does not.
// After a PostgreSQL restart the historian records its new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_session_records_the_ingest_connections_durability() {
    let _one = one_stack_at_a_time().await;
    let run = TempRun::new("ingest-session");
    let mut stack = start(&run, |o| {
        o.historian.session_settings = vec![("synchronous_commit".into(), "off".into())];
    })
    .await;
    let client_id = stack.options().historian.client_id.clone();
    let c = pg(&stack).await;
    let (fsync, sync, fpw, pid, at) = ingest_row(&c, &client_id).await;
    assert_eq!((fsync.as_str(), sync.as_str(), fpw.as_str()), ("on", "off", "on"));
    let fresh: String = c.query_one("SHOW synchronous_commit", &[]).await.unwrap().get(0);
    assert_eq!(fresh, "on", "the server itself stays durable");
    let live: i64 = c.query_one("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", &[&pid]).await.unwrap().get(0);
    assert_eq!(live, 1, "the recorded pid is the historian's live ingest backend");
    drop(c);

    stack.kill(Service::Postgres, libc::SIGKILL).unwrap();
    let ev = supervise_until_event(&mut stack, Duration::from_secs(15)).await;
    assert!(ev.len() == 1 && ev[0].starts_with("postgres: killed by signal 9"), "{ev:?}");
    stack.reading_check().await.expect("the historian reconnected and stores again");
    let c = pg(&stack).await;
    let (_, sync2, _, pid2, at2) = ingest_row(&c, &client_id).await;
    assert_eq!(sync2, "off", "the setting is applied again on reconnect");
    assert!(pid2 != pid && at2 > at, "the reconnect is recorded: pid {pid} → {pid2}");
    stack.stop();
}

// A setting PostgreSQL refuses stops the historian with a plain message
// (retrying cannot fix it); the stack does not start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_session_setting_is_reported_plainly() {
    let _one = one_stack_at_a_time().await;
    let run = TempRun::new("bad-setting");
    let mut opts = StackOptions::for_tests(&run.0).unwrap();
    opts.historian.bin = Some(common::historian_bin());
    opts.historian.session_settings = vec![("no_such_setting".into(), "1".into())];
    let err = local_stack::LocalStack::start(opts).await.err().expect("must not start").to_string();
    assert!(err.contains("--session-setting no_such_setting=1: PostgreSQL refused it"), "{err}");
    assert!(err.contains("hint:"), "{err}");
}
