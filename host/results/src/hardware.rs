//! What machine a run ran on, and what this process costs: read from /proc,
//! `sched_getaffinity`, `statvfs`, `uname` and `getrusage` (Linux). Every
//! reader degrades to an empty or zero value rather than failing a run: a
//! result with "unknown" CPU model is still a result.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

/// CPUs this process may run on (as `nproc` counts them: the affinity mask),
/// falling back to the online CPUs.
pub fn nproc() -> u32 {
    if let Some(cpus) = affinity_cpus() {
        if !cpus.is_empty() {
            return cpus.len() as u32;
        }
    }
    std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1)
}

/// `model name` from /proc/cpuinfo (first CPU); on machines without it
/// (some ARM), `Hardware`/`Processor`/`cpu model`.
pub fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    for key in ["model name", "Hardware", "Processor", "cpu model", "cpu"] {
        for line in text.lines() {
            if let Some((k, v)) = line.split_once(':') {
                if k.trim() == key && !v.trim().is_empty() {
                    return Some(v.split_whitespace().collect::<Vec<_>>().join(" "));
                }
            }
        }
    }
    None
}

fn affinity_cpus() -> Option<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // writes at most size_of::<cpu_set_t>() bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        Some((0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
    }
}

/// CPUs as ranges: [0, 1, 2, 5, 7, 8] → "0-2,5,7-8".
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}

/// The CPUs this process may run on, e.g. "0-1".
pub fn cpu_affinity() -> Option<String> {
    affinity_cpus().map(|c| cpu_list(&c))
}

fn meminfo_kib(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// MemTotal from /proc/meminfo, in bytes.
pub fn ram_bytes() -> Option<u64> {
    meminfo_kib("MemTotal").map(|k| k * 1024)
}

/// Bytes available to an unprivileged user on the filesystem holding `dir`
/// (`f_bavail × f_frsize`). A `dir` that does not exist yet is measured at
/// its nearest existing ancestor.
pub fn disk_free_bytes(dir: &Path) -> Option<u64> {
    let mut p = dir;
    while !p.exists() {
        p = p.parent()?;
    }
    if p.as_os_str().is_empty() {
        p = Path::new(".");
    }
    let c = CString::new(p.as_os_str().as_bytes()).ok()?;
    // SAFETY: c is a valid NUL-terminated path; st is written by statvfs.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return None;
        }
        Some(st.f_bavail as u64 * st.f_frsize as u64)
    }
}

/// Load averages over 1, 5 and 15 minutes.
pub fn load_avg() -> Option<(f64, f64, f64)> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|x| x.parse::<f64>().ok());
    Some((it.next()??, it.next()??, it.next()??))
}

/// The 1-minute load average (0 when unknown).
pub fn load_avg_1m() -> f64 {
    load_avg().map(|l| l.0).unwrap_or(0.0)
}

/// (kernel "Linux 6.1.0-18-amd64 x86_64", hostname).
/// The kernel release and the host name.
pub fn uname() -> (String, String) {
    // SAFETY: a zeroed utsname is valid; uname fills NUL-terminated fields.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return (String::new(), String::new());
        }
        let s = |f: &[libc::c_char]| CStr::from_ptr(f.as_ptr()).to_string_lossy().into_owned();
        (format!("{} {} {}", s(&u.sysname), s(&u.release), s(&u.machine)), s(&u.nodename))
    }
}

/// The commit checked out in `repo_dir` (HEAD), with "-dirty" when tracked
/// files have changes (untracked files do not count). None when `git` is
/// missing or `repo_dir` is not in a repository.
pub fn git_commit(repo_dir: &Path) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(repo_dir).args(["rev-parse", "--verify", "HEAD"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let head = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if head.is_empty() {
        return None;
    }
    let st = Command::new("git")
        .arg("-C")
        .arg(repo_dir)
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()?;
    if !st.status.success() {
        return Some(head);
    }
    Some(if st.stdout.iter().any(|b| !b.is_ascii_whitespace()) { format!("{head}-dirty") } else { head })
}

fn rusage() -> Option<libc::rusage> {
    // SAFETY: getrusage fills the zeroed struct.
    unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        (libc::getrusage(libc::RUSAGE_SELF, &mut r) == 0).then_some(r)
    }
}

/// CPU seconds (user + system) this process has used so far, all threads.
/// From `getrusage` (µs resolution, where /proc/self/stat has 10 ms ticks).
pub fn self_cpu_seconds() -> f64 {
    rusage()
        .map(|r| {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            tv(r.ru_utime) + tv(r.ru_stime)
        })
        .unwrap_or(0.0)
}

/// CPU time (ns) the calling thread has used so far.
pub fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0 {
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    } else {
        0
    }
}

fn status_kib(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Resident memory of this process now (VmRSS of /proc/self/status).
pub fn self_rss_bytes() -> u64 {
    status_kib("VmRSS").map(|k| k * 1024).unwrap_or(0)
}

/// Highest resident memory of this process so far (VmHWM of /proc/self/status).
pub fn self_peak_rss_bytes() -> u64 {
    status_kib("VmHWM").map(|k| k * 1024).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        assert_eq!(cpu_list(&[0, 1]), "0-1");
        assert_eq!(cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(cpu_list(&[3]), "3");
        assert_eq!(cpu_list(&[]), "");
    }

    #[test]
    fn git() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        if let Some(c) = git_commit(here) {
            assert!(c.len() >= 40 && c[..40].bytes().all(|b| b.is_ascii_hexdigit()), "{c}");
        }
        assert_eq!(git_commit(Path::new("/")), None);
    }
}
