//! `bench workers`: how a distributed run scales. For N = 1, 2, … workers,
//! a Docker Swarm service of N workers, each capped to the same CPU share,
//! offers more than it can to one bare mosquitto (QoS 1, the baler adapter,
//! plant-shaped values, the `run` defaults of 4 connections and a window of
//! 4096 per worker), driven through the same control API a ladder uses;
//! the figure is the acknowledged readings/s summed over the workers (by
//! second of arrival, warm-up excluded), beside N × what one worker did in
//! the same run. The engine must be in a swarm (docs/scale-out.md).

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::bench_record::Figure;
use crate::cli::WorkersBenchArgs;
use crate::distributed::coordinator::{InitTemplate, Workers};
use crate::distributed::swarm::SwarmWorkers;
use crate::distributed::wire;
use crate::loadgen::ProducerLive;
use crate::transport::{AckCounts, Live};

/// Warm-up of each arm: not counted.
const WARMUP_S: u64 = 2;

struct Arm {
    acked_rps: f64,
    cpu_s: f64,
}

fn measure(urls: &[String], broker_port: u16, args: &WorkersBenchArgs) -> anyhow::Result<Arm> {
    let workers = Workers::connect(urls, Duration::from_secs(60))?;
    workers.init(&InitTemplate {
        run_id: format!("bench-{}", crate::clock::now_ms()),
        model: ("plant-shaped".into(), crate::catalog::bytes("plant-shaped")?),
        model_params: "{}".into(),
        target: ("baler".into(), crate::catalog::bytes("baler")?),
        target_params: "{}".into(),
        seed: 1,
        services: vec![wire::Service {
            name: "broker".into(),
            kind: "mqtt".into(),
            address: format!("mqtt://127.0.0.1:{broker_port}"),
        }],
        connections: 4,
        inflight: 4096,
        http_window: 64,
        mqtt_user: None,
        mqtt_password: None,
        mqtt_version: 4,
    })?;
    workers.prepare(args.points)?;
    let refused = workers.barrier();
    anyhow::ensure!(refused.is_empty(), "{}", refused.join("; "));
    let duration = Duration::from_secs(args.seconds.max(WARMUP_S + 1));
    let start_ms = crate::loadgen::start_ms_after(crate::clock::now_ms() + 1000);
    workers.start(&wire::Start {
        points: args.points,
        start_ms,
        interval_ms: args.interval.as_millis() as u64,
        warmup_ms: WARMUP_S * 1000,
        duration_ms: duration.as_millis() as u64,
        sample_period_ms: 1000,
        drain_ms: 5_000,
    });
    workers.watch(
        &ProducerLive::default(),
        &Live::default(),
        &AtomicBool::new(false),
        Instant::now() + duration + Duration::from_secs(30),
    );
    let mut all = AckCounts::default();
    for c in workers.collect(Duration::from_secs(20)) {
        all.merge(&c);
    }
    let (unjudged, _) = workers.verdict_notes();
    anyhow::ensure!(unjudged.is_empty(), "{}", unjudged.join("; "));
    let from = start_ms / 1000 + WARMUP_S as i64;
    let to = (start_ms + duration.as_millis() as i64) / 1000;
    let acked: u64 = all.acked_by_arrival_second.range(from..to).map(|(_, n)| n).sum();
    let cpu_s = workers.figures().iter().filter_map(|f| f.cpu_s).sum();
    Ok(Arm { acked_rps: acked as f64 / (to - from).max(1) as f64, cpu_s })
}

pub fn run(args: WorkersBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.workers >= 1, crate::error::UsageError("--workers: give 1 or more".into()));
    let broker = crate::stack::bare_mosquitto::start_mosquitto()?;
    tracing::info!(
        "bench workers: 1 to {} workers, each capped to {} CPU, against a bare mosquitto on 127.0.0.1:{}, {} points every {} s offered for {} s ({} s warm-up)",
        args.workers,
        args.cpus,
        broker.port,
        crate::format::thousands(args.points),
        args.interval.as_secs_f64(),
        args.seconds,
        WARMUP_S
    );
    let rt = crate::async_runtime::two_threads()?;
    let mut arms: Vec<(u32, Arm)> = Vec::new();
    for n in 1..=args.workers {
        let spec = SwarmWorkers {
            workers: n,
            image: args.image.clone(),
            cpus: args.cpus,
            memory_bytes: 1 << 30,
            first_port: args.port,
            run_id: format!("bench-{n}-{}", crate::clock::now_ms()),
            token: crate::distributed::token::generate()?,
        };
        let service = rt.block_on(spec.start(Duration::from_secs(120)))?;
        let measured = measure(&service.urls, broker.port, &args);
        // The service goes whatever happened.
        rt.block_on(service.remove());
        let arm = measured?;
        tracing::info!("  {n} worker(s): {:.0} acked readings/s ({:.1} CPU s)", arm.acked_rps, arm.cpu_s);
        arms.push((n, arm));
    }
    let one = arms[0].1.acked_rps;
    println!("| Workers | Acked readings/s | Per worker | N × one worker | Ratio to linear | Worker CPU s |");
    println!("|---|---|---|---|---|---|");
    let mut figures = Vec::new();
    for (n, a) in &arms {
        let linear = one * *n as f64;
        let ratio = if linear > 0.0 { a.acked_rps / linear } else { 0.0 };
        println!(
            "| {n} | {:.0} | {:.0} | {:.0} | {ratio:.2} | {:.1} |",
            a.acked_rps,
            a.acked_rps / *n as f64,
            linear,
            a.cpu_s
        );
        let mut f = Figure::new(format!("{n} worker(s) at {} CPU each", args.cpus), a.acked_rps, "acked readings/s")
            .vs(format!("{n} × one worker"), linear);
        if *n == args.workers && *n > 1 {
            f = f.ratio_goal(0.8);
        }
        figures.push(f);
    }
    crate::bench_record::write(&args.record.record, "bench workers", figures)?;
    Ok(())
}
