//! A probe set against its contract: `setup` builds well-formed probes from a
//! run's points (unique names, a description each, a service or database
//! and a path or statement), `check` refuses what is not an answer (an HTTP
//! 500, an answer of the wrong kind), every probe has a budget a run can
//! hold it to, and setup stays inside the host's limits (with figures).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use plugin_runtime::probe_types::{Probe, ProbeRequest, ProbeResponse};
use plugin_runtime::types::{HttpResponse, SqlRows, TagInfo};
use plugin_runtime::{HostServices, Plugin, ProbeSet, Runtime};

use super::{mib, ms, Report};
use crate::budgets::Budgets;

/// A probe set under check. `points` is a run's topology (the check takes
/// the built-in plant-shaped model's); `params` None means its own defaults.
pub struct ProbeCheck<'a> {
    pub rt: &'a Runtime,
    pub plugin: &'a Plugin,
    pub params: Option<&'a str>,
    pub points: &'a [TagInfo],
    pub budgets: &'a Budgets,
    pub services: Arc<dyn HostServices>,
}

/// The probe set's findings, into `report`.
pub fn check(c: ProbeCheck<'_>, report: &mut Report) {
    if let Err(e) = calls(c, report) {
        report.fail(
            format!("calls: {e}"),
            "a call trapped or was refused: fix the plugin so every call of its world returns",
        );
    }
}

/// The checks that call into the plugin (a trap or refusal ends them).
fn calls(c: ProbeCheck<'_>, report: &mut Report) -> Result<(), plugin_runtime::PluginError> {
    let ProbeCheck { rt, plugin, params, points, budgets, services } = c;
    let mut ps = ProbeSet::instantiate(rt, plugin, services)?;
    report.pass(format!("loads as a probe set named `{}`", ps.info.name));
    let params = params.map(str::to_string).unwrap_or_else(|| ps.info.default_params.clone());
    let t0 = Instant::now();
    let probes = match ps.setup(&crate::credentials::without_login(&params), points) {
        Ok(p) => p,
        Err(e) => {
            report.fail(
                format!("setup builds the probes for {} points: {e}", points.len()),
                "setup must succeed with the default params (a probe set that logs in does so when a run starts; here it gets no password)",
            );
            return Ok(());
        }
    };
    let setup_time = t0.elapsed();
    report.expect(!probes.is_empty(), format!("setup gives {} probe(s)", probes.len()), "return at least one probe");
    well_formed(&probes, report);
    for p in &probes {
        refuses_non_answers(&mut ps, p, report)?;
    }
    has_budgets(&ps.info.name, &probes, budgets, report);
    report.figure(format!(
        "setup for {} points: {}; memory {} of the {} limit",
        points.len(),
        ms(setup_time),
        mib(ps.memory_bytes()),
        mib(rt.limits().memory_bytes)
    ));
    Ok(())
}

fn well_formed(probes: &[Probe], report: &mut Report) {
    let mut names = BTreeSet::new();
    let dup = probes.iter().find(|p| !names.insert(p.name.as_str()));
    report.expect(
        dup.is_none(),
        "probe names are unique",
        format!(
            "`{}` is given twice: budgets and results key probes by name",
            dup.map(|p| p.name.as_str()).unwrap_or("")
        ),
    );
    let bare = probes.iter().find(|p| p.name.trim().is_empty() || p.description.trim().is_empty());
    report.expect(
        bare.is_none(),
        "every probe has a name and a description",
        "give each probe a name (matched against budgets.json) and one line on what a user of the system is doing with it",
    );
    let bad = probes.iter().find_map(|p| match &p.request {
        ProbeRequest::Http(r) if r.service.is_empty() || !r.path.starts_with('/') => Some(format!(
            "`{}` asks {:?} for {:?}: name a service of the run and a path starting with /",
            p.name, r.service, r.path
        )),
        ProbeRequest::Sql(q) if q.database.is_empty() || q.statement.trim().is_empty() => {
            Some(format!("`{}` names no database or has an empty statement", p.name))
        }
        _ => None,
    });
    report.expect(bad.is_none(), "every request names where it goes and what it asks", bad.unwrap_or_default());
}

/// `check` must refuse an answer that is not one: an HTTP 500 (for an HTTP
/// probe) and an answer of the other kind (for any probe).
fn refuses_non_answers(ps: &mut ProbeSet, p: &Probe, report: &mut Report) -> Result<(), plugin_runtime::PluginError> {
    let server_error = ProbeResponse::Http(HttpResponse {
        status: 500,
        headers: vec![("content-type".into(), "text/plain".into())],
        body: b"internal server error".to_vec(),
    });
    let empty_sql = ProbeResponse::Sql(SqlRows { columns: vec![], rows: vec![] });
    let (wrong, what) = match p.request {
        ProbeRequest::Http(_) => (&server_error, "an HTTP 500 answer"),
        ProbeRequest::Sql(_) => (&server_error, "an HTTP answer to a SQL probe"),
    };
    let refused = ps.check(&p.name, wrong)?;
    report.expect(
        refused.is_err(),
        format!("check refuses {what} to `{}`{}", p.name, refused.as_ref().err().map(|r| format!(" ({r})")).unwrap_or_default()),
        "return Err from check when the answer is not a valid one: a timed read that failed must not count as a fast read",
    );
    if let ProbeRequest::Http(_) = p.request {
        let refused = ps.check(&p.name, &empty_sql)?;
        report.expect(
            refused.is_err(),
            format!("check refuses SQL rows as the answer to HTTP probe `{}`", p.name),
            "check the answer's kind before reading it",
        );
    }
    Ok(())
}

fn has_budgets(set: &str, probes: &[Probe], budgets: &Budgets, report: &mut Report) {
    let file = budgets.path.display();
    let Some(own) = budgets.for_set(set) else {
        let snippet: Vec<String> = probes
            .iter()
            .map(|p| format!("\"{}\": {{\"budget_s\": 1.0, \"source\": \"provisional\"}}", p.name))
            .collect();
        report.fail(
            format!("{file} has budgets for probe set `{set}`"),
            format!(
                "add under \"probe_sets\": \"{set}\": {{{}}} (or give your own file with --budgets)",
                snippet.join(", ")
            ),
        );
        return;
    };
    let missing: Vec<&str> = probes.iter().map(|p| p.name.as_str()).filter(|n| own.get(n).is_none()).collect();
    report.expect(
        missing.is_empty(),
        format!("every probe has a budget in {file}"),
        format!("add budgets for {} under \"probe_sets\".\"{set}\"", missing.join(", ")),
    );
}
