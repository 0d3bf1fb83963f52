//! Fuzz target: `budgets.json` (`budgets.rs`). Any text is read or refused
//! with a usage error in user words and a `hint:`; the budgets a file gives
//! are the budgets read, in every form (flat, `probe_sets`, with
//! `step_rules`); and a probe given twice is refused in every form.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use scalebench::budgets::Budgets;
use scalebench::error::UsageError;

use crate::harness::{assert_user_words, config, corpus, mutated, within};

const DICT: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "null",
    "true",
    "-1",
    "0",
    "1e999",
    "\"budget_s\": ",
    "\"probes\": ",
    "\"probe_sets\": ",
    "\"step_rules\": ",
    "\"limit_s\": ",
    "\"source\": ",
    "\"x\": {\"budget_s\": 1}, ",
];

fn check(text: &str) -> Option<Budgets> {
    let r = within("budgets", text.to_string(), |t| {
        Budgets::parse(t, Path::new("budgets.json"))
            .map_err(|e| (e.downcast_ref::<UsageError>().is_some(), e.to_string()))
    });
    match r {
        Ok(b) => {
            for p in b.probes.values().chain(b.sets.values().flat_map(|s| s.values())) {
                assert!(p.budget_s.is_finite() && p.budget_s > 0.0, "{text:?} → {p:?}");
            }
            Some(b)
        }
        Err((usage, e)) => {
            assert!(usage, "not a usage error: {e}");
            assert!(e.contains("budgets.json") && e.contains("hint:"), "{e}\ninput: {text:?}");
            assert_user_words(&e, text);
            None
        }
    }
}

#[test]
fn corpus_is_read() {
    for (name, text) in corpus("budgets") {
        // `bad-*` seeds are inputs that once got through: each must be refused.
        assert_eq!(check(&text).is_none(), name.starts_with("bad-"), "seed {name}");
    }
}

/// A probe map as JSON text, with `dup` written twice when given.
fn probes_json(probes: &BTreeMap<String, f64>, dup: Option<&str>) -> String {
    let mut parts: Vec<String> = probes.iter().map(|(k, v)| format!("{k:?}: {{\"budget_s\": {v:?}}}")).collect();
    if let Some(d) = dup {
        parts.push(format!("{d:?}: {{\"budget_s\": 7.0}}"));
    }
    format!("{{{}}}", parts.join(", "))
}

/// The file in one of its three forms.
fn file(form: u8, probes: &str) -> String {
    match form % 3 {
        0 => format!("{{\"probes\": {probes}}}"),
        1 => format!("{{\"step_rules\": {{\"silence\": {{\"limit_s\": 3}}}}, \"probes\": {probes}}}"),
        _ => format!("{{\"probe_sets\": {{\"set\": {probes}}}}}"),
    }
}

fn probe_map() -> impl Strategy<Value = BTreeMap<String, f64>> {
    proptest::collection::btree_map("[a-z][a-z0-9-]{0,8}", 0.001f64..1e6, 1..5)
}

proptest! {
    #![proptest_config(config(2))]

    #[test]
    fn mutated_files_are_read_or_refused_in_user_words(text in mutated(corpus("budgets").into_iter().map(|(_, s)| s).collect(), DICT)) {
        check(&text);
    }

    #[test]
    fn budgets_given_are_budgets_read(form in 0u8..3, probes in probe_map()) {
        let b = check(&file(form, &probes_json(&probes, None))).expect("a valid file");
        let got = if form % 3 == 2 { b.for_set("set").expect("its set") } else { b };
        let read: BTreeMap<String, f64> = got.probes.iter().map(|(k, p)| (k.clone(), p.budget_s)).collect();
        prop_assert_eq!(read, probes);
    }

    #[test]
    fn a_probe_given_twice_is_refused_in_every_form(form in 0u8..3, probes in probe_map()) {
        let dup = probes.keys().next().unwrap().clone();
        let text = file(form, &probes_json(&probes, Some(&dup)));
        prop_assert!(check(&text).is_none(), "accepted: {}", text);
    }
}
