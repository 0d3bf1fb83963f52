//! The reference historian run as `scalebench reference-historian`, against
//! a broker with logins and an ACL: a real mosquitto on a loopback port 2xxxx
//! of its own (`allow_anonymous false`, a password file made with
//! mosquitto_passwd, an ACL that lets the historian's user read fbf/# and a
//! publisher's user write it) and a throwaway PostgreSQL. With `--mqtt-user`
//! and the password in SCALEBENCH_MQTT_PASSWORD the historian stores a
//! reading published to the broker; anonymous or with a wrong password the
//! broker refuses it and the historian says so and stops. `--help` shows the
//! historian's own flags.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::pg::TestPg;
use crate::common::*;

const HISTORIAN_PW: &str = "hist-secret";
const PUBLISHER_PW: &str = "pub-secret";

/// A child process killed (and reaped) on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// mosquitto with a password file and an ACL on a free 2xxxx port.
struct Broker {
    _proc: Proc,
    port: u16,
}

fn mosquitto_bin() -> PathBuf {
    ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("mosquitto is not installed: run scripts/setup.sh (apt-get install mosquitto mosquitto-clients)")
}

fn start_broker(dir: &Path) -> Broker {
    let passwd = dir.join("passwd");
    for (i, (user, pw)) in [("historian", HISTORIAN_PW), ("publisher", PUBLISHER_PW)].iter().enumerate() {
        let mut cmd = Command::new("mosquitto_passwd");
        if i == 0 {
            cmd.arg("-c");
        }
        let out = cmd.arg("-b").arg(&passwd).args([user, pw]).output().expect("run mosquitto_passwd");
        assert!(out.status.success(), "mosquitto_passwd: {}", stderr(&out));
    }
    let acl = dir.join("acl");
    std::fs::write(&acl, "user historian\ntopic read fbf/#\n\nuser publisher\ntopic write fbf/#\n").unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    for _ in 0..3 {
        let port = crate::ladder::free_base_port();
        let conf = dir.join("mosquitto.conf");
        std::fs::write(
            &conf,
            format!(
                "listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {}\nacl_file {}\n\
                 persistence false\nlog_dest stderr\nlog_type all\n{}",
                passwd.display(),
                acl.display(),
                if root { "user root\n" } else { "" }
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("mosquitto.log")).unwrap();
        let child = Command::new(mosquitto_bin()).arg("-c").arg(&conf).stderr(log).spawn().expect("start mosquitto");
        let mut proc = Proc(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && proc.0.try_wait().unwrap().is_none() {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Broker { _proc: proc, port };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = proc.0.kill();
        eprintln!(
            "mosquitto did not start on {port}: {}",
            std::fs::read_to_string(dir.join("mosquitto.log")).unwrap_or_default()
        );
    }
    panic!("mosquitto did not start")
}

/// `scalebench reference-historian` against `broker` and `pg`, its log in
/// `dir/<name>.log`.
fn historian(dir: &Path, name: &str, broker: &Broker, pg: &TestPg, user: Option<&str>, password: Option<&str>) -> Proc {
    let mut cmd = Command::new(bin());
    cmd.args(["reference-historian", "--mqtt-host", "127.0.0.1", "--mqtt-port", &broker.port.to_string()])
        .args(["--client-id", name, "--pg", &pg.conn_string(), "--batch-wait-ms", "10"])
        .env_remove("SCALEBENCH_MQTT_PASSWORD")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("{name}.log"))).unwrap());
    if let Some(u) = user {
        cmd.args(["--mqtt-user", u]);
    }
    if let Some(p) = password {
        cmd.env("SCALEBENCH_MQTT_PASSWORD", p);
    }
    Proc(cmd.spawn().expect("start scalebench reference-historian"))
}

fn log_of(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
}

/// Wait (bounded) until `cond` holds; false when it never did.
fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    cond()
}

fn publish(broker: &Broker, user: &str, pw: &str, topic: &str, payload: &str) -> Output {
    Command::new("mosquitto_pub")
        .args(["-h", "127.0.0.1", "-p", &broker.port.to_string(), "-q", "1", "-r", "-u", user, "-P", pw])
        .args(["-t", topic, "-m", payload])
        .output()
        .expect("run mosquitto_pub (apt-get install mosquitto-clients)")
}

#[test]
fn the_historian_logs_in_with_a_user_and_stores_what_the_broker_delivers() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker(dir.path());
    let pg = TestPg::start();

    // The broker really wants a login: anonymous and a wrong password are
    // refused, and the historian says what to do instead of retrying.
    for (name, user, pw, says) in [
        ("anon", None, None, "give --mqtt-user NAME and the password in SCALEBENCH_MQTT_PASSWORD"),
        ("wrongpw", Some("historian"), Some("not-the-password"), "refused the login as \"historian\""),
    ] {
        let mut h = historian(dir.path(), name, &broker, &pg, user, pw);
        let ended = wait_for(Duration::from_secs(20), || h.0.try_wait().unwrap().is_some());
        let log = log_of(dir.path(), name);
        assert!(ended, "{name}: the historian kept running although the broker refused it:\n{log}");
        assert_eq!(h.0.wait().unwrap().code(), Some(1), "{name}: {log}");
        assert!(log.contains(says), "{name}: {log}");
        assert!(!log.contains("ConnectReturnCode"), "{name}: a Rust type name in the message: {log}");
    }

    // With the user and its password it subscribes and stores a reading.
    let _h = historian(dir.path(), "hist", &broker, &pg, Some("historian"), Some(HISTORIAN_PW));
    assert!(
        wait_for(Duration::from_secs(30), || log_of(dir.path(), "hist").contains("subscribed to fbf/#")),
        "the historian did not subscribe:\n{}",
        log_of(dir.path(), "hist")
    );
    assert!(log_of(dir.path(), "hist").contains("logging in as \"historian\""), "{}", log_of(dir.path(), "hist"));
    let ts_ms = 1_796_047_200_123i64;
    let payload = serde_json::json!({"point": "s3/e4/temp", "value": 21.75, "ts": ts_ms}).to_string();
    let out = publish(&broker, "publisher", PUBLISHER_PW, "fbf/scale/s3/e4/temp", &payload);
    assert!(out.status.success(), "mosquitto_pub: {}", stderr(&out));

    let mut client = pg.client();
    let mut row = None;
    let stored = wait_for(Duration::from_secs(30), || {
        row = client
            .query_opt(
                "SELECT value, (extract(epoch FROM ts) * 1000)::int8 FROM point_history WHERE point = 's3/e4/temp'",
                &[],
            )
            .ok()
            .flatten()
            .map(|r| (r.get::<_, f64>(0), r.get::<_, i64>(1)));
        row.is_some()
    });
    assert!(stored, "the reading never reached point_history:\n{}", log_of(dir.path(), "hist"));
    assert_eq!(row, Some((21.75, ts_ms)));
}

#[test]
fn reference_historian_help_shows_the_historians_own_flags() {
    let out = scalebench(&["reference-historian", "--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    for flag in ["--batch-wait-ms", "--batch-max", "--mqtt-user", "--pg", "--drop-one-in", "SCALEBENCH_MQTT_PASSWORD"] {
        assert!(text.contains(flag), "{flag} missing from:\n{text}");
    }
    assert!(text.contains("Usage: scalebench reference-historian"), "{text}");
    // The same for the Haystack test server.
    let out = scalebench(&["haystack-testserver", "--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("--his-cap") && text.contains("--password-file"), "{text}");
}
