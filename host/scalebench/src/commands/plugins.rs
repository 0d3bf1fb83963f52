//! `scalebench plugins list|inspect|wit|new|check`.

use plugin_runtime::{NoServices, Plugin, ProbeSet, TargetAdapter, ValueModel, World};
use std::sync::Arc;

use crate::catalog;
use crate::cli::{PluginOptions, PluginsArgs, PluginsCommand};

use crate::plugin_templates::{self, TemplateKind, CONTRACT};

pub fn run(opts: &PluginOptions, args: PluginsArgs) -> anyhow::Result<()> {
    let command = match args.command {
        PluginsCommand::Wit => {
            print!("{CONTRACT}");
            return Ok(());
        }
        PluginsCommand::New { kind, name, dir } => return new(kind, &name, dir),
        PluginsCommand::Check(args) => return super::plugins_check::run(opts, args),
        other => other,
    };
    let rt = catalog::runtime(&opts.limits())?;
    match command {
        PluginsCommand::Wit | PluginsCommand::New { .. } | PluginsCommand::Check(_) => unreachable!("handled above"),
        PluginsCommand::List => {
            println!("{:<16} {:<15} {:<8} summary", "name", "kind", "version");
            for (name, _) in catalog::builtin() {
                let plugin = catalog::load(&rt, name)?;
                let info = info(&rt, &plugin)?;
                println!("{:<16} {:<15} {:<8} {}", name, plugin.world.name(), info.version, info.summary);
            }
            println!("\nAny of these, or a path to a .wasm component, can be given to --model, --target or --probes.");
        }
        PluginsCommand::Inspect { plugin } => {
            let p = catalog::load(&rt, &plugin)?;
            let info = info(&rt, &p)?;
            println!("name:         {}", info.name);
            println!("given as:     {}", p.name);
            println!("kind:         {}", p.world);
            println!("version:      {}", info.version);
            println!("abi:          {}", info.abi);
            println!("summary:      {}", info.summary);
            println!("size:         {} bytes", p.size_bytes);
            println!("sha256:       {}", p.sha256);
            println!(
                "loaded in:    {:.2} ms ({})",
                p.load_time.as_secs_f64() * 1e3,
                if p.from_cache { "compile cache" } else { "compiled" }
            );
            println!("exports:      {}", p.exports.join(", "));
            println!("imports:      {}", p.imports.join(", "));
            println!("default params:\n  {}", info.default_params);
            println!("params schema:\n{}", info.params_schema);
            if p.world == World::TargetAdapter {
                let mut a = TargetAdapter::instantiate(&rt, &p, Arc::new(NoServices))?;
                let http = a
                    .configure(&info.default_params)
                    .is_ok_and(|plan| matches!(plan.transport, plugin_runtime::adapter_types::TransportPlan::Http));
                if http && !a.has_http_ingest() {
                    println!("warning:      {}", crate::transport::http::NO_HTTP_INGEST);
                }
            }
        }
    }
    Ok(())
}

fn info(rt: &plugin_runtime::Runtime, p: &Plugin) -> anyhow::Result<plugin_runtime::types::PluginInfo> {
    Ok(match p.world {
        World::ValueModel => ValueModel::instantiate(rt, p)?.info,
        World::ProbeSet => ProbeSet::instantiate(rt, p, Arc::new(NoServices))?.info,
        World::TargetAdapter => TargetAdapter::instantiate(rt, p, Arc::new(NoServices))?.info,
    })
}

/// `plugins new`: the project, then the next three commands.
fn new(kind: TemplateKind, name: &str, dir: Option<std::path::PathBuf>) -> anyhow::Result<()> {
    let dir = dir.unwrap_or_else(|| std::path::PathBuf::from(name));
    plugin_templates::write(kind, name, &dir).map_err(|e| super::usage(e.to_string()))?;
    let wasm = format!("target/wasm32-wasip2/release/{}", plugin_templates::artifact(name));
    let try_it = match kind {
        TemplateKind::Model => format!("scalebench gen --model {wasm} --tags 10 --samples 3"),
        TemplateKind::Probes => {
            format!("scalebench run --target baler --probes {wasm} --budgets budgets.json --steps 1k --warmup 2s --soak 10s")
        }
        _ => format!("scalebench run --target {wasm} --steps 1k --warmup 2s --soak 10s"),
    };
    println!("wrote {} ({}, {name}); next:", dir.display(), kind.describe());
    println!("  cd {}", dir.display());
    println!("  cargo build --release --target wasm32-wasip2");
    println!("  scalebench plugins check {wasm}");
    println!("  {try_it}");
    println!("docs/plugin-authoring.md of scalebench explains every call.");
    Ok(())
}
