//! `budgets.json`: the read probes' budgets, per probe set:
//!
//! ```json
//! {"probe_sets": {"historian-sql": {"latest-all": {"budget_s": 1.0, "source": "provisional", "note": "why this number"}},
//!                 "haystack": {"about": {"budget_s": 1.0}}}}
//! ```
//!
//! or, the older flat form that applies to whichever probe set runs:
//! `{"probes": {"latest-all": {...}}}`. A run takes the budgets of its probe
//! set by the set's name ([`Budgets::for_set`]).
//!
//! `budget_s` (seconds, > 0) is required; `source` says where the number
//! comes from (an issue, a user's requirement) and is `"provisional"` when
//! omitted; `note` is free text. Unknown fields, a probe given twice and a
//! budget that is not a positive number are errors that name the file, the
//! probe and the field, with a `hint:` line: a typo such as `budget_ms` must
//! never silently leave a probe without a budget. A probe a probe set runs
//! that is not in the file is measured and reported without a budget.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::error::UsageError;

/// The `source` of a budget that does not name one.
pub const PROVISIONAL: &str = "provisional";

/// One probe's budget.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// The probe's limit in seconds, compared with its warm median.
    pub budget_s: f64,
    /// Where the number comes from; "provisional" when nobody set it yet.
    #[serde(default = "provisional")]
    pub source: String,
    #[serde(default)]
    pub note: String,
}

fn provisional() -> String {
    PROVISIONAL.into()
}

/// The limit of a step rule that is not a probe (`step_rules` in the file).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleLimit {
    pub limit_s: f64,
    #[serde(default = "provisional")]
    pub source: String,
    #[serde(default)]
    pub note: String,
}

/// Limits of the rules that catch a SUT that stalls or falls behind its
/// schedule, whatever the generator's buffers (`verdict.rs`):
///
/// ```json
/// {"step_rules": {"ack_latency_p99": {"limit_s": 10, "source": "...", "note": "..."},
///                 "silence": {"limit_s": 5, "source": "...", "note": "..."}}}
/// ```
///
/// Either may be left out (its built-in default applies).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepRules {
    /// Intended-time acknowledgement latency p99 over the soak.
    #[serde(default = "default_ack_latency")]
    pub ack_latency_p99: RuleLimit,
    /// The longest stretch with readings waiting and no answer.
    #[serde(default = "default_silence")]
    pub silence: RuleLimit,
}

const RULES_SOURCE: &str = "built-in default: chosen so a 20 s outage in a 60 s soak fails and a 2 s hiccup passes";

fn default_ack_latency() -> RuleLimit {
    RuleLimit {
        limit_s: 10.0,
        source: RULES_SOURCE.into(),
        note: "p99 of acknowledgement latency from each reading's intended send time (coordinated-omission-safe, as wrk2 measures); a third of a soak frozen puts it at the freeze's length".into(),
    }
}

fn default_silence() -> RuleLimit {
    RuleLimit {
        limit_s: 5.0,
        source: RULES_SOURCE.into(),
        note: "readings waited and the SUT answered nothing for longer than this: a stall, whatever the generator's in-flight window".into(),
    }
}

impl Default for StepRules {
    fn default() -> StepRules {
        StepRules { ack_latency_p99: default_ack_latency(), silence: default_silence() }
    }
}

const RULES_SHAPE: &str = r#"{"step_rules": {"ack_latency_p99": {"limit_s": 10, "source": "...", "note": "..."}, "silence": {"limit_s": 5}}}"#;

fn parse_rules(v: serde_json::Value, file: &Path) -> Result<StepRules, UsageError> {
    let file = file.display();
    let rules: StepRules = serde_json::from_value(v).map_err(|e| {
        UsageError(format!(
            "{file}: `step_rules`: {}\nhint: the step rules look like {RULES_SHAPE} (limits in seconds)",
            crate::serde_words::user_words(&e.to_string())
        ))
    })?;
    for (name, r) in [("ack_latency_p99", &rules.ack_latency_p99), ("silence", &rules.silence)] {
        if !r.limit_s.is_finite() || r.limit_s <= 0.0 {
            return Err(UsageError(format!(
                "{file}: step rule `{name}`: `limit_s` is {}, but a limit must be a number of seconds greater than 0\nhint: leave the rule out to use its built-in default",
                r.limit_s
            )));
        }
    }
    Ok(rules)
}

/// The budgets of a run, by probe name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Budgets {
    /// The file they were read from (empty for [`Budgets::none`]).
    pub path: PathBuf,
    pub probes: BTreeMap<String, Budget>,
    /// Budgets by probe set (the `probe_sets` form); empty for the flat form.
    pub sets: BTreeMap<String, BTreeMap<String, Budget>>,
    /// Limits of the stall and latency rules.
    pub rules: StepRules,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    probes: Entries,
}

/// The `probes` object; refuses a probe given twice (serde would keep the last).
struct Entries(BTreeMap<String, Budget>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Entries, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of probe name -> {\"budget_s\", \"source\", \"note\"}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(name) = map.next_key::<String>()? {
                    if out.contains_key(&name) {
                        return Err(de::Error::custom(format!("probe `{name}` is given twice")));
                    }
                    let b: Budget = map.next_value()?;
                    out.insert(name, b);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Any JSON with no object that gives a key twice; the error names the key
/// and what it is (a probe set, a probe, a field) by where it stands.
struct NoDuplicates;

impl<'de> Deserialize<'de> for NoDuplicates {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NoDuplicates, D::Error> {
        d.deserialize_any(Walk { parent: None, grandparent: None })
    }
}

/// A value inside the object keyed `parent`, itself keyed `grandparent`.
#[derive(Clone, Copy)]
struct Walk<'a> {
    parent: Option<&'a str>,
    grandparent: Option<&'a str>,
}

impl<'de> de::DeserializeSeed<'de> for Walk<'_> {
    type Value = NoDuplicates;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<NoDuplicates, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = NoDuplicates;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NoDuplicates, A::Error> {
        let mut seen = std::collections::BTreeSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                let what = match (self.grandparent, self.parent) {
                    (_, Some("probe_sets")) => "probe set",
                    (_, Some("probes")) | (Some("probe_sets"), _) => "probe",
                    (_, Some("step_rules")) => "step rule",
                    _ => "field",
                };
                return Err(de::Error::custom(format!("{what} `{key}` is given twice")));
            }
            map.next_value_seed(Walk { parent: Some(&key), grandparent: self.parent })?;
            seen.insert(key);
        }
        Ok(NoDuplicates)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<NoDuplicates, A::Error> {
        while seq.next_element_seed(Walk { parent: None, grandparent: None })?.is_some() {}
        Ok(NoDuplicates)
    }
    fn visit_bool<E>(self, _: bool) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_i64<E>(self, _: i64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_u64<E>(self, _: u64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_f64<E>(self, _: f64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_str<E>(self, _: &str) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_unit<E>(self) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
}

const SHAPE: &str = r#"{"probes": {"<probe name>": {"budget_s": 1.0, "source": "provisional", "note": "..."}}}"#;
const SETS_SHAPE: &str =
    r#"{"probe_sets": {"<probe set>": {"<probe name>": {"budget_s": 1.0, "source": "provisional", "note": "..."}}}}"#;
const FIELDS_HINT: &str = "hint: each probe takes `budget_s` (seconds, required, > 0), `source` (where the number comes from; \"provisional\" if omitted) and `note` (free text)";

impl Budgets {
    /// No budgets: every probe is measured and reported without one.
    pub fn none() -> Budgets {
        Budgets::default()
    }

    /// Read and check `path`. Errors are [`UsageError`]s (bad input).
    pub fn load(path: &Path) -> anyhow::Result<Budgets> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            UsageError(format!(
                "cannot read budgets file {}: {e}\nhint: give the probes' budgets with --budgets <file> (the repository's is budgets.json)",
                path.display()
            ))
        })?;
        Budgets::parse(&text, path)
    }

    /// Parse `text`; `path` is only used in messages and kept in the result.
    pub fn parse(text: &str, path: &Path) -> anyhow::Result<Budgets> {
        let usage = |msg: String| -> anyhow::Error { UsageError(msg).into() };
        let mut value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            usage(format!("{} is not valid JSON: {e}\nhint: the file looks like {SETS_SHAPE}", path.display()))
        })?;
        // Checked on the text: the forms below go through a JSON value,
        // which keeps only the last of two equal keys.
        if let Err(e) = serde_json::from_str::<NoDuplicates>(text) {
            let msg = e.to_string();
            let msg = msg.strip_suffix(&format!(" at line {} column {}", e.line(), e.column())).unwrap_or(&msg);
            return Err(usage(format!(
                "{}: {msg} (line {}, column {})\nhint: give each probe set, probe and rule once",
                path.display(),
                e.line(),
                e.column()
            )));
        }
        let Some(rules) = value.as_object_mut().and_then(|o| o.remove("step_rules")) else {
            return Budgets::parse_probes(text, &value, path);
        };
        let rules = parse_rules(rules, path)?;
        let rest = value.to_string();
        Ok(Budgets { rules, ..Budgets::parse_probes(&rest, &value, path)? })
    }

    fn parse_probes(text: &str, value: &serde_json::Value, path: &Path) -> anyhow::Result<Budgets> {
        let usage = |msg: String| -> anyhow::Error { UsageError(msg).into() };
        let Some(sets) = value.get("probe_sets") else { return Budgets::parse_flat(text, path) };
        let file = path.display();
        if let Some(extra) = value.as_object().and_then(|o| o.keys().find(|k| *k != "probe_sets")) {
            return Err(usage(format!(
                "{file}: unknown field `{extra}` beside `probe_sets`\nhint: the file looks like {SETS_SHAPE}"
            )));
        }
        let Some(sets) = sets.as_object() else {
            return Err(usage(format!("{file}: `probe_sets` must be an object of probe set name -> probes, not {}\nhint: the file looks like {SETS_SHAPE}", kind(sets))));
        };
        let mut out = BTreeMap::new();
        for (name, probes) in sets {
            let one = serde_json::json!({ "probes": probes }).to_string();
            let label = PathBuf::from(format!("{file} (probe set `{name}`)"));
            out.insert(name.clone(), Budgets::parse_flat(&one, &label)?.probes);
        }
        Ok(Budgets { path: path.to_path_buf(), probes: BTreeMap::new(), sets: out, rules: StepRules::default() })
    }

    /// The file a command uses: the one given, else `./budgets.json` when
    /// present, else the built-in one.
    pub fn resolve(given: Option<&Path>) -> anyhow::Result<Budgets> {
        match given {
            Some(p) => Budgets::load(p),
            None if Path::new("budgets.json").exists() => Budgets::load(Path::new("budgets.json")),
            None => Budgets::parse(include_str!("../../../budgets.json"), Path::new("built-in budgets.json")),
        }
    }

    /// The budgets of probe set `name`: its own in the `probe_sets` form,
    /// all of them in the flat form; None when the file has none for it.
    pub fn for_set(&self, name: &str) -> Option<Budgets> {
        if self.sets.is_empty() {
            return Some(self.clone());
        }
        let probes = self.sets.get(name)?.clone();
        Some(Budgets { path: self.path.clone(), probes, sets: BTreeMap::new(), rules: self.rules.clone() })
    }

    /// The probe sets the file has budgets for (empty for the flat form).
    pub fn set_names(&self) -> impl Iterator<Item = &str> {
        self.sets.keys().map(String::as_str)
    }

    /// The flat form, `{"probes": {...}}`.
    fn parse_flat(text: &str, path: &Path) -> anyhow::Result<Budgets> {
        let file = path.display();
        let usage = |msg: String| -> anyhow::Error { UsageError(msg).into() };
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| usage(format!("{file} is not valid JSON: {e}\nhint: the file looks like {SHAPE}")))?;
        let parsed: File = match serde_json::from_str(text) {
            Ok(f) => f,
            Err(e) => return Err(usage(describe(&file.to_string(), &value, &e))),
        };
        let mut probes = parsed.probes.0;
        for (name, b) in &mut probes {
            if name.trim().is_empty() {
                return Err(usage(format!(
                    "{file}: a probe has an empty name\nhint: use the name the probe set gives the probe"
                )));
            }
            if !b.budget_s.is_finite() || b.budget_s <= 0.0 {
                return Err(usage(format!(
                    "{file}: probe `{name}`: `budget_s` is {}, but a budget must be a number of seconds greater than 0\n\
                     hint: to measure a probe without a budget, leave it out of the file",
                    b.budget_s
                )));
            }
            if b.source.trim().is_empty() {
                b.source = PROVISIONAL.into();
            }
        }
        Ok(Budgets { path: path.to_path_buf(), probes, sets: BTreeMap::new(), rules: StepRules::default() })
    }

    pub fn get(&self, probe: &str) -> Option<&Budget> {
        self.probes.get(probe)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.probes.keys().map(String::as_str)
    }
}

/// The message for a file that is JSON but not a budgets file: what is wrong,
/// where (probe, line), and a hint.
fn describe(file: &str, value: &serde_json::Value, e: &serde_json::Error) -> String {
    let mut msg = crate::serde_words::user_words(&e.to_string());
    let loc = format!(" at line {} column {}", e.line(), e.column());
    if let Some(stripped) = msg.strip_suffix(&loc) {
        msg = stripped.to_string();
    }
    let at = format!("(line {}, column {})", e.line(), e.column());
    let Some(top) = value.as_object() else {
        return format!(
            "{file}: the top level must be an object, not {}\nhint: the file looks like {SHAPE}",
            kind(value)
        );
    };
    if top.keys().any(|k| k != "probes") || !top.contains_key("probes") {
        return format!("{file}: {msg} at the top level {at}\nhint: the file has one top-level key, `probes`: {SHAPE}");
    }
    let probes = &top["probes"];
    let Some(entries) = probes.as_object() else {
        return format!(
            "{file}: `probes` must be an object of probe name -> budget, not {}\nhint: the file looks like {SHAPE}",
            kind(probes)
        );
    };
    // Name the probe: the first entry that does not parse on its own.
    for (name, entry) in entries {
        if let Err(pe) = serde_json::from_value::<Budget>(entry.clone()) {
            let pmsg = crate::serde_words::user_words(&pe.to_string());
            let hint = if let Some(field) = unknown_field(&pmsg) {
                if field.contains("ms") || field.contains("budget") || field.contains("sec") || field.contains("limit")
                {
                    format!("hint: a budget is given in seconds as `budget_s` (e.g. 250 ms is \"budget_s\": 0.25), not `{field}`")
                } else {
                    FIELDS_HINT.to_string()
                }
            } else {
                FIELDS_HINT.to_string()
            };
            return format!("{file}: probe `{name}`: {pmsg} {at}\n{hint}");
        }
    }
    // Every entry parses alone: a duplicate probe, or something only the text shows.
    format!("{file}: {msg} {at}\nhint: give each probe once: {SHAPE}")
}

fn unknown_field(msg: &str) -> Option<&str> {
    let rest = msg.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Budgets, String> {
        Budgets::parse(text, Path::new("budgets.json")).map_err(|e| {
            assert!(e.downcast_ref::<UsageError>().is_some(), "not a usage error: {e}");
            e.to_string()
        })
    }

    #[test]
    fn reads_the_repository_file() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../budgets.json");
        let all = Budgets::load(&path).unwrap();
        assert!(all.set_names().any(|n| n == "historian-sql") && all.set_names().any(|n| n == "haystack"));
        let b = all.for_set("historian-sql").unwrap();
        assert!(b.get("about").is_none(), "a haystack budget leaked into historian-sql");
        assert!(all.for_set("haystack").unwrap().get("his-read-1000").is_some());
        assert!(all.for_set("nonesuch").is_none());
        assert!(b.get("latest-all").is_some_and(|x| x.budget_s > 0.0 && x.source == "provisional"));
        assert!(b.names().count() >= 3);
    }

    #[test]
    fn step_rules_are_read_with_their_source_and_default_when_absent() {
        let b = parse(r#"{"step_rules": {"silence": {"limit_s": 2.5, "source": "ops"}}, "probes": {}}"#).unwrap();
        assert_eq!(b.rules.silence.limit_s, 2.5);
        assert_eq!(b.rules.silence.source, "ops");
        assert_eq!(b.rules.ack_latency_p99, StepRules::default().ack_latency_p99);
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../budgets.json");
        let all = Budgets::load(&path).unwrap();
        assert!(all.rules.silence.source.contains("20 s"), "{:?}", all.rules);
        assert_eq!(all.for_set("haystack").unwrap().rules, all.rules);
        let e = parse(r#"{"step_rules": {"silence": {"limit_ms": 5}}, "probes": {}}"#).unwrap_err();
        assert!(e.contains("`step_rules`") && e.contains("limit_ms") && e.contains("hint:"), "{e}");
        let e = parse(r#"{"step_rules": {"silence": {"limit_s": 0}}, "probes": {}}"#).unwrap_err();
        assert!(e.contains("step rule `silence`") && e.contains("greater than 0"), "{e}");
    }

    #[test]
    fn defaults() {
        let b = parse(r##"{"probes": {"a": {"budget_s": 0.5}, "b": {"budget_s": 2, "source": "#178", "note": "n"}}}"##)
            .unwrap();
        assert_eq!(b.get("a").unwrap(), &Budget { budget_s: 0.5, source: "provisional".into(), note: String::new() });
        assert_eq!(b.get("b").unwrap().budget_s, 2.0);
        assert_eq!(b.get("b").unwrap().source, "#178");
        assert!(b.get("c").is_none());
        assert_eq!(parse(r#"{"probes": {}}"#).unwrap().probes.len(), 0);
    }

    #[test]
    fn typo_in_a_probe_field() {
        let e = parse("{\"probes\": {\n  \"latest-all\": {\"budget_ms\": 500}\n}}").unwrap_err();
        assert!(e.starts_with("budgets.json: probe `latest-all`: unknown field `budget_ms`"), "{e}");
        assert!(e.contains("expected one of `budget_s`, `source`, `note`"), "{e}");
        assert!(e.contains("line 2"), "{e}");
        assert!(e.contains("\nhint: a budget is given in seconds as `budget_s`"), "{e}");
        let e = parse(r#"{"probes": {"x": {"budget_s": 1, "sauce": "y"}}}"#).unwrap_err();
        assert!(e.contains("unknown field `sauce`") && e.contains("\nhint: each probe takes `budget_s`"), "{e}");
    }

    #[test]
    fn typo_at_the_top() {
        let e = parse(r#"{"probs": {"x": {"budget_s": 1}}}"#).unwrap_err();
        assert!(e.starts_with("budgets.json: unknown field `probs`, expected `probes`"), "{e}");
        assert!(e.contains("\nhint: the file has one top-level key, `probes`"), "{e}");
        let e = parse(r#"{"probes": {}, "extra": 1}"#).unwrap_err();
        assert!(e.contains("unknown field `extra`"), "{e}");
        let e = parse(r#"{}"#).unwrap_err();
        assert!(e.contains("missing field `probes`") && e.contains("hint:"), "{e}");
        let e = parse(r#"[]"#).unwrap_err();
        assert!(e.contains("top level must be an object"), "{e}");
        let e = parse(r#"{"probes": [1]}"#).unwrap_err();
        assert!(e.contains("`probes` must be an object"), "{e}");
    }

    #[test]
    fn bad_values() {
        for bad in ["0", "-1", "0.0"] {
            let e = parse(&format!(r#"{{"probes": {{"x": {{"budget_s": {bad}}}}}}}"#)).unwrap_err();
            assert!(
                e.contains("probe `x`: `budget_s` is") && e.contains("greater than 0") && e.contains("\nhint:"),
                "{e}"
            );
        }
        let e = parse(r#"{"probes": {"x": {"budget_s": "1"}}}"#).unwrap_err();
        assert!(e.contains("probe `x`: invalid type: string \"1\", expected a number"), "{e}");
        let e = parse(r#"{"probes": {"x": {"source": "y"}}}"#).unwrap_err();
        assert!(e.contains("probe `x`: missing field `budget_s`") && e.contains("hint:"), "{e}");
        let e = parse(r#"{"probes": {"x": {"budget_s": 1e999}}}"#).unwrap_err();
        assert!(e.contains("budgets.json") && e.contains("hint:"), "{e}");
        let e = parse(r#"{"probes": {"x": {"budget_s": 1}, "x": {"budget_s": 2}}}"#).unwrap_err();
        assert!(e.contains("probe `x` is given twice") && e.contains("hint:"), "{e}");
        let e = parse("{\"probes\": ").unwrap_err();
        assert!(e.contains("budgets.json is not valid JSON"), "{e}");
        let e = Budgets::load(Path::new("/nonexistent/budgets.json")).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/budgets.json") && e.contains("hint:"), "{e}");
    }

    #[test]
    fn probe_sets_form() {
        let b = parse(r#"{"probe_sets": {"a": {"x": {"budget_s": 1}}, "b": {"y": {"budget_s": 2}}}}"#).unwrap();
        let a = b.for_set("a").unwrap();
        assert!(a.get("x").is_some() && a.get("y").is_none());
        assert_eq!(b.for_set("b").unwrap().get("y").unwrap().budget_s, 2.0);
        assert!(b.for_set("c").is_none());
        // The flat form applies to any set.
        let flat = parse(r#"{"probes": {"x": {"budget_s": 1}}}"#).unwrap();
        assert!(flat.for_set("anything").unwrap().get("x").is_some());
        let e = parse(r#"{"probe_sets": {"a": {"x": {"budget_ms": 1}}}}"#).unwrap_err();
        assert!(e.contains("probe set `a`") && e.contains("probe `x`") && e.contains("budget_ms"), "{e}");
        let e = parse(r#"{"probe_sets": {}, "probes": {}}"#).unwrap_err();
        assert!(e.contains("unknown field `probes`"), "{e}");
        // Found by the fuzz target: the forms read through a JSON value kept
        // only the last of two equal keys.
        for twice in [
            r#"{"probe_sets": {"a": {"x": {"budget_s": 1}, "x": {"budget_s": 2}}}}"#,
            r#"{"probe_sets": {"a": {}, "a": {"x": {"budget_s": 2}}}}"#,
            r#"{"step_rules": {}, "probes": {"x": {"budget_s": 1}, "x": {"budget_s": 2}}}"#,
        ] {
            let e = parse(twice).unwrap_err();
            assert!(e.contains("is given twice") && e.contains("hint:"), "{e}");
        }
        let e = parse(r#"{"probe_sets": []}"#).unwrap_err();
        assert!(e.contains("`probe_sets` must be an object"), "{e}");
    }
}
