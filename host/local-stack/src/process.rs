//! Child processes: spawned in their own process group, stopped by group,
//! sampled through /proc.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Service, StackError};

/// One running service: the child (leader of its own process group) and its log.
pub(crate) struct ServiceProc {
    pub service: Service,
    pub child: Child,
    pub log: PathBuf,
    reaped: bool,
    /// How the leader ended, once it was reaped.
    status: Option<std::process::ExitStatus>,
}

/// Who a child runs as.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunAs {
    pub uid: u32,
    pub gid: u32,
}

pub(crate) fn open_log(path: &Path) -> Result<File, StackError> {
    std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| {
        StackError::io(
            format!("cannot open log file {}", path.display()),
            e,
            "check that the run directory is writable",
        )
    })
}

/// Spawn `cmd` with stdout and stderr appended to `log`, in a new process
/// group, killed by the kernel if the spawning thread dies.
pub(crate) fn spawn(
    service: Service,
    mut cmd: Command,
    log: &Path,
    run_as: Option<RunAs>,
) -> Result<ServiceProc, StackError> {
    let out = open_log(log)?;
    let err = out
        .try_clone()
        .map_err(|e| StackError::io("cannot duplicate a log file handle", e, "check open file limits"))?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
    if let Some(r) = run_as {
        cmd.uid(r.uid).gid(r.gid);
    }
    // SAFETY: prctl is async-signal-safe; no allocation happens here.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let program = cmd.get_program().to_string_lossy().into_owned();
    let child = cmd.spawn().map_err(|e| {
        StackError::io(format!("cannot start {service} ({program})"), e, "check the binary path and permissions")
    })?;
    Ok(ServiceProc { service, child, log: log.to_path_buf(), reaped: false, status: None })
}

impl ServiceProc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `None` while running, else a description of how it ended.
    pub fn exit_status(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(s)) => {
                self.reaped = true;
                self.status = Some(s);
                Some(s.to_string())
            }
            Ok(None) => None,
            Err(e) => Some(format!("unknown: {e}")),
        }
    }

    /// One `try_wait`: `Ok(None)` while running, `Ok(Some(status))` once it
    /// ended (the status stays available), `Err` when it cannot be waited for.
    pub fn try_status(&mut self) -> Result<Option<std::process::ExitStatus>, String> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        match self.child.try_wait() {
            Ok(Some(s)) => {
                self.reaped = true;
                self.status = Some(s);
                Ok(Some(s))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// How the leader ended, if it was reaped.
    pub fn last_status(&self) -> Option<std::process::ExitStatus> {
        self.status
    }

    pub fn exited_error(&mut self, phase: &str) -> Option<StackError> {
        let status = self.exit_status()?;
        Some(StackError::Exited {
            service: self.service,
            phase: phase.to_string(),
            status,
            log: self.log.clone(),
            tail: log_tail(&self.log, 20),
        })
    }

    /// Send `signal` to the whole process group.
    pub fn signal_group(&self, signal: i32) {
        // SAFETY: plain syscall; the group id is our child's pid (process_group(0)).
        unsafe {
            libc::killpg(self.pid() as libc::pid_t, signal);
        }
    }

    /// Send `signal` to the group, wait up to `grace` for the leader to exit,
    /// then SIGKILL the group; always reaps the leader, then kills whatever
    /// of its family outlived it (PostgreSQL backends run in process groups
    /// of their own, so the group alone is not enough).
    pub fn stop(&mut self, signal: i32, grace: Duration) {
        let family = if self.reaped { Vec::new() } else { family(self.pid()) };
        if !self.reaped {
            self.signal_group(signal);
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                if self.exit_status().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if !self.reaped {
                self.signal_group(libc::SIGKILL);
                if let Ok(s) = self.child.wait() {
                    self.status = Some(s);
                }
                self.reaped = true;
            }
        }
        let leftovers = |family: &[(u32, u64)]| -> Vec<(u32, u64)> {
            let mut v: Vec<(u32, u64)> = family
                .iter()
                .copied()
                .filter(|&(pid, start)| start_time(pid) == Some(start) && !is_zombie(pid))
                .collect();
            v.extend(group_members(self.pid()).filter_map(|p| Some((p, start_time(p)?))));
            v
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut left = leftovers(&family);
        while !left.is_empty() && Instant::now() < deadline {
            self.signal_group(libc::SIGKILL);
            for &(pid, _) in &left {
                // SAFETY: plain syscall; pid checked against its start time above.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGKILL);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
            left = leftovers(&family);
        }
    }
}

/// The leader and all its live descendants, with their start times (to tell
/// a pid apart from a later process that reuses it).
pub(crate) fn family(root: u32) -> Vec<(u32, u64)> {
    let stats: Vec<(u32, ProcStat)> = all_pids().filter_map(|p| Some((p, read_stat(p)?))).collect();
    let mut out = vec![];
    if let Some((_, s)) = stats.iter().find(|(p, _)| *p == root) {
        out.push((root, s.start));
    }
    let mut i = 0;
    while i < out.len() {
        let parent = out[i].0;
        for (p, s) in &stats {
            if s.ppid == parent as i64 && !s.zombie && !out.iter().any(|(q, _)| q == p) {
                out.push((*p, s.start));
            }
        }
        i += 1;
    }
    out
}

fn start_time(pid: u32) -> Option<u64> {
    read_stat(pid).map(|s| s.start)
}

fn all_pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
}

impl Drop for ServiceProc {
    fn drop(&mut self) {
        self.stop(libc::SIGKILL, Duration::from_secs(2));
    }
}

/// The last `n` lines of a log file (or a note that it could not be read).
pub fn log_tail(path: &Path, n: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let start = bytes.len().saturating_sub(64 * 1024);
            let text = String::from_utf8_lossy(&bytes[start..]);
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(n);
            let tail = lines[from..].join("\n");
            if tail.is_empty() {
                "  (empty)".into()
            } else {
                tail.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
            }
        }
        Err(e) => format!("  (cannot read: {e})"),
    }
}

/// One parsed /proc/<pid>/stat.
struct ProcStat {
    ppid: i64,
    pgrp: i64,
    zombie: bool,
    /// Start time after boot, in clock ticks.
    start: u64,
    /// utime + stime + cutime + cstime, in clock ticks.
    ticks: u64,
}

fn read_stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and ')': fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); field k is f[k - 3].
    let num = |k: usize| f.get(k - 3).and_then(|s| s.parse::<i64>().ok());
    let ticks = [14, 15, 16, 17].iter().map(|&k| num(k).unwrap_or(0).max(0) as u64).sum();
    Some(ProcStat { ppid: num(4)?, pgrp: num(5)?, zombie: f.first() == Some(&"Z"), start: num(22)? as u64, ticks })
}

fn rss_bytes(pid: u32) -> u64 {
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    std::fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()))
        .map(|pages| pages * page)
        .unwrap_or(0)
}

/// A process's PSS and two of its parts, from /proc/<pid>/smaps_rollup
/// (None each when unreadable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pss {
    pub(crate) all: Option<u64>,
    /// `Pss_Anon:` heap, stacks, private mappings.
    pub(crate) anon: Option<u64>,
    /// `Pss_Shmem:` shared memory (PostgreSQL's shared buffers).
    pub(crate) shmem: Option<u64>,
}

fn pss_of(pid: u32) -> Pss {
    match std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) {
        Ok(text) => Pss {
            all: rollup_line(&text, "Pss:"),
            anon: rollup_line(&text, "Pss_Anon:"),
            shmem: rollup_line(&text, "Pss_Shmem:"),
        },
        Err(_) => Pss::default(),
    }
}

/// The value of the rollup's line `key`, in bytes (kB there).
fn rollup_line(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Live processes whose working directory is `dir` (PostgreSQL's postmaster
/// and backends all run in the data directory: this finds backends left
/// behind by a postmaster that was killed, whose parent is no longer it).
pub(crate) fn pids_with_cwd(dir: &Path) -> Vec<u32> {
    let Ok(want) = std::fs::canonicalize(dir) else { return Vec::new() };
    all_pids()
        .filter(|&pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == want) && !is_zombie(pid))
        .collect()
}

/// SIGKILL `pids` (checked against their start times, so a reused pid is
/// spared) and wait up to `grace` until they are gone. Returns those left.
pub(crate) fn kill_and_wait(pids: &[u32], grace: Duration) -> Vec<u32> {
    let targets: Vec<(u32, u64)> = pids.iter().filter_map(|&p| Some((p, start_time(p)?))).collect();
    let alive = |t: &[(u32, u64)]| -> Vec<(u32, u64)> {
        t.iter().copied().filter(|&(p, s)| start_time(p) == Some(s) && !is_zombie(p)).collect()
    };
    let deadline = Instant::now() + grace;
    let mut left = alive(&targets);
    while !left.is_empty() {
        for &(pid, _) in &left {
            // SAFETY: plain syscall; pid checked against its start time.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        left = alive(&left);
    }
    left.into_iter().map(|(p, _)| p).collect()
}

/// Send `signal` to the process group `pgid` and to every live descendant of
/// its leader (PostgreSQL backends run in groups of their own).
pub(crate) fn signal_service(pgid: u32, signal: i32) -> Result<(), std::io::Error> {
    let family = family(pgid);
    // SAFETY: plain syscalls.
    let r = unsafe { libc::killpg(pgid as libc::pid_t, signal) };
    let group_err = (r != 0).then(std::io::Error::last_os_error);
    for (pid, _) in family.into_iter().skip(1) {
        unsafe {
            libc::kill(pid as libc::pid_t, signal);
        }
    }
    match group_err {
        Some(e) if e.raw_os_error() != Some(libc::ESRCH) => Err(e),
        _ => Ok(()),
    }
}

/// Live processes whose process group is `pgid`.
pub(crate) fn group_members(pgid: u32) -> impl Iterator<Item = u32> {
    all_pids().filter(move |&pid| read_stat(pid).is_some_and(|s| s.pgrp == pgid as i64 && !s.zombie))
}

/// Live processes of a service: its process group and the leader's descendants.
pub(crate) fn service_pids(leader: u32) -> Vec<u32> {
    let mut v: Vec<u32> = family(leader).into_iter().map(|(p, _)| p).collect();
    for p in group_members(leader) {
        if !v.contains(&p) {
            v.push(p);
        }
    }
    v
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| t.rfind(')').map(|i| t[i + 1..].trim_start().starts_with('Z')))
        .unwrap_or(false)
}

/// CPU time and memory of one service at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    pub service: Service,
    /// Pid of the service's leader process (its process group id).
    pub pid: u32,
    /// Live processes of the service: its process group and the leader's
    /// descendants (PostgreSQL: postmaster + backends, which run in process
    /// groups of their own).
    pub processes: usize,
    /// CPU seconds (user + system) of the service's live processes, plus what
    /// they collected from children they reaped (so backends that ended still
    /// count). Take two samples: CPU % = Δcpu_seconds / Δwall × 100.
    pub cpu_seconds: f64,
    /// Sum of resident set sizes of those processes (pages shared between
    /// processes, e.g. PostgreSQL's shared buffers, count once per process).
    pub rss_bytes: u64,
    /// When the sample was taken.
    pub at: Instant,
}

pub(crate) fn sample_group(service: Service, pgid: u32) -> ProcessSample {
    let at = Instant::now();
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut processes = 0;
    let mut ticks = 0u64;
    let mut rss = 0u64;
    for pid in service_pids(pgid) {
        if let Some(s) = read_stat(pid) {
            processes += 1;
            ticks += s.ticks;
            rss += rss_bytes(pid);
        }
    }
    ProcessSample { service, pid: pgid, processes, cpu_seconds: ticks as f64 / tick, rss_bytes: rss, at }
}

/// CPU time and memory of one process of a tree (`tree_usage`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcUsage {
    pub pid: u32,
    /// The program's name: its first argument's last path part, up to a
    /// colon (PostgreSQL's backends rename themselves "postgres: …"); a
    /// program that runs a subcommand of itself is named with it
    /// ("scalebench reference-historian").
    pub name: String,
    /// CPU seconds (user + system, and what it reaped from its children).
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    /// Proportional set size: its resident pages, each shared page divided
    /// among the processes sharing it, so a multi-process service's PSS
    /// adds up where its RSS counts shared memory once per process
    /// (PostgreSQL's backends and its shared buffers). `None` when
    /// /proc/<pid>/smaps_rollup cannot be read: not measured, never zero.
    pub pss_bytes: Option<u64>,
    /// The anonymous part of the PSS: heap, stacks and private mappings,
    /// where a leak grows. Shared memory (PostgreSQL's shared buffers, a
    /// cache bounded by its setting, which fills as data arrives) and mapped
    /// files are left out. `None` when unreadable.
    pub pss_anon_bytes: Option<u64>,
    /// The shared-memory part of the PSS (PostgreSQL's shared buffers: a
    /// cache that fills up to its configured size as the backends touch
    /// it, then stays). `None` when unreadable.
    pub pss_shmem_bytes: Option<u64>,
}

/// Every live process of the tree under `root` (itself included).
pub fn tree_usage(root: u32) -> Vec<ProcUsage> {
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    family(root)
        .into_iter()
        .filter_map(|(pid, _)| {
            let stat = read_stat(pid)?;
            let pss = pss_of(pid);
            Some(ProcUsage {
                pid,
                name: program_name(pid),
                cpu_seconds: stat.ticks as f64 / tick,
                rss_bytes: rss_bytes(pid),
                pss_bytes: pss.all,
                pss_anon_bytes: pss.anon,
                pss_shmem_bytes: pss.shmem,
            })
        })
        .collect()
}

fn program_name(pid: u32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let first = args.first().map(String::as_str).unwrap_or_default();
    let first = first.split(':').next().unwrap_or_default().split_whitespace().next().unwrap_or_default();
    let name = match first.rsplit('/').next().filter(|n| !n.is_empty()) {
        Some(n) => n.to_string(),
        None => return std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string(),
    };
    // A subcommand: a second argument that is a plain word, not a flag or a path.
    match args
        .get(1)
        .filter(|a| !a.is_empty() && a.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !a.starts_with('-'))
    {
        Some(sub) => format!("{name} {sub}"),
        None => name,
    }
}

/// Is a process with this pid alive (and not a zombie)?
pub fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid)
}

/// A process someone else runs, identified by pid *and* start time so a
/// reused pid is never mistaken for it (`--watch SERVICE=pid:PID`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForeignProcess {
    pub pid: u32,
    start: u64,
}

impl ForeignProcess {
    /// The process now running as `pid`, or None if there is none.
    pub fn find(pid: u32) -> Option<ForeignProcess> {
        let s = read_stat(pid).filter(|s| !s.zombie)?;
        Some(ForeignProcess { pid, start: s.start })
    }

    /// Still the same process, and not a zombie?
    pub fn alive(&self) -> bool {
        read_stat(self.pid).is_some_and(|s| !s.zombie && s.start == self.start)
    }

    /// CPU seconds and resident bytes of the process and its descendants
    /// (a server's workers count); None once it is gone.
    pub fn usage(&self) -> Option<(f64, u64)> {
        if !self.alive() {
            return None;
        }
        let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let (mut ticks, mut rss) = (0u64, 0u64);
        for pid in service_pids(self.pid) {
            if let Some(s) = read_stat(pid) {
                ticks += s.ticks;
                rss += rss_bytes(pid);
            }
        }
        Some((ticks as f64 / tick, rss))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_lists_every_descendant_by_its_program_name() {
        use std::os::unix::process::CommandExt;
        // A group of its own, killed whole: the backgrounded sleep does not
        // outlive the test holding its output open.
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "/bin/sleep 5 & exec /bin/sleep 5.5"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let tree = tree_usage(child.id());
        // SAFETY: plain syscall on the group this test started.
        unsafe {
            libc::killpg(child.id() as libc::pid_t, libc::SIGKILL);
        }
        let _ = child.wait();
        let names: Vec<&str> = tree.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["sleep", "sleep"], "{tree:?}");
        assert!(tree.iter().all(|p| p.rss_bytes > 0), "{tree:?}");
        assert_eq!(tree[0].pid, child.id());
        // Two copies of one program share their code and libc's: each
        // one's PSS is below its RSS, and the two add up to less.
        for p in &tree {
            let pss = p.pss_bytes.unwrap_or_else(|| panic!("PSS not read: {p:?}"));
            assert!(pss > 0 && pss < p.rss_bytes, "{tree:?}");
        }
        let (pss, rss): (u64, u64) =
            (tree.iter().map(|p| p.pss_bytes.unwrap()).sum(), tree.iter().map(|p| p.rss_bytes).sum());
        assert!(pss < rss, "PSS {pss} vs RSS {rss}: {tree:?}");
    }

    /// A leak grows the anonymous PSS; a shared cache filling up (as
    /// PostgreSQL's shared buffers do) grows the PSS but not its anonymous
    /// part.
    #[test]
    fn heap_grows_the_anonymous_pss_and_shared_memory_the_shared_one() {
        const MB64: usize = 64 << 20;
        let me = std::process::id();
        let p0 = pss_of(me);
        let mut heap = vec![0u8; MB64];
        heap.iter_mut().step_by(4096).for_each(|b| *b = 1);
        let p1 = pss_of(me);
        let shared = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MB64,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(shared, libc::MAP_FAILED);
        let bytes = unsafe { std::slice::from_raw_parts_mut(shared as *mut u8, MB64) };
        bytes.iter_mut().step_by(4096).for_each(|b| *b = 1);
        let p2 = pss_of(me);
        unsafe { libc::munmap(shared, MB64) };
        std::hint::black_box(&heap);
        let mb = |a: Option<u64>, b: Option<u64>| (b.unwrap() as f64 - a.unwrap() as f64) / 1048576.0;
        let heap_moved = (mb(p0.all, p1.all), mb(p0.anon, p1.anon), mb(p0.shmem, p1.shmem));
        assert!(heap_moved.0 > 60.0 && heap_moved.1 > 60.0 && heap_moved.2.abs() < 8.0, "heap: {heap_moved:?}");
        let shared_moved = (mb(p1.all, p2.all), mb(p1.anon, p2.anon), mb(p1.shmem, p2.shmem));
        assert!(
            shared_moved.0 > 60.0 && shared_moved.1.abs() < 8.0 && shared_moved.2 > 60.0,
            "shared memory: {shared_moved:?}"
        );
    }

    #[test]
    fn pss_is_read_from_its_line_in_kilobytes_and_unreadable_is_none() {
        let rollup = "55d0c8a3a000-7ffd1b5f7000 ---p 00000000 00:00 0    [rollup]\nRss:                1664 kB\nPss:                 245 kB\nPss_Dirty:            84 kB\n";
        assert_eq!(rollup_line(rollup, "Pss:"), Some(245 * 1024));
        assert_eq!(rollup_line(rollup, "Pss_Anon:"), None);
        assert_eq!(rollup_line("Rss: 1664 kB\nPss_Anon:  84 kB\n", "Pss_Anon:"), Some(84 * 1024));
        assert_eq!(rollup_line("Rss: 1664 kB\n", "Pss:"), None);
        assert_eq!(rollup_line("Pss: many kB\n", "Pss:"), None);
        assert_eq!(pss_of(u32::MAX), Pss::default());
    }
}
