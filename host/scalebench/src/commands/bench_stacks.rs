//! `scalebench bench stacks`: what containers cost. The same short ladder on
//! the local stack (child processes) and the Docker stack (capped
//! containers), one after the other in one run, side by side: stored/s,
//! p95 lag and CPU / memory per service. Each arm is a real `scalebench run`
//! of this binary, so nothing here measures differently from a user's run.
//!
//! A benchmark prints figures; it asserts nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

use crate::cli::StacksBenchArgs;
use crate::format::group;
use crate::results::RunResult;
use crate::units::{duration_text, points_text};

fn arm(args: &StacksBenchArgs, stack: &str, dir: &Path) -> anyhow::Result<RunResult> {
    let results = dir.join(stack);
    let exe = std::env::current_exe().context("cannot find the scalebench binary")?;
    // The child reads them back as the user wrote them (`1k,2.5k`, `30s`).
    let steps = args.steps.iter().map(|p| points_text(*p)).collect::<Vec<_>>().join(",");
    let (soak, warmup) = (duration_text(args.soak), duration_text(args.warmup));
    tracing::info!("bench stacks: --stack {stack}, steps {steps}, soak {soak}");
    let status = Command::new(exe)
        .args(["run", "--target", &args.target, "--model", &args.model, "--stack", stack, "--steps", &steps])
        .args(["--soak", &soak, "--warmup", &warmup, "--continue-on-fail"])
        .args(["--base-port", &free_base_port().to_string()])
        .arg("--results-dir")
        .arg(&results)
        // Its own table would interleave with ours; its progress stays on stderr.
        .stdout(std::process::Stdio::null())
        .status()
        .context("cannot run scalebench")?;
    if !status.success() {
        tracing::info!("bench stacks: the --stack {stack} run ended with {status}; its measured steps are shown");
    }
    let file: PathBuf =
        RunResult::find_in(&results).with_context(|| format!("the --stack {stack} run wrote no result file"))?;
    RunResult::load(&file)
}

/// A base port with the ten ports above it free (the stacks take a few).
pub(crate) fn free_base_port() -> u16 {
    (21_000..29_000).step_by(100).find(|b| local_stack::guard::claim_run(*b, 10)).unwrap_or(21_883)
}

use crate::bench_record::{self, Figure};

pub fn run(args: StacksBenchArgs) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new().prefix("scalebench-bench-stacks-").tempdir()?;
    let local = arm(&args, "local", dir.path())?;
    let docker = arm(&args, "docker", dir.path())?;
    println!(
        "the same ladder on the local stack and the Docker stack ({} + {}, {} soak), nproc {}",
        args.target,
        args.model,
        duration_text(args.soak),
        crate::hardware::nproc()
    );
    println!(
        "{:<10} {:<8} {:<7} {:>10} {:>10}  CPU % (100 = a core) / peak RSS MB per service",
        "points", "stack", "status", "stored/s", "p95 lag"
    );
    for (i, step) in local.steps.iter().enumerate() {
        for (name, s) in [("local", Some(step)), ("docker", docker.steps.get(i))] {
            let Some(s) = s else { continue };
            let per_service: Vec<String> = s
                .resources
                .iter()
                .map(|(svc, r)| format!("{svc} {:.0}%/{:.0}", r.cpu_percent, r.rss_bytes_max as f64 / 1e6))
                .collect();
            println!(
                "{:<10} {:<8} {:<7} {:>10} {:>10}  {}",
                group(s.points),
                name,
                format!("{:?}", s.status).to_lowercase(),
                s.ingest.stored_rps.map(|r| group(r as u64)).unwrap_or_else(|| "n/m".into()),
                crate::format::measured_seconds(s.lag.p95_s),
                per_service.join(", ")
            );
        }
    }
    println!("RSS: local = the process's resident set (PostgreSQL's includes its shared buffers); docker = the container's memory use as the engine reports it.");
    if let Some(caps) = Some(&docker.caps).filter(|c| !c.is_empty()) {
        let caps: Vec<String> = caps.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        println!("docker caps: {}", caps.join("; "));
    }
    let mut figures = Vec::new();
    for (i, step) in local.steps.iter().enumerate() {
        let (Some(l), Some(d)) = (step.ingest.stored_rps, docker.steps.get(i).and_then(|s| s.ingest.stored_rps)) else {
            continue;
        };
        figures.push(
            Figure::new(format!("stored/s on the Docker stack at {} points", step.points), d, "readings/s")
                .vs("the local stack", l),
        );
    }
    bench_record::write(&args.record.record, "bench stacks", figures)?;
    Ok(())
}
