//! A bare mosquitto on loopback ports of its own (no subscriber, no
//! database, persistence off): what the generator and worker benchmarks
//! publish to, so they measure the generator and not a stack. Stopped when
//! dropped.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

pub struct Mosquitto {
    child: Child,
    _dir: tempfile::TempDir,
    pub port: u16,
    /// A second, TLS-only listener (`start_mosquitto` given certificates).
    pub tls_port: Option<u16>,
}

impl Mosquitto {
    /// The broker's process id (a benchmark freezes it with SIGSTOP).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_mosquitto() -> anyhow::Result<Mosquitto> {
    start_mosquitto_with(None)
}

/// A bare mosquitto; with `tls`, also a TLS-only listener with its server certificate.
pub fn start_mosquitto_with(tls: Option<&crate::throwaway_ca::ThrowawayPki>) -> anyhow::Result<Mosquitto> {
    let ports = local_stack::guard::pick_free_ports(2)?;
    let (port, tls_port) = (ports[0], tls.map(|_| ports[1]));
    let dir = tempfile::tempdir()?;
    let conf = dir.path().join("mosquitto.conf");
    let mut text = format!(
        "listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 200000\nmax_inflight_messages 0\nlog_dest none\n"
    );
    if let (Some(p), Some(pki)) = (tls_port, tls) {
        text.push_str(&format!(
            "listener {p} 127.0.0.1\ncertfile {}\nkeyfile {}\n",
            pki.server_cert.display(),
            pki.server_key.display()
        ));
    }
    std::fs::write(&conf, text)?;
    let bin = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"]
        .iter()
        .find(|p| std::path::Path::new(p).exists())
        .copied()
        .unwrap_or("mosquitto");
    let child = Command::new(bin)
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start mosquitto\nhint: run scripts/setup.sh (or apt-get install mosquitto)")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        anyhow::ensure!(Instant::now() < deadline, "mosquitto did not listen on {port} within 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Some(p) = tls_port {
        while std::net::TcpStream::connect(("127.0.0.1", p)).is_err() {
            anyhow::ensure!(Instant::now() < deadline, "mosquitto's TLS listener did not listen on {p} within 10 s");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(Mosquitto { child, _dir: dir, port, tls_port })
}
