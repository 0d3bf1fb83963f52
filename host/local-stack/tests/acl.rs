//! `StackOptions::mosquitto_acl_file` against the real broker, checked with
//! mosquitto_pub / mosquitto_sub: anonymous clients (the stack's own check,
//! the historian) keep working, username `scalegen` gets its QoS 1 publishes
//! acknowledged but never delivered, and an ACL without `topic read $SYS/#`
//! hides the broker's `$SYS` counters from anonymous subscribers.
//!
//! Run: `cargo test --release -p local-stack --test acl`

mod common;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{one_stack_at_a_time, pg, start, TempRun};

/// Anonymous clients may use fbf/# and read $SYS/#; `scalegen` may only read
/// a topic nobody uses, so its publishes are dropped by the broker.
const ACL_DENY_SCALEGEN: &str = "\
topic readwrite fbf/#
topic read $SYS/#
user scalegen
topic read nothing/#
";

/// The same without `topic read $SYS/#`: $SYS is hidden from anonymous clients.
const ACL_HIDE_SYS: &str = "\
topic readwrite fbf/#
user scalegen
topic read nothing/#
";

/// A mosquitto_sub that is killed if it is still running when dropped.
struct Sub(Child);

impl Sub {
    /// Subscribe to `topic` at QoS 1; exit after one message or `wait_s` seconds idle.
    fn start(port: u16, topic: &str, wait_s: u32) -> Sub {
        let child = Command::new("mosquitto_sub")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-q",
                "1",
                "-v",
                "-C",
                "1",
                "-W",
                &wait_s.to_string(),
                "-t",
                topic,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run mosquitto_sub (apt-get install mosquitto-clients)");
        // Let it connect and subscribe before anything is published.
        std::thread::sleep(Duration::from_millis(700));
        Sub(child)
    }

    /// Wait (bounded) for it to end; returns what it printed.
    fn output(mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.0.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "mosquitto_sub did not end");
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut out = String::new();
        self.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        out
    }
}

impl Drop for Sub {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// mosquitto_pub at QoS 1 (MQTT 3.1.1), optionally as `user`; returns its
/// debug output, which names the PUBACK it received.
fn publish(port: u16, user: Option<&str>, topic: &str, payload: &str) -> String {
    let mut cmd = Command::new("mosquitto_pub");
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q", "1", "-d", "-t", topic, "-m", payload]);
    if let Some(u) = user {
        cmd.args(["-u", u]);
    }
    let out = cmd.output().expect("run mosquitto_pub (apt-get install mosquitto-clients)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mosquitto_pub failed: {text}");
    text
}

fn reading(point: &str) -> String {
    serde_json::json!({"point": point, "value": 1.0, "ts": 1_796_047_200_000i64}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_denies_scalegen_publishes_and_keeps_sys_readable() {
    let _one = one_stack_at_a_time().await;
    let run = TempRun::new("acl-deny");
    let acl = run.0.join("caller-acl");
    std::fs::write(&acl, ACL_DENY_SCALEGEN).unwrap();
    // The stack starts: its anonymous one-reading check and the historian work under the ACL.
    let stack = start(&run, |o| o.mosquitto_acl_file = Some(acl.clone())).await;
    // The stack keeps its own copy.
    std::fs::remove_file(&acl).unwrap();
    let conf = std::fs::read_to_string(&stack.paths().mosquitto_conf).unwrap();
    assert!(conf.contains(&format!("acl_file {}", stack.paths().mosquitto_acl.display())), "{conf}");
    assert_eq!(std::fs::read_to_string(&stack.paths().mosquitto_acl).unwrap(), ACL_DENY_SCALEGEN);
    let port = stack.mqtt_port();
    let c = pg(&stack).await;

    // As scalegen: PUBACKed, but no subscriber receives it and nothing is stored.
    let sub = Sub::start(port, "fbf/acltest/#", 3);
    let dbg = publish(port, Some("scalegen"), "fbf/acltest/denied", &reading("acltest/denied"));
    assert!(dbg.contains("received PUBACK"), "the broker acknowledges the denied publish: {dbg}");
    let got = sub.output();
    assert!(got.is_empty(), "a publish by scalegen must not be delivered: {got:?}");

    // Anonymous: delivered (and stored by the historian).
    let sub = Sub::start(port, "fbf/acltest/#", 5);
    let dbg = publish(port, None, "fbf/acltest/allowed", &reading("acltest/allowed"));
    assert!(dbg.contains("received PUBACK"), "{dbg}");
    let got = sub.output();
    assert!(got.starts_with("fbf/acltest/allowed "), "an anonymous publish is delivered: {got:?}");

    let deadline = Instant::now() + Duration::from_secs(10);
    let count = |p: &'static str| {
        let c = &c;
        async move {
            c.query_one("SELECT count(*) FROM point_history WHERE point = $1", &[&p]).await.unwrap().get::<_, i64>(0)
        }
    };
    while count("acltest/allowed").await == 0 {
        assert!(Instant::now() < deadline, "the anonymous reading never reached point_history");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(count("acltest/denied").await, 0, "the denied reading must not be stored");

    // $SYS stays readable to anonymous subscribers with `topic read $SYS/#`.
    let got = Sub::start(port, "$SYS/#", 5).output();
    assert!(got.starts_with("$SYS/"), "$SYS should be readable: {got:?}");
    stack.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_without_sys_line_hides_sys() {
    let _one = one_stack_at_a_time().await;
    let run = TempRun::new("acl-sys");
    let acl = run.0.join("caller-acl");
    std::fs::write(&acl, ACL_HIDE_SYS).unwrap();
    let stack = start(&run, |o| o.mosquitto_acl_file = Some(acl.clone())).await;
    // sys_interval is 1 s, and the static $SYS topics are retained: with read
    // access a subscriber gets one at once; 4 s of silence means hidden.
    let got = Sub::start(stack.mqtt_port(), "$SYS/#", 4).output();
    assert!(got.is_empty(), "$SYS must be hidden without `topic read $SYS/#`: {got:?}");
    // The stack itself still works (anonymous fbf/# is allowed).
    let mut stack = stack;
    stack.reading_check().await.expect("readings still flow");
    stack.stop();
}

#[tokio::test]
async fn a_missing_acl_file_is_refused_plainly() {
    let run = TempRun::new("acl-missing");
    let mut opts = local_stack::StackOptions::for_tests(&run.0).unwrap();
    opts.historian.bin = Some(common::historian_bin());
    opts.mosquitto_acl_file = Some(run.0.join("no-such-acl"));
    let err = local_stack::LocalStack::start(opts).await.err().expect("must refuse").to_string();
    assert!(err.contains("mosquitto ACL file") && err.contains("hint:"), "{err}");
}
