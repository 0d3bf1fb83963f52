//! Supervision of the local stack against real processes: a service killed
//! (through `kill()` or from outside with a plain `kill(2)`) is found by the
//! next `supervise()` from its own exit status, restarted, and shows in
//! `health()`; a clean stack reports nothing.
//!
//! Run: `cargo test --release -p local-stack --test supervise`

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{one_stack_at_a_time, pg, pids_in_dir, start, supervise_until_event, TempRun};
use local_stack::{pid_alive, LocalStack, Service, ServiceHealth};

fn health_of(stack: &mut LocalStack, service: Service) -> ServiceHealth {
    let name = service.to_string();
    stack.health().into_iter().find(|h| h.service == name).expect("service in health()")
}

async fn select_1(stack: &LocalStack) -> i32 {
    let c = pg(stack).await;
    c.query_one("SELECT 1", &[]).await.expect("SELECT 1 after restart").get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_stack_reports_nothing_and_supervision_is_cheap() {
    let _one = one_stack_at_a_time().await;
    let run = TempRun::new("sup-clean");
    let mut stack = start(&run, |_| {}).await;
    let t0 = Instant::now();
    for _ in 0..200 {
        let ev = stack.supervise().await;
        assert!(ev.is_empty(), "a clean stack has nothing to report: {ev:?}");
    }
    let per_call = t0.elapsed() / 200;
    assert!(per_call < Duration::from_millis(2), "supervise() with nothing to do took {per_call:?} per call");
    let health = stack.health();
    assert_eq!(
        health.iter().map(|h| h.service.as_str()).collect::<Vec<_>>(),
        ["postgres", "mosquitto", "reference-historian"]
    );
    for h in &health {
        assert!(h.running && h.pid.is_some_and(pid_alive), "{h:?}");
        assert_eq!((h.restarts, h.exits.len()), (0, 0), "{h:?}");
        // Unmeasured is None, never 0; where it is measured nothing was OOM-killed.
        assert!(h.oom_kills.is_none_or(|n| n == 0), "{h:?}");
    }
    eprintln!("clean stack: supervise() {per_call:?} per call; health {health:?}");
    stack.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mosquitto_sigkill_is_detected_and_restarted() {
    let _one = one_stack_at_a_time().await;
    let run = TempRun::new("sup-mosq");
    let mut stack = start(&run, |_| {}).await;
    let old = stack.pid(Service::Mosquitto).unwrap();
    stack.kill(Service::Mosquitto, libc::SIGKILL).expect("kill");
    let ev = supervise_until_event(&mut stack, Duration::from_secs(10)).await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(ev[0].starts_with("mosquitto: killed by signal 9 (SIGKILL); restarted"), "{ev:?}");

    let new = stack.pid(Service::Mosquitto).expect("mosquitto runs again");
    assert_ne!(new, old);
    assert!(pid_alive(new) && !pid_alive(old));
    let h = health_of(&mut stack, Service::Mosquitto);
    assert!(h.running && h.pid == Some(new), "{h:?}");
    assert_eq!(h.restarts, 1, "{h:?}");
    assert_eq!(h.exits, vec!["killed by signal 9 (SIGKILL)".to_string()]);
    for other in [Service::Postgres, Service::Historian] {
        let h = health_of(&mut stack, other);
        assert_eq!((h.restarts, h.exits.len(), h.running), (0, 0, true), "{h:?}");
    }
    // The restarted broker carries readings again (the historian reconnected).
    stack.reading_check().await.expect("a reading goes through after the broker restart");
    assert!(stack.supervise().await.is_empty());
    stack.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigkill_is_detected_and_restarted() {
    let _one = one_stack_at_a_time().await;
    let run = TempRun::new("sup-pg");
    let mut stack = start(&run, |_| {}).await;
    let old = stack.pid(Service::Postgres).unwrap();
    stack.kill(Service::Postgres, libc::SIGKILL).expect("kill");
    let ev = supervise_until_event(&mut stack, Duration::from_secs(10)).await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(ev[0].starts_with("postgres: killed by signal 9 (SIGKILL); restarted"), "{ev:?}");
    let new = stack.pid(Service::Postgres).unwrap();
    assert_ne!(new, old);
    assert_eq!(select_1(&stack).await, 1);
    let h = health_of(&mut stack, Service::Postgres);
    assert_eq!((h.running, h.restarts), (true, 1), "{h:?}");
    assert_eq!(h.exits, vec!["killed by signal 9 (SIGKILL)".to_string()]);
    // The historian reconnects by itself and stores again.
    stack.reading_check().await.expect("a reading is stored after the PostgreSQL restart");
    stack.stop();
}

// Only the postmaster is killed, from outside (its backends live on in
// process groups of their own): supervision still notices it, clears the
// leftover backends and brings PostgreSQL back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postmaster_killed_from_outside_is_detected_and_leftovers_cleared() {
    let _one = one_stack_at_a_time().await;
    let run = TempRun::new("sup-pg-outside");
    let mut stack = start(&run, |_| {}).await;
    let data = stack.paths().pg_data.clone();
    let postmaster = stack.pid(Service::Postgres).unwrap();
    let before: HashSet<u32> = pids_in_dir(&data).into_iter().collect();
    assert!(before.len() > 1, "postmaster and backends: {before:?}");
    // SAFETY: plain syscall on our own child's pid.
    assert_eq!(unsafe { libc::kill(postmaster as libc::pid_t, libc::SIGKILL) }, 0);

    let ev = supervise_until_event(&mut stack, Duration::from_secs(10)).await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(ev[0].starts_with("postgres: killed by signal 9 (SIGKILL); restarted"), "{ev:?}");
    let left: Vec<u32> = before.iter().copied().filter(|p| pid_alive(*p)).collect();
    assert!(left.is_empty(), "processes of the old postmaster still alive: {left:?}");
    assert_eq!(select_1(&stack).await, 1);
    stack.reading_check().await.expect("a reading is stored after the PostgreSQL restart");
    let h = health_of(&mut stack, Service::Postgres);
    assert_eq!((h.running, h.restarts, h.exits.len()), (true, 1, 1), "{h:?}");
    stack.stop();
}

// The historian killed from outside; and the old kill_historian /
// restart_historian pair, which supervision records when it sees the new pid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn historian_exits_are_detected_both_ways() {
    let _one = one_stack_at_a_time().await;
    let run = TempRun::new("sup-hist");
    let mut stack = start(&run, |_| {}).await;
    let pid = stack.pid(Service::Historian).unwrap();
    // SAFETY: plain syscall on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) }, 0);
    let ev = supervise_until_event(&mut stack, Duration::from_secs(10)).await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    // The historian writes its stats and exits on SIGTERM.
    assert!(ev[0].starts_with("reference-historian: "), "{ev:?}");
    assert!(ev[0].contains("; restarted"), "{ev:?}");

    // A deliberate stop is left alone until the caller restarts it …
    stack.kill_historian(libc::SIGKILL).unwrap();
    for _ in 0..5 {
        assert!(stack.supervise().await.is_empty());
    }
    assert!(!health_of(&mut stack, Service::Historian).running);
    // … and then counted once.
    stack.restart_historian().await.unwrap();
    let ev = stack.supervise().await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(ev[0].starts_with("reference-historian: killed by signal 9 (SIGKILL); restarted"), "{ev:?}");
    let h = health_of(&mut stack, Service::Historian);
    assert_eq!((h.running, h.restarts, h.exits.len()), (true, 2, 2), "{h:?}");
    assert_eq!(h.exits[1], "killed by signal 9 (SIGKILL)");
    stack.reading_check().await.expect("the historian stores again");
    stack.stop();
}

// A restart that fails (mosquitto's port taken meanwhile) leaves the service
// marked not running and says why; no new attempt within 5 s; once the port
// is free again the next attempt brings it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_restart_is_reported_and_retried_after_5_s() {
    let _one = one_stack_at_a_time().await;
    let run = TempRun::new("sup-fail");
    let mut stack = start(&run, |_| {}).await;
    let port = stack.mqtt_port();
    let old = stack.pid(Service::Mosquitto).unwrap();
    stack.kill(Service::Mosquitto, libc::SIGKILL).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while pid_alive(old) {
        assert!(Instant::now() < deadline, "mosquitto did not die");
        std::thread::sleep(Duration::from_millis(20));
    }
    let holder = std::net::TcpListener::bind(("127.0.0.1", port)).expect("take the broker's port");
    let ev = supervise_until_event(&mut stack, Duration::from_secs(10)).await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    eprintln!("failed restart: {ev:?}");
    assert!(ev[0].starts_with("mosquitto: killed by signal 9 (SIGKILL); restart failed: "), "{ev:?}");
    assert!(!ev[0].contains('\n'), "one line per event: {ev:?}");
    let h = health_of(&mut stack, Service::Mosquitto);
    assert_eq!((h.running, h.restarts, h.exits.len()), (false, 0, 1), "{h:?}");
    assert!(stack.kill(Service::Mosquitto, libc::SIGKILL).unwrap_err().to_string().contains("hint:"));

    let failed_at = Instant::now();
    drop(holder);
    loop {
        let ev = stack.supervise().await;
        if failed_at.elapsed() < Duration::from_millis(4900) {
            assert!(ev.is_empty(), "no new attempt within 5 s: {ev:?}");
        } else if !ev.is_empty() {
            assert_eq!(ev.len(), 1, "{ev:?}");
            assert!(ev[0].starts_with("mosquitto: restarted"), "{ev:?}");
            break;
        }
        assert!(failed_at.elapsed() < Duration::from_secs(15), "never retried");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let h = health_of(&mut stack, Service::Mosquitto);
    assert_eq!((h.running, h.restarts, h.exits.len()), (true, 1, 1), "{h:?}");
    stack.reading_check().await.expect("readings flow again");
    stack.stop();
}
