//! Run plans: every `run` flag as a key of a TOML file (`run --plan
//! FILE.toml`), the resolved plan every result records, and `run --again
//! RESULT` that runs a recorded plan again. A plan is expanded into flags
//! before the command line is parsed, so the file and the command line go
//! through the same parsers and messages; a flag given on the command line
//! replaces the file's key. Keys are the flags' long names (`steps`,
//! `target-params`; `_` may stand for `-`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use clap::{ArgAction, ArgMatches, Command};

use crate::error::UsageError;
pub use crate::results::PlanValue;

/// A resolved plan: every `run` flag with a value, by long name.
pub type Plan = BTreeMap<String, PlanValue>;

/// Flags that say how the plan was given, never part of one.
const NOT_PLAN: &[&str] = &["plan", "again", "help"];

fn usage(msg: String) -> UsageError {
    UsageError(msg)
}

/// The `run` subcommand of the command line.
fn run_command(cli: &Command) -> &Command {
    cli.find_subcommand("run").expect("scalebench has a run subcommand")
}

/// `argv` with a `run --plan FILE` or `run --again RESULT` expanded into the
/// plan's flags (placed before the command line's own, and left out where
/// the command line gives the same flag); unchanged without either.
pub fn expand(argv: Vec<OsString>, cli: &Command) -> Result<Vec<OsString>, UsageError> {
    let Some(run_at) = argv.iter().position(|a| a == "run") else { return Ok(argv) };
    let rest: Vec<String> = argv[run_at + 1..].iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let given = |flag: &str| -> Option<String> {
        let eq = format!("--{flag}=");
        rest.iter().enumerate().find_map(|(i, a)| {
            if a == &format!("--{flag}") {
                rest.get(i + 1).cloned()
            } else {
                a.strip_prefix(&eq).map(String::from)
            }
        })
    };
    let (plan, source) = match (given("plan"), given("again")) {
        (None, None) => return Ok(argv),
        (Some(_), Some(_)) => {
            return Err(usage(
                "--plan and --again both give a plan: use one (flags on the command line change either)".into(),
            ))
        }
        (Some(file), None) => (read_plan(Path::new(&file))?, file),
        (None, Some(result)) => (read_recorded(Path::new(&result))?, result),
    };
    let on_command_line: Vec<String> = rest
        .iter()
        .filter_map(|a| a.strip_prefix("--"))
        .map(|a| a.split('=').next().unwrap_or(a).to_string())
        .collect();
    if let Some(result) = given("again") {
        check_plugins(Path::new(&result), &on_command_line)?;
    }
    let run = run_command(cli);
    let mut flags = Vec::new();
    for (key, value) in &plan {
        let long = key.replace('_', "-");
        if on_command_line.contains(&long) {
            continue;
        }
        flags.extend(to_flags(run, &long, value, &source)?);
    }
    let mut out = argv[..=run_at].to_vec();
    out.extend(flags.into_iter().map(OsString::from));
    out.extend(argv[run_at + 1..].iter().cloned());
    Ok(out)
}

/// A plan file: TOML whose keys are `run` flags.
fn read_plan(path: &Path) -> Result<Plan, UsageError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        usage(format!("cannot read the plan {}: {e}\nhint: give the path of a TOML file", path.display()))
    })?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        usage(format!(
            "{} is not a TOML plan: {}\nhint: one `flag = value` per line, e.g. steps = \"1k,2.5k\"",
            path.display(),
            e.message()
        ))
    })?;
    table.into_iter().map(|(k, v)| Ok((k.clone(), from_toml(&k, v, path)?))).collect()
}

fn from_toml(key: &str, v: toml::Value, path: &Path) -> Result<PlanValue, UsageError> {
    let scalar = |v: &toml::Value| -> Option<String> {
        match v {
            toml::Value::String(s) => Some(s.clone()),
            toml::Value::Integer(i) => Some(i.to_string()),
            toml::Value::Float(f) => Some(f.to_string()),
            toml::Value::Datetime(d) => Some(d.to_string()),
            _ => None,
        }
    };
    Ok(match v {
        toml::Value::Boolean(b) => PlanValue::Flag(b),
        toml::Value::Array(items) => PlanValue::Many(
            items
                .iter()
                .map(|i| {
                    scalar(i).ok_or_else(|| {
                        usage(format!("{}: `{key}` lists something that is not a value (a list or a table)\nhint: a list of strings, e.g. {key} = [\"a\", \"b\"]", path.display()))
                    })
                })
                .collect::<Result<_, _>>()?,
        ),
        toml::Value::Table(_) => {
            return Err(usage(format!(
                "{}: `{key}` is a table, but a plan's keys are flags with values\nhint: write {key} = \"...\" (JSON params go in a string: target-params = '{{\"prefix\": \"x\"}}')",
                path.display()
            )))
        }
        other => PlanValue::One(scalar(&other).unwrap_or_default()),
    })
}

/// The plan a result recorded.
fn read_recorded(path: &Path) -> Result<Plan, UsageError> {
    let r = crate::results::RunResult::load(path).map_err(|e| usage(format!("--again: {e:#}")))?;
    if r.plan.is_empty() {
        return Err(usage(format!(
            "--again: {} records no plan (it was written by an older scalebench)\nhint: run its command line again: {}",
            path.display(),
            r.command_line.join(" ")
        )));
    }
    Ok(r.plan)
}

/// A plugin the recorded run loaded has changed since (by content hash):
/// refused by name, unless the command line gives that flag anew.
fn check_plugins(result: &Path, on_command_line: &[String]) -> Result<(), UsageError> {
    let r = crate::results::RunResult::load(result).map_err(|e| usage(format!("--again: {e:#}")))?;
    for (key, then) in &r.plugins {
        let Some((kind, spec)) = key.split_once(':') else { continue };
        let flag = if kind == "probes" { "probes" } else { kind };
        if on_command_line.iter().any(|f| f == flag) {
            continue;
        }
        let now = match crate::catalog::bytes(spec) {
            Ok(bytes) => plugin_runtime::wasm_sha256(&bytes),
            Err(_) => {
                return Err(usage(format!(
                    "--again: the {kind} plugin {spec} that run {} loaded is gone\nhint: build it again at that path, or give --{flag} anew",
                    r.run_id
                )))
            }
        };
        if &now != then {
            return Err(usage(format!(
                "--again: the {kind} plugin {spec} changed since run {} (sha256 {} then, {} now)\nhint: rebuild the plugin that run used, or give --{flag} to run with this one",
                r.run_id,
                &then[..then.len().min(12)],
                &now[..now.len().min(12)]
            )));
        }
    }
    Ok(())
}

/// The flags one key stands for.
fn to_flags(run: &Command, long: &str, value: &PlanValue, source: &str) -> Result<Vec<String>, UsageError> {
    let known = || run.get_arguments().filter_map(|a| a.get_long()).filter(|l| !NOT_PLAN.contains(l));
    if NOT_PLAN.contains(&long) {
        return Err(usage(format!("{source}: `{long}` cannot be a key of a plan (it says where a plan comes from)")));
    }
    let Some(arg) = run.get_arguments().find(|a| a.get_long() == Some(long)) else {
        let nearest = known().min_by_key(|k| strsim::levenshtein(k, long)).unwrap_or("steps");
        return Err(usage(format!(
            "{source}: `{long}` is not a flag of `scalebench run`; the nearest is `{nearest}`\nhint: the keys are the flags of `scalebench run --help`, without the dashes"
        )));
    };
    let flag = format!("--{long}");
    let what = arg.get_value_names().and_then(|n| n.first()).map(|n| n.to_string()).unwrap_or_else(|| "VALUE".into());
    Ok(match (arg.get_action(), value) {
        (ArgAction::SetTrue, PlanValue::Flag(true)) => vec![flag],
        (ArgAction::SetTrue, PlanValue::Flag(false)) => vec![],
        (ArgAction::SetTrue, _) => {
            return Err(usage(format!("{source}: `{long}` is a switch: write {long} = true, or leave it out")))
        }
        (_, PlanValue::Flag(_)) => {
            return Err(usage(format!("{source}: `{long}` takes a value ({what}), not true or false")))
        }
        (ArgAction::Append, PlanValue::Many(items)) => items.iter().flat_map(|i| [flag.clone(), i.clone()]).collect(),
        (_, PlanValue::Many(_)) => {
            return Err(usage(format!(
                "{source}: `{long}` takes one value ({what}), not a list\nhint: several steps are one string: steps = \"1k,2.5k\""
            )))
        }
        (_, PlanValue::One(v)) => vec![flag, v.clone()],
    })
}

/// The resolved plan of a parsed `run`: every flag that has a value (given
/// or default), switches that are on. What `plan show` prints and every
/// result records.
pub fn resolved(m: &ArgMatches, cli: &Command) -> Plan {
    let mut plan = Plan::new();
    for arg in run_command(cli).get_arguments() {
        let (Some(long), id) = (arg.get_long(), arg.get_id().as_str()) else { continue };
        if NOT_PLAN.contains(&long) {
            continue;
        }
        match arg.get_action() {
            ArgAction::SetTrue => {
                if m.get_flag(id) {
                    plan.insert(long.into(), PlanValue::Flag(true));
                }
            }
            action => {
                let Some(raw) = m.get_raw(id) else { continue };
                let values: Vec<String> = raw.map(|v| v.to_string_lossy().into_owned()).collect();
                let v = match (action, values.len()) {
                    (ArgAction::Append, _) => PlanValue::Many(values),
                    (_, 0) => continue,
                    _ => PlanValue::One(values[0].clone()),
                };
                plan.insert(long.into(), v);
            }
        }
    }
    plan
}

/// A plan as TOML, the way `--plan` reads it.
pub fn to_toml(plan: &Plan) -> String {
    let mut t = toml::Table::new();
    for (k, v) in plan {
        let v = match v {
            PlanValue::Flag(b) => toml::Value::Boolean(*b),
            PlanValue::One(s) => toml::Value::String(s.clone()),
            PlanValue::Many(items) => toml::Value::Array(items.iter().cloned().map(toml::Value::String).collect()),
        };
        t.insert(k.clone(), v);
    }
    toml::to_string(&t).unwrap_or_default()
}
