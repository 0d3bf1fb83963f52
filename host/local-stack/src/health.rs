//! Health of supervised services: unexpected exits read from the children's
//! real exit status, restarts done by the supervisor, and OOM kills read from
//! the memory cgroup each service runs in.
//!
//! OOM kills come from the cgroup, found through `/proc/<pid>/cgroup` and the
//! cgroup mounts in `/proc/self/mountinfo`:
//! - cgroup v1: the memory controller's `memory.oom_control`, field `oom_kill`;
//! - cgroup v2: `memory.events`, field `oom_kill` (the nearest ancestor that
//!   has the file, when the leaf has no memory controller enabled).
//!
//! The value at start is the baseline; [`ServiceHealth::oom_kills`] is the
//! increase since. It is `None` when no such file can be read: unmeasured is
//! never reported as zero. Several services (and the harness itself) often
//! share one cgroup; its counter then counts an OOM kill of any of them.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Instant;

/// What happened to one service since the stack (or cluster) started.
/// Counters are cumulative: take differences between two calls for a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceHealth {
    /// Service name: `postgres`, `mosquitto`, `reference-historian`, `nats-0`, …
    pub service: String,
    /// Its leader process was running at the last look.
    pub running: bool,
    /// Pid of its leader process, when one is started.
    pub pid: Option<u32>,
    /// Times it was started again after an exit and came up (restarts that
    /// failed are not counted; they show as `running: false` and as events).
    pub restarts: u32,
    /// Plain descriptions of every unexpected exit, oldest first:
    /// "exited with status 1", "killed by signal 9 (SIGKILL)", "OOM-killed".
    pub exits: Vec<String>,
    /// OOM kills counted by its memory cgroup since start; `None` when the
    /// cgroup counter cannot be read.
    pub oom_kills: Option<u32>,
}

/// The name of a signal number (`SIGKILL`), or `None` for an uncommon one.
pub fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => return None,
    })
}

/// A plain description of how a process ended: "exited with status 1",
/// "killed by signal 9 (SIGKILL)", "killed by signal 11 (SIGSEGV), core dumped".
pub fn describe_exit(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with status {code}");
    }
    if let Some(sig) = status.signal() {
        let name = signal_name(sig).map(|n| format!(" ({n})")).unwrap_or_default();
        let core = if status.core_dumped() { ", core dumped" } else { "" };
        return format!("killed by signal {sig}{name}{core}");
    }
    format!("ended ({status})")
}

/// Where a process's OOM-kill counter lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OomSource {
    /// `memory.oom_control` (v1) or `memory.events` (v2); both hold a line `oom_kill N`.
    pub file: PathBuf,
}

impl OomSource {
    pub fn read(&self) -> Option<u64> {
        read_oom_kill(&self.file)
    }
}

/// The `oom_kill N` line of a cgroup file.
fn read_oom_kill(file: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some("oom_kill")).then(|| it.next()?.parse().ok()).flatten()
    })
}

/// One cgroup mount of /proc/self/mountinfo.
struct CgroupMount {
    /// Root of the mount inside the hierarchy (field 4).
    root: String,
    mount_point: PathBuf,
    v2: bool,
    /// v1: the mount's super options (controllers such as `memory`).
    options: String,
}

fn cgroup_mounts() -> Vec<CgroupMount> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else { return Vec::new() };
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let l: Vec<&str> = left.split_whitespace().collect();
            let r: Vec<&str> = right.split_whitespace().collect();
            let fstype = *r.first()?;
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            Some(CgroupMount {
                root: unescape(l.get(3)?),
                mount_point: PathBuf::from(unescape(l.get(4)?)),
                v2: fstype == "cgroup2",
                options: r.get(2).copied().unwrap_or("").to_string(),
            })
        })
        .collect()
}

/// mountinfo escapes spaces and a few other bytes as `\NNN` (octal).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directory of cgroup `path` (as /proc/<pid>/cgroup names it) under `m`.
fn cgroup_dir(m: &CgroupMount, path: &str) -> Option<PathBuf> {
    let rel = if m.root == "/" {
        path
    } else {
        path.strip_prefix(m.root.as_str()).filter(|r| r.is_empty() || r.starts_with('/'))?
    };
    Some(m.mount_point.join(rel.trim_start_matches('/')))
}

/// Find the OOM-kill counter of the memory cgroup `pid` runs in.
pub(crate) fn oom_source(pid: u32) -> Option<OomSource> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mounts = cgroup_mounts();
    // cgroup v1 memory controller first: when it is mounted, memory is not on v2.
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_id, controllers, path) = (f.next()?, f.next()?, f.next()?);
        if controllers.split(',').any(|c| c == "memory") {
            for m in mounts.iter().filter(|m| !m.v2 && m.options.split(',').any(|o| o == "memory")) {
                if let Some(dir) = cgroup_dir(m, path) {
                    let file = dir.join("memory.oom_control");
                    if read_oom_kill(&file).is_some() {
                        return Some(OomSource { file });
                    }
                }
            }
        }
    }
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("0::") {
            for m in mounts.iter().filter(|m| m.v2) {
                let Some(mut dir) = cgroup_dir(m, path) else { continue };
                loop {
                    let file = dir.join("memory.events");
                    if read_oom_kill(&file).is_some() {
                        return Some(OomSource { file });
                    }
                    if dir == m.mount_point || !dir.pop() || !dir.starts_with(&m.mount_point) {
                        break;
                    }
                }
            }
        }
    }
    None
}

/// The supervisor's record of one service.
pub(crate) struct Tracker {
    pub health: ServiceHealth,
    /// Pid seen at the last start or supervision; a different pid means
    /// someone else restarted it.
    pub last_pid: Option<u32>,
    /// Supervision brings it back when it is down (false after a deliberate
    /// stop such as `kill_historian`).
    pub wanted: bool,
    /// After a failed restart: no new attempt before this instant.
    pub retry_after: Option<Instant>,
    /// How the previous process ended when someone else stopped it (for the
    /// record made when the new pid is noticed).
    pub pending_exit: Option<String>,
    oom: Option<OomSource>,
    oom_baseline: u64,
    oom_last: u64,
    /// OOM kills counted in cgroups the service left (a restart in another cgroup).
    oom_earlier: u64,
}

impl Tracker {
    pub fn new(service: impl Into<String>) -> Self {
        Tracker {
            health: ServiceHealth {
                service: service.into(),
                running: false,
                pid: None,
                restarts: 0,
                exits: Vec::new(),
                oom_kills: None,
            },
            last_pid: None,
            wanted: true,
            retry_after: None,
            pending_exit: None,
            oom: None,
            oom_baseline: 0,
            oom_last: 0,
            oom_earlier: 0,
        }
    }

    /// A process of the service is up with this pid (first start or restart).
    pub fn started(&mut self, pid: u32) {
        self.last_pid = Some(pid);
        self.health.pid = Some(pid);
        self.health.running = true;
        self.wanted = true;
        self.retry_after = None;
        let src = oom_source(pid);
        match (&self.oom, src) {
            (Some(old), Some(new)) if *old == new => {}
            (old, Some(new)) => {
                if old.is_some() {
                    self.oom_earlier += self.oom_last.saturating_sub(self.oom_baseline);
                }
                let v = new.read().unwrap_or(0);
                self.oom_baseline = v;
                self.oom_last = v;
                self.oom = Some(new);
            }
            // Keep the old source (and its counts) when the new one cannot be found.
            (_, None) => {}
        }
    }

    /// Record an unexpected exit. With an exit status, the description says
    /// how it ended, or "OOM-killed" when it died of SIGKILL while its
    /// cgroup's OOM-kill counter went up.
    pub fn exited(&mut self, status: Option<ExitStatus>, fallback: &str) -> String {
        let oom_now = self.oom.as_ref().and_then(OomSource::read);
        let oom_rose = oom_now.is_some_and(|v| v > self.oom_last);
        if let Some(v) = oom_now {
            self.oom_last = v;
        }
        let desc = match status {
            Some(s) if oom_rose && s.signal() == Some(libc::SIGKILL) => "OOM-killed".to_string(),
            Some(s) => describe_exit(s),
            None => fallback.to_string(),
        };
        self.record(desc.clone());
        desc
    }

    /// Record an exit described elsewhere.
    pub fn record(&mut self, desc: String) {
        self.health.exits.push(desc);
        self.health.running = false;
    }

    /// The service's health now (reads the cgroup counter once).
    pub fn snapshot(&mut self, running: bool, pid: Option<u32>) -> ServiceHealth {
        self.health.running = running;
        self.health.pid = pid.or(self.health.pid);
        self.health.oom_kills = self.oom.as_ref().and_then(OomSource::read).map(|v| {
            self.oom_last = self.oom_last.max(v);
            let n = self.oom_earlier + v.saturating_sub(self.oom_baseline);
            u32::try_from(n).unwrap_or(u32::MAX)
        });
        self.health.clone()
    }
}

/// The first line of an error and its `hint:` line, joined: one event line.
pub(crate) fn one_line(e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("").trim().to_string();
    match text.lines().find(|l| l.trim_start().starts_with("hint:")) {
        Some(h) if h.trim() != first => format!("{first} ({})", h.trim()),
        _ => first,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_exits_plainly() {
        assert_eq!(describe_exit(ExitStatus::from_raw(1 << 8)), "exited with status 1");
        assert_eq!(describe_exit(ExitStatus::from_raw(0)), "exited with status 0");
        assert_eq!(describe_exit(ExitStatus::from_raw(9)), "killed by signal 9 (SIGKILL)");
        assert_eq!(describe_exit(ExitStatus::from_raw(11 | 0x80)), "killed by signal 11 (SIGSEGV), core dumped");
    }

    #[test]
    fn parses_oom_kill_lines() {
        let dir = std::env::temp_dir().join(format!("local-stack-oom-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let v1 = dir.join("memory.oom_control");
        std::fs::write(&v1, "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n").unwrap();
        assert_eq!(read_oom_kill(&v1), Some(3));
        let v2 = dir.join("memory.events");
        std::fs::write(&v2, "low 0\nhigh 0\nmax 2\noom 1\noom_kill 1\noom_group_kill 0\n").unwrap();
        assert_eq!(read_oom_kill(&v2), Some(1));
        std::fs::write(&v2, "low 0\n").unwrap();
        assert_eq!(read_oom_kill(&v2), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sigkill_while_the_cgroup_counts_an_oom_kill_is_oom_killed() {
        let dir = std::env::temp_dir().join(format!("local-stack-oom-t-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("memory.oom_control");
        std::fs::write(&file, "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n").unwrap();
        let mut t = Tracker::new("mosquitto");
        t.oom = Some(OomSource { file: file.clone() });
        t.oom_baseline = 5;
        t.oom_last = 5;
        assert_eq!(t.snapshot(true, Some(1)).oom_kills, Some(0));
        // A SIGKILL with no OOM kill counted is a plain kill …
        assert_eq!(t.exited(Some(ExitStatus::from_raw(9)), ""), "killed by signal 9 (SIGKILL)");
        // … one while the counter rose is an OOM kill.
        std::fs::write(&file, "oom_kill_disable 0\nunder_oom 0\noom_kill 6\n").unwrap();
        assert_eq!(t.exited(Some(ExitStatus::from_raw(9)), ""), "OOM-killed");
        let h = t.snapshot(false, None);
        assert_eq!(h.oom_kills, Some(1));
        assert_eq!(h.exits, ["killed by signal 9 (SIGKILL)", "OOM-killed"]);
        // Unreadable counter: unmeasured, not zero.
        std::fs::remove_file(&file).unwrap();
        assert_eq!(t.snapshot(false, None).oom_kills, None);
        assert_eq!(Tracker::new("x").snapshot(false, None).oom_kills, None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unescapes_mountinfo() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }

    #[test]
    fn finds_this_process_cgroup_counter_when_there_is_one() {
        // Either a readable counter or None; never a panic. On hosts with a
        // memory cgroup the counter reads as a number.
        if let Some(src) = oom_source(std::process::id()) {
            assert!(src.read().is_some(), "{src:?}");
        }
    }

    #[test]
    fn one_line_keeps_first_line_and_hint() {
        let e = "postgres did not start\nlast lines:\n  x\nhint: read the log";
        assert_eq!(one_line(&e), "postgres did not start (hint: read the log)");
        assert_eq!(one_line(&"plain"), "plain");
    }
}
