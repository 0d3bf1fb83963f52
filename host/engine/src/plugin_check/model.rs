//! A value model against its contract: it configures with its own defaults,
//! describes its points consistently, gives the same bytes for the same
//! (seed, point, sample) in any order and on any instance, `series` agrees
//! with `sample` bit for bit, values are finite and fit their kind, and one
//! full call stays far inside the host's limits (with figures). Clocks and
//! randomness are refused when the plugin loads (see `load_refusal`).

use std::collections::BTreeSet;
use std::time::Instant;

use plugin_runtime::{Limits, Plugin, Runtime, ValueModel, POINTS_PER_CALL};

use super::{mib, ms, Report};

/// Points the consistency checks look at, and samples of each.
const POINTS: u32 = 1000;
const SAMPLES: u64 = 24;
const SEED: u64 = 42;

/// A model's findings; `params` None means its own defaults.
pub fn check(rt: &Runtime, plugin: &Plugin, params: Option<&str>, report: &mut Report) {
    if let Err(e) = run(rt, plugin, params, report) {
        report.fail(
            format!("calls: {e}"),
            "a call trapped or was refused: fix the plugin so every call of its world returns",
        );
    }
}

fn instance(rt: &Runtime, plugin: &Plugin, params: &str) -> Result<ValueModel, plugin_runtime::PluginError> {
    let mut m = ValueModel::instantiate(rt, plugin)?;
    m.configure(params)?;
    Ok(m)
}

fn run(
    rt: &Runtime,
    plugin: &Plugin,
    params: Option<&str>,
    report: &mut Report,
) -> Result<(), plugin_runtime::PluginError> {
    report.pass("loads as a value model; imports only logging: no clock, randomness, files or network");
    let mut m = ValueModel::instantiate(rt, plugin)?;
    let params = params.map(str::to_string).unwrap_or_else(|| m.info.default_params.clone());
    let schema_ok = serde_json::from_str::<serde_json::Value>(&m.info.params_schema).is_ok();
    report.expect(
        schema_ok,
        "info() gives its params schema as JSON",
        "return a JSON Schema object in params-schema (`{\"type\":\"object\"}` at least)",
    );
    if let Err(e) = m.configure(&params) {
        report.fail(
            format!("configure accepts its params ({params}): {e}"),
            "configure must accept the default-params info() gives",
        );
        return Ok(());
    }
    report.pass(format!("configure accepts its params ({params})"));
    let period = m.sample_period_ms()?;
    report.expect(period > 0, format!("sample period: {period} ms"), "sample-period-ms must be above 0");
    if period == 0 {
        return Ok(());
    }

    let tags = m.tags(SEED, 0, POINTS)?;
    check_tags(&mut m, &tags, report)?;

    // Values: a matrix of SAMPLES × POINTS from one instance …
    let samples: Vec<u64> = (0..SAMPLES).chain([1_000_000, 1_786_400_000_000 / period]).collect();
    let mut first = Vec::new();
    for &s in &samples {
        first.push(m.sample(SEED, 0, POINTS, s)?);
    }
    // … again from a fresh instance, asked in the opposite order, and again
    // from the first one: a model that keeps state between calls differs.
    let mut fresh = instance(rt, plugin, &params)?;
    let mut again: Vec<Vec<f64>> =
        samples.iter().rev().map(|&s| fresh.sample(SEED, 0, POINTS, s)).collect::<Result<_, _>>()?;
    again.reverse();
    let repeat = m.sample(SEED, 0, POINTS, samples[0])?;
    let differs = first.iter().zip(&again).zip(&samples).find_map(|((a, b), s)| {
        a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits()).map(|t| (t, *s, a[t], b[t]))
    });
    let differs = differs.or_else(|| {
        first[0]
            .iter()
            .zip(&repeat)
            .position(|(x, y)| x.to_bits() != y.to_bits())
            .map(|t| (t, samples[0], first[0][t], repeat[t]))
    });
    match differs {
        None => report.pass(format!(
            "deterministic: the same (seed, point, sample) gives the same bytes on two instances, in any order ({} values)",
            POINTS as u64 * samples.len() as u64 * 2
        )),
        Some((t, s, a, b)) => report.fail(
            format!("deterministic: point {t} at sample {s} was {a} on one call and {b} on another"),
            "make every value a pure function of (seed, point, sample): keep no state between calls (statics, thread-locals, counters, caches that change results)",
        ),
    }

    // series agrees with sample, bit for bit.
    let mut mismatch = None;
    for t in [0, 1, POINTS / 2, POINTS - 1] {
        let series = m.series(SEED, t, 0, SAMPLES as u32)?;
        if let Some(s) =
            (0..SAMPLES as usize).find(|&s| series.get(s).map(|v| v.to_bits()) != Some(first[s][t as usize].to_bits()))
        {
            mismatch = Some((t, s, series.get(s).copied(), first[s][t as usize]));
            break;
        }
    }
    match mismatch {
        None => report.pass("series agrees with sample bit for bit"),
        Some((t, s, got, want)) => report.fail(
            format!("series agrees with sample: point {t} at sample {s}: series gave {got:?}, sample {want}"),
            "compute both from one function of (seed, point, sample)",
        ),
    }

    check_values(&tags, &first, &samples, report);
    measure(&mut m, rt.limits(), report)?;
    Ok(())
}

fn same_tag(a: &plugin_runtime::types::TagInfo, b: &plugin_runtime::types::TagInfo) -> bool {
    (a.index, &a.kind, &a.unit, a.site, a.equip, &a.label, &a.markers)
        == (b.index, &b.kind, &b.unit, b.site, b.equip, &b.label, &b.markers)
}

/// Token-safe in an MQTT topic and a NATS subject.
fn safe_label(label: &str) -> bool {
    !label.is_empty() && !label.chars().any(|c| c.is_whitespace() || matches!(c, '/' | '.' | '+' | '#' | '*' | '>'))
}

fn check_tags(
    m: &mut ValueModel,
    tags: &[plugin_runtime::types::TagInfo],
    report: &mut Report,
) -> Result<(), plugin_runtime::PluginError> {
    let indexed = tags.len() == POINTS as usize && tags.iter().enumerate().all(|(i, t)| t.index as usize == i);
    report.expect(
        indexed,
        format!("tags gives {POINTS} points with their own indexes"),
        "tags(seed, first, count) returns count entries whose index is first, first+1, …",
    );
    let slice = m.tags(SEED, POINTS / 2, 10)?;
    let same = slice.iter().zip(&tags[POINTS as usize / 2..]).all(|(a, b)| same_tag(a, b)) && slice.len() == 10;
    report.expect(
        same,
        "tags of a slice equal the same points asked in a larger call",
        "describe each point from (seed, index) alone, not from where the call started",
    );
    let bad_label = tags.iter().find(|t| !safe_label(&t.label));
    report.expect(
        bad_label.is_none(),
        "labels are safe in an MQTT topic and a NATS subject",
        format!(
            "label {:?} of point {} has a space or one of / . + # * >: adapters build topics and subjects from labels",
            bad_label.map(|t| t.label.as_str()).unwrap_or(""),
            bad_label.map(|t| t.index).unwrap_or(0)
        ),
    );
    let mut seen = BTreeSet::new();
    let dup = tags.iter().find(|t| !seen.insert((t.site, t.equip, t.label.clone())));
    report.expect(
        dup.is_none(),
        "labels are unique within their equip",
        format!(
            "point {} repeats label {:?} in site {} equip {}: two points would share one address",
            dup.map(|t| t.index).unwrap_or(0),
            dup.map(|t| t.label.as_str()).unwrap_or(""),
            dup.map(|t| t.site).unwrap_or(0),
            dup.map(|t| t.equip).unwrap_or(0)
        ),
    );
    let no_kind = tags.iter().find(|t| t.kind.is_empty());
    report.expect(
        no_kind.is_none(),
        "every point names its kind",
        "give each tag-info a kind (temperature, flow, counter, state, …)",
    );
    let kinds: BTreeSet<&str> = tags.iter().map(|t| t.kind.as_str()).collect();
    report.figure(format!("kinds of the first {POINTS} points: {}", kinds.into_iter().collect::<Vec<_>>().join(", ")));
    Ok(())
}

/// Values are finite and fit the kind their point declares: a counter never
/// goes down, a state is a whole number, a percentage stays in 0–100.
fn check_values(tags: &[plugin_runtime::types::TagInfo], values: &[Vec<f64>], samples: &[u64], report: &mut Report) {
    let mut not_finite = None;
    let mut counter_down = None;
    let mut state_fraction = None;
    let mut percent_out = None;
    for (t, tag) in tags.iter().enumerate() {
        for (si, row) in values.iter().enumerate() {
            let v = row.get(t).copied().unwrap_or(f64::NAN);
            if !v.is_finite() && not_finite.is_none() {
                not_finite = Some((t, samples[si], v));
            }
            match tag.kind.as_str() {
                "counter" if si > 0 && samples[si] > samples[si - 1] && v < values[si - 1][t] => {
                    counter_down.get_or_insert((t, samples[si], values[si - 1][t], v));
                }
                "state" if v.fract() != 0.0 => {
                    state_fraction.get_or_insert((t, samples[si], v));
                }
                _ => {}
            }
            if tag.unit == "%" && !(0.0..=100.0).contains(&v) {
                percent_out.get_or_insert((t, samples[si], v));
            }
        }
    }
    report.expect(
        not_finite.is_none(),
        "values are finite",
        match not_finite {
            Some((t, s, v)) => format!("point {t} is {v} at sample {s}: NaN and infinity cannot be sent (JSON has no such number) and show up as loss"),
            None => String::new(),
        },
    );
    // Kinds are the model's word about its values: a model that ignores
    // them on purpose (`noise`: random values on plant-shaped's points) is
    // told, not failed.
    let meaning = |report: &mut Report, applies: bool, ok: bool, what: &str, fix: String| {
        if applies {
            if ok {
                report.pass(what);
            } else {
                report.warn(what, fix);
            }
        }
    };
    let fix = |f: Option<String>| f.unwrap_or_default();
    meaning(
        report,
        tags.iter().any(|t| t.kind == "counter"),
        counter_down.is_none(),
        "counters never go down",
        fix(counter_down.map(|(t, s, a, b)| {
            format!(
                "counter point {t} went from {a} to {b} at sample {s}: a counter only grows (or declare another kind)"
            )
        })),
    );
    meaning(
        report,
        tags.iter().any(|t| t.kind == "state"),
        state_fraction.is_none(),
        "states are whole numbers",
        fix(state_fraction.map(|(t, s, v)| {
            format!(
                "state point {t} is {v} at sample {s}: a state is one of a few whole numbers (or declare another kind)"
            )
        })),
    );
    meaning(
        report,
        tags.iter().any(|t| t.unit == "%"),
        percent_out.is_none(),
        "percentages stay within 0–100",
        fix(percent_out.map(|(t, s, v)| format!("point {t} in % is {v} at sample {s}"))),
    );
}

/// One full call of each per-point function, timed, beside the limits.
fn measure(m: &mut ValueModel, limits: &Limits, report: &mut Report) -> Result<(), plugin_runtime::PluginError> {
    let n = POINTS_PER_CALL as u32;
    let t0 = Instant::now();
    m.tags(SEED, 0, n)?;
    let tags_time = t0.elapsed();
    let mut best = std::time::Duration::MAX;
    for s in 0..5 {
        let t0 = Instant::now();
        m.sample(SEED, 0, n, 1000 + s)?;
        best = best.min(t0.elapsed());
    }
    let limit = limits.call_timeout;
    report.figure(format!(
        "sample of {n} points: {} ({:.0} ns a value; the limit is {} a call); tags of {n} points: {}",
        ms(best),
        best.as_secs_f64() * 1e9 / n as f64,
        ms(limit),
        ms(tags_time)
    ));
    report.expect(
        best < limit / 10 && tags_time < limit / 10,
        format!("one full call stays under a tenth of the call limit ({})", ms(limit / 10)),
        "a run asks for up to 16,384 points a call: make sample and tags cheaper per point",
    );
    let memory = m.memory_bytes();
    report.figure(format!(
        "memory after those calls: {} of the {} limit; a sample call returns {} bytes",
        mib(memory),
        mib(limits.memory_bytes),
        n as u64 * 8
    ));
    report.expect(
        memory < limits.memory_bytes / 2,
        "memory stays under half of the limit",
        "keep no per-point tables that grow with the run; compute from (seed, point)",
    );
    Ok(())
}
