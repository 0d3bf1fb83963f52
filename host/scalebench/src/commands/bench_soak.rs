//! `scalebench bench soak`: is anything leaking? One ladder step held for a
//! long time (an hour by default) on the built-in local stack, a real
//! `scalebench run` of this binary. Every `--every` this process reads the
//! run's process tree from /proc (scalebench itself and each stack process:
//! mosquitto, PostgreSQL's postmaster and backends, the reference
//! historian) and prints memory and CPU by program: proportional set size
//! (PSS: each shared page divided among the processes sharing it, so
//! PostgreSQL's backends and shared buffers add up to what the service
//! holds), its anonymous part (heap PSS: where a leak grows, without
//! shared memory nor mapped files), its shared-memory part (shared PSS:
//! PostgreSQL's shared buffers, a cache that fills up to its configured
//! size as data arrives, then stays) and resident memory (RSS, which
//! counts a shared page once per process). At the end it prints each
//! program's PSS, heap PSS, shared PSS and RSS growth from
//! the first ten minutes to the last ten (a third of the run each, when it
//! is shorter than half an hour), as MB per hour, against a goal of under
//! 5 MB/h, with the largest rise between two looks and when it came (a leak
//! climbs at every look; a one-off, such as the read probes at mid-soak,
//! all at once), and the step's own verdict.
//!
//! A benchmark prints figures; it asserts nothing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::bench_record::{self, Figure};
use crate::cli::SoakBenchArgs;
use crate::results::RunResult;
use crate::units::{duration_text, points_text};

/// One look at the tree: per program, resident bytes and CPU seconds.
struct Look {
    /// Seconds since the bench started, and since the epoch.
    at_s: f64,
    unix_s: f64,
    rss: BTreeMap<String, u64>,
    /// `None` when any of the program's processes could not be read.
    pss: BTreeMap<String, Option<u64>>,
    /// The anonymous part of the PSS (heap), as `pss`.
    anon: BTreeMap<String, Option<u64>>,
    /// The shared-memory part of the PSS, as `pss`.
    shmem: BTreeMap<String, Option<u64>>,
    cpu_s: BTreeMap<String, f64>,
}

fn look(root: u32, started: Instant) -> Look {
    let mut rss = BTreeMap::new();
    let mut pss: BTreeMap<String, Option<u64>> = BTreeMap::new();
    let mut anon: BTreeMap<String, Option<u64>> = BTreeMap::new();
    let mut shmem: BTreeMap<String, Option<u64>> = BTreeMap::new();
    let mut cpu_s = BTreeMap::new();
    for p in local_stack::tree_usage(root) {
        *rss.entry(p.name.clone()).or_insert(0) += p.rss_bytes;
        for (map, bytes) in [(&mut pss, p.pss_bytes), (&mut anon, p.pss_anon_bytes), (&mut shmem, p.pss_shmem_bytes)] {
            let sum = map.entry(p.name.clone()).or_insert(Some(0));
            *sum = sum.zip(bytes).map(|(a, b)| a + b);
        }
        *cpu_s.entry(p.name).or_insert(0.0) += p.cpu_seconds;
    }
    let unix_s = crate::clock::now_ms() as f64 / 1e3;
    Look { at_s: started.elapsed().as_secs_f64(), unix_s, rss, pss, anon, shmem, cpu_s }
}

/// Which memory figure a window averages.
#[derive(Clone, Copy)]
enum Memory {
    Pss,
    /// The anonymous part of the PSS: heap, where a leak grows, without
    /// shared memory (a cache bounded by its setting) or mapped files.
    Anon,
    /// The shared-memory part of the PSS: PostgreSQL's shared buffers, a
    /// cache that fills up to its configured size, then stays.
    Shmem,
    Rss,
}

impl Memory {
    fn of(self, l: &Look, name: &str) -> Option<u64> {
        match self {
            Memory::Pss => l.pss.get(name).copied().flatten(),
            Memory::Anon => l.anon.get(name).copied().flatten(),
            Memory::Shmem => l.shmem.get(name).copied().flatten(),
            Memory::Rss => l.rss.get(name).copied(),
        }
    }
    fn word(self) -> &'static str {
        match self {
            Memory::Pss => "PSS",
            Memory::Anon => "heap PSS",
            Memory::Shmem => "shared PSS",
            Memory::Rss => "RSS",
        }
    }
}

/// (seconds since the epoch, MB) of `what` of `name` at each look in
/// `[from, to]` that measured it.
fn measured_mb(looks: &[Look], what: Memory, name: &str, from: f64, to: f64) -> Vec<(f64, f64)> {
    looks
        .iter()
        .filter(|l| l.unix_s >= from && l.unix_s <= to)
        .filter_map(|l| what.of(l, name).map(|b| (l.unix_s, b as f64 / 1e6)))
        .collect()
}

/// Mean MB (`what`) of `name` over the looks in `[from, to]` (seconds
/// since the epoch) that measured it, and the window's middle.
fn window_mb(looks: &[Look], what: Memory, name: &str, from: f64, to: f64) -> Option<(f64, f64)> {
    let v = measured_mb(looks, what, name, from, to);
    if v.is_empty() {
        return None;
    }
    let n = v.len() as f64;
    Some((v.iter().map(|x| x.1).sum::<f64>() / n, v.iter().map(|x| x.0).sum::<f64>() / n))
}

fn print_look(l: &Look, prev: Option<&Look>) {
    let parts: Vec<String> = l
        .rss
        .iter()
        .map(|(name, b)| {
            let cpu = prev
                .and_then(|p| p.cpu_s.get(name).map(|c0| (l.cpu_s[name] - c0).max(0.0) / (l.at_s - p.at_s).max(1e-3)))
                .map(|f| format!(" {:.0}%", f * 100.0))
                .unwrap_or_default();
            let mb = |m: Memory| match m.of(l, name) {
                Some(p) => format!("{} {:.0} MB", m.word(), p as f64 / 1e6),
                None => format!("{} n/m", m.word()),
            };
            format!(
                "{name} {} ({}, {}, RSS {:.0} MB){cpu}",
                mb(Memory::Pss),
                mb(Memory::Anon),
                mb(Memory::Shmem),
                *b as f64 / 1e6
            )
        })
        .collect();
    println!("{:>6.1} min  {}", l.at_s / 60.0, parts.join(", "));
}

/// The largest rise of `what` between two consecutive looks in `[from,
/// to]`, in MB, and when (seconds since the epoch): a trend climbs a little
/// at every look, a one-off (the mid-soak read probes) all at once.
fn largest_rise(looks: &[Look], what: Memory, name: &str, (from, to): (f64, f64)) -> Option<(f64, f64)> {
    let v = measured_mb(looks, what, name, from, to);
    v.windows(2).map(|w| (w[1].1 - w[0].1, w[1].0)).max_by(|a, b| a.0.total_cmp(&b.0))
}

/// The growth a soak may show: under 5 MB an hour, each program.
const GROWTH_GOAL_MB_PER_H: f64 = 5.0;

/// One program's growth of one memory figure, first window to last: printed,
/// and its figures for the record.
fn growth(looks: &[Look], what: Memory, name: &str, (from, to): (f64, f64), w: f64) -> Vec<Figure> {
    let label = what.word();
    match (window_mb(looks, what, name, from, from + w), window_mb(looks, what, name, to - w, to)) {
        (Some((first, t0)), Some((last, t1))) if t1 > t0 => {
            let per_h = (last - first) / (t1 - t0) * 3600.0;
            let jump = largest_rise(looks, what, name, (from, to))
                .map(|(mb, at)| {
                    format!(
                        "   largest rise between two looks: {mb:+.1} MB at {:.1} min of the soak",
                        (at - from) / 60.0
                    )
                })
                .unwrap_or_default();
            println!("  {name:<32} {label} {first:>8.1} MB -> {last:>8.1} MB   {per_h:+.1} MB/h{jump}");
            let growth = Figure::new(format!("{label} growth of {name}"), per_h, "MB/h");
            // Shared memory is a cache its program sizes by setting: how
            // much of the PSS growth it is, not a leak goal of its own.
            let growth = match what {
                Memory::Shmem => growth,
                _ => growth.goal(
                    format!("under {GROWTH_GOAL_MB_PER_H} MB/h, first window to last"),
                    per_h < GROWTH_GOAL_MB_PER_H,
                ),
            };
            vec![
                growth,
                Figure::new(format!("{label} of {name}, last window"), last, "MB").vs("the first window", first),
            ]
        }
        _ => {
            println!("  {name:<32} {label} not measured in both windows (a process that came and went, or unreadable)");
            Vec::new()
        }
    }
}

pub fn run(args: SoakBenchArgs) -> anyhow::Result<()> {
    if args.duration < Duration::from_secs(10) {
        anyhow::bail!(
            "--duration {} is too short to see a trend: give 10 s or more (an hour to see a leak)",
            duration_text(args.duration)
        );
    }
    let dir = tempfile::Builder::new().prefix("scalebench-bench-soak-").tempdir()?;
    let results: PathBuf = dir.path().join("results");
    let exe = std::env::current_exe().context("cannot find the scalebench binary")?;
    let warmup = Duration::from_secs(30).min(args.duration / 4);
    tracing::info!(
        "bench soak: {} + {}, {} points every {}, held {} (warm-up {})",
        args.target,
        args.model,
        points_text(args.points),
        duration_text(args.interval),
        duration_text(args.duration),
        duration_text(warmup)
    );
    let mut child = Command::new(exe)
        .args(["run", "--target", &args.target, "--model", &args.model, "--steps", &points_text(args.points)])
        .args(["--interval", &duration_text(args.interval), "--warmup", &duration_text(warmup)])
        .args(["--soak", &duration_text(args.duration), "--sample-every", &duration_text(args.every)])
        .args(["--base-port", &super::bench_stacks::free_base_port().to_string()])
        .arg("--results-dir")
        .arg(&results)
        .stdout(Stdio::null())
        .spawn()
        .context("cannot run scalebench")?;
    let started = Instant::now();
    let root = child.id();
    println!(
        "{:>10}  proportional memory (PSS, and its heap and shared-memory parts), resident memory (RSS) and CPU (100% = a core) by program, scalebench's run and its stack",
        "time"
    );
    let mut looks: Vec<Look> = Vec::new();
    let mut next = started + args.every;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= next {
            next += args.every;
            let l = look(root, started);
            print_look(&l, looks.last());
            looks.push(l);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    if !status.success() {
        tracing::info!("bench soak: the run ended with {status}; the figures below are what was seen");
    }
    // The soak's span, as the run's result gives it (the stack's start and
    // stop are not load); every look when there is no result.
    let result = RunResult::find_in(&results).map(|file| RunResult::load(&file)).transpose()?;
    let soak = result.as_ref().and_then(|r| r.steps.first()).map(|s| {
        let t0 = s.series.start_unix_s as f64;
        (t0 + s.series.soak_from_s, t0 + s.series.load_end_s)
    });
    let (load_from, load_to) =
        soak.unwrap_or_else(|| (looks.first().map_or(0.0, |l| l.unix_s), looks.last().map_or(0.0, |l| l.unix_s)));
    let w = ((load_to - load_from) / 3.0).min(600.0);
    let names: Vec<String> = looks
        .iter()
        .filter(|l| l.unix_s >= load_from && l.unix_s <= load_to)
        .flat_map(|l| l.rss.keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    println!(
        "growth of memory: mean of the first {} of the soak vs the last {} (goal: under {GROWTH_GOAL_MB_PER_H} MB/h)",
        duration_text(Duration::from_secs(w as u64)),
        duration_text(Duration::from_secs(w as u64))
    );
    let mut figures = Vec::new();
    for name in &names {
        for what in [Memory::Pss, Memory::Anon, Memory::Shmem, Memory::Rss] {
            figures.extend(growth(&looks, what, name, (load_from, load_to), w));
        }
    }
    match &result {
        Some(r) => {
            for s in &r.steps {
                let why = s.reasons.first().map(|r| format!(": {r}")).unwrap_or_default();
                println!("the step at {} points: {:?}{why}", points_text(s.points), s.status);
            }
        }
        None => println!("the run wrote no result file: the windows are the first and last looks"),
    }
    bench_record::write(&args.record.record, "bench soak", figures)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(unix_s: f64, mb: u64) -> Look {
        let name = "run".to_string();
        Look {
            at_s: unix_s,
            unix_s,
            rss: BTreeMap::from([(name.clone(), mb * 1_000_000)]),
            pss: BTreeMap::from([(name.clone(), Some(mb * 1_000_000))]),
            anon: BTreeMap::from([(name.clone(), Some(mb * 500_000))]),
            shmem: BTreeMap::from([(name.clone(), Some(mb * 100_000))]),
            cpu_s: BTreeMap::from([(name, 0.0)]),
        }
    }

    #[test]
    fn a_one_off_rise_is_named_with_its_time_and_a_look_outside_the_soak_is_not() {
        let looks = vec![at(0.0, 10), at(60.0, 11), at(120.0, 12), at(180.0, 40), at(240.0, 41), at(300.0, 500)];
        let (mb, when) = largest_rise(&looks, Memory::Pss, "run", (0.0, 250.0)).unwrap();
        assert_eq!((mb, when), (28.0, 180.0));
        assert!(largest_rise(&looks, Memory::Rss, "other", (0.0, 250.0)).is_none());
    }

    /// A cache filling (shared memory) shows as PSS growth, judged, and as
    /// shared PSS growth, reported beside it; the heap, flat, meets the goal.
    #[test]
    fn a_filling_cache_is_shared_pss_growth_and_the_heap_stays_flat() {
        let filling = |unix_s: f64, shared_mb: u64| {
            let name = "postgres".to_string();
            let mb = |m: u64| BTreeMap::from([(name.clone(), Some(m * 1_000_000))]);
            Look {
                at_s: unix_s,
                unix_s,
                rss: BTreeMap::from([(name.clone(), (40 + shared_mb) * 1_000_000)]),
                pss: mb(40 + shared_mb),
                anon: mb(30),
                shmem: mb(shared_mb),
                cpu_s: BTreeMap::from([(name.clone(), 0.0)]),
            }
        };
        let looks: Vec<Look> = (0..=60).map(|m| filling(m as f64 * 60.0, (m as u64 * 20).min(120))).collect();
        let by = |what: Memory| growth(&looks, what, "postgres", (0.0, 3600.0), 600.0);
        let (pss, heap, shared) = (by(Memory::Pss), by(Memory::Anon), by(Memory::Shmem));
        assert_eq!(pss[0].goal_met, Some(false), "{pss:?}");
        assert_eq!(heap[0].goal_met, Some(true), "{heap:?}");
        assert!(heap[0].value.abs() < 0.01, "{heap:?}");
        assert_eq!((shared[0].goal_met, shared[0].value), (None, pss[0].value), "{shared:?}");
    }
}
