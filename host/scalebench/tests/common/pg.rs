//! A throwaway PostgreSQL cluster for tests: `initdb` into a temp dir (as user
//! `postgres` when the tests run as root: initdb refuses root), started with
//! `pg_ctl` on a free 127.0.0.1 port in 20000-29999, stopped (`-m immediate`)
//! and deleted on drop. fsync is off: these clusters test behaviour, not
//! durability. Binaries: `$SCALEBENCH_PG_BIN`, else the newest
//! /usr/lib/postgresql/*/bin.

use std::os::unix::fs::chown;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

pub struct TestPg {
    pub port: u16,
    dir: tempfile::TempDir,
    bin: PathBuf,
    as_postgres: bool,
}

fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SCALEBENCH_PG_BIN") {
        return d.into();
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path().join("bin"))).filter(|p| p.join("initdb").is_file()).collect()
        })
        .unwrap_or_default();
    dirs.sort_by_key(|p| p.parent().and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok()).unwrap_or(0));
    dirs.pop().expect("PostgreSQL server binaries not found under /usr/lib/postgresql (set SCALEBENCH_PG_BIN)")
}

fn free_port(attempt: u32) -> u16 {
    let seed =
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos() ^ std::process::id() ^ (attempt * 7919);
    for i in 0..1000u32 {
        let port = 20000 + ((seed.wrapping_add(i * 37)) % 10000) as u16;
        if local_stack::guard::claim_free(port) {
            return port;
        }
    }
    panic!("no free port in 20000-29999")
}

impl TestPg {
    pub fn start() -> TestPg {
        let bin = bin_dir();
        let dir = tempfile::Builder::new().prefix("scalebench-pg").tempdir().expect("temp dir");
        // SAFETY: geteuid has no preconditions.
        let as_postgres = unsafe { libc::geteuid() } == 0;
        if as_postgres {
            let name = std::ffi::CString::new("postgres").unwrap();
            // SAFETY: getpwnam returns a pointer into static storage or null.
            let pw = unsafe { libc::getpwnam(name.as_ptr()) };
            assert!(!pw.is_null(), "running as root needs a `postgres` user for initdb");
            let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
            chown(dir.path(), Some(uid), Some(gid)).expect("chown the temp dir to postgres");
        }
        let mut pg = TestPg { port: 0, dir, bin, as_postgres };
        let data = pg.data();
        let init = pg
            .cmd("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"])
            .output()
            .expect("run initdb");
        assert!(init.status.success(), "initdb failed: {}", String::from_utf8_lossy(&init.stderr));
        for attempt in 0..3 {
            pg.port = free_port(attempt);
            let opts = format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50",
                pg.port,
                pg.dir.path().display()
            );
            let log = pg.dir.path().join("postgres.log");
            let st = pg
                .cmd("pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "60", "-o", &opts, "start"])
                .output()
                .expect("run pg_ctl");
            if st.status.success() {
                return pg;
            }
            eprintln!("pg_ctl start on port {} failed: {}", pg.port, std::fs::read_to_string(&log).unwrap_or_default());
        }
        panic!("could not start PostgreSQL in {}", pg.dir.path().display())
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn cmd(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        }
    }

    /// Connection string for the `postgres` database as superuser `postgres`.
    pub fn conn_string(&self) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname=postgres connect_timeout=10", self.port)
    }

    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.conn_string(), postgres::NoTls).expect("connect to the test cluster")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for TestPg {
    fn drop(&mut self) {
        let _ = self.cmd("pg_ctl").arg("-D").arg(self.data()).args(["-m", "immediate", "-w", "stop"]).output();
    }
}
