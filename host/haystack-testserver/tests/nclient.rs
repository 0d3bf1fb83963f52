//! Conformance with a third-party Haystack client: the server binary on a
//! loopback port 2xxxx of its own, driven by haystack-nclient 3.0.46 with
//! values made by haystack-core 3.0.13 (`tests/nclient/conformance.cjs`):
//! about, read (filter and ids), hisWrite and hisRead, with nclient's own
//! Accept (Zinc first) and with Hayson only, a unit refused on a unitless
//! point. The script checks what comes back against what it wrote; this test
//! then counts what the server holds.
//!
//! The npm packages live outside the clone: `scripts/setup.sh` installs them
//! into `$SCALEBENCH_NODE_DIR` (default `/var/tmp/scalebench-node`).
//!
//! Run: `cargo test --release -p haystack-testserver --test nclient`

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn node_dir() -> PathBuf {
    std::env::var_os("SCALEBENCH_NODE_DIR").map(PathBuf::from).unwrap_or_else(|| "/var/tmp/scalebench-node".into())
}

/// The installed client, or a panic that says how to install it.
fn node_modules() -> PathBuf {
    let modules = node_dir().join("node_modules");
    for package in ["haystack-core", "haystack-nclient"] {
        assert!(
            modules.join(package).join("package.json").is_file(),
            "the npm package {package} is not installed in {}: run scripts/setup.sh (it installs haystack-core 3.0.13 \
             and haystack-nclient 3.0.46 there; set SCALEBENCH_NODE_DIR to use another directory)",
            modules.display()
        );
    }
    modules
}

fn node() -> PathBuf {
    let out = Command::new("node").arg("--version").output();
    match out {
        Ok(o) if o.status.success() => PathBuf::from("node"),
        _ => panic!("Node.js is not installed (`node` not found): run scripts/setup.sh, or apt-get install nodejs npm"),
    }
}

fn free_port(attempt: u32) -> u16 {
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos() ^ std::process::id() ^ attempt;
    for i in 0..1000u32 {
        let port = 20000 + (seed.wrapping_add(i * 37) % 10000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 20000-29999")
}

/// The server binary as a child process, killed on drop.
struct Server {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        for attempt in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let ready = dir.path().join("ready");
            let port = free_port(attempt);
            let child = Command::new(env!("CARGO_BIN_EXE_haystack-testserver"))
                .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--ready-file"])
                .arg(&ready)
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start haystack-testserver");
            let mut server = Server { child, port, _dir: dir };
            let deadline = Instant::now() + Duration::from_secs(20);
            while !ready.exists() && server.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if ready.exists() {
                return server;
            }
            eprintln!("haystack-testserver did not start on port {port}; trying another");
        }
        panic!("haystack-testserver did not start")
    }

    fn get_json(&self, path: &str) -> serde_json::Value {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        let body = raw.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
        serde_json::from_str(body).unwrap_or_else(|e| panic!("GET {path}: {e}: {raw}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run the script against `server`, bounded to 90 s; (exit status, stdout, stderr).
fn run_script(modules: &Path, server: &Server) -> (Option<i32>, String, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nclient/conformance.cjs");
    let mut child = Command::new(node())
        .arg(&script)
        .arg(modules)
        .arg(format!("http://127.0.0.1:{}", server.port))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node");
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the conformance script did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut out = String::new();
    let mut err = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (child.wait().unwrap().code(), out, err)
}

#[test]
fn haystack_nclient_reads_writes_and_reads_back_history() {
    let modules = node_modules();
    let server = Server::start();
    let (code, out, err) = run_script(&modules, &server);
    assert_eq!(code, Some(0), "the conformance script failed:\n{err}\n{out}");
    let report: serde_json::Value =
        serde_json::from_str(out.lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(report["ok"], true, "{report}");
    let results = report["results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "both clients ran: {report}");
    for r in results {
        let his = r["hisRead"].as_array().expect("hisRead");
        let vals: Vec<f64> = his.iter().map(|h| h["val"].as_f64().unwrap()).collect();
        assert_eq!(vals, [21.5, 22.25, -3.5], "{r}");
        assert!(r["serverTime"].as_str().unwrap().ends_with('Z'), "{r}");
        assert!(r["unitRefused"].as_str().unwrap().contains("no unit"), "{r}");
    }
    // What the server holds: 3 temperatures and 1 state per client, and
    // nothing of the refused writes.
    let count = server.get_json("/test/his-count");
    assert_eq!(count["points"], 2, "{count}");
    assert_eq!(count["readings"], 8, "{count}");
}
