//! `bench coordinator`: whether one coordinator keeps up with many workers.
//! For each worker count, a child process (this binary, started with a
//! hidden flag so the coordinator's CPU is its own) serves that many
//! simulated workers on loopback ports: the real control API, each worker
//! sending the heartbeats and, once the step is over, the result of its
//! share of a 10M-point step at 5 s (2M readings/s over all of them), with
//! a histogram per second of a 15-minute step (`distributed::simulated`).
//! This process is the real coordinator (`distributed::coordinator`): it
//! connects, takes every worker's clock at the barrier, polls every
//! heartbeat each second and merges every result. Per count: its CPU per
//! second of load, the longest and p99 heartbeat round (each second every
//! worker asked and merged: a round over 3 s would count workers lost), the
//! merge of one result (p99), its resident memory after the step, the
//! barrier and the bytes it took in. With `--faults`, the largest count
//! once more with one worker lost mid-step, one offering 90% of its share
//! and one clock 2 s ahead: each must be named, and no other.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::bench_record::Figure;
use crate::cli::CoordinatorBenchArgs;
use crate::distributed::coordinator::{InitTemplate, Workers};
use crate::distributed::simulated::{self, Faults, Simulation};
use crate::distributed::{token, wire};
use crate::loadgen::{ProducerLive, ProducerReport};
use crate::transport::{AckCounts, Live};

/// What one arm measured.
struct Arm {
    workers: u32,
    /// Coordinator CPU per second of load (1.0 = one core).
    cpu_per_s: f64,
    round_max: Duration,
    round_p99: Duration,
    merge_p99: Duration,
    /// Collecting and merging every result, wall time.
    collect: Duration,
    rss_bytes: u64,
    barrier: Duration,
    bytes_per_s: f64,
    unjudged: Vec<String>,
    bound: Vec<String>,
}

/// The simulated workers' process, stopped when dropped.
struct Simulated {
    child: Child,
    urls: Vec<String>,
}

impl Simulated {
    fn start(n: u32, args: &CoordinatorBenchArgs, faults: bool) -> anyhow::Result<Simulated> {
        let token = token::generate()?;
        let speed = args.step.as_secs_f64() / args.seconds.as_secs_f64().max(0.001);
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.args(["bench", "coordinator", "--serve-simulated", &n.to_string(), "--speed", &speed.to_string()])
            .args(["--seconds", &format!("{}ms", args.seconds.as_millis())])
            .env(token::ENV, &token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if faults {
            cmd.arg("--plant-faults");
        }
        let mut child = cmd.spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("piped")).read_line(&mut line)?;
        let Some(addrs) = line.trim().strip_prefix("simulated ") else {
            let _ = child.kill();
            anyhow::bail!("the simulated workers did not start (they said {line:?})");
        };
        let urls = addrs.split(',').map(|a| format!("http://{a}/?token={token}")).collect();
        Ok(Simulated { child, urls })
    }

    /// Bytes of every answer the simulated workers sent so far.
    fn bytes_sent(&mut self) -> anyhow::Result<u64> {
        writeln!(self.child.stdin.as_mut().expect("piped"), "bytes")?;
        let mut line = String::new();
        BufReader::new(self.child.stdout.as_mut().expect("piped")).read_line(&mut line)?;
        line.trim().parse().map_err(|_| anyhow::anyhow!("the simulated workers said {line:?}, not a byte count"))
    }
}

impl Drop for Simulated {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The hidden side: serve the simulated workers until stdin closes,
/// answering each "bytes" line with the bytes sent so far.
fn serve(n: u32, args: &CoordinatorBenchArgs) -> anyhow::Result<()> {
    let token = std::env::var(token::ENV).map_err(|_| anyhow::anyhow!("{} is not set", token::ENV))?;
    let faults = if args.plant_faults {
        Faults { lost: Some((0, args.seconds / 3)), slow: Some(1), skewed: Some(2) }
    } else {
        Faults::default()
    };
    let sim = Simulation { count: n, token, speed: args.speed, faults };
    let rt = crate::async_runtime::two_threads()?;
    let (addrs, sent) = rt.block_on(simulated::serve(&sim))?;
    let list: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    let mut out = std::io::stdout();
    writeln!(out, "simulated {}", list.join(","))?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        if line?.trim() == "bytes" {
            writeln!(out, "{}", sent.load(std::sync::atomic::Ordering::Relaxed))?;
            out.flush()?;
        }
    }
    drop(rt);
    Ok(())
}

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(((v.len() as f64 * 0.99).ceil() as usize).saturating_sub(1)).copied().unwrap_or_default()
}

/// One arm: the real coordinator through one simulated step of `n` workers.
fn arm(n: u32, args: &CoordinatorBenchArgs, faults: bool) -> anyhow::Result<Arm> {
    let mut sim = Simulated::start(n, args, faults)?;
    let workers = Workers::connect(&sim.urls, Duration::from_secs(30))?;
    workers.init(&InitTemplate {
        connections: 4,
        inflight: 4096,
        http_window: 64,
        ..InitTemplate::simulated(format!("bench-coordinator-{n}"))
    })?;
    workers.prepare(args.points)?;
    let t = Instant::now();
    workers.barrier();
    let barrier = t.elapsed();
    let start_ms = crate::loadgen::start_ms_after(crate::clock::now_ms() + 1000);
    let (cpu0, t0) = (crate::hardware::self_cpu_seconds(), Instant::now());
    workers.start(&wire::Start {
        points: args.points,
        start_ms,
        interval_ms: args.interval.as_millis() as u64,
        warmup_ms: 0,
        duration_ms: args.step.as_millis() as u64,
        sample_period_ms: 1000,
        drain_ms: 5_000,
    });
    let until = Instant::now() + args.seconds + Duration::from_secs(30);
    workers.watch(&ProducerLive::default(), &Live::default(), &AtomicBool::new(false), until);
    let (load_s, cpu) = (t0.elapsed().as_secs_f64(), crate::hardware::self_cpu_seconds() - cpu0);
    let t = Instant::now();
    let finals = workers.collect(Duration::from_secs(30));
    let mut all = AckCounts::default();
    let mut merges = Vec::with_capacity(finals.len());
    for f in &finals {
        let m = Instant::now();
        all.merge(f);
        merges.push(m.elapsed());
    }
    let mut report = ProducerReport::default();
    workers.merge_reports(&mut report);
    let collect = t.elapsed();
    let rss_bytes = crate::hardware::self_rss_bytes();
    let bytes = sim.bytes_sent()?;
    let rounds = workers.heartbeat_rounds();
    let (unjudged, bound) = workers.verdict_notes();
    Ok(Arm {
        workers: n,
        cpu_per_s: cpu / load_s.max(1e-3),
        round_max: rounds.iter().max().copied().unwrap_or_default(),
        round_p99: p99(rounds),
        merge_p99: p99(merges),
        collect,
        rss_bytes,
        barrier,
        bytes_per_s: bytes as f64 / (load_s + collect.as_secs_f64()).max(1e-3),
        unjudged,
        bound,
    })
}

/// With the faults planted: the lost worker (1), the skewed one (3) and the
/// slow one (2) are named, and no other; why not, in words.
fn faults_named(a: &Arm) -> Result<(), String> {
    let n = a.workers;
    let named = |list: &[String], k: u32| list.iter().any(|r| r.contains(&format!("worker {k} of {n} ")));
    let mut wrong = Vec::new();
    if !named(&a.unjudged, 1) || !a.unjudged.iter().any(|r| r.contains("lost")) {
        wrong.push("the lost worker 1 is not named lost".to_string());
    }
    if !named(&a.unjudged, 3) || !a.unjudged.iter().any(|r| r.contains("refused at the barrier")) {
        wrong.push("the skewed worker 3 is not refused at the barrier".into());
    }
    if !named(&a.bound, 2) {
        wrong.push("the slow worker 2 is not named generator-bound".into());
    }
    if a.unjudged.len() != 2 || a.bound.len() != 1 {
        wrong.push(format!("others are named too: {:?} {:?}", a.unjudged, a.bound));
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn run(args: CoordinatorBenchArgs) -> anyhow::Result<()> {
    if let Some(n) = args.serve_simulated {
        return serve(n, &args);
    }
    let usage = |m: &str| crate::error::UsageError(m.to_string());
    anyhow::ensure!(
        !args.workers.is_empty() && args.workers.iter().all(|n| *n >= 1),
        usage("--workers: give worker counts of 1 or more, e.g. 10,50,100")
    );
    anyhow::ensure!(args.seconds >= Duration::from_secs(1), usage("--seconds: give 1s or more"));
    anyhow::ensure!(
        args.step >= args.seconds,
        usage("--step: give at least --seconds (the step plays faster, never slower)")
    );
    anyhow::ensure!(!args.faults || args.workers.iter().max() >= Some(&3), usage("--faults needs 3 workers or more"));
    tracing::info!(
        "bench coordinator: {} workers in turn, each its share of {} points every {} s, a {} s step played in {} s",
        args.workers.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "),
        crate::format::thousands(args.points),
        args.interval.as_secs_f64(),
        args.step.as_secs(),
        args.seconds.as_secs_f64()
    );
    let mut arms = Vec::new();
    for &n in &args.workers {
        let a = arm(n, &args, false)?;
        tracing::info!(
            "  {n} workers: {:.1}% of a core, heartbeat rounds p99 {:.0} ms (longest {:.0} ms), {:.0} MB resident",
            a.cpu_per_s * 100.0,
            ms(a.round_p99),
            ms(a.round_max),
            a.rss_bytes as f64 / 1e6
        );
        arms.push(a);
    }
    println!("| Workers | CPU (% of a core) | Heartbeat round p99 / longest | Merge of a result p99 | Collect and merge | Resident memory | Barrier | Received | Counted lost or refused |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for a in &arms {
        println!(
            "| {} | {:.1} | {:.0} / {:.0} ms | {:.2} ms | {:.2} s | {:.0} MB | {:.0} ms | {:.2} MB/s | {} |",
            a.workers,
            a.cpu_per_s * 100.0,
            ms(a.round_p99),
            ms(a.round_max),
            ms(a.merge_p99),
            a.collect.as_secs_f64(),
            a.rss_bytes as f64 / 1e6,
            ms(a.barrier),
            a.bytes_per_s / 1e6,
            a.unjudged.len()
        );
    }
    let first = &arms[0];
    let mut figures = Vec::new();
    for a in &arms {
        let k = a.workers as f64 / first.workers as f64;
        let linear = format!("{} × {} workers' / {}", a.workers, first.workers, first.workers);
        let big = a.workers >= 100;
        let mut cpu =
            Figure::new(format!("coordinator CPU, {} workers", a.workers), a.cpu_per_s * 100.0, "% of a core")
                .vs(linear.clone(), first.cpu_per_s * 100.0 * k);
        let mut rss = Figure::new(format!("coordinator memory, {} workers", a.workers), a.rss_bytes as f64 / 1e6, "MB")
            .vs(linear, first.rss_bytes as f64 / 1e6 * k);
        if big {
            cpu = cpu.goal("under 25% of a core at 100 workers", a.cpu_per_s < 0.25);
            rss = rss.goal("under 1 GB at 100 workers", a.rss_bytes < 1 << 30);
        }
        let late = Figure::new(format!("longest heartbeat round, {} workers", a.workers), ms(a.round_max), "ms")
            .goal("no worker counted lost or refused", a.unjudged.is_empty());
        figures.extend([cpu, rss, late]);
        figures.push(Figure::new(format!("merge of one result p99, {} workers", a.workers), ms(a.merge_p99), "ms"));
        figures.push(Figure::new(format!("received, {} workers", a.workers), a.bytes_per_s / 1e6, "MB/s"));
    }
    if args.faults {
        let n = *args.workers.iter().max().expect("checked");
        let a = arm(n, &args, true)?;
        let named = faults_named(&a);
        println!(
            "\nfaults among {n}: lost, slow and skewed workers {}",
            named.as_ref().map_or_else(|e| format!("NOT named as planted: {e}"), |_| "named as planted".into())
        );
        for r in a.unjudged.iter().chain(&a.bound) {
            println!("  {r}");
        }
        figures.push(
            Figure::new(
                format!("workers named among {n} with 3 faults"),
                (a.unjudged.len() + a.bound.len()) as f64,
                "workers",
            )
            .goal("exactly the lost, slow and skewed ones", named.is_ok()),
        );
    }
    crate::bench_record::write(&args.record.record, "bench coordinator", figures)?;
    Ok(())
}
