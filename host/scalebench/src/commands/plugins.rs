//! `scalebench plugins list|inspect`.

use plugin_runtime::{NoServices, Plugin, ProbeSet, TargetAdapter, ValueModel, World};
use std::sync::Arc;

use crate::catalog;
use crate::cli::{PluginOptions, PluginsArgs, PluginsCommand};

/// The contract this binary was built with: what `plugins wit` prints.
const CONTRACT: &str = include_str!("../../../../wit/plugin.wit");

pub fn run(opts: &PluginOptions, args: PluginsArgs) -> anyhow::Result<()> {
    if let PluginsCommand::Wit = args.command {
        print!("{CONTRACT}");
        return Ok(());
    }
    let rt = catalog::runtime(&opts.limits())?;
    match args.command {
        PluginsCommand::Wit => unreachable!("printed above"),
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
