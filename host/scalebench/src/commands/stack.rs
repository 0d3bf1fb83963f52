//! `scalebench stack up|status|down --stack docker`: a Docker stack a user
//! can look at between runs. `down` removes only what carries the project's
//! label, and only scale_* volumes.

use std::sync::Arc;

use crate::cli::{PluginOptions, StackArgs, StackCommand, StackKind, UsageError};
use crate::commands::stack_start::{compose_env, compose_file_for, parse_cap};
use crate::stack::docker::{self, DockerOptions, DockerStack};
use crate::stack::StackDriver;

/// `nats_sync_interval` only for `up`: the other verbs start nothing.
fn options(
    opts: &PluginOptions,
    a: &StackArgs,
    nats_sync_interval: Option<&str>,
) -> anyhow::Result<(DockerOptions, String)> {
    if a.stack != StackKind::Docker {
        return Err(UsageError(
            "`scalebench stack` manages Docker stacks only (--stack docker); local stacks live as long as their run"
                .into(),
        )
        .into());
    }
    let rt = crate::catalog::runtime(&opts.limits())?;
    let plugin = crate::catalog::load(&rt, &a.target)?;
    let mut adapter = plugin_runtime::TargetAdapter::instantiate(&rt, &plugin, Arc::new(plugin_runtime::NoServices))?;
    let plan = adapter.configure(&a.target_params).map_err(crate::catalog::user_error)?;
    let file = a.compose.clone().unwrap_or_else(|| compose_file_for(&plan, a.nodes));
    let stem = file.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    let project =
        a.project
            .clone()
            .unwrap_or_else(|| if stem == "nats-3" { "scale-nats3".into() } else { format!("scale-{stem}") });
    let env = compose_env(a.base_port, nats_sync_interval)?;
    let mut caps = std::collections::BTreeMap::new();
    for c in &a.cap {
        let (svc, cap) = parse_cap(c).map_err(UsageError)?;
        caps.insert(svc, cap);
    }
    let run_dir = a.run_dir.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("scalebench-stack-{project}")));
    Ok((
        DockerOptions {
            compose_file: file,
            project: Some(project.clone()),
            run_dir,
            env,
            caps,
            cpuset: a.cpuset.clone(),
            checkout_dir: std::env::current_dir().unwrap_or_else(|_| ".".into()),
            ready_timeout: std::time::Duration::from_secs(90),
            nats_sync_interval: nats_sync_interval.map(str::to_string),
            tls: None,
        },
        project,
    ))
}

pub fn run(opts: &PluginOptions, what: StackCommand) -> anyhow::Result<()> {
    let rt = crate::async_runtime::two_threads()?;
    rt.block_on(async move {
        match what {
            StackCommand::Up(up) => {
                let (o, project) = options(opts, &up.stack, up.nats_sync_interval.as_deref())?;
                let stack = DockerStack::up(&o, false).await?;
                println!("{project} is up (env file {}):", o.run_dir.join("scale.env").display());
                for e in stack.services() {
                    println!("  {:<10} {}", e.name, e.address);
                }
                for (svc, cap) in stack.caps() {
                    println!("  cap {svc}: {cap}");
                }
                println!("take it down with: scalebench stack down --stack docker --project {project}");
            }
            StackCommand::Status(a) => {
                let (_, project) = options(opts, &a, None)?;
                let d = docker::connect().await?;
                let list = docker::project_status(&d, &project).await?;
                if list.is_empty() {
                    println!("{project}: no containers");
                }
                for (svc, state, status) in list {
                    println!("{project} {svc:<12} {state:<10} {status}");
                }
            }
            StackCommand::Down(a) => {
                let (_, project) = options(opts, &a, None)?;
                let d = docker::connect().await?;
                let removed = docker::remove_project(&d, &project, true).await?;
                if removed.is_empty() {
                    println!("{project}: nothing to remove");
                }
                for r in removed {
                    println!("removed {r}");
                }
            }
        }
        anyhow::Ok(())
    })
}
